"""Every call sequence over a small universe (issue 22, bounded-exhaustive exploration).

A token alphabet of two, keys of one to three pages, page sizes 1 and 2, the default (LRU) policy,
LFU and Hybrid(1). The operations: ``insert`` and ``match_prefix`` of every key (and of the
one-page keys under the extra key ``"a"``); ``lock`` of a key's match (the engine's pattern: match,
then lock the handle); ``unlock`` of each held lock; ``unlock`` of a key's match (rejected unless
that node holds a lock); ``lock`` of the handle last unlocked (rejected once its node is
evicted); ``evict(n)`` for a few ``n``; and two bad calls (slots one short; an unhashable extra
key). After every step every observable is compared with the tree model
(spec_tests/radix/model.py ``Tree``, which follows the slots the implementation frees):
``insert``'s return, the matched length and slots, the sizes, which handles ``lock``/``unlock``
accept, and ``evict``'s law (whole unprotected leaves, children first, stopping as soon as ``n``
tokens are freed, least recently used first by any count of "used"). A rejected call must raise
the documented error and change nothing: the sizes at once, and then an ``evict`` of everything,
checked the same way (the state key merges the sequence with the one without the rejected call,
so a change must show now). A second test (a choice: the reference's eviction order, tie rules and
clock) compares ``evict``'s exact list with the reference run side by side.

States are deduplicated on the model's canonical key (the tree's shape with its runs, the locks,
the ranks of the times of use and of the policy records -- the ages for Hybrid --, the handle last
unlocked), up to swapping the two tokens; each distinct state is expanded once, from the first
sequence that reached it, replayed from scratch on a fresh cache of the implementation.

New distinct states per depth (measured; depth 0 is the empty cache):

==============  =====  =====  =====
configuration   1      2      3
==============  =====  =====  =====
page 1, LRU     8      154    2892
page 1, LFU     8      154    2892
page 1, Hybrid  8      162    3520
page 2, LRU     12     324    8584
==============  =====  =====  =====

The dev profile explores depth 3 for page 1 under LRU and depth 2 for the others (about 3 s
in-process for the reference and the optimized together; about 16 s for an isolated submission,
whose every call crosses the process boundary); thorough: one depth more each. The choice test
goes one depth less.
"""
from __future__ import annotations

import itertools

import pytest
from hypothesis import settings

from reference.eviction import LFU, LRU, Hybrid
from spec_tests.radix.model import Tree

ERRORS = (TypeError, ValueError, KeyError)
CONFIGS = {"page1-LRU": (1, None), "page1-LFU": (1, LFU), "page1-Hybrid1": (1, lambda: Hybrid(weight=1)),
           "page2-LRU": (2, None)}
LRU_LIKE = {"page1-LRU", "page2-LRU"}


def depth(config: str) -> int:
    """dev: depth 3 for page 1 under LRU, 2 for the others; thorough: one more."""
    base = 3 if config == "page1-LRU" else 2
    return base + (settings.get_current_profile_name() == "thorough")


def keys(page: int) -> list[tuple]:
    out = []
    for pages in (1, 2, 3):
        if page == 2 and pages == 3:
            continue
        out += list(itertools.product((0, 1), repeat=pages * page))
    return out


def ops(page: int) -> list[tuple]:
    """The operations (closed under swapping the two tokens, which the state key relies on)."""
    ks = keys(page)
    one, short = [k for k in ks if len(k) == page], [k for k in ks if len(k) <= 2 * page]
    out = [("insert", k, None) for k in ks] + [("match", k, None) for k in short]
    out += [("insert", k, "a") for k in one] + [("match", k, "a") for k in one]
    out += [("lock", k) for k in short] + [("unlock_match", k) for k in one]
    out += [("lock_unlock", k) for k in short]   # a request's life: match, lock, ..., unlock
    out += [("unlock", 0), ("unlock", 1), ("relock",)]
    out += [("evict", n * page) for n in (1, 2, 100)]
    out += [("bad_insert",), ("bad_match",)]
    return out


