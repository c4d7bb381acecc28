"""The radix cache's rules, one pinned scenario each (course 03.09-03.11), the defaults, the
boundaries, and bad input. The state machine (test_state_machine.py) checks the same rules on
random call sequences; each scenario here is the smallest case of one rule, named in its
docstring with the mutant (spec_tests/radix/mutants.py) it catches."""
from __future__ import annotations

import pytest
import torch

from conformance.badinput import Bad, assert_rejects, bad_cases
from reference.eviction import LFU, LRU, Hybrid


def cache(impl, *args, **kwargs):
    return impl.get("RadixCache")(*args, **kwargs)


def ints(slots) -> list[int]:
    return [int(s) for s in slots]


def sizes(c) -> tuple:
    return c.total, c.evictable, c.protected


def expect_sizes(c, want: tuple, why: str = "") -> None:
    assert sizes(c) == want, f"(total, evictable, protected) = {sizes(c)}; expected {want}{why and ': ' + why}"


def test_split_keeps_the_tail(impl):
    """A match that ends inside a run splits the node; both halves stay cached with their slots.
    Mutant: split_loses_tail."""
    c = cache(impl)
    assert c.insert([1, 2, 3, 4, 5, 6], [10, 11, 12, 13, 14, 15]) == 0
    length, slots, _ = c.match_prefix([1, 2, 3, 9])
    assert (length, ints(slots)) == (3, [10, 11, 12])
    length, slots, _ = c.match_prefix([1, 2, 3, 4, 5, 6, 7])
    assert (length, ints(slots)) == (6, [10, 11, 12, 13, 14, 15]), "the split lost the tail [4, 5, 6]"
    expect_sizes(c, (6, 6, 0))


def test_insert_returns_what_was_cached(impl):
    """insert returns the length of the prefix already cached; the cache keeps its own slots for
    it and takes the new slots for the rest. Mutant: insert_returns_new_count."""
    c = cache(impl)
    assert c.insert([1, 2, 3], [10, 11, 12]) == 0
    assert c.insert([1, 2, 3, 4, 5], [20, 21, 22, 23, 24]) == 3
    assert c.insert([1, 2, 7], [30, 31, 32]) == 2
    assert ints(c.match_prefix([1, 2, 3, 4, 5]).slots) == [10, 11, 12, 23, 24]
    assert ints(c.match_prefix([1, 2, 7]).slots) == [10, 11, 32]
    assert c.insert([1, 2, 3, 4, 5], [40, 41, 42, 43, 44]) == 5
    assert c.total == 6


def test_lru_refreshed_by_match(impl):
    """A match is a use: after insert A, insert B, match A, the least recently used leaf is B.
    Mutant: clock_not_refreshed_on_match."""
    c = cache(impl)
    c.insert([1, 1, 1], [10, 11, 12])
    c.insert([2, 2], [20, 21])
    assert c.match_prefix([1, 1, 1]).length == 3
    assert ints(c.evict(1)) == [20, 21], "B ([2, 2]) was used less recently than A"
    assert ints(c.evict(1)) == [10, 11, 12]


def test_lock_protects_the_path(impl):
    """A lock protects the path from the root to the handle: evict frees everything else and
    nothing of it; unlock makes it evictable again. Mutants: evict_locked_parent,
    evict_locked_leaf."""
    c = cache(impl)
    c.insert([7, 7], [70, 71])
    leaf = c.match_prefix([7, 7]).handle          # a locked leaf, the least recently used
    c.lock(leaf)
    c.insert([1, 2, 3, 4], [10, 11, 12, 13])
    c.insert([1, 2, 5, 6], [20, 21, 22, 23])      # splits: [1, 2] -> [3, 4], [5, 6]
    h = c.match_prefix([1, 2]).handle             # the inner node [1, 2]
    c.lock(h)
    expect_sizes(c, (8, 4, 4), "[7, 7] and [1, 2] are locked")
    assert sorted(ints(c.evict(100))) == [12, 13, 22, 23], "only the unlocked leaves may go"
    expect_sizes(c, (4, 0, 4))
    assert c.match_prefix([1, 2]).length == 2
    c.unlock(h)
    expect_sizes(c, (4, 2, 2))
    assert ints(c.evict(1)) == [10, 11]
    c.unlock(leaf)
    assert ints(c.evict(1)) == [70, 71]
    expect_sizes(c, (0, 0, 0))


