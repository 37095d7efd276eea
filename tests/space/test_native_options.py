"""The core's option table (native/bindings_options.cpp) is the one place a space option and its range are written:
the core's own checks, default_options(), the Python face (syno_automl.options) and the max_depth setting
(syno_automl.settings) all read it, and its messages are those from before the table."""
from __future__ import annotations

import pytest

from syno_automl import _native, options
from syno_automl.errors import OptionError
from syno_automl.settings import SETTING

TABLE = _native.option_table()
ROWS = {row["name"]: row for row in TABLE}
RANGES = _native.option_ranges()
ARGS = ("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], ["k=3: 2"],
        [{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}], [])


def native_error(opts: dict) -> str:
    with pytest.raises(OptionError) as info:
        _native.Space(*ARGS, opts)
    return str(info.value)


def python_error(opts: dict) -> str:
    with pytest.raises(OptionError) as info:
        options.check_space_arguments(ARGS[0], ARGS[1], ARGS[2], ARGS[3], opts, 0, None)
    return str(info.value)


def test_the_table_lists_each_option_once_with_a_known_kind():
    assert len(ROWS) == len(TABLE)
    kinds = {"int", "number", "budget", "bool", "cost_profile", "int_list", "count_dict"}
    assert {row["kind"] for row in TABLE} <= kinds
    for row in TABLE:
        has_range = row["kind"] in ("int", "int_list", "count_dict")
        assert (row["range"] is not None) == has_range, row
        if has_range:
            lo, hi = row["range"]
            assert isinstance(lo, int) and isinstance(hi, int) and lo <= hi
    assert {n for n, r in ROWS.items() if r["internal"]} == {"structural", "cost_profile"}


def test_option_ranges_are_the_tables_integer_options():
    assert RANGES == {n: r["range"] for n, r in ROWS.items() if r["kind"] == "int"}
    assert RANGES["max_size_variables"][1] == 16   # kMaxVariables (native/size.hpp)


def test_the_python_face_and_the_settings_read_the_tables_ranges():
    assert options.INT_OPTIONS == RANGES
    assert (SETTING["max_depth"].minimum, SETTING["max_depth"].maximum) == RANGES["max_depth"]
    def by_kind(kind):
        return {n for n, r in ROWS.items() if r["kind"] == kind and not r["internal"]}
    assert set(options.NUMBER_OPTIONS) == by_kind("number")
    assert set(options.BUDGETS) == by_kind("budget")
    assert set(options.BOOL_OPTIONS) == by_kind("bool")
    # the options of OperatorSpace, as they were before the table (a row added or renamed shows here)
    assert set(options.NUMBER_OPTIONS) == {"min_unfold_ratio", "min_weight_params", "prior_max_outer",
                                           "prior_max_pooling"}
    assert set(options.BUDGETS) == {"max_flops", "min_flops", "max_params", "min_params", "max_memory", "max_cost"}
    assert set(options.BOOL_OPTIONS) == {"distance_pruning", "flops_pruning", "cost_pruning", "canonical_rules",
                                         "prior_weight_io", "prior_outer_kinds"}


def test_default_options_list_the_table_but_budgets_and_structural_in_its_order():
    listed = [n for n, r in ROWS.items() if r["kind"] != "budget" and n != "structural"]
    assert list(_native.default_options()) == listed


@pytest.mark.parametrize("name", sorted(RANGES))
def test_an_integer_option_out_of_range_is_refused_with_its_range_by_both_layers(name: str):
    lo, hi = RANGES[name]
    assert native_error({name: lo - 1}) == f"{name} must be in [{lo}, {hi}], got {lo - 1}"
    assert native_error({name: hi + 2}) == f"{name} must be in [{lo}, {hi}], got {hi + 2}"
    assert native_error({name: 10**30}) == f"{name} must be in [{lo}, {hi}], got a larger integer"
    assert native_error({name: True}) == f"{name} must be an integer, got a bool"
    assert python_error({name: hi + 1}) == f"{name} must be in [{lo}, {hi}], got {hi + 1}"
    accepted = {name: hi, **({"max_weights": hi} if name == "min_weights" else {})}
    assert options.check_space_arguments(ARGS[0], ARGS[1], ARGS[2], ARGS[3], accepted, 0, None) == accepted


def test_messages_are_those_from_before_the_table():
    assert native_error({"max_depth": 32}) == "max_depth must be in [1, 30], got 32"
    assert python_error({"max_depth": 31}) == "max_depth must be in [1, 30], got 31"
    assert native_error({"x": 1}) == "unknown option 'x'"
    assert native_error({"channel_inputs": [65]}) == "channel_inputs[] must be in [0, 63], got 65"
    assert python_error({"channel_inputs": [64]}) == "channel_inputs[0] must be in [0, 63], got 64"
    assert native_error({"max_counts": {"SHIFT": -2}}) == "max_counts['SHIFT'] must be in [-1, 64], got -2"
    assert python_error({"max_counts": {"SHIFT": 65}}) == "max_counts['SHIFT'] must be in [0, 64], got 65"
    assert native_error({"min_unfold_ratio": float("inf")}) == ("min_unfold_ratio must be a finite non-negative "
                                                                "number, got 'inf'")
    assert native_error({"max_flops": -1}) == "max_flops must be a non-negative number, got '-1'"
    assert native_error({"structural": 1}) == "structural must be True or False, got a int"
    assert native_error({"cost_profile": {}}) == "cost_profile needs 'flop'"
    assert native_error({"max_flops": 1.0, "min_flops": 2.0}) == ("max_flops is below min_flops: no operator can "
                                                                  "satisfy both")


def test_program_steps_name_their_op():
    space = _native.Space(*ARGS, {"max_depth": 6})
    ops, _ = space.sample(8, 1, 1, 100000, 30.0)
    assert ops
    for op in ops:
        program = op.program(0)
        steps = program["steps"] + [v for w in program["weights"] for v in w.get("views", [])]
        for step in steps:
            assert step["op"] in ("split", "merge", "shift", "stride", "unfold", "expand", "reduce", "contract")
