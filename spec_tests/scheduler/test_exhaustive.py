"""Bounded-exhaustive exploration of the scheduler (issue 23): every run of small instances.

A *universe* is a scheduler configuration (``UNIVERSES``) and a set of request *kinds* (a prompt
and a ``max_tokens``: prompts of 1-3 tokens, ``max_tokens`` 1-2); at most ``MAX_REQUESTS`` (3)
requests arrive, ids ``r0``, ``r1``, ``r2`` in arrival order. From every state the exploration
tries every event: a request of every kind arrives (``add_request``; kinds too long for the pool
are rejected and must change nothing), or the engine runs a step (``schedule``, the toy model of
``driver.py``, ``update``; only while requests are unfinished). So every arrival interleaving --
a request arriving before any step, between any two, while others are preempted or half
prefilled -- of every combination of kinds is run, to the end of every request.

Checked on every transition (driver.py, the law, for every implementation): the token budget,
``max_num_seqs`` and the block pool are never exceeded, the KV store holds every computed token,
running requests are scheduled first, the newest are preempted, admission is FCFS, and no request
starves (the steps with unfinished requests never exceed the tokens the added requests can need);
every finished request's tokens equal its tokens run alone (with prefix caching, where the
exploration follows the reference's steps, the implementation's run is also drained to its end
wherever the reference's has ended). Without prefix caching every step
also equals the reference's (which requests, how many tokens, computed counts, preempted,
finished, the queues, the free-block count); with prefix caching that comparison is the
choice-marked ``test_exhaustive_reference_choices`` (with block ids: which free block a step
takes, which block keeps a key computed twice), as the hits depend on the engine's choices.

Dedup: a state is keyed by what the future of the run depends on (every live request's tokens,
computed count and queue place, the free-block count, the requests still to come; with prefix
caching the keys of the free queue's blocks in order and of every held block, blocks named by
their role); each distinct state is expanded once, breadth first, until no new state is reached.
The implementation is replayed from the start for every transition (it must be deterministic).
Finished requests are not in the key (their tokens were checked when they finished), nor the
step count: the starvation bound is checked along the first path that reaches each state.

Distinct states per universe on the reference (``python -m spec_tests.scheduler.test_exhaustive``),
written into docs/scheduler.md.
"""
from __future__ import annotations

import copy
import itertools
import time
from typing import NamedTuple

import pytest
from hypothesis import settings

from spec_tests.scheduler.driver import ERRORS, Config, Run, compare

MAX_REQUESTS = 3
PLAIN_KINDS = tuple((tuple([1, 2, 0][:n]), m) for n in (1, 2, 3) for m in (1, 2))
PREFIX_KINDS = (((0,), 1), ((0, 1), 1), ((0, 1), 2), ((0, 1, 2), 1), ((0, 1, 0), 2), ((0, 0, 1), 1))

UNIVERSES = {
    # name: (config, thorough only)
    "2x1 budget 2 seqs 2": (Config(2, 1, 2, 2), False),
    "3x2 budget 3 seqs 3": (Config(3, 2, 3, 3), False),
    "3x1 budget 1 seqs 3": (Config(3, 1, 1, 3), False),
    "4x1 budget 4 seqs 2 whole prefill": (Config(4, 1, 4, 2, chunked=False), False),
    "4x1 budget 3 seqs 3 prefix": (Config(4, 1, 3, 3, prefix=True), False),
    "3x2 budget 4 seqs 2 whole prefill prefix": (Config(3, 2, 4, 2, chunked=False, prefix=True), False),
}
for nb, bs, budget, seqs, chunked, prefix in itertools.product((2, 3, 4), (1, 2), (1, 2, 3, 4), (1, 2, 3),
                                                                (True, False), (False, True)):
    cfg = Config(nb, bs, budget, seqs, chunked, prefix)
    if cfg not in [c for c, _ in UNIVERSES.values()]:
        UNIVERSES[f"{nb}x{bs} budget {budget} seqs {seqs}{'' if chunked else ' whole prefill'}"
                  f"{' prefix' if prefix else ''}"] = (cfg, True)


def kinds(cfg: Config) -> tuple:
    return PREFIX_KINDS if cfg.prefix else PLAIN_KINDS


def key(run: Run, n_added: int) -> tuple:
    """What the future of the run depends on (module docstring), from the reference's state."""
    s = run.s
    names: dict = {}

    def name(b):
        return names.setdefault(b, len(names))

    def req(rid):
        r = s.requests[rid]
        return (r.prompt, tuple(r.output), r.max_tokens, r.num_computed_tokens)

    k = (n_added, tuple(req(r) for r in s._waiting), tuple(req(r) for r in s._running),
         s.num_free_blocks, tuple(run.finished_last))
    if run.cfg.prefix:
        pool = s.pool
        held = tuple(tuple((name(b), pool.block_key.get(b)) for b in s.requests[r].blocks) for r in s._running)
        free = tuple(pool.block_key.get(b) for b in pool.free_queue)
        k += (held, free)
    return k


class Explored(NamedTuple):
    states: int
    per_depth: list
    transitions: int
    seconds: float


