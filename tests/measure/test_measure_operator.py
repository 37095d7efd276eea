"""syno_automl.measure.measure_operator: per-device metrics named as MLflow logs them, baselines inferred
from the program's shapes, missing values with their reasons. Tiny budgets."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from syno_automl import OperatorSpace, known  # noqa: E402
from syno_automl import measure as lat  # noqa: E402
from syno_automl.cli.text import layer_line  # noqa: E402
from syno_automl.codegen.tvm import build_kernel  # noqa: E402

pytestmark = pytest.mark.tvm
QUICK = lat.TimingProtocol(warmup=1, number=3, repeat=5, min_repeat_ms=5)
CONV = dict(N=1, C_in=4, C_out=8, H=8, W=8)


@pytest.fixture(scope="module")
def conv_space():
    return OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                         ["k=3: 2", "s=2: 2"], [CONV], max_depth=6)


@pytest.fixture(scope="module")
def linear_space():
    return OperatorSpace("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["k=3: 2"],
                         [dict(N=2, C_in=16, C_out=8)], max_depth=4)


def test_infer_baseline(conv_space, linear_space):
    conv = known.conv2d(conv_space).program(0)
    assert lat.infer_baseline(conv) == {"kind": "conv2d", "N": 1, "C_in": 4, "C_out": 8, "H": 8, "W": 8, "k": 3,
                                        "stride": 1}
    assert lat.infer_baseline(conv, kernel_size=5)["k"] == 5
    down = {"input": {"shape": [1, 4, 9, 9]}, "output": {"shape": [1, 8, 5, 5]}}
    assert lat.infer_baseline(down)["stride"] == 2
    assert lat.infer_baseline({"input": {"shape": [1, 4, 8, 8]}, "output": {"shape": [1, 8, 16, 16]}}) is None
    assert lat.infer_baseline(known.linear(linear_space).program(0)) == {"kind": "dense", "N": 2, "C_in": 16,
                                                                         "C_out": 8}
    assert lat.infer_baseline({"input": {"shape": [2, 3, 4]}, "output": {"shape": [2, 3]}}) is None
    assert [lat.device_name(t) for t in ("llvm", "cuda", "rpc:rk3399@10.0.0.2:9190")] == ["llvm", "cuda", "rpc-rk3399"]
    assert lat.device_name("llvm -mcpu=skylake") == "llvm_-mcpu_skylake"  # a valid MLflow metric name part


def test_conv_operator_metrics_untuned(conv_space):
    """The conv2d operator itself against the conv2d baseline: every key present and a number."""
    op = known.conv2d(conv_space)
    m = lat.measure_operator(op, 0, lat.MeasureRequest(protocol=QUICK), details=True)
    keys = {"latency_ms.llvm", "speedup.llvm", "latency_ms.inductor-llvm", "speedup.inductor-llvm"}
    assert set(m) == keys | {"notes", "details"}
    assert m["notes"] == {}, m["notes"]
    for k in keys:
        assert isinstance(m[k], float) and m[k] > 0, (k, m[k])
    d = m["details"]
    assert m["speedup.llvm"] == pytest.approx(d["baseline.llvm"]["median_ms"] / d["operator.llvm"]["median_ms"])
    # torch's side is the one speed protocol: its figure is the protocol's ratio, the one its note records (the
    # medians of the two sides' blocks need not give it: they are not the paired log ratios)
    note = d["operator.inductor-llvm"]["note"]
    assert d["operator.inductor-llvm"]["target"] == "inductor-cpu"
    assert note.startswith("speed protocol, ") and f"speedup {m['speedup.inductor-llvm']:.2f}× [" in note, note
    # the baseline kernel is the conv2d the operator computes (weights in the same layout)
    prog = op.program(0)
    x = np.random.default_rng(0).standard_normal(prog["input"]["shape"]).astype("float32")
    w = np.random.default_rng(1).standard_normal(prog["weights"][0]["shape"]).astype("float32")
    base = lat.baseline_kernel(lat.infer_baseline(prog))
    np.testing.assert_allclose(build_kernel(base)(x, w), build_kernel(prog)(x, w), rtol=1e-4, atol=1e-4)


def test_tuned_metrics_same_budget(conv_space, tmp_path):
    """Operator and baseline tuned with the same tiny budget (in-process runner); a sampled operator."""
    op = conv_space.sample(1, seed=3)[0]
    req = lat.MeasureRequest(trials=2, work_dir=str(tmp_path), seconds=60, protocol=QUICK, inductor=False,
                             runner="inprocess")
    m = lat.measure_operator(op, 0, req, details=True)
    assert set(m) == {"latency_ms.llvm", "speedup.llvm", "notes", "details"}
    assert m["notes"] == {}, m["notes"]
    d = m["details"]
    assert d["operator.llvm"]["tuned_trials"] >= 1 and d["baseline.llvm"]["tuned_trials"] >= 1
    assert m["speedup.llvm"] == pytest.approx(d["baseline.llvm"]["median_ms"] / d["operator.llvm"]["median_ms"])


def test_missing_values_have_reasons(conv_space, linear_space):
    op = known.linear(linear_space)
    targets = ("llvm", "cuda", "rpc:nobody@127.0.0.1:1")
    m = lat.measure_operator(op, 0, lat.MeasureRequest(targets=targets, protocol=QUICK, inductor=True))
    assert isinstance(m["latency_ms.llvm"], float) and isinstance(m["speedup.llvm"], float)  # dense baseline
    assert isinstance(m["latency_ms.inductor-llvm"], float) and isinstance(m["speedup.inductor-llvm"], float)
    for key in ("latency_ms.rpc-nobody", "speedup.rpc-nobody", "latency_ms.inductor-rpc-nobody"):
        assert m[key] is None and m["notes"][key], key
    assert "RPC" in m["notes"]["latency_ms.inductor-rpc-nobody"]
    if not tvm.cuda(0).exist:
        assert m["latency_ms.cuda"] is None and "CUDA" in m["notes"]["latency_ms.cuda"]
        assert m["speedup.cuda"] is None and m["notes"]["speedup.cuda"]
    if not torch.cuda.is_available():
        assert m["latency_ms.inductor-cuda"] is None and "CUDA" in m["notes"]["latency_ms.inductor-cuda"]
    assert all(m[k] is not None for k in m if k != "notes" and k not in m["notes"])
    # no baseline: latencies only
    untimed_inductor = lat.MeasureRequest(protocol=QUICK, inductor=False)
    m = lat.measure_operator(known.conv2d(conv_space), 0, untimed_inductor, baseline=None)
    assert isinstance(m["latency_ms.llvm"], float)
    assert m["speedup.llvm"] is None and m["notes"]["speedup.llvm"] == "no baseline asked"
    # a baseline that does not fit the shapes
    m = lat.measure_operator(op, 0, untimed_inductor, baseline="conv2d")
    assert m["speedup.llvm"] is None and "no conv2d baseline" in m["notes"]["speedup.llvm"]


def test_explicit_baseline(conv_space):
    """A baseline given as a kernel factory, and a torch baseline for Inductor: grouped conv, 2 groups."""
    op = known.conv2d(conv_space)
    m = lat.measure_operator(op, 0, baseline=lambda p: lat.conv2d_nchw_te(1, 4, 8, 8, 8, 3, groups=2),
                             torch_baseline=torch.nn.Conv2d(4, 8, 3, padding=1, groups=2, bias=False),
                             request=lat.MeasureRequest(protocol=QUICK, inductor=False))
    assert isinstance(m["speedup.llvm"], float) and m["notes"] == {}


def test_measure_layers_sums_every_layer():
    """Every mapping of the space is a layer; the totals are their sums; a failing target stops at the first layer
    with fail_fast and every total is missing with the layer's reason."""
    space = OperatorSpace("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["k=3: 2"],
                          [dict(N=2, C_in=16, C_out=8), dict(N=4, C_in=8, C_out=8)], max_depth=4)
    op = known.linear(space)
    res = lat.measure_layers(op, lat.MeasureRequest(targets=("llvm", "rpc:nobody@127.0.0.1:1"), protocol=QUICK,
                                                    inductor=False))
    m, s = res["metrics"], res["devices"]["llvm"]
    assert set(m) == {f"{k}.{d}" for k in ("latency_ms", "baseline_latency_ms", "speedup")
                      for d in ("llvm", "rpc-nobody")}
    assert s["tuned_trials"] == 0 and s["schedules"] == lat.UNTUNED and len(s["layers"]) == 2
    assert [layer["replaced"] for layer in s["layers"]] == ["dense 16->8 N=2", "dense 8->8 N=4"]
    assert m["latency_ms.llvm"] == pytest.approx(sum(layer["operator"]["median_ms"] for layer in s["layers"]))
    assert m["baseline_latency_ms.llvm"] == pytest.approx(sum(layer["baseline"]["median_ms"] for layer in s["layers"]))
    assert m["speedup.llvm"] == pytest.approx(m["baseline_latency_ms.llvm"] / m["latency_ms.llvm"])
    assert s["latency_ms"] == m["latency_ms.llvm"] and s["notes"] == {}
    assert all(lat.UNTUNED in layer_line(layer, s["schedules"]) for layer in s["layers"])
    assert all(m[k] is None and "unreachable" in res["notes"][k] for k in m if k.endswith("rpc-nobody"))
    assert res["notes"]["latency_ms.rpc-nobody"].startswith("layer 0: target:")
    failed = lat.measure_layers(op, lat.MeasureRequest(targets="rpc:nobody@127.0.0.1:1", trials=2, protocol=QUICK,
                                                       inductor=False), fail_fast=True)
    s = failed["devices"]["rpc-nobody"]
    assert len(s["layers"]) == 1 and s["latency_ms"] is None and s["tuned_trials"] == 2
    assert "unreachable" in s["notes"]["latency_ms.rpc-nobody"]
    assert "missing (target: RPC tracker" in layer_line(s["layers"][0], s["schedules"])
