"""The prepared GPU script (issue 45 item 5): one call on the GPU machine, standalone (torch, Triton and the files in
``bench/``: no native build, optuna or mlflow), every step capped and writing JSON lines to ``--out`` as they land.

Steps (``--steps env,e2e224,cifar32,layers,train``; each in a child process killed at its cap, so a hung compile
costs one step, not the window):

1. ``env``: versions, device, clocks; quick roofs (bf16 matmul TFLOP/s, copy GB/s).
2. ``e2e224``: batch-1 224² ResNet-18/34 (ImageNet stem) with each named operator in place of the stride-1 3x3 convs,
   both sides under the strongest baseline (``strongest_baseline``: channels-last, cudnn.benchmark, bf16,
   ``torch.compile(mode="max-autotune")`` with its CUDA graphs).
3. ``cifar32``: ResNet-18 at 32², batch 128 and 256: the named operators (torch lowering and Triton kernels)
   against the strongest baseline, and the baseline alone under each setting (layout, cudnn.benchmark, dtype, eager /
   compile default / max-autotune).
4. ``layers``: one conv layer at batch 1, 64 and 256: cuDNN dense, grouped, depthwise + pointwise, the named
   operators eager / compiled / Triton, each against the dense conv.
5. ``train``: a bf16 training step (channels-last, SGD) of ResNet-18 32², batch 128, eager, baseline vs operators.

Timing (``_gpu_window_timing``): blocks of calls timed with CUDA events after a synchronize, the candidates interleaved
round by round in alternating order, the speedup the geometric mean over paired rounds with its 95 % t-interval,
and a control (the baseline against itself) in every comparison. Every time is checked against the roofline floor
(FLOPs and bytes known per model and layer): a time below it is flagged ``timing_bug``.

Caches: TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR live under a work folder, packed into ``--out``/cache.tar.gz at
the end (split in 15 MiB parts when larger: the device tool brings back 8 files of 16 MiB at most); ``--cache DIR``
unpacks such files first, so a second window skips the compiles the first did.

    python bench/gpu_window.py --prepare bench/gpu_window_ops [--verdict-json op.json]   # on the CPU: export operators
    python bench/gpu_window.py --dry-run --out /tmp/w        # every step on the CPU at tiny sizes (CI)
    PYTHONUNBUFFERED=1 python3 bench/gpu_window.py --out $OUT --cache .gpu_cache   # on the GPU machine

The device tool's call (README, "On a GPU"): run(command="PYTHONUNBUFFERED=1 python3 bench/gpu_window.py --out $OUT
--cache .gpu_cache", carry=[".gpu_cache"], timeout_s=590), then copy the files back into .gpu_cache/ for the next.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
STEPS = ("env", "e2e224", "cifar32", "layers", "train")
CAPS = {"env": 40, "e2e224": 200, "cifar32": 150, "layers": 90, "train": 60}  # seconds; 540 in all
PART = 15 * 2 ** 20


@dataclass(frozen=True)
class Sizes:
    """What the steps run at: the real window or the dry run's tiny CPU sizes (the exported ``dry`` sizes)."""

    width: int = 64
    e2e_size: int = 224
    cifar_size: int = 32
    cifar_batches: tuple[int, ...] = (128, 256)
    layers: tuple[tuple[int, int], ...] = ((64, 32), (256, 8), (64, 56))
    layer_batches: tuple[int, ...] = (1, 64, 256)
    train_batch: int = 128
    matmul: int = 8192
    copy_mib: int = 1024
    rounds: int = 10
    block_s: float = 0.05
    warmup: int = 3
    compile: bool = True


DRY = Sizes(width=8, e2e_size=64, cifar_size=16, cifar_batches=(2,), layers=((8, 16), (32, 4)), layer_batches=(1, 2),
            train_batch=2, matmul=64, copy_mib=1, rounds=2, block_s=0.001, warmup=1, compile=False)


