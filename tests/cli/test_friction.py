"""Friction a newcomer met (issue 46, item 6), each fixed: plurals, every speed figure naming its target, the verdict's
operator cut at a primitive boundary and the tie rule's deciding criterion named. (The refusals before the heavy
imports are in tests/cli/test_early_refusals_46.py.) No training, no timing: the figures are given."""
from __future__ import annotations

from syno_automl.study.verdict import Finalist, FinalResult, short_description
from syno_automl.words import counted


def _result(timing: str = "cpu.eager: torch eager inference, batch 64", seeds: int = 1, epochs: int = 1,
            **op_figures) -> FinalResult:
    base = Finalist("baseline", 0, "the original layers", 1.0, 0.98, [0.98] * seeds, speedup=1.0,
                    speedup_low=0.99, speedup_high=1.01)
    a = Finalist("aaaa", 1, "grouped conv", 0.5, 0.97, [0.975] * seeds, speedup=1.40, speedup_low=1.35,
                 speedup_high=1.45, flops=op_figures.get("a_flops", 2e6), params=op_figures.get("a_params", 100))
    b = Finalist("bbbb", 2, "new: ...", 0.5, 0.97, [0.975] * seeds, speedup=1.41, speedup_low=1.36,
                 speedup_high=1.46, flops=op_figures.get("b_flops", 4e6), params=op_figures.get("b_params", 100))
    return FinalResult(base, [a, b], seeds=seeds, epochs=epochs, margin=0.01, timing=timing)


def test_counts_of_one_are_singular():
    assert counted(1, "trials") == "1 trial" and counted(2, "trials") == "2 trials" and counted(0, "epochs") == \
        "0 epochs"
    assert _result(seeds=1, epochs=1).budget_text() == "1 seed × 1 epoch"
    assert "1 seed × 1 epoch)" in _result(seeds=1, epochs=1).verdict()
    assert _result(seeds=3, epochs=6).budget_text() == "3 seeds × 6 epochs"


def test_the_final_table_and_the_trial_line_name_the_speed_target():
    assert _result().table()[0].split()[:4] == ["accuracy", "speedup", "on", "cpu.eager"]
    assert _result(timing="torch eager inference").target is None   # a label that names no target: none claimed
    from syno_automl.report.final import final_table

    assert "| speedup on cpu.eager |" in final_table(_result(), "val_acc")

    from types import SimpleNamespace

    from syno_automl import vocabulary as V
    from syno_automl.study.trial_speed import TrialSpeed

    speed = TrialSpeed.__new__(TrialSpeed)
    speed.objective = SimpleNamespace(measured=True, target="cpu.eager")
    trial = SimpleNamespace(user_attrs={V.speedup_attr("cpu.eager", b): v for b, v in
                                        (("", 1.43), ("low", 1.40), ("high", 1.47))})
    assert speed.text(trial) == "  speedup 1.43× [1.40, 1.47] on cpu.eager"


def test_the_operators_primitives_are_cut_between_primitives():
    primitives = ["CONTRACTION C_in with w0", "SPLIT C_in -> [s, C_in/s]", "UNFOLD W -> [W, k]", "UNFOLD H -> [H, k]"]
    text = short_description(primitives, limit=60)
    assert text == "UNFOLD H -> [H, k] → UNFOLD W -> [W, k] → … 2 more"
    shown = text.split(" → … ")[0].split(" → ")
    assert all(p in primitives for p in shown)   # every one shown whole
    assert short_description(primitives, limit=1000) == " → ".join(reversed(primitives))
    assert short_description(["A" * 80, "B"], limit=10) == "B → … 1 more"   # the first, whole, however long


def test_a_tie_names_the_criterion_that_decided_it():
    by_flops = _result().verdict()
    assert "tied in accuracy and speed with 1 other (bbbb): named by fewer FLOPs, then parameters, then hash; " \
           "decided by FLOPs: 2,000,000 vs 4,000,000 (bbbb)" in by_flops
    assert " aaaa grouped conv " in by_flops
    by_params = _result(b_flops=2e6, a_params=50).verdict()
    assert "decided by parameters: 50 vs 100 (bbbb)" in by_params
    by_hash = _result(b_flops=2e6).verdict()
    assert "decided by the hash: FLOPs and parameters equal to bbbb's" in by_hash


