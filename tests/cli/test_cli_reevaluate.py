"""`syno-automl reevaluate` re-trains in the study's recorded settings (model, image size, batch, lr, seed...), as a
`--resume` takes them, changing only what is passed; it says which model it re-trained and what differs."""
from __future__ import annotations

from pathlib import Path

from _cli_helpers import cli_here, read_runs

from syno_automl import vocabulary as V


def test_reevaluate_takes_the_study_settings_and_changes_only_what_is_passed(tmp_path: Path) -> None:
    # the planned speed objective: no trial timed (the settings re-trained with are what is read)
    cli_here(tmp_path, "search", "--trials", "1", "--epochs", "1", "--image-size", "12", "--batch-size", "32",
             "--lr", "0.1", "--seed", "3", "--timeout", "0", "--finalists", "0", "--objective", "accuracy",
             "--cost-ratio", "0", "--speed-objective", "planned", "-q")
    done = cli_here(tmp_path, "reevaluate", "best", "--no-baseline", "--epochs", "2")  # none of the flags above
    runs = [r for r in read_runs(tmp_path) if r.data.tags.get(V.TAG_ROLE) == "reevaluation"]
    assert len(runs) == 1
    params = {k[len("search."):]: v for k, v in runs[0].data.params.items() if k.startswith("search.")}
    assert {k: params.get(k) for k in ("model", "dataset", "image_size", "batch_size", "lr", "seed", "epochs")} == {
        "model": "pointwise_cnn", "dataset": "digits", "image_size": "12", "batch_size": "32", "lr": "0.1", "seed": "3",
        "epochs": "2"}
    assert "cost_ratio" not in params  # --cost-ratio 0 (off), as recorded; not the default 1.0
    assert "re-training pointwise_cnn on digits at 12x12 as the search did, but: epochs 1 (now 2)" in done.stdout
    assert "with pointwise_cnn on digits at 12x12 after 2 epochs" in done.stdout
