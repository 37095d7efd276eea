"""Spaces, objectives, storage checks and a process check shared by the tests (importable from spawned worker
processes)."""
from __future__ import annotations

import os
import random
import time

from syno_automl import OperatorSpace


def tiny_space(depth: int = 4, max_flops: float | None = 1e9) -> OperatorSpace:
    """[N, C_in] -> [N, C_out] with a coefficient: 52 canonical operators at depth 4, sampled in milliseconds."""
    return OperatorSpace("[N, C_in]", "[N, C_out]", primary=["N: 0", "C_in: 2", "C_out: 2"],
                         coefficients=["k=2: 1"], mappings=[{"N": 4, "C_in": 8, "C_out": 8}], max_depth=depth,
                         max_flops=max_flops)


CONV_PRIMARY = ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"]
CONV_MAPPING = {"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}
CONV_ARGS = {"input_shape": "[N, C_in, H, W]", "output_shape": "[N, C_out, H, W]", "primary": CONV_PRIMARY,
             "coefficients": ["k=3: 2"], "mappings": [CONV_MAPPING], "max_depth": 6}


def conv_space(**kw) -> OperatorSpace:
    """A small conv2d-shaped space (``CONV_ARGS``, depth 6), any argument replaced by ``kw``: the space the
    bad-input tests pass their one bad argument to."""
    return OperatorSpace(**{**CONV_ARGS, **kw})


# The four specs the random-operator tests sample (conv2d, matmul, 1-D, pooling-shaped): input shape, output
# shape, primary variables, coefficients, the one mapping, options.
RANDOM_SPECS = {
    "conv2d": ("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
               ["k=3: 2", "s=2: 2"], {"N": 2, "C_in": 4, "C_out": 4, "H": 6, "W": 6}, {}),
    "matmul": ("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["k=3: 2", "s=2: 2"],
               {"N": 3, "C_in": 8, "C_out": 4}, {}),
    "conv1d": ("[N, C, L]", "[N, C, L]", ["N: 0", "C: 2", "L: 2"], ["k=3: 2", "s=2: 2"],
               {"N": 2, "C": 4, "L": 8}, {}),
    "pool": ("[N, C, H, W]", "[N, C, s^-1*H, s^-1*W]", ["N: 0", "C: 2", "H: 2", "W: 2"], ["k=3: 2", "s=2: 2"],
             {"N": 2, "C": 4, "H": 8, "W": 8}, {"min_weights": 0}),
}


def random_spec_space(name: str) -> OperatorSpace:
    """The space of ``RANDOM_SPECS[name]`` at depth 8."""
    inp, out, primary, coefficients, mapping, options = RANDOM_SPECS[name]
    return OperatorSpace(inp, out, primary, coefficients, [mapping], max_depth=8, **options)


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


def brief_speed_protocol():
    """A brief speed protocol (4 pairs, 2 copies, 5 ms blocks): the speed paths' structure checked in seconds,
    never their figures."""
    from syno_automl.speed.paired import PairedProtocol

    return PairedProtocol(warmup=1, min_block_s=0.005, min_pairs=4, max_pairs=4, copies=2)


def speed_context_fixture(speed_process: str):
    """A module's `context` fixture: the default search's context at depth 6, its final stage timed where
    `speed_process` says (``context = speed_context_fixture("fresh")`` at a test module's top)."""
    import pytest

    @pytest.fixture(scope="module")
    def context():
        from syno_automl.config import SearchConfig
        from syno_automl.study import prepare

        return prepare(SearchConfig(tracking_uri=None, speed_process=speed_process, max_depth=6))
    return context


def check_attrs_written_at_once(study) -> None:
    """optuna_private.write_attrs_at_once on `study`'s RDB storage (SQLite, PostgreSQL: each its dialect's multi-row
    upsert): new keys added, a key set again replaced, and a finished trial refused as Optuna refuses it, leaving
    nothing written. `study` holds no trial yet."""
    import optuna
    import pytest

    from syno_automl import optuna_private as P

    storage = P.storage_of(study)
    trial = study.ask()
    assert P.write_attrs_at_once(storage, trial._trial_id, {"a": 1, "b": [1, 2]}, {"c": "x"})
    assert P.write_attrs_at_once(storage, trial._trial_id, {"a": {"k": 2}}, {"c": "y", "d": None})
    frozen = study.trials[0]
    assert frozen.system_attrs == {"a": {"k": 2}, "b": [1, 2]} and frozen.user_attrs == {"c": "y", "d": None}
    study.tell(trial, 1.0)
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        P.write_attrs_at_once(storage, trial._trial_id, {"a": 3}, {})
    assert study.trials[0].system_attrs["a"] == {"k": 2}   # the refused write left nothing


def alive(pid: int) -> bool:
    """Whether process `pid` still runs: a zombie (exited, not yet reaped by its new parent; where nothing reaps
    orphans, it stays listed) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
