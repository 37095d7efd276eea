"""Shared test setup."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """One intra-op thread: on a busy 2-core machine, two threads make small convolutions ~10x slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
