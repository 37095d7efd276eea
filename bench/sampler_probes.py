"""What a leaf's first rollout (a probe: 1 completion asked) finds and costs with other (descents, budget a
descent) pairs (issue 46, item 4): the probes of one fill of a study by decisions, sampled again alone.

Fills an in-memory study by --decisions decisions (bench/sampler_decisions.py's default_study: the default
search's space and sampler, prefetch off, each trial told a made-up value at once) and records the first rollouts
of the decisions from --from on. Keeps the hard ones (48 descents of budget 64 ran out, or needed more than one
descent) and --others more at random; samples each again with every pair, and prints how many found a completion,
how many of those 48 × 64 found were lost, and the CPU time of all, as a ratio to 48 × 64's in the same run.

    python bench/sampler_probes.py                      # 1,000 decisions, probes from the 300th
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
warnings.filterwarnings("ignore")

import optuna  # noqa: E402
from sampler import made_up_value  # noqa: E402
from sampler_decisions import default_study  # noqa: E402

from syno_automl import vocabulary as V  # noqa: E402
from syno_automl.errors import EmptySpaceError  # noqa: E402
from syno_automl.search import mcts  # noqa: E402
from syno_automl.space import Node, OperatorSpace  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
PAIRS = [(48, 64), (48, 32), (40, 32), (24, 48), (48, 24), (32, 32), (16, 64), (32, 24)]


def recorded_probes(decisions: int, first: int) -> tuple[OperatorSpace, list[tuple[Node, int]]]:
    """The space and the (leaf, seed) of every first rollout of decisions `first` to `decisions` - 1."""
    probes: list[tuple[Node, int]] = []
    at = [0]
    sample = mcts.MCTS._sample

    def recording(self, count, seed, prefix, attempts):  # noqa: ANN001, ANN202 - MCTS._sample's own
        if count == 1 and prefix is not None and at[0] >= first:
            probes.append((prefix, seed))
        return sample(self, count, seed, prefix, attempts)

    space, study = default_study()
    mcts.MCTS._sample = recording
    try:
        for at[0] in range(decisions):
            trial = study.ask()
            study.tell(trial, made_up_value(0, str(trial.user_attrs.get(V.HASH))))
    finally:
        mcts.MCTS._sample = sample
    return space, probes


def found(space: OperatorSpace, leaf: Node, seed: int, attempts: int, budget: int) -> bool:
    try:
        return bool(space.sample(1, seed=seed, prefix=leaf, max_attempts=attempts, budget=budget, time_limit=600.0))
    except EmptySpaceError:  # the leaf's subtree holds no operator
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--from", dest="first", type=int, default=300, help="record probes from this decision on")
    parser.add_argument("--others", type=int, default=1000, help="probes added at random beside the hard ones")
    args = parser.parse_args()
    space, probes = recorded_probes(args.decisions, args.first)
    hard = []
    for leaf, seed in probes:
        if found(space, leaf, seed, 48, 64) and space.last_report.attempts <= 1:
            continue
        if space.last_report.stop_reason in ("attempts", "count"):
            hard.append((leaf, seed))
    random.Random(1).shuffle(probes)
    chosen = hard + probes[: args.others]
    print(f"{len(probes)} probes recorded; {len(hard)} hard ones and {min(args.others, len(probes))} others\n")
    print("| descents × budget | found | lost (found by 48 × 64) | CPU / 48 × 64's |\n|---|---:|---:|---:|")
    reference: list[bool] = []
    reference_cpu = 0.0
    for attempts, budget in PAIRS:
        started = time.process_time()
        results = [found(space, leaf, seed, attempts, budget) for leaf, seed in chosen]
        cpu = time.process_time() - started
        if not reference:
            reference, reference_cpu = results, cpu
        lost = sum(r and not f for r, f in zip(reference, results))
        print(f"| {attempts} × {budget} | {sum(results)} | {lost} | {cpu / reference_cpu:.2f} |")


if __name__ == "__main__":
    main()
