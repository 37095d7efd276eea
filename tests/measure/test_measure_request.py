"""syno_automl.measure.MeasureRequest: the settings every measurement entry point takes, checked when made (no
torch, no tvm needed)."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest

from syno_automl.errors import OptionError, OptionTypeError
from syno_automl.measure.request import MeasureRequest
from syno_automl.measure.result import PROTOCOL, TimingProtocol


def test_defaults_are_the_entry_points_defaults():
    req = MeasureRequest()
    assert req.targets == ("llvm",) and req.trials == 0 and req.seconds is None and req.work_dir is None
    assert req.protocol is PROTOCOL and req.seed == 0 and req.inductor and not req.isolate
    assert req.runner is None and req.build_target is None and req.rpc_session_timeout == 120.0
    assert req.grace_s(120.0) == 120.0 and req.grace_s(300.0) == 300.0  # kernel, model
    assert MeasureRequest(isolate_grace_s=0.3).grace_s(300.0) == 0.3
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.trials = 3  # type: ignore[misc]


def test_targets_are_normalized():
    assert MeasureRequest(targets="cuda").targets == ("cuda",)  # one target, not its characters
    assert MeasureRequest(targets=["llvm", "torch"]).targets == ("llvm", "torch")
    assert MeasureRequest(targets={"kind": "llvm"}).targets == ({"kind": "llvm"},)
    assert MeasureRequest(targets="cuda").target == "cuda"
    with pytest.raises(OptionError, match="2 targets"):
        MeasureRequest(targets=("llvm", "cuda")).target
    assert MeasureRequest(work_dir=pathlib.Path("/tmp/x")).work_dir == "/tmp/x"


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(trials=-1), OptionError, "trials must be >= 0, got -1"),
    (dict(trials=2.5), OptionTypeError, "trials must be an integer, got 2.5"),
    (dict(trials=True), OptionTypeError, "trials must be an integer"),
    (dict(seed="0"), OptionTypeError, "seed must be an integer"),
    (dict(seconds=-1), OptionError, "seconds must be >= 0, got -1"),
    (dict(seconds="60"), OptionTypeError, "seconds must be a number of seconds or None"),
    (dict(isolate_grace_s=-0.5), OptionError, "isolate_grace_s must be >= 0"),
    (dict(rpc_session_timeout=0), OptionError, "rpc_session_timeout must be > 0"),
    (dict(rpc_session_timeout=None), OptionTypeError, "rpc_session_timeout must be a number of seconds, got None"),
    (dict(protocol={"repeat": 5}), OptionTypeError, "protocol must be a TimingProtocol"),
    (dict(runner="remote"), OptionError, "unknown runner 'remote': 'inprocess' or 'local'"),
])
def test_bad_settings_raise(kwargs, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        MeasureRequest(**kwargs)


def test_job_round_trip():
    """What a child process (isolate=True) gets: the same request, JSON-able, not isolated again."""
    req = MeasureRequest(targets=("llvm", {"kind": "cuda"}), trials=4, seconds=1.5, work_dir="wd",
                         protocol=TimingProtocol(repeat=3), seed=7, isolate=True, runner="inprocess",
                         build_target="llvm -mcpu=x", rpc_session_timeout=30)
    back = MeasureRequest.from_job(json.loads(json.dumps(req.to_job())))
    assert back == dataclasses.replace(req, isolate=False)
    assert MeasureRequest(targets=(object(),)).to_job()["targets"][0].startswith("<object")  # as text