class Writer:
    """JSON lines into ``<out>/window.jsonl``, flushed as each lands (a step cut at its cap keeps its rows)."""

    def __init__(self, out: Path, step: str) -> None:
        self.path, self.step, self.t0 = out / "window.jsonl", step, time.time()

    def __call__(self, kind: str, **row: Any) -> None:
        line = {"step": self.step, "kind": kind, "t": round(time.time() - self.t0, 3), **row}
        with self.path.open("a") as f:
            f.write(json.dumps(line, default=str) + "\n")
        print(json.dumps(line, default=str), flush=True)


# ---------------------------------------------------------------------------------------------------- the steps
def step_env(ctx: Context) -> None:
    import torch

    w, dev = ctx.write, ctx.device
    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
                            "device": str(dev), "cudnn": torch.backends.cudnn.version(),
                            "dry_run": ctx.dry, "caches": {k: os.environ.get(k) for k in _CACHE_VARS}}
    try:
        import triton
        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        info.update(name=p.name, capability=f"{p.major}.{p.minor}", sms=p.multi_processor_count,
                    memory_gib=round(p.total_memory / 2 ** 30, 1))
        info["clocks"] = _nvidia_smi("clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu")
    w("env", **info)
    w("roof", **_measure_roofs(ctx))


def _nvidia_smi(fields: str) -> str | None:
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv"], capture_output=True,
                              text=True, timeout=10)
        return done.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _measure_roofs(ctx: Context) -> dict[str, float]:
    import torch
    from _gpu_window_timing import block_ms

    dev, n = ctx.device, ctx.sizes.matmul
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
    mm = min(block_ms(lambda: a @ b, 10, dev) for _ in range(3))
    src = torch.empty(ctx.sizes.copy_mib * 2 ** 20, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    cp = min(block_ms(lambda: dst.copy_(src), 10, dev) for _ in range(3))
    return {"matmul_n": n, "matmul_dtype": str(dtype), "matmul_tflops": 2 * n ** 3 / (mm * 1e-3) / 1e12,
            "copy_bytes": 2 * src.numel(), "copy_gbs": 2 * src.numel() / (cp * 1e-3) / 1e9}


def _compare(ctx: Context, label: dict[str, Any], calls: dict[str, Callable[[], Any]],
             costs: dict[str, tuple[float, float]]) -> None:
    """Times ``calls`` interleaved (the first is the baseline; a control, the baseline again, is added) and writes
    one ``ratio`` row per candidate and one for the control, each with both times and the roofline check. A call
    that fails its first run (a compile error, say) gets an ``error`` row and is left out."""
    from _gpu_window_timing import interleaved, ratio, summary

    for name in list(calls):
        try:
            calls[name]()
        except Exception as e:  # noqa: BLE001 (one candidate's failure must not cost the others their rows)
            ctx.write("error", **label, candidate=name, error=f"{type(e).__name__}: {e}"[:800])
            del calls[name]
            if not calls or name == next(iter(costs)):
                return
    names = list(calls)
    base = names[0]
    timed = interleaved({**calls, "control": calls[base]}, ctx.device, ctx.sizes.rounds, ctx.sizes.block_s,
                        ctx.sizes.warmup)
    for name in names[1:] + ["control"]:
        cost = costs[base if name == "control" else name]
        got = summary(timed[name])
        ctx.write("ratio", **label, candidate=name, baseline=base, baseline_ms=summary(timed[base])["ms"],
                  **got, **ratio(timed[base], timed[name]), **ctx.roofs.check(got["ms_min"], *cost))


def step_e2e224(ctx: Context) -> None:
    """Per operator (the manifest's order: the verdict first), ResNet-18 then ResNet-34 at batch 1, each against
    its baseline (compiled once per depth), so that every compile that lands gives a row."""
    import torch
    from _gpu_window_models import cost, resnet, substituted
    from _gpu_window_timing import prepared, strongest_baseline

    base = ctx.adapt(strongest_baseline(1))
    torch.manual_seed(0)
    x = torch.randn(1, 3, ctx.sizes.e2e_size, ctx.sizes.e2e_size)
    baselines: dict[int, tuple[Callable[[], Any], tuple[float, float]]] = {}
    for entry in ctx.window_ops():
        for depth in (18, 34):
            if ctx.expired():
                return ctx.write("skipped", why="cap reached", model=f"resnet{depth}", op=entry["hash"])
            if depth not in baselines:
                model = resnet(depth, "imagenet", ctx.sizes.width)
                call, xin = prepared(model, x, base, ctx.device, ctx.sizes.compile)
                baselines[depth] = call, cost(model, xin)
            with ctx.guarded(model=f"resnet{depth}", op=entry["hash"]):
                cand, counts = substituted(resnet(depth, "imagenet", ctx.sizes.width), x, ctx.ops_dir, entry)
                call, xin = prepared(cand, x, base, ctx.device, ctx.sizes.compile)
                calls = {"baseline": baselines[depth][0], entry["hash"]: call}
                costs = {"baseline": baselines[depth][1], entry["hash"]: cost(cand, xin)}
                _compare(ctx, {"model": f"resnet{depth}", "size": ctx.sizes.e2e_size, "batch": 1, "op": entry["hash"],
                               **counts, "conditions": base.conditions()}, calls, costs)


def _cifar_settings() -> list[Any]:
    from _gpu_window_timing import Baseline

    eager = [Baseline(cl, bench, dt, None)
             for cl in (False, True) for bench in (False, True) for dt in ("fp32", "bf16")]
    return eager + [Baseline(False, False, "bf16", "default"), Baseline(True, True, "bf16", "default"),
                    Baseline(True, True, "fp32", "max-autotune"), Baseline(True, True, "bf16", "max-autotune")]


def step_cifar32(ctx: Context) -> None:
    """Per batch: each operator (torch lowering and Triton kernels) against the strongest baseline, one comparison
    per operator; then the baseline alone under each setting."""
    import torch
    from _gpu_window_models import cost, resnet, substituted
    from _gpu_window_timing import interleaved, prepared, strongest_baseline, summary

    s = ctx.sizes
    for batch in s.cifar_batches:
        base = ctx.adapt(strongest_baseline(batch))
        torch.manual_seed(0)
        x = torch.randn(batch, 3, s.cifar_size, s.cifar_size)
        model = resnet(18, "cifar", s.width)
        base_call, xin = prepared(model, x, base, ctx.device, s.compile)
        base_cost = cost(model, xin)
        for entry in ctx.window_ops():
            if ctx.expired():
                return ctx.write("skipped", why="cap reached", batch=batch, op=entry["hash"])
            calls, costs, counts = {"baseline": base_call}, {"baseline": base_cost}, {}
            for backend in ("torch", "triton"):
                with ctx.guarded(batch=batch, op=entry["hash"], candidate=backend):
                    cand, counts[backend] = substituted(resnet(18, "cifar", s.width), x, ctx.ops_dir, entry,
                                                        backend)
                    if counts[backend]["replaced"] == 0:
                        ctx.write("skipped", why=f"{backend}: not exported", op=entry["hash"], batch=batch)
                        continue
                    name = f"{entry['hash']}.{backend}"
                    calls[name], xin = prepared(cand, x, base, ctx.device, s.compile)
                    costs[name] = cost(cand, xin)
            _compare(ctx, {"model": "resnet18", "size": s.cifar_size, "batch": batch, "op": entry["hash"],
                           "layers": counts, "conditions": base.conditions()}, calls, costs)
        for setting in _cifar_settings():
            if ctx.expired():
                return ctx.write("skipped", why="cap reached", batch=batch, setting=setting.conditions())
            if setting.compile_mode is not None and not s.compile:
                ctx.write("skipped", why="dry run: not compiled", batch=batch, setting=setting.conditions())
                continue
            model = resnet(18, "cifar", s.width)
            call, xin = prepared(model, x, ctx.adapt(setting), ctx.device, s.compile)
            got = summary(interleaved({"b": call}, ctx.device, s.rounds, s.block_s, s.warmup)["b"])
            ctx.write("setting", model="resnet18", size=s.cifar_size, batch=batch, setting=setting.conditions(),
                      **got, **ctx.roofs.check(got["ms_min"], *cost(model, xin)))


def _layer_impls(ctx: Context, channels: int, size: int) -> dict[str, tuple[Any, float]]:
    """name -> (module, FLOPs per sample) of the layer table's rows for a ``channels`` x ``size``² conv layer."""
    from _gpu_window_models import operator_module
    from torch import nn

    k = channels * size * size * 2.0 * 9
    impls: dict[str, tuple[Any, float]] = {
        "dense": (nn.Conv2d(channels, channels, 3, padding=1, bias=False), k * channels),
        "grouped2": (nn.Conv2d(channels, channels, 3, padding=1, groups=2, bias=False), k * channels / 2),
        "dw+pw": (nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False),
                                nn.Conv2d(channels, channels, 1, bias=False)), k + 2.0 * channels ** 2 * size * size)}
    key = f"{channels}x{size}"
    for entry in ctx.window_ops():
        for backend in ("torch", "triton"):
            m = operator_module(ctx.ops_dir, entry, key, backend)
            if m is None:
                ctx.write("skipped", why=f"{backend}: not exported", op=entry["hash"], layer=key)
                continue
            flops = entry["sizes"][key]["flops_per_sample"]
            impls[f"{entry['hash']}.{'eager' if backend == 'torch' else 'triton'}"] = (m, flops)
            if backend == "torch" and ctx.sizes.compile:
                impls[f"{entry['hash']}.compiled"] = (m, flops)
    return impls


