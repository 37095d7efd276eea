"""Spaces and objectives shared by the search tests (importable from spawned worker processes)."""
from __future__ import annotations

import random
import time

from syno_automl import OperatorSpace


def tiny_space(depth: int = 4, max_flops: float | None = 1e9) -> OperatorSpace:
    """[N, C_in] -> [N, C_out] with a coefficient: 52 canonical operators at depth 4, sampled in milliseconds."""
    return OperatorSpace("[N, C_in]", "[N, C_out]", primary=["N: 0", "C_in: 2", "C_out: 2"],
                         coefficients=["k=2: 1"], mappings=[{"N": 4, "C_in": 8, "C_out": 8}], max_depth=depth,
                         max_flops=max_flops)


def assert_cost_bounds_hold(sp: OperatorSpace, ops) -> int:
    """Along every operator's path, each prefix's ``cost_bound`` is at most the operator's planned cost (the bound
    the cost pruning trusts: native/bounds.cpp); returns how many prefixes were checked."""
    checked = 0
    for op in ops:
        node = sp.root()
        for key in op.path[:-1]:
            node = node.apply(key)
            assert node.cost_bound <= op.total_cost() * (1 + 1e-9), (str(op), node.description)
            checked += 1
    return checked


def pseudo_accuracy(op_hash: str) -> float:
    """A deterministic stand-in for training: an accuracy in [0.1, 1) from the operator's hash."""
    return 0.1 + 0.9 * random.Random(op_hash).random()


def objective(trial, sleep: float = 0.0) -> float:
    from syno_automl.search.sampler import suggest_operator

    op = suggest_operator(trial)
    if sleep:
        time.sleep(sleep * (0.5 + random.Random(op.hash).random()))
    return pseudo_accuracy(op.hash)


def propose_sequence(seed: int, n: int) -> list[str]:
    """Operator hashes a fresh in-memory study proposes (run in a spawned process by the tests)."""
    import optuna

    from syno_automl.search.sampler import SynoSampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=SynoSampler(tiny_space(), seed=seed))
    study.optimize(objective, n_trials=n)
    return [t.user_attrs["syno.hash"] for t in study.trials]


def worker(storage_url: str, study_name: str, n_trials: int, seed: int, sleep: float) -> int:
    """One worker process: loads the shared study and runs `n_trials` trials."""
    import functools
    import os

    import optuna

    from syno_automl.search.sampler import SynoSampler
    from syno_automl.study.storage import make_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(storage_url, heartbeat_interval=None)
    study = optuna.load_study(study_name=study_name, storage=storage, sampler=SynoSampler(tiny_space(), seed=seed))
    study.optimize(functools.partial(objective, sleep=sleep), n_trials=n_trials)
    return os.getpid()
