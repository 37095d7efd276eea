"""What a user does around a search, through the real CLI: interrupt, resume, inspect, export."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from _cli_helpers import cli, cli_env, cli_here, read_runs, read_study, wait_for_running_operator_trial
from mlflow.tracking import MlflowClient

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.mark.slow
def test_ctrl_c_fails_the_running_trial_and_exits_130(tmp_path):
    # 6 epochs: the operator trial trains for seconds after it is seen (the baseline trains as long first)
    args = ["search", "--trials", "3", "--epochs", "6", "--timeout", "0", "--heartbeat", "60"]
    log_path = tmp_path / "search.log"
    with open(log_path, "w") as log, open(tmp_path / "stderr.log", "w") as err:
        # Ctrl-C as from a terminal: SIGINT at its default even when this test runs where it is ignored
        # (a background job of a shell without job control), which the child would inherit
        proc = subprocess.Popen([sys.executable, "-m", "syno_automl.cli", *args], cwd=tmp_path, env=cli_env(),
                                stdout=log, stderr=err, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            victim = wait_for_running_operator_trial(proc, tmp_path, log_path)
            finished_before = {t.number: t for t in read_study(tmp_path).trials if t.state.is_finished()}
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    stderr = (tmp_path / "stderr.log").read_text()
    assert rc == 130, (rc, stderr[-2000:], log_path.read_text()[-2000:])
    assert stderr.strip().splitlines()[-1] == "syno-automl: interrupted", stderr[-2000:]
    trials = read_study(tmp_path).trials
    lost = trials[victim.number]
    assert lost.state == optuna.trial.TrialState.FAIL  # at once: no heartbeat window, no orphan
    assert "interrupted" in lost.user_attrs["syno.failure"]
    assert not [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    for number, before in finished_before.items():  # finished trials untouched
        assert trials[number].state == before.state and trials[number].values == before.values
    runs = {r.info.run_id: r for r in read_runs(tmp_path)}
    run = runs[lost.user_attrs["syno.mlflow_run_id"]]
    assert run.info.status == "KILLED" and "interrupted" in run.data.tags["syno.failure"]
    parent = next(r for r in runs.values() if r.data.tags.get("syno.role") == "study")
    assert parent.info.status == "KILLED"
    base = runs[trials[0].user_attrs["syno.mlflow_run_id"]]
    assert base.info.status == "FINISHED"


def _space():
    from syno_automl import OperatorSpace

    return OperatorSpace("[N, C_in]", "[N, C_out]", primary=["N: 0", "C_in: 2", "C_out: 2"],
                         coefficients=["k=2: 1"], mappings=[{"N": 4, "C_in": 8, "C_out": 8}], max_depth=4)


def test_syno_sampler_does_not_repeat_other_parameters_in_a_resumed_process(tmp_path):
    from syno_automl.search.sampler import SynoSampler, suggest_operator

    def objective(trial):
        suggest_operator(trial)
        return trial.suggest_float("lr", 1e-4, 1.0, log=True)

    storage = f"sqlite:///{tmp_path / 'user.db'}"
    study = optuna.create_study(study_name="mine", storage=storage, direction="maximize",
                                sampler=SynoSampler(_space(), seed=0))
    study.optimize(objective, n_trials=2)
    # a new process: a new sampler with the same seed, the same study
    resumed = optuna.load_study(study_name="mine", storage=storage, sampler=SynoSampler(_space(), seed=0))
    resumed.optimize(objective, n_trials=2)
    lrs = [t.params["lr"] for t in resumed.trials]
    assert len(set(lrs)) == 4, lrs
    # deterministic: the same seed gives the same values to the same trial numbers in one process
    again = optuna.create_study(direction="maximize", sampler=SynoSampler(_space(), seed=0))
    again.optimize(objective, n_trials=4)
    assert [t.params["lr"] for t in again.trials] == lrs


def _timed_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return cli(cwd, *args, check=False, timeout=120)


def test_rejected_invocations_fail_before_the_imports_and_create_nothing(tmp_path, capsys):
    for args, words in ((("--model", "nope"), ("nope", "small_cnn")),
                        (("--flops-ratio", "0"), ("--flops-ratio",)),
                        (("--dataset", "mnist"), ("--data-dir",)),
                        (("--resume", "--study", "doesnotexist"), ("doesnotexist", "resume")),
                        (("--tracking-uri", "http://127.0.0.1:9"), ("unreachable", "127.0.0.1:9"))):
        done = cli(tmp_path, "search", *args, check=False, timeout=120)
        assert done.returncode == 1, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("syno-automl: error:"), (args, done.stderr)
        assert all(w in lines[0] for w in words), (args, lines)
        assert "loading torch" not in done.stdout  # rejected before the heavy imports
        assert sorted(p.name for p in tmp_path.iterdir()) == [], (args, list(tmp_path.iterdir()))
    # the library modules that decide are light: no torch, lightning, mlflow or tvm
    probe = ("import sys, syno_automl.cli, syno_automl.config, syno_automl.cli.lookup, syno_automl.vocabulary; "
             "print(sorted(m for m in ('torch', 'lightning', 'mlflow', 'tvm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], env=cli_env(), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    # --version and --help: argparse's own output, read in this process (a process each only repeats the above)
    from syno_automl.cli import main

    for argv in (["--version"], *([c, "--help"] for c in ("search", "show", "export", "report", "enumerate",
                                                          "reevaluate", "tune"))):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 0, argv
        printed = capsys.readouterr().out
        if argv == ["--version"]:
            assert printed.startswith("syno-automl "), printed
        else:
            assert "-q, --quiet" in printed and "-v, --verbose" in printed, argv


def test_model_and_dataset_names_match_the_registries():
    from lightning_modules.data import DATAMODULE_NAMES
    from lightning_modules.models import MODEL_NAMES
    from syno_automl import config

    assert config.MODEL_NAMES == MODEL_NAMES and config.DATASET_NAMES == DATAMODULE_NAMES


def test_resume_refuses_other_training_settings_naming_them(tmp_path):
    from syno_automl.config import SearchConfig
    from syno_automl.study import prepare
    from syno_automl.study.opening import open_study

    storage = f"sqlite:///{tmp_path / 'syno.db'}"
    config = SearchConfig(trials=1, epochs=1, storage=storage, tracking_uri=None, heartbeat=None)
    open_study(config, prepare(config))
    for args, named in ((("--epochs", "5"), ["epochs 1 (now 5)"]),
                        (("--lr", "0.1", "--seed", "3"), ["lr 0.05 (now 0.1)", "seed 0 (now 3)"]),
                        (("--flops-ratio", "0.25"), ["flops_ratio 0.5 (now 0.25)"])):
        done = cli_here(tmp_path, "search", "--resume", "--tracking-uri", "none", *args, check=False)
        assert done.returncode == 1, done.stderr
        line = done.stderr.strip()
        assert len(line.splitlines()) == 1 and len(line) < 300, line
        assert all(n in line for n in named), line
        assert "loading torch" not in done.stdout  # refused before the heavy imports
    n_trials = len(read_study(tmp_path).trials)
    # no option given: the study's own settings (1 epoch, not the CLI's default 3); in this process, as above
    done = cli_here(tmp_path, "search", "--resume", "--tracking-uri", "none", "--trials", "0", "--timeout", "0")
    assert "1 trial to run" in done.stdout  # the waiting baseline
    trials = read_study(tmp_path).trials
    assert len(trials) == n_trials and trials[0].state == optuna.trial.TrialState.COMPLETE
    assert read_study(tmp_path).user_attrs["syno.settings"]["epochs"] == 1


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> Path:
    """One small search through the CLI, shared by the inspect/export/move tests (read-only for them)."""
    folder = tmp_path_factory.mktemp("search")
    # completed operators to inspect, whatever the default budget admits; single-objective: the conventions test
    # reads study.best_trial (test_search_pareto.py covers the pareto study's)
    cli_here(folder, "search", "--trials", "2", "--epochs", "1", "--timeout", "0", "--seed", "1",
             "--cost-ratio", "0", "--objective", "accuracy", "--finalists", "0")
    return folder


# One torch-only process for every exported layer (file, weights): each imported as a module, loaded, run, exported
# and refused another shape, then run as the script it is (its smoke test, `python op.py w.pt`, as __main__ here);
# the modules loaded checked last. A process each cost ~4 s of CPU in torch's import alone.
_TORCH_ONLY = r"""
import contextlib, io, runpy, sys, torch
pairs = list(zip(sys.argv[1::2], sys.argv[2::2]))
for n, (path, weights) in enumerate(pairs):
    source = open(path).read()
    namespace = {"__name__": "exported"}
    exec(compile(source, path, "exec"), namespace)
    layer = namespace["SynoLayer"]()
    layer.load_state_dict(torch.load(weights, weights_only=True))
    shape = [2 if s is None else s for s in layer.INPUT_SHAPE]
    x = torch.randn(shape)
    y = layer(x)
    print(f"OUT{n}", list(y.shape))
    program = torch.export.export(layer.eval(), (x,))
    print(f"EXPORTED{n}", torch.allclose(program.module()(x), layer(x), atol=1e-5))
    try:
        layer(torch.randn([s + 1 if i else s for i, s in enumerate(shape)]))
    except ValueError as e:
        print(f"REFUSED{n}", e)
    smoke = io.StringIO()
    sys.argv[:] = [path, weights]
    with contextlib.redirect_stdout(smoke):
        runpy.run_path(path, run_name="__main__")
    print(f"SMOKE{n}", smoke.getvalue().strip())
