"""Bounded-exhaustive check of the schedules' bookkeeping: every pattern of up to 3 requests with
arrivals in {0, 1, 2} and lengths in {1, 2, 3}, for every limit 1..3 (819 x 3 patterns), plus 4
requests with arrivals {0, 2} and lengths {1, 3} (256 x 4). For each, the continuous timeline obeys
the law (oracles.check_continuous: capacity, consecutive runs of exactly L steps, work-conserving so
none starves, FCFS, length = the last finish = list scheduling) and holds no idle slot; the static
timeline is FCFS batches of the limit each holding its slots for its max L from when the previous
batch ended and its members arrived, with sum over batches of max L steps when all arrive at 0.
"""
from __future__ import annotations

import itertools

import pytest

from spec_tests.batching.oracles import check_continuous, static_batches


def _patterns():
    for n in (1, 2, 3):
        for arrivals in itertools.product((0, 1, 2), repeat=n):
            for lengths in itertools.product((1, 2, 3), repeat=n):
                yield list(arrivals), list(lengths), (1, 2, 3)
    for arrivals in itertools.product((0, 2), repeat=4):
        for lengths in itertools.product((1, 3), repeat=4):
            yield list(arrivals), list(lengths), (1, 2, 3, 4)


def _check_static(timeline, arrivals, lengths, batch_size):
    n = len(arrivals)
    # the blocks: maximal runs of one non-empty member set
    blocks, t = [], 0
    while t < len(timeline):
        if not timeline[t]:
            t += 1
            continue
        members, begin = set(timeline[t]), t
        while t < len(timeline) and set(timeline[t]) == members:
            t += 1
        blocks.append((members, begin, t))
    assert not timeline or timeline[-1], f"trailing empty step: {timeline}"
    seen = [i for m, _, _ in blocks for i in m]
    assert sorted(seen) == list(range(n)), f"requests batched {sorted(seen)}, expected each of 0..{n - 1} once"
    order = []
    for k, (members, begin, end) in enumerate(blocks):
        assert len(members) == batch_size or k == len(blocks) - 1, (
            f"batch {sorted(members)} has {len(members)} requests; only the last batch may have fewer than {batch_size}")
        order += sorted(members, key=lambda i: (arrivals[i], i))
    for i, j in itertools.permutations(range(n), 2):
        assert not (arrivals[i] < arrivals[j] and order.index(i) > order.index(j)), (
            f"request {i} (arrival {arrivals[i]}) batched after request {j} (arrival {arrivals[j]})")
    want = static_batches(arrivals, lengths, batch_size, order)
    assert [(set(m), b, e) for m, b, e in want] == blocks, f"batches {blocks}, expected {want}"
    held = sum(len(s) for s in timeline)
    assert held == sum(len(m) * (e - b) for m, b, e in blocks)
    if not any(arrivals):
        assert len(timeline) == sum(max(lengths[i] for i in m) for m, _, _ in blocks)


@pytest.mark.parametrize("kind", ["continuous", "static"])
def test_schedules_exhaustively(impl, kind):
    """Every small pattern (module doc): the schedule obeys its law; continuous batching holds
    exactly sum L slot-steps (no idle slot) and never takes more steps than static batching."""
    sched_c, sched_s = impl.get("schedule_continuous"), impl.get("schedule_static")
    checked = 0
    for arrivals, lengths, limits in _patterns():
        for limit in limits:
            if kind == "continuous":
                timeline = [tuple(s) for s in sched_c(arrivals, lengths, limit)]
                ctx = f"schedule_continuous({arrivals}, {lengths}, {limit}) = {timeline}"
                try:
                    check_continuous(timeline, arrivals, lengths, limit)
                except AssertionError as exc:
                    raise AssertionError(f"{exc}\n  {ctx}") from None
                assert sum(len(s) for s in timeline) == sum(lengths), ctx
                if not any(arrivals):
                    static = sched_s(arrivals, lengths, limit)
                    assert len(timeline) <= len(static), f"{ctx}: longer than static batching ({len(static)} steps)"
            else:
                timeline = [tuple(s) for s in sched_s(arrivals, lengths, limit)]
                try:
                    _check_static(timeline, arrivals, lengths, limit)
                except AssertionError as exc:
                    raise AssertionError(f"{exc}\n  schedule_static({arrivals}, {lengths}, {limit}) = {timeline}") from None
            checked += 1
    assert checked == _count() == 3 * (9 + 81 + 729) + 4 * 256, checked


def _count():
    return sum(len(lim) for _, _, lim in _patterns())


@pytest.mark.choice("FCFS ties by list index; timeline steps in admission order")
def test_schedules_are_the_references_exactly(impl, reference):
    """The timelines, order within a step included, are the reference's on every small pattern."""
    for arrivals, lengths, limits in _patterns():
        for limit in limits:
            for name in ("schedule_continuous", "schedule_static"):
                got = [tuple(s) for s in impl.get(name)(arrivals, lengths, limit)]
                assert got == reference.get(name)(arrivals, lengths, limit), (name, arrivals, lengths, limit, got)

