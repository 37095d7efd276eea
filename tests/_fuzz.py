"""Fuzz harness shared by tests/test_fuzz.py (a bounded run) and bench/fuzz.py (a long one).

Inputs (hypothesis strategies): OperatorSpace arguments (spec strings, mappings, options, budgets) mutated from
valid spaces, sample() arguments, and operator JSON mutated from real documents. Each input runs in a worker
subprocess, so a crash (a signal, std::terminate) or a hang is seen and recorded, never taken down with the runner.

An independent oracle (`invalid_reasons`, written from the documented contract, not from syno_automl/options.py)
says when an input is invalid: if such an input is accepted, that is a *silently accepted invalid value*.
Operators returned under budgets are checked against them (*silently wrong*).
"""
from __future__ import annotations

import math
import os
import pickle
import random
import re
import select
import struct
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from hypothesis import strategies as st

#: what the package documents it raises on bad input (docs/architecture.md, "Errors")
DOCUMENTED = {"SpecError", "OptionError", "OptionTypeError", "EmptySpaceError", "OperatorFormatError",
              "ResourceError"}
CASE_TIMEOUT = 60.0  # seconds per input before it counts as a hang

# ----------------------------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------------------------

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
INT_OPTIONS = {  # the documented ranges (README/docs: OperatorSpace options)
    "max_depth": (1, 30), "max_reductions": (0, 64), "max_weights": (0, 64), "min_weights": (0, 64),
    "max_shares": (0, 64), "max_primary_degree": (0, 8), "max_coefficient_degree": (0, 8),
    "max_size_variables": (1, 16), "max_unfold_window": (1, 1 << 30),
}
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
            if key == "time_limit" and _is_number(sample[key]) and not sample[key] < 1:
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


# ----------------------------------------------------------------------------------------------------------
# the oracle: is an input invalid by the documented contract?
# ----------------------------------------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


def _text_reasons(name: str, text: Any) -> list[str]:
    if not isinstance(text, str):
        return [f"{name} not a str"]
    if any(not (" " <= c <= "~" or c in "\t\n\r") for c in text):
        return [f"{name} has a character outside printable ASCII"]
    reasons = []
    for dim in re.findall(r"[\[,]([^,\]]*)", text):  # exponents adding up beyond the int8 range
        totals: Counter = Counter()
        for var, e in re.findall(r"([A-Za-z_]\w*)\s*(?:\^\s*([+-]?\d+))?", dim.split(":")[0]):
            totals[var] += int(e) if e and len(e) < 6 else 1
        if any(abs(t) > 127 for t in totals.values()):
            reasons.append(f"{name}: an exponent beyond 127")
    return reasons


