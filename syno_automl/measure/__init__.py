"""TVM latency of operators, of the layers they replace and of whole models, and its comparison with torch
(the ``"torch"`` target: eager PyTorch, timed against the replaced layer by the one speed protocol of
:mod:`syno_automl.speed`).

One concept per module, in MetaSchedule's vocabulary; these are all of its modules:

* :mod:`~syno_automl.measure.result`: :class:`Latency`, TVM's :class:`TimingProtocol`/:data:`PROTOCOL`, speedups,
  schedule labels, failure notes (imports neither torch nor tvm);
* :mod:`~syno_automl.measure.request`: :class:`MeasureRequest`, the settings every entry point below takes
  (targets, trials, seconds, work_dir, protocol, seed, inductor, isolate, runner...), frozen and checked once;
* :mod:`~syno_automl.measure.target`: TVM target specs (``llvm``, ``cuda``, ``rpc:KEY@host:port``, ``torch``),
  ``<device>`` names, RPC reachability;
* :mod:`~syno_automl.measure.database`: the on-disk tuning database (``$SYNO_TVM_WORK_DIR``);
* :mod:`~syno_automl.measure.metaschedule`: builder, runner, tuning monitor, THE tuning loop;
* :mod:`~syno_automl.measure.compile_worker`: MetaSchedule's builds in worker processes with a time limit;
* :mod:`~syno_automl.measure.timing`: TVM modules (local, RPC) by TVM's protocol; torch modules against their
  baseline by the speed protocol (:func:`time_torch_pair`);
* :mod:`~syno_automl.measure.isolate`: one child process with a hard timeout;
* :mod:`~syno_automl.measure.kernel` (one PrimFunc), :mod:`~syno_automl.measure.relax` and
  :mod:`~syno_automl.measure.model` (a whole model), :mod:`~syno_automl.measure.baseline` (the replaced layers),
  :mod:`~syno_automl.measure.replaced_layers` (an operator in every layer it replaces),
  :mod:`~syno_automl.measure.substituted_model` (a model with and without an operator).

Never-raise contract: a measurement that fails gives ``median_ms=None`` and its reason in ``note``.
Env knobs: ``SYNO_TVM_WORK_DIR``, ``SYNO_MS_RUNNER``, ``SYNO_TVM_FULL_INTRIN``, ``SYNO_LATENCY_RAISE``.

Example::

    from syno_automl import measure
    req = measure.MeasureRequest(targets=("llvm",), trials=64)
    lat = measure.tune_and_time(measure.conv2d_nchw_te(1, 64, 64, 56, 56, 3), "llvm", req)
    lat.median_ms, lat.spread_ms, lat.note
    measure.measure_layers(op, req, sizes={"N": 1})["metrics"]  # an operator in every layer it replaces
"""

from __future__ import annotations

from syno_automl.measure.baseline import (
    baseline_kernel,
    baseline_module,
    conv1d_ncw_te,
    conv2d_nchw_te,
    dense_te,
    infer_baseline,
)
from syno_automl.measure.database import DEFAULT_WORK_DIR
from syno_automl.measure.kernel import apply_record, compare, tune_and_time
from syno_automl.measure.model import compare_models, model_latency
from syno_automl.measure.relax import export_relax, prepare_relax, relax_run
from syno_automl.measure.replaced_layers import measure_layers, measure_operator
from syno_automl.measure.request import MeasureRequest
from syno_automl.measure.result import (
                                        EAGER,
                                        PROTOCOL,
                                        UNTUNED,
                                        Latency,
                                        TimingProtocol,
                                        error_note,
                                        failed_at,
                                        schedules_label,
                                        schedules_tag,
                                        slug,
                                        speedup,
                                        stored_entry,
)
from syno_automl.measure.substituted_model import measure_substitution, model_metrics, substituted_models
from syno_automl.measure.target import TVM_HINT, device_name, needs_tvm, parse_target, resolve_target, torch_device
from syno_automl.measure.timing import time_main, time_torch, time_torch_pair

__all__ = [
    "MeasureRequest", "Latency", "TimingProtocol", "PROTOCOL", "UNTUNED", "EAGER", "schedules_label", "schedules_tag",
    "speedup", "stored_entry", "error_note", "failed_at", "slug",
    "parse_target", "device_name", "resolve_target", "torch_device", "needs_tvm", "TVM_HINT",
    "DEFAULT_WORK_DIR", "tune_and_time", "compare", "apply_record", "time_main", "time_torch", "time_torch_pair",
    "conv2d_nchw_te", "conv1d_ncw_te", "dense_te", "infer_baseline", "baseline_kernel", "baseline_module",
    "measure_operator", "measure_layers",
    "export_relax", "prepare_relax", "relax_run", "model_latency", "compare_models",
    "substituted_models", "measure_substitution", "model_metrics",
]
