"""The measures without TVM (``--latency torch``), the install hint when TVM is missing, the schedule labels every
speedup carries, TorchInductor timed like eager torch, and the baseline trial's own latency in MLflow."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap

import optuna
import pytest
import torch
from mlflow.tracking import MlflowClient

from syno_automl import measure
from syno_automl.config import SearchConfig
from syno_automl.study import run_search
from syno_automl.tracking import latency_metrics

QUICK = measure.TimingProtocol(warmup=1, number=3, repeat=5, min_repeat_ms=5)
optuna.logging.set_verbosity(optuna.logging.WARNING)

# a sitecustomize that makes every `import tvm...` fail, as on a machine without the tvm extra (this tests OUR
# error path; TVM's own behaviour is not imitated)
NO_TVM = textwrap.dedent('''
    import importlib.abc, importlib.machinery, sys
    class NoTVM(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tvm", "tvm_ffi"):
                return importlib.machinery.ModuleSpec(name, self)
            return None
        def create_module(self, spec):
            raise ModuleNotFoundError(f"No module named {spec.name!r} (blocked by the test)", name=spec.name)
        def exec_module(self, module):
            pass
    sys.meta_path.insert(0, NoTVM())
''')


@pytest.fixture
def no_tvm_env(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_TVM)
    env = dict(os.environ)
    # only the shim in front: the package under test is whatever this process imports (the installed one in CI,
    # never the uncompiled source tree)
    env["PYTHONPATH"] = os.pathsep.join([str(shim)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _run(args, env, cwd):
    return subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_shim_really_hides_tvm(no_tvm_env, tmp_path):
    done = _run(["-c", "import tvm"], no_tvm_env, tmp_path)
    assert done.returncode != 0 and "blocked by the test" in done.stderr


def test_torch_target_measures_without_tvm(no_tvm_env, tmp_path):
    code = textwrap.dedent('''
        import json, sys
        from syno_automl import OperatorSpace, known, measure
        space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                              ["k=3: 2", "g=2: 2"], [{"N": 1, "C_in": 16, "C_out": 16, "H": 8, "W": 8, "g": 2}],
                              max_depth=8)
        q = measure.TimingProtocol(warmup=1, number=3, repeat=5, min_repeat_ms=5)
        res = measure.measure_layers(known.grouped_conv2d(space), measure.MeasureRequest(targets=["torch"], protocol=q))
        print(json.dumps({"metrics": res["metrics"], "notes": res["notes"], "summary": res["devices"]["torch"],
                          "tvm": any(m.split(".")[0] == "tvm" for m in sys.modules)}))
    ''')
    done = _run(["-c", code], no_tvm_env, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    import json

    out = json.loads(done.stdout.strip().splitlines()[-1])
    m, s = out["metrics"], out["summary"]
    assert not out["tvm"] and out["notes"] == {}
    assert m["latency_ms.torch"] > 0 and m["baseline_latency_ms.torch"] > 0
    # the layer is timed by the one speed protocol, its ratio and interval in the note (the summary's speedup sums
    # the layers' times, so it is not that ratio to the digit)
    assert re.search(r"speedup \d+\.\d\d× \[\d+\.\d\d, \d+\.\d\d\]$", s["layers"][0]["operator"]["note"])
    assert s["schedules"] == measure.EAGER and s["tag"] == "eager" and s["tuned_trials"] == 0
    assert "inductor_ms" not in s and "inductor" not in s["layers"][0]
    assert s["layers"][0]["operator"]["note"].startswith("speed protocol, "), s["layers"][0]["operator"]["note"]


@pytest.mark.parametrize("args", [
    ["search", "--latency", "llvm", "--trials", "1", "--epochs", "1"],
    ["search", "--latency", "torch,llvm", "--trials", "1", "--epochs", "1"],   # (cuda: refused first, no CUDA)
    ["tune", "abcd", "--target", "llvm"],
])
def test_tvm_targets_without_tvm_fail_at_once_with_the_hint(no_tvm_env, tmp_path, args):
    storage = tmp_path / "syno.db"
    done = _run(["-m", "syno_automl.cli", *args, "--storage", f"sqlite:///{storage}", "--tracking-uri", "none"],
                no_tvm_env, tmp_path)
    err = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(err) == 1, done.stderr[-2000:]
    assert "needs TVM" in err[0] and "pip install 'syno_automl[tvm]'" in err[0], err
    assert not storage.exists()  # failed before any work: no study was created


def test_labels_say_how_both_sides_were_scheduled():
    assert measure.schedules_tag(0) == "untuned" and measure.schedules_tag(64) == "tuned 64 trials"
    assert measure.schedules_tag(64, eager=True) == "eager"
    assert measure.schedules_label(0) == measure.UNTUNED and "64 trials" in measure.schedules_label(64)
    summary = {"latency_ms": 1.0, "baseline_ms": 3.0, "speedup": 3.0, "tuned_trials": 0, "tag": "untuned",
               "schedules": measure.UNTUNED, "inductor_ms": 2.0, "inductor_baseline_ms": 4.0, "inductor_speedup": 2.0}
    assert measure.stored_entry(summary)["tag"] == "untuned"
    ops = latency_metrics({"llvm": summary})
    assert ops == {"latency_ms.llvm": 1.0, "baseline_latency_ms.llvm": 3.0, "speedup.llvm": 3.0,
                   "latency_ms.inductor-llvm": 2.0, "baseline_latency_ms.inductor-llvm": 4.0,
                   "speedup.inductor-llvm": 2.0}
    base = latency_metrics({"llvm": summary}, role="baseline")
    assert base["latency_ms.llvm"] == 3.0 and base["speedup.llvm"] == 1.0 and base["latency_ms.inductor-llvm"] == 4.0


@pytest.mark.slow
def test_inductor_is_timed_like_eager_torch():
    """Same layer, same input, same threads: Inductor (compiled during the warm-up, never timed) lands within the
    same order of magnitude as eager torch. Compilation itself takes seconds, so a timing that included it would
    be ~1000x off."""
    layer = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False).eval()
    x = torch.randn(1, 16, 16, 16)
    eager = measure.time_torch(layer, (x,), compile=False, protocol=QUICK, threads=1)
    compiled = measure.time_torch(layer, (x,), compile=True, protocol=QUICK, threads=1)
    assert eager.ok and compiled.ok, (eager.note, compiled.note)
    assert compiled.target == "inductor-cpu" and "not timed" in compiled.note and "1 threads" in compiled.note
    assert 1 / 20 < compiled.median_ms / eager.median_ms < 20, (compiled.median_ms, eager.median_ms)


@pytest.mark.slow
def test_search_with_torch_latency_labels_speedups_and_logs_the_baseline(tmp_path, monkeypatch):
    # what is checked is the labels and the logging, not the figures: the search times with measure.PROTOCOL (15
    # repeats of >= 50 ms a side and layer), the quick one here; no whole-model timing before the trial (planned)
    monkeypatch.setattr(measure, "PROTOCOL", QUICK)
    out = io.StringIO()
    config = SearchConfig(trials=1, epochs=1, storage=f"sqlite:///{tmp_path / 's.db'}", heartbeat=None,
                          tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", trial_timeout=None,
                          latency_targets=("torch",), latency_margin=None, finalists=0, speed_objective="planned")
    study = run_search(config, out=out).study
    base = next(t for t in study.trials if t.user_attrs.get("syno.baseline"))
    ops = [t for t in study.trials if not t.user_attrs.get("syno.baseline") and t.state.name == "COMPLETE"]
    assert ops, [(t.state.name, t.user_attrs.get("syno.failure")) for t in study.trials]
    client = MlflowClient(config.tracking_uri)
    entry = ops[0].user_attrs["syno.latency"]["torch"]
    assert entry["tag"] == "eager" and entry["speedup"] > 0
    assert f"speedup torch {entry['speedup']:.2f}x (eager)" in out.getvalue(), out.getvalue()
    run = client.get_run(ops[0].user_attrs["syno.mlflow_run_id"])
    assert run.data.metrics["latency_ms.torch"] == pytest.approx(entry["latency_ms"])
    assert run.data.tags["syno.schedules.torch"] == measure.EAGER
    base_run = client.get_run(base.user_attrs["syno.mlflow_run_id"])
    assert base_run.data.metrics["latency_ms.torch"] == pytest.approx(entry["baseline_ms"])
    assert base_run.data.metrics["speedup.torch"] == 1.0