def test_unlock_releases_the_whole_path(impl):
    """unlock removes the lock from every node of the path, after the path's node was split by a
    later insert. Mutant: unlock_wrong_path."""
    c = cache(impl)
    c.insert([1, 2, 3, 4], [10, 11, 12, 13])
    h = c.match_prefix([1, 2, 3, 4]).handle
    c.lock(h)
    c.insert([1, 2, 5], [20, 21, 22])             # splits the locked node: [1, 2] -> [3, 4]
    expect_sizes(c, (5, 1, 4), "[1, 2] + [3, 4] locked, [5] not")
    c.unlock(h)
    expect_sizes(c, (5, 5, 0), "after unlock nothing is protected: both nodes of the path lose the lock")
    assert sorted(ints(c.evict(5))) == [10, 11, 12, 13, 22]


def test_locks_nest_and_belong_to_their_node(impl):
    """Two locks need two unlocks; an unlock of a handle holding no lock is a ValueError, even
    when a node below it holds one (it cannot release another node's lock). Mutant:
    unlock_unchecked."""
    c = cache(impl)
    c.insert([1, 2, 3, 4], [10, 11, 12, 13])
    deep = c.match_prefix([1, 2, 3, 4]).handle
    shallow = c.match_prefix([1, 2]).handle       # splits [1, 2] off above deep
    c.lock(deep)
    c.lock(deep)
    with pytest.raises(ValueError, match="handle"):
        c.unlock(shallow)
    expect_sizes(c, (4, 0, 4))
    c.unlock(deep)
    expect_sizes(c, (4, 0, 4))
    c.unlock(deep)
    expect_sizes(c, (4, 4, 0))
    with pytest.raises(ValueError, match="handle"):
        c.unlock(deep)


def test_page_truncation(impl):
    """page_size 4: keys are cut to whole pages; a match stops at the last whole page that agrees,
    even if more tokens agree. Mutant: match_not_page_truncated."""
    c = cache(impl, page_size=4)
    assert c.insert(list(range(10)), list(range(100, 110))) == 0
    expect_sizes(c, (8, 8, 0), "the partial page [8, 9] is not cached")
    length, slots, _ = c.match_prefix([0, 1, 2, 3, 4, 5, 99, 7, 8])
    assert (length, ints(slots)) == (4, [100, 101, 102, 103]), "6 tokens agree: one whole page"
    assert c.match_prefix(list(range(10))).length == 8
    assert c.match_prefix(list(range(7))).length == 4
    assert c.match_prefix([0, 1, 2]).length == 0
    assert c.insert([0, 1, 2, 3, 4, 5, 6, 99], list(range(200, 208))) == 4
    assert ints(c.evict(4)) in ([104, 105, 106, 107], [204, 205, 206, 207])
    assert c.total == 8


def test_extra_keys_isolate(impl):
    """Sequences under different extra keys share nothing. Mutant: extra_key_ignored."""
    c = cache(impl)
    c.insert([1, 2, 3], [10, 11, 12], extra_key="lora-a")
    assert c.match_prefix([1, 2, 3]).length == 0
    assert c.match_prefix([1, 2, 3], extra_key="lora-b").length == 0
    assert c.match_prefix([1, 2, 3], extra_key=7).length == 0
    assert ints(c.match_prefix([1, 2, 3], extra_key="lora-a").slots) == [10, 11, 12]
    assert c.insert([1, 2, 3], [20, 21, 22]) == 0
    assert c.insert([1, 2, 3], [30, 31, 32], extra_key="lora-a") == 3
    assert c.total == 6


def test_parents_join_the_candidates(impl):
    """A parent left without children is a leaf and can be evicted in the same call: leaves go
    least recently used first, then the parent. Mutant: parent_not_candidate."""
    c = cache(impl)
    c.insert([1, 2, 3], [10, 11, 12])
    c.insert([1, 2, 4], [20, 21, 22])             # [1, 2] -> [3], [4]
    assert ints(c.evict(4)) == [12, 22, 10, 11]
    expect_sizes(c, (0, 0, 0))


def test_evict_frees_whole_nodes(impl):
    """evict(n) frees whole leaves: at least n tokens (more if the last leaf is longer), and stops
    as soon as it has n. Mutant: evict_most_recent."""
    c = cache(impl)
    c.insert([1, 1, 1, 1], [10, 11, 12, 13])
    c.insert([2, 2], [20, 21])
    c.insert([3], [30])
    assert ints(c.evict(1)) == [10, 11, 12, 13]
    assert ints(c.evict(2)) == [20, 21]
    assert ints(c.evict(3)) == [30]


