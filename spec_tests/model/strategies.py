"""Strategies for the tiny Llama-style model (the generation loop's are in
spec_tests/generate/strategies.py, built on these).

A :class:`ModelCase` is a model shape plus a weight seed and a token batch; its repr is valid
Python (``from spec_tests.model.strategies import ModelCase``) and rebuilds the same model and
tokens, so every failure replays.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, generator, seeds


@dataclass(frozen=True)
class ModelCase:
    """One model (shape + weight seed) and one batch of ``batch`` x ``seq_len`` tokens."""

    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int | None
    hidden_dim: int | None
    rope_theta: float
    norm_eps: float
    max_seq_len: int
    batch: int
    seq_len: int
    dtype: str
    seed: int

    def config(self, model_config_cls, dtype: torch.dtype | str | None = None):
        """The implementation's ``ModelConfig`` for this case (``dtype`` overrides the case's)."""
        dt = DTYPES[dtype] if isinstance(dtype, str) else (dtype or DTYPES[self.dtype])
        return model_config_cls(
            vocab_size=self.vocab_size, dim=self.dim, n_layers=self.n_layers, n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads, head_dim=self.head_dim, hidden_dim=self.hidden_dim,
            rope_theta=self.rope_theta, norm_eps=self.norm_eps, max_seq_len=self.max_seq_len, dtype=dt)

    def tokens(self, device="cpu", seq_len: int | None = None, seed_offset: int = 1) -> torch.Tensor:
        """int64 (batch, seq_len) token ids drawn uniformly from the vocabulary."""
        n = self.seq_len if seq_len is None else seq_len
        return torch.randint(0, self.vocab_size, (self.batch, n),
                             generator=generator(self.seed + seed_offset)).to(device)


@st.composite
def model_cases(draw, *, dtypes=("float32",), max_seq: int = 24, max_batch: int = 2,
                max_layers: int = 2, extra_positions: int = 0, hf_compatible: bool = False):
    """Small Llama shapes: MHA, GQA and MQA, head_dim derived or given, varied theta and eps (0 included);
    dim >= 16 (narrower models make float32 error ratios between correct implementations too
    lumpy for the tolerance rule's factor 2). ``max_seq_len`` leaves room for ``extra_positions`` more tokens after ``seq_len``.
    ``hf_compatible``: dim a multiple of n_heads even where head_dim is given (HF's LlamaConfig
    rejects other shapes, though the model itself does not need it)."""
    n_kv_heads = draw(st.integers(1, 2))
    n_heads = n_kv_heads * draw(st.sampled_from([1, 2, 3]))
    head_dim = draw(st.sampled_from([8, 16]))
    if draw(st.booleans()) and n_heads * head_dim >= 16:   # head_dim derived from dim
        dim, given_head_dim = n_heads * head_dim, None
    elif hf_compatible:                            # head_dim given, != dim / n_heads mostly
        mult = draw(st.sampled_from([m for m in (4, 8, 16) if n_heads * m >= 16]))
        dim, given_head_dim = n_heads * mult, head_dim
    else:                                          # head_dim given, dim independent of it
        dim, given_head_dim = draw(st.sampled_from([32, 48, 64])), head_dim
    seq_len = draw(st.integers(1, max_seq))
    return ModelCase(
        vocab_size=draw(st.integers(64, 128)), dim=dim, n_layers=draw(st.integers(1, max_layers)),
        n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=given_head_dim,
        hidden_dim=draw(st.one_of(st.none(), st.sampled_from([40, 96, 128]))),
        rope_theta=draw(st.sampled_from([10000.0, 500000.0, 100.0])),
        norm_eps=draw(st.sampled_from([1e-5, 1e-6, 1e-2, 0.0])),
        max_seq_len=seq_len + extra_positions + draw(st.integers(0, 4)),
        batch=draw(st.integers(1, max_batch)), seq_len=seq_len, dtype=draw(st.sampled_from(dtypes)),
        seed=draw(seeds))
