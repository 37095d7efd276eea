"""The kernel IR's one home in Python (docs/architecture.md §2).

``parse(program_dict)`` validates the native dict once into a frozen :class:`Program` (typed tensors, steps and
index expressions); :func:`walk` runs the steps through a backend's table (op -> handler); :func:`fold`
evaluates an index expression through a backend's table. Backends: the PyTorch generator
(``syno_automl.codegen.torch``), the TVM generator (``syno_automl.codegen.tvm``), the FLOPs count
(:func:`count_flops`), the initial weight scales (:func:`weight_stds`) and the tests' reference evaluator.

Example:
    >>> from syno_automl.ir import parse, count_flops
    >>> p = parse({"input": {"dims": [0, 1], "shape": [2, 3]}, "output": {"dims": [0, 2], "shape": [2, 4]},
    ...            "weights": [{"dims": [2, 1], "shape": [4, 3]}],
    ...            "steps": [{"op": "contract", "weight": 0, "rename": {}, "out": [0, 2]}]})
    >>> count_flops(p)
    48
"""

from __future__ import annotations

from syno_automl.ir.errors import IRError
from syno_automl.ir.expr import EXPR_OPS, Expr, evaluate_index, fold, index_table, parse_expr
from syno_automl.ir.flops import count_flops
from syno_automl.ir.init import weight_stds
from syno_automl.ir.parse import oracle, parse
from syno_automl.ir.program import (
                                     STEP_OPS,
                                     WEIGHT_VIEW_OPS,
                                     Contract,
                                     Expand,
                                     Merge,
                                     Oracle,
                                     Program,
                                     Reduce,
                                     Shift,
                                     Split,
                                     Step,
                                     Stride,
                                     Tensor,
                                     Unfold,
)
from syno_automl.ir.walk import (
                                     ContractInfo,
                                     State,
                                     StepBackend,
                                     Transition,
                                     advance,
                                     viewed_weight,
                                     walk,
                                     weight_order,
                                     weight_program,
)

__all__ = ["IRError", "EXPR_OPS", "STEP_OPS", "Expr", "fold", "parse_expr", "evaluate_index", "index_table",
           "parse", "oracle", "walk", "advance", "State", "Transition", "ContractInfo", "StepBackend", "Program",
           "Tensor", "Oracle", "Step", "Split", "Merge", "Shift", "Stride", "Unfold", "Expand", "Reduce", "Contract",
           "count_flops", "weight_stds", "viewed_weight", "weight_program", "weight_order", "WEIGHT_VIEW_OPS"]