def test_policy_plugged_in(impl):
    """The policy decides the order: LFU keeps the leaf used most often, LRU the most recent one;
    Hybrid(weight) in between."""
    def run(policy):
        c = cache(impl, 1, policy)
        c.insert([1, 1], [10, 11])
        for _ in range(3):
            c.match_prefix([1, 1])
        c.insert([2, 2], [20, 21])
        return ints(c.evict(1))
    assert run(LRU()) == [10, 11]
    assert run(LFU()) == [20, 21]
    assert run(Hybrid(weight=0)) == [10, 11]
    assert run(Hybrid(weight=1)) == [20, 21]


def test_match_touches_every_node_of_the_path(impl):
    """match_prefix touches every node of its path, root first, not only the node it ends at: under
    LFU the shared parent [1] of [1, 2] and [1, 3] counts the matches of both (4 uses), more than
    the leaf [0] (3 uses), so once [2] and [3] are gone [0] goes before [1]. A cache that touches
    only the last node leaves [1] at its 2 inserts and evicts it first."""
    c = cache(impl, 1, LFU())
    c.insert([1, 2], [10, 11])
    c.insert([1, 3], [10, 12])
    c.match_prefix([1, 2])
    c.match_prefix([1, 3])
    c.insert([0], [20])
    c.match_prefix([0])
    c.match_prefix([0])
    assert [ints(c.evict(1)) for _ in range(4)] == [[11], [12], [20], [10]]


class _Tracking(LRU):
    """LRU that also records what the cache tells it: the keys it tracks (touch and copy add one,
    remove drops it) and the time of every touch."""

    def __init__(self):
        super().__init__()
        self.tracked, self.times = set(), []

    def touch(self, key, now):
        super().touch(key, now)
        self.tracked.add(id(key))
        self.times.append(now)

    def copy(self, src, dst):
        super().copy(src, dst)
        self.tracked.add(id(dst))

    def remove(self, key):
        super().remove(key)
        self.tracked.discard(id(key))


def _tracked_run(impl):
    """One sequence with splits, a lock and evictions; the policy's tracked count after each step."""
    policy = _Tracking()
    c = cache(impl, 1, policy)
    counts = []
    c.insert([1, 2, 3, 4], [10, 11, 12, 13]); counts.append(len(policy.tracked))
    c.insert([1, 2, 5], [10, 11, 15]); counts.append(len(policy.tracked))       # splits [1, 2] off
    h = c.match_prefix([1, 2, 5]).handle
    c.lock(h); counts.append(len(policy.tracked))
    c.insert([7, 8], [17, 18]); counts.append(len(policy.tracked))
    c.evict(2); counts.append(len(policy.tracked))
    c.unlock(h)
    c.evict(100); counts.append(len(policy.tracked))
    c.insert([1, 2], [20, 21]); counts.append(len(policy.tracked))
    return counts, policy.times


def test_evicted_nodes_leave_the_policy(impl, reference):
    """The policy tracks exactly the cached nodes: a new node is touched, a split's new node is
    copied, and ``evict`` tells the policy of every node it frees (``policy.remove``), so a
    long-running cache does not leak one policy record per node it ever held."""
    got, _ = _tracked_run(impl)
    want, _ = _tracked_run(reference)
    assert got == want, (f"policy records after each step: {got}; the cached nodes: {want} "
                         f"(an evicted node must be removed from the policy)")
    assert got[-2] == 0, "after evicting everything the policy still tracks nodes"


@pytest.mark.choice("a logical clock: one tick per accepted match_prefix/insert, the first call at time 1")
def test_clock_starts_at_one(impl, reference):
    """The times given to ``policy.touch``: the first accepted call is time 1, each accepted
    match_prefix/insert one later."""
    _, got = _tracked_run(impl)
    _, want = _tracked_run(reference)
    assert got == want, f"policy.touch times {got}; the contract's clock gives {want}"


@pytest.mark.choice("a split node's two halves both keep its policy record (SGLang's _split_node starts the "
                    "new node afresh)")
def test_policy_split_keeps_history(impl):
    """A split node keeps its history (LFU counts the split-off prefix's past uses). Mutant:
    split_drops_history."""
    c = cache(impl, 1, LFU())
    c.insert([1, 1, 2, 2], [10, 11, 12, 13])
    for _ in range(3):
        c.match_prefix([1, 1, 2, 2])             # [1, 1, 2, 2]: 4 uses
    c.insert([4, 4], [40, 41])
    for _ in range(4):
        c.match_prefix([4, 4])                   # [4, 4]: 5 uses
    c.insert([1, 1, 3], [10, 11, 30])            # splits [1, 1] off: 4 + 1 uses; [2, 2] keeps 4
    c.insert([1, 1, 5], [10, 11, 50])            # [1, 1]: 6 uses
    assert ints(c.evict(100)) == [30, 50, 12, 13, 40, 41, 10, 11]


