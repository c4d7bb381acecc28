"""Strategies for the serving engine: a tiny model, an engine configuration and a set of requests
with arrival steps. An :class:`EngineCase`'s repr is valid Python
(``from spec_tests.engine.strategies import EngineCase, Req``), so every failure replays.

The configurations are drawn to reach the engine's hard paths often: pools from exactly the
largest request's blocks (preemption by recompute) to roomy, token budgets from 1 (every prompt
in chunks) up, prompts that share a prefix (prefix-cache hits when caching is on), greedy and
sampled requests, stop tokens taken from the request's own greedy run.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, seeds


@dataclass(frozen=True)
class Req:
    """One request. ``stop_at``: for a greedy request, the token its run alone generates at this
    index becomes its stop token id (so the stop really fires); None: no stop token."""

    prompt: tuple
    max_tokens: int
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    stop_at: int | None = None


@dataclass(frozen=True)
class EngineCase:
    """A model (shape, dtype, weight seed), an engine configuration, requests and arrival steps."""

    requests: tuple
    arrivals: tuple
    num_blocks: int
    block_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = False
    vocab_size: int = 64
    dim: int = 32
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    max_seq_len: int = 40
    dtype: str = "float64"
    seed: int = 0

    def config(self, model_config_cls, dtype=None):
        dt = DTYPES[dtype] if isinstance(dtype, str) else (dtype or DTYPES[self.dtype])
        return model_config_cls(vocab_size=self.vocab_size, dim=self.dim, n_layers=self.n_layers,
                                n_heads=self.n_heads, n_kv_heads=self.n_kv_heads,
                                max_seq_len=self.max_seq_len, dtype=dt)

    def engine_kwargs(self) -> dict:
        return dict(num_blocks=self.num_blocks, block_size=self.block_size,
                    max_num_batched_tokens=self.max_num_batched_tokens, max_num_seqs=self.max_num_seqs,
                    enable_chunked_prefill=self.enable_chunked_prefill,
                    enable_prefix_caching=self.enable_prefix_caching)

    def blocks(self, r: Req) -> int:
        return -(-(len(r.prompt) + r.max_tokens - 1) // self.block_size)


@st.composite
def engine_cases(draw, *, max_requests: int = 5, sampled: bool = True, prefix: bool | None = None,
                 chunked: bool | None = None, dtype: str = "float64", n_layers: int = 2):
    vocab = 64
    shared = draw(st.lists(st.integers(0, vocab - 1), min_size=0, max_size=8))
    n = draw(st.integers(1, max_requests))
    requests = []
    for i in range(n):
        own = draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=8))
        prompt = tuple((shared if draw(st.booleans()) else []) + own)
        max_tokens = draw(st.integers(1, 8))
        if sampled and draw(st.integers(0, 2)) == 0:
            r = Req(prompt, max_tokens, temperature=draw(st.sampled_from([0.7, 1.0])),
                    top_k=draw(st.sampled_from([0, 5])), top_p=draw(st.sampled_from([1.0, 0.9])),
                    seed=draw(st.integers(0, 3)))
        else:
            stop_at = draw(st.one_of(st.none(), st.integers(0, max_tokens - 1)))
            r = Req(prompt, max_tokens, stop_at=stop_at)
        requests.append(r)
    block_size = draw(st.sampled_from([1, 2, 4]))
    needs = [-(-(len(r.prompt) + r.max_tokens - 1) // block_size) for r in requests]
    num_blocks = max(needs) + draw(st.integers(0, sum(needs)))
    chunked = draw(st.booleans()) if chunked is None else chunked
    longest = max(len(r.prompt) + r.max_tokens - 1 for r in requests)
    budget = draw(st.integers(1, 16)) if chunked else longest + draw(st.integers(0, 8))
    return EngineCase(
        requests=tuple(requests), arrivals=tuple(draw(st.integers(0, 6)) for _ in requests),
        num_blocks=num_blocks, block_size=block_size, max_num_batched_tokens=budget,
        max_num_seqs=draw(st.integers(1, 4)), enable_chunked_prefill=chunked,
        enable_prefix_caching=draw(st.booleans()) if prefix is None else prefix,
        n_layers=n_layers, n_kv_heads=draw(st.sampled_from([1, 2])), dtype=dtype, seed=draw(seeds))
