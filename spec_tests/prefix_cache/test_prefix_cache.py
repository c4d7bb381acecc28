"""Prefix caching, one semantic per test (vLLM v1; see docs/prefix_cache.md), a brute-force
oracle over every cached sequence, and bad input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.prefix_cache.oracle import hit_bound, run_law
from spec_tests.prefix_cache.strategies import BLOCK_SIZES, EXTRA_KEYS, prompts


def make(impl, num_blocks: int, block_size: int):
    return impl.get("PrefixCache")(num_blocks, block_size)


def cached(c, seq, tokens, extra_key=None) -> list:
    """Allocate ``seq`` for ``tokens``, compute all of it, return its block table."""
    c.allocate(seq, tokens, extra_key)
    c.mark_computed(seq, len(tokens))
    return c.block_table(seq)


def test_hash_chains_the_parent(impl):
    """A block's key is its whole prefix: the same content at another position, or after another
    parent, never hits; the same prefix does."""
    c = make(impl, 16, 2)
    table = cached(c, "a", [1, 2, 3, 4, 5])
    assert c.lookup([1, 2, 3, 4, 5]) == table[:2]
    assert c.lookup([1, 2, 3, 4]) == table[:1]          # the last token is never a hit
    assert c.lookup([3, 4, 9]) == []                      # block (3, 4) at position 0
    assert c.lookup([9, 9, 3, 4, 5]) == []                # block (3, 4) after another parent
    assert c.lookup([1, 2, 9, 9, 3, 4, 5]) == table[:1]   # (3, 4) at position 2 after (9, 9)
    assert c.lookup([0, 3, 4, 5]) == []                   # unaligned: (3, 4) is not a block here


def test_tokens_past_64_bits_are_exact(impl):
    """Token ids are any ints >= 0, past 2**64 too: a block is keyed by its exact ids, never by
    their low 64 bits (2**64 + 1 is not 1), and a huge-id prefix hits like any other."""
    c = make(impl, 16, 2)
    big = 2**64
    table = cached(c, "a", [big + 1, 2, 3, 2**70, 5])
    assert c.lookup([big + 1, 2, 3, 2**70, 5]) == table[:2]
    assert c.lookup([1, 2, 3, 0, 5]) == []                # the ids' low 64 bits
    assert c.lookup([big + 1, 2, 3, 0, 5]) == table[:1]
    assert c.allocate("b", [big + 1, 2, 9]) == 2 and c.block_table("b")[0] == table[0]


@pytest.mark.parametrize("block_size", [1, 2, 3])
def test_every_bit_of_every_token_keys_its_block(impl, block_size):
    """A block is keyed by every bit of every token of its prefix: changing one bit of one token
    (a low bit, or bit 31, 32, 48, 56 or 63 of a 64-bit id) makes the block holding that token
    and every later one miss, while the blocks before it still hit. (A key built from part of a
    token's bytes -- a 32-bit id, a misaligned 64-bit slice -- shares blocks between different
    prompts.)"""
    c = make(impl, 16, block_size)
    tokens = [(i * 2654435761 + 12345) % 2**62 for i in range(3 * block_size + 1)]
    table = cached(c, "a", tokens)
    assert c.lookup(tokens) == table[:3]
    for p in range(3 * block_size):
        for bit in (0, 31, 32, 48, 56, 63):
            other = list(tokens)
            other[p] ^= 1 << bit
            assert c.lookup(other) == table[:p // block_size], (p, bit)


def test_the_smallest_pool_works(impl):
    """Sizes are ints >= 1, bounds included: a pool of one block of one token caches, hits and
    evicts like any other."""
    c = make(impl, 1, 1)
    assert cached(c, "a", [5]) == [0]
    c.free("a")
    assert c.is_cached(0) and c.lookup([5, 6]) == [0]
    with pytest.raises(ValueError, match="out of blocks"):
        c.allocate("b", [5, 6])                  # the hit and a fresh block: 2 > 1
    assert c.allocate("c", [7]) == 0 and c.block_table("c") == [0] and c.ref_count(0) == 1
    assert not c.is_cached(0) and c.lookup([5, 6]) == []


def test_extra_key_isolates(impl):
    """The extra key (adapter id, cache salt) is part of the first block's hash, hence of every
    block's: a prompt cached under one key never hits under another, nor under None."""
    c = make(impl, 16, 2)
    table = cached(c, "a", [1, 2, 3, 4, 5], extra_key="lora-a")
    assert c.lookup([1, 2, 3, 4, 5], extra_key="lora-a") == table[:2]
    assert c.lookup([1, 2, 3, 4, 5]) == []
    assert c.lookup([1, 2, 3, 4, 5], extra_key="lora-b") == []
    plain = cached(c, "b", [1, 2, 3, 4, 5])
    assert set(plain).isdisjoint(table)
    assert c.lookup([1, 2, 3, 4, 5]) == plain[:2]
    assert c.lookup([1, 2, 3, 4, 5], extra_key="lora-a") == table[:2]


