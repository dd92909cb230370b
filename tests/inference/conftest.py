"""The inference tests use tests/conftest.py's tiny_data and tiny_model; tiny models:
one thread avoids oversubscription on the 2-core machine."""

from __future__ import annotations

import torch

torch.set_num_threads(1)
