"""A local TVM RPC tracker with one RPC server behind it, for the tests of ``rpc:KEY@host:port`` targets.

Example (in a test module)::

    from _rpc_helpers import rpc_tracker_fixture

    rpc_tracker = rpc_tracker_fixture("syno-test")   # a fixture yielding the tracker (its .port)

    def test_remote(rpc_tracker):
        target = f"rpc:syno-test@127.0.0.1:{rpc_tracker.port}"
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest


@dataclasses.dataclass
class LocalTracker:
    """The tracker's address (what the tests read: ``port``)."""

    host: str
    port: int


@contextlib.contextmanager
def rpc_tracker_and_server(key: str, timeout: float = 60.0) -> Iterator[Any]:
    """An RPC tracker and one RPC server (``key``) on 127.0.0.1, both in one child process (``tvm.rpc.Tracker`` and
    ``tvm.rpc.Server`` start one each, and each imports TVM: ~5 s of CPU a process); yields the tracker once the
    server has registered with it (the test fails after ``timeout`` seconds otherwise); the child, with the
    server's session processes, is killed after. The child is the compile worker's (TVM's popen worker without
    torch, which neither serves: ~1.5 s of CPU instead of ~4)."""
    from tvm import rpc
    from tvm.rpc.server import _popen_start_rpc_server
    from tvm.rpc.tracker import _popen_start_tracker_server

    from syno_automl.measure.compile_worker import CompileWorker

    worker = CompileWorker()
    try:
        started, why = worker.call(_popen_start_tracker_server, ("127.0.0.1", 9190, 9290, True), timeout)
        assert why is None, why
        port = started[0]   # (port, stop key)
        # host, port, port_end, is_proxy, tracker_addr, key, load_library, custom_addr, silent
        _, why = worker.call(_popen_start_rpc_server, ("127.0.0.1", 9300, 9400, False, ("127.0.0.1", port), key, None,
                                                       None, True), timeout)
        assert why is None, why
        deadline = time.time() + timeout
        while True:  # wait until the server has registered
            summary = rpc.connect_tracker("127.0.0.1", port).summary()
            if any(q.get("key") == key or key in str(q) for q in summary.get("server_info", [])):
                break
            if time.time() > deadline:
                pytest.fail(f"RPC server {key!r} did not register: {summary}")
            time.sleep(0.5)
        yield LocalTracker("127.0.0.1", port)
    finally:
        worker.kill()  # (kills its children first: the sessions)


def rpc_tracker_fixture(key: str):
    """A function-scoped pytest fixture: :func:`rpc_tracker_and_server` for ``key`` (skipped without tornado,
    which the tracker needs)."""

    @pytest.fixture
    def rpc_tracker():
        """An RPC tracker and one RPC server (the key given to rpc_tracker_fixture) on 127.0.0.1."""
        pytest.importorskip("tornado")
        with rpc_tracker_and_server(key) as tracker:
            yield tracker

    return rpc_tracker