def test_last_prompt_token_never_served_from_cache(impl):
    """At most len - 1 tokens hit: a fully cached prompt of whole blocks still recomputes its
    last block (its last token's logits are needed)."""
    c = make(impl, 16, 2)
    table = cached(c, "a", [1, 2, 3, 4])
    assert c.is_cached(table[0]) and c.is_cached(table[1])
    assert c.lookup([1, 2, 3, 4]) == table[:1]
    assert c.lookup([1, 2, 3, 4, 0]) == table
    assert c.allocate("b", [1, 2, 3, 4]) == 2
    assert c.block_table("b")[0] == table[0] and c.block_table("b")[1] != table[1]
    assert c.allocate("c", [1]) == 0


def test_partial_block_never_cached(impl):
    """Only full blocks are cached: a tail shorter than a block, or a block not fully computed,
    is not."""
    c = make(impl, 16, 3)
    c.allocate("a", [1, 2, 3, 4, 5])
    t = c.block_table("a")
    c.mark_computed("a", 2)
    assert not c.is_cached(t[0]) and not c.is_cached(t[1])
    c.mark_computed("a", 5)
    assert c.is_cached(t[0]) and not c.is_cached(t[1])
    assert c.lookup([1, 2, 3, 4, 5, 6, 7]) == t[:1]


def test_hits_share_blocks_and_raise_ref_counts(impl):
    """A hit is the same physical block, its ref count raised; misses take fresh blocks; stats
    count requests, prompt tokens and hit tokens."""
    c = make(impl, 16, 2)
    a = cached(c, "a", [1, 2, 3, 4, 5])
    assert c.allocate("b", [1, 2, 3, 4, 6, 7]) == 4
    b = c.block_table("b")
    assert b[:2] == a[:2] and len(b) == 3 and b[2] not in a
    assert [c.ref_count(x) for x in a] == [2, 2, 1] and c.ref_count(b[2]) == 1
    assert c.num_free_blocks == 16 - 4
    assert c.stats() == {"requests": 2, "query_tokens": 11, "hit_tokens": 4}
    c.free("a")
    assert [c.ref_count(x) for x in a] == [1, 1, 0]
    assert c.lookup([1, 2, 3, 4, 5]) == a[:2]


def test_freed_blocks_stay_cached_until_reused(impl):
    """free does not evict: a freed prompt hits again, its blocks counted free; the cache entry
    goes only when the block is handed out again."""
    c = make(impl, 3, 2)
    a = cached(c, "a", [1, 2, 3, 4, 5])
    c.free("a")
    assert c.num_free_blocks == 3
    assert all(c.ref_count(x) == 0 for x in a)
    assert c.is_cached(a[0]) and c.is_cached(a[1])
    assert c.lookup([1, 2, 3, 4, 5]) == a[:2]
    c.allocate("b", [7, 7, 7])   # takes a[2] (the uncached tail) then a[1]
    assert sorted(c.block_table("b")) == sorted([a[2], a[1]])
    assert not c.is_cached(a[1]) and c.is_cached(a[0])
    assert c.lookup([1, 2, 3, 4, 5]) == a[:1]


