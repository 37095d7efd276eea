"""The search's final stage (issue 14): finalists and the baseline re-trained alike with several seeds, the whole
models timed, a verdict line; real SQLite Optuna storage and MLflow store, digits, tiny budgets. Nothing here
asserts on a timing (speedups are only checked to be figures)."""
from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from syno_automl import vocabulary as V
from syno_automl.config import SearchConfig
from syno_automl.study import run_search
from syno_automl.study.finalists import choose_finalists, run_final_stage
from syno_automl.study.verdict import Finalist, FinalResult
from syno_automl.tasks import task_of


def final_budget(config: SearchConfig) -> tuple[int, str]:
    return task_of(config).final_budget(config)


def _config(folder: Path, **kw) -> SearchConfig:
    folder.mkdir(parents=True, exist_ok=True)
    # operators of at most 6 primitives (the tree's decisions in a fraction of the time) and the planned speed
    # objective (no whole-model timing before each trial; the same finalists whatever the machine's load): the
    # final stage is what is checked, and it times its finalists itself; 2 trials: both operators of seed 0 are
    # cheaper than the layers and on the pareto front, so that the 2 finalists are both chosen
    base = dict(trials=2, epochs=1, seed=0, storage=f"sqlite:///{folder / 'syno.db'}",
                tracking_uri=f"sqlite:///{folder / 'mlflow.db'}", finalists=2, final_seeds=2, final_epochs=1,
                final_margin=1.0, heartbeat=None, max_depth=6, speed_objective="planned")
    base.update(kw)
    return SearchConfig(**base)


def _eligible(study: optuna.Study) -> set[str]:
    return {t.user_attrs[V.HASH] for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
            if not t.user_attrs.get(V.BASELINE) and t.user_attrs.get(V.COST_RATIO, 2.0) < 1.0}


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory):
    """One small search with the final stage on (huge margin: an operator is named whatever it learned)."""
    folder = tmp_path_factory.mktemp("final")
    out = io.StringIO()
    result = run_search(_config(folder), out=out)
    return folder, result, out.getvalue()


def test_final_stage_retrains_the_finalists_and_the_baseline_with_every_seed(searched) -> None:
    folder, result, printed = searched
    final, study = result.final, result.study
    assert final is not None and final.seeds == 2 and final.epochs == 1
    eligible = _eligible(study)
    assert eligible, "the seed-0 search should complete at least one operator cheaper than the layers"
    labels = [f.label for f in final.candidates]
    assert len(labels) == min(2, len(eligible)) and set(labels) <= eligible
    for f in [final.baseline, *final.candidates]:
        assert len(f.values) + len(f.failures) == 2
    assert len(final.baseline.values) == 2 and final.baseline.speedup == 1.0
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("syno-automl").experiment_id],
                              filter_string=f"tags.`{V.TAG_ROLE}` = '{V.ROLE_FINAL}'")
    assert sorted(r.data.tags[V.HASH] for r in runs) == sorted(["baseline", *labels])
    for r in runs:
        assert r.data.tags["mlflow.parentRunId"] == result.parent_run_id
        history = client.get_metric_history(r.info.run_id, V.final_metric("val_acc", "seed"))
        mine = next(f for f in [final.baseline, *final.candidates] if f.label == r.data.tags[V.HASH])
        assert sorted(m.value for m in history) == pytest.approx(sorted(mine.values))
        # final_val_acc is the mean (what MLflow's Compare shows of a run: its latest value), logged first
        assert r.data.metrics[V.final_metric("val_acc")] == pytest.approx(mine.mean)
        assert next(iter(r.data.metrics)) == V.final_metric("val_acc")
        assert r.data.metrics[V.final_metric("val_acc", "mean")] == pytest.approx(mine.mean)
        if r.data.tags[V.HASH] != "baseline":   # the planned cost beside its ratio, as the trial runs have it
            search_trial = study.trials[int(r.data.tags[V.TAG_SEARCH_TRIAL])]
            assert r.data.metrics["cost"] == pytest.approx(search_trial.user_attrs[V.COST])
        assert V.final_metric("val_acc", "sd") in r.data.metrics
    parent = client.get_run(result.parent_run_id)
    assert parent.data.tags[V.TAG_FINAL_VERDICT] == final.verdict()
    assert parent.data.metrics[V.METRIC_FINAL_FOUND] == 1.0
    assert study.user_attrs[V.FINAL]["verdict"] == final.verdict()
    # a margin of 100 pp: some operator is within it, and the verdict names it with its re-trained figures
    chosen = final.chosen
    assert chosen is not None and parent.data.tags[V.TAG_FINAL_HASH] == chosen.label
    assert final.verdict().startswith(f"fastest operator within 100 pp of the baseline: {chosen.label} ")
    assert f"{chosen.mean:.3f} ± {chosen.sd:.3f}" in final.verdict() and "2 seeds × 1 epoch" in final.verdict()
    assert "final stage (" in printed and f"final {chosen.label}" in printed


