"""Strategies for FlashAttention's packed (variable-length) batches (padded cases: spec_tests/attention/strategies.py)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, randn, seeds
from spec_tests.attention.strategies import TILES, scales, seq_lens, windows


@dataclass(frozen=True)
class VarlenCase:
    """A packed batch: sequence b has ``q_lens[b]`` queries and ``kv_lens[b]`` keys.
    ``VarlenCase(...).tensors()`` rebuilds q (total_q, q_heads, d), k, v (total_k, kv_heads, d)
    and the int32 cumulative lengths exactly."""

    q_lens: tuple[int, ...]
    kv_lens: tuple[int, ...]
    q_heads: int
    kv_heads: int
    head_dim: int
    causal: bool
    window: int | None
    dtype: str
    seed: int
    scale: float | None = None

    @staticmethod
    def cumulative(lens) -> torch.Tensor:
        return torch.tensor([0, *torch.tensor(lens, dtype=torch.int64).cumsum(0).tolist()], dtype=torch.int32)

    def tensors(self, device="cpu", dtype: torch.dtype | None = None):
        dt = dtype or DTYPES[self.dtype]
        tq, tk = sum(self.q_lens), sum(self.kv_lens)
        q = randn((tq, self.q_heads, self.head_dim), self.seed, dt, device)
        k = randn((tk, self.kv_heads, self.head_dim), self.seed + 1, dt, device)
        v = randn((tk, self.kv_heads, self.head_dim), self.seed + 2, dt, device)
        cu_q = self.cumulative(self.q_lens).to(device)
        cu_k = self.cumulative(self.kv_lens).to(device)
        return q, k, v, cu_q, cu_k

    @property
    def kwargs(self) -> dict:
        return dict(causal=self.causal, window=self.window, scale=self.scale)


@st.composite
def varlen_cases(draw, *, dtypes=("float16", "bfloat16"), max_len: int = 40, max_seqs: int = 3,
                 head_dims=(8, 16, 32), groups=(1, 2, 4, 8), max_kv_heads: int = 2, tiles=TILES):
    """Packed batches whose sequence lengths lie on the kernel's tile edges half the time
    (spec_tests/attention/strategies.py), empty sequences included."""
    n = draw(st.integers(1, max_seqs))
    q_lens = tuple(draw(st.lists(seq_lens(0, max_len, tiles), min_size=n, max_size=n)))
    same = draw(st.booleans())  # self-attention (q_len == kv_len) or not, per batch
    kv_lens = q_lens if same else tuple(draw(st.lists(seq_lens(0, max_len, tiles), min_size=n, max_size=n)))
    kv_heads = draw(st.integers(1, max_kv_heads))
    longest = max(range(n), key=lambda b: q_lens[b])
    return VarlenCase(
        q_lens=q_lens, kv_lens=kv_lens, q_heads=kv_heads * draw(st.sampled_from(groups)),
        kv_heads=kv_heads, head_dim=draw(st.sampled_from(head_dims)), causal=draw(st.booleans()),
        window=draw(windows(q_lens[longest], kv_lens[longest], max_len, tiles)),
        dtype=draw(st.sampled_from(dtypes)), seed=draw(seeds), scale=draw(scales))
