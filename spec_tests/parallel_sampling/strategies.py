"""Strategies for parallel sampling: a tiny model and a run of n branches (a :class:`Case`, whose
repr is valid Python: ``from spec_tests.parallel_sampling.strategies import Case``), and the
branch patterns of the closed forms (a prompt length, each branch's new tokens, a block size, an
interleaving of the branches' appends)."""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from conformance.strategies import DTYPES


@dataclass(frozen=True)
class Case:
    """A model (shape, dtype, weight seed) and one ``parallel_sample`` call: ``seeds`` () means the
    default (None)."""

    prompt: tuple
    n: int
    max_tokens: int
    block_size: int
    temperature: float = 0.0
    seeds: tuple = ()
    dtype: str = "float32"
    vocab_size: int = 48
    dim: int = 32
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    max_seq_len: int = 24
    seed: int = 0

    def model(self, dtype: str | None = None):
        """The reference model of this shape (the judge's: the model is an input, not the concept)."""
        from reference.model import ModelConfig, Transformer
        cfg = ModelConfig(vocab_size=self.vocab_size, dim=self.dim, n_layers=self.n_layers, n_heads=self.n_heads,
                          n_kv_heads=self.n_kv_heads, max_seq_len=self.max_seq_len, dtype=DTYPES[dtype or self.dtype])
        return Transformer(cfg, seed=self.seed)

    @property
    def branch_seeds(self) -> list[int]:
        return list(self.seeds) if self.seeds else list(range(self.n))

    def kwargs(self) -> dict:
        return dict(seeds=list(self.seeds) if self.seeds else None, block_size=self.block_size)


@st.composite
def cases(draw, dtypes=("float32", "bfloat16", "float64"), max_n: int = 4, max_tokens: int = 5,
          temperatures=(0.0, 0.0, 0.8, 1.0, 1.5)) -> Case:
    """A prompt of 1..7 tokens, 1..max_n branches, 1..max_tokens tokens each, blocks of 1..4 slots
    (so the prompt ends inside a block about as often as on its boundary), greedy or sampled,
    default or drawn seeds (distinct: a branch is told by its draws); models of 1 to 3 layers, head
    dims of 2 and 8, 1 or 2 KV heads."""
    vocab = draw(st.sampled_from([16, 48]))
    prompt = tuple(draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=7), label="prompt"))
    n = draw(st.integers(1, max_n), label="n")
    seeds = draw(st.one_of(st.just(()), st.lists(st.integers(0, 2**32), min_size=n, max_size=n, unique=True)
                           .map(tuple)), label="seeds")
    return Case(prompt=prompt, n=n, max_tokens=draw(st.integers(1, max_tokens), label="max_tokens"),
                block_size=draw(st.integers(1, 4), label="block_size"),
                temperature=draw(st.sampled_from(temperatures), label="temperature"), seeds=seeds,
                dtype=draw(st.sampled_from(dtypes), label="dtype"), vocab_size=vocab,
                dim=draw(st.sampled_from([8, 32]), label="dim"), n_layers=draw(st.integers(1, 3), label="n_layers"),
                n_kv_heads=draw(st.sampled_from([1, 2])), seed=draw(st.integers(0, 2**16), label="weights seed"))


@st.composite
def patterns(draw, max_prompt: int = 9, max_n: int = 4, max_new: int = 6, max_block: int = 4):
    """(prompt_len, new_tokens, block_size, order): order interleaves one-token appends, branch i
    appearing new_tokens[i] times."""
    p = draw(st.integers(0, max_prompt), label="prompt_len")
    ks = draw(st.lists(st.integers(0, max_new), min_size=1, max_size=max_n), label="new_tokens")
    b = draw(st.integers(1, max_block), label="block_size")
    order = draw(st.permutations([i for i, k in enumerate(ks) for _ in range(k)]), label="order")
    return p, ks, b, list(order)
