"""The final stage's timing in a fresh process (syno_automl.speed.process): the figures come back from a new
process, a config that cannot be sent falls back to this process and says so, a Ctrl-C ends the child, and the
setting and its environment default are checked."""
from __future__ import annotations

import _thread
import copy
import dataclasses
import multiprocessing
import signal
import threading
import time

import pytest
from _syno_helpers import brief_speed_protocol, speed_context_fixture

from syno_automl.config import SearchConfig
from syno_automl.errors import OptionError
from syno_automl.speed.process import SPEED_PROCESS_ENV, measure_in_fresh_process, speed_process_of
from syno_automl.study.context import resolve

BRIEF = brief_speed_protocol()


context = speed_context_fixture("fresh")


def test_the_figures_come_back_from_a_fresh_process(context):
    ops = context.space.sample(1, seed=3)
    speed = measure_in_fresh_process(context.speed_subject(), ops, protocol=BRIEF)
    assert speed.label.endswith("(a fresh process)"), speed.label
    assert speed.control is not None and speed.control.pairs == 4
    assert speed.estimates[0] is not None and speed.estimates[0].pairs == 4 and speed.estimates[0].ratio > 0
    assert speed.conditions is not None and speed.conditions.threads == 1   # the search's threads (conftest: 1)
    assert not multiprocessing.active_children()


def test_a_config_that_cannot_be_sent_is_timed_here_and_says_why(context):
    unsendable = copy.copy(context)
    unsendable.config = copy.copy(context.config)
    object.__setattr__(unsendable.config, "callback", lambda: None)   # a lambda does not pickle
    speed = measure_in_fresh_process(unsendable.speed_subject(), context.space.sample(1, seed=3), protocol=BRIEF)
    assert "in the search's process: a fresh one failed" in speed.label
    assert speed.estimates[0] is not None and speed.control is not None


def test_a_subject_without_a_recipe_is_timed_here_and_says_why(context):
    subject = dataclasses.replace(context.speed_subject(), recipe=None)
    speed = measure_in_fresh_process(subject, context.space.sample(1, seed=3), protocol=BRIEF)
    assert "no recipe" in speed.label and not multiprocessing.active_children()
    assert speed.estimates[0] is not None and speed.control is not None


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt, as in a terminal, even where pytest runs with SIGINT ignored (a background
    job: interrupt_main() then does nothing)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_while_the_child_measures_ends_it(context, ctrl_c_raises):
    def interrupt_once_started() -> None:
        while not multiprocessing.active_children():
            time.sleep(0.01)
        _thread.interrupt_main()

    threading.Thread(target=interrupt_once_started, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        measure_in_fresh_process(context.speed_subject(), context.space.sample(1, seed=3), protocol=BRIEF)
    assert not multiprocessing.active_children()


def test_the_setting_then_the_environment_then_fresh(monkeypatch):
    monkeypatch.delenv(SPEED_PROCESS_ENV, raising=False)
    assert speed_process_of(SearchConfig(tracking_uri=None).speed_process) == "fresh"
    assert speed_process_of(SearchConfig(tracking_uri=None, speed_process="same").speed_process) == "same"
    monkeypatch.setenv(SPEED_PROCESS_ENV, "same")
    assert speed_process_of(SearchConfig(tracking_uri=None).speed_process) == "same"
    assert speed_process_of(SearchConfig(tracking_uri=None, speed_process="fresh").speed_process) == "fresh"
    assert resolve(SearchConfig(tracking_uri=None)).speed_process == "same"   # resolved once, into the context
    monkeypatch.setenv(SPEED_PROCESS_ENV, "elsewhere")
    with pytest.raises(OptionError, match=SPEED_PROCESS_ENV):
        speed_process_of(None)
