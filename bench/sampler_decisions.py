"""Where a SynoSampler decision's time goes as a study fills (issue 46, item 4): each decision's CPU time, its walks
ended in a dead node (restarts), and every ``space.sample`` call its rollouts made (how many completions asked, the
depth of the leaf, the milliseconds, how many found, whether the leaf's subtree was exhausted).

The space and the sampler are those of the default ``syno-automl search`` (as bench/sampler.py builds them),
prefetch off (decisions back to back), each trial told a made-up value at once (bench/sampler.py's). Prints, per
band of decisions, the mean and median CPU time, sample calls and restarts; then, for the last bands, the rollouts
that found nothing by leaf depth (exhausted: the sampler proved the subtree empty; not: its attempts ran out), the
share of the decisions' sampling they take.

    python bench/sampler_decisions.py                    # 1,100 decisions, bands of 200
    python bench/sampler_decisions.py --decisions 400 --log decisions.jsonl
"""
from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
warnings.filterwarnings("ignore")

import optuna  # noqa: E402
from sampler import made_up_value  # noqa: E402

from syno_automl import vocabulary as V  # noqa: E402
from syno_automl.config import SearchConfig  # noqa: E402
from syno_automl.search import mcts  # noqa: E402
from syno_automl.search.sampler import SynoSampler  # noqa: E402
from syno_automl.space import OperatorSpace  # noqa: E402
from syno_automl.study import prepare  # noqa: E402
from syno_automl.study.opening import sampler_reward  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)


def recorded_decisions(n: int) -> list[dict]:
    """n decisions on a growing in-memory study: {cpu_ms, restarts, fallback, calls: [(count, depth, ms, found,
    exhausted)]} each."""
    calls: list[tuple] = []
    proposals: list[mcts.Proposal] = []
    sample, propose = mcts.MCTS._sample, mcts.MCTS.propose

    def timed_sample(self, count, seed, prefix, attempts):  # noqa: ANN001, ANN202 - MCTS._sample's own
        started = time.perf_counter()
        ops, exhausted = sample(self, count, seed, prefix, attempts)
        depth = len(prefix.path) if prefix is not None else -1
        calls.append((count, depth, (time.perf_counter() - started) * 1e3, len(ops), exhausted))
        return ops, exhausted

    def kept_propose(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - MCTS.propose's own
        proposal = propose(self, *args, **kwargs)
        proposals.append(proposal)
        return proposal

    mcts.MCTS._sample, mcts.MCTS.propose = timed_sample, kept_propose
    try:
        return _decide(n, calls, proposals)
    finally:
        mcts.MCTS._sample, mcts.MCTS.propose = sample, propose


def default_study() -> tuple[OperatorSpace, optuna.Study]:
    """The default search's space, and an in-memory study of its sampler (prefetch off) holding the baseline trial."""
    config = SearchConfig(tracking_uri=None)
    context = prepare(config)
    sampler = SynoSampler(context.space, seed=config.seed, exploration=config.exploration,
                          reward=sampler_reward(config, context), flops_bins=config.flops_bins, prefetch=False)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.add_trial(optuna.create_trial(value=0.98, user_attrs={V.BASELINE: True}))
    return context.space, study


def _decide(n: int, calls: list[tuple], proposals: list[mcts.Proposal]) -> list[dict]:
    _, study = default_study()
    out = []
    for _ in range(n):
        calls.clear()
        proposals.clear()
        cpu = time.process_time()
        trial = study.ask()
        record = {"cpu_ms": (time.process_time() - cpu) * 1e3, "calls": list(calls), "restarts": 0, "fallback": False}
        if proposals:
            record.update(restarts=proposals[-1].restarts, fallback=proposals[-1].fallback)
        out.append(record)
        study.tell(trial, made_up_value(0, str(trial.user_attrs.get(V.HASH))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1100)
    parser.add_argument("--band", type=int, default=200, help="decisions per row (default: %(default)s)")
    parser.add_argument("--log", help="also write each decision's record here (JSON lines)")
    args = parser.parse_args()
    records = recorded_decisions(args.decisions)
    if args.log:
        Path(args.log).write_text("".join(json.dumps(r) + "\n" for r in records))
    print("| decisions | CPU mean | CPU median | sample calls | restarts | fallbacks |\n|---|---:|---:|---:|---:|---:|")
    for lo in range(0, len(records), args.band):
        band = records[lo: lo + args.band]
        print(f"| {lo}-{lo + len(band) - 1} | {statistics.mean(r['cpu_ms'] for r in band):.0f} ms | "
              f"{statistics.median(r['cpu_ms'] for r in band):.0f} ms | "
              f"{statistics.mean(len(r['calls']) for r in band):.1f} | "
              f"{statistics.mean(r['restarts'] for r in band):.1f} | {sum(r['fallback'] for r in band)} |")
    late = records[max(0, len(records) - 300):]
    total = sum(c[2] for r in late for c in r["calls"])
    empty: dict[tuple[int, bool], list[float]] = collections.defaultdict(list)
    for r in late:
        for _count, depth, ms, found, exhausted in r["calls"]:
            if found == 0:
                empty[depth, exhausted].append(ms)
    print(f"\nthe last {len(late)} decisions: {total / 1e3:.1f} s in space.sample; the rollouts that found nothing:")
    print("| leaf depth | subtree | calls | ms each | share of sampling |\n|---:|---|---:|---:|---:|")
    for (depth, exhausted), times in sorted(empty.items()):
        print(f"| {depth} | {'exhausted' if exhausted else 'attempts ran out'} | {len(times)} | "
              f"{statistics.mean(times):.1f} | {100 * sum(times) / total:.0f}% |")


if __name__ == "__main__":
    main()
