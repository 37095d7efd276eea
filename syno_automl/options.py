"""Validation of OperatorSpace's arguments, once, at the Python face (the native core re-checks its invariants).

Every check names the argument and says what is allowed: `OptionTypeError` (also a TypeError) for a wrong type,
`OptionError` (a ValueError) for a wrong value, `SpecError` for a spec string the core could not read right
(characters outside ASCII or control characters, with their position).

Example:
    >>> from syno_automl.options import check_space_arguments
    >>> check_space_arguments("[N, H]", "[N, H]", ["H: 2"], [], {"max_depth": 8}, 0, None)
    {'max_depth': 8}
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from syno_automl import _native
from syno_automl.echo import shown
from syno_automl.errors import OperatorFormatError, OptionError, OptionTypeError, SpecError

__all__ = ["check_space_arguments", "check_sample_arguments", "check_enumerate_arguments", "check_replay_path",
           "check_mappings", "check_built_space",
           "check_size_enumeration", "budget_conflict", "INT_OPTIONS", "NUMBER_OPTIONS", "BOOL_OPTIONS", "BUDGETS",
           "MAX_THREADS", "MAX_SIZE_CANDIDATES"]

# The options of OperatorSpace, as the core's option table (native/bindings_options.cpp, where each option and
# its range are written once) lists them: its internal rows (set by syno_automl.space itself) left out.
_TABLE: dict[str, dict[str, Any]] = {row["name"]: row for row in _native.option_table() if not row["internal"]}
#: integer options and their inclusive ranges (the core's int fields; degrees beyond 8 make size enumeration
#: blow up combinatorially, as spec exponents are limited to [-8, 8] per factor)
INT_OPTIONS: dict[str, tuple[int, int]] = {name: row["range"] for name, row in _TABLE.items() if row["kind"] == "int"}
#: non-negative finite numbers
NUMBER_OPTIONS = tuple(name for name, row in _TABLE.items() if row["kind"] == "number")
#: non-negative numbers, infinity meaning "no limit"
BUDGETS = tuple(name for name, row in _TABLE.items() if row["kind"] == "budget")
BOOL_OPTIONS = tuple(name for name, row in _TABLE.items() if row["kind"] == "bool")
PRIMITIVES = tuple(_native.default_options()["max_counts"])
_CHANNEL_INPUTS: tuple[int, int] = _TABLE["channel_inputs"]["range"]  # each input position's range
_MAX_COUNT: int = _TABLE["max_counts"]["range"][1]  # each primitive's largest count (the core's -1 is None here)
MAX_THREADS: int = _native.MAX_THREADS
_INT64_MAX = (1 << 63) - 1


def _type(value: Any) -> str:
    return type(value).__name__


def _is_int(value: Any) -> bool:  # numpy integers too; bools are not counts
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if not _is_int(value):
        raise OptionTypeError(f"{name} must be an integer in [{lo}, {hi}], got {shown(value)} (a {_type(value)})")
    if not lo <= value <= hi:
        raise OptionError(f"{name} must be in [{lo}, {hi}], got {shown(value)}")
    return int(value)


def check_number(name: str, value: Any, *, allow_infinity: bool) -> float:
    kind = "a non-negative number" if allow_infinity else "a finite non-negative number"
    if not _is_number(value):
        raise OptionTypeError(f"{name} must be {kind}, got {shown(value)} (a {_type(value)})")
    try:
        x = float(value)
    except OverflowError:  # an int beyond a double: as good as infinity
        x = math.inf
    if math.isnan(x) or x < 0 or (math.isinf(x) and not allow_infinity):
        raise OptionError(f"{name} must be {kind}, got {shown(value)}")
    return x


def check_spec_text(name: str, text: Any) -> str:
    """A spec string the core reads byte by byte: ASCII without control characters, or a SpecError there."""
    if not isinstance(text, str):
        raise OptionTypeError(f"{name} must be a string, got {shown(text)} (a {_type(text)})")
    for i, c in enumerate(text):
        if not (" " <= c <= "~" or c in "\t\n\r"):
            error = SpecError(f"{shown(text, around=i)}: expected ASCII without control characters (got {ascii(c)}) "
                              f"at position {i}")
            error.position = i
            raise error
    return text


def check_spec_list(name: str, value: Any) -> list[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise OptionTypeError(f"{name} must be a list of spec strings, got {shown(value)} (a {_type(value)})")
    return [check_spec_text(f"{name}[{i}]", s) for i, s in enumerate(value)]


def check_mappings(value: Any) -> list[dict[str, int]]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        raise OptionTypeError(f"mappings must be a list of dicts (one per placeholder), got a dict: "
                              f"wrap it as [{shown(dict(value))}]")
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise OptionTypeError(f"mappings must be a list of dicts (one per placeholder), got {shown(value)}")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, Mapping):
            raise OptionTypeError(f"mappings[{i}] must be a dict of variable values, got {shown(m)} (a {_type(m)})")
        checked = {}
        for key, v in m.items():
            if not isinstance(key, str):
                raise OptionTypeError(f"mappings[{i}] keys must be variable names, got {shown(key)}")
            check_spec_text(f"mappings[{i}] key {shown(key)}", key)
            if not _is_int(v):
                raise OptionTypeError(f"mappings[{i}][{shown(key)}] must be an integer size, got {shown(v)} "
                                      f"(a {_type(v)})")
            if not 1 <= v <= _INT64_MAX:
                raise OptionError(f"mappings[{i}] gives {shown(key)}={shown(v)}; sizes must be positive integers "
                                  f"below 2**63")
            checked[key] = int(v)
        out.append(checked)
    return out


def check_max_counts(value: Any) -> dict[str, int | None]:
    if not isinstance(value, Mapping):
        raise OptionTypeError(f"max_counts must be a dict {{primitive: count}}, got {shown(value)} (a {_type(value)})")
    out: dict[str, int | None] = {}
    for key, v in value.items():
        if key not in PRIMITIVES:
            raise OptionError(f"max_counts: unknown primitive {shown(key)} (one of {', '.join(PRIMITIVES)})")
        out[key] = None if v is None else check_int(f"max_counts[{shown(key)}]", v, 0, _MAX_COUNT)
    return out


def check_space_arguments(input_shape: Any, output_shape: Any, primary: Any, coefficients: Any,
                          options: dict[str, Any], seed: Any, threads: Any, fixed: Any = ()) -> dict[str, Any]:
    """Checks every argument of OperatorSpace; returns the options as the core takes them (plain ints, budgets
    as floats, None budgets dropped). Raises SpecError, OptionError or OptionTypeError naming the argument."""
    check_spec_text("input_shape", input_shape)
    check_spec_text("output_shape", output_shape)
    check_spec_list("primary", primary)
    check_spec_list("coefficients", coefficients)
    check_spec_list("fixed", fixed)
    if not _is_int(seed):
        raise OptionTypeError(f"seed must be an integer, got {shown(seed)} (a {_type(seed)})")
    if threads is not None:
        check_int("threads", threads, 1, MAX_THREADS)
    native: dict[str, Any] = {}
    for name, value in options.items():
        if name in INT_OPTIONS:
            native[name] = check_int(name, value, *INT_OPTIONS[name])
        elif name in BUDGETS:
            if value is not None:
                native[name] = check_number(name, value, allow_infinity=True)
        elif name in NUMBER_OPTIONS:
            native[name] = check_number(name, value, allow_infinity=False)
        elif name in BOOL_OPTIONS:
            if not isinstance(value, bool):
                raise OptionTypeError(f"{name} must be True or False, got {shown(value)} (a {_type(value)})")
            native[name] = value
        elif name == "max_counts":
            native[name] = check_max_counts(value)
        elif name == "channel_inputs":  # input positions that are channels (rule channel-split-order)
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise OptionTypeError(f"channel_inputs must be a list of input positions, got {value!r}")
            native[name] = [check_int(f"channel_inputs[{i}]", v, *_CHANNEL_INPUTS) for i, v in enumerate(value)]
        else:
            known = sorted([*INT_OPTIONS, *BUDGETS, *NUMBER_OPTIONS, *BOOL_OPTIONS, "max_counts", "channel_inputs"])
            raise OptionError(f"unknown option {shown(name)} (known: {', '.join(known)})")
    defaults = _native.default_options()
    lo_w, hi_w = native.get("min_weights", defaults["min_weights"]), native.get("max_weights", defaults["max_weights"])
    if lo_w > hi_w:
        raise OptionError(f"min_weights={lo_w} is above max_weights={hi_w}: no operator can satisfy both")
    return native


def check_sample_arguments(count: Any, seed: Any, threads: Any, time_limit: Any, max_attempts: Any,
                           budget: Any, flops_bins: Any = 0) -> None:
    """Checks OperatorSpace.sample's arguments (the count and thread count most of all)."""
    check_int("count", count, 0, (1 << 31) - 1)
    if not _is_int(seed):
        raise OptionTypeError(f"seed must be an integer, got {shown(seed)} (a {_type(seed)})")
    if threads is not None:
        check_int("threads", threads, 1, MAX_THREADS)
    check_number("time_limit", time_limit, allow_infinity=True)
    if max_attempts is not None:
        check_int("max_attempts", max_attempts, 0, _INT64_MAX)
    check_int("budget", budget, 1, _INT64_MAX)
    check_int("flops_bins", flops_bins, 0, 64)