def step_layers(ctx: Context) -> None:
    import torch
    from _gpu_window_models import OpLayer
    from _gpu_window_timing import Baseline, prepared

    for channels, size in ctx.sizes.layers:
        for batch in ctx.sizes.layer_batches:
            if ctx.expired():
                return ctx.write("skipped", why="cap reached", layer=f"{channels}x{size}", batch=batch)
            x = torch.randn(batch, channels, size, size)
            calls, costs = {}, {}
            for name, (module, flops) in _layer_impls(ctx, channels, size).items():
                mode = "default" if name.endswith(".compiled") else None
                b = ctx.adapt(Baseline(True, True, "bf16", mode))
                calls[name], xin = prepared(OpLayer(module, channels, False, 0.0), x, b, ctx.device, ctx.sizes.compile)
                weights = sum(p.numel() for p in module.parameters())
                costs[name] = (flops * batch, float(xin.element_size() * (2 * xin.numel() + weights)))
            _compare(ctx, {"layer": f"{channels}x{size}", "batch": batch,
                           "conditions": {**Baseline(True, True, "bf16", None).conditions(),
                                          "compiled_rows": "torch.compile default mode"}}, calls, costs)


def step_train(ctx: Context) -> None:
    import torch
    from _gpu_window_models import cost, resnet, substituted
    from _gpu_window_timing import Baseline, apply_settings

    s, dev = ctx.sizes, ctx.device
    b = ctx.adapt(Baseline(True, True, "bf16", None))
    apply_settings(b)
    torch.manual_seed(0)
    x = torch.randn(s.train_batch, 3, s.cifar_size, s.cifar_size)
    y = torch.randint(0, 10, (s.train_batch,), device=dev)
    xin = x.to(dev).contiguous(memory_format=torch.channels_last)
    models = {"baseline": resnet(18, "cifar", s.width)}
    for entry in ctx.window_ops():
        models[entry["hash"]] = substituted(resnet(18, "cifar", s.width), x, ctx.ops_dir, entry)[0]
    calls, costs = {}, {}
    for name, model in models.items():
        model = model.to(dev, memory_format=torch.channels_last).train()
        calls[name] = _train_step(model, xin, y, dev)
        flops, nbytes = cost(model, xin)
        costs[name] = (3 * flops, 3 * nbytes)
    if ctx.expired():
        return ctx.write("skipped", why="cap reached")
    _compare(ctx, {"model": "resnet18", "size": s.cifar_size, "batch": s.train_batch,
                   "conditions": {**b.conditions(), "autocast": "bf16" if dev.type == "cuda" else "off",
                                  "optimizer": "SGD, one foreach add"}},
             calls, costs)


