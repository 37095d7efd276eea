"""Property-based fuzzing of every input the package takes (issue 13), on a bounded budget (~30-60 s).

Spec strings, OperatorSpace options/mappings/budgets, sample() arguments and operator JSON are generated and
mutated (tests/_fuzz.py), and each runs in a worker subprocess, so a crash or a hang is caught and reported with its
input. An input must succeed or raise one of the documented exception types; an input the contract calls invalid
must not be accepted; operators returned under budgets must respect them. bench/fuzz.py is the long run.
"""
from __future__ import annotations

import random

import _fuzz
import pytest
from hypothesis import HealthCheck, given, settings


@pytest.fixture(scope="module")
def runner():
    r = _fuzz.Runner(timeout=60)
    yield r
    r.close()


def check(runner: _fuzz.Runner, case: dict) -> None:
    before = (len(runner.tally.silent), len(runner.tally.undocumented))
    outcome = runner.run(case)
    assert outcome[0] not in ("crash", "hang"), (outcome, ascii(case)[:1000])
    assert outcome[0] != "wrong", (outcome, ascii(case)[:1000])
    if outcome[0] == "error":
        assert outcome[1] in _fuzz.DOCUMENTED, (outcome, ascii(case)[:1000])
    assert (len(runner.tally.silent), len(runner.tally.undocumented)) == before, \
        ("invalid input accepted", runner.tally.silent[-1:])


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(case=_fuzz.cases())
def test_generated_inputs_fail_cleanly(runner: _fuzz.Runner, case: dict) -> None:
    check(runner, case)


def test_random_inputs_fail_cleanly(runner: _fuzz.Runner) -> None:
    """The bench's generator (seeded: the same inputs every run), a few hundred inputs."""
    src = _fuzz.RandomSource(random.Random(13))
    for _ in range(400):
        check(runner, _fuzz.gen_case(src))


def test_the_harness_sees_a_crash_and_goes_on(runner: _fuzz.Runner) -> None:
    outcome = runner.run({"kind": "abort"})
    assert outcome[0] == "crash" and outcome[1] == -6  # SIGABRT, as std::terminate would give
    runner.tally.crashes.clear()
    assert runner.run({"kind": "parse", "which": "spec", "text": "H: 2"}) == ("ok", "parsed")


def test_the_oracle_flags_the_issues_examples() -> None:
    base = dict(_fuzz.BASES[0])
    for bad in ({"max_weights": -1}, {"min_unfold_ratio": float("nan")}, {"max_depth": "8"},
                {"mappings": {"N": 2}}, {"input_shape": "[N, C_in, " + "*".join(["H^8"] * 32) + "*H, W]"}):
        assert _fuzz.invalid_reasons({"kwargs": {**base, **bad}, "sample": None}), bad
    assert not _fuzz.invalid_reasons({"kwargs": base, "sample": None})
