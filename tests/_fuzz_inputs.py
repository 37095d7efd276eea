"""Fuzz inputs (tests/_fuzz.py runs them): OperatorSpace arguments mutated from valid spaces, sample() arguments,
operator JSON mutations and raw spec strings, generated from a `Source` of random choices (hypothesis for the
tests, a seeded random.Random for bench/fuzz.py)."""
from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from syno_automl import options as _options

BASES: list[dict[str, Any]] = [
    {"input_shape": "[N, C_in, H, W]", "output_shape": "[N, C_out, H, W]",
     "primary": ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], "coefficients": ["k=3: 2"],
     "mappings": [{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}], "max_depth": 5},
    {"input_shape": "[N, C_in]", "output_shape": "[N, C_out]", "primary": ["N: 0", "C_in: 2", "C_out: 2"],
     "coefficients": ["k=2: 1"], "mappings": [{"N": 4, "C_in": 8, "C_out": 8}, {"N": 1, "C_in": 4, "C_out": 6}],
     "max_depth": 4},
    {"input_shape": "[N, C, H, W]", "output_shape": "[N, C, s^-1*H, s^-1*W]", "primary": ["N: 0", "C: 0", "H: 2",
     "W: 2"], "coefficients": ["s=2: 2"], "mappings": [{"N": 2, "C": 3, "H": 8, "W": 8}], "max_depth": 4,
     "min_weights": 0},
]
NAMES = ["N", "C_in", "C_out", "H", "W", "C", "k", "s", "g", "x_1"]
NASTY = ["\x00", "\udc80", "\ud800", "é", "😀", "\n", "\x7f", "[", "]", ",", "^", "*", ":", "=", "-", "+", " ",
         "9", "0", "_", "unordered", "H", "\t"]
# the integer options fuzzed, at the ranges the core's options table gives (written once, in the core)
INT_OPTIONS = {name: _options.INT_OPTIONS[name] for name in (
    "max_depth", "max_reductions", "max_weights", "min_weights", "max_shares", "max_primary_degree",
    "max_coefficient_degree", "max_size_variables", "max_unfold_window")}
FINITE_OPTIONS = ("min_unfold_ratio", "min_weight_params")
BUDGETS = ("max_flops", "min_flops", "max_params", "min_params", "max_memory")
BOOL_OPTIONS = ("distance_pruning", "flops_pruning", "canonical_rules")
PRIMITIVES = ("REDUCE", "SPLIT", "MERGE", "SHIFT", "STRIDE", "UNFOLD", "EXPAND", "CONTRACTION", "FINALIZE")



class Source:
    """Where the random choices come from: hypothesis (`HypothesisSource`, shrinking, used by the tests) or a
    seeded random.Random (`RandomSource`, ~100x faster, used by bench/fuzz.py). The generators below use only this."""

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, items: Sequence[Any]) -> Any:
        return items[self.integer(0, len(items) - 1)]

    def odd_value(self) -> Any:
        """Any kind of value an option may wrongly (or rightly) get."""
        kind = self.integer(0, 7)
        if kind == 0:
            return self.integer(-3, 40)
        if kind == 1:
            return self.integer(-2**70, 2**70)
        if kind == 2:
            return self.choice([math.nan, math.inf, -math.inf, 0.5, 8.0, -1.5, 1e300, 5e-324])
        if kind == 3:
            return self.choice([True, False, None])
        if kind == 4:
            return "".join(self.choice(NASTY + ["8", "a"]) for _ in range(self.integer(0, 3)))
        return self.choice([{}, [], (), b"8", "8", 8.0, 2**63, -0.0, 1, 2, 3])


class HypothesisSource(Source):
    def __init__(self, draw: Any) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))


class RandomSource(Source):
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


def gen_text(src: Source, base: str) -> str:
    """A spec string: the base, or rebuilt from random factors, then a few random edits."""
    text = base
    if src.integer(0, 3) == 0:
        dims = []
        for _ in range(src.integer(0, 4)):
            factors: list[str] = []
            for _ in range(src.integer(1, 3)):
                name = src.choice(NAMES)
                e = src.choice([1, 1, src.integer(-9, 9)])
                repeat = src.choice([1, 1, src.integer(1, 40)])
                factors += [name if e == 1 else f"{name}^{e}"] * repeat
            dims.append("*".join(factors) + src.choice(["", "", ": unordered"]))
        text = "[" + ", ".join(dims) + "]"
    for _ in range(src.integer(0, 2)):
        pos = src.integer(0, len(text))
        if src.integer(0, 1):
            text = text[:pos] + src.choice(NASTY) + text[pos:]
        else:
            text = text[:pos] + text[pos + src.integer(1, 3):]
    return text


def gen_spec_list(src: Source, base: list[str]) -> Any:
    if src.integer(0, 9) == 0:
        return src.choice(["N: 0", None, 3, [3], ["H: 2", None], {"H": 2}])
    out = list(base)
    for _ in range(src.integer(0, 2)):
        choice = src.integer(0, 3)
        if choice == 0 and out:
            i = src.integer(0, len(out) - 1)
            out[i] = gen_text(src, out[i])
        elif choice == 1:
            name = src.choice(NAMES)
            value = src.choice(["", "=2", "=3", "=0", "=99999999999999", "=-1"])
            occ = src.choice(["", ": 0", ": 1", ": 2", ": 64", ": 65", ": 9999999999999"])
            out.append(name + value + occ)
        elif choice == 2 and out:
            out.pop(src.integer(0, len(out) - 1))
    return out


