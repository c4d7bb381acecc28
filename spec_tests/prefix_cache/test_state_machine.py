"""The prefix cache as a state machine (course 03.09-03.11), in two tests:

``test_state_machine`` (the law): Hypothesis drives the implementation beside ``oracle.LawModel``
-- allocate, mark_computed, free, lookup, rejected calls -- and checks every result, error type and
observable after every step against the law, which learns from the implementation which block
keeps a key computed twice (a choice) and fixes everything else (see LawModel's docstring).

``test_state_machine_reference_choices`` (choice-marked: the first block cached keeps its key):
Hypothesis drives the implementation under test and the reference side by side -- allocate
(on a pool small enough that allocation evicts, or fails with "out of blocks"), mark_computed,
free, lookup, and invalid calls -- and after every step checks

- the same results and the same errors (type) as the reference, and the same observable state:
  free count, free-queue order, block tables, ref counts, which blocks are cached, stats. Block
  ids are compared as they are: the contract pins which block an allocation takes (the free
  queue's head; the queue starts as 0 .. num_blocks - 1), as vLLM v1 does;
- ref counts == the number of live block tables holding the block; free + used == total, and the
  free queue holds exactly the blocks of ref count 0;
- a model of what each block holds (the (extra key, prefix) it ends, set when mark_computed caches
  it and dropped when the block is handed out as a miss): a block is cached exactly when the model
  says so -- so no block is free-and-reused with its hash kept, and no partial block is cached;
- every hit is a block whose model content is the prompt's own prefix, and the hits are exactly
  the longest run of resident prefixes (brute force over the model), capped at len - 1 tokens;
  they never exceed the longest block-aligned prefix shared with any sequence ever computed
  under the same extra key (brute force over every cached sequence);
- allocation fails exactly when the misses plus the revived (free) hits exceed the free blocks.
"""
from __future__ import annotations

from hypothesis import Phase, event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conformance.stateful import run_as_test
import pytest

from spec_tests.prefix_cache.oracle import LawModel, call, hit_bound, observe_all, resident_hits
from spec_tests.prefix_cache.strategies import EXTRA_KEYS, prompts

ERRORS = (TypeError, ValueError, KeyError)
SEQS = ("s0", "s1", "s2", 3)
seqs = st.sampled_from(SEQS)


def observe(c, num_blocks: int, live) -> tuple:
    return (c.num_free_blocks, c.free_queue_order(), {s: c.block_table(s) for s in live},
            [c.ref_count(b) for b in range(num_blocks)], [c.is_cached(b) for b in range(num_blocks)],
            c.stats())


