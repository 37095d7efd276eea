"""The Triton backend (syno_automl.codegen.triton*, issue 45 item 1) on the CPU.

Kernels run in Triton's interpreter (``TRITON_INTERPRET=1``) and are compiled ahead of time for sm_80 / sm_90 in
child processes (tests/_triton_checks.py says why): agreement with the torch lowering (forward and gradients) on
sampled operators, the known convolutions against ``F.conv2d``, and compilation with its register spills. The
rest runs here: the index table, which programs are supported, the exported file's interface, fallbacks.
"""
from __future__ import annotations

import ast
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _syno_helpers import random_spec_space

from syno_automl import OperatorSpace, known
from syno_automl.codegen.triton import (
                                        BACKWARD_MODE,
                                        REASONS,
                                        build_triton_module,
                                        fallback_counts,
                                        triton_source,
                                        triton_support,
)
from syno_automl.codegen.triton_index import code_table, index_code
from syno_automl.errors import OptionError
from syno_automl.ir import EXPR_OPS, parse_expr

HERE = Path(__file__).resolve().parents[1]   # tests/, where _triton_checks.py is


def _child(mode: str, interpret: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    run = subprocess.run([sys.executable, str(HERE / "_triton_checks.py"), mode], capture_output=True, text=True,
                         env=env, cwd=HERE, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _conv_space(**mapping) -> OperatorSpace:
    m = {"N": 2, "C_in": 4, "C_out": 6, "H": 7, "W": 5, **mapping}
    return OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                         ["k=3: 2"], [m], max_depth=6)


# -- in the interpreter and compiled (child processes) -------------------------------------------------------------

@pytest.fixture(scope="module")
def interpreted() -> dict:
    return _child("interpreted", interpret=True)


def test_sampled_operators_agree_with_torch_lowering(interpreted) -> None:
    """Default search space (both mappings) and random conv2d/conv1d-shaped spaces: every supported program
    agrees with the torch lowering in float64 (forward, dx, dw); the fallbacks are few and for known reasons."""
    r = interpreted["sample"]
    assert r["bad"] == []
    assert r["checked"] == 19
    assert r["supported"] >= 6, r  # 7 at this commit (the rest: two weights): fewer means support broke
    assert set(r["fallbacks"]) <= set(REASONS)
    assert r["supported"] + sum(r["fallbacks"].values()) == r["checked"]


def test_known_convolutions_match_conv2d(interpreted) -> None:
    r = interpreted["known"]
    for name in ("conv2d", "conv2d_dot", "grouped", "depthwise", "pointwise"):
        assert r[f"{name}/backend"] == "triton"
        for layout in ("contiguous", "channels_last"):
            assert r[f"{name}/{layout}"] < 1e-12, (name, layout, r)
    assert r["conv2d_dot/float32"] < 1e-4


def test_aot_compile_for_sm80_and_sm90() -> None:
    r = _child("aot", interpret=False)
    assert len(r) == 6  # conv2d and depthwise for each arch, grouped and a sampled operator for sm_90
    for name, k in r.items():
        assert isinstance(k["spills"], int) and k["spills"] >= 0, name
        assert 0 < k["registers"] <= 255, name
    assert r["conv2d/sm_90"]["wgmma"]  # tl.dot on Hopper: warp-group MMA
    assert r["conv2d/sm_90"]["spills"] == 0
    assert r["depthwise/sm_80"]["spills"] == 0


# -- here ----------------------------------------------------------------------------------------------------------

def test_index_table_covers_every_op() -> None:
    assert set(code_table(lambda k, j: "", lambda k, j: 1, [])) == set(EXPR_OPS)


class _Trunc(int):
    """An int whose // and % truncate toward zero, as Triton's integer ops do."""

    def __add__(self, o):  # type: ignore[override]
        return _Trunc(int(self) + int(o))

    __radd__ = __add__

    def __sub__(self, o):  # type: ignore[override]
        return _Trunc(int(self) - int(o))

    def __mul__(self, o):  # type: ignore[override]
        return _Trunc(int(self) * int(o))

    def __floordiv__(self, o):  # type: ignore[override]
        q = abs(int(self)) // abs(int(o))
        return _Trunc(q if (int(self) >= 0) == (int(o) > 0) else -q)

    def __mod__(self, o):  # type: ignore[override]
        return _Trunc(int(self) - int(o) * int(self.__floordiv__(o)))


@pytest.mark.parametrize("expr", [
    ["div", ["sub", ["add", ["it", 0], ["red", 0]], ["const", 2]], 3],
    ["mod", ["sub", ["it", 0], ["const", 3]], 4],
    ["mod", ["add", ["pad", ["sub", ["add", ["it", 0], ["red", 0]], ["const", 1]], 8], ["const", 1]], 8],
    ["div", ["pad", ["sub", ["add", ["it", 0], ["red", 0]], ["const", 1]], 8], 2],
])
def test_index_code_is_floor_arithmetic_under_truncation(expr) -> None:
    """The emitted text, evaluated with truncating // and % (Triton's), gives the IR's floor semantics wherever
    its guards hold, and the guards hold exactly where the IR's do."""
    from syno_automl.ir import evaluate_index

    e = parse_expr(expr)
    sizes = {"it": 8, "red": 3}
    text, guards = index_code([e], ["1"], lambda kind, j: f"{kind}{j}", lambda kind, j: sizes[kind])
    for i in range(8):
        for r in range(3):
            env = {"it0": _Trunc(i), "red0": _Trunc(r)}
            want, ok = evaluate_index(e, [i], [r])
            holds = all(eval(g, {}, env) for g in guards)  # noqa: S307 - our own generated text
            assert holds == ok, (expr, i, r)
            if ok:
                assert int(eval(text, {}, env)) == want, (expr, i, r, text)


def test_support_reasons() -> None:
    conv = known.conv2d(_conv_space())
    s = triton_support(conv.program(0))
    assert s.ok and s.plan is not None and s.plan.n and not s.plan.dot  # C_out = 6: too narrow for tl.dot
    wide = triton_support(known.conv2d(_conv_space(C_in=16, C_out=32)).program(0))
    assert wide.ok and wide.plan is not None and wide.plan.dot
    ops = random_spec_space("conv2d").sample(30, seed=1)
    two = next(op for op in ops if len(op.program(0)["weights"]) == 2)
    s2 = triton_support(two.program(0))
    assert not s2.ok and s2.code == "weights"
    program = dict(conv.program(0))
    program["cost"] = {**program["cost"], "flops": 1.0}  # pretend the staged plan were cheaper
    assert triton_support(program).code == "flops"
    del program["expr"]
    assert triton_support(program).code == "no-expr"


def test_exported_source_is_standalone() -> None:
    op = known.conv2d(_conv_space())
    src = triton_source(op, 0)
    tree = ast.parse(src)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported == {"os", "torch", "triton"}
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"syno_kernel", "syno_forward", "syno_operator", "SynoTritonFunction", f"Syno_{op.hash}_triton"} <= names
    assert triton_source(op.program(0), class_name="Mine").count("class Mine(") == 1
    with pytest.raises(OptionError, match="weights"):
        triton_source(next(o for o in random_spec_space("conv2d").sample(30, seed=1)
                           if len(o.program(0)["weights"]) == 2), 0)