class Run:
    """One replay: the implementation's cache (and the reference's, for the exact test) driven
    with a sequence, checked against the tree model after every step."""

    def __init__(self, impl, reference, config: str):
        page, policy = CONFIGS[config]
        make = (lambda R: R(page)) if policy is None else (lambda R: R(page, policy()))
        self.a = make(impl.get("RadixCache"))
        self.b = make(reference.get("RadixCache")) if reference is not None else None
        self.page, self.lru, self.config = page, config in LRU_LIKE, config
        self.tree = Tree(page)
        self.now = 0
        self.slot = itertools.count()
        self.held: list = []        # (impl handle, reference handle, node), in locking order
        self.released = None        # the last unlocked: (impl handle, reference handle, node)
        self.was_rejected = False   # the last call was rejected

    def sizes(self) -> tuple:
        return self.a.total, self.a.evictable, self.a.protected

    def do(self, op, where: str, check: bool) -> None:
        """Apply ``op``; with ``check``, compare every observable with the model."""
        kind = op[0]
        if kind == "insert":
            _, k, ns = op
            slots = [next(self.slot) for _ in k]
            self.now += 1
            got = self.a.insert(list(k), slots, ns) if ns is not None else self.a.insert(list(k), slots)
            want = self.tree.insert(ns, k, slots, self.now)
            if self.b is not None:
                self.b.insert(list(k), slots, ns)
            assert not check or got == want, f"{where}: insert returned {got}; {want} tokens of it were cached"
        elif kind in ("match", "lock", "unlock_match", "lock_unlock"):
            k, ns = op[1], (op[2] if kind == "match" else None)
            got = self.a.match_prefix(list(k), ns) if ns is not None else self.a.match_prefix(list(k))
            hb = self.b.match_prefix(list(k), ns).handle if self.b is not None else None
            self.now += 1
            n, slots, node = self.tree.match(ns, k, self.now)
            if check:
                assert (got[0], [int(s) for s in got[1]]) == (n, slots), (
                    f"{where}: match_prefix({list(k)}) returned length {got[0]}, slots {[int(s) for s in got[1]]}; "
                    f"the cached prefix is {n} tokens with slots {slots}")
            if kind == "lock_unlock":
                self.a.lock(got[2])
                if self.b is not None:
                    self.b.lock(hb)
                if node is not None:
                    node.held += 1
                self.unlock(got[2], hb, node, where, check)
            elif kind == "lock":
                self.a.lock(got[2])
                if self.b is not None:
                    self.b.lock(hb)
                if node is not None:
                    node.held += 1
                    self.held.append((got[2], hb, node))
            elif kind == "unlock_match":
                self.unlock(got[2], hb, node, where, check)
        elif kind == "unlock":
            if op[1] < len(self.held):
                ha, hb, node = self.held.pop(op[1])
                self.unlock(ha, hb, node, where, check)
        elif kind == "relock":
            if self.released is not None:
                ha, hb, node = self.released
                if node.alive:
                    self.a.lock(ha)
                    if self.b is not None:
                        self.b.lock(hb)
                    node.held += 1
                    self.held.append(self.released)
                else:
                    self.rejected(lambda: self.a.lock(ha), ValueError, "handle", where,
                                  "lock of a handle whose node was evicted")
        elif kind == "evict":
            freed = [int(s) for s in self.a.evict(op[1])]
            want = list(self.b.evict(op[1])) if self.b is not None else None
            problem = self.tree.evict_problem(op[1], freed, self.lru)
            assert not check or problem is None, f"{where}: evict({op[1]}) freed {freed}: {problem}"
            if check and want is not None:
                assert freed == want, (f"{where}: evict({op[1]}) freed {freed}; the reference frees {want} "
                                       f"(its order: {self.config}, its tie rules and clock)")
        elif kind == "bad_insert":
            k = (0,) * self.page
            self.rejected(lambda: self.a.insert(list(k), [0] * (len(k) - 1)), ValueError, "slots", where, "")
        elif kind == "bad_match":
            self.rejected(lambda: self.a.match_prefix([0] * self.page, ["x"]), TypeError, "extra_key", where, "")
        if check:
            want = self.tree.sizes()
            assert self.sizes() == want, (f"{where}: (total, evictable, protected) = {self.sizes()}; "
                                          f"the cached nodes and locks make {want}")

    def unlock(self, ha, hb, node, where: str, check: bool) -> None:
        if node is None:
            self.a.unlock(ha)            # the empty match's handle: nothing
            return
        if node.held == 0:
            self.rejected(lambda: self.a.unlock(ha), ValueError, "handle", where, "unlock of a handle holding no lock")
            return
        self.a.unlock(ha)
        if self.b is not None:
            self.b.unlock(hb)
        node.held -= 1
        for i, (_, _, nd) in enumerate(self.held):   # an unlock of a key's match releases one of its locks
            if nd is node:
                del self.held[i]
                break
        self.released = (ha, hb, node)

    def rejected(self, call, error, word: str, where: str, what: str) -> None:
        self.was_rejected = True
        before = self.sizes()
        try:
            call()
        except ERRORS as exc:
            assert isinstance(exc, error), f"{where}: {what} raised {type(exc).__name__}: {exc}; expected {error.__name__}"
            assert word in str(exc).lower(), f"{where}: the {type(exc).__name__} should name {word}: {exc}"
            assert self.sizes() == before, f"{where}: a rejected call changed the sizes from {before} to {self.sizes()}"
            return
        raise AssertionError(f"{where}: {what or 'the bad call'} was accepted; expected {error.__name__}")

    def probe(self, where: str) -> None:
        """After a rejected call: evict everything evictable and check it against the model (and
        the reference's list, in the exact test). The model's state key merges this sequence with
        the one without the rejected call, so a change the call made must show now."""
        freed = [int(s) for s in self.a.evict(10**9)]
        problem = self.tree.evict_problem(10**9, freed, self.lru)
        assert problem is None, f"{where}, then evict(10**9) freed {freed}: {problem}"
        if self.b is not None:
            want = list(self.b.evict(10**9))
            assert freed == want, f"{where}, then evict(10**9) freed {freed}; the reference frees {want}"
        assert self.sizes() == self.tree.sizes(), (f"{where}, then evict(10**9): sizes {self.sizes()}; "
                                                   f"the model's {self.tree.sizes()}")

    def key(self) -> tuple:
        rel = self.released
        best = None
        for relabel in ({}, {0: 1, 1: 0}):
            tree = self.tree.key(relabel, self.now if self.config.endswith("Hybrid1") else None)
            handle = None if rel is None else (rel[2].alive, tuple(relabel.get(t, t) for t in rel[2].run),
                                                len(self.path_of(rel[2])))
            k = (tree, handle, len(self.held))
            best = k if best is None or k < best else best
        return best

    @staticmethod
    def path_of(node) -> tuple:
        out = ()
        while node is not None and node.run:
            out = node.run + out
            node = node.parent
        return out


