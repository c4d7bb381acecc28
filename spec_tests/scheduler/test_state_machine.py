"""The scheduler as a state machine (course 04.04), driven like an engine by the toy engine of
``driver.py``: Hypothesis adds requests (valid ones that share prefixes, duplicates, ones longer
than the pool) and runs steps (schedule, the toy model, update with stops) on pools small enough
that requests preempt each other, and after every step checks

- the law of the step (driver.py's docstring): budgets, block counts and sharing, the KV store
  holding every computed token, sampling exactly at full length, running first, preempting the
  newest, FCFS admission, finishing, no starvation, and every finished request's tokens equal to
  its tokens run alone;
- without prefix caching, the same step as the reference: the same requests, token counts,
  computed counts, token ids, sampling, preempted and finished lists, and the same queues and
  free-block count after it (block ids are compared up to the law above: which free block a
  step takes is the engine's choice);
- ``add_request`` accepts or rejects as the contract says (a duplicate live id, a request longer
  than the pool or -- without chunked prefill -- than the token budget), and a rejected call
  changes nothing.

``test_state_machine_reference_choices`` (choice-marked) compares every step with the reference
with prefix caching on and off, block ids included: the free queue's order (which block a step
takes, and so which cached block is evicted) and which block keeps a key computed twice.
"""
from __future__ import annotations

import pytest
from hypothesis import Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from conformance.stateful import run_as_test
from spec_tests.scheduler.driver import Config, Run, blocks_for, compare

IDS = ("r0", "r1", "r2", "r3", 4, 5)
BASE = (0, 1, 2, 0, 1, 2, 1, 0)


@st.composite
def prompts(draw):
    """Prompts that share prefixes (a prefix of BASE, then a short tail)."""
    head = draw(st.integers(0, 5))
    tail = draw(st.lists(st.integers(0, 2), min_size=0 if head else 1, max_size=2))
    return list(BASE[:head]) + tail


def add_error(cfg: Config, live, rid, prompt, max_tokens):
    """The error ``add_request`` must raise by the contract, or None."""
    if rid in live:
        return ValueError
    longest = len(prompt) + max_tokens - 1
    if blocks_for(longest, cfg.block_size) > cfg.num_blocks:
        return ValueError
    if not cfg.chunked and longest > cfg.max_num_batched_tokens:
        return ValueError
    return None


class SchedulerMachine(RuleBasedStateMachine):
    impl = None
    ref = None
    choice = False   # compare block ids with the reference, prefix caching included

    @initialize(num_blocks=st.integers(1, 8), block_size=st.integers(1, 3), budget=st.integers(1, 8),
                max_num_seqs=st.integers(1, 4), chunked=st.booleans(), prefix=st.booleans())
    def setup(self, num_blocks, block_size, budget, max_num_seqs, chunked, prefix):
        self.cfg = Config(num_blocks, block_size, budget, max_num_seqs, chunked, prefix)
        self.a = Run(self.cfg.make(self.impl.get("Scheduler")), self.cfg)
        # the reference runs beside it where the law fixes every step (no prefix caching: which
        # block keeps a key computed twice is a choice, and it decides later hits) or for choices
        self.differential = self.choice or not prefix
        self.b = Run(self.cfg.make(self.ref.get("Scheduler")), self.cfg, check=False) if self.differential else None
        self.steps = 0
        self.fresh = 0

    @rule(rid=st.sampled_from(IDS), prompt=prompts(), max_tokens=st.integers(1, 4))
    def add(self, rid, prompt, max_tokens):
        """A request under an id of a small set (so duplicates of live ids occur)."""
        self._add(rid, prompt, max_tokens)

    @rule(requests=st.lists(st.tuples(prompts(), st.integers(1, 4)), min_size=1, max_size=3))
    def add_fresh(self, requests):
        """Requests under new ids, several at once (so they compete for blocks and preempt)."""
        for prompt, max_tokens in requests:
            self.fresh += 1
            self._add(f"q{self.fresh}", prompt, max_tokens)

    def _add(self, rid, prompt, max_tokens):
        before = self.a.state()
        expected = add_error(self.cfg, self.a.live, rid, prompt, max_tokens)
        got = self.a.add(rid, prompt, max_tokens)
        where = f"add_request({rid!r}, {prompt!r}, {max_tokens})"
        if expected is None and got[0] == "err":
            self.a.fail(f"{where} raised {got[1].__name__}; the request is valid")
        if expected is not None and (got[0] == "ok" or not issubclass(got[1], expected)):
            self.a.fail(f"{where} -> {'accepted' if got[0] == 'ok' else got[1].__name__}; expected "
                        f"{expected.__name__} (a duplicate live id, or a request longer than the pool"
                        f"{'' if self.cfg.chunked else ' or the token budget'})")
        if got[0] == "err" and self.a.state() != before:
            self.a.fail(f"the rejected {where} changed the queues: {before} -> {self.a.state()}")
        if self.b is not None:
            self.b.add(rid, prompt, max_tokens)

    @rule()
    def step(self):
        got = self.a.step()
        self.steps += 1
        if self.b is not None:
            want = self.b.step()
            try:
                compare(got, want, self.a.state(), self.b.state(), f"step {self.steps}", blocks=self.choice)
            except AssertionError as exc:
                self.a.fail(str(exc))

    @rule()
    def drain(self):
        """Steps until nothing is left (the law's bound on steps ends it; a hang is a starvation)."""
        for _ in range(self.a.work + 2):
            if not self.a.s.has_unfinished_requests():
                break
            self.step()

    @invariant()
    def same_queues(self):
        if getattr(self, "b", None) is not None:
            assert self.a.state() == self.b.state(), (
                f"(waiting, running, num_free_blocks, has_unfinished) = {self.a.state()}; "
                f"the reference: {self.b.state()}")


def run_machine(machine) -> None:
    steps = 60 if settings.get_current_profile_name() == "thorough" else 30
    phases = tuple(p for p in settings().phases if p is not Phase.explain)
    run_as_test(machine, settings=settings(stateful_step_count=steps, phases=phases, report_multiple_bugs=False))


def test_state_machine(impl, reference):
    """Random requests and steps: the law of every step, and the reference's steps where the law
    fixes them (module docstring)."""
    run_machine(type("SchedulerMachineFor", (SchedulerMachine,), {"impl": impl, "ref": reference}))


@pytest.mark.choice("block ids: a FIFO free queue 0..num_blocks-1, freed blocks to its tail last block first; "
                    "the first block cached keeps its key")
def test_state_machine_reference_choices(impl, reference):
    """The same machine, every step equal to the reference's, block ids and prefix hits included."""
    run_machine(type("SchedulerChoicesFor", (SchedulerMachine,), {"impl": impl, "ref": reference, "choice": True}))