def test_a_margin_no_operator_can_meet_gives_a_plain_none(searched) -> None:
    folder, result, _ = searched
    config = dataclasses.replace(result.context.config, final_margin=-1.0, finalists=1, final_seeds=1,
                                 tracking_uri=None)
    final = run_final_stage(result.study, dataclasses.replace(result.context, config=config), out=None)
    assert final is not None and final.chosen is None
    assert final.verdict().startswith("no operator within -100 pp of the baseline")
    assert final.best is not None and final.best.label in final.verdict()


def test_also_measure_times_the_finalists_on_more_targets_and_logs_each(searched, tmp_path: Path,
                                                                       monkeypatch) -> None:
    """--also-measure: the finalists timed on more speed targets, speedup.<target> on each final run, their kernels
    per target; the verdict keeps --target's. Here --target is cuda.eager (not timed without a GPU: the verdict
    says so) and the extra target cpu.eager is timed (no compile: seconds)."""
    from syno_automl.study.finalists import measured_targets
    from syno_automl.tracking import SearchTracker

    _, result, _ = searched
    monkeypatch.chdir(tmp_path)  # a store of its own (the module's is read by the other tests), whose artifact
    #                              paths are relative to its folder
    config = dataclasses.replace(result.context.config, finalists=1, final_seeds=1, speed_target="cuda.eager",
                                 tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
                                 also_measure=("cpu.eager", "cuda.eager", "cpu.eager"))
    context = result.context.with_config(config)
    assert [t.name for t in measured_targets(context)] == ["cuda.eager", "cpu.eager"]  # the main one first, once
    out = io.StringIO()
    tracker = SearchTracker(config.tracking_uri)
    final = run_final_stage(result.study, context, tracker, None, out=out)
    printed = out.getvalue()
    candidate = final.candidates[0]
    assert f"also on cpu.eager: {candidate.label} " in printed and "also on cuda.eager" not in printed
    assert "cpu.eager: torch eager inference" in printed
    import torch

    if not torch.cuda.is_available():
        assert "(cuda.eager: not timed (no CUDA device here))" in final.verdict()
    client = MlflowClient(config.tracking_uri)
    for finalist in (final.baseline, candidate):
        metrics = client.get_run(finalist.run_id).data.metrics
        assert metrics[V.speedup_metric("cpu.eager")] > 0
    assert client.get_run(final.baseline.run_id).data.metrics[V.speedup_metric("cpu.eager")] == 1.0
    kernels = {f.path for f in tracker.run(candidate.run_id).artifacts().list_artifacts("kernels")}
    assert kernels == {"kernels/cuda.eager", "kernels/cpu.eager"}


def test_the_same_seed_gives_the_same_finalists_and_accuracies(searched, tmp_path: Path) -> None:
    _, first, _ = searched
    again = run_search(_config(tmp_path, tracking_uri=None), out=None).final
    assert [f.label for f in again.candidates] == [f.label for f in first.final.candidates]
    assert [f.values for f in [again.baseline, *again.candidates]] == \
        [f.values for f in [first.final.baseline, *first.final.candidates]]


