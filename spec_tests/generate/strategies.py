"""Strategies for the generation loop: a model case (spec_tests/model/strategies.py) plus how many
tokens to generate and how to prefill. A :class:`GenCase`'s repr is valid Python
(``from spec_tests.generate.strategies import GenCase``; ``from spec_tests.model.strategies import
ModelCase``), so every failure replays.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from spec_tests.model.strategies import ModelCase, model_cases


@dataclass(frozen=True)
class GenCase:
    """A generation problem: ``model.seq_len`` prompt tokens per row (``model.tokens()``), then
    ``max_new_tokens`` more, the prompt prefilled in chunks of ``prefill_chunk_size``."""

    model: ModelCase
    max_new_tokens: int
    prefill_chunk_size: int | None = None


@st.composite
def gen_cases(draw, *, dtypes=("float32",), max_prompt: int = 8, max_new: int = 10, max_batch: int = 2):
    """Prompts of 1..max_prompt tokens, 1..max_new new tokens, a context window that is exactly
    full at the end or has up to 2 positions to spare, and chunked prefill half of the time, with
    chunks of 1 token up to 2 more than the prompt (a chunk longer than the prompt is legal: one
    prefill)."""
    new = draw(st.integers(1, max_new))
    model = draw(model_cases(dtypes=dtypes, max_seq=max_prompt, max_batch=max_batch, extra_positions=new))
    model = ModelCase(**{**model.__dict__, "max_seq_len": model.seq_len + new + draw(st.integers(0, 2))})
    chunk = draw(st.one_of(st.none(), st.integers(1, model.seq_len + 2)))
    return GenCase(model=model, max_new_tokens=new, prefill_chunk_size=chunk)
