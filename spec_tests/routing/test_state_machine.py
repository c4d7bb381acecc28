"""The router as a state machine (course 06.07, 07.02-07.03).

Hypothesis drives the implementation's ``Router`` and the reference's side by side with the same
random calls -- ``route`` of fresh prompts, of continuations of earlier prompts (a conversation's
next turn) and of repeats, with sessions; ``complete`` of a request in flight; and rejected calls
(a request id already in flight, one not in flight) -- over 1 to 4 replicas, every policy, block
sizes 1 and 2, capacities None and 0 to 8 tokens per replica, load caps None and 0 to 2. After
every step it checks

- the law, by brute force over the replicas (spec_tests/routing/model.py, never the reference's
  choice): round-robin's replica is the call number mod the replicas (rejected calls not
  counted); least-loaded's has the smallest load, ties to the lowest index; a session stays on its
  replica while the load cap allows it, a new or over-cap one goes least-loaded; cache-aware's
  replica is one the load cap allows with the longest cached prefix among those (the cached prefix
  computed from the prompts routed to each replica; unbounded caches only), ties to the smaller
  load then the lowest index; the tokens served from cache are that replica's cached prefix
  (unbounded caches);
- every observable equals the reference's: the replica returned, ``loads``, ``hit_tokens``,
  ``prompt_tokens``, ``requests``, ``sessions`` (bounded caches included, where eviction decides);
- a rejected call changes nothing (the observables, and the round-robin turn, seen at the next
  route).
"""
from __future__ import annotations

from hypothesis import Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conformance.stateful import run_as_test
from reference.routing import POLICIES
from spec_tests.routing.model import Model

OBSERVABLES = ("loads", "hit_tokens", "prompt_tokens", "requests", "sessions")
SESSIONS = st.sampled_from([None, 0, "a", 7])


def observe(router) -> dict:
    return {k: (dict(getattr(router, k)) if k == "sessions" else list(getattr(router, k))) for k in OBSERVABLES}


class RouterMachine(RuleBasedStateMachine):
    impl = ref = None

    @initialize(n=st.integers(1, 4), policy=st.sampled_from(POLICIES), block=st.integers(1, 2),
                capacity=st.one_of(st.none(), st.integers(0, 8)), cap=st.sampled_from([None, 0, 1, 2]))
    def setup(self, n, policy, block, capacity, cap):
        kw = dict(block_size=block, capacity=capacity, load_cap=cap)
        self.config = f"Router({n}, {policy!r}, block_size={block}, capacity={capacity}, load_cap={cap})"
        self.a = self.impl.get("Router")(n, policy, **kw)
        self.b = self.ref.get("Router")(n, policy, **kw)
        self.model = Model(n, policy, block, cap)
        self.unbounded = capacity is None
        self.seen: list[list[int]] = []
        self.next_id = 0
        self.log: list[str] = []

    def where(self, call: str) -> str:
        return f"{self.config}, after {self.log[-6:]}: {call}"

    def do_route(self, prompt, session):
        rid = self.next_id if self.next_id % 2 else f"r{self.next_id}"   # ints and strs
        self.next_id += 1
        call = f"route({rid!r}, {prompt}, session={session!r})"
        before = list(self.a.hit_tokens)
        got = self.a.route(rid, prompt, session)
        want = self.b.route(rid, prompt, session)
        self.model.check_choice(got, prompt, session, self.where(call), bounded=not self.unbounded)
        if self.unbounded:
            hit = list(self.a.hit_tokens)[got] - before[got]
            cached = self.model.cached_prefix(got, prompt)
            assert hit == cached, (f"{self.where(call)} -> replica {got}: {hit} tokens served from cache; "
                                   f"replica {got} caches {cached} tokens of the prompt (never its last)")
        assert got == want, f"{self.where(call)} -> replica {got}; the reference routes it to {want}"
        self.model.record(rid, got, prompt, session)
        self.log.append(f"{call} -> {got}")
        if prompt not in self.seen:
            self.seen.append(prompt)
            del self.seen[:-12]

    @rule(prompt=st.lists(st.integers(0, 2), min_size=1, max_size=5), session=SESSIONS)
    def route(self, prompt, session):
        self.do_route(prompt, session)

    @precondition(lambda self: self.seen)
    @rule(data=st.data(), session=SESSIONS)
    def route_continuation(self, data, session):
        """A conversation goes on (or repeats): an earlier prompt and 0 to 3 more tokens."""
        base = data.draw(st.sampled_from(self.seen), label="earlier prompt")
        more = data.draw(st.lists(st.integers(0, 2), max_size=3), label="more")
        self.do_route(base + more, session)

    @precondition(lambda self: self.model.in_flight)
    @rule(data=st.data())
    def complete(self, data):
        rid = data.draw(st.sampled_from(sorted(self.model.in_flight, key=str)), label="request in flight")
        got, want = self.a.complete(rid), self.b.complete(rid)
        expected = self.model.complete(rid)
        assert got == expected, f"{self.where(f'complete({rid!r})')} returned {got}; the request was on replica {expected}"
        assert want == expected, f"test bug: the reference's complete returned {want}, the model {expected}"
        self.log.append(f"complete({rid!r})")

    def rejected(self, call: str, fn, args, words) -> None:
        before = observe(self.a)
        try:
            fn(*args)
        except ValueError as exc:
            assert all(w in str(exc) for w in words), f"{self.where(call)}: the ValueError should name {words}; it says: {exc}"
        except Exception as exc:
            raise AssertionError(f"{self.where(call)}: expected ValueError, got {type(exc).__name__}: {exc}") from exc
        else:
            raise AssertionError(f"{self.where(call)} was accepted; expected ValueError")
        assert observe(self.a) == before, f"{self.where(call)}: the rejected call changed the router: {before} -> {observe(self.a)}"
        self.log.append(f"{call} (rejected)")

    @precondition(lambda self: self.model.in_flight)
    @rule(data=st.data(), prompt=st.lists(st.integers(0, 2), min_size=1, max_size=3))
    def route_in_flight_id(self, data, prompt):
        rid = data.draw(st.sampled_from(sorted(self.model.in_flight, key=str)), label="request in flight")
        self.rejected(f"route({rid!r}, {prompt})", self.a.route, (rid, prompt), ("request_id",))

    @rule()
    def complete_unknown(self):
        rid = f"never{self.next_id}"
        self.rejected(f"complete({rid!r})", self.a.complete, (rid,), ("request_id",))

    @invariant()
    def same_observables(self):
        if not hasattr(self, "a"):
            return
        got, want = observe(self.a), observe(self.b)
        assert got == want, f"{self.where('observables')}: {got}; the reference: {want}"
        assert got["loads"] == self.model.loads, f"{self.where('loads')}: {got['loads']}; in flight per replica: {self.model.loads}"
        assert got["sessions"] == self.model.sessions, f"{self.where('sessions')}: {got['sessions']}; the routes made it {self.model.sessions}"


def test_state_machine(impl, reference):
    """Random routes, completions and rejected calls: the laws by brute force, every observable as the reference's."""
    machine = type("RouterMachineFor", (RouterMachine,), {"impl": impl, "ref": reference})
    steps = 60 if settings.get_current_profile_name() == "thorough" else 30
    phases = tuple(p for p in settings().phases if p is not Phase.explain)
    run_as_test(machine, settings=settings(stateful_step_count=steps, phases=phases))