def test_finalists_zero_skips_the_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from syno_automl.study import training

    # what is checked is that no stage runs: the trials' training is replaced by a fixed value (test_tasks.py
    # shows the search trains through this attribute)
    monkeypatch.setattr(training, "train_operator", lambda context, trial, run, **kw: 0.5)
    out = io.StringIO()
    result = run_search(_config(tmp_path, trials=1, finalists=0, tracking_uri=None), out=out)
    assert result.final is None and V.FINAL not in result.study.user_attrs
    assert "final stage" not in out.getvalue()


def test_choose_finalists_ranks_cheaper_operators_by_accuracy_and_skips_the_rest(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", direction="maximize")
    rows = [(True, 1.0, 0.98, "b"), (False, 0.5, 0.90, "a1"), (False, 1.2, 0.97, "dear"), (False, 0.8, 0.95, "a2"),
            (False, 0.8, 0.95, "a2"), (False, 0.3, 0.70, "a3")]
    for baseline, cost, value, h in rows:
        trial = study.ask()
        trial.set_user_attr(V.HASH, h)
        trial.set_user_attr(V.COST_RATIO, cost)
        if baseline:
            trial.set_user_attr(V.BASELINE, True)
        study.tell(trial, value)
    assert [t.user_attrs[V.HASH] for t in choose_finalists(study, 3)] == ["a2", "a1", "a3"]
    assert [t.user_attrs[V.HASH] for t in choose_finalists(study, 1)] == ["a2"]
    assert choose_finalists(study, 0) == []
    # multi-objective (accuracy max, cost ratio min): the Pareto front first (a3 before the dominated a4, a5)
    pareto = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", directions=["maximize", "minimize"])
    for h, acc, cost in (("a1", 0.90, 0.5), ("a2", 0.95, 0.8), ("a3", 0.70, 0.3), ("a4", 0.85, 0.9),
                         ("a5", 0.80, 0.6)):
        trial = pareto.ask()
        trial.set_user_attr(V.HASH, h)
        trial.set_user_attr(V.COST_RATIO, cost)
        pareto.tell(trial, (acc, cost))
    assert [t.user_attrs[V.HASH] for t in choose_finalists(pareto, 4)] == ["a2", "a1", "a3", "a4"]


@pytest.mark.parametrize("values, k, chosen", [
    ((0.95, 0.94, 0.90, 0.80), 1, ["a0", "a1"]),              # 0.94 within 1 pp of 0.95: re-trained too
    ((0.95, 0.94, 0.935, 0.93), 1, ["a0", "a1"]),             # ... but at most 2x k
    ((0.95, 0.90, 0.899, 0.80), 2, ["a0", "a1", "a2"]),       # a tie with the lowest chosen
    ((0.95, 0.90, 0.85, 0.80), 2, ["a0", "a1"]),              # no tie: k, as before
])
def test_finalists_within_the_noise_of_a_chosen_one_are_retrained_too(tmp_path: Path, values: tuple, k: int,
                                                                       chosen: list[str]) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", direction="maximize")
    for i, value in enumerate(values):
        trial = study.ask()
        trial.set_user_attr(V.HASH, f"a{i}")
        trial.set_user_attr(V.COST_RATIO, 0.5)
        study.tell(trial, value)
    assert [t.user_attrs[V.HASH] for t in choose_finalists(study, k)] == chosen
    assert len(choose_finalists(study, k, tie=0.0)) == k   # no noise allowed: exactly k
    assert len(choose_finalists(study, k, tie=1.0, most=3)) == 3


def test_the_verdict_names_the_fastest_operator_within_the_margin() -> None:
    base = Finalist("baseline", 0, "the original layers", 1.0, 0.9, [0.98, 0.982], speedup=1.0)
    slow = Finalist("slowgood", 1, "A", 0.5, 0.9, [0.98, 0.981], speedup=1.1)
    fast = Finalist("fastok", 2, "B", 0.4, 0.9, [0.972, 0.974], speedup=1.5)
    weak = Finalist("fastbad", 3, "C", 0.2, 0.9, [0.90, 0.92], speedup=3.0)
    result = FinalResult(base, [slow, fast, weak], seeds=2, epochs=4, margin=0.01, timing="t")
    assert result.chosen is fast
    assert "fastok B accuracy 0.973 ± 0.001 (baseline 0.981 ± 0.001, 2 seeds × 4 epochs), speedup 1.50× (t)" \
        in result.verdict()
    strict = dataclasses.replace(result, candidates=[weak])
    assert strict.chosen is None and strict.verdict().startswith("no operator within 1 pp of the baseline")
    assert "best: fastbad 0.910 ± 0.014, speedup 3.00×" in strict.verdict()
    assert "no completed operator" in dataclasses.replace(result, candidates=[]).verdict()
    assert final_budget(SearchConfig(epochs=3)) == (6, "epochs")
    assert final_budget(SearchConfig(final_epochs=5)) == (5, "epochs")


def test_the_loss_verdict_names_the_fastest_operator_within_the_margin_in_nats() -> None:
    """A minimized objective (lm): within = mean val_loss <= the baseline's + margin (absolute nats)."""
    base = Finalist("baseline", 0, "the original layers", 1.0, 2.2, [2.30, 2.32], speedup=1.0, tokens_per_s=5e4)
    slow = Finalist("slowgood", 1, "A", 0.5, 2.2, [2.29, 2.30], speedup=1.1, tokens_per_s=5.5e4)
    fast = Finalist("fastok", 2, "B", 0.4, 2.3, [2.315, 2.325], speedup=1.5, tokens_per_s=7.5e4)   # +0.010
    over = Finalist("fastbad", 3, "C", 0.2, 2.4, [2.32, 2.34], speedup=3.0, tokens_per_s=1.5e5)     # +0.020
    result = FinalResult(base, [slow, fast, over], seeds=2, epochs=40, margin=0.01, timing="t", metric="val_loss",
                         maximize=False, unit="steps")
    assert [result.within(f) for f in (slow, fast, over)] == [True, True, False]
    assert result.chosen is fast and result.best is slow
    assert result.verdict() == ("fastest operator within 0.01 nats of the baseline's val_loss 2.310 ± 0.014: fastok B "
                                "val_loss 2.320 ± 0.007 (2 seeds × 40 steps), speedup 1.50× (75,000 vs 50,000 "
                                "tokens/s; t)")
    outside = dataclasses.replace(result, candidates=[over])
    assert outside.chosen is None and outside.verdict() == (
        "no operator within 0.01 nats of the baseline's val_loss 2.310 ± 0.014 (best: fastbad val_loss 2.330 "
        "± 0.014, speedup 3.00×; 2 seeds × 40 steps, 150,000 vs 50,000 tokens/s; t)")
    # a lower loss than the baseline's is within any non-negative margin; no "pp" anywhere for a loss
    assert dataclasses.replace(result, margin=0.0, candidates=[slow, over]).chosen is slow
    none = dataclasses.replace(result, candidates=[])
    assert none.verdict() == ("no operator within 0.01 nats of the baseline's val_loss (no completed operator cheaper "
                              "than the replaced layers: none to re-train)")
    assert all("pp" not in r.verdict() for r in (result, outside, none))
    assert "tokens/s" in result.table()[0] and result.to_dict()["steps"] == 40
    lm = SearchConfig(task="lm", max_steps=30)
    assert final_budget(lm) == (60, "steps") and final_budget(dataclasses.replace(lm, final_steps=7)) == (7, "steps")
    assert final_budget(SearchConfig(epochs=2)) == (4, "epochs")
    with pytest.raises(ValueError, match="--final-epochs applies to --task image, not lm"):
        SearchConfig(task="lm", final_epochs=3).validate()


def _lm_config(folder: Path, **kw) -> SearchConfig:
    """A tiny lm search: short sequences, a few steps per trial and per final seed."""
    base = dict(task="lm", trials=2, seq_len=16, batch_size=8, max_steps=10, val_every=5, val_batches=2,
                time_budget=None, final_epochs=None, final_steps=12)
    base.update(kw)
    return _config(folder, **base)


@pytest.fixture(scope="module")
def lm_searched(tmp_path_factory: pytest.TempPathFactory):
    """A tiny lm search with the final stage on (a 10-nat margin: an operator is named whatever it learned)."""
    folder = tmp_path_factory.mktemp("lmfinal")
    out = io.StringIO()
    result = run_search(_lm_config(folder, final_margin=10.0), out=out)
    return folder, result, out.getvalue()


def test_the_lm_final_stage_judges_loss_and_tokens_per_s(lm_searched) -> None:
    folder, result, printed = lm_searched
    final, study = result.final, result.study
    assert final is not None and (final.metric, final.maximize, final.unit, final.epochs) == ("val_loss", False,
                                                                                            "steps", 12)
    eligible = _eligible(study)
    assert eligible, "the seed-0 lm search should complete at least one operator cheaper than the layers"
    labels = [f.label for f in final.candidates]
    assert len(labels) == min(2, len(eligible)) and set(labels) <= eligible
    for f in [final.baseline, *final.candidates]:
        assert len(f.values) == 2 and all(0 < v < 6.0 for v in f.values)   # losses (ln 256 = 5.5), not accuracies
        assert f.tokens_per_s is not None and f.tokens_per_s > 0
        assert f.speedup == pytest.approx(f.tokens_per_s / final.baseline.tokens_per_s)  # the tokens/s ratio
    # every finalist is within a 10-nat margin: the verdict names one only when its speedup's interval lies above 1
    # (at this tiny size a QKV operator may run as fast as the layers: then it says none is measurably faster)
    chosen = final.chosen
    verdict = final.verdict()
    head = f"within 10 nats of the baseline's val_loss {final.baseline.figure()}"
    if chosen is not None:
        assert chosen.faster and verdict.startswith(f"fastest operator {head}: {chosen.label} ")
        assert f"val_loss {chosen.figure()} (2 seeds × 12 steps)" in verdict
    else:
        assert not any(f.faster for f in final.candidates)
        assert verdict.startswith(f"no operator {head} is measurably faster (fastest: ")
    assert "tokens/s; cpu.eager: torch eager" in verdict
    assert "batch 8 × 16 tokens" in final.timing and "pp" not in verdict
    recorded = study.user_attrs[V.FINAL]
    assert recorded["verdict"] == verdict and recorded["metric"] == "val_loss" and recorded["steps"] == 12
    assert recorded["baseline"]["tokens_per_s"] > 0 and recorded["chosen"] == (chosen.label if chosen else None)
    assert all(c["speedup"] is not None and c["tokens_per_s"] > 0 for c in recorded["candidates"])
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("syno-automl").experiment_id],
                              filter_string=f"tags.`{V.TAG_ROLE}` = '{V.ROLE_FINAL}'")
    assert sorted(r.data.tags[V.HASH] for r in runs) == sorted(["baseline", *labels])
    for r in runs:
        mine = next(f for f in [final.baseline, *final.candidates] if f.label == r.data.tags[V.HASH])
        history = client.get_metric_history(r.info.run_id, V.final_metric("val_loss", "seed"))
        assert sorted(m.value for m in history) == pytest.approx(sorted(mine.values))
        assert r.data.metrics[V.METRIC_FINAL_TOKENS_PER_S] == pytest.approx(mine.tokens_per_s)
    parent = client.get_run(result.parent_run_id)
    assert parent.data.tags[V.TAG_FINAL_VERDICT] == verdict
    assert parent.data.tags[V.TAG_FINAL_HASH] == (chosen.label if chosen else "none")
    assert parent.data.metrics[V.final_metric("baseline_val_loss", "mean")] == pytest.approx(final.baseline.mean)
    assert parent.data.metrics[V.METRIC_FINAL_FOUND] == (1.0 if chosen else 0.0)
    assert "final stage: re-training" in printed and "× 12 steps each" in printed


