"""Measure a cost profile on this machine: ``calibrate(space_or_substitution, target)``.

It samples operators from the user's own space (the cost budget lifted, so that cheap and dear ones both come),
times each operator's module at each distinct mapping on the target's device -- one training step (forward +
backward) in eager torch, or one inference step under ``torch.compile`` for a compiled target (the deployed
model) -- and fits the profile's few coefficients (FLOP, element written, element read, kernel launch; see
syno_automl.cost_profile) to those times by non-negative least squares on relative error, with a constant per call
(Python's call overhead, not a property of any operator). The operators it picks depend on the seed alone; the
coefficients depend on the machine, as they should.

Example:
    >>> import torch
    >>> from torch import nn
    >>> from syno_automl.placeholder import substitute
    >>> from syno_automl.calibrate import calibrate
    >>> sub = substitute(nn.Sequential(nn.Conv2d(8, 8, 3, padding=1)), nn.Conv2d, torch.randn(2, 8, 8, 8),
    ...                  cost_ratio=None)
    >>> profile = calibrate(sub, "cpu.eager", operators=4, progress=False)   # doctest: +SKIP
"""
from __future__ import annotations

import datetime
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from syno_automl.cost_profile import COEFFICIENTS, TARGETS, CostProfile
from syno_automl.errors import CostProfileError, EmptySpaceError, OptionTypeError
from syno_automl.runtime.device import why_not_runnable
from syno_automl.runtime.target import parse_target
from syno_automl.space import Operator, OperatorSpace

__all__ = ["calibrate", "fit_coefficients", "features", "fit_report", "UNIT"]

#: the profile's unit: nanoseconds (seconds_per_unit = 1e-9)
UNIT = 1e-9


def features(counts: dict[str, float], fuse_views: bool, inference: bool = False) -> list[float]:
    """A program's counts (``Operator.cost``) as the quantities the coefficients price, in COEFFICIENTS' order
    (CostProfile.total is their dot product with the coefficients)."""
    written, kernels = counts["materialized"], counts["kernels"]
    if inference:
        written, kernels = written - counts["gradients"], kernels - counts["gradient_kernels"]
    if not fuse_views:
        return [counts["flops"], written, counts["read"], kernels]
    return [counts["flops"], written - counts["copied"] + counts["fused_copied"],
            counts["read"] - counts["copy_read"] + counts["fused_copied"],
            kernels - counts["copy_kernels"] + counts["fused_copy_kernels"]]


