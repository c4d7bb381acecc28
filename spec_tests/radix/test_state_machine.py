"""The radix cache as a state machine (course 03.09-03.11).

Hypothesis drives the implementation under test and the reference (the naive store) side by side
with the same random calls -- insert, match_prefix, lock, unlock, evict, and invalid calls -- over
keys that share prefixes (so walks stop inside runs and split nodes), several extra keys, page
sizes 1-4 and each eviction policy. After every step it checks

- the law, whatever the implementation's eviction order: against the tree model
  (spec_tests/radix/model.py ``Tree``, which follows the slots the implementation frees) ``evict``
  frees whole unprotected leaves, children first, stops as soon as it has freed ``n`` tokens, and
  under LRU never frees a node while a candidate leaf unused since before that node's last use
  (by any count of "use") remains; the errors are the documented ones (type, and the argument
  named);
- at token-exact (``test_state_machine_token_exact``, a choice): the same results as the
  reference, the exact list evict frees (which nodes, in which order: the policy's order over the
  reference's clock and tie rules), the same errors;
- against the token-level model (spec_tests/radix/model.py), which has no tree: a match is the
  longest cached prefix (whole pages) and its slots are exactly the ones inserted for those
  tokens; insert returns how much was cached; evict frees only cached, unprotected tokens and
  only from the ends of cached sequences; ``evict(n)`` frees at least ``n`` tokens or everything
  evictable; a handle is usable exactly while its node is cached;
- sizes: ``evictable + protected == total``; ``total`` is the model's token count and
  ``protected`` the number of tokens on the paths of locked handles; all are page multiples;
- extra keys isolate: the model is keyed by the extra key, so a match under one key never
  returns what another inserted;
- a rejected call changes nothing (sizes at once; anything else shows in later steps).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from hypothesis import Phase, event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conformance.stateful import run_as_test
from spec_tests.radix.model import Model, Tree
from spec_tests.radix.strategies import (BIG_TOKEN, POLICIES, derived_keys, namespaces, page_sizes,
                                         policy_names, slot_bases, tokens_alphabet)

ERRORS = (TypeError, ValueError, KeyError)


@dataclass
class Handle:
    a: object          # the implementation's handle
    b: object          # the reference's
    ns: object
    path: tuple        # the matched tokens
    end_slot: object   # the slot of the path's last token when it was returned (None: empty match)
    node: object = None  # the tree model's node (None: empty match)


def sizes(cache) -> tuple:
    return cache.total, cache.evictable, cache.protected


# (method, args built from (tokens of a cached key, a foreign handle of the implementation, of the
# reference) -> (args for the implementation, args for the reference), error, words)
def _same(*args):
    return lambda key, fa, fb: (args, args)


BAD_CALLS = [
    ("match_prefix", _same("0 1 2"), TypeError, ("tokens",)),
    ("match_prefix", _same([0, 1.0]), TypeError, ("tokens",)),
    ("match_prefix", _same([0, -1]), ValueError, ("tokens",)),
    ("match_prefix", _same([0, BIG_TOKEN + 1]), ValueError, ("tokens",)),
    ("match_prefix", _same([0, 1], [1]), TypeError, ("extra_key",)),
    ("match_prefix", _same([0, 1], 1.5), TypeError, ("extra_key",)),
    ("insert", _same([0, 1], [5]), ValueError, ("slots",)),
    ("insert", _same([0, 1], [5, -1]), ValueError, ("slots",)),
    ("insert", _same([0], [2**63]), ValueError, ("slots",)),
    ("insert", _same([0], ["5"]), TypeError, ("slots",)),
    ("insert", _same([0], 5), TypeError, ("slots",)),
    ("insert", _same([0, 0.5], [1, 2]), TypeError, ("tokens",)),
    ("insert", _same([0, 2**32], [1, 2]), ValueError, ("tokens",)),
    ("insert", _same([0], [1], {}), TypeError, ("extra_key",)),
    ("evict", _same(-1), ValueError, ("n_tokens",)),
    ("evict", _same(1.0), TypeError, ("n_tokens",)),
    ("evict", _same(None), TypeError, ("n_tokens",)),
    ("lock", _same(5), TypeError, ("handle",)),
    ("lock", _same(None), TypeError, ("handle",)),
    ("unlock", _same("x"), TypeError, ("handle",)),
    ("lock", lambda key, fa, fb: ((fa,), (fb,)), ValueError, ("handle",)),
    ("unlock", lambda key, fa, fb: ((fa,), (fb,)), ValueError, ("handle",)),
    # a valid key with a bad extra key / slots: the walk must not start (no split, no clock tick)
    ("match_prefix", lambda key, fa, fb: ((key, ["x"]),) * 2, TypeError, ("extra_key",)),
    ("insert", lambda key, fa, fb: ((key, [0] * (len(key) + 1)),) * 2, ValueError, ("slots",)),
]


class RadixMachine(RuleBasedStateMachine):
    impl = None
    ref = None
    exact = False   # token-exact: compare every result with the reference's (a choice test)

    @initialize(page=page_sizes, policy=policy_names, base=slot_bases, data=st.data())
    def start(self, page, policy, base, data):
        new = POLICIES[policy]
        A, B = self.impl.get("RadixCache"), self.ref.get("RadixCache")
        if policy == "default" and page == 1:
            self.a, self.b = A(), B()
        elif policy == "default":
            self.a, self.b = A(page_size=page), B(page_size=page)
        else:
            self.a, self.b = A(page, new()), B(page, new())
        self.page, self.policy = page, policy
        self.model = Model(page)
        self.tree = Tree(page)
        self.now = 0   # the tree model's clock: one tick per accepted insert / match_prefix
        self.slots = itertools.count(base)
        self.seen: list = [[]]
        self.namespace_of: dict = {}   # tuple(key) -> the extra key it was last inserted under
        self.handles: list[Handle] = []
        # A second pair of caches, for handles that belong to another cache.
        other_a, other_b = A(), B()
        other_a.insert([0, 1], [0, 1])
        other_b.insert([0, 1], [0, 1])
        self.foreign = (other_a.match_prefix([0, 1])[2], other_b.match_prefix([0, 1])[2])
        event(f"page_size {page}, policy {policy}")
        self.first_inserts(data)

    def first_inserts(self, data):
        """Start with a few cached keys (sharing prefixes)."""
        first = data.draw(st.lists(tokens_alphabet, min_size=self.page, max_size=4 * self.page), label="first key")
        self.do_insert(first, None)
        self.do_insert(*self.key(data, "second key"))
        self.do_insert(*self.key(data, "third key"))

    # -- helpers -------------------------------------------------------------------------------
    def call(self, op, args_a, args_b=None, expect=None, words=(), law=None):
        """``op`` on both caches. Returns (impl result, reference result), or None when both
        rejected the call (the implementation with the reference's error type, naming ``words``,
        and changing no size). ``law``: the error class the law requires (the model's verdict,
        None: the call must be accepted); out of token-exact mode the reference is not asked
        (its state may legitimately differ), and its result is None."""
        args_b = args_a if args_b is None else args_b
        shown = f"{op}{args_a!r}"
        before = sizes(self.a)
        if self.exact:
            try:
                want, want_exc = getattr(self.b, op)(*args_b), None
            except ERRORS as exc:
                want, want_exc = None, exc
        else:
            want, want_exc = None, (law or expect)("the documented error") if (law or expect) else None
        if expect is not None:
            assert isinstance(want_exc, expect), f"the reference accepted {shown}"  # the test's own check
        try:
            got = getattr(self.a, op)(*args_a)
        except ERRORS as exc:
            if want_exc is None:
                raise AssertionError(f"{shown} raised {type(exc).__name__}: {exc}; the reference "
                                     f"accepts it and returns {want!r}") from exc
            assert isinstance(exc, type(want_exc)), (
                f"{shown} raised {type(exc).__name__}: {exc}; expected {type(want_exc).__name__} "
                f"(the reference says: {want_exc})")
            missing = [w for w in words if w.lower() not in str(exc).lower()]
            assert not missing, f"{shown}: the {type(exc).__name__} message should name {missing}; it says: {exc}"
            assert sizes(self.a) == before, (f"{shown} raised {type(exc).__name__} but changed the sizes "
                                             f"(total, evictable, protected) from {before} to {sizes(self.a)}")
            event(f"{op}: rejected ({type(exc).__name__})")
            return None
        if want_exc is not None:
            raise AssertionError(f"{shown} returned {got!r}; expected {type(want_exc).__name__} "
                                 f"like the reference: {want_exc}")
        if law is not None:
            raise AssertionError(f"{shown} returned {got!r}; expected {law.__name__}")
        return got, want

    def locked(self) -> str:
        """The locked handles: (extra_key, path) -> locks held."""
        return repr({k: n for k, n in self.model.held.items() if n > 0}) or "none"

    def key(self, data, label="tokens"):
        """(tokens, extra_key): derived from an earlier key, under its extra key 3 times in 4."""
        base, tokens = data.draw(derived_keys(self.seen, self.page), label=label)
        if tuple(base) in self.namespace_of and data.draw(st.integers(0, 3), label="3 = any extra_key"):
            return tokens, self.namespace_of[tuple(base)]
        return tokens, data.draw(namespaces, label="extra_key")

    def remember(self, tokens, ns):
        self.namespace_of[tuple(tokens)] = ns
        if tokens and tokens not in self.seen:
            self.seen.append(tokens)
            del self.seen[1:-24]   # keep the 24 latest (and the empty key)

    def args(self, tokens, ns, *rest):
        """Omit extra_key when it is None half the time: the default must mean None."""
        return (tokens, *rest) if ns is None and len(tokens) % 2 else (tokens, *rest, ns)

    # -- rules ---------------------------------------------------------------------------------
    def do_insert(self, tokens, ns):
        slots = [next(self.slots) for _ in tokens]
        got, want = self.call("insert", self.args(tokens, ns, slots))
        expected = self.model.insert(ns, tokens, slots)
        self.now += 1
        self.tree.insert(ns, tokens, slots, self.now)
        where = f"insert({tokens}, extra_key={ns!r}) (page_size {self.page})"
        assert not self.exact or want == expected, f"test bug: the reference's {where} returned {want}, the model {expected}"
        assert got == expected, (f"{where} returned {got}; {expected} tokens of it were cached "
                                 "(it must return how much was already present)")
        self.remember(tokens, ns)
        event("insert: all new" if expected == 0 else "insert: partly cached")

    @rule(data=st.data())
    def insert(self, data):
        self.do_insert(*self.key(data))

    @precondition(lambda self: len(self.seen) > 1)
    @rule(data=st.data())
    def insert_continuation(self, data):
        """A conversation goes on: an earlier key and a few more pages."""
        base = data.draw(st.sampled_from(self.seen[1:]), label="earlier key")
        more = data.draw(st.lists(tokens_alphabet, min_size=1, max_size=2 * self.page + 1), label="more")
        self.do_insert(base + more, self.namespace_of.get(tuple(base)))

    def do_match(self, tokens, ns) -> Handle:
        got, want = self.call("match_prefix", self.args(tokens, ns))
        length, slots, handle = got
        slots = [int(s) for s in slots]
        n, expected = self.model.match(ns, tokens)
        self.now += 1
        _, _, node = self.tree.match(ns, tokens, self.now)
        where = f"match_prefix({tokens}, extra_key={ns!r}) (page_size {self.page})"
        assert not self.exact or (want[0], list(want[1])) == (n, expected), (
            f"test bug: reference {want[:2]}, model {(n, expected)}")
        assert length == n, (f"{where} matched {length} tokens; the longest cached prefix (whole pages) "
                             f"is {n} tokens")
        assert slots == expected, f"{where} returned slots {slots}; the tokens were cached with slots {expected}"
        h = Handle(handle, want[2] if want else None, ns, tuple(tokens[:n]), expected[-1] if n else None, node)
        self.handles.append(h)
        event("match: empty" if n == 0 else ("match: whole key" if n == len(self.model.pages(tokens)) else "match: part"))
        return h

    @rule(data=st.data())
    def match(self, data):
        self.do_match(*self.key(data))

    def do_lock(self, h: Handle) -> None:
        alive = self.model.alive(h.ns, h.path, h.end_slot)
        result = self.call("lock", (h.a,), (h.b,), words=("handle",), law=None if alive else ValueError)
        if not alive:
            assert result is None, f"lock of the handle of {h.path} succeeded, but its node was evicted"
            return
        assert result is not None, "lock of a cached handle was rejected"
        if h.path:
            self.model.held[(h.ns, h.path)] = self.model.held.get((h.ns, h.path), 0) + 1
            h.node.held += 1
        event("lock")

    @precondition(lambda self: len(self.seen) > 1)
    @rule(data=st.data())
    def lock_a_prefix_then_split_or_evict(self, data):
        """The engine's pattern: match a request's prefix and lock it while the request runs; then
        another request diverges inside the locked path (a split above the handle) or memory
        runs low (evict around the locked path)."""
        base = data.draw(st.sampled_from(self.seen[1:]), label="cached key")
        ns = self.namespace_of.get(tuple(base))
        pages = len(base) // self.page
        cut = data.draw(st.integers(0, pages), label="pages of it") * self.page
        h = self.do_match(base[:cut], ns)
        self.do_lock(h)
        if data.draw(st.booleans(), label="split (else evict)"):
            at = data.draw(st.integers(0, len(h.path)), label="diverge at")
            other = list(h.path[:at]) + data.draw(st.lists(tokens_alphabet, min_size=1, max_size=self.page + 1), label="other")
            if data.draw(st.booleans(), label="insert (else match)"):
                self.do_insert(other, ns)
            else:
                self.do_match(other, ns)
        else:
            self.evict(data.draw(st.integers(0, 3 * self.page), label="n_tokens"))

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def lock(self, data):
        self.do_lock(data.draw(st.sampled_from(self.handles), label="handle"))

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def unlock(self, data):
        locked = [h for h in self.handles if self.model.held.get((h.ns, h.path), 0) > 0 and
                  self.model.alive(h.ns, h.path, h.end_slot)]
        pool = locked if locked and data.draw(st.integers(0, 4), label="4 = any handle") < 4 else self.handles
        h = data.draw(st.sampled_from(pool), label="handle")
        alive = self.model.alive(h.ns, h.path, h.end_slot)
        held = self.model.held.get((h.ns, h.path), 0) if alive else 0
        refused = h.path and (not alive or held == 0)
        result = self.call("unlock", (h.a,), (h.b,), words=("handle",), law=ValueError if refused else None)
        if h.path and not alive:
            assert result is None, f"unlock of the handle of {h.path} succeeded, but its node was evicted"
        elif h.path and held == 0:
            assert result is None, f"unlock of the handle of {h.path} succeeded, but it holds no lock"
        else:
            assert result is not None, f"unlock of the handle of {h.path}, which holds {held} locks, was rejected"
            if h.path:
                self.model.held[(h.ns, h.path)] -= 1
                h.node.held -= 1
            event("unlock")

    @precondition(lambda self: self.model.cached)
    @rule(n=st.one_of(st.integers(0, 4), st.integers(0, 40)))
    def evict_some(self, n):
        self.evict(n)

    def evict(self, n):
        protected = self.model.protected_pages()
        got, want = self.call("evict", (n,))
        freed = [int(s) for s in got]
        for s in freed:
            assert s not in self.model.where or self.model.where[s] not in protected, (
                f"evict({n}) freed slot {s} of {self.model.where[s]} (extra_key, tokens), on the path "
                f"of a locked handle; locked: {self.locked()}")
        lru = self.policy in ("default", "LRU", "Hybrid(0)")
        problem = self.tree.evict_problem(n, freed, lru)
        assert problem is None, f"evict({n}) freed slots {freed}: {problem}; locked: {self.locked()}"
        assert not self.exact or freed == list(want), (
            f"evict({n}) freed slots {freed}; the reference frees {list(want)} "
            f"(whole unprotected leaves in the policy's order: {self.policy}, the reference's clock and tie rules)")
        problem = self.model.evict(freed)
        assert problem is None, f"evict({n}) freed slots {freed}: {problem}"
        problem = self.model.closure_problem()
        assert problem is None, f"evict({n}) freed a page in the middle of a cached sequence: {problem}"
        if len(freed) < n:
            assert len(self.model.cached) == len(protected), (
                f"evict({n}) freed only {len(freed)} tokens although "
                f"{(len(self.model.cached) - len(protected)) * self.page} unprotected tokens remain cached")
        event("evict: nothing" if not freed else ("evict: short" if len(freed) < n else "evict: enough"))

    @rule(data=st.data())
    def bad_call(self, data):
        op, make, error, words = data.draw(st.sampled_from(BAD_CALLS), label="bad call")
        key = list(data.draw(st.sampled_from(self.seen), label="cached key"))
        args_a, args_b = make(key, *self.foreign)
        result = self.call(op, args_a, args_b, expect=error, words=words)
        assert result is None, f"{op}{args_a!r} was accepted"

    # -- invariants ----------------------------------------------------------------------------
    @invariant()
    def sizes_add_up(self):
        total, evictable, protected = sizes(self.a)
        assert (total, evictable, protected) == self.tree.sizes(), (
            f"(total, evictable, protected) = {(total, evictable, protected)}; the cached nodes and locks "
            f"make {self.tree.sizes()}; locked: {self.locked()}")
        assert evictable + protected == total, f"evictable {evictable} + protected {protected} != total {total}"
        assert total == self.model.tokens, f"total {total}; {self.model.tokens} tokens are cached"
        locked = len(self.model.protected_pages()) * self.page
        assert protected == locked, (f"protected {protected}; the paths of the locked handles hold {locked} "
                                     f"tokens; locked: {self.locked()}")
        assert total % self.page == 0 and protected % self.page == 0, (
            f"sizes {(total, evictable, protected)} are not whole pages of {self.page}")


def run_machine(impl, reference, exact: bool) -> None:
    machine = type("RadixMachineFor", (RadixMachine,), {"impl": impl, "ref": reference, "exact": exact})
    steps = 80 if settings.get_current_profile_name() == "thorough" else 40
    phases = tuple(p for p in settings().phases if p is not Phase.explain)
    run_as_test(machine, settings=settings(stateful_step_count=steps, phases=phases))


def test_state_machine(impl, reference):
    """Random valid and invalid calls against the token-level and the tree model: the law."""
    run_machine(impl, reference, exact=False)


@pytest.mark.choice("the reference's results call by call: evict's exact list (the policy's order over its clock "
                    "and tie rules), split halves keeping the node's policy record")
def test_state_machine_token_exact(impl, reference):
    """Random valid and invalid calls against the reference, result by result."""
    run_machine(impl, reference, exact=True)