def test_an_lm_margin_no_operator_can_meet_says_none(lm_searched) -> None:
    _, result, _ = lm_searched
    config = dataclasses.replace(result.context.config, final_margin=-10.0, finalists=1, final_seeds=1,
                                 tracking_uri=None)
    final = run_final_stage(result.study, dataclasses.replace(result.context, config=config), out=None)
    assert final is not None and final.chosen is None and final.best is not None
    assert final.verdict().startswith(f"no operator within -10 nats of the baseline's val_loss "
                                      f"{final.baseline.figure()} (best: {final.best.label} val_loss ")


def _op(label: str, values: list[float], speed: tuple[float, float, float] | None, flops: float = 1e6,
        params: float = 1e3) -> Finalist:
    ratio, low, high = speed if speed is not None else (None, None, None)
    return Finalist(label, 1, "op", 0.5, None, values, speedup=ratio, speedup_low=low, speedup_high=high,
                    flops=flops, params=params)


def _judged(*candidates: Finalist) -> FinalResult:
    base = Finalist("baseline", 0, "the original layers", 1.0, None, [0.98, 0.98, 0.98], speedup=1.0,
                    speedup_low=0.99, speedup_high=1.01)
    return FinalResult(base, list(candidates), seeds=3, epochs=6, margin=0.01, timing="cpu.eager: t")