def invalid_reasons(case: dict[str, Any]) -> list[str]:
    """Why a space case is invalid (empty: valid as far as the contract's simple rules tell)."""
    kw, reasons = case["kwargs"], []
    reasons += _text_reasons("input_shape", kw["input_shape"]) + _text_reasons("output_shape", kw["output_shape"])
    for name in ("primary", "coefficients"):
        v = kw[name]
        if isinstance(v, (str, bytes, dict)) or not isinstance(v, (list, tuple)):
            reasons.append(f"{name} not a list")
        else:
            for s in v:
                reasons += _text_reasons(name, s)
    m = kw["mappings"]
    if m is not None:
        if not isinstance(m, list):
            reasons.append("mappings not a list")
        else:
            for d in m:
                if not isinstance(d, dict):
                    reasons.append("a mapping not a dict")
                    continue
                for k, v in d.items():
                    if not isinstance(k, str) or not _is_int(v) or not 1 <= v < 2**63:
                        reasons.append(f"mapping value {k!r}={v!r}")
    for name, v in kw.items():
        if name in INT_OPTIONS:
            lo, hi = INT_OPTIONS[name]
            if not _is_int(v) or not lo <= v <= hi:
                reasons.append(f"{name}={v!r}")
        elif name in FINITE_OPTIONS:
            if not _is_number(v) or math.isnan(v) or math.isinf(v) or v < 0:
                reasons.append(f"{name}={v!r}")
        elif name in BUDGETS:
            if v is not None and (not _is_number(v) or math.isnan(v) or v < 0):
                reasons.append(f"{name}={v!r}")
        elif name in BOOL_OPTIONS:
            if type(v) is not bool:
                reasons.append(f"{name}={v!r}")
        elif name == "max_counts":
            if not isinstance(v, dict):
                reasons.append("max_counts not a dict")
            else:
                for p, c in v.items():
                    if p not in PRIMITIVES or not (c is None or (_is_int(c) and 0 <= c <= 64)):
                        reasons.append(f"max_counts[{p!r}]={c!r}")
        elif name == "seed":
            if not _is_int(v):
                reasons.append(f"seed={v!r}")
        elif name == "threads":
            if v is not None and (not _is_int(v) or not 1 <= v <= 1024):
                reasons.append(f"threads={v!r}")
        elif name not in ("input_shape", "output_shape", "primary", "coefficients", "mappings"):
            reasons.append(f"unknown option {name}")
    if _is_int(kw.get("min_weights", 1)) and _is_int(kw.get("max_weights", 2)) \
            and kw.get("min_weights", 1) > kw.get("max_weights", 2):
        reasons.append("min_weights > max_weights")
    for lo, hi in (("min_flops", "max_flops"), ("min_params", "max_params")):
        a, b = kw.get(lo), kw.get(hi)
        if _is_number(a) and _is_number(b) and not math.isnan(a) and not math.isnan(b) and b < a:
            reasons.append(f"{hi} < {lo}")
    return reasons


def sample_reasons(sample: dict[str, Any]) -> list[str]:
    reasons = []
    c = sample["count"]
    if not _is_int(c) or not 0 <= c < 2**31:
        reasons.append(f"count={c!r}")
    t = sample["time_limit"]
    if not _is_number(t) or math.isnan(t) or t < 0:
        reasons.append(f"time_limit={t!r}")
    a = sample["max_attempts"]
    if a is not None and (not _is_int(a) or a < 0):
        reasons.append(f"max_attempts={a!r}")
    s = sample["seed"]
    if s is not None and not _is_int(s):
        reasons.append(f"seed={s!r}")
    th = sample.get("threads")
    if th is not None and (not _is_int(th) or not 1 <= th <= 1024):
        reasons.append(f"threads={th!r}")
    return reasons


# ----------------------------------------------------------------------------------------------------------
# running an input (inside the worker)
# ----------------------------------------------------------------------------------------------------------

_JSON_SPACE: Any = None
_JSON_DOCS: list[str] = []


def _json_space() -> tuple[Any, list[str]]:
    global _JSON_SPACE, _JSON_DOCS
    if _JSON_SPACE is None:
        from syno_automl import OperatorSpace

        _JSON_SPACE = OperatorSpace(**BASES[1])
        _JSON_DOCS = [op.to_json() for op in _JSON_SPACE.sample(3, seed=0)]
    return _JSON_SPACE, _JSON_DOCS


def _mutate(doc: str, mutations: list[tuple]) -> Any:
    import json

    data: Any = doc
    for m in mutations:
        kind = m[0]
        if not isinstance(data, str):
            break
        if kind == "flip":
            pos = m[1] % max(1, len(data))
            data = data[:pos] + chr(m[2]) + data[pos + 1:]
        elif kind == "cut":
            data = data[: m[1] % max(1, len(data))]
        elif kind == "insert":
            pos = m[1] % max(1, len(data))
            data = data[:pos] + chr(m[2]) * 3 + data[pos:]
        elif kind == "field":
            try:
                obj = json.loads(data)
                obj[m[1]] = m[2]
                data = json.dumps(obj)
            except (ValueError, TypeError, RecursionError):
                pass
        elif kind == "nest":
            data = "[" * m[1] + data + "]" * m[1]
        elif kind == "bigint":
            data = data.replace('"depth": ', '"depth": ' + "9" * m[1] + ", \"was\": ", 1)
        elif kind == "bad_utf8":
            data = data.encode("utf-8", "surrogatepass")[: m[1] % 50] + bytes([0x80 | (m[2] & 0x3F)]) + b"\xff"
        elif kind == "type":
            data = {"bytes": data.encode("utf-8", "surrogatepass"), "bytearray": bytearray(data.encode()),
                    "int": 7, "none": None, "list": [data]}[m[1]]
    return data