def test_eviction_least_recently_freed_first_tail_first(impl):
    """The free queue takes freed blocks at its tail, a sequence's last block first, and
    allocation takes its head: the least recently freed sequence is evicted first, from the end
    of its chain, so no cached block is left behind an evicted parent."""
    c = make(impl, 6, 2)
    a = cached(c, "a", [1, 2, 3, 4, 5])
    b = cached(c, "b", [6, 7, 8, 9, 10])
    c.free("a")
    c.free("b")
    assert c.free_queue_order() == a[::-1] + b[::-1]
    hit = lambda toks: len(c.lookup(toks + [0]))  # noqa: E731
    c.allocate("x", [0])               # takes a's uncached tail
    assert (hit([1, 2, 3, 4]), hit([6, 7, 8, 9])) == (2, 2)
    c.allocate("y", [0])               # a's second block: a keeps its first
    assert (hit([1, 2, 3, 4]), hit([6, 7, 8, 9])) == (1, 2)
    c.allocate("z", [0])               # a's first block; b untouched
    assert (hit([1, 2, 3, 4]), hit([6, 7, 8, 9])) == (0, 2)
    c.allocate("w", [0, 0, 0, 0])      # b's tail, then b's second block
    assert (hit([1, 2, 3, 4]), hit([6, 7, 8, 9])) == (0, 1)


def test_rehit_takes_block_off_free_queue(impl):
    """A hit on a freed cached block takes it out of the middle of the free queue (the queue
    keeps its order otherwise): allocations under pressure never hand it out."""
    c = make(impl, 4, 2)
    a = cached(c, "a", [1, 2, 3, 4, 5])
    other = cached(c, "o", [9, 9])
    c.free("o")
    c.free("a")
    before = c.free_queue_order()
    assert before == other[::-1] + a[::-1]
    assert c.allocate("b", [1, 2, 3, 4, 0, 0]) == 4   # 2 hits + 1 miss (the queue's head)
    t = c.block_table("b")
    assert t[:2] == a[:2] and t[2] == other[0]
    rest = [x for x in before if x not in t]
    assert c.free_queue_order() == rest == [a[2]] and c.num_free_blocks == 1
    c.allocate("p", [8, 8])
    assert sorted(c.block_table("p")) == sorted(rest) and c.block_table("b") == t


# --- the same block computed twice: the law, and the reference's choice -----------------------
# Two sequences that fill the same block independently (the second was allocated before the first
# cached it, or its hit was capped by the last-token rule) leave two blocks holding one key. Which
# one keeps the key is a choice (the reference: the first; nano-vllm: the newest; vLLM: both); the
# law is checked by run_law (oracle.LawModel) for any of them, after every call.

def test_hits_stop_at_the_first_missing_block(impl):
    """A cached block whose parent's key is gone is unreachable: the hits stop at the first block
    of the prompt whose key has no cached holder, even if later keys are cached. Y fills
    [0, 1, 2] while X caches [0] first; X's copy of [0] is evicted, and, under the reference's
    choice (the first block keeps the key), that was the only cached [0]: Y's [0, 1] is orphaned.
    Under any engine's choice the law holds (run_law checks every step)."""
    calls = [("allocate", ("y", [0, 1, 2, 3], None)), ("allocate", ("x", [0], None)),
             ("mark_computed", ("x", 1)), ("mark_computed", ("y", 4)), ("free", ("x",)),
             ("allocate", ("z", [5, 5], None)),         # evicts x's block (the free queue's tail)
             ("lookup", ([0, 1, 2, 3, 4], None)), ("lookup", ([0, 1, 9], None)),
             ("allocate", ("w", [0, 1, 2, 9], None))]
    run_law(impl.get("PrefixCache"), 6, 1, calls)


