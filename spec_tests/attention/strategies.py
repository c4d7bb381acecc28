"""Strategies for attention inputs.

Lengths and windows are drawn to reach the structure of a tiled kernel: half the lengths lie on a
tile edge (t*n - 1, t*n, t*n + 1 for the tile sizes in ``TILES``), so sequences of two and more
tiles, ragged tails of one key and exactly full tiles all occur in generated examples, not only in
pinned ones; windows are drawn so that a query tile's window edge falls on a key-tile boundary
(+-1). ``TILES`` are the tile sizes of the bundled kernel off the GPU (optimized/flash_attention.py,
``fwd_config``/``bwd_config`` for a CPU device: 32 queries x 16 keys forward and dQ, 16 x 32 dK/dV;
spec_tests/bundled/test_flash_attention_internals.py keeps them in step). Any implementation is
checked on the same draws; they are merely where a tiled kernel's boundaries are.

Under the Triton interpreter a kernel costs about (batch x q_heads x query tiles x key tiles), so
``max_work`` caps that product: a long draw gets batch 1 and fewer heads (never fewer than its GQA
group needs), so longer sequences do not make the default run slower.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, randn, seeds

TILES = (16, 32)          # key tile 16, query tile 32 (forward, dQ); 16 queries x 32 keys (dK/dV)
BLOCK_M, BLOCK_N = 32, 16  # the forward kernel's query and key tiles off the GPU


@dataclass(frozen=True)
class AttnCase:
    """One attention problem. ``AttnCase(...).tensors()`` rebuilds q, k, v exactly. ``std`` scales
    q and k (large scores: the numerics of a kernel's running max)."""

    batch: int
    q_heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    causal: bool
    window: int | None
    dtype: str
    seed: int
    scale: float | None = None
    std: float = 1.0

    def tensors(self, device="cpu", dtype: torch.dtype | None = None):
        dt = dtype or DTYPES[self.dtype]
        q = randn((self.batch, self.q_heads, self.q_len, self.head_dim), self.seed, dt, device, std=self.std)
        k = randn((self.batch, self.kv_heads, self.kv_len, self.head_dim), self.seed + 1, dt, device, std=self.std)
        v = randn((self.batch, self.kv_heads, self.kv_len, self.head_dim), self.seed + 2, dt, device)
        return q, k, v

    @property
    def kwargs(self) -> dict:
        return dict(causal=self.causal, window=self.window, scale=self.scale)

    @property
    def work(self) -> int:
        """Programs x key tiles of the forward kernel off the GPU (its interpreter cost)."""
        return self.batch * self.q_heads * math.ceil(self.q_len / BLOCK_M) * math.ceil(self.kv_len / BLOCK_N)


@st.composite
def seq_lens(draw, min_len: int = 1, max_len: int = 40, tiles=TILES):
    """A length on a tile edge (t*n - 1, t*n, t*n + 1) half the time, else uniform in the range."""
    if tiles and draw(st.booleans()):
        t = draw(st.sampled_from([t for t in tiles if t <= max_len] or [max_len]))
        n = draw(st.integers(1, max(1, max_len // t)))
        return min(max_len, max(min_len, t * n + draw(st.sampled_from((0, -1, 1)))))
    return draw(st.integers(min_len, max_len))


@st.composite
def windows(draw, q_len: int, kv_len: int, max_len: int, tiles=TILES):
    """None, any window in [0, max_len], or one whose left edge, for a query tile starting at a
    multiple of the key tile, falls on a key-tile boundary +-1 (window = kv_len - q_len mod tile)."""
    kind = draw(st.sampled_from(("none", "any", "edge") if tiles else ("none", "any")))
    if kind == "none":
        return None
    if kind == "any":
        return draw(st.integers(0, max_len))
    t = min(tiles)
    offset = (kv_len - q_len + draw(st.sampled_from((0, -1, 1)))) % t
    return offset + t * draw(st.integers(0, max(0, max_len // t)))


# Scales: the default (None), the usual range, and the legal edges: 0 (uniform weights) and
# negative values (the softmax of the negated scores).
scales = st.one_of(st.none(), st.floats(0.05, 1.0), st.floats(-1.0, 0.0))


@st.composite
def attn_cases(draw, *, dtypes=("float16", "bfloat16", "float32"), max_len: int = 40,
               head_dims=(8, 16, 32, 64), max_batch: int = 2, groups=(1, 2, 4), max_kv_heads: int = 2,
               allow_window: bool = True, allow_scale: bool = True, tiles=TILES, max_work: int | None = 96):
    q_len = draw(seq_lens(1, max_len, tiles), label="q_len")
    kv_len = draw(st.one_of(st.just(q_len), seq_lens(1, max_len, tiles)), label="kv_len")
    window = draw(windows(q_len, kv_len, max_len, tiles), label="window") if allow_window else None
    scale = draw(scales, label="scale") if allow_scale else None
    kv_heads = draw(st.integers(1, max_kv_heads))
    group = draw(st.sampled_from(groups))
    batch = draw(st.integers(1, max_batch))
    case = AttnCase(
        batch=batch, q_heads=kv_heads * group, kv_heads=kv_heads, q_len=q_len, kv_len=kv_len,
        head_dim=draw(st.sampled_from(head_dims)), causal=draw(st.booleans()), window=window,
        dtype=draw(st.sampled_from(dtypes)), seed=draw(seeds), scale=scale)
    while max_work is not None and case.work > max_work and (case.batch > 1 or case.kv_heads > 1):
        if case.batch > 1:
            case = AttnCase(**{**case.__dict__, "batch": case.batch - 1})
        else:
            case = AttnCase(**{**case.__dict__, "kv_heads": case.kv_heads - 1, "q_heads": case.q_heads // case.kv_heads * (case.kv_heads - 1)})
    return case