def test_module_shares_parameters_and_runs_torch_lowering_on_cpu(monkeypatch) -> None:
    """Same parameter names, shapes and initialization as op.to_module; on a CPU tensor outside the interpreter
    the module runs the torch lowering."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    op = known.conv2d(_conv_space())
    torch.manual_seed(3)
    ref = op.to_module()
    torch.manual_seed(3)
    tri = build_triton_module(op, 0)
    assert tri.syno_backend == "triton" and tri.backward_mode == BACKWARD_MODE == "torch-autograd"
    assert {k: v.shape for k, v in tri.state_dict().items()} == {k: v.shape for k, v in ref.state_dict().items()}
    torch.testing.assert_close(tri.w0, ref.w0)
    x = torch.randn(2, 4, 7, 5)
    torch.testing.assert_close(tri(x), ref(x))
    tri.load_state_dict(ref.state_dict())


def test_fallback_is_counted_and_logged(caplog) -> None:
    two = next(o for o in random_spec_space("conv2d").sample(30, seed=1) if len(o.program(0)["weights"]) == 2)
    before = fallback_counts().get("weights", 0)
    with caplog.at_level(logging.INFO, logger="syno_automl.codegen.triton"):
        module = build_triton_module(two, 0)
    assert module.syno_backend == "torch" and "weights" in module.fallback_reason
    assert fallback_counts()["weights"] == before + 1
    assert any("falls back to the torch lowering" in r.getMessage() for r in caplog.records)
    ref = two.to_module()
    ref.load_state_dict(module.state_dict())
    x = torch.randn(2, 4, 6, 6)
    torch.testing.assert_close(module(x), ref(x))