def test_duplicate_block_then_eviction(impl):
    """Two sequences compute the same full block ([0] at position 0): the first's hit was capped
    (a one-token prompt never hits). Then the first is freed and its block evicted: whatever block
    the engine kept, a block it says is cached still hits and an evicted one does not."""
    calls = [("allocate", ("a", [0], None)), ("mark_computed", ("a", 1)),
             ("allocate", ("b", [0], None)), ("mark_computed", ("b", 1)),
             ("lookup", ([0, 1], None)), ("free", ("a",)), ("allocate", ("c", [1, 1], None)),
             ("lookup", ([0, 1], None)), ("free", ("b",)), ("lookup", ([0, 1], None)),
             ("allocate", ("d", [0, 1], None)), ("mark_computed", ("d", 2)), ("free", ("c",)),
             ("free", ("d",)), ("lookup", ([0, 1, 0], None))]
    run_law(impl.get("PrefixCache"), 3, 1, calls)


@pytest.mark.choice("the first block cached keeps its key; a duplicate computation stays uncached")
def test_duplicate_block_first_keeps_the_key(impl):
    """The reference's choice: when the same full block is computed twice, the first block cached
    keeps the key and the duplicate is never cached (nano-vllm moves the key to the newest block,
    vLLM keeps both: lawful, not token-exact)."""
    c = make(impl, 4, 2)
    first = cached(c, "a", [1, 2])
    second = cached(c, "b", [1, 2])           # a two-token prompt never hits its only block
    assert first[0] != second[0]
    assert c.is_cached(first[0]) and not c.is_cached(second[0])
    assert c.lookup([1, 2, 3]) == first[:1]


@given(block_size=BLOCK_SIZES, extra=st.lists(EXTRA_KEYS, min_size=1, max_size=6),
       history=st.lists(prompts(), min_size=1, max_size=6), query=prompts(max_tail=12),
       query_key=EXTRA_KEYS, computed=st.lists(st.integers(0, 20), min_size=6, max_size=6),
       keep=st.lists(st.booleans(), min_size=6, max_size=6))
def test_lookup_matches_brute_force(impl, block_size, extra, history, query, query_key, computed, keep):
    """With a pool large enough that nothing is evicted, the hits of any prompt are exactly the
    longest block-aligned common prefix with any computed sequence under the same extra key
    (capped at len - 1 tokens), whether or not that sequence was freed."""
    c = make(impl, 64, block_size)
    done = []
    for i, tokens in enumerate(history):
        key = extra[i % len(extra)]
        c.allocate(i, tokens, key)
        n = min(computed[i], len(tokens))
        c.mark_computed(i, n)
        done.append((tokens, key, n))
        if not keep[i]:
            c.free(i)
    hits = c.lookup(query, query_key)
    assert len(hits) == hit_bound(query, query_key, done, block_size)
    assert all(c.is_cached(b) for b in hits)


# --- bad input ------------------------------------------------------------------------------

def _state(c, seqs=("a", "b")):
    return (c.num_free_blocks, c.free_queue_order(), [c.ref_count(b) for b in range(6)],
            [c.is_cached(b) for b in range(6)], c.stats(),
            {s: c.block_table(s) for s in seqs if s in _live(c, seqs)})


def _live(c, seqs):
    out = []
    for s in seqs:
        try:
            c.block_table(s)
            out.append(s)
        except KeyError:
            pass
    return out


def _cache(impl):
    c = make(impl, 6, 2)
    cached(c, "a", [1, 2, 3, 4, 5])
    c.allocate("b", [7, 7])
    return c


CTOR_BAD = [
    Bad("zero num_blocks", dict(num_blocks=0), ValueError, ("num_blocks",)),
    Bad("float num_blocks", dict(num_blocks=4.0), TypeError, ("num_blocks",)),
    Bad("zero block_size", dict(block_size=0), ValueError, ("block_size",)),
    Bad("bool block_size", dict(block_size=True), TypeError, ("block_size",)),
]