def _check_budget_proof(kwargs: dict[str, Any], message: str) -> str | None:
    """A budget said to empty the space: operators sampled without it must all break it (else the proof lied)."""
    from syno_automl import OperatorSpace

    name = message.split("=", 1)[0]
    limit = kwargs[name]
    free = OperatorSpace(**{k: v for k, v in kwargs.items() if k != name})
    try:
        ops = free.sample(20, seed=0, time_limit=0.2)
    except Exception:  # noqa: BLE001 - empty without the budget too: nothing to compare
        return None
    key = {"max_flops": "flops", "min_flops": "flops", "max_params": "params", "min_params": "params",
           "max_memory": "memory"}[name]
    for op in ops:
        value = op._native.totals()[key]
        if (value <= limit) if name.startswith("max") else (value >= limit):
            return f"{name}={limit} was said to empty the space, but operator {op.hash} has {key}={value}"
    return None


def run_case(case: dict[str, Any]) -> tuple:
    """('ok', note) | ('error', type name, message, stage) | ('wrong', what). Never raises."""
    from syno_automl import Operator, OperatorSpace, _native

    if case["kind"] == "abort":  # the harness's self-test: a crash must be seen as one
        os.abort()
    try:
        if case["kind"] == "parse":
            (_native.parse_shape if case["which"] == "shape" else _native.parse_spec)(case["text"])
            return ("ok", "parsed")
        if case["kind"] == "json":
            space, docs = _json_space()
            doc = _mutate(docs[case["base"]], case["mutations"])
            op = Operator.from_json(space, doc)
            import json

            claimed = json.loads(doc)["hash"]
            return ("ok", "loaded") if op.hash == claimed else ("wrong", f"loaded {op.hash}, document says {claimed}")
        space = OperatorSpace(**case["kwargs"])
        if case["sample"] is None:
            return ("ok", "built")
    except Exception as e:  # noqa: BLE001 - classifying is the point
        return ("error", type(e).__name__, str(e)[:300], "build" if case["kind"] == "space" else "run")
    try:
        ops = space.sample(**case["sample"])
    except Exception as e:  # noqa: BLE001
        if type(e).__name__ == "EmptySpaceError" and "empties the space" in str(e):
            unsound = _check_budget_proof(case["kwargs"], str(e))
            if unsound:
                return ("wrong", unsound)
        return ("error", type(e).__name__, str(e)[:300], "sample")
    try:
        for op in ops:
            t = op._native.totals()
            b = space.budgets
            if (t["flops"] > b.get("max_flops", math.inf) or t["flops"] < b.get("min_flops", 0)
                    or t["params"] > b.get("max_params", math.inf) or t["params"] < b.get("min_params", 0)
                    or t["memory"] > b.get("max_memory", math.inf)):
                return ("wrong", f"operator {op.hash} totals {t} break the budgets {b}")
        return ("ok", f"sampled {len(ops)}")
    except Exception as e:  # noqa: BLE001 - classifying is the point
        return ("error", type(e).__name__, str(e)[:300], "sample")


