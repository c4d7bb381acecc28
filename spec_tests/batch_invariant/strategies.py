"""Batch compositions for the batch_invariant tests: one row placed among other rows.

A composition is (rows, position, seed): a batch of ``rows`` rows whose row ``position`` is the
row under test and the others are random. Sizes cross the thresholds a batch-dependent kernel
would use (1 vs 64 vs 129 rows; reduction lengths below, at and above one block of 16 and one
kernel tile of 64)."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, generator

ROWS = (1, 2, 7, 64, 129)
LENGTHS = (1, 16, 17, 40, 80)          # matmul K
ROW_LENGTHS = (1, 16, 33, 100, 1100)   # rms_norm / softmax D (1100 > one 1024-wide kernel chunk)
dtype_name = st.sampled_from(("bfloat16", "float16", "float32"))


@st.composite
def composition(draw, max_rows: int = 129):
    rows = draw(st.sampled_from([r for r in ROWS if r <= max_rows]))
    return rows, draw(st.integers(0, rows - 1)), draw(st.integers(0, 2**31 - 1))


def place(row: torch.Tensor, rows: int, position: int, seed: int) -> torch.Tensor:
    """A batch of ``rows`` random rows (like ``row``) with ``row`` at ``position``."""
    batch = torch.randn((rows, *row.shape[1:]), generator=generator(seed)).to(row.dtype)
    batch[position] = row[0]
    return batch


def rand(shape, seed, dtype_name_):
    return torch.randn(shape, generator=generator(seed)).to(DTYPES[dtype_name_])
