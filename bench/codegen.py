"""Forward+backward time of the generated conv2d-equivalent module against nn.Conv2d (CPU or CUDA).

    PYTHONPATH=. python bench/codegen.py [--batch 32] [--repeats 15] [--warmup 3] [--threads N] [--skip-model]
                                         [--device cpu|cuda]

1. The ResNet-18 (CIFAR) 3x3 stride-1 layer shapes (64x32², 128x16², 256x8², 512x4², C_in = C_out): the
   operator reached by walking the space to the conv-equivalent (``syno_automl.known.conv2d``), built by
   ``op.to_module`` with nn.Conv2d's weight copied in, against that nn.Conv2d (bias-free, padding 1).
2. A whole CIFAR ResNet-18 from lightning_modules with every substitutable 3x3 conv replaced by that operator
   (``substitute`` + ``sub.apply``, weights copied, so both models compute the same function), against the
   original model.

One step = forward + ``loss.backward()`` (input and weight gradients). Both sides are timed in the same run,
alternating, after warm-up; the figures are medians over the repeats; ratio = generated / torch. On CUDA each
step is synchronized before the clock stops (TF32 left at torch's default for both sides). Nothing is
asserted: this prints figures.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from syno_automl import OperatorSpace  # noqa: E402
from syno_automl.placeholder import substitute  # noqa: E402

LAYERS = [(64, 32), (128, 16), (256, 8), (512, 4)]  # (channels, spatial size) of ResNet-18's 3x3 layers
PRIMARY = ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"]
COEFFICIENTS = ["k=3: 2", "s=2: 2"]
DEVICE = torch.device("cpu")


def conv2d_operator(space: OperatorSpace):
    """syno_automl.known.conv2d if present, else the same walk from the root done here."""
    try:
        from syno_automl.known import conv2d
    except ImportError:
        conv2d = None
    if conv2d is not None:
        return conv2d(space)

    def norm(text: str) -> str:
        import re
        return re.sub(r"\[([^\]]*)\]", lambda m: "[" + ", ".join(sorted(s.strip() for s in m.group(1).split(",")))
                      + "]", text.strip())

    steps = ["REDUCE C_in", "REDUCE k", "REDUCE k", "CONTRACTION share [C_in, k, k] outer [C_out]",
             "UNFOLD H -> [H, k]", "UNFOLD W -> [W, k]"]  # bottom-up, the order known.conv2d walks
    node = space.root()
    for want in steps:
        node = next(c for c in node.children() if not c.is_final and norm(c.description) == norm(want))
    return next(c for c in node.children() if c.is_final).to_operator()


def time_steps(fns: dict, repeats: int, warmup: int) -> dict:
    """Median seconds per call of each fn, calls interleaved (fairer on a shared machine)."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            if DEVICE.type == "cuda":
                torch.cuda.synchronize()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(v) for name, v in samples.items()}


def fwd_bwd(module: nn.Module, x: torch.Tensor, loss=None):
    def step():
        module.zero_grad(set_to_none=True)
        x.grad = None
        out = module(x)
        (loss(out) if loss else out.square().mean()).backward()
    return step


def bench_layers(batch: int, repeats: int, warmup: int) -> None:
    print(f"conv2d-equivalent operator vs nn.Conv2d, forward+backward, batch {batch}, on {DEVICE}, "
          f"{torch.get_num_threads()} threads (median of {repeats}, {warmup} warm-up)")
    print(f"{'layer':>16} {'nn.Conv2d ms':>13} {'generated ms':>13} {'ratio':>7} {'max |diff|':>11}")
    for channels, size in LAYERS:
        mapping = {"N": batch, "C_in": channels, "C_out": channels, "H": size, "W": size}
        space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", PRIMARY, COEFFICIENTS, [mapping],
                              max_depth=8, min_unfold_ratio=1.0)
        op = conv2d_operator(space)
        torch.manual_seed(0)
        conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        gen = op.to_module(0)
        with torch.no_grad():
            (w,) = list(gen.parameters())
            w.copy_(conv.weight)
        conv, gen = conv.to(DEVICE), gen.to(DEVICE)
        x = torch.randn(batch, channels, size, size, device=DEVICE, requires_grad=True)
        with torch.no_grad():
            diff = (gen(x) - conv(x)).abs().max().item()
        t = time_steps({"torch": fwd_bwd(conv, x), "gen": fwd_bwd(gen, x)}, repeats, warmup)
        print(f"{f'{channels}x{size}x{size}':>16} {t['torch'] * 1e3:13.2f} {t['gen'] * 1e3:13.2f} "
              f"{t['gen'] / t['torch']:7.2f} {diff:11.2e}")


def bench_resnet18(batch: int, repeats: int, warmup: int) -> None:
    from lightning_modules.models import build_model

    torch.manual_seed(0)
    original = build_model("resnet18", num_classes=10, in_channels=3)
    model = copy.deepcopy(original)
    x = torch.randn(batch, 3, 32, 32)
    target = torch.arange(batch) % 10
    sub = substitute(model, nn.Conv2d, x)
    op = conv2d_operator(sub.space)
    modules = sub.apply(op)
    with torch.no_grad():
        for (_, p), module in zip(sub.placeholders, modules):
            (w,) = list(module.parameters())
            w.copy_(p.referred_layer.weight)
    original, model, x, target = original.to(DEVICE), model.to(DEVICE), x.to(DEVICE), target.to(DEVICE)
    original.train()
    model.train()
    x.requires_grad_(False)
    with torch.no_grad():
        diff = (model.eval()(x) - original.eval()(x)).abs().max().item()
    model.train()
    original.train()
    loss = lambda out: F.cross_entropy(out, target)  # noqa: E731
    t = time_steps({"torch": fwd_bwd(original, x, loss), "gen": fwd_bwd(model, x, loss)},
                   max(3, repeats // 3), max(1, warmup // 2))
    print(f"\nResNet-18 (CIFAR, 32x32), {len(sub.placeholders)} 3x3 convs replaced "
          f"({len(sub.skipped)} strided convs kept), forward+backward, batch {batch}")
    print(f"{'model':>16} {'nn.Conv2d ms':>13} {'generated ms':>13} {'ratio':>7} {'max |diff|':>11}")
    print(f"{'resnet18':>16} {t['torch'] * 1e3:13.1f} {t['gen'] * 1e3:13.1f} {t['gen'] / t['torch']:7.2f} "
          f"{diff:11.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--skip-model", action="store_true", help="only the per-layer figures")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    global DEVICE
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    DEVICE = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}")
    bench_layers(args.batch, args.repeats, args.warmup)
    if not args.skip_model:
        bench_resnet18(args.batch, args.repeats, args.warmup)


if __name__ == "__main__":
    main()
