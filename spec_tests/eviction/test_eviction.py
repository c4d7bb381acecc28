"""Eviction policies (course 03.09-03.11): each policy against a brute-force replay of its
definition on generated protocol traces, and plugged into a fixed-capacity cache against the
textbook simulation; the hybrid's two limits; bad input."""
from __future__ import annotations

import random

import pytest
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.eviction.oracles import Event, eviction_order, record, textbook_cache
from spec_tests.eviction.strategies import KEYS, POLICIES, accesses, traces, weights


def make(impl, kind: str, weight: int = 8):
    """A fresh policy of ``kind`` from the implementation under test."""
    if kind == "LRU":
        return impl.get("LRU")()
    if kind == "LFU":
        return impl.get("LFU")()
    return impl.get("Hybrid")(weight=weight)


def run_trace(policy, kind: str, weight: int, trace: list) -> None:
    """Apply ``trace`` to ``policy`` and to a history; at every query compare the policy's answer
    with the history replayed by definition (spec_tests/eviction/oracles.py)."""
    events: list[Event] = []
    tracked: list = []   # bookkeeping of the test: which keys are tracked, in order of first touch
    now = 0
    for op in trace:
        kind_of_op = op[0]
        if kind_of_op == "touch":
            _, key, step = op
            now += step
            policy.touch(key, now)
            events.append(Event("touch", key, now=now))
            if key not in tracked:
                tracked.append(key)
        elif kind_of_op == "copy" and tracked:
            src = tracked[op[1] % len(tracked)]
            free = [k for k in KEYS if k not in tracked]
            if not free:
                continue
            dst = free[op[2] % len(free)]
            policy.copy(src, dst)
            events.append(Event("copy", dst, src=src))
            tracked.append(dst)
        elif kind_of_op == "remove" and tracked:
            key = tracked.pop(op[1] % len(tracked))
            policy.remove(key)
            events.append(Event("remove", key))
        elif kind_of_op == "victim" and tracked:
            candidates = list(dict.fromkeys(tracked[i % len(tracked)] for i in op[1]))
            random.Random(op[2]).shuffle(candidates)   # the answer must not depend on their order
            want = eviction_order(events, kind, weight, candidates)[0]
            got = policy.victim(candidates)
            assert got == want, (
                f"{kind}: victim({candidates!r}) = {got!r}; by definition {want!r} goes first "
                f"(records (hits, last, order): {({k: record(events, k) for k in candidates})})")
        elif kind_of_op == "victim_all" and tracked:
            order = eviction_order(events, kind, weight, tracked)
            got = sorted(tracked, key=policy.priority)
            assert got == order, (
                f"{kind}: keys sorted by priority {got!r}; by definition the eviction order is {order!r} "
                f"(records (hits, last, order): {({k: record(events, k) for k in tracked})})")
            assert policy.victim() == order[0], f"{kind}: victim() = {policy.victim()!r}, expected {order[0]!r}"


# Pinned traces, each a rule: LFU ties by recency (oldest first), the hybrid's weighting, LRU's
# refresh on touch, a copy inherits hits, a copy ranks after its source, candidates restrict victim,
# a re-touched key is no longer the victim once the policy has answered victim() before.
LFU_TIE = [("touch", 0, 1), ("touch", 1, 1), ("touch", 2, 1), ("touch", 1, 1), ("touch", 0, 0), ("victim_all",)]
HYBRID = [("touch", 0, 1), ("touch", 0, 1), ("touch", 1, 1), ("touch", 2, 1), ("victim_all",)]
REFRESH = [("touch", 0, 1), ("touch", 1, 1), ("touch", 0, 1), ("victim_all",)]
COPY = [("touch", 0, 1), ("touch", 0, 1), ("touch", 1, 0), ("copy", 0, 0), ("victim_all",)]
SUBSET = [("touch", 0, 1), ("touch", 1, 1), ("touch", 2, 1), ("victim", [2, 1], 0), ("victim", [1, 2], 1)]
# victim() first (an optimized policy builds its heap), then the victim is touched again: its old
# entry is stale and must not be returned.
STALE = [("touch", 0, 1), ("touch", 1, 1), ("victim_all",), ("touch", 0, 1), ("victim_all",)]