def test_operators_tied_in_accuracy_and_speed_are_named_by_fewer_flops_then_params_then_hash() -> None:
    """Identical runs once named different winners: finalists tied on accuracy, speeds 1-3 % apart. Overlapping
    intervals are a tie now, and the tie rule decides, whatever the noise put first."""
    a = _op("e1cae8d57c846d0d", [0.9935] * 3, (1.41, 1.37, 1.45), flops=2.0e6)
    b = _op("c740ab233de2e0ec", [0.9935] * 3, (1.38, 1.35, 1.42), flops=1.5e6)
    c = _op("ad6c0141110ce7ad", [0.9935] * 3, (1.30, 1.28, 1.33), flops=1.0e6)   # slower: not tied with a
    for order in ([a, b, c], [c, b, a], [b, a, c]):
        result = _judged(*order)
        assert result.chosen is b and [f.label for f in result.tied()] == [b.label, a.label]
        assert result.verdict().endswith("; tied in accuracy and speed with 1 other (e1cae8d57c846d0d): named by "
                                         "fewer FLOPs, then parameters, then hash; decided by FLOPs: 1,500,000 vs "
                                         "2,000,000 (e1cae8d57c846d0d)")
        assert "speedup 1.38× [1.35, 1.42]" in result.verdict()
    same = [_op(h, [0.99] * 3, (1.4, 1.3, 1.5), flops=1e6, params=p) for h, p in (("bb", 5), ("aa", 5), ("cc", 4))]
    assert [f.label for f in _judged(*same).tied()] == ["cc", "aa", "bb"]   # params, then the hash