def _train_step(model: Any, x: Any, y: Any, dev: Any) -> Callable[[], Any]:
    """Forward under bf16 autocast (on a GPU), backward, and plain SGD as one foreach add (torch.optim's SGD
    imports torch._dynamo: seconds in every dry run)."""
    import torch
    import torch.nn.functional as F

    params = [p for p in model.parameters() if p.requires_grad]

    def call() -> Any:
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            loss = F.cross_entropy(model(x), y)
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            torch._foreach_add_(params, [p.grad for p in params], alpha=-0.01)
        return loss

    return call


STEP_FUNCS = {"env": step_env, "e2e224": step_e2e224, "cifar32": step_cifar32, "layers": step_layers,
              "train": step_train}


# ---------------------------------------------------------------------------------------------------- the frame
_CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


@dataclass
class Context:
    """What a step reads: where to write, the device, the sizes, the operators, its deadline, the roofs."""

    out: Path
    step: str
    dry: bool
    ops_dir: Path
    only_ops: tuple[str, ...]
    cap: float

    def __post_init__(self) -> None:
        import torch

        self.write = Writer(self.out, self.step)
        self.device = torch.device("cuda" if torch.cuda.is_available() and not self.dry else "cpu")
        self.sizes = DRY if self.dry else Sizes()
        if self.dry:
            torch.set_num_threads(1)  # CI's few cores: threads would only wait for each other
        self._end = time.monotonic() + 0.8 * self.cap  # leave the last fifth for the rows in flight
        self._roofs: Any = None

    def adapt(self, b: Any) -> Any:
        """``b`` as the dry run runs it: eager fp32 (a CPU's bf16 convolutions are slow, and compiling takes
        minutes); the rows' conditions say so."""
        return replace(b, compile_mode=None, dtype="fp32") if self.dry else b

    @contextlib.contextmanager
    def guarded(self, **label: Any) -> Iterator[None]:
        """Runs the block; an exception becomes an ``error`` row, and the step goes on with its next rows."""
        try:
            yield
        except Exception as e:  # noqa: BLE001 (one candidate's failure must not cost the step its other rows)
            self.write("error", **label, error=f"{type(e).__name__}: {e}"[:800])

    def expired(self) -> bool:
        return time.monotonic() > self._end

    def window_ops(self) -> list[dict[str, Any]]:
        from _gpu_window_models import manifest

        ops = manifest(self.ops_dir)["operators"]
        return [o for o in ops if not self.only_ops or o["hash"] in self.only_ops]

    @property
    def roofs(self) -> Any:
        """The ceilings, from this window's ``roof`` row when the env step ran, else measured now."""
        from _gpu_window_timing import roofs_for

        if self._roofs is None:
            rows = [json.loads(line) for line in (self.out / "window.jsonl").read_text().splitlines()
                    if '"kind": "roof"' in line] if (self.out / "window.jsonl").exists() else []
            roof = rows[-1] if rows else _measure_roofs(self)
            self._roofs = roofs_for(self.device, roof["matmul_tflops"], roof["copy_gbs"])
        return self._roofs