@pytest.mark.choice("a logical clock: one tick per accepted match_prefix/insert, none for a rejected call")
def test_rejected_call_does_not_tick_the_clock(impl):
    """A rejected call changes nothing, not even the clock that Hybrid's order depends on:
    A used at 1 and 2 (priority 2 + 2 = 4), B inserted at 3 (priority 3): B goes first; had the
    rejected call counted, B would be at 4 and tie, and A (older) would go. Mutant:
    clock_ticks_before_checks."""
    c = cache(impl, 1, Hybrid(weight=2))
    c.insert([1, 1], [10, 11])
    c.match_prefix([1, 1])
    with pytest.raises(TypeError):
        c.match_prefix([1, 1], extra_key=["not hashable"])
    with pytest.raises(ValueError):
        c.insert([2, 2], [20])
    c.insert([2, 2], [20, 21])
    assert ints(c.evict(1)) == [20, 21]


def test_defaults(impl):
    """RadixCache() is RadixCache(page_size=1, policy=LRU()); omitting extra_key means None."""
    runs = []
    for c in (cache(impl), cache(impl, page_size=1, policy=LRU()), cache(impl, 1, None)):
        c.insert([1, 2, 3], [10, 11, 12])
        c.insert([1, 2, 3], [10, 11, 12], None)
        c.insert([5], [50], extra_key=None)
        c.match_prefix([1, 2, 3], None)
        a = c.match_prefix([5])
        b = c.match_prefix([5], extra_key=None)
        runs.append((a.length, ints(a.slots), b.length, ints(c.evict(1)), ints(c.evict(1)), sizes(c)))
    assert runs[0] == runs[1] == runs[2] == (1, [50], 1, [10, 11, 12], [50], (0, 0, 0)), runs


def test_boundaries(impl):
    """The empty key, a key shorter than a page, exactly one page, the empty cache, evict(0),
    the empty match's handle (lock/unlock do nothing), the largest token and slot."""
    c = cache(impl, page_size=2)
    assert c.insert([], []) == 0 and c.insert([7], [70]) == 0
    expect_sizes(c, (0, 0, 0))
    empty = c.match_prefix([])
    assert (empty.length, ints(empty.slots)) == (0, [])
    c.lock(empty.handle)
    c.unlock(empty.handle)
    c.unlock(empty.handle)
    assert c.evict(0) == [] and ints(c.evict(5)) == []
    big = 2**32 - 1
    assert c.insert([big, 0], [2**63 - 1, 0]) == 0
    assert ints(c.match_prefix([big, 0, big]).slots) == [2**63 - 1, 0]
    assert c.evict(0) == [] and sizes(c) == (2, 2, 0)
    assert ints(c.evict(10**9)) == [2**63 - 1, 0]


def test_handles_of_evicted_nodes_and_other_caches(impl):
    """A handle whose node was evicted, or of another cache, is rejected with ValueError; a
    handle stays valid across splits above it."""
    c, other = cache(impl), cache(impl)
    c.insert([1, 2, 3], [10, 11, 12])
    other.insert([1, 2, 3], [10, 11, 12])
    h = c.match_prefix([1, 2, 3]).handle
    c.match_prefix([1, 9])                        # splits [1] off above h
    c.lock(h)
    expect_sizes(c, (3, 0, 3))
    c.unlock(h)
    with pytest.raises(ValueError, match="handle"):
        other.lock(h)
    c.evict(3)
    with pytest.raises(ValueError, match="handle"):
        c.lock(h)
    c.insert([1, 2, 3], [20, 21, 22])             # the same tokens again: a new node
    with pytest.raises(ValueError, match="handle"):
        c.unlock(h)


# -- bad input ----------------------------------------------------------------------------------
def _filled(impl):
    c = cache(impl, page_size=2)
    c.insert([1, 2, 3, 4], [10, 11, 12, 13])
    h = c.match_prefix([1, 2, 9, 9]).handle       # splits [1, 2] off
    c.lock(h)
    return c, h


