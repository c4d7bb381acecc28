"""Hypothesis strategies for `flops`: one forward pass of a tiny reference model.

A :class:`Pass` is a model shape (every field of ``ModelConfig`` that changes a count, with
``head_dim``/``hidden_dim`` explicit or left to their defaults) and a pass: ``batch`` sequences,
each feeding ``new_tokens`` tokens after ``context`` cached ones. Shapes are tiny (the model really
runs under ``FlopCounterMode`` on a 2-core CPU) and odd where the config allows it: an odd ``dim``
with an explicit ``head_dim`` (q_proj is then not square), an odd ``hidden_dim``, GQA groups of
1 to 4 query heads per KV head, MQA, a vocabulary of 1. ``slack`` is how far below the model's
``max_seq_len`` the pass ends (0: it fills the model exactly).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES
from reference.model import ModelConfig


@dataclass(frozen=True)
class Pass:
    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int | None
    hidden_dim: int | None
    batch: int
    new_tokens: int
    context: int
    slack: int = 0
    dtype: str = "float32"

    def config(self) -> ModelConfig:
        return ModelConfig(vocab_size=self.vocab_size, dim=self.dim, n_layers=self.n_layers,
                           n_heads=self.n_heads, n_kv_heads=self.n_kv_heads, head_dim=self.head_dim,
                           hidden_dim=self.hidden_dim, max_seq_len=self.context + self.new_tokens + self.slack,
                           dtype=DTYPES[self.dtype])

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def args(self) -> dict:
        """The keyword arguments of a pass (config positional)."""
        return dict(batch=self.batch, new_tokens=self.new_tokens, context=self.context)


@st.composite
def passes(draw, max_context: int = 6, max_new: int = 5, dtypes=("float32",)) -> Pass:
    n_kv_heads = draw(st.integers(1, 3))
    n_heads = n_kv_heads * draw(st.integers(1, 4))
    explicit = draw(st.booleans())
    if explicit:  # any dim, even an odd one; head_dim need not be dim // n_heads
        head_dim = draw(st.sampled_from([2, 4, 6]))
        dim = draw(st.integers(1, 13))
    else:
        head_dim = None
        dim = n_heads * draw(st.sampled_from([2, 4]))
    hidden_dim = draw(st.one_of(st.none(), st.integers(1, 19)))
    return Pass(vocab_size=draw(st.integers(1, 23)), dim=dim, n_layers=draw(st.integers(1, 3)),
                n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim, hidden_dim=hidden_dim,
                batch=draw(st.integers(1, 3)), new_tokens=draw(st.integers(1, max_new)),
                context=draw(st.integers(0, max_context)), slack=draw(st.sampled_from([0, 0, 1, 3])),
                dtype=draw(st.sampled_from(dtypes)))


def decode(case: Pass) -> Pass:
    """The same model, one new token per sequence (a decode step)."""
    return Pass(**{**case.__dict__, "new_tokens": 1})
