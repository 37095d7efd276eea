"""A cost profile fitted to what a search measured: ``syno-automl calibrate --from-study`` (issue 32: the plan learns
from the measurements).

Each measurement in the study's store (syno_automl.speed.store) is the whole model's inference time with an
operator substituted, against the original's, taken in a trial. With B the original's time (the median over the
measurements, each ratio scaled to it), the substituted model's time is B / speedup = (the rest of the model) +
the operator's programs at every replaced layer. So the profile's coefficients (FLOP, element written, element
read, kernel launch; syno_automl.cost_profile) are fitted to those times, the operator's row being its programs'
counts summed over the replaced layers (:func:`syno_automl.calibrate.features`, inference), and the rest of the
model is the fit's intercept: the same non-negative least squares in relative error as ``calibrate``'s, no new
timing. The measurements of the most common conditions on the target (device, torch, precision) are used, and
the profile says which.

Example:
    >>> profile = profile_from_study(study, context, "cpu.eager")      # doctest: +SKIP
    >>> profile.step, profile.fit["programs"]                          # doctest: +SKIP
    ('inference', 24)
"""
from __future__ import annotations

import collections
import datetime
import statistics
from typing import TYPE_CHECKING

import optuna

from syno_automl import vocabulary as V
from syno_automl.calibrate import UNIT, features, fit_coefficients, fit_report
from syno_automl.cost_profile import TARGETS, CostProfile
from syno_automl.errors import CostProfileError, OperatorFormatError
from syno_automl.runtime.target import parse_target
from syno_automl.space import Operator
from syno_automl.speed.store import Measurement, MeasurementStore

if TYPE_CHECKING:
    from syno_automl.study.context import SearchContext

__all__ = ["MIN_MEASUREMENTS", "profile_from_study", "measured_rows"]

#: fewer operators than this do not pin four coefficients and an intercept
MIN_MEASUREMENTS = 6


def _operator_texts(study: optuna.Study) -> dict[str, str]:
    """Operator JSON by hash, from the study's trials."""
    from syno_automl.search.sampler import operator_json_of

    texts: dict[str, str] = {}
    for trial in study.get_trials(deepcopy=False):
        op_hash, text = trial.user_attrs.get(V.HASH), operator_json_of(trial)
        if isinstance(op_hash, str) and text is not None:
            texts.setdefault(op_hash, text)
    return texts


def _chosen(measurements: list[Measurement], target: str) -> list[Measurement]:
    """The operators' measurements on `target` under its most common conditions (device, torch, precision)."""
    on_target = [m for m in measurements if m.key.target == target and m.key.operator != "baseline"]
    groups = collections.Counter((m.key.device, m.key.torch, m.key.precision) for m in on_target)
    if not groups:
        return []
    (device, torch_version, precision), _ = groups.most_common(1)[0]
    return [m for m in on_target if (m.key.device, m.key.torch, m.key.precision) == (device, torch_version, precision)]


def measured_rows(study: optuna.Study, context: SearchContext, target: str) -> tuple[list[list[float]], list[float],
                                                                             list[Measurement]]:
    """(rows, seconds, measurements used): each measured operator's summed counts and its substituted model's
    time, scaled to the original's median time."""
    chosen = _chosen(MeasurementStore(study).all(), target)
    texts = _operator_texts(study)
    fuse = parse_target(target).compiled
    baseline_s = statistics.median(m.estimate.baseline_ms for m in chosen) / 1e3 if chosen else 0.0
    rows, seconds, used = [], [], []
    for m in chosen:
        text = texts.get(m.key.operator)
        if text is None:
            continue
        try:
            op = Operator.from_json(context.space, text)
        except OperatorFormatError:   # another space's operator (the study's settings differ from these)
            continue
        per_layer = [features(op.cost(i), fuse, inference=True) for i in range(context.space.num_mappings)]
        rows.append([sum(column) for column in zip(*per_layer)])
        seconds.append(baseline_s / m.estimate.ratio)
        used.append(m)
    return rows, seconds, used


def profile_from_study(study: optuna.Study, context: SearchContext, target: str) -> CostProfile:
    """The cost profile that the study's measurements on `target` fit (see the module docstring).

    Raises:
        CostProfileError: an unknown target, or fewer than MIN_MEASUREMENTS operators measured on it.
    """
    if target not in TARGETS:
        raise CostProfileError(f"unknown target {target!r} (known: {', '.join(TARGETS)})")
    rows, seconds, used = measured_rows(study, context, target)
    if len(rows) < MIN_MEASUREMENTS:
        raise CostProfileError(
            f"study {study.study_name!r} holds {len(rows)} operator measurement(s) on {target} that this space reads; "
            f"calibrate --from-study needs at least {MIN_MEASUREMENTS}: run more trials with --speed-objective "
            f"measured --target {target}, or calibrate without --from-study (it times operators itself)")
    coefficients, intercept = fit_coefficients(rows, seconds)
    key = used[0].key
    return CostProfile(
        target=target, **coefficients, device=key.device, torch=key.torch, date=datetime.date.today().isoformat(),
        source=(f"calibrate --from-study: {len(rows)} operators measured in the trials of study {study.study_name!r} "
                f"({key.device}, {key.precision}; whole-model inference against the original, scaled to its median "
                f"{statistics.median(m.estimate.baseline_ms for m in used):.3g} ms), the rest of the model as the "
                f"fit's intercept"),
        seconds_per_unit=UNIT, step="inference",
        fit=fit_report(rows, seconds, coefficients, intercept, 0, parse_target(target).compiled))