def _caches(work: Path, cache_in: Path | None) -> dict[str, str]:
    """The cache folders (under ``work``), filled from ``cache_in``'s cache.tar.gz[.partN] when given."""
    env = {var: str(work / var.split("_")[0].lower()) for var in _CACHE_VARS}
    parts = sorted(cache_in.glob("cache.tar.gz*")) if cache_in and cache_in.is_dir() else []
    if parts:
        joined = work / "in.tar.gz"
        with joined.open("wb") as f:
            for p in parts:
                f.write(p.read_bytes())
        with tarfile.open(joined) as tar:
            tar.extractall(work, filter="data")
        joined.unlink()
    return env


def _pack(work: Path, out: Path) -> list[str]:
    """The caches as ``out``/cache.tar.gz, split into 15 MiB parts when larger."""
    packed = out / "cache.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        for var in _CACHE_VARS:
            folder = work / var.split("_")[0].lower()
            if folder.exists():
                tar.add(folder, arcname=folder.name)
    data = packed.read_bytes()
    if len(data) <= PART:
        return [packed.name]
    packed.unlink()
    names = []
    for i in range(0, len(data), PART):
        (out / f"cache.tar.gz.part{i // PART}").write_bytes(data[i:i + PART])
        names.append(f"cache.tar.gz.part{i // PART}")
    return names


