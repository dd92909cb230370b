"""tests/seq: one intra-op thread while these tests run (restored afterwards).

The recurrent models do many tiny matmuls; on a shared 2-core machine, OpenMP
threads spinning against other processes make them tens of times slower.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
