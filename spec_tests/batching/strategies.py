"""Strategies for batching: a tiny model, a list of requests (prompts, lengths, arrivals, greedy or
seeded sampling) and a batch limit. A :class:`BatchCase`'s repr is valid Python
(``from spec_tests.batching.strategies import BatchCase, ModelShape``), so every failure replays.

The models' ``hidden_dim`` is a multiple of 32: torch's vectorised ``silu`` on CPU rounds the
elements of a row's tail (past the last whole 32-float block) differently by where they fall in
the flat tensor, so a batched MLP row and the same row alone differ in their last bit there --
something ``batch_invariant.invariant_mode()`` does not route (docs/batching.md, "What this spec
cannot see"). Bit equality under the mode is asserted for such shapes only.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, seeds


@dataclass(frozen=True)
class ModelShape:
    """A tiny reference model: shape, dtype and weight seed."""

    vocab_size: int = 32
    dim: int = 16
    n_layers: int = 2
    n_heads: int = 2
    n_kv_heads: int = 1
    hidden_dim: int = 32
    max_seq_len: int = 24
    dtype: str = "float32"
    seed: int = 0

    def config(self, dtype: str | torch.dtype | None = None):
        from reference.model import ModelConfig
        dt = DTYPES[dtype] if isinstance(dtype, str) else (dtype or DTYPES[self.dtype])
        return ModelConfig(vocab_size=self.vocab_size, dim=self.dim, n_layers=self.n_layers,
                           n_heads=self.n_heads, n_kv_heads=self.n_kv_heads, hidden_dim=self.hidden_dim,
                           max_seq_len=self.max_seq_len, dtype=dt)

    def model(self, dtype: str | torch.dtype | None = None, device: str = "cpu"):
        from reference.model import Transformer
        return Transformer(self.config(dtype), seed=self.seed).to(device)


@dataclass(frozen=True)
class BatchCase:
    """Requests as tuples ``(prompt, max_new_tokens, arrival, temperature, seed)`` and the batch
    limit (``max_batch`` of continuous batching, ``batch_size`` of static batching)."""

    model: ModelShape
    requests: tuple
    limit: int

    def request_objects(self):
        from reference.batching import Request
        return [Request(tuple(p), n, a, t, s) for p, n, a, t, s in self.requests]


@st.composite
def model_shapes(draw, dtypes=("float32",)):
    n_kv = draw(st.integers(1, 2))
    return ModelShape(vocab_size=draw(st.integers(16, 48)), dim=draw(st.sampled_from([16, 32])),
                      n_layers=draw(st.integers(1, 2)), n_heads=n_kv * draw(st.integers(1, 2)), n_kv_heads=n_kv,
                      hidden_dim=draw(st.sampled_from([32, 64])), max_seq_len=24,
                      dtype=draw(st.sampled_from(dtypes)), seed=draw(seeds))


@st.composite
def batch_cases(draw, *, dtypes=("float32",), max_requests: int = 5, sampled: bool = False,
                max_prompt: int = 7, max_new: int = 6, max_arrival: int = 4):
    """1..max_requests requests with prompts of 1..max_prompt tokens, 1..max_new new tokens,
    arrivals in 0..max_arrival (ties included), a limit of 1..4; with ``sampled`` some requests
    sample at temperature 0.7 or 1.5 with their own seeds."""
    shape = draw(model_shapes(dtypes))
    n = draw(st.integers(1, max_requests))
    reqs = []
    for _ in range(n):
        prompt = tuple(draw(st.lists(st.integers(0, shape.vocab_size - 1), min_size=1, max_size=max_prompt)))
        temp = draw(st.sampled_from([0.0, 0.7, 1.5])) if sampled else 0.0
        reqs.append((prompt, draw(st.integers(1, max_new)), draw(st.integers(0, max_arrival)), temp,
                     draw(st.integers(0, 2**16))))
    return BatchCase(shape, tuple(reqs), draw(st.integers(1, 4)))


@st.composite
def ragged_cases(draw, *, dtypes=("float32",), max_requests: int = 4):
    """A ragged forward: for each request (cached prefix length 0..6, new tokens 1..6, a token
    seed), as tuples; plus the model shape."""
    shape = draw(model_shapes(dtypes))
    rows = draw(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 6), seeds), min_size=1,
                         max_size=max_requests))
    return shape, tuple(rows)
