"""The search's verdict: which re-trained operator is the fastest within the margin of the re-trained baseline.

The final stage (:mod:`syno_automl.study.finalists`) re-trains a few finalists and the baseline at one budget
with several seeds and times the whole substituted model against the original; this module holds those figures
(:class:`Finalist`, :class:`FinalResult`) and turns them into the one line a search ends with::

    fastest operator within 1 pp of the baseline: 3f2a... STRIDE ... accuracy 0.975 ± 0.004 (baseline 0.981 ±
    0.002, 3 seeds × 4 epochs), speedup 1.42× (torch eager inference, batch 64, 1 thread)

or ``no operator within 1 pp of the baseline (best: <hash> 0.930 ± 0.010, speedup 1.80×)``. For a minimized
objective (the lm task's val_loss) the margin is absolute in nats and the speedup is the tokens/s ratio::

    no operator within 0.01 nats of the baseline's val_loss 1.907 ± 0.010 (best: ec960ecb47f104e7 val_loss 1.941
    ± 0.021, speedup 1.00×; 3 seeds × 400 steps, 86,498 vs 86,115 tokens/s; torch eager inference, batch 64 × 64
    tokens, 1 thread)

(the embedded ``search --task lm``, seed 0), or ``fastest operator within 0.01 nats of the baseline's val_loss
<mean ± sd>: <hash> <primitives> val_loss <mean ± sd> (<seeds> seeds × <n> steps), speedup <x> (...)``.

Imports nothing heavy.

Example:
    >>> base = Finalist("baseline", None, "the original layers", None, None, [0.98, 0.982])
    >>> op = Finalist("fd7a7e8401b23d0b", 1, "REDUCE C_in", 0.7, 0.9, [0.975, 0.977], speedup=1.4)
    >>> FinalResult(base, [op], seeds=2, epochs=4, margin=0.01, timing="torch eager inference").chosen.label
    'fd7a7e8401b23d0b'
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from syno_automl.words import counted

__all__ = ["NO_CHEAPER_OPERATOR", "Finalist", "FinalResult", "no_faster_operator", "short_description",
           "stored_final"]

NO_CHEAPER_OPERATOR = "no completed operator cheaper than the replaced layers"


def no_faster_operator(target: str) -> str:
    """Why a study whose trials were timed on `target` has no finalist."""
    return f"no completed operator measured faster than the original on {target}"


def short_description(primitives: list[str], limit: int = 60) -> str:
    """The operator's primitives in forward order (``STRIDE C_in by s → REDUCE ...``), whole primitives within
    about `limit` characters, then how many are left out (``→ … 3 more``); at least the first is given whole.
    `primitives` as :attr:`Operator.primitives` gives them: search (bottom-up) order.

    Example:
        >>> short_description(["REDUCE C_in", "SPLIT H -> [H, k]", "UNFOLD W -> [W, k]"], limit=40)
        'UNFOLD W -> [W, k] → SPLIT H -> [H, k] → … 1 more'
    """
    forward = list(reversed(primitives))
    text = " → ".join(forward)
    if len(text) <= limit:
        return text
    shown = forward[:1]
    for primitive in forward[1:]:
        if len(" → ".join([*shown, primitive])) > limit:
            break
        shown.append(primitive)
    return " → ".join(shown) + f" → … {len(forward) - len(shown)} more"


def describe_kind(op: Any, primitives: bool = True) -> str:
    """What the verdict calls an operator: its known form (known.classify: a grouped conv, a 1x1 conv, pooling...,
    up to a permutation of channels), or ``new:`` and (`primitives`) the start of its primitives."""
    from syno_automl.known import classify

    try:
        kind = classify(op)
    except Exception:  # noqa: BLE001 -- naming never stops the final stage
        kind = None
    if kind:
        return kind
    return f"new: {short_description(op.primitives)}" if primitives else "new (no known form)"


@dataclass
class Finalist:
    """One re-trained candidate (or the baseline, label ``baseline``): its value per training seed."""

    label: str                      # the operator's hash, or "baseline"
    trial: int | None               # its search trial
    description: str
    cost_ratio: float | None        # planned cost vs the replaced layers' (the search's figure)
    search_value: float | None      # its value in the search (fewer epochs, one seed)
    values: list[float] = field(default_factory=list)   # one per seed that trained to the end
    failures: list[str] = field(default_factory=list)   # why the other seeds failed
    speedup: float | None = None    # baseline model latency / substituted model latency (None: not measured)
    latency_ms: float | None = None  # the substituted (baseline: original) model's median latency
    tokens_per_s: float | None = None  # lm: the baseline's timed tokens / latency_ms, an operator's that x speedup
    run_id: str | None = None       # its MLflow run (role "final")
    speedup_low: float | None = None   # the speedup's 95 % interval (speed.paired); None: not measured so
    speedup_high: float | None = None
    flops: float | None = None      # the operator's FLOPs and parameters (the tie rule's keys)
    params: float | None = None
    skipped: str | None = None      # why it was not re-trained (its trial value far outside the margin), or None

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def sd(self) -> float | None:
        """Sample standard deviation over seeds (0 for a single seed)."""
        if not self.values:
            return None
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0

    def figure(self) -> str:
        """``0.975 ± 0.004`` (``failed`` when every seed failed; ``not re-trained`` when none ran: the baseline of
        a final stage without a finalist)."""
        if self.mean is None:
            return "failed" if self.failures else "not re-trained"
        return f"{self.mean:.3f} ± {self.sd:.3f}"

    def value_interval(self) -> tuple[float, float] | None:
        """The 95 % interval of the mean value over seeds (Student's t; a point for one seed or equal values)."""
        if self.mean is None:
            return None
        if len(self.values) < 2:
            return self.mean, self.mean
        from syno_automl.speed.paired import t_quantile

        half = t_quantile(len(self.values) - 1) * statistics.stdev(self.values) / math.sqrt(len(self.values))
        return self.mean - half, self.mean + half

    def speed_interval(self) -> tuple[float, float] | None:
        """The speedup's 95 % interval (None: not measured; a point for a figure stored without one)."""
        if self.speedup is None:
            return None
        if self.speedup_low is None or self.speedup_high is None:
            return self.speedup, self.speedup
        return self.speedup_low, self.speedup_high

    @property
    def faster(self) -> bool:
        """Measurably faster than the baseline: the whole speed interval is above 1."""
        interval = self.speed_interval()
        return interval is not None and interval[0] > 1.0

    def speedup_text(self) -> str:
        """``1.41× [1.37, 1.45]`` (``unmeasured``; no interval for a figure stored without one)."""
        if self.speedup is None:
            return "unmeasured"
        if self.speedup_low is None or self.speedup_high is None:
            return f"{self.speedup:.2f}×"
        return f"{self.speedup:.2f}× [{self.speedup_low:.2f}, {self.speedup_high:.2f}]"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "trial": self.trial, "description": self.description,
                "cost_ratio": self.cost_ratio, "search_value": self.search_value, "values": list(self.values),
                "mean": self.mean, "sd": self.sd, "failures": list(self.failures), "speedup": self.speedup,
                "latency_ms": self.latency_ms, "tokens_per_s": self.tokens_per_s, "run_id": self.run_id,
                "speedup_low": self.speedup_low, "speedup_high": self.speedup_high, "flops": self.flops,
                "params": self.params, "skipped": self.skipped}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finalist:
        """The finalist :meth:`to_dict` wrote (mean and sd are recomputed from the values)."""
        return cls(str(data.get("label")), data.get("trial"), str(data.get("description") or ""),
                   data.get("cost_ratio"), data.get("search_value"), [float(v) for v in data.get("values") or []],
                   [str(f) for f in data.get("failures") or []], data.get("speedup"), data.get("latency_ms"),
                   data.get("tokens_per_s"), data.get("run_id"), data.get("speedup_low"), data.get("speedup_high"),
                   data.get("flops"), data.get("params"), data.get("skipped"))


