"""``bench/gpu_window.py --prepare DIR``: the named operators exported on the CPU for the GPU machine, which has no
native build (this module imports syno_automl; the GPU side reads only what it writes).

For each operator and each conv size the window substitutes (ResNet-18/34's stride-1 3x3 convs at 224² and at 32²,
and the dry run's tiny sizes), one standalone torch file (``op.to_source(mapping)``) and, where
``syno_automl.codegen.triton.triton_source`` exists and supports the operator, one standalone Triton file; and
``manifest.json``: per operator its hash, role, text, the space's spec and per size the mapping, the files, the
class names, FLOPs and parameters per sample (FLOPs at N = 1), or why there is no Triton file.

Operators: the product's verdict on the default CPU search (``VERDICT_OP``, replayed from ``--verdict-json`` or
from the committed manifest), the opening's grouped conv (5-D weight), and the ``--resnet-ops`` in-budget operators of
the shared H200 data (``gpu_step_times_h200.json``: ResNet-18 CIFAR, FLOPs 0.5x, cost budget on) that ran fastest
in eager fp32 inference there.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

VERDICT_OP = "c740ab233de2e0ec"
GROUPED_OP = "ad6c0141110ce7ad"
SPEC: dict[str, Any] = {"input_shape": "[N, C_in, H, W]", "output_shape": "[N, C_out, H, W]",
        "primary": ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], "coefficients": ["k=3: 2", "s=2: 2"]}
# (channels, spatial size) of the stride-1 3x3 convs: ResNet-18/34 at 224² (ImageNet stem), at 32² (CIFAR stem), and
# the dry run's width-1/8 models at 64² (ImageNet stem) and 16² (CIFAR stem): the same four sizes
SIZES = {"224": [(64, 56), (128, 28), (256, 14), (512, 7)], "32": [(64, 32), (128, 16), (256, 8), (512, 4)],
         "dry": [(8, 16), (16, 8), (32, 4), (64, 2)]}
DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "gpu_step_times_h200.json"


def size_key(channels: int, size: int) -> str:
    return f"{channels}x{size}"


def _space(mappings: list[dict[str, int]]) -> Any:
    from syno_automl import OperatorSpace

    # no budgets and windows over any size: the space only replays the named operators at every size
    return OperatorSpace(**SPEC, mappings=mappings, max_depth=10, min_unfold_ratio=0.5)


def _mappings() -> list[dict[str, int]]:
    return [{"N": 1, "C_in": c, "C_out": c, "H": s, "W": s, "k": 3} for group in SIZES.values() for c, s in group]


def _chosen(space: Any, resnet_ops: int, data: Path) -> list[tuple[str, Any]]:
    """(role, operator) of the ResNet-space operators: in budget, those the Triton backend can run first, then by
    their eager inference ratio on the H200."""
    from syno_automl.space import Operator

    rows = [r for r in json.loads(data.read_text())["rows"] if r["budget"] == "on"]
    ops = [(r, Operator.from_json(space, r["json"])) for r in rows]
    ops.sort(key=lambda ro: (_triton(ro[1], 0, "T")[0] is None, ro[0]["ratio"]["infer_fp32"], ro[1].hash))
    return [(f"ResNet-18 space, in budget, H200 eager infer {r['ratio']['infer_fp32']:.2f}x", op)
            for r, op in ops[:resnet_ops]]


def _triton(op: Any, index: int, cls: str) -> tuple[str | None, str]:
    """(source, why not): the Triton backend's standalone file where it exists and supports the operator."""
    try:
        from syno_automl.codegen.triton import triton_source, triton_support
    except ImportError as e:
        return None, f"not exported: no Triton backend ({e})"
    support = triton_support(op.program(index))
    if not support.ok:
        return None, f"not exported: {support.code} {support.reason}".strip()
    return triton_source(op, index, class_name=cls), ""


def _export_op(text: str, role: str, out: Path) -> dict[str, Any]:
    """The operator (its JSON ``text``) replayed and exported at every size where it exists (an operator that
    splits H by 2 does not exist at 7x7: the window keeps those convs)."""
    from syno_automl.errors import ValuationError
    from syno_automl.space import Operator

    sizes: dict[str, Any] = {}
    missing: dict[str, str] = {}
    op = None
    for mapping in _mappings():
        key = size_key(mapping["C_in"], mapping["H"])
        try:
            op = Operator.from_json(_space([mapping]), text)
        except ValuationError as e:
            missing[key] = str(e)
            continue
        stem = f"op_{op.hash}_{key}"
        (out / f"{stem}.py").write_text(op.to_source(0))
        program = op.program(0)
        triton_src, why = _triton(op, 0, "SynoTriton")
        if triton_src is not None:
            (out / f"{stem}_triton.py").write_text(triton_src)
        sizes[key] = {"mapping": mapping, "file": f"{stem}.py", "class": f"Syno_{op.hash}",
                      "triton_file": f"{stem}_triton.py" if triton_src else None, "triton_class": "SynoTriton",
                      "triton_note": why, "flops_per_sample": float(program["flops"]),
                      "params": int(sum(math.prod(w["shape"]) for w in program["weights"])),
                      "weights": len(program["weights"])}
    assert op is not None, f"the operator exists at none of the sizes: {missing}"
    return {"hash": op.hash, "role": role, "text": str(op), "json": op.to_json(), "sizes": sizes, "missing": missing}


def prepare(out: Path, verdict_json: str | None = None, resnet_ops: int = 3, data: Path = DATA) -> dict[str, Any]:
    """Writes the operator files and ``manifest.json`` into ``out`` (made if missing); returns the manifest."""
    from syno_automl import known

    out.mkdir(parents=True, exist_ok=True)
    if verdict_json is None and (out / "manifest.json").exists():  # the verdict as committed before
        old = json.loads((out / "manifest.json").read_text())
        kept = [o for o in old["operators"] if o["hash"] == VERDICT_OP]
        if kept:
            verdict_json = str(out / "verdict.json")
            Path(verdict_json).write_text(kept[0]["json"])
    for stale in out.glob("op_*.py"):
        stale.unlink()
    space = _space([{"N": 1, "C_in": 64, "C_out": 64, "H": 32, "W": 32, "k": 3}])
    operators = []  # in the order the window times them: the verdict first, the grouped conv last
    if verdict_json:
        operators.append(_export_op(Path(verdict_json).read_text(), "verdict of the default CPU search", out))
    for role, op in _chosen(space, resnet_ops, data):
        operators.append(_export_op(op.to_json(), role, out))
    grouped = known.grouped_conv2d(space, "s").to_json()
    operators.append(_export_op(grouped, "grouped conv, s = 2 groups (the opening)", out))
    manifest = {"format": "gpu-window-ops/1", "spec": SPEC, "sizes": SIZES, "operators": operators}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest
