"""The typed kernel IR (syno_automl.ir): every backend covers every op; malformed programs name their fault.

Backends are tables from op to handler (after tinygrad's renderers): the step backends (the PyTorch and TVM
generators, the FLOPs count, the initial-scale count, and the walker's own transition table) must cover every
op of ``STEP_OPS``; the expression backends (the reference evaluator, the fused TVM lowering) every op of
``EXPR_OPS``. A new primitive is then one entry per table, and this test lists the tables that lack it.
"""

from __future__ import annotations

import copy
import json

import pytest
import reference_eval

from syno_automl import known
from syno_automl.codegen.torch import build_module, program_to_source
from syno_automl.codegen.torch_steps import TorchGen
from syno_automl.ir import EXPR_OPS, STEP_OPS, IRError, count_flops, parse, parse_expr, walk
from syno_automl.ir.expr import index_table
from syno_automl.ir.flops import FlopCount
from syno_automl.ir.init import VarianceGain
from syno_automl.ir.program import STEP_TYPES
from syno_automl.ir.walk import ADVANCE


def _tvm_steps():
    pytest.importorskip("tvm")
    from syno_automl.codegen.tvm_te import TEGen

    return TEGen.STEPS


def _tvm_exprs():
    pytest.importorskip("tvm")
    from syno_automl.codegen.tvm_te import expr_table

    return expr_table()


STEP_TABLES = {
    "walker": lambda: ADVANCE,
    "torch": lambda: TorchGen.STEPS,
    "tvm": _tvm_steps,
    "flops": lambda: FlopCount.STEPS,
    "init": lambda: VarianceGain.STEPS,
}
EXPR_TABLES = {
    "index": index_table,  # known.py's index evaluation
    "reference": lambda: reference_eval.EXPR,
    "tvm_fused": _tvm_exprs,
}


@pytest.mark.parametrize("backend", list(STEP_TABLES))
def test_every_step_backend_covers_every_step_op(backend):
    table = STEP_TABLES[backend]()
    assert set(table) == set(STEP_OPS), f"{backend}: missing {set(STEP_OPS) - set(table)}"
    assert all(callable(h) for h in table.values())


@pytest.mark.parametrize("backend", list(EXPR_TABLES))
def test_every_expression_backend_covers_every_expression_op(backend):
    table = EXPR_TABLES[backend]()
    assert set(table) == set(EXPR_OPS), f"{backend}: missing {set(EXPR_OPS) - set(table)}"
    assert all(callable(h) for h in table.values())


def test_op_enumerations_match_the_typed_steps():
    assert set(STEP_TYPES) == set(STEP_OPS) == {"split", "merge", "shift", "stride", "unfold", "expand", "reduce",
                                                "contract"}
    assert set(EXPR_OPS) == {"it", "red", "const", "add", "sub", "mul", "div", "mod", "pad"}


# --------------------------------------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------------------------------------

def conv_program() -> dict:
    """out[n, o, h, w] = sum_{c, kh, kw} x[n, c, h + kh - 1, w + kw - 1] * w0[o, c, kh, kw]."""
    sizes = {0: 2, 1: 3, 2: 5, 3: 5, 4: 5, 5: 3, 6: 5, 7: 3, 9: 4, 10: 3, 11: 3, 12: 3}
    pad = lambda it, r: ["pad", ["sub", ["add", ["it", it], ["red", r]], ["const", 1]], 5]  # noqa: E731
    return {
        "input": {"dims": [0, 1, 2, 3], "shape": [2, 3, 5, 5]},
        "weights": [{"dims": [9, 10, 11, 12], "shape": [4, 3, 3, 3], "fan_in": 27}],
        "output": {"dims": [0, 9, 4, 6], "shape": [2, 4, 5, 5]},
        "sizes": sizes,
        "free_dims": [0],
        "steps": [
            {"op": "unfold", "src": 2, "dst": [4, 5], "window": 3},
            {"op": "unfold", "src": 3, "dst": [6, 7], "window": 3},
            {"op": "contract", "weight": 0, "rename": {1: 10, 5: 11, 7: 12}, "out": [0, 9, 4, 6]},
        ],
        "flops": 2 * 2 * 4 * 5 * 5 * 27, "params": 108,
        "expr": {"iterators": [2, 4, 5, 5], "reductions": [3, 3, 3], "mean": [False] * 3,
                 "input": [["it", 0], ["red", 0], pad(2, 1), pad(3, 2)],
                 "weights": [[["it", 1], ["red", 0], ["red", 1], ["red", 2]]]},
    }


def test_parse_round_trip_and_json_keys():
    p = parse(conv_program())
    assert p.sizes[9] == 4 and p.steps[2].renaming == {1: 10, 5: 11, 7: 12}
    assert parse(json.loads(json.dumps(conv_program()))) == p  # string keys from JSON
    assert parse(p.to_dict()) == p
    assert parse(p) is p
    assert count_flops(p) == p.flops


