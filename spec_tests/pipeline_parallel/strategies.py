"""Strategies for pipeline parallelism: a tiny reference model split into 1-4 stages, a batch of a
few sequences split into micro-batches. A :class:`PPCase`'s repr is valid Python
(``from spec_tests.pipeline_parallel.strategies import PPCase``), so every failure replays."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES


@dataclass(frozen=True)
class PPCase:
    """The reference Transformer of these sizes and ``seed`` split into ``stages`` stages; a
    forward of ``batch`` x ``seq`` tokens (drawn from ``seed``) in ``microbatches`` micro-batches."""

    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    dtype: str
    seed: int
    batch: int
    seq: int
    microbatches: int
    stages: int

    def config(self, model_config_cls, **changes):
        fields = dict(vocab_size=self.vocab_size, dim=self.n_heads * self.head_dim, n_layers=self.n_layers,
                      n_heads=self.n_heads, n_kv_heads=self.n_kv_heads, head_dim=self.head_dim, hidden_dim=16,
                      max_seq_len=self.seq + 1, dtype=DTYPES[self.dtype])
        return model_config_cls(**{**fields, **changes})

    def tokens(self) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed)
        return torch.randint(0, self.vocab_size, (self.batch, self.seq), generator=g)


@st.composite
def pp_cases(draw, *, stages=(1, 2, 3, 4), dtypes=("float32", "float32", "bfloat16")):
    p = draw(st.sampled_from(stages))
    batch = draw(st.integers(1, 6))
    heads = draw(st.sampled_from([(2, 1), (2, 2), (4, 2)]))
    return PPCase(draw(st.integers(p, p + 3)), heads[0], heads[1], draw(st.sampled_from([4, 8])),
                  draw(st.sampled_from([16, 40])), draw(st.sampled_from(dtypes)), draw(st.integers(0, 2**16)),
                  batch, draw(st.integers(1, 6)), draw(st.integers(1, batch)), p)
