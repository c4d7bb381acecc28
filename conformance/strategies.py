"""Hypothesis helpers shared by every concept's strategies: seeds, explicit generators, seeded
tensors and the one dtype table. Concept strategies live in spec_tests/<concept>/strategies.py."""
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


# The one dtype table of the strategies: cases carry the dtype's name (their repr stays valid
# Python), tests map it back with DTYPES[name].
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
          "float64": torch.float64}
LOW_PRECISION = ("float16", "bfloat16")


def dtype_names(*names: str) -> st.SearchStrategy[str]:
    """A strategy over dtype names (default: all of DTYPES)."""
    return st.sampled_from(names or tuple(DTYPES))
