"""End-to-end model latency through Relax (syno_automl.measure): small_cnn at batch 1 on 16x16 inputs, the
baseline and the model with an operator in every 3x3 conv, tiny budgets."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from _rpc_helpers import rpc_tracker_fixture  # noqa: E402

from lightning_modules.models import build_model  # noqa: E402
from syno_automl import measure as e2e  # noqa: E402
from syno_automl import measure as lat  # noqa: E402
from syno_automl.placeholder import substitute  # noqa: E402

pytestmark = pytest.mark.tvm
QUICK = lat.TimingProtocol(warmup=1, number=3, repeat=5, min_repeat_ms=5)
RTOL = 1e-4
# what relax_run checks is the import (export, Relax, legalization, fusion): LLVM's optimizer off (opt-level 0)
# computes the same values in a fraction of the build; the -O3 build is verified against torch in the latency tests
UNOPTIMIZED = '{"kind": "llvm", "opt-level": 0}'


def _close(got, ref, rtol=RTOL):
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * scale)


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    model = build_model("small_cnn", num_classes=10, in_channels=3).eval()
    x = torch.randn(1, 3, 16, 16)
    sub = substitute(model, torch.nn.Conv2d, x, flops_ratio=0.5, cost_ratio=None, priors=False)  # UNFOLDs too
    ops = sub.space.sample(8, seed=0)
    # one operator with an UNFOLD (exported as aten.unfold, which needs our converter) and one without
    with_unfold = next(op for op in ops if op.primitive_counts().get("UNFOLD"))
    without = next(op for op in ops if not op.primitive_counts().get("UNFOLD"))
    return sub, x, [with_unfold, without]


def test_relax_outputs_match_torch(setup):
    """relax_run on the model whose operator has an UNFOLD (our converter). The Relax import of every model here is
    also checked against torch by the latency tests below, the same tolerance, at -O3: the baseline and this model
    untuned, the baseline and the other model tuned."""
    sub, x, ops = setup
    baseline, model = e2e.substituted_models(sub, ops[0])
    assert all(p.operator is None for p in baseline.modules() if hasattr(p, "operator"))
    assert any(p.operator is not None for p in model.modules() if hasattr(p, "operator"))
    with torch.no_grad():
        ref = model(x).numpy()
    _close(e2e.relax_run(model, x, UNOPTIMIZED), ref)
    # the substitution itself is left as it was: placeholders running the original layers
    assert sub.operator is None and all(p.operator is None for _, p in sub.placeholders)


def test_untuned_model_latency(setup):
    sub, x, ops = setup
    m = e2e.model_metrics(sub, ops[0], x, lat.MeasureRequest(targets=("llvm", "cuda"), protocol=QUICK), details=True)
    for key in ("baseline.llvm", "model.llvm"):
        r = lat.Latency.from_dict(m["details"][key])
        assert r.ok, r.note
        assert r.median_ms > 0 and r.spread_ms >= 0 and r.repeats == QUICK.repeat and r.target == "llvm"
        assert "verify" not in r.note  # the VM output matched torch
    base, model = (m["details"][k]["median_ms"] for k in ("baseline.llvm", "model.llvm"))
    assert m["model_latency_ms.llvm"] == model
    assert m["model_speedup.llvm"] == pytest.approx(base / model)
    assert "model_latency_ms.llvm" not in m["notes"] and "model_speedup.llvm" not in m["notes"]
    if not tvm.cuda(0).exist:
        assert m["model_latency_ms.cuda"] is None and "CUDA" in m["notes"]["model_latency_ms.cuda"]
        assert m["model_speedup.cuda"] is None and m["notes"]["model_speedup.cuda"]


def test_failures_give_missing_latency(setup):
    sub, x, _ = setup

    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return x.nonzero()  # data-dependent output shape: torch.export fails without hints

    r = e2e.model_latency(DataDependent(), torch.randn(4))
    assert r.median_ms is None and r.note, r
    r = e2e.model_latency(build_model("small_cnn", num_classes=10, in_channels=3), x, "no_such_target")
    assert r.median_ms is None and r.note.startswith("target:"), r
    if not tvm.cuda(0).exist:
        r = e2e.model_latency(build_model("small_cnn", num_classes=10, in_channels=3), x, "cuda")
        assert r.median_ms is None and "CUDA" in r.note, r
    # the target is resolved before the export (seconds of torch.export and Relax import): an unusable one is the
    # note, the model is not even exported
    r = e2e.model_latency(DataDependent(), torch.randn(4), "rpc:nobody@127.0.0.1:1")
    assert r.median_ms is None and r.note.startswith("target:") and "unreachable" in r.note, r
    res = e2e.measure_substitution(sub, None, x)  # no operator given nor applied
    assert res["speedup"] is None and res["model"].note.startswith("substitute:")


@pytest.mark.slow
def test_tuned_model_latency_and_reuse(setup, tmp_path):
    """One trial per task, the same budget for both models; a re-run is served from the database."""
    sub, x, ops = setup
    wd = str(tmp_path)
    res = e2e.measure_substitution(sub, ops[1], x, request=lat.MeasureRequest(trials=1, work_dir=wd, seconds=120,
                                                                               protocol=QUICK, runner="inprocess"))
    base, model = res["baseline"], res["model"]
    assert base.ok, base.note
    assert model.ok, model.note
    assert base.tuned_trials >= 1 and model.tuned_trials >= 1 and not model.reused
    assert res["speedup"] is not None and res["speedup"] > 0
    # the same baseline again, in a child process (isolate=True): served from the database, no new trial
    again = e2e.model_latency(e2e.substituted_models(sub, ops[1])[0], x,
                              request=lat.MeasureRequest(trials=1, work_dir=wd, protocol=QUICK, isolate=True))
    assert again.ok and again.reused and again.tuned_trials == base.tuned_trials, again


rpc_tracker = rpc_tracker_fixture("syno-e2e")


@pytest.mark.slow
def test_model_latency_over_rpc(setup, rpc_tracker):
    """The Relax VM executable uploaded to a board behind the tracker, checked against torch and timed there."""
    sub, x, ops = setup
    _, model = e2e.substituted_models(sub, ops[0])
    target = f"rpc:syno-e2e@127.0.0.1:{rpc_tracker.port}"
    r = e2e.model_latency(model, x, target, lat.MeasureRequest(protocol=QUICK))
    assert r.ok, r.note
    assert r.target == target and r.repeats == QUICK.repeat
