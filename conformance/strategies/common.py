"""Seeded tensor helpers shared by the strategies."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

seeds = st.integers(min_value=0, max_value=2**32 - 1)


def generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed`` (tensors are made on the CPU, then moved)."""
    return torch.Generator().manual_seed(int(seed))


def randn(shape, seed: int, dtype=torch.float32, device="cpu", std: float = 1.0) -> torch.Tensor:
    """Normal(0, std^2) samples from ``seed``, made in float32 on the CPU and cast/moved."""
    t = torch.randn(tuple(shape), generator=generator(seed), dtype=torch.float32) * std
    return t.to(device=device, dtype=dtype)