@dataclass
class FinalResult:
    """The final stage's figures and its verdict. ``maximize``: accuracy (higher is better; `margin` an absolute
    share, shown in pp) vs a loss (lower is better; `margin` absolute, in nats)."""

    baseline: Finalist
    candidates: list[Finalist]
    seeds: int
    epochs: int                      # training budget per seed, in `unit` (the lm task: steps)
    margin: float
    timing: str                      # how the speedups were measured, e.g. "torch eager inference, batch 64, 1 thread"
    metric: str = "accuracy"
    maximize: bool = True
    seconds: float = 0.0
    unit: str = "epochs"
    # why no operator was re-trained, when none was: what "faster" meant (measured on a target, or planned)
    no_candidate: str = NO_CHEAPER_OPERATOR
    # finalists left out before re-training (each says why: its trial value far outside the margin), not candidates
    skipped: list[Finalist] = field(default_factory=list)

    def within(self, f: Finalist) -> bool:
        """Whether `f`'s mean is within the margin of the baseline's mean (both re-trained alike)."""
        if f.mean is None or self.baseline.mean is None:
            return False
        if self.maximize:
            return f.mean >= self.baseline.mean - self.margin - 1e-12
        return f.mean <= self.baseline.mean + self.margin + 1e-12

    def tied(self) -> list[Finalist]:
        """The fastest candidate that is within the margin and measurably faster (its speed interval above 1), and
        every such candidate tied with it — its speed interval and its value interval overlap the fastest's —
        ordered by the tie rule: fewer FLOPs, then fewer parameters, then the hash. The first is the one named."""
        ok = [f for f in self.candidates if self.within(f) and f.faster]
        if not ok:
            return []
        top = max(ok, key=lambda f: (f.speedup or 0.0, _signed(f.mean, self.maximize), f.label))
        group = [f for f in ok if _overlap(f.speed_interval(), top.speed_interval())
                 and _overlap(f.value_interval(), top.value_interval())]
        return sorted(group, key=_tie_key)

    @property
    def chosen(self) -> Finalist | None:
        """The operator the verdict names (:meth:`tied`'s first), or None: no candidate within the margin is
        measurably faster."""
        group = self.tied()
        return group[0] if group else None

    @property
    def best(self) -> Finalist | None:
        """The candidate with the best mean value (None when every one failed)."""
        done = [f for f in self.candidates if f.mean is not None]
        return max(done, key=lambda f: _signed(f.mean, self.maximize)) if done else None

    def margin_text(self) -> str:
        return f"{self.margin * 100:g} pp" if self.maximize else f"{self.margin:g} nats"

    def budget_text(self) -> str:
        """``3 seeds × 4 epochs``: what every re-trained model trained for."""
        return f"{counted(self.seeds, 'seeds')} × {counted(self.epochs, self.unit)}"

    def difference(self, f: Finalist) -> float | None:
        """`f`'s mean minus the baseline's (None when either failed to re-train)."""
        if f.mean is None or self.baseline.mean is None:
            return None
        return f.mean - self.baseline.mean

    def of_trial(self, number: int) -> Finalist | None:
        """The re-trained model of search trial `number` (the baseline's too), or None: not a finalist (nor a
        baseline left untrained because no operator qualified)."""
        return next((f for f in [self.baseline, *self.candidates] if f.trial == number and (f.values or f.failures)),
                    None)

    def summary(self, f: Finalist) -> str:
        """One line on `f`'s re-trained figures, for ``syno-automl show``: ``accuracy 0.602 ± 0.032 (2 seeds × 1
        epochs; baseline 0.760 ± 0.071), speedup 1.46× (torch eager ...): not within 1 pp of the baseline``."""
        if f is self.baseline:
            return (f"{self.metric} {f.figure()} ({self.budget_text()}, re-trained alike with each finalist), "
                    f"latency {'-' if f.latency_ms is None else f'{f.latency_ms:.3g} ms'} ({self.timing})")
        verdict = ("named: the fastest within " if f is self.chosen else
                   "within " if self.within(f) else "not within ") + f"{self.margin_text()} of the baseline"
        return (f"{self.metric} {f.figure()} ({self.budget_text()}; baseline {self.baseline.figure()}), "
                f"speedup {f.speedup_text()} ({self.timing}): {verdict}")

    def verdict(self) -> str:
        """The line a search ends with (see the module docstring)."""
        maximize = self.maximize
        head = (f"within {self.margin_text()} of the baseline" if maximize
                else f"within {self.margin_text()} of the baseline's {self.metric}")
        base = self.baseline.figure()
        budget = self.budget_text()
        chosen = self.chosen
        if chosen is not None:
            value = (f"{self.metric} {chosen.figure()} (baseline {base}, {budget})" if maximize
                     else f"{self.metric} {chosen.figure()} ({budget})")
            found = f"fastest operator {head}: " if maximize else f"fastest operator {head} {base}: "
            return (f"{found}{chosen.label} {chosen.description} {value}, speedup {chosen.speedup_text()} "
                    f"({self._throughput(chosen)}{self.timing}){self._tie_text()}")
        if not self.candidates:
            return f"no operator {head} ({self.no_candidate}: none to re-train)"
        if self.baseline.mean is None:
            return f"no operator {head}: the baseline failed to re-train"
        within = sorted((f for f in self.candidates if self.within(f)), key=lambda f: -_signed(f.mean, maximize))
        if within and all(f.speedup is None for f in within):
            return (f"no speed claim: {len(within)} operator{'s' if len(within) != 1 else ''} {head} {base} "
                    f"(best: {within[0].label} {self.metric} {within[0].figure()}; {budget}), their speed not "
                    f"measured ({self.timing})")
        if within:
            fastest = max((f for f in within if f.speedup is not None), key=lambda f: f.speedup or 0.0)
            return (f"no operator {head} {base} is measurably faster (fastest: {fastest.label} {self.metric} "
                    f"{fastest.figure()}, speedup {fastest.speedup_text()}, an interval that holds 1 or lies below "
                    f"it; {budget}, {self._throughput(fastest)}{self.timing})")
        best = self.best
        if best is None:
            return f"no operator {head} {base} (every finalist failed to re-train)"
        metric = "" if maximize else f"{self.metric} "
        return (f"no operator {head} {base} (best: {best.label} {metric}{best.figure()}, speedup "
                f"{best.speedup_text()}; {budget}, {self._throughput(best)}{self.timing})")

    @property
    def target(self) -> str | None:
        """The speed target the speedups were measured on: the start of the timing label (``cpu.eager: torch eager
        inference, ...``, speed.probe), None for a label that does not name one."""
        from syno_automl.runtime.target import SPEED_TARGETS

        head, colon, _ = self.timing.partition(":")
        return head if colon and head in SPEED_TARGETS else None

    def warnings(self) -> list[str]:
        """What makes the verdict weaker than it reads: the baseline's own spread over its seeds above the margin
        (then "within the margin" is within the baseline's noise)."""
        sd = self.baseline.sd
        if sd is None or len(self.baseline.values) < 2 or sd <= self.margin:
            return []
        spread = f"{sd * 100:.1f} pp" if self.maximize else f"{sd:.3g} nats"
        return [f"the baseline's {self.metric} varies by sd {spread} over its {len(self.baseline.values)} seeds, "
                f"more than the {self.margin_text()} margin: an operator within the margin is within the "
                f"baseline's own noise (more --final-seeds, or a margin above that spread, make it a statement)"]

    def _tie_text(self) -> str:
        """``; tied in accuracy and speed with 2 others (ab12…, cd34…): named by fewer FLOPs, then parameters,
        then hash`` ('' when the named operator has no tie)."""
        group = self.tied()
        others = group[1:]
        if not others:
            return ""
        what = "accuracy" if self.maximize else self.metric
        return (f"; tied in {what} and speed with {len(others)} other{'s' if len(others) > 1 else ''} "
                f"({', '.join(f.label for f in others)}): named by fewer FLOPs, then parameters, then hash; "
                f"{_decided(group[0], group[1])}")

    def _throughput(self, f: Finalist) -> str:
        """``75,100 vs 57,300 tokens/s; `` (the operator's vs the baseline's), '' when either is unmeasured."""
        if f.tokens_per_s is None or self.baseline.tokens_per_s is None:
            return ""
        return f"{f.tokens_per_s:,.0f} vs {self.baseline.tokens_per_s:,.0f} tokens/s; "

    def table(self) -> list[str]:
        """One line per re-trained model, the baseline first (the lm task: with its tokens/s), then one per finalist
        left out, with why."""
        rate = any(f.tokens_per_s is not None for f in [self.baseline, *self.candidates])
        speedup = f"speedup on {self.target}" if self.target else "speedup [95% interval]"
        lines = [f"  {'':<16}  {self.metric:>15}  {speedup:>20}"
                 + (f"  {'tokens/s':>9}" if rate else "") + f"  {'cost':>6}  search  description"]
        for f in [self.baseline, *self.candidates]:
            cost = f"{f.cost_ratio:.2f}x" if f.cost_ratio is not None else "-"
            search = f"{f.search_value:.3f}" if f.search_value is not None else "-"
            tokens = (f"  {f.tokens_per_s:>9,.0f}" if f.tokens_per_s is not None else f"  {'-':>9}") if rate else ""
            mark = " *" if f is self.chosen else ""
            fails = f"  ({counted(len(f.failures), 'seeds')} failed: {f.failures[0][:60]})" if f.failures else ""
            lines.append(f"  {f.label:<16}  {f.figure():>15}  {f.speedup_text():>20}{tokens}  {cost:>6}  "
                         f"{search:>6}  {f.description}{mark}{fails}")
        for f in self.skipped:
            cost = f"{f.cost_ratio:.2f}x" if f.cost_ratio is not None else "-"
            search = f"{f.search_value:.3f}" if f.search_value is not None else "-"
            tokens = f"  {'-':>9}" if rate else ""
            lines.append(f"  {f.label:<16}  {f.figure():>15}  {'-':>20}{tokens}  {cost:>6}  {search:>6}  "
                         f"{f.description}  ({f.skipped})")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the study's user attribute ``syno.final``."""
        chosen = self.chosen
        return {"seeds": self.seeds, self.unit: self.epochs, "margin": self.margin, "timing": self.timing,
                "metric": self.metric, "maximize": self.maximize, "seconds": round(self.seconds, 1),
                "verdict": self.verdict(),
                "chosen": chosen.label if chosen is not None else None, "baseline": self.baseline.to_dict(),
                "candidates": [f.to_dict() for f in self.candidates], "no_candidate": self.no_candidate,
                "skipped": [f.to_dict() for f in self.skipped]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FinalResult:
        """The result :meth:`to_dict` wrote (the study's user attribute ``syno.final``): the verdict, the chosen
        operator and every figure are recomputed from the stored values, so that readers judge as the search did.

        Example:
            >>> base = Finalist("baseline", 0, "the original layers", 1.0, 0.98, [0.98, 0.982], speedup=1.0)
            >>> op = Finalist("fd7a7e8401b23d0b", 1, "REDUCE C_in", 0.7, 0.9, [0.975, 0.977], speedup=1.4)
            >>> stored = FinalResult(base, [op], 2, 4, 0.01, "torch eager inference").to_dict()
            >>> FinalResult.from_dict(stored).verdict() == stored["verdict"]
            True
        """
        unit = "steps" if "steps" in data else "epochs"
        return cls(Finalist.from_dict(data.get("baseline") or {}),
                   [Finalist.from_dict(c) for c in data.get("candidates") or []], seeds=int(data.get("seeds") or 0),
                   epochs=int(data.get(unit) or 0), margin=float(data.get("margin") or 0.0),
                   timing=str(data.get("timing") or ""), metric=str(data.get("metric") or "accuracy"),
                   maximize=bool(data.get("maximize", True)), seconds=float(data.get("seconds") or 0.0), unit=unit,
                   no_candidate=str(data.get("no_candidate") or NO_CHEAPER_OPERATOR),
                   skipped=[Finalist.from_dict(c) for c in data.get("skipped") or []])


def stored_final(study: Any) -> FinalResult | None:
    """The final stage's result stored with `study` (user attribute ``syno.final``), or None: no final stage ran
    (``--finalists 0``, an interrupted search, a study made before the stage existed)."""
    from syno_automl import vocabulary as V

    data = study.user_attrs.get(V.FINAL)
    return FinalResult.from_dict(data) if isinstance(data, dict) and data.get("baseline") else None


def _signed(value: float | None, maximize: bool) -> float:
    if value is None:
        return -math.inf
    return value if maximize else -value


def _overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def _decided(named: Finalist, next_one: Finalist) -> str:
    """Which criterion of the tie rule put `named` before `next_one` (the first that differs), with the figures."""
    for what, a, b in (("FLOPs", named.flops, next_one.flops), ("parameters", named.params, next_one.params)):
        if a is not None and b is not None and a != b:
            return f"decided by {what}: {a:,.0f} vs {b:,.0f} ({next_one.label})"
        if (a is None) != (b is None):
            return f"decided by {what}: {next_one.label}'s are unknown"
    return f"decided by the hash: FLOPs and parameters equal to {next_one.label}'s"


def _tie_key(f: Finalist) -> tuple[float, float, str]:
    """The tie rule: fewer FLOPs, then fewer parameters, then the hash (unknown counts last)."""
    return (f.flops if f.flops is not None else math.inf, f.params if f.params is not None else math.inf, f.label)
