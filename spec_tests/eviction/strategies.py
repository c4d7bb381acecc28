"""Strategies of `eviction`: protocol traces and access traces over a small universe of keys."""
from __future__ import annotations

from hypothesis import strategies as st

# Hashable keys of several types (no bools: True == 1 would alias two keys).
KEYS = (0, 1, 2, 3, "a", "b", (1, 2), 2.5)
POLICIES = ("LRU", "LFU", "Hybrid")

# A clock step: repeated times (ties broken by call order) are common.
steps = st.sampled_from([0, 0, 1, 1, 2, 5])
weights = st.sampled_from([0, 1, 2, 3, 8, 1000])

# One raw protocol operation; "pick" numbers are resolved against the keys tracked at that moment.
ops = st.one_of(
    st.tuples(st.just("touch"), st.sampled_from(KEYS), steps),
    st.tuples(st.just("touch"), st.sampled_from(KEYS), steps),
    st.tuples(st.just("copy"), st.integers(0, 7), st.integers(0, 7)),
    st.tuples(st.just("remove"), st.integers(0, 7)),
    st.tuples(st.just("victim"), st.lists(st.integers(0, 7), min_size=1, max_size=5), st.integers(0, 99)),
    st.tuples(st.just("victim_all")),
)
traces = st.lists(ops, min_size=1, max_size=40)

# Access traces for a fixed-capacity cache: a few hot keys and a long tail.
accesses = st.lists(st.tuples(st.sampled_from((0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7)), steps), max_size=60)