print("MODULES", sorted(m for m in ("syno_automl", "lightning", "mlflow", "optuna") if m in sys.modules))
"""


@pytest.mark.slow
def test_show_and_export_with_trained_weights_in_a_torch_only_process(searched, tmp_path):
    study = read_study(searched)
    listed = cli_here(searched, "show").stdout
    assert all(f"\n{t.number:>5}  {t.state.name}" in listed for t in study.trials), listed
    assert cli_here(searched, "list").stdout == listed
    one = study.trials[1]
    shown = cli_here(searched, "show", "1").stdout  # a trial number, not a hash prefix
    assert "trial 1," in shown and one.user_attrs["syno.hash"] in shown
    assert cli_here(searched, "show", one.user_attrs["syno.hash"][:6]).stdout.splitlines()[0] == shown.splitlines()[0]
    assert "baseline (study syno, trial 0" in cli_here(searched, "show", "baseline").stdout
    best = max((t for t in study.trials[1:] if t.value is not None), key=lambda t: t.value)
    assert f"trial {best.number}," in cli_here(searched, "show", "best").stdout
    assert "weights.pt" in shown and "FINISHED" in shown  # read from the MLflow run
    no_store = cli_here(searched, "show", "1", "--tracking-uri", "none").stdout
    assert "artifacts" not in no_store
    done = [t for t in study.trials[1:] if t.state == optuna.trial.TrialState.COMPLETE]
    assert done, "no operator trial completed"
    number = str(done[0].number)
    files = []
    for mapping in ("0", "1"):  # two replaced layers: two sizes
        cli_here(searched, "export", number, "--mapping", mapping, "-o", str(tmp_path / f"op{mapping}.py"),
            "--weights", str(tmp_path / f"w{mapping}.pt"))
        files += [str(tmp_path / f"op{mapping}.py"), str(tmp_path / f"w{mapping}.pt")]
    script = tmp_path / "run.py"
    script.write_text(_TORCH_ONLY)
    out = subprocess.run([sys.executable, "-I", str(script), *files], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    shapes = []
    for n in range(2):
        assert lines[f"EXPORTED{n}"] == "True" and "expects an input of shape" in lines[f"REFUSED{n}"]
        assert lines[f"SMOKE{n}"].startswith("ok:"), lines   # the file run as a script: its own smoke test
        shapes.append(lines[f"OUT{n}"])
    assert lines["MODULES"] == "[]"
    assert shapes[0] != shapes[1]  # the two layers' sizes (the default model's two substituted convolutions)
    import torch

    trained = torch.load(tmp_path / "w0.pt", weights_only=True)
    assert trained and all(k.startswith("operator.") or k == "bias" for k in trained)


@pytest.mark.slow
def test_optuna_and_mlflow_conventions(searched, monkeypatch):
    study = read_study(searched)
    assert study.metric_names == ["val_acc"]
    base = study.trials[0]
    assert base.user_attrs["syno.baseline"] and base.constraints == {"syno.baseline": 1.0}
    ops = [t for t in study.trials[1:] if t.state == optuna.trial.TrialState.COMPLETE]
    if ops:  # the baseline never is the study's best trial, even with the best value
        assert study.best_trial.number == max(ops, key=lambda t: t.value).number
    else:
        with pytest.raises(ValueError):
            study.best_trial
    runs = read_runs(searched)
    parent = next(r for r in runs if r.data.tags.get("syno.role") == "study")
    assert len([k for k in parent.data.params if k.startswith("search.")]) >= 15
    client = MlflowClient(f"sqlite:///{searched / 'mlflow.db'}")
    monkeypatch.chdir(searched)  # MLflow resolves the store's relative artifact paths against the working folder
    for run in runs:
        if run.data.tags.get("syno.role") != "trial":
            continue
        assert sorted(k for k in run.data.params if k.startswith("search.")) == [
            "search.dataset", "search.model", "search.task"]
        assert "params" not in run.data.metrics
        if run.info.status == "FINISHED":
            assert "num_params" in run.data.metrics
        assert {a.path for a in client.list_artifacts(run.info.run_id)}, run.info.run_name  # baseline too


@pytest.mark.slow
def test_a_copied_search_folder_reads_its_own_artifacts(searched, tmp_path, monkeypatch):
    import shutil

    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(searched, first)
    shutil.copytree(first, second)
    shutil.rmtree(first)  # artifacts can only come from `second` now (or the untouched original)
    done = [t for t in read_study(second).trials[1:] if t.state == optuna.trial.TrialState.COMPLETE]
    assert done, "no operator trial completed"
    number = str(done[0].number)
    shown = cli(second, "show", number).stdout
    assert "weights.pt" in shown and "operator.json" in shown, shown
    cli(second, "export", number, "-o", "op.py", "--weights", "w.pt")
    assert (second / "w.pt").stat().st_size > 0
    client = MlflowClient(f"sqlite:///{second / 'mlflow.db'}")
    run_id = done[0].user_attrs["syno.mlflow_run_id"]
    uri = client.get_run(run_id).info.artifact_uri
    assert uri == f"mlruns/{run_id}/artifacts", uri  # relative to the store's folder: nothing to repair
    monkeypatch.chdir(second)  # where MLflow's own client and UI resolve it (README: mlflow ui in the folder)
    local = Path(client.download_artifacts(run_id, "operator.json", str(tmp_path)))
    assert json.loads(local.read_text())["hash"] == done[0].user_attrs["syno.hash"]


@pytest.mark.slow
def test_report_lists_every_trial_with_reasons_and_draws_the_budget(searched, tmp_path):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(searched, folder)
    cli_here(folder, "report", "--tracking-uri", "none")
    text = (folder / "report" / "report.md").read_text()
    for t in read_study(folder).trials:
        row = next(line for line in text.splitlines() if line.startswith(f"| {t.number} | "))
        assert t.state.name in row
        why = t.user_attrs.get("syno.failure") or t.user_attrs.get("syno.pruned")
        if why:
            assert " ".join(str(why).split())[:40] in row, row
    assert "FLOPs budget 0.5x" in (folder / "report" / "pareto_flops.svg").read_text()


def test_a_source_tree_without_the_core_says_what_to_do(tmp_path):
    import shutil

    import syno_automl

    shutil.copytree(Path(syno_automl.__file__).parent, tmp_path / "syno_automl",
                    ignore=shutil.ignore_patterns("_native*", "__pycache__"))
    # -S: no site-packages, so no editable install's import hook finds the real package first (the state of
    # a source tree next to a plain install, where the tree shadows the package)
    done = subprocess.run([sys.executable, "-S", "-c", "import syno_automl"], cwd=tmp_path, capture_output=True,
                          text=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 1 and "C++ core" in done.stderr and "cmake --build" in done.stderr, done.stderr[-800:]
