"""Strategies for attention inputs."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, randn, seeds


@dataclass(frozen=True)
class AttnCase:
    """One attention problem. ``AttnCase(...).tensors()`` rebuilds q, k, v exactly."""

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

    def tensors(self, device="cpu", dtype: torch.dtype | None = None):
        dt = dtype or DTYPES[self.dtype]
        q = randn((self.batch, self.q_heads, self.q_len, self.head_dim), self.seed, dt, device)
        k = randn((self.batch, self.kv_heads, self.kv_len, self.head_dim), self.seed + 1, dt, device)
        v = randn((self.batch, self.kv_heads, self.kv_len, self.head_dim), self.seed + 2, dt, device)
        return q, k, v

    @property
    def kwargs(self) -> dict:
        return dict(causal=self.causal, window=self.window, scale=self.scale)


@st.composite
def attn_cases(draw, *, dtypes=("float16", "bfloat16", "float32"), max_len: int = 40,
               head_dims=(16, 32, 64), max_batch: int = 2, groups=(1, 2, 4), max_kv_heads: int = 2,
               allow_window: bool = True, allow_scale: bool = True):
    kv_heads = draw(st.integers(1, max_kv_heads))
    group = draw(st.sampled_from(groups))
    q_len = draw(st.integers(1, max_len))
    kv_len = draw(st.one_of(st.just(q_len), st.integers(1, max_len)))
    window = draw(st.one_of(st.none(), st.integers(0, max_len))) if allow_window else None
    scale = draw(st.one_of(st.none(), st.floats(0.05, 1.0))) if allow_scale else None
    return AttnCase(
        batch=draw(st.integers(1, max_batch)), q_heads=kv_heads * group, kv_heads=kv_heads,
        q_len=q_len, kv_len=kv_len, head_dim=draw(st.sampled_from(head_dims)),
        causal=draw(st.booleans()), window=window, dtype=draw(st.sampled_from(dtypes)),
        seed=draw(seeds), scale=scale)