def test_a_speedup_whose_interval_holds_one_is_not_faster() -> None:
    flat = _op("f1", [0.98] * 3, (1.02, 0.97, 1.07))
    result = _judged(flat)
    assert result.chosen is None and not flat.faster
    assert result.verdict().startswith("no operator within 1 pp of the baseline 0.980 ± 0.000 is measurably faster "
                                       "(fastest: f1 accuracy 0.980 ± 0.000, speedup 1.02× [0.97, 1.07]")


def test_accuracy_that_differs_beyond_its_interval_breaks_the_tie() -> None:
    """Same speed, accuracy intervals apart: not a tie; the faster by ratio is named."""
    a = _op("aa", [0.975, 0.976, 0.977], (1.40, 1.36, 1.44), flops=9e6)
    b = _op("bb", [0.985, 0.986, 0.987], (1.39, 1.35, 1.43), flops=1e6)
    result = _judged(a, b)
    assert result.chosen is a and result.tied() == [a]


def test_no_speed_claim_without_a_measurement() -> None:
    result = _judged(_op("u1", [0.98] * 3, None))
    result.timing = "cuda.eager: not timed (no CUDA device here)"
    assert result.chosen is None
    assert result.verdict().startswith("no speed claim: 1 operator within 1 pp of the baseline 0.980 ± 0.000")
    assert result.verdict().endswith("their speed not measured (cuda.eager: not timed (no CUDA device here))")


