"""Fuzz harness shared by tests/space/test_fuzz.py (a bounded run) and bench/fuzz.py (a long one).

Inputs (tests/_fuzz_inputs.py): OperatorSpace arguments (spec strings, mappings, options, budgets) mutated from
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
import re
import select
import struct
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from _fuzz_inputs import (
    BASES,
    BOOL_OPTIONS,
    BUDGETS,
    FINITE_OPTIONS,
    INT_OPTIONS,
    PRIMITIVES,
    RandomSource,
    cases,
    gen_case,
)

__all__ = ["BASES", "DOCUMENTED", "RandomSource", "Runner", "Tally", "cases", "gen_case", "invalid_reasons",
           "run_case", "sample_reasons", "worker_main"]

#: what the package documents it raises on bad input (docs/architecture.md, "Errors")
DOCUMENTED = {"SpecError", "OptionError", "OptionTypeError", "EmptySpaceError", "OperatorFormatError",
              "ResourceError"}
CASE_TIMEOUT = 60.0  # seconds per input before it counts as a hang

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
