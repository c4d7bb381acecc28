"""Internals of the bundled optimized radix tree and eviction heap (not concept-parametrized, never
run against a submission): the byte-level common-prefix search, and the lazy heap's compaction."""
from __future__ import annotations

import struct

from hypothesis import given, strategies as st

from optimized import eviction as opt_eviction
from optimized.radix import _common
from reference import eviction as ref_eviction


def _packed(tokens) -> bytes:
    return struct.pack(f"{len(tokens)}I", *tokens)


@given(a=st.lists(st.integers(0, 3), max_size=40), b=st.lists(st.integers(0, 3), max_size=40),
       offset=st.integers(0, 5))
def test_common_is_the_token_common_prefix(a, b, offset):
    """``_common(a, q, pos)`` is 4 x the number of leading tokens ``a`` and ``q[pos:]`` share (a
    binary search over slices; never splits a token)."""
    q = [9] * offset + b
    want = 0
    while want < min(len(a), len(b)) and a[want] == b[want]:
        want += 1
    assert _common(_packed(a), _packed(q), 4 * offset) == 4 * want


def test_heap_stays_bounded_and_right():
    """Many touches of few keys: stale entries are compacted away (the heap never holds more than
    2 x live + 64 entries), and victim() still agrees with the reference's scan."""
    for kind in ("LRU", "LFU", "Hybrid"):
        fast, slow = getattr(opt_eviction, kind)(), getattr(ref_eviction, kind)()
        fast.touch("warm", 0)
        slow.touch("warm", 0)
        fast.victim()                       # builds the heap
        for now in range(1, 3000):
            key = now % 7
            for p in (fast, slow):
                p.touch(key, now)
            if now % 500 == 0:
                for p in (fast, slow):
                    p.remove(key)
            assert len(fast._heap) <= 2 * len(fast._records) + 64
            if now % 37 == 0:
                assert fast.victim() == slow.victim(), (kind, now)