def test_intervals_survive_the_study_attribute() -> None:
    a = _op("aa", [0.98, 0.99], (1.4, 1.3, 1.5))
    result = _judged(a)
    again = FinalResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.candidates[0].speed_interval() == (1.3, 1.5) and again.baseline.speedup_text() == \
        "1.00× [0.99, 1.01]"
    assert again.verdict() == result.verdict()


def test_the_final_stage_says_how_long_it_will_take_from_the_search_trials() -> None:
    """A long final stage once started without a word on its length (78 % of a ResNet-18 run)."""
    import datetime
    import types

    from syno_automl.study.finalists import expected_seconds
    from syno_automl.tasks import ImageTask

    study = optuna.create_study()
    start = datetime.datetime(2026, 1, 1)
    for seconds in (10, 12, 30):   # median 12 s for a trial of 3 epochs: 4 s an epoch
        trial = optuna.trial.create_trial(value=0.9)
        trial.datetime_start, trial.datetime_complete = start, start + datetime.timedelta(seconds=seconds)
        study.add_trial(trial)
    context = types.SimpleNamespace(config=SearchConfig(epochs=3), task=ImageTask())
    assert expected_seconds(study, context, budget=6, trainings=4 * 3) == pytest.approx(12 * 2 * 12)
    assert expected_seconds(optuna.create_study(), context, budget=6, trainings=12) is None


def test_an_empty_final_stage_says_what_faster_meant() -> None:
    """A study timed on its speed target (second objective the measured time ratio) where no operator beat the
    original: the final stage and the verdict say so and name the target (an H200 search on cuda.compiled measured
    every operator slower, and its verdict spoke of planned cost); a planned-cost study keeps its own words; the
    reason survives the study's stored result."""
    from types import SimpleNamespace

    from syno_automl.runtime import parse_target
    from syno_automl.study.finalists import _no_candidate
    from syno_automl.study.verdict import NO_CHEAPER_OPERATOR

    context = SimpleNamespace(resolved=SimpleNamespace(speed=parse_target("cuda.compiled")))
    measured = optuna.create_study(directions=["maximize", "minimize"])
    measured.set_metric_names(["val_acc", "time_ratio"])
    planned = optuna.create_study(directions=["maximize", "minimize"])
    planned.set_metric_names(["val_acc", "cost_ratio"])
    reason = _no_candidate(measured, context)
    assert reason == "no completed operator measured faster than the original on cuda.compiled"
    assert _no_candidate(planned, context) == NO_CHEAPER_OPERATOR
    base = Finalist("baseline", 0, "the original layers", 1.0, 0.7, [])
    result = FinalResult(base, [], seeds=1, epochs=8, margin=0.01, timing="not timed", no_candidate=reason)
    assert result.verdict() == f"no operator within 1 pp of the baseline ({reason}: none to re-train)"
    assert FinalResult.from_dict(result.to_dict()).verdict() == result.verdict()
    old = {k: v for k, v in result.to_dict().items() if k != "no_candidate"}   # a result stored before the field
    assert NO_CHEAPER_OPERATOR in FinalResult.from_dict(old).verdict()
