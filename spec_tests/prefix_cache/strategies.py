"""Prompts for the prefix cache: a tiny vocabulary and a few shared stems, so prompts share
block-aligned prefixes often and the same block content turns up at other positions."""
from __future__ import annotations

from hypothesis import strategies as st

BLOCK_SIZES = st.integers(1, 4)
EXTRA_KEYS = st.sampled_from([None, None, None, "lora-a", 7])
STEMS = ((1, 2, 1, 2, 1, 2, 1, 2), (3, 3, 3, 3), (1, 2, 3, 4, 1, 2, 3, 4), ())


@st.composite
def prompts(draw, max_tail: int = 8):
    """A stem (often shared with other prompts) followed by a few tokens of a vocabulary of 4."""
    stem = draw(st.sampled_from(STEMS))
    cut = draw(st.integers(0, len(stem)))
    tail = draw(st.lists(st.integers(0, 3), max_size=max_tail))
    tokens = list(stem[:cut]) + tail
    return tokens or [draw(st.integers(0, 3))]
