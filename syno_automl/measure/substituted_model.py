"""Model-level speedup of an operator over the layers it replaces (the paper's Fig. 5): the model of a
:class:`~syno_automl.placeholder.Substitution` with its original layers vs with the operator installed.

Example::

    sub = substitute(model, nn.Conv2d, torch.randn(1, 3, 32, 32), flops_ratio=0.5)
    res = measure_substitution(sub, sub.space.sample(1)[0], torch.randn(1, 3, 32, 32),
                               request=MeasureRequest(trials=64))
    res["baseline"].median_ms, res["model"].median_ms, res["speedup"]
"""

from __future__ import annotations

from typing import Any

from syno_automl import vocabulary as V
from syno_automl.errors import OptionError
from syno_automl.measure.model import compare_models
from syno_automl.measure.request import MeasureRequest
from syno_automl.measure.result import Latency
from syno_automl.measure.target import safe_device_name

__all__ = ["substituted_models", "measure_substitution", "model_metrics"]


def substituted_models(sub, op=None, *, bias: bool | None = None):
    """``(baseline, substituted)``: deep copies of ``sub.model`` running the original layers, and running ``op`` in
    every placeholder (fresh weights; ``op=None``: the operator already applied). ``sub`` and its model are left
    as they were."""
    from syno_automl.placeholder import Placeholder, install, placeholders

    if op is None and sub.operator is None:
        raise OptionError("no operator: pass op, or call sub.apply(op) first")
    baseline, substituted = sub.original_model(), sub.copy_model()
    if op is not None:
        install(substituted, op, bias=bias)
    assert all(isinstance(p, Placeholder) for _, p in placeholders(substituted))
    return baseline.eval(), substituted.eval()


def measure_substitution(sub, op=None, example_inputs=None, target: Any = None,
                         request: MeasureRequest = MeasureRequest(), **kwargs) -> dict[str, Any]:
    """Model-level speedup of ``op`` over the layers it replaces, exported at the shapes of ``example_inputs``
    (batch 1 in the paper), same request (budget and protocol) on ``target`` (default: the request's only target).
    See :func:`~syno_automl.measure.model.compare_models` (also for ``kwargs``)."""
    if example_inputs is None:
        raise OptionError("example_inputs is required (e.g. torch.randn(1, 3, 32, 32))")
    if target is None:
        target = request.target
    try:
        baseline, substituted = substituted_models(sub, op)
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        name = target if isinstance(target, str) else str(target)
        failed = Latency.failed(name, f"substitute: {type(exc).__name__}: {exc}")
        return {"baseline": failed, "model": failed, "speedup": None}
    return compare_models(baseline, substituted, example_inputs, target, request, **kwargs)


def model_metrics(sub, op=None, example_inputs=None, request: MeasureRequest = MeasureRequest(), *,
                  prefix: str = "model_", details: bool = False, **kwargs) -> dict[str, Any]:
    """:func:`measure_substitution` on every target of ``request``, as MLflow metrics (``<device>`` as in
    :func:`~syno_automl.measure.target.device_name`)::

        {"<prefix>latency_ms.<device>": the substituted model, "<prefix>speedup.<device>": baseline / model,
         "notes": {metric name: why it is missing}}

    plus ``"details": {"baseline.<device>": Latency dict, "model.<device>": ...}`` with ``details=True``."""
    out: dict[str, Any] = {}
    notes: dict[str, str] = {}
    info: dict[str, Any] = {}
    for t in request.targets:
        dev = safe_device_name(t)
        res = measure_substitution(sub, op, example_inputs, t, request, **kwargs)
        lat_key, sp_key = prefix + V.latency_metric(dev), prefix + V.speedup_metric(dev)
        out[lat_key] = res["model"].median_ms
        out[sp_key] = res["speedup"]
        if out[lat_key] is None:
            notes[lat_key] = res["model"].note
        if out[sp_key] is None:
            notes[sp_key] = (f"baseline: {res['baseline'].note}" if not res["baseline"].ok
                             else f"model: {res['model'].note}")
        info[f"baseline.{dev}"] = res["baseline"].to_dict()
        info[f"model.{dev}"] = res["model"].to_dict()
    out["notes"] = notes
    if details:
        out["details"] = info
    return out