def apply(run: Run, event, n_added: int):
    """Play one event on a run: ("add", kind) or ("step",). Returns what to compare."""
    if event[0] == "add":
        prompt, max_tokens = event[1]
        before = run.state()
        out = run.add(f"r{n_added}", list(prompt), max_tokens)
        if out[0] == "err" and run.state() != before:
            run.fail(f"a rejected add_request changed the queues: {before} -> {run.state()}")
        return out, run.state()
    return run.step(), run.state()


def explore(impl, reference, cfg: Config, choice: bool = False) -> Explored:
    """Breadth first over every reachable state of the universe (module docstring)."""
    cls, ref_cls = impl.get("Scheduler"), reference.get("Scheduler")
    differential = choice or not cfg.prefix
    t0, transitions = time.perf_counter(), 0

    def replay(path, book):
        """The implementation after ``path``, replayed with two calls a step (the recorded
        sampled tokens), with the checked run's bookkeeping ``book`` taken over."""
        sched = cfg.make(cls)
        added = 0
        for event in path:
            if event[0] == "add":
                try:
                    sched.add_request(f"r{added}", list(event[1][0]), event[1][1])
                    added += 1
                except ERRORS:
                    pass
            else:
                try:
                    sched.update(sched.schedule(), *event[1])
                except ERRORS as exc:
                    raise AssertionError(
                        f"replaying the same calls gave another result ({type(exc).__name__}: {exc}); "
                        "the implementation must be deterministic") from exc
        run = Run.__new__(Run)
        run.__dict__.update(copy.deepcopy(book))
        run.s = sched
        return run

    def book_of(run) -> dict:
        return {k: v for k, v in vars(run).items() if k != "s"}

    root = Run(cfg.make(ref_cls), cfg)
    frontier = [((), root, 0, book_of(Run(None, cfg)))]
    seen = {key(root, 0)}
    per_depth = [1]
    while frontier:
        nxt = []
        for path, ref, added, book in frontier:
            events = [("add", k) for k in kinds(cfg)] if added < MAX_REQUESTS else []
            if ref.s.has_unfinished_requests():
                events.append(("step",))
            for event in events:
                r = copy.deepcopy(ref)
                want, want_state = apply(r, event, added)
                a = replay(path, book)
                got, got_state = apply(a, event, added)
                transitions += 1
                done = event if event[0] == "add" else ("step", a.last_update)
                after = book_of(a)
                if differential:
                    try:
                        if event[0] == "add":
                            assert got == want and got_state == want_state, (
                                f"add_request -> {got}, queues {got_state}; the reference: {want}, {want_state}")
                        else:
                            compare(got, want, got_state, want_state, "this step", blocks=choice)
                    except AssertionError as exc:
                        a.fail(str(exc))
                elif not r.s.has_unfinished_requests():
                    # the law alone (prefix caching: the hits are the engine's), where the
                    # reference's run has ended: the implementation's must end too, within the
                    # starvation bound, each step lawful
                    after = copy.deepcopy(after)
                    for _ in range(a.work + 1):
                        if not a.s.has_unfinished_requests():
                            break
                        a.step()
                    if a.s.has_unfinished_requests():
                        a.fail(f"requests left unfinished after {a.work + 1} more steps")
                n = added + (event[0] == "add" and want[0] == "ok")
                k = key(r, n)
                if k not in seen:
                    seen.add(k)
                    nxt.append((path + (done,), r, n, after))
        frontier = nxt
        per_depth.append(len(nxt))
    return Explored(len(seen), per_depth[:-1], transitions, time.perf_counter() - t0)


def _universes(prefix_only: bool = False) -> list:
    thorough = settings.get_current_profile_name().startswith("thorough")
    return [name for name, (cfg, only) in UNIVERSES.items()
            if (thorough or not only) and (cfg.prefix or not prefix_only)]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", _universes())
def test_exhaustive(impl, reference, name):
    """Every arrival interleaving of up to three small requests, every step to the end: the law of
    every step, and the reference's steps where the law fixes them (module docstring)."""
    explore(impl, reference, UNIVERSES[name][0])


@pytest.mark.timeout(1800)
@pytest.mark.choice("block ids: a FIFO free queue 0..num_blocks-1, freed blocks to its tail last block first; "
                    "the first block cached keeps its key")
@pytest.mark.parametrize("name", _universes(prefix_only=True))
def test_exhaustive_reference_choices(impl, reference, name):
    """The prefix-caching universes, every step equal to the reference's, block ids included."""
    explore(impl, reference, UNIVERSES[name][0], choice=True)


if __name__ == "__main__":
    import sys

    from conformance.loader import load_implementation
    ref = load_implementation("reference").of("scheduler")
    every = "--all" in sys.argv
    for name, (cfg, only) in UNIVERSES.items():
        if only and not every:
            continue
        r = explore(ref, ref, cfg)
        print(f"{name:45s} states {r.states:6d}  per depth {r.per_depth}  transitions {r.transitions}  "
              f"{r.seconds:.1f} s")