VALID = dict(method="match_prefix", tokens=[1, 2, 3, 4], extra_key=None)
BAD = [
    Bad("tokens str", dict(tokens="1234"), TypeError, ("tokens",)),
    Bad("tokens None", dict(tokens=None), TypeError, ("tokens",)),
    Bad("token float", dict(tokens=[1, 2, 3.0, 4]), TypeError, ("tokens",)),
    Bad("token a 0-d tensor", dict(tokens=[1, 2, torch.tensor(3), 4]), TypeError, ("tokens",)),
    Bad("token negative", dict(tokens=[1, 2, -3, 4]), ValueError, ("tokens",)),
    Bad("token 2**32", dict(tokens=[1, 2, 2**32, 4]), ValueError, ("tokens",)),
    Bad("token in the partial page", dict(tokens=[1, 2, 3, 4, -1]), ValueError, ("tokens",)),
    Bad("extra_key list", dict(extra_key=["a"]), TypeError, ("extra_key",)),
    Bad("extra_key float", dict(extra_key=1.0), TypeError, ("extra_key",)),
    Bad("insert slots short", dict(method="insert", slots=[1, 2, 3]), ValueError, ("slots",)),
    Bad("insert slots long", dict(method="insert", slots=[1, 2, 3, 4, 5]), ValueError, ("slots",)),
    Bad("insert slot negative", dict(method="insert", slots=[1, 2, -3, 4]), ValueError, ("slots",)),
    Bad("insert slot 2**63", dict(method="insert", slots=[1, 2, 2**63, 4]), ValueError, ("slots",)),
    Bad("insert slot str", dict(method="insert", slots=[1, 2, "3", 4]), TypeError, ("slots",)),
    Bad("insert slot a 0-d tensor", dict(method="insert", slots=[1, 2, torch.tensor(3), 4]), TypeError, ("slots",)),
    Bad("insert slots int", dict(method="insert", slots=4), TypeError, ("slots",)),
    Bad("insert tokens float", dict(method="insert", tokens=[1.0, 2, 3, 4], slots=[1, 2, 3, 4]), TypeError, ("tokens",)),
    Bad("insert extra_key dict", dict(method="insert", slots=[5, 6, 7, 8], extra_key={}), TypeError, ("extra_key",)),
    Bad("evict negative", lambda v: dict(method="evict", n_tokens=-1), ValueError, ("n_tokens",)),
    Bad("evict float", lambda v: dict(method="evict", n_tokens=2.0), TypeError, ("n_tokens",)),
    Bad("evict bool", lambda v: dict(method="evict", n_tokens=True), TypeError, ("n_tokens",)),
    Bad("lock int", lambda v: dict(method="lock", handle=3), TypeError, ("handle",)),
    Bad("unlock None", lambda v: dict(method="unlock", handle=None), TypeError, ("handle",)),
    Bad("unlock not locked", lambda v: dict(method="unlock", handle="unlocked"), ValueError, ("handle",)),
    Bad("lock foreign", lambda v: dict(method="lock", handle="foreign"), ValueError, ("handle",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """Bad arguments raise the documented error naming the argument and change nothing: sizes,
    and (probed afterwards) what is cached, the locks, the split points and the LRU order."""
    c, h = _filled(impl)
    other = cache(impl)
    other.insert([1], [1])
    named = {"unlocked": c.match_prefix([1, 2, 3, 4]).handle, "foreign": other.match_prefix([1]).handle}

    def call(method, **kw):
        if "handle" in kw and isinstance(kw["handle"], str):
            kw["handle"] = named[kw["handle"]]
        return getattr(c, method)(**kw)

    assert_rejects(call, VALID, bad, state=lambda: sizes(c))
    # Probe the rest of the state: the same answers as an untouched twin of the same
    # implementation (never the reference's answers: a bug elsewhere is another test's to report)
    twin, th = _filled(impl)
    twin.match_prefix([1, 2, 3, 4])
    for x in (c, twin):
        x.insert([5, 6], [50, 51])
    got, want = ints(c.evict(2)), ints(twin.evict(2))
    assert got == want, (f"after the rejected call evict(2) freed {got}; an untouched twin frees {want}: "
                         "the rejected call changed the eviction order")
    c.unlock(h)
    twin.unlock(th)
    got, want = ints(c.evict(10)), ints(twin.evict(10))
    assert got == want, (f"after the rejected call evict(10) freed {got}; an untouched twin frees {want}: "
                         "the rejected call changed what is cached or where nodes split")


CTOR_BAD = [
    Bad("page_size 0", dict(page_size=0), ValueError, ("page_size",)),
    Bad("page_size float", dict(page_size=2.0), TypeError, ("page_size",)),
    Bad("page_size bool", dict(page_size=True), TypeError, ("page_size",)),
    Bad("policy str", dict(policy="lru"), TypeError, ("policy",)),
    Bad("policy without copy", dict(policy=type("NoCopy", (), {"touch": lambda s, k, n: None})()), TypeError, ("policy",)),
]


@bad_cases(CTOR_BAD)
def test_constructor_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("RadixCache"), dict(page_size=1, policy=None), bad)