@bad_cases(CTOR_BAD)
def test_constructor_rejects_bad_input(impl, bad):
    """PrefixCache(num_blocks, block_size): ints >= 1; the message names the argument."""
    assert_rejects(impl.get("PrefixCache"), dict(num_blocks=4, block_size=2), bad)


# A bool is not a token wherever it stands and whatever tokens surround it (alone, among larger
# ids, among many 0s and 1s, next to an id past 2**64), and tokens is a list or tuple, not any
# iterable of ints (a range, a set, a numpy array): the rows allocate and lookup share.
TOKEN_SHAPE_BAD = [
    Bad("True alone", dict(tokens=[True]), TypeError, ("tokens",)),
    Bad("False alone", dict(tokens=(False,)), TypeError, ("tokens",)),
    Bad("True among larger ids", dict(tokens=[5, True, 9]), TypeError, ("tokens",)),
    Bad("False among larger ids", dict(tokens=[7, 8, False]), TypeError, ("tokens",)),
    Bad("a bool among many 0s and 1s", dict(tokens=[0, 1] * 6 + [True]), TypeError, ("tokens",)),
    Bad("a bool next to an id past 2**64", dict(tokens=[2**64, False]), TypeError, ("tokens",)),
    Bad("tokens a range", dict(tokens=range(1, 4)), TypeError, ("tokens",)),
    Bad("tokens a set", dict(tokens={1, 2, 3}), TypeError, ("tokens",)),
    Bad("tokens a numpy array", dict(tokens=np.array([1, 2, 3])), TypeError, ("tokens",)),
]

ALLOC_BAD = [
    Bad("live seq", dict(seq="a"), ValueError, ("seq",)),
    Bad("float seq", dict(seq=1.5), TypeError, ("seq",)),
    Bad("bool seq", dict(seq=True), TypeError, ("seq",)),
    Bad("empty tokens", dict(tokens=[]), ValueError, ("tokens",)),
    Bad("tokens a str", dict(tokens="12"), TypeError, ("tokens",)),
    Bad("float token", dict(tokens=[1, 2.0]), TypeError, ("tokens",)),
    Bad("negative token", dict(tokens=[1, -1]), ValueError, ("tokens",)),
    *TOKEN_SHAPE_BAD,
    Bad("unhashable extra_key", dict(extra_key=["x"]), TypeError, ("extra_key",)),
    Bad("out of blocks", dict(tokens=[0] * 7), ValueError, ("out of blocks",)),
    Bad("out of blocks counting revived hits", {}, ValueError, ("out of blocks",)),  # built in the test
]


@bad_cases(ALLOC_BAD)
def test_allocate_rejects_bad_input(impl, bad):
    """allocate on a pool of 6 blocks (3 held by "a", 1 by "b"; after "a" is freed "a"'s 2 cached
    blocks are free but must be taken off the queue to be hit): a bad call raises naming the
    argument and changes nothing."""
    c = _cache(impl)
    if bad.id == "out of blocks counting revived hits":
        # 5 free blocks, 2 of them a's cached prefix: 11 tokens = 2 hits (taken off the free
        # queue) + 4 misses = 6 > 5, though the misses alone (4) would fit.
        c.free("a")
        bad = Bad(bad.id, dict(tokens=[1, 2, 3, 4] + [0] * 7), bad.error, bad.words)
    assert_rejects(c.allocate, dict(seq="new", tokens=[1, 2, 3], extra_key=None), bad,
                   state=lambda: _state(c, ("a", "b", "new")))


MARK_BAD = [
    Bad("unknown seq", dict(seq="zz"), KeyError, ("zz",)),
    Bad("float seq", dict(seq=2.5), TypeError, ("seq",)),
    Bad("negative n_tokens", dict(n_tokens=-1), ValueError, ("n_tokens",)),
    Bad("float n_tokens", dict(n_tokens=2.0), TypeError, ("n_tokens",)),
    Bad("n_tokens past the prompt", dict(n_tokens=3), ValueError, ("n_tokens",)),
]


