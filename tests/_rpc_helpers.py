"""A local TVM RPC tracker with one RPC server behind it, for the tests of ``rpc:KEY@host:port`` targets.

Example (in a test module)::

    from _rpc_helpers import rpc_tracker_fixture

    rpc_tracker = rpc_tracker_fixture("syno-test")   # a fixture yielding the tracker (its .port)

    def test_remote(rpc_tracker):
        target = f"rpc:syno-test@127.0.0.1:{rpc_tracker.port}"
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest


@contextlib.contextmanager
def rpc_tracker_and_server(key: str, timeout: float = 60.0) -> Iterator[Any]:
    """An RPC tracker and one RPC server (``key``) on 127.0.0.1, both child processes; yields the tracker once the
    server has registered with it (the test fails after ``timeout`` seconds otherwise); both are terminated after."""
    from tvm import rpc
    from tvm.rpc.tracker import Tracker

    tracker = Tracker("127.0.0.1", port=9190, port_end=9290, silent=True)
    server = None
    try:
        server = rpc.Server("127.0.0.1", port=9300, port_end=9400, key=key,
                            tracker_addr=("127.0.0.1", tracker.port), silent=True)
        deadline = time.time() + timeout
        while True:  # wait until the server has registered
            summary = rpc.connect_tracker("127.0.0.1", tracker.port).summary()
            if any(q.get("key") == key or key in str(q) for q in summary.get("server_info", [])):
                break
            if time.time() > deadline:
                pytest.fail(f"RPC server {key!r} did not register: {summary}")
            time.sleep(0.5)
        yield tracker
    finally:
        if server is not None:
            server.terminate()
        tracker.terminate()


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
