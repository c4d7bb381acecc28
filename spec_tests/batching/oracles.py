"""Oracles of batching that share nothing with reference/batching.py: the schedules as event
recurrences (list scheduling), the idle fraction by enumeration and by truncated series, and a
checker of a timeline's invariants."""
from __future__ import annotations

import heapq
import itertools
from fractions import Fraction


def continuous_starts(arrivals, lengths, max_batch, order):
    """Start steps of continuous batching by Graham's list scheduling: requests in ``order`` (FCFS),
    each starting at the earliest step >= its arrival, >= the previous request's start (FCFS: no
    overtaking), and >= the earliest time one of ``max_batch`` slots is free."""
    free = [0] * max_batch                    # a min-heap of the slots' free times
    starts, last = {}, 0
    for i in order:
        slot = heapq.heappop(free)
        s = max(arrivals[i], last, slot)
        starts[i] = last = s
        heapq.heappush(free, s + lengths[i])
    return [starts[i] for i in range(len(arrivals))]


def static_batches(arrivals, lengths, batch_size, order):
    """(members, begin, end) of each static batch: consecutive groups of ``order``; a batch begins
    when the previous has ended and all its members have arrived, and ends max L later."""
    out, end = [], 0
    for b in range(0, len(order), batch_size):
        members = order[b:b + batch_size]
        begin = max([end] + [arrivals[i] for i in members])
        end = begin + max(lengths[i] for i in members)
        out.append((tuple(members), begin, end))
    return out


def fcfs(arrivals):
    return sorted(range(len(arrivals)), key=lambda i: (arrivals[i], i))


def spans(timeline, n):
    """For each request, the sorted steps at which it holds a slot."""
    steps = [[] for _ in range(n)]
    for t, step in enumerate(timeline):
        for i in step:
            steps[i].append(t)
    return steps


def check_continuous(timeline, arrivals, lengths, max_batch) -> list[int]:
    """Assert the law of a continuous-batching timeline; return the start steps. Law: each step
    runs at most max_batch distinct requests; request i runs exactly lengths[i] consecutive steps
    from a start >= its arrival; no slot is idle while an arrived request waits (so none starves);
    FCFS: a request that arrived strictly earlier never starts later; the run ends with the last
    request (no trailing empty step) and is as long as list scheduling in the order the starts
    reveal."""
    n = len(arrivals)
    for t, step in enumerate(timeline):
        assert len(step) <= max_batch, f"step {t} runs {len(step)} requests > max_batch={max_batch}: {step}"
        assert len(set(step)) == len(step), f"step {t} runs a request twice: {step}"
        assert all(0 <= i < n for i in step), f"step {t} names a request outside 0..{n - 1}: {step}"
    steps = spans(timeline, n)
    starts = []
    for i, s in enumerate(steps):
        assert len(s) == lengths[i], f"request {i} runs {len(s)} steps, not its {lengths[i]} tokens"
        assert s == list(range(s[0], s[0] + lengths[i])), f"request {i} does not run consecutive steps: {s}"
        assert s[0] >= arrivals[i], f"request {i} starts at step {s[0]} before its arrival {arrivals[i]}"
        starts.append(s[0])
    for t, step in enumerate(timeline):
        waiting = [i for i in range(n) if arrivals[i] <= t < starts[i]]
        assert not waiting or len(step) == max_batch, (
            f"step {t}: requests {waiting} have arrived and wait while only {len(step)} of {max_batch} slots run")
    for i, j in itertools.permutations(range(n), 2):
        assert not (arrivals[i] < arrivals[j] and starts[i] > starts[j]), (
            f"request {i} (arrival {arrivals[i]}) starts at {starts[i]} after request {j} "
            f"(arrival {arrivals[j]}) at {starts[j]}: not first-come-first-served")
    assert len(timeline) == max(s + l for s, l in zip(starts, lengths)), (
        f"{len(timeline)} steps, but the last request finishes at {max(s + l for s, l in zip(starts, lengths))}")
    order = sorted(range(n), key=lambda i: (starts[i], arrivals[i], i))
    assert continuous_starts(arrivals, lengths, max_batch, order) == starts, (
        f"starts {starts} differ from list scheduling in the order {order}: "
        f"{continuous_starts(arrivals, lengths, max_batch, order)}")
    return starts


def expected_max_by_enumeration(n: int, b: int) -> Fraction:
    """E[max of b iid uniform {1..n}] by enumerating all n^b tuples, exact."""
    total = sum(max(t) for t in itertools.product(range(1, n + 1), repeat=b))
    return Fraction(total, n ** b)


def geometric_expected_max_partial(p: Fraction, b: int, terms: int) -> tuple[Fraction, Fraction]:
    """(partial sum, tail bound) of E[max] = sum_{k>=0} P(max > k) = sum_k 1 - (1 - q^k)^b for b iid
    geometric(p) lengths on {1, 2, ...}: the first ``terms`` terms, and a bound on the rest
    (1 - (1 - x)^b <= b x, so the tail is <= b q^terms / (1 - q))."""
    q = 1 - p
    partial = sum(1 - (1 - q ** k) ** b for k in range(terms))
    tail = b * q ** terms / (1 - q) if q < 1 else Fraction(0)
    return partial, tail
