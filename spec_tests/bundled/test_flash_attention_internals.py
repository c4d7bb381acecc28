"""Internals of the bundled FlashAttention kernels (optimized/flash_attention.py) that the spec's
strategies rely on: the tile sizes the kernels use off the GPU (under the Triton interpreter),
around whose multiples spec_tests/attention/strategies.py draws lengths and windows. Not the
contract, so never run against a submission."""
from __future__ import annotations

import pytest
import torch

from spec_tests.attention import strategies

pytestmark = pytest.mark.concept("flash_attention")


def test_strategy_tiles_are_the_interpreter_tiles():
    """The strategies' TILES / BLOCK_M / BLOCK_N equal the CPU launch configuration: if the
    kernels' interpreter tiles change, the draws must move with them."""
    pytest.importorskip("triton")
    from optimized.flash_attention import bwd_config, fwd_config
    cpu = torch.device("cpu")
    fwd = fwd_config(64, causal=True, device=cpu)
    bwd = bwd_config(64, device=cpu)
    used = {fwd["BLOCK_M"], fwd["BLOCK_N"]} | {c[b] for c in bwd.values() for b in ("BLOCK_M", "BLOCK_N")}
    assert (strategies.BLOCK_M, strategies.BLOCK_N) == (fwd["BLOCK_M"], fwd["BLOCK_N"])
    assert set(strategies.TILES) == used, (strategies.TILES, used)
