"""Strategies of `radix`: small token alphabets (so that keys share prefixes and walks stop inside
runs), keys derived from earlier keys, namespaces, policies."""
from __future__ import annotations

from hypothesis import strategies as st

from reference.eviction import LFU, LRU, Hybrid

BIG_TOKEN = 2**32 - 1                     # the largest token id
tokens_alphabet = st.sampled_from([0, 0, 1, 1, 2, 2, 7, BIG_TOKEN])
namespaces = st.sampled_from([None, None, None, "a", 7])
page_sizes = st.sampled_from([1, 1, 2, 3, 4])
# The first slot handed out: slots are fresh ints from there (never reused), up to 2**63 - 1.
slot_bases = st.sampled_from([0, 1000, 2**63 - 2**16])

# The policy plugged in: None (the default, LRU) or a reference policy (radix's tests use the
# reference's policies: the policies are concept `eviction`'s subject).
POLICIES = {
    "default": lambda: None,
    "LRU": LRU,
    "LFU": LFU,
    "Hybrid(0)": lambda: Hybrid(weight=0),
    "Hybrid(2)": lambda: Hybrid(weight=2),
    "Hybrid(5)": lambda: Hybrid(weight=5),
}
policy_names = st.sampled_from(sorted(POLICIES))


def derived_keys(seen: list, page: int, max_len: int = 16):
    """``(base, key)``: a key that continues an earlier key ``base`` (often all of it), then goes
    its own way for a few tokens."""
    return st.sampled_from(seen).flatmap(lambda base: st.tuples(st.just(base), st.builds(
        lambda cut, tail: (base[:cut] + tail)[:max_len],
        st.one_of(st.just(len(base)), st.integers(0, len(base))),
        st.lists(tokens_alphabet, max_size=2 * page + 2))))