@bad_cases(MARK_BAD)
def test_mark_computed_rejects_bad_input(impl, bad):
    """mark_computed(seq, n_tokens): a live seq, 0 <= n_tokens <= its prompt length."""
    c = _cache(impl)
    assert_rejects(c.mark_computed, dict(seq="b", n_tokens=2), bad, state=lambda: _state(c))


FREE_BAD = [
    Bad("unknown seq", dict(seq="zz"), KeyError, ("zz",)),
    Bad("list seq", dict(seq=["a"]), TypeError, ("seq",)),
]


@bad_cases(FREE_BAD)
def test_free_rejects_bad_input(impl, bad):
    """free(seq): a live seq; freeing twice is a KeyError."""
    c = _cache(impl)
    assert_rejects(c.free, dict(seq="a"), bad, state=lambda: _state(c))
    c.free("a")
    assert_rejects(c.free, dict(seq="a"), Bad("freed twice", {}, KeyError, ("a",)), state=lambda: _state(c))


LOOKUP_BAD = [
    Bad("empty tokens", dict(tokens=()), ValueError, ("tokens",)),
    Bad("tokens None", dict(tokens=None), TypeError, ("tokens",)),
    Bad("bool token", dict(tokens=[1, True]), TypeError, ("tokens",)),
    Bad("numpy int token", dict(tokens=[1, np.int64(2), 3]), TypeError, ("tokens",)),
    *TOKEN_SHAPE_BAD,
    Bad("float token", dict(tokens=[1, 2.0, 3]), TypeError, ("tokens",)),
    Bad("token >= 2**64 is legal, a negative one is not", dict(tokens=[2**64, -1]), ValueError, ("tokens",)),
    Bad("unhashable extra_key", dict(extra_key={}), TypeError, ("extra_key",)),
]


@bad_cases(LOOKUP_BAD)
def test_lookup_rejects_bad_input(impl, bad):
    """lookup(tokens, extra_key): the same checks as allocate."""
    c = _cache(impl)
    assert_rejects(c.lookup, dict(tokens=[1, 2, 3], extra_key=None), bad, state=lambda: _state(c))


TABLE_BAD = [
    Bad("unknown seq", dict(seq="zz"), KeyError, ("zz",)),
    Bad("float seq", dict(seq=1.5), TypeError, ("seq",)),
    Bad("bool seq", dict(seq=True), TypeError, ("seq",)),
    Bad("list seq", dict(seq=["a"]), TypeError, ("seq",)),
]


@bad_cases(TABLE_BAD)
def test_block_table_rejects_bad_input(impl, bad):
    """block_table(seq): seq an int or str (TypeError naming seq, though no live seq could match
    it), live (KeyError showing its repr)."""
    c = _cache(impl)
    assert_rejects(c.block_table, dict(seq="a"), bad, state=lambda: _state(c))


BLOCK_BAD = [
    Bad("block == num_blocks", dict(block=6), ValueError, ("block",)),
    Bad("block past num_blocks", dict(block=60), ValueError, ("block",)),
    Bad("negative block", dict(block=-1), ValueError, ("block",)),
    Bad("float block", dict(block=1.0), TypeError, ("block",)),
    Bad("bool block", dict(block=True), TypeError, ("block",)),
]


@pytest.mark.parametrize("bad", BLOCK_BAD, ids=[b.id for b in BLOCK_BAD])
@pytest.mark.parametrize("method", ["ref_count", "is_cached"])
def test_block_queries_reject_bad_input(impl, method, bad):
    """ref_count(block) and is_cached(block) on a pool of 6 blocks: block an int in [0, 6); a block
    id past the pool is a ValueError naming ``block`` (never an IndexError, nor a silent "not
    cached" / 0), and the query changes nothing."""
    c = _cache(impl)
    assert_rejects(getattr(c, method), dict(block=0), bad, state=lambda: _state(c))