def check_enumerate_arguments(max_depth: Any, space_max_depth: int, max_nodes: Any, time_limit: Any,
                              max_operators: Any) -> None:
    """Checks OperatorSpace.enumerate's arguments: a depth the space can reach, a time limit that is one (the core
    reads <= 0 as "no limit": `time_limit=-1` once walked for minutes), counts the core can hold."""
    if max_depth is not None:
        check_int("max_depth", max_depth, 1, space_max_depth)
    check_int("max_nodes", max_nodes, 0, _INT64_MAX)
    check_int("max_operators", max_operators, 0, _INT64_MAX)
    if time_limit is not None:
        x = check_number("time_limit", time_limit, allow_infinity=True)
        if x == 0 or math.isinf(x):
            raise OptionError(f"time_limit must be a finite number of seconds > 0, or None for no limit, got "
                              f"{shown(time_limit)}")


def check_replay_path(path: Any) -> list[str]:
    """A replay path as the core takes it: a list of child keys (strings). Keys read from a JSON file may be
    anything; a wrong one is an OperatorFormatError naming the step, never pybind11's signature dump."""
    if isinstance(path, (str, bytes)) or not isinstance(path, Sequence):
        raise OperatorFormatError(f"a replay path is a list of child keys (16 hex digits each), got {shown(path)} "
                                  f"(a {_type(path)})")
    for i, key in enumerate(path):
        if not isinstance(key, str):
            raise OperatorFormatError(f"step {i} of the replay path: a child key is a string of 16 hex digits, got "
                                      f"{shown(key)} (a {_type(key)})")
        if not key.isascii() and not _encodable(key):  # a lone surrogate: pybind11 would raise its TypeError
            raise OperatorFormatError(f"step {i} of the replay path: a child key is a string of 16 hex digits, got "
                                      f"{shown(key)} (holding a lone surrogate: not text)")
    return list(path)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def budget_conflict(budgets: Mapping[str, float], bounds: Mapping[str, float], mappings: int) -> str | None:
    """Which budget empties the space, given the core's bounds on every operator's totals (native/bounds.hpp),
    or None when the bounds do not prove it (sampling then finds out)."""
    summed = f"summed over the {mappings} mapping(s)"
    checks = [
        ("max_flops", budgets.get("max_flops", math.inf) < bounds["min_flops"],
         f"every operator needs at least {bounds['min_flops']:.4g} FLOPs ({summed}: min_weights weights, each "
         f"contraction costing at least 2 FLOPs per weight element)"),
        ("min_flops", budgets.get("min_flops", 0.0) > bounds["max_flops"],
         f"no operator reaches it: at most {bounds['max_flops']:.4g} FLOPs ({summed}) within max_weights, "
         f"max_reductions and the variables' occurrence allowances"),
        ("max_params", budgets.get("max_params", math.inf) < bounds["min_params"],
         f"every operator has at least {bounds['min_params']:.4g} weight elements ({summed}: min_weights "
         f"weights of at least max(1, min_weight_params) elements)"),
        ("min_params", budgets.get("min_params", 0.0) > bounds["max_params"],
         f"no operator reaches it: at most {bounds['max_params']:.4g} weight elements ({summed})"),
        ("max_memory", budgets.get("max_memory", math.inf) < bounds["min_memory"],
         f"every operator stores an intermediate of at least {bounds['min_memory']:.4g} bytes (4 per element)"),
        ("max_cost", budgets.get("max_cost", math.inf) < bounds.get("min_cost", 0.0),
         f"every operator's planned cost is at least {bounds.get('min_cost', 0.0):.4g} ({summed}: the weights' "
         f"gradients, and reading the input once; max_cost is an absolute cost, not a ratio)"),
    ]
    for name, empty, why in checks:
        if empty:
            return f"{name}={budgets[name]:.6g} empties the space: {why}"
    return None