def test_reevaluate_help_is_true_and_lists_only_the_flags_that_apply():
    import argparse

    from syno_automl.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    reevaluate = sub.choices["reevaluate"]
    helps = {o: a.help for a in reevaluate._actions for o in a.option_strings}
    assert helps["--epochs"].endswith("(default: 10)") and "per trial" not in helps["--epochs"]
    assert helps["--steps"].endswith("(default: 1000)")
    assert not {"--flops-ratio", "--cost-ratio", "--cost-profile", "--no-priors", "--max-depth", "--time-budget"} & \
        set(helps)   # the study's space and budgets; a re-training has no time budget
    assert "--epochs" in helps and "--seed" in helps and "--batch-size" in helps
    assert "flag not given takes the study's recorded setting" in " ".join(reevaluate.format_help().split())
    search = {o for a in sub.choices["search"]._actions for o in a.option_strings}
    assert {"--flops-ratio", "--max-depth", "--time-budget"} <= search


def test_a_baseline_whose_seeds_vary_more_than_the_margin_is_warned_of():
    noisy = _result(seeds=3)
    noisy.baseline.values = [0.95, 0.90, 0.99]   # sd 4.5 pp, the margin 1 pp
    (warning,) = noisy.warnings()
    assert warning.startswith("the baseline's accuracy varies by sd 4.5 pp over its 3 seeds, more than the 1 pp "
                              "margin")
    steady = _result(seeds=3)
    steady.baseline.values = [0.95, 0.951, 0.949]
    assert steady.warnings() == [] and _result(seeds=1).warnings() == []   # one seed: no spread to judge


def test_a_near_chance_reevaluation_is_warned_of(tmp_path, monkeypatch):
    from _cli_helpers import cli_here

    import syno_automl.cli.measure as measure_cli
    import syno_automl.study.training as training
    from syno_automl import vocabulary as V
    from syno_automl.config import SearchConfig
    from syno_automl.study import run_search

    def train(context, trial, run, **kw) -> float:  # noqa: ANN001 - train_operator's signature
        if trial is not None and not trial.user_attrs.get(V.BASELINE):
            trial.set_user_attr(V.COST_RATIO, 0.5)
        return 0.9 if trial is not None else 0.11   # re-trained: digits' chance is 0.1

    monkeypatch.setattr(training, "train_operator", train)
    monkeypatch.setattr(measure_cli, "_remeasured", lambda *args: "")   # its speed is not what is checked
    run_search(SearchConfig(trials=1, epochs=1, storage=f"sqlite:///{tmp_path / 'syno.db'}", tracking_uri=None,
                            finalists=0, opening="none", max_depth=6, speed_objective="planned"), out=None)
    done = cli_here(tmp_path, "reevaluate", "best", "--no-baseline", "--epochs", "1", "--tracking-uri", "none")
    assert "val_acc 0.1100 with pointwise_cnn on digits" in done.stdout
    assert "warning: " in done.stderr and "val_acc 0.110 is near chance (0.100 for 10 classes)" in done.stderr
    assert "it learned next to nothing in 1 epoch" in done.stderr


def test_the_install_shows_the_cpp_builds_progress():
    """scripts/install.sh's filter of pip's verbose output: ninja's progress lines, one short line each, nothing else
    (the lines as `pip wheel -v .` printed them for this package's 30-step build)."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "install.sh"
    pip_output = "\n".join([
        "Processing ./.", "  Running command Building editable for syno_automl (pyproject.toml)",
        "  [1/30] Building CXX object native/CMakeFiles/syno_core.dir/rules.cpp.o",
        "  -- Configuring done (1.2s)", "  [29/30] Linking CXX static library native/libsyno_core.a",
        "  [30/30] Linking CXX shared module native/_native.cpython-311-x86_64-linux-gnu.so",
        "Successfully installed syno_automl-0.1.0", ""])
    shown = subprocess.run(["bash", "-c", f'source <(sed -n "/^build_progress()/,/^}}/p" {script}); build_progress'],
                           input=pip_output, capture_output=True, text=True, check=True).stdout.splitlines()
    assert shown == ["[install]   C++ core 1/30: rules.cpp.o", "[install]   C++ core 29/30: libsyno_core.a",
                     "[install]   C++ core 30/30: _native.cpython-311-x86_64-linux-gnu.so"]
    text = script.read_text()
    assert 'pip install -v --no-compile --no-deps -e ".[test,tvm]"' in text
    assert "| tee \"$build_log\" | build_progress" in text