@example(kind="LFU", weight=8, trace=LFU_TIE).via("mutant:lfu_ties_newest_first")
@example(kind="Hybrid", weight=2, trace=HYBRID).via("mutant:hybrid_weight_sign")
@example(kind="Hybrid", weight=3, trace=LFU_TIE).via("mutant:hybrid_weight_sign mutant:hybrid_ties_newest_first")
@example(kind="LRU", weight=8, trace=REFRESH).via("mutant:lru_clock_not_refreshed")
@example(kind="LFU", weight=8, trace=COPY).via("mutant:copy_resets_hits")
@example(kind="LRU", weight=8, trace=COPY).via("mutant:copy_ties_with_source")
@example(kind="LRU", weight=8, trace=SUBSET).via("mutant:victim_ignores_candidates")
@example(kind="LRU", weight=8, trace=STALE).via("mutant:heap_stale_entry")
@given(kind=st.sampled_from(POLICIES), weight=weights, trace=traces)
def test_matches_definition_replayed(impl, kind, weight, trace):
    """victim(candidates), victim() and the order of priorities equal the policy's definition,
    evaluated on the whole history of touch/copy/remove calls replayed from the start."""
    run_trace(make(impl, kind, weight), kind, weight, trace)


def run_cache(policy, trace: list[tuple], capacity: int) -> list[tuple]:
    """A fixed-capacity cache that plugs the policy in: a miss in a full cache evicts
    ``policy.victim()`` (and removes it), every access touches."""
    cached: set = set()
    out = []
    for key, now in trace:
        if key in cached:
            policy.touch(key, now)
            out.append((True, None))
            continue
        evicted = None
        if len(cached) == capacity:
            evicted = policy.victim()
            policy.remove(evicted)
            cached.remove(evicted)
        policy.touch(key, now)
        cached.add(key)
        out.append((False, evicted))
    return out


def _timed(trace):
    """(key, step) -> (key, now) with a non-decreasing clock."""
    now, out = 0, []
    for key, step in trace:
        now += step
        out.append((key, now))
    return out


@example(kind="LFU", weight=8, trace=[(0, 1), (0, 1), (1, 1), (2, 1), (1, 1), (3, 1)], capacity=3).via("mutant:lfu_count_not_accumulated")
@example(kind="Hybrid", weight=1, trace=[(0, 1), (0, 1), (1, 1), (2, 1), (3, 1), (4, 1)], capacity=2).via("mutant:hybrid_ties_newest_first")
@given(kind=st.sampled_from(POLICIES), weight=weights, trace=accesses, capacity=st.integers(1, 5))
def test_plugged_into_a_cache_equals_textbook_simulation(impl, kind, weight, trace, capacity):
    """A cache of ``capacity`` keys using the policy hits, misses and evicts exactly as the
    textbook simulation of the policy (LRU: a recency list; LFU: counts, ties by recency; hybrid:
    its score, ties by recency)."""
    timed = _timed(trace)
    got = run_cache(make(impl, kind, weight), timed, capacity)
    want = textbook_cache(kind, weight, timed, capacity)
    assert got == want, (f"{kind} (weight {weight}), capacity {capacity}: (hit, evicted) per access "
                         f"{got}; the textbook simulation gives {want}; accesses {timed}")


@given(trace=accesses, capacity=st.integers(1, 5))
def test_hybrid_limits(impl, trace, capacity):
    """Hybrid(weight=0) evicts exactly as LRU; a weight larger than the clock's span exactly as LFU."""
    timed = _timed(trace)
    span = (timed[-1][1] + 1) if timed else 1
    lru = run_cache(make(impl, "LRU"), timed, capacity)
    lfu = run_cache(make(impl, "LFU"), timed, capacity)
    assert run_cache(make(impl, "Hybrid", 0), timed, capacity) == lru, "Hybrid(weight=0) must be LRU"
    assert run_cache(make(impl, "Hybrid", span), timed, capacity) == lfu, (
        f"Hybrid(weight={span}) (more than the clock's span) must order like LFU")


def test_hybrid_default_weight(impl):
    """Hybrid() is Hybrid(weight=8): omitting the weight means the documented default. At weight
    8 a key touched twice (at 1 and 2, score 2 + 8 = 10) outlives keys touched once at 3 ... 9 but
    not one touched at 10 (a tie of scores, broken by recency: 'prompt' is older) or 11: weight 7
    would lose to the key touched at 9, weight 9 would outlive the one touched at 10."""
    for policy in (impl.get("Hybrid")(), impl.get("Hybrid")(weight=8)):
        policy.touch("prompt", 1)
        policy.touch("prompt", 2)
        for t in range(3, 10):
            policy.touch(t, t)
        assert policy.victim() == 3, "weight 8: 'prompt' (2 + 8 = 10) outlives keys touched at 3 ... 9"
        assert policy.victim([9, "prompt"]) == 9, "weight 8: 'prompt' (2 + 8 = 10) outlives a key touched at 9"
        policy.touch(10, 10)
        assert policy.victim([10, "prompt"]) == "prompt", (
            "weight 8: 'prompt' (2 + 8 = 10) ties with a key touched at 10 and, older, goes first")
        policy.touch(11, 11)
        assert policy.victim([11, "prompt"]) == "prompt", "a key touched at 11 outlives 'prompt' (10)"