def _child(args: argparse.Namespace, step: str, cap: float) -> None:
    """One step, in a forked child whose output goes to ``window.log``."""
    log = open(Path(args.out) / "window.log", "a", buffering=1)  # noqa: SIM115 (the child's whole life)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    ctx = Context(Path(args.out), step, args.dry_run, Path(args.ops_dir),
                  tuple(args.ops.split(",")) if args.ops else (), cap)
    STEP_FUNCS[step](ctx)


def run_window(args: argparse.Namespace) -> int:
    """Each step in a forked child (torch imported once, before: CUDA is first touched in the child) killed at
    its cap; the caches packed at the end."""
    import multiprocessing

    import torch  # noqa: F401  (imported once here, inherited by every child)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work or out / "work")
    work.mkdir(parents=True, exist_ok=True)
    os.environ.update(_caches(work, Path(args.cache) if args.cache else None))
    write = Writer(out, "window")
    failed = 0
    for step in args.steps.split(","):
        cap = CAPS[step] * args.cap_scale
        started = time.time()
        child = multiprocessing.get_context("fork").Process(target=_child, args=(args, step, cap))
        child.start()
        child.join(cap)
        if child.is_alive():
            child.kill()
            child.join()
            kind, rc = "step_timeout", None
        else:
            rc = child.exitcode
            kind = "step_done" if rc == 0 else "step_error"
        failed += kind != "step_done"
        write(kind, name=step, seconds=round(time.time() - started, 1), cap=cap, rc=rc)
    if not args.no_pack:
        write("cache", files=_pack(work, out))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu_window_out"), help="results folder ($OUT)")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    ap.add_argument("--dry-run", action="store_true", help="every step on the CPU at tiny sizes, not compiled")
    ap.add_argument("--cache", help="a folder with a previous window's cache.tar.gz[.partN], unpacked first")
    ap.add_argument("--work", help="where the caches live while the window runs (default OUT/work)")
    ap.add_argument("--no-pack", action="store_true", help="do not pack the caches into OUT")
    ap.add_argument("--ops-dir", default=str(HERE / "gpu_window_ops"), help="the exported operators")
    ap.add_argument("--ops", help="comma-separated operator hashes to time (default: all in the manifest)")
    ap.add_argument("--cap-scale", type=float, default=1.0, help="multiplies every step's cap (seconds)")
    ap.add_argument("--prepare", metavar="DIR", help="on the CPU: export the named operators into DIR and stop")
    ap.add_argument("--verdict-json", help="with --prepare: the default search's verdict operator's JSON")
    ap.add_argument("--resnet-ops", type=int, default=3, help="with --prepare: how many ResNet-space operators")
    args = ap.parse_args(argv)
    if args.prepare:
        from _gpu_window_prepare import prepare

        made = prepare(Path(args.prepare), args.verdict_json, args.resnet_ops)
        print(f"exported {len(made['operators'])} operators into {args.prepare}")
        return 0
    unknown = [s for s in args.steps.split(",") if s not in STEPS]
    if unknown:
        ap.error(f"unknown steps {unknown} (of {', '.join(STEPS)})")
    return run_window(args)


if __name__ == "__main__":
    sys.exit(main())