def fit_coefficients(rows: Sequence[Sequence[float]], seconds: Sequence[float]) -> tuple[dict[str, float], float]:
    """Non-negative least squares of ``seconds ~ intercept + rows @ coefficients`` in relative error (each row
    weighted by 1 / its time, so a 100 ms operator does not drown the 1 ms ones); returns (coefficients in
    nanoseconds per unit, intercept in seconds)."""
    from scipy.optimize import nnls

    x = np.asarray(rows, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if x.ndim != 2 or x.shape[1] != len(COEFFICIENTS) or len(t) != len(x) or len(t) < 2:
        raise CostProfileError(f"calibrate needs at least 2 timed programs, got {len(t)}")
    a = np.hstack([x, np.ones((len(x), 1))])
    scale = a.max(axis=0)
    scale[scale == 0] = 1.0  # a quantity no program has (e.g. no kernel ever copied): its coefficient stays 0
    weights = 1.0 / t
    solution, _ = nnls(a / scale * weights[:, None], t * weights)
    solution = solution / scale
    coefficients = {name: float(solution[i] / UNIT) for i, name in enumerate(COEFFICIENTS)}
    if not any(coefficients.values()):  # the times are all call overhead: price FLOPs at what they averaged
        coefficients["flop"] = float(np.mean(t) / max(np.mean(x[:, 0]), 1.0) / UNIT)
    return coefficients, float(solution[-1])


def _device_name(device: str) -> str:
    import torch

    if device == "cuda":
        return torch.cuda.get_device_name(0)
    return f"{platform.machine()} CPU, {torch.get_num_threads()} torch thread(s)"


def _step_seconds(module: Any, x: Any, repeats: int, sync: Callable[[], None], inference: bool) -> float:
    """Median seconds of one forward + backward, or of one forward without grad (after one untimed warm-up,
    which also compiles)."""
    import torch

    times = []
    for i in range(repeats + 1):
        for p in module.parameters():
            p.grad = None
        sync()
        start = time.perf_counter()
        if inference:
            with torch.no_grad():
                module(x)
        else:
            module(x).square().mean().backward()
        sync()
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def _space_of(space_or_substitution: Any) -> OperatorSpace:
    space = getattr(space_or_substitution, "space", space_or_substitution)
    if not isinstance(space, OperatorSpace):
        raise OptionTypeError(f"calibrate needs an OperatorSpace or a Substitution, got a {type(space).__name__}")
    config = space.config()
    config.pop("max_cost", None)  # calibrate over cheap and dear operators alike
    config.pop("cost_profile", None)
    return OperatorSpace(**config, seed=space.seed, threads=space.threads)


def calibrate(space_or_substitution: Any, target: str, *, operators: int = 24, seed: int = 0,
              repeats: int = 3, progress: bool = True, out: str | os.PathLike[str] | None = None,
              sample_time: float = 60.0) -> CostProfile:
    """Times ``operators`` operators of the space on ``target`` and returns (and writes to ``out``) its profile.

    Args:
        space_or_substitution: an OperatorSpace or the Substitution of ``substitute()`` (its space is used, without
            its cost budget; every mapping is timed).
        target: ``"cpu.eager"``, ``"cpu.compiled"``, ``"cuda.eager"`` or ``"cuda.compiled"``.
        operators: how many operators to sample (deterministic for ``seed``).
        repeats: timed steps per program (median).
        progress: a tqdm progress bar on stderr.
        out: where to write the profile (JSON), if anywhere.
        sample_time: seconds allowed to sample the operators.

    Raises:
        CostProfileError: an unknown target, a CUDA target without CUDA, or too few programs timed to fit.
    """
    import torch

    if target not in TARGETS:
        raise CostProfileError(f"unknown target {target!r} (known: {', '.join(TARGETS)})")
    parsed = parse_target(target)
    device = parsed.device
    why = why_not_runnable(parsed)
    if why is not None:
        raise CostProfileError(f"target {target} needs a CUDA device: {why}")
    space = _space_of(space_or_substitution)
    try:
        ops = space.sample(operators, seed=seed, time_limit=sample_time)
    except EmptySpaceError as e:
        raise CostProfileError(f"calibrate found no operator to time: {e}") from None
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    fuse = parsed.compiled
    inference = fuse  # a compiled target is the deployed model: its speed is inference's (as the shipped one)
    rows, seconds, failed = [], [], 0
    distinct: list[int] = []  # layers of the same sizes (ResNet-18's 13 convs have 4) are one program: timed once
    for i in range(space.num_mappings):
        if space.mapping(i) not in [space.mapping(j) for j in distinct]:
            distinct.append(i)
    programs = [(op, i) for op in ops for i in distinct]
    bar = _progress(programs, progress, f"calibrate {target}")
    for op, i in bar:
        try:
            t = _time_program(op, i, device, fuse, repeats, sync, inference)
        except (RuntimeError, MemoryError):  # e.g. out of memory on a large mapping: not a data point
            failed += 1
            continue
        rows.append(features(op.cost(i), fuse, inference))
        seconds.append(t)
    coefficients, intercept = fit_coefficients(rows, seconds)
    profile = CostProfile(
        target=target, **coefficients, device=_device_name(device), torch=torch.__version__,
        date=datetime.date.today().isoformat(),
        source=(f"calibrate: {len(ops)} operators sampled (seed {seed}) from the space {space.input_shape} -> "
                f"{space.output_shape} at {len(distinct)} distinct mapping(s), each timed "
                f"{'compiled' if fuse else 'eager'} on {device} ({'inference' if inference else 'training'} step, "
                f"median of {repeats})"),
        seconds_per_unit=UNIT, step="inference" if inference else "train",
        fit=fit_report(rows, seconds, coefficients, intercept, failed, fuse))
    if out is not None:
        profile.save(Path(out))
    return profile


def _time_program(op: Operator, mapping: int, device: str, compiled: bool, repeats: int,
                  sync: Callable[[], None], inference: bool = False) -> float:
    import torch

    module = op.to_module(mapping).to(device)
    x = torch.randn(*op.program(mapping)["input"]["shape"], device=device, requires_grad=not inference)
    run = torch.compile(module) if compiled else module
    return _step_seconds(_Params(run, module), x, repeats, sync, inference)


class _Params:
    """A callable module whose parameters are the eager module's (torch.compile's wrapper shares them)."""

    def __init__(self, run: Any, module: Any) -> None:
        self._run, self._module = run, module

    def __call__(self, x: Any) -> Any:
        return self._run(x)

    def parameters(self) -> Any:
        return self._module.parameters()


def fit_report(rows: list[list[float]], seconds: list[float], coefficients: dict[str, float], intercept: float,
                failed: int, fuse: bool) -> dict[str, Any]:
    from scipy.stats import spearmanr

    predicted = [sum(coefficients[n] * UNIT * r[j] for j, n in enumerate(COEFFICIENTS)) for r in rows]
    rho = spearmanr(predicted, seconds).statistic if len(rows) > 2 else float("nan")
    errors = [abs(math.log((p + intercept) / t)) for p, t in zip(predicted, seconds) if p + intercept > 0]
    return {"programs": len(rows), "failed": failed, "intercept_s": intercept,
            "spearman": None if math.isnan(rho) else float(rho),
            "median_abs_log_error": float(statistics.median(errors)) if errors else None,
            "fused_views": fuse}


def _progress(items: list, enabled: bool, label: str) -> Any:
    if not enabled:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=label, unit="program")