class PrefixCacheMachine(RuleBasedStateMachine):
    impl = None
    ref = None

    @initialize(num_blocks=st.integers(2, 10), block_size=st.integers(1, 3))
    def setup(self, num_blocks, block_size):
        self.nb, self.bs = num_blocks, block_size
        self.a = self.impl.get("PrefixCache")(num_blocks, block_size)
        self.r = self.ref.get("PrefixCache")(num_blocks, block_size)
        self.live: dict = {}       # seq -> (tokens, extra_key)
        self.resident: dict = {}   # block -> (extra_key, prefix tuple) it holds, cached
        self.ever: list = []       # (tokens, extra_key, n computed) of every mark_computed

    def both(self, op: str, *args):
        """``op`` on both; returns (True, result) or (False, error type), both sides agreeing."""
        out = []
        for c in (self.a, self.r):
            try:
                out.append((True, getattr(c, op)(*args)))
            except ERRORS as exc:
                out.append((False, type(exc)))
        assert out[0] == out[1], f"{op}{args}: implementation {out[0]}, reference {out[1]}"
        return out[1]

    def key(self, tokens, extra_key, i: int):
        return (extra_key, tuple(tokens[:(i + 1) * self.bs]))

    @rule(seq=seqs, tokens=prompts(max_tail=10), extra_key=EXTRA_KEYS)
    def allocate(self, seq, tokens, extra_key):
        expected_hits = resident_hits(tokens, extra_key, self.resident, self.bs)
        need = -(-len(tokens) // self.bs) - len(expected_hits)
        revived = sum(1 for b in expected_hits if self.r.ref_count(b) == 0)
        fits = need + revived <= self.r.num_free_blocks
        ok, got = self.both("allocate", seq, tokens, extra_key)
        if seq in self.live:
            assert not ok, f"allocate of live seq {seq!r} succeeded"
            return
        assert ok == fits, (f"allocate({tokens}, {extra_key!r}): {'succeeded' if ok else 'failed'} with "
                            f"{need} misses + {revived} revived hits and {self.r.num_free_blocks} free")
        if not ok:
            event("out of blocks")
            return
        assert got == len(expected_hits) * self.bs <= len(tokens) - 1
        assert got // self.bs <= hit_bound(tokens, extra_key, self.ever, self.bs)
        table = self.r.block_table(seq)
        assert table[:len(expected_hits)] == expected_hits
        for b in table[len(expected_hits):]:
            if self.resident.pop(b, None) is not None:
                event("evicted a cached block")
        if expected_hits:
            event("hit")
        self.live[seq] = (tokens, extra_key)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def mark_computed(self, data):
        seq = data.draw(st.sampled_from(sorted(self.live, key=str)))
        tokens, extra_key = self.live[seq]
        n = data.draw(st.integers(0, len(tokens)))
        ok, _ = self.both("mark_computed", seq, n)
        assert ok
        table = self.r.block_table(seq)
        held = set(self.resident.values())
        for i in range(n // self.bs):
            k = self.key(tokens, extra_key, i)
            if table[i] not in self.resident and k not in held:
                self.resident[table[i]] = k
                held.add(k)
        self.ever.append((tokens, extra_key, n))

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data):
        seq = data.draw(st.sampled_from(sorted(self.live, key=str)))
        ok, _ = self.both("free", seq)
        assert ok
        del self.live[seq]

    @rule(tokens=prompts(max_tail=10), extra_key=EXTRA_KEYS)
    def lookup(self, tokens, extra_key):
        ok, got = self.both("lookup", tokens, extra_key)
        assert ok and got == resident_hits(tokens, extra_key, self.resident, self.bs)
        assert len(got) <= hit_bound(tokens, extra_key, self.ever, self.bs)

    @rule(seq=seqs, n=st.integers(-1, 3))
    def bad_call(self, seq, n):
        """free / mark_computed of a seq that is not live, or a negative n_tokens: both raise,
        nothing changes."""
        before = observe(self.r, self.nb, self.live)
        if seq in self.live:
            ok, _ = self.both("mark_computed", seq, -1 - abs(n))
        else:
            ok, _ = self.both("free" if n % 2 else "mark_computed", *((seq,) if n % 2 else (seq, 0)))
        assert not ok
        assert observe(self.a, self.nb, self.live) == before == observe(self.r, self.nb, self.live)

    @invariant()
    def same_state_and_invariants(self):
        if not hasattr(self, "r"):
            return
        got = observe(self.a, self.nb, self.live)
        want = observe(self.r, self.nb, self.live)
        assert got == want, f"state differs:\n  implementation {got}\n  reference      {want}"
        free, queue, tables, refs, is_cached, _ = got
        holders = [0] * self.nb
        for t in tables.values():
            for b in t:
                holders[b] += 1
        assert refs == holders, f"ref counts {refs} != block-table holders {holders}"
        assert free + sum(1 for r in refs if r) == self.nb
        assert sorted(queue) == [b for b in range(self.nb) if refs[b] == 0] and len(queue) == free
        assert is_cached == [b in self.resident for b in range(self.nb)], (
            f"cached blocks {is_cached} != the model's resident blocks {sorted(self.resident)}")


@pytest.mark.choice("the first block cached keeps its key; a duplicate computation stays uncached")
def test_state_machine_reference_choices(impl, reference):
    """Differential state machine against the reference, with a brute-force model (module doc)."""
    machine = type("PrefixCacheMachineFor", (PrefixCacheMachine,), {"impl": impl, "ref": reference})
    steps = 80 if settings.get_current_profile_name() == "thorough" else 40
    phases = tuple(p for p in settings().phases if p is not Phase.explain)
    run_as_test(machine, settings=settings(stateful_step_count=steps, phases=phases))


class PrefixCacheLawMachine(RuleBasedStateMachine):
    """The implementation beside ``LawModel``: every call's result and every observable checked
    against the law after every step (module docstring)."""
    impl = None

    @initialize(num_blocks=st.integers(2, 10), block_size=st.integers(1, 3))
    def setup(self, num_blocks, block_size):
        self.nb = num_blocks
        self.c = self.impl.get("PrefixCache")(num_blocks, block_size)
        self.m = LawModel(num_blocks, block_size)

    def do(self, op: str, *args):
        out = call(self.c, op, args)
        self.m.step(op, args, out, observe_all(self.c, self.nb, SEQS))
        return out

    @rule(seq=seqs, tokens=prompts(max_tail=10), extra_key=EXTRA_KEYS)
    def allocate(self, seq, tokens, extra_key):
        ok, _ = self.do("allocate", seq, tokens, extra_key)
        event(f"allocate: {ok}")

    @rule(seq=seqs, data=st.data())
    def mark_computed(self, seq, data):
        n = len(self.m.prompts[seq][0]) if seq in self.m.prompts else 2
        self.do("mark_computed", seq, data.draw(st.integers(0, n + 1), label="n_tokens"))

    @rule(seq=seqs)
    def free(self, seq):
        self.do("free", seq)

    @rule(tokens=prompts(max_tail=10), extra_key=EXTRA_KEYS)
    def lookup(self, tokens, extra_key):
        self.do("lookup", tokens, extra_key)


def test_state_machine(impl):
    """The law, step by step, for any engine's choice of which block keeps a key (module doc)."""
    machine = type("PrefixCacheLawMachineFor", (PrefixCacheLawMachine,), {"impl": impl})
    steps = 80 if settings.get_current_profile_name() == "thorough" else 40
    phases = tuple(p for p in settings().phases if p is not Phase.explain)
    run_as_test(machine, settings=settings(stateful_step_count=steps, phases=phases))