def worker_main() -> None:
    """Reads pickled cases from stdin, writes pickled outcomes to the original stdout (prints go to stderr)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = 6 << 30 if hard == resource.RLIM_INFINITY else min(6 << 30, hard)
    if soft == resource.RLIM_INFINITY or soft > cap:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))  # an input that eats memory fails alone
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    while True:
        header = inp.read(4)
        if len(header) < 4:
            return
        case = pickle.loads(inp.read(struct.unpack("<I", header)[0]))
        blob = pickle.dumps(run_case(case))
        out.write(struct.pack("<I", len(blob)) + blob)
        out.flush()


# ----------------------------------------------------------------------------------------------------------
# the runner (parent side)
# ----------------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    tried: int = 0
    crashes: list = field(default_factory=list)       # (case, return code, stderr tail)
    hangs: list = field(default_factory=list)
    wrong: list = field(default_factory=list)          # (case, what)
    silent: list = field(default_factory=list)         # (case, reasons): invalid input accepted
    types: Counter = field(default_factory=Counter)    # exception type -> count
    outcomes: Counter = field(default_factory=Counter)
    undocumented: list = field(default_factory=list)   # (case, type, message)

    def summary(self) -> str:
        lines = [f"inputs tried: {self.tried}", f"crashes: {len(self.crashes)}", f"hangs: {len(self.hangs)}",
                 f"silently wrong results: {len(self.wrong)}",
                 f"silently accepted invalid values: {len(self.silent)}",
                 f"exception types outside the documented ones: {len({t for _, t, _ in self.undocumented})}",
                 "outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(self.outcomes.items())),
                 "exception types seen: " + ", ".join(f"{k}={v}" for k, v in self.types.most_common())]
        for title, items in (("crash", self.crashes), ("hang", self.hangs), ("wrong", self.wrong),
                             ("silent", self.silent), ("undocumented", self.undocumented)):
            for item in items[:5]:
                lines.append(f"  {title}: {ascii(item)[:600]}")
        return "\n".join(lines)


class Runner:
    """One worker subprocess at a time; restarted after a crash or a hang."""

    def __init__(self, timeout: float = CASE_TIMEOUT) -> None:
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.tally = Tally()

    def _start(self) -> None:
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen([sys.executable, "-c", "import _fuzz; _fuzz.worker_main()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def _read(self, n: int) -> bytes | None:
        data = b""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while len(data) < n:
            ready, _, _ = select.select([fd], [], [], self.timeout)
            if not ready:
                return None
            chunk = os.read(fd, n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def run(self, case: dict[str, Any]) -> tuple:
        if self.proc is None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        blob = pickle.dumps(case)
        self.tally.tried += 1
        try:
            self.proc.stdin.write(struct.pack("<I", len(blob)) + blob)
            self.proc.stdin.flush()
            header = self._read(4)
            payload = self._read(struct.unpack("<I", header)[0]) if header is not None else None
        except (EOFError, BrokenPipeError):
            code = self.proc.wait()
            err = self.proc.stderr.read()[-1500:].decode(errors="replace") if self.proc.stderr else ""
            self.proc = None
            self.tally.crashes.append((case, code, err))
            self.tally.outcomes["crash"] += 1
            return ("crash", code, err)
        if payload is None:
            self.close()
            self.tally.hangs.append(case)
            self.tally.outcomes["hang"] += 1
            return ("hang",)
        outcome = pickle.loads(payload)
        self._classify(case, outcome)
        return outcome

    def _classify(self, case: dict[str, Any], outcome: tuple) -> None:
        t = self.tally
        t.outcomes[outcome[0]] += 1
        if outcome[0] == "error":
            t.types[outcome[1]] += 1
            if outcome[1] not in DOCUMENTED:
                t.undocumented.append((case, outcome[1], outcome[2]))
        elif outcome[0] == "wrong":
            t.wrong.append((case, outcome[1]))
        if case["kind"] == "space" and (outcome[0] != "error" or outcome[3] == "sample"):
            reasons = invalid_reasons(case)  # the space was built: were its arguments valid?
            if case["sample"] is not None and outcome[0] != "error":
                reasons += sample_reasons(case["sample"])
            if reasons:
                t.silent.append((case, reasons))