def gen_mappings(src: Source, base: list[dict[str, int]]) -> Any:
    choice = src.integer(0, 11)
    if choice == 0:
        return dict(base[0])  # a dict instead of a list
    if choice == 1:
        return src.choice([None, [], "N=2", 3, [None], [[("N", 2)]]])
    out: list[dict[Any, Any]] = [dict(m) for m in base]
    for _ in range(src.integer(0, 2)):
        m = out[src.integer(0, len(out) - 1)]
        key = src.choice(sorted(k for k in m if isinstance(k, str)) + ["Q", 3, "\udc80"])
        m[key] = src.integer(1, 64) if src.integer(0, 1) else src.odd_value()
    if src.integer(0, 5) == 0:
        out.append(dict(out[0]))
    return out


def gen_max_counts(src: Source) -> Any:
    if src.integer(0, 3) == 0:
        return src.odd_value()
    return {src.choice(PRIMITIVES + ("BOGUS", "")): src.choice([src.integer(0, 6), None, src.odd_value()])
            for _ in range(src.integer(0, 4))}


OPTION_NAMES = sorted([*INT_OPTIONS, *FINITE_OPTIONS, *BUDGETS, *BOOL_OPTIONS, "max_counts", "seed", "threads",
                       "bogus"])


def gen_space_case(src: Source) -> dict[str, Any]:
    """OperatorSpace keyword arguments (mutated from a valid base) and, maybe, sample() arguments."""
    base = src.choice(BASES)
    kwargs = dict(base)
    if src.integer(0, 2) == 0:
        kwargs["input_shape"] = gen_text(src, base["input_shape"])
    if src.integer(0, 3) == 0:
        kwargs["output_shape"] = gen_text(src, base["output_shape"])
    if src.integer(0, 3) == 0:
        kwargs["primary"] = gen_spec_list(src, base["primary"])
    if src.integer(0, 3) == 0:
        kwargs["coefficients"] = gen_spec_list(src, base["coefficients"])
    if src.integer(0, 2) == 0:
        kwargs["mappings"] = gen_mappings(src, base["mappings"])
    for _ in range(src.integer(0, 3)):
        name = src.choice(OPTION_NAMES)
        if name == "max_counts":
            kwargs[name] = gen_max_counts(src)
        elif name in BUDGETS:
            kwargs[name] = src.choice([0, 1, 10.0, 1e3, 1e6, 1e9, 1e30, math.inf, src.odd_value()])
        elif name in INT_OPTIONS:
            lo, hi = INT_OPTIONS[name]
            kwargs[name] = src.integer(lo, min(hi, lo + 6)) if src.integer(0, 1) else src.odd_value()
        else:
            kwargs[name] = src.odd_value()
    sample = None
    if src.integer(0, 2) == 0:  # valid sample() arguments, then maybe one of them odd
        sample = {"count": src.choice([0, 1, 2, 3]), "time_limit": src.choice([0.005, 0.02, 0.05]),
                  "max_attempts": src.choice([1, 50, 300]), "seed": src.choice([0, 7, -1, 2**70, None])}
        threads = src.choice([None, 1, 2, 4, 1024])
        if threads is not None:
            sample["threads"] = threads
        if src.integer(0, 1):
            key = src.choice(["count", "time_limit", "max_attempts", "seed", "threads"])
            sample[key] = src.choice([src.odd_value(), math.nan, -1, 0, 1025, 100000, 2**40, "1", 1.5])
            if key == "time_limit" and type(sample[key]) in (int, float) and not sample[key] < 1:
                sample[key] = -1.0  # a long or unlimited search is not what this input is about
    return {"kind": "space", "kwargs": kwargs, "sample": sample}


def gen_json_case(src: Source) -> dict[str, Any]:
    """A real operator document (one of a few), then mutations: bytes flipped or cut, fields replaced, nesting."""
    mutations: list[tuple] = []
    for _ in range(src.integer(0, 3)):
        kind = src.choice(["flip", "cut", "insert", "field", "nest", "bigint", "bad_utf8", "type"])
        if kind == "field":
            value = src.choice([src.odd_value(), [src.odd_value()], "0" * src.integer(0, 20), ["a", "b"]])
            mutations.append((kind, src.choice(["format", "hash", "path", "space", "depth", "extra"]), value))
        elif kind == "nest":
            mutations.append((kind, src.choice([10, 1000, 100_000])))
        elif kind == "bigint":
            mutations.append((kind, src.choice([20, 4301, 5000, 100_000])))
        elif kind == "type":
            mutations.append((kind, src.choice(["bytes", "bytearray", "int", "none", "list"])))
        else:
            mutations.append((kind, src.integer(0, 4000), src.integer(0, 255)))
    return {"kind": "json", "base": src.integer(0, 2), "mutations": mutations}


def gen_parser_case(src: Source) -> dict[str, Any]:
    base = src.choice(["[N, C_in, H, W]", "[N, s^-1*H: unordered]", "k=3: 2", "H: 2", "s_1=2"])
    return {"kind": "parse", "which": src.choice(["shape", "spec"]), "text": gen_text(src, base)}


def gen_case(src: Source) -> dict[str, Any]:
    return src.choice([gen_space_case, gen_space_case, gen_json_case, gen_parser_case])(src)


@st.composite
def cases(draw: Any) -> dict[str, Any]:
    """Hypothesis strategy over every kind of input."""
    return gen_case(HypothesisSource(draw))
