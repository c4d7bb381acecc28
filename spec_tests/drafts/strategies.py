"""Strategies and tiny models for the `drafts` concept."""
from __future__ import annotations

from hypothesis import strategies as st


def token_lists(vocab: int = 3, max_size: int = 12) -> st.SearchStrategy[list[int]]:
    """Short sequences over a tiny vocabulary (so n-grams repeat often)."""
    return st.lists(st.integers(0, vocab - 1), min_size=0, max_size=max_size)


def tiny_models(reference, *, vocab: int = 8, layers: int = 2, seed: int = 1, max_seq_len: int = 48):
    """A tiny reference Transformer (vocab <= 16, dim 16)."""
    config = reference.get("model.ModelConfig")(vocab_size=vocab, dim=16, n_layers=layers, n_heads=2,
                                                n_kv_heads=1, max_seq_len=max_seq_len)
    return reference.get("model.Transformer")(config, seed=seed)


def ngram_oracle(tokens: list[int], gamma: int, n: int) -> list[int]:
    """Brute force: every earlier occurrence of the last n tokens, the most recent wins."""
    length = len(tokens)
    if gamma == 0 or length <= n:
        return []
    starts = [j for j in range(length - n) if tokens[j:j + n] == tokens[length - n:]]
    return tokens[max(starts) + n:max(starts) + n + gamma] if starts else []