def test_unknown_keys_are_kept_not_errors():
    """The native lowering may add fields (a plan, a cost): consumers must not break on them."""
    prog = conv_program()
    prog["peak_elements"] = 1234
    prog["plan"] = {"order": [0, 1, 2]}
    prog["steps"][0]["note"] = "anything"
    p = parse(prog)
    assert p.extra == {"peak_elements": 1234, "plan": {"order": [0, 1, 2]}}
    assert program_to_source(prog) == program_to_source(conv_program())


def _set(path, value):
    def edit(prog):
        *keys, last = path
        node = prog
        for k in keys:
            node = node[k]
        node[last] = value
    return edit


def _delete(key):
    return lambda prog: prog.pop(key)


@pytest.mark.parametrize("edit, message", [
    (_delete("input"), "missing key 'input'"),
    (_delete("steps"), "missing key 'steps'"),
    (_set(("input", "shape"), [2, 3, 5]), "differ in length"),
    (_set(("input", "dims"), [0, 1, 1, 3]), "duplicate dims"),
    (_set(("sizes", 9), 7), "dim 9 has size 4, but sizes says 7"),
    (_set(("weights", 0, "fan_in"), "27"), "weights[0].fan_in"),
    (_set(("weights", 0, "shape"), [4, 3.0, 3, 3]), "weights[0].shape: expected an integer"),
    (_set(("steps", 0, "op"), "transpose"), "unknown step op 'transpose'"),
    (_set(("steps", 0, "dst"), [4]), "expected 2 integers"),
    (_set(("steps", 0, "src"), 42), "step 0 (unfold 42 -> [4, 5] window 3): dim 42 is not in T"),
    (_set(("steps", 0, "window"), 2), "window 2 must be odd"),
    (_set(("steps", 2, "weight"), 3), "step 2 (contract w3"),
    (_set(("steps", 2, "out"), [0, 9, 4]), "after the last step T has dims"),
    (_set(("steps", 2, "out"), [0, 99, 4, 6]), "out dim 99 is in neither"),
    (_set(("steps", 2, "rename"), {1: 10, 5: 10, 7: 12}), "collide"),
    (_set(("free_dims",), [9]), "weights[0]: dim 9 is free"),
    (_set(("flops",), "many"), "flops: expected an integer"),
    (_set(("expr", "input", 0), ["pow", ["it", 0], 2]), "expr.input[0]: unknown expression op 'pow'"),
    (_set(("expr", "input", 0), ["add", ["it", 0]]), "takes two expressions"),
    (_set(("expr", "input", 0), ["it", 7]), "it 7 out of range"),
    (_set(("expr", "input", 0), ["div", ["it", 0], 0]), "div by 0"),
    (_set(("expr", "mean"), [False]), "expr.mean: expected 3 bools"),
])
def test_malformed_programs_name_their_fault(edit, message):
    prog = copy.deepcopy(conv_program())
    edit(prog)
    with pytest.raises(IRError) as info:
        parse(prog)
    assert message in str(info.value)
    with pytest.raises(ValueError):  # IRError is a ValueError: the codegen's callers catch it as before
        build_module(prog)


def test_step_errors_name_the_step_in_every_backend():
    prog = conv_program()
    prog["steps"].insert(1, {"op": "split", "src": 3, "dst": [20, 21]})
    prog["sizes"].update({20: 2, 21: 2})  # 2 x 2 != 5
    with pytest.raises(IRError, match=r"step 1 \(split 3 -> \[20, 21\]\).*sizes do not match"):
        parse(prog)


def test_expressions_round_trip():
    e = ["pad", ["sub", ["add", ["mul", ["it", 2], 3], ["red", 0]], ["const", 1]], 6]
    node = parse_expr(e)
    assert node.to_json() == e
    assert str(node) == "pad((((i2 * 3) + r0) - 1), 6)"
    assert reference_eval.eval_index(e, [0, 0, 2], [0]) == (5, True)
    assert reference_eval.eval_index(e, [0, 0, 2], [2]) == (7, False)
    assert known.evaluate_index(e, [0, 0, 2], [0]) == 5 and known.evaluate_index(e, [0, 0, 2], [2]) is None


def test_walk_tracks_broadcast_dims():
    """EXPAND makes T constant along a dim; SPLIT keeps it so; a MERGE with a varying dim ends it."""
    prog = {
        "input": {"dims": [0, 1], "shape": [2, 3]},
        "output": {"dims": [0, 5], "shape": [2, 12]},
        "sizes": {2: 4, 3: 2, 4: 2},
        "steps": [{"op": "expand", "dst": 2}, {"op": "split", "src": 2, "dst": [3, 4]},
                  {"op": "merge", "src": [1, 3], "dst": 6}, {"op": "merge", "src": [6, 4], "dst": 5}],
    }
    prog["sizes"].update({6: 6, 5: 12})
    p = parse(prog)
    seen = []

    class Spy(FlopCount):
        STEPS = {op: (lambda self, tr: seen.append(sorted(tr.post.bcast))) for op in STEP_OPS}

    walk(p, Spy(p))
    assert seen == [[2], [3, 4], [4], []]
