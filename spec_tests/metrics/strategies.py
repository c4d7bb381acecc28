"""Hypothesis strategies for serving metrics (course 01.11, 04.09-04.12): request timelines.

A run is a list of requests ``(arrival, token_times)``. Timestamps share a base offset (0, or an
epoch-like 1.7e9 so that float64 rounding of differences is exercised), gaps may be 0 (several
tokens in one step, as with speculative decoding) or at least a microsecond, and one-token
requests are common.
"""
from __future__ import annotations

from hypothesis import strategies as st

BASES = (0.0, 0.0, 0.0, 1000.0, 1.7e9)
# Clocks resolve about a microsecond: a gap is 0 (same step) or at least 1 us.
durations = st.one_of(st.just(0.0), st.floats(1e-6, 5.0, allow_nan=False, allow_infinity=False))
MIN_WINDOW = 1e-3


@st.composite
def request(draw, base: float = 0.0, max_tokens: int = 8) -> tuple[float, tuple[float, ...]]:
    arrival = base + draw(st.one_of(st.just(0.0), st.floats(1e-6, 20.0, allow_nan=False, allow_infinity=False)))
    t = arrival + draw(durations)
    times = [t]
    for gap in draw(st.lists(durations, max_size=max_tokens - 1)):
        t = t + gap
        times.append(t)
    return arrival, tuple(times)


@st.composite
def runs(draw, max_requests: int = 8) -> list[tuple[float, tuple[float, ...]]]:
    """A non-empty list of requests whose run window (last token - first arrival) is at least
    MIN_WINDOW (a millisecond)."""
    base = draw(st.sampled_from(BASES))
    reqs = draw(st.lists(request(base), min_size=1, max_size=max_requests))
    if max(t[-1] for _, t in reqs) - min(a for a, _ in reqs) < MIN_WINDOW:
        a, t = reqs[0]
        reqs[0] = (a, t[:-1] + (t[-1] + 1.0,))
    return reqs