def test_priorities_unique_and_stable(impl):
    """Distinct tracked keys never share a priority (keys touched at the same time are ordered by
    call), a copy ranks after its source, and a priority changes only when its key is touched."""
    for kind in POLICIES:
        p = make(impl, kind)
        for k in KEYS[:4]:
            p.touch(k, 1)
        p.copy(0, "a")
        prios = [p.priority(k) for k in (*KEYS[:4], "a")]
        assert len(set(prios)) == len(prios), f"{kind}: equal priorities {prios}"
        assert p.priority(0) < p.priority("a"), f"{kind}: a copy must rank after its source"
        before = p.priority(1)
        p.touch(2, 3)
        assert p.priority(1) == before, f"{kind}: touching key 2 changed key 1's priority"


def test_boundaries(impl):
    """One key; time 0; the same key touched twice at the same time; removing the last key; a key
    tracked again after its removal starts a new history."""
    for kind in POLICIES:
        p = make(impl, kind)
        p.touch("x", 0)
        assert p.victim() == "x" and p.victim(["x"]) == "x"
        p.touch("x", 0)
        p.touch("y", 0)
        p.remove("x")
        assert p.victim() == "y"
        p.remove("y")
        with pytest.raises(ValueError):
            p.victim()
        # a key re-tracked starts again at one access: LFU then evicts it before a key with two
        p.touch("x", 1)
        p.touch("x", 1)
        p.touch("y", 2)
        p.touch("y", 2)
        p.remove("x")
        p.touch("x", 3)
        if kind == "LFU":
            assert p.victim() == "x", "LFU: 'x' was removed and tracked again: 1 access, not 3"


# -- bad input ----------------------------------------------------------------------------------
def _policy_with_keys(impl, kind="LFU"):
    p = make(impl, kind)
    p.touch("a", 3)
    p.touch("b", 5)
    p.touch("a", 5)
    return p


VALID = dict(method="touch", key="c", now=7)
BAD = [
    Bad("now negative", dict(now=-1), ValueError, ("now",)),
    Bad("now float", dict(now=6.0), TypeError, ("now",)),
    Bad("now bool", dict(now=True), TypeError, ("now",)),
    Bad("now decreasing", dict(now=4), ValueError, ("now",)),
    Bad("key unhashable", dict(key=["c"]), TypeError, ("key",)),
    Bad("remove untracked", dict(method="remove", key="zz", now=None), KeyError, ("zz",)),
    Bad("remove unhashable", dict(method="remove", key={}, now=None), TypeError, ("key",)),
    Bad("priority untracked", dict(method="priority", key="zz", now=None), KeyError, ("zz",)),
    Bad("priority unhashable", dict(method="priority", key=["a"], now=None), TypeError, ("key",)),
    Bad("copy src untracked", lambda v: dict(method="copy", src="zz", dst="c"), KeyError, ("zz",)),
    Bad("copy dst tracked", lambda v: dict(method="copy", src="a", dst="b"), ValueError, ("dst",)),
    Bad("copy dst unhashable", lambda v: dict(method="copy", src="a", dst=[1]), TypeError, ("dst",)),
    Bad("copy src unhashable", lambda v: dict(method="copy", src={}, dst="c"), TypeError, ("src",)),
    Bad("victim empty", lambda v: dict(method="victim", candidates=[]), ValueError, ("candidates",)),
    Bad("victim untracked", lambda v: dict(method="victim", candidates=["a", "zz"]), KeyError, ("zz",)),
    Bad("victim not iterable", lambda v: dict(method="victim", candidates=5), TypeError, ("candidates",)),
    Bad("victim unhashable candidate", lambda v: dict(method="victim", candidates=["a", ["b"]]), TypeError,
        ("candidates",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """Bad arguments raise the documented error naming the argument (or the unknown key), and the
    policy is unchanged (every key's priority and the next victim)."""
    p = _policy_with_keys(impl)

    def call(method, now=None, **kw):
        if method == "touch":
            return p.touch(kw["key"], now)
        return getattr(p, method)(**kw)

    def state():
        return [(k, p.priority(k)) for k in ("a", "b")], p.victim()

    assert_rejects(call, VALID, bad, state=state)


def test_empty_policy_has_no_victim(impl):
    """victim() with nothing tracked raises ValueError naming candidates (there is nothing to evict)."""
    for kind in POLICIES:
        with pytest.raises(ValueError, match="candidates"):
            make(impl, kind).victim()


HYBRID_BAD = [
    Bad("weight negative", dict(weight=-1), ValueError, ("weight",)),
    Bad("weight float", dict(weight=0.5), TypeError, ("weight",)),
    Bad("weight bool", dict(weight=True), TypeError, ("weight",)),
]


@bad_cases(HYBRID_BAD)
def test_hybrid_rejects_bad_weight(impl, bad):
    assert_rejects(impl.get("Hybrid"), dict(weight=8), bad)
