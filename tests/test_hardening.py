"""Issue 13: every bad input is a clear error naming the offending thing; nothing crashes, nothing is silently wrong.

Tables, one row per example of the issue (and its neighbours): options, specs, budgets, operator JSON, threads.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import textwrap

import pytest

from syno_automl import (
    EmptySpaceError,
    Operator,
    OperatorFormatError,
    OperatorSpace,
    SpecError,
    SynoError,
    _native,
    known,
)
from syno_automl.errors import InternalError, OptionError, OptionTypeError, ResourceError, SubstitutionError

PRIMARY = ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"]
MAPPING = {"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}
ARGS = {"input_shape": "[N, C_in, H, W]", "output_shape": "[N, C_out, H, W]", "primary": PRIMARY,
        "coefficients": ["k=3: 2"], "mappings": [MAPPING], "max_depth": 6}


def space(**kw) -> OperatorSpace:
    return OperatorSpace(**{**ARGS, **kw})


# ----------------------------------------------------------------------------------------------------------
# options: validated once at the Python face, the message names the option
# ----------------------------------------------------------------------------------------------------------

OPTIONS = [
    # kwargs, exception type, text the message must hold
    ({"max_depth": None}, OptionTypeError, "max_depth must be an integer"),
    ({"max_depth": "8"}, OptionTypeError, "max_depth must be an integer"),
    ({"max_depth": 8.5}, OptionTypeError, "max_depth must be an integer"),
    ({"max_depth": 2**40}, OptionError, "max_depth must be in [1, 30], got 1099511627776"),
    ({"max_depth": True}, OptionTypeError, "max_depth must be an integer"),
    ({"max_counts": {"SPLIT": "x"}}, OptionTypeError, "max_counts['SPLIT'] must be an integer"),
    ({"max_counts": {"SPLIT": -3}}, OptionError, "max_counts['SPLIT'] must be in [0, 64]"),
    ({"max_counts": {"SPLAT": 1}}, OptionError, "max_counts: unknown primitive 'SPLAT'"),
    ({"max_counts": [("SPLIT", 1)]}, OptionTypeError, "max_counts must be a dict"),
    ({"max_weights": -1}, OptionError, "max_weights must be in [0, 64], got -1"),
    ({"max_reductions": -1}, OptionError, "max_reductions must be in [0, 64], got -1"),
    ({"max_shares": -1}, OptionError, "max_shares must be in [0, 64], got -1"),
    ({"min_weights": 3, "max_weights": 2}, OptionError, "min_weights=3 is above max_weights=2"),
    ({"max_primary_degree": 100}, OptionError, "max_primary_degree must be in [0, 8]"),
    ({"min_unfold_ratio": math.nan}, OptionError, "min_unfold_ratio must be a finite non-negative number"),
    ({"min_unfold_ratio": math.inf}, OptionError, "min_unfold_ratio must be a finite non-negative number"),
    ({"min_weight_params": -2.0}, OptionError, "min_weight_params must be a finite non-negative number"),
    ({"max_flops": "10"}, OptionTypeError, "max_flops must be a non-negative number"),
    ({"max_flops": -1.0}, OptionError, "max_flops must be a non-negative number"),
    ({"min_params": math.nan}, OptionError, "min_params must be a non-negative number"),
    ({"distance_pruning": 1}, OptionTypeError, "distance_pruning must be True or False"),
    ({"bogus": 1}, OptionError, "unknown option 'bogus'"),
    ({"mappings": MAPPING}, OptionTypeError, "mappings must be a list of dicts (one per placeholder), got a dict"),
    ({"mappings": [{**MAPPING, "N": 2.5}]}, OptionTypeError, "mappings[0]['N'] must be an integer size, got 2.5"),
    ({"mappings": [{**MAPPING, "H": 2**70}]}, OptionError, "sizes must be positive integers below 2**63"),
    ({"mappings": [MAPPING, "H=8"]}, OptionTypeError, "mappings[1] must be a dict"),
    ({"primary": "N: 0"}, OptionTypeError, "primary must be a list of spec strings"),
    ({"coefficients": [3]}, OptionTypeError, "coefficients[0] must be a string"),
    ({"seed": "0"}, OptionTypeError, "seed must be an integer"),
    ({"threads": 100000}, OptionError, "threads must be in [1, 1024], got 100000"),
    ({"threads": 0}, OptionError, "threads must be in [1, 1024], got 0"),
]


@pytest.mark.parametrize("kwargs, error, message", OPTIONS, ids=[repr(o[0])[:60] for o in OPTIONS])
def test_bad_options_name_the_option(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        space(**kwargs)
    assert message in str(info.value)
    assert isinstance(info.value, SynoError) and isinstance(info.value, ValueError)


NATIVE_OPTIONS = [  # the core's own checks, for callers that skip the Python face
    ({"max_depth": None}, "max_depth must be an integer, got a NoneType"),
    ({"max_depth": 2**40}, "max_depth must be in [1, 30], got 1099511627776"),
    ({"max_counts": {"SPLIT": "x"}}, "max_counts['SPLIT'] must be an integer"),
    ({"max_weights": -1}, "max_weights must be in [0, 64]"),
    ({"min_unfold_ratio": math.nan}, "min_unfold_ratio must be a finite non-negative number"),
    ({"flops_pruning": "yes"}, "flops_pruning must be True or False"),
    ({"max_flops": 10**400}, None),  # an int beyond a double is as good as infinity: accepted
]


@pytest.mark.parametrize("options, message", NATIVE_OPTIONS, ids=[repr(o[0])[:50] for o in NATIVE_OPTIONS])
def test_native_layer_checks_its_own_invariants(options: dict, message: str | None) -> None:
    build = lambda: _native.Space(ARGS["input_shape"], ARGS["output_shape"], PRIMARY, ["k=3: 2"], [MAPPING], [],
                                  options)
    if message is None:
        build()
        return
    with pytest.raises(OptionError, match=None) as info:
        build()
    assert message in str(info.value)


def test_a_valid_space_keeps_its_config() -> None:
    s = space(max_counts={"EXPAND": 1, "SPLIT": None}, min_unfold_ratio=1.5, max_flops=1e9)
    assert OperatorSpace(**s.config()).config() == s.config()
    assert s.budgets == {"max_flops": 1e9}


# ----------------------------------------------------------------------------------------------------------
# specs: positions kept, exponents never wrap
# ----------------------------------------------------------------------------------------------------------

H257 = "*".join(["H^8"] * 32) + "*H"      # H^257: was accepted as H
H128 = "*".join(["H^8"] * 16)             # H^128: was reported as H^-128
SPECS = [
    # input shape, text the message must hold, position
    ("[N, \udc80]", "expected ASCII", 4),          # a lone surrogate
    ("[N, C_in, é, W]", "expected ASCII", 10),
    ("[N,\x00 C_in, H, W]", "expected ASCII without control characters (got '\\x00')", 3),
    (f"[N, C_in, {H257}, W]", "within [-127, 127] (this dimension multiplies to H^257)", 10),
    (f"[N, C_in, {H128}, W]", "multiplies to H^128", 10),
    (f"[N, C_in, {'*'.join(['H^-8'] * 16)}, W]", "multiplies to H^-128", 10),
]


@pytest.mark.parametrize("shape, message, position", SPECS, ids=[ascii(s[0])[:30] for s in SPECS])
def test_bad_specs_say_what_and_where(shape: str, message: str, position: int) -> None:
    with pytest.raises(SpecError) as info:
        space(input_shape=shape)
    assert message in str(info.value) and f"at position {position}" in str(info.value)
    assert info.value.position == position


def test_native_spec_errors_keep_the_text_after_a_nul() -> None:
    with pytest.raises(SpecError) as info:
        _native.parse_shape("[N,\x00 C]")
    assert str(info.value) == '"[N,\\x00 C]": expected a dimension (a variable name) at position 3'
    assert info.value.position == 3 and isinstance(info.value, SynoError)


def test_exponents_that_cancel_are_fine_and_large_ones_are_errors() -> None:
    dims = _native.parse_shape("[" + "*".join(["H^8"] * 15) + "*H^-8]")   # H^112: in range
    assert sum(e for _, e in dims[0]["factors"]) == 112
    with pytest.raises(SpecError, match="H\\^257"):
        _native.parse_shape(f"[{H257}]")


# ----------------------------------------------------------------------------------------------------------
# impossible budgets: EmptySpaceError naming the budget, proven by a bound (no search)
# ----------------------------------------------------------------------------------------------------------

BUDGETS = [
    ({"max_flops": 1}, "max_flops=1 empties the space: every operator needs at least"),
    ({"max_params": 0}, "max_params=0 empties the space: every operator has at least"),
    ({"min_flops": 1e30}, "min_flops=1e+30 empties the space: no operator reaches it"),
    ({"min_params": 1e30}, "min_params=1e+30 empties the space: no operator reaches it"),
    ({"max_memory": 1}, "max_memory=1 empties the space: every operator stores an intermediate"),
    ({"max_cost": 1.0}, "max_cost=1 empties the space: every operator's planned cost is at least"),  # a ratio typed
    ({"max_cost": 0, "coefficients": ["k=3: 2", "s=2: 2"]}, "max_cost=0 empties"),  # once sampled [] for 5 s
]


@pytest.mark.parametrize("budget, message", BUDGETS, ids=[repr(b[0]) for b in BUDGETS])
def test_impossible_budgets_are_proven_empty(budget: dict, message: str) -> None:
    s = space(**budget)
    with pytest.raises(EmptySpaceError) as info:
        s.sample(1)
    assert message in str(info.value)
    assert not hasattr(s, "last_report")  # raised before any search ran


@pytest.mark.parametrize("kwargs", [
    {},
    {"max_depth": 5, "coefficients": ["k=3: 2", "s=2: 2"]},
    {"input_shape": "[N, C_in]", "output_shape": "[N, C_out]", "primary": ["N: 0", "C_in: 2", "C_out: 2"],
     "mappings": [{"N": 3, "C_in": 6, "C_out": 4}, {"N": 1, "C_in": 2, "C_out": 8}], "max_depth": 5},
    {"input_shape": "[N, C, H, W]", "output_shape": "[N, C, s^-1*H, s^-1*W]", "primary": ["N: 0", "C: 0", "H: 2",
     "W: 2"], "coefficients": ["s=2: 2"], "mappings": [{"N": 2, "C": 3, "H": 8, "W": 8}], "min_weights": 0},
])
def test_budget_bounds_hold_for_every_operator_found(kwargs: dict) -> None:
    s = space(**kwargs)
    bounds = s._native.budget_bounds()
    ops = s.sample(60, seed=1, time_limit=10)
    assert len(ops) >= 10
    for op in ops:
        totals = op._native.totals()
        assert bounds["min_flops"] <= totals["flops"] <= bounds["max_flops"]
        assert bounds["min_params"] <= totals["params"] <= bounds["max_params"]
        assert bounds["min_memory"] <= totals["memory"]
        assert bounds["min_cost"] <= totals["cost"]


def test_budgets_the_bounds_allow_are_not_refused() -> None:
    s = space(max_flops=1e12, min_flops=1.0, max_memory=1e9)
    assert s._budget_conflict is None and len(s.sample(2, seed=0)) == 2


# ----------------------------------------------------------------------------------------------------------
# operator JSON
# ----------------------------------------------------------------------------------------------------------

JSONS = [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    (b"\x80\x81{}", "not valid UTF-8: byte 0"),
    ('{"format": "syno-operator/1", "hash": ' + "1" * 5000 + "}", "unreadable value"),
    ("1" * 5000, "unreadable value"),
    ("{", "does not parse"),
    (12, "must be a str or bytes"),
    ('{"format": "syno-operator/1", "path": "x", "hash": "0"}', "needs a 'path'"),
]


@pytest.mark.parametrize("text, message", JSONS, ids=[ascii(j[0])[:24] for j in JSONS])
def test_bad_operator_json_is_an_operator_format_error(text, message: str) -> None:
    with pytest.raises(OperatorFormatError) as info:
        Operator.from_json(space(), text)
    assert message in str(info.value)


def test_json_round_trip_still_works() -> None:
    s = space()
    op = s.sample(1, seed=2)[0]
    assert Operator.from_json(s, op.to_json()) == op
    assert Operator.from_json(s, op.to_json().encode()) == op


# ----------------------------------------------------------------------------------------------------------
# threads: absurd counts are errors, a thread that cannot start is an exception, never SIGABRT
# ----------------------------------------------------------------------------------------------------------

def test_absurd_thread_counts_are_clear_errors() -> None:
    s = space()
    with pytest.raises(OptionError, match="threads must be in \\[1, 1024\\], got 100000"):
        s.sample(3, threads=100000)
    with pytest.raises(OptionError, match="threads=100000 is more than 1024"):  # the core's own check
        s._native.sample(3, 0, 100000, 1000, 10.0, 64, None)
    assert len(s.sample(3, threads=1024)) == 3  # the most allowed: more threads than work just idle


SAMPLE_ARGS = [
    ({"count": -1}, OptionError, "count must be in"),
    ({"count": 2**40}, OptionError, "count must be in"),
    ({"count": 1.5}, OptionTypeError, "count must be an integer"),
    ({"count": 1, "time_limit": math.nan}, OptionError, "time_limit"),
    ({"count": 1, "budget": 0}, OptionError, "budget must be in"),
    ({"count": 1, "max_attempts": -5}, OptionError, "max_attempts must be in"),
]


@pytest.mark.parametrize("kwargs, error, message", SAMPLE_ARGS, ids=[repr(a[0]) for a in SAMPLE_ARGS])
def test_bad_sample_arguments_name_the_argument(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        space().sample(**kwargs)


def test_a_thread_that_cannot_start_is_a_resource_error() -> None:
    # Thread stacks of 1 GiB under a 1.5 GiB address-space allowance: the second sampling thread cannot start.
    code = textwrap.dedent("""
        import resource, sys
        from syno_automl import OperatorSpace
        from syno_automl.errors import ResourceError
        s = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                          ["k=3: 2"], [{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}], max_depth=6)
        used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (1536 << 20), resource.RLIM_INFINITY))
        try:
            s.sample(3, seed=0, threads=8)
        except ResourceError as e:
            print("ResourceError:", e)
            sys.exit(0)
        print("no error")
    """)

    def big_stacks() -> None:
        import resource
        resource.setrlimit(resource.RLIMIT_STACK, (1 << 30, resource.RLIM_INFINITY))

    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=big_stacks,
                         timeout=120)
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr[-2000:])  # -6 would be SIGABRT
    assert re.search(r"ResourceError: could not start sampling thread \d of 8 \(lower `threads`\): ", run.stdout)


# ----------------------------------------------------------------------------------------------------------
# one root exception
# ----------------------------------------------------------------------------------------------------------

def test_every_package_exception_is_a_syno_error_and_keeps_its_builtin_base() -> None:
    from syno_automl.config import StudyExistsError, StudyMismatchError
    from syno_automl.search.callbacks import BudgetExceededError, OperatorBuildError, TrainingTooSlowError
    from syno_automl.search.mcts import SearchExhaustedError

    builtin = {SpecError: ValueError, OptionError: ValueError, OptionTypeError: TypeError,
               EmptySpaceError: ValueError, OperatorFormatError: ValueError, SubstitutionError: ValueError,
               ResourceError: RuntimeError, InternalError: RuntimeError, StudyExistsError: ValueError,
               StudyMismatchError: ValueError, OperatorBuildError: RuntimeError, BudgetExceededError: ValueError,
               TrainingTooSlowError: TimeoutError, SearchExhaustedError: EmptySpaceError}
    for cls, base in builtin.items():
        assert issubclass(cls, SynoError) and issubclass(cls, base), cls
    assert _native.SpecError is SpecError


# ----------------------------------------------------------------------------------------------------------
# substitution: grouped convs reachable, depthwise ones not made 25x dearer, the core's unfold default
# ----------------------------------------------------------------------------------------------------------

def _conv_model(*layers):
    import torch
    from torch import nn

    return nn.Sequential(*layers), torch.randn(2, 8, 8, 8)


def test_substituted_grouped_convs_are_reachable() -> None:
    from torch import nn

    from syno_automl import substitute

    model, x = _conv_model(nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.Conv2d(8, 8, 3, padding=1, groups=2))
    sub = substitute(model, nn.Conv2d, x, groups=True, max_depth=8, cost_ratio=None)
    assert "g=2: 2" in sub.space.coefficients
    op = known.grouped_conv2d(sub.space)
    assert op.total_flops() == sub.baseline_flops


def test_a_dense_layer_beside_grouped_ones_keeps_the_grouped_conv_reachable() -> None:
    from torch import nn

    from syno_automl import substitute

    model, x = _conv_model(nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1, groups=2))
    sub = substitute(model, nn.Conv2d, x, groups=True, max_depth=8, cost_ratio=None)
    assert [m["g"] for m in sub.mappings] == [2, 2]
    known.grouped_conv2d(sub.space)


def test_depthwise_convs_are_not_replaced_by_dearer_operators_unless_asked() -> None:
    from torch import nn

    from syno_automl import substitute

    model, x = _conv_model(nn.Conv2d(8, 8, 3, padding=1, groups=8))
    sub = substitute(model, nn.Conv2d, x, groups=True, max_depth=6, cost_ratio=None)
    assert sub.space.budgets["max_flops"] == sub.baseline_flops
    for op in sub.space.sample(5, seed=0, time_limit=30):
        assert op.total_flops() <= sub.baseline_flops
    sub.restore()
    free = substitute(model, nn.Conv2d, x, groups=True, max_depth=6, flops_ratio=25.0, cost_ratio=None)
    assert free.space.budgets["max_flops"] == 25.0 * free.baseline_flops


def test_unfold_ratio_is_lowered_from_the_cores_default_never_raised() -> None:
    from torch import nn

    from syno_automl import substitute

    assert _native.default_options()["min_unfold_ratio"] == 1.0
    import torch

    big = substitute(nn.Sequential(nn.Conv2d(4, 4, 3, padding=1)), nn.Conv2d, torch.randn(1, 4, 8, 8), cost_ratio=None)
    assert "min_unfold_ratio" not in big.space.options  # 8 / 3 > 1.0: the default stands
    small = substitute(nn.Sequential(nn.Conv2d(4, 4, 3, padding=1)), nn.Conv2d, torch.randn(1, 4, 2, 2),
                       cost_ratio=None)
    assert small.space.options["min_unfold_ratio"] == pytest.approx(2 / 3)
    known.conv2d(small.space)
