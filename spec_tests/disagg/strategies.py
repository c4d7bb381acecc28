"""Strategies for the KV hand-off: a tiny model, a few requests and a group of 2-3 ranks. A
:class:`DisaggCase`'s repr is valid Python (``from spec_tests.disagg.strategies import DisaggCase``),
so every failure replays."""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from conformance.strategies import DTYPES


@dataclass(frozen=True)
class DisaggCase:
    """``requests``: (request_id, prompt, max_new_tokens) triples; rank 0 prefills, ranks
    1..world-1 decode. The model: the reference Transformer of these sizes and ``seed``."""

    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    max_seq_len: int
    dtype: str
    seed: int
    requests: tuple
    world: int = 2

    def config(self, model_config_cls, **changes):
        fields = dict(vocab_size=self.vocab_size, dim=self.dim, n_layers=self.n_layers, n_heads=self.n_heads,
                      n_kv_heads=self.n_kv_heads, max_seq_len=self.max_seq_len, dtype=DTYPES[self.dtype])
        return model_config_cls(**{**fields, **changes})


@st.composite
def disagg_cases(draw, *, dtypes=("float32", "bfloat16"), max_requests: int = 3, worlds=(2, 3)):
    heads = draw(st.sampled_from([(2, 1), (2, 2), (4, 2), (4, 1)]))
    head_dim = draw(st.sampled_from([4, 8]))
    max_seq = draw(st.integers(4, 20))
    n = draw(st.integers(1, max_requests))
    ids = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n, unique=True))
    vocab = draw(st.sampled_from([16, 48]))
    requests = []
    for rid in ids:
        new = draw(st.integers(1, 4))
        length = draw(st.integers(1, max_seq - new + 1))
        prompt = tuple(draw(st.lists(st.integers(0, vocab - 1), min_size=length, max_size=length)))
        requests.append((rid, prompt, new))
    return DisaggCase(vocab, heads[0] * head_dim, draw(st.integers(1, 3)), heads[0], heads[1], max_seq,
                      draw(st.sampled_from(dtypes)), draw(st.integers(0, 2**16)), tuple(requests),
                      draw(st.sampled_from(worlds)))