def explore(impl, reference, config: str, max_depth: int) -> list[int]:
    """BFS over the model's states; returns the number of new distinct states per depth."""
    page = CONFIGS[config][0]
    all_ops = ops(page)
    seen = {Run(impl, None, config).key()}
    frontier: list[list] = [[]]
    counts = []
    for _ in range(max_depth):
        nxt = []
        for seq in frontier:
            for op in all_ops:
                run = Run(impl, reference, config)
                for prev in seq:
                    run.do(prev, "", check=False)
                run.was_rejected = False
                run.do(op, f"{config}: after {seq} then {op}", check=True)
                key = run.key()
                if run.was_rejected:
                    run.probe(f"{config}: after {seq} then {op}")
                if key not in seen:
                    seen.add(key)
                    nxt.append(seq + [op])
        counts.append(len(nxt))
        frontier = nxt
    return counts


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_every_sequence_small_scope(impl, config):
    """Every call sequence up to the depth over two tokens and short keys (module docstring):
    after every step the results, the sizes, the handles' validity and evict's law equal the tree
    model's; a rejected call raises the documented error and changes nothing."""
    explore(impl, None, config, depth(config))


@pytest.mark.choice("evict's exact list: the reference's order (the policy's priorities over a clock that "
                    "ticks once per accepted match_prefix/insert, every node of the path touched, split halves "
                    "copying the node's record)")
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_every_sequence_evicts_as_the_reference(impl, reference, config):
    """The same exploration, one depth less, comparing evict's list with the reference's."""
    explore(impl, reference, config, depth(config) - 1)
