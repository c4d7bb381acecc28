"""Strategies for tensor parallelism: a tiny reference model whose heads and hidden size a world
of 1, 2 or 4 ranks may split, the tokens of a prefill and a few decode steps. A :class:`TPCase`'s
repr is valid Python (``from spec_tests.tensor_parallel.strategies import TPCase``), so every
failure replays."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES


@dataclass(frozen=True)
class TPCase:
    """The reference Transformer of these sizes and ``seed``, split over ``world`` ranks; a prefill
    of ``batch`` x ``prompt`` tokens then ``decode`` one-token steps through the KV cache, every
    token drawn from ``seed`` (no token depends on a logit, so every rank and the oracle feed
    the same ones)."""

    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden_dim: int
    n_layers: int
    vocab_size: int
    dtype: str
    seed: int
    batch: int
    prompt: int
    decode: int
    world: int

    def config(self, model_config_cls, **changes):
        fields = dict(vocab_size=self.vocab_size, dim=self.n_heads * self.head_dim, n_layers=self.n_layers,
                      n_heads=self.n_heads, n_kv_heads=self.n_kv_heads, head_dim=self.head_dim,
                      hidden_dim=self.hidden_dim, max_seq_len=self.prompt + self.decode + 2, dtype=DTYPES[self.dtype])
        return model_config_cls(**{**fields, **changes})

    def tokens(self) -> list[torch.Tensor]:
        """The prefill tokens (batch, prompt) then each decode step's (batch, 1): drawn from the
        seed, the same everywhere (no token depends on a logit)."""
        g = torch.Generator().manual_seed(self.seed)
        seq = torch.randint(0, self.vocab_size, (self.batch, self.prompt + self.decode), generator=g)
        return [seq[:, :self.prompt]] + [seq[:, self.prompt + i:self.prompt + i + 1] for i in range(self.decode)]

    def sequence(self) -> torch.Tensor:
        return torch.cat(self.tokens(), dim=1)


def allowed(n_heads: int, n_kv_heads: int, world: int) -> bool:
    """Whether the contract splits these heads over ``world`` ranks (vLLM's rule)."""
    return n_heads % world == 0 and (n_kv_heads % world == 0 or world % n_kv_heads == 0)


HEADS = [(h, k) for h in (1, 2, 4, 8) for k in (1, 2, 4, 8) if k <= h and h % k == 0]


@st.composite
def tp_cases(draw, *, worlds=(1, 2, 4), dtypes=("float32", "float32", "bfloat16"), decode: bool = True):
    world = draw(st.sampled_from(worlds))
    heads = [hk for hk in HEADS if allowed(*hk, world)]
    n_heads, n_kv = draw(st.sampled_from(heads))
    hidden = max(4, world) * draw(st.integers(1, 6))     # a multiple of every world drawn
    return TPCase(n_heads, n_kv, draw(st.sampled_from([2, 4, 8])), hidden, draw(st.integers(1, 2)),
                  draw(st.sampled_from([16, 40])), draw(st.sampled_from(dtypes)), draw(st.integers(0, 2**16)),
                  draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(0, 2)) if decode else 0, world)