#: most candidate sizes one step may enumerate (REDUCE domains, MERGE blocks): beyond it a single expansion
#: would run for minutes to ages (e.g. degree 8 over 16 variables is 17^16 candidates), so the space is refused
MAX_SIZE_CANDIDATES = 10_000_000


def check_size_enumeration(variables: Sequence[Mapping[str, Any]], shapes: Sequence[Sequence[Mapping[str, Any]]],
                           options: Mapping[str, Any]) -> None:
    """Refuses degree/occurrence/exponent settings whose size enumeration could not finish (OptionError)."""
    defaults = _native.default_options()
    deg_p = options.get("max_primary_degree", defaults["max_primary_degree"])
    deg_c = options.get("max_coefficient_degree", defaults["max_coefficient_degree"])
    exponents: dict[str, int] = {}
    for dims in shapes:
        for dim in dims:
            for name, e in dim["factors"]:
                exponents[name] = exponents.get(name, 0) + abs(e)
    sizes = divisors = 1
    for v in variables:
        occ = v["max_occurrences"]
        if v["primary"]:
            sizes *= min(occ, deg_p) + 1
            divisors *= exponents.get(v["name"], 0) + 2 * occ + 1
        else:
            sizes *= 2 * min(occ, deg_c) + 1
            divisors *= 2 * deg_c + 1
    worst = max(sizes, divisors)
    if worst > MAX_SIZE_CANDIDATES:
        raise OptionError(
            f"one search step could enumerate about {worst:.3g} candidate sizes (max_primary_degree={deg_p}, "
            f"max_coefficient_degree={deg_c}, {len(variables)} variables with their occurrence counts and the "
            f"shapes' exponents): at most {MAX_SIZE_CANDIDATES:.0e}; lower the degrees, the ': n' occurrence "
            f"counts or the exponents")


def check_built_space(native: Any, input_shape: str, output_shape: str, options: Mapping[str, Any],
                      budgets: Mapping[str, float]) -> str | None:
    """Checks that need the core's view of the space (its variables, bounds); returns budget_conflict's verdict."""
    check_size_enumeration(native.variables(), [_native.parse_shape(input_shape), _native.parse_shape(output_shape)],
                           options)
    return budget_conflict(budgets, native.budget_bounds(), native.num_mappings)
