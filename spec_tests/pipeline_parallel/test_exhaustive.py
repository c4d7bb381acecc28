"""Bounded-exhaustive schedules: every pipeline of p <= 4 stages and m <= 8 micro-batches.

For each (p, m), kind (gpipe, 1f1b), training or forward-only and step times (t_f, t_b) in
{(1, 1), (1, 2), (2, 3)} -- 384 schedules simulated, the count asserted --: the schedule's order
of steps on every stage is the stated one (the oracle builds it from the rule, not from the
reference's loops); the step-timed simulation in exact arithmetic gives the oracle's start and end
of every step (the longest path of the dependency graph), the makespan (m + p - 1)(t_f + t_b)
(forward-only: (m + p - 1) t_f), the bubble (p - 1)/(m + p - 1) = bubble_fraction(p, m), and the
activations in flight (GPipe: m on every stage; 1F1B: min(p - s, m) on stage s).
"""
from __future__ import annotations

from fractions import Fraction

from spec_tests.pipeline_parallel import oracles, runs

TIMES = ((1, 1), (1, 2), (2, 3))
DOMAIN = [(p, m, kind, training, t) for p in range(1, 5) for m in range(1, 9) for kind in ("gpipe", "1f1b")
          for training in (False, True) for t in TIMES]
SIMULATED = 384


def test_every_small_schedule(impl):
    """Order, timeline, makespan, bubble and activations in flight of every schedule of the
    domain; bubble_fraction(p, m) for every p <= 4, m <= 8."""
    results = impl.call_in_process(runs.small_schedules, DOMAIN)
    n = 0
    for (p, m, kind, training, (tf, tb)), (got, out, got_b) in zip(DOMAIN, results):
        where = f"p={p}, m={m}, {kind}, {'training' if training else 'forward-only'}"
        want = (oracles.one_f_one_b_order if kind == "1f1b" else oracles.gpipe_order)(p, m, training)
        assert got == want, f"pipeline_schedule({p}, {m}, {kind!r}, training={training}):\n  got  {got}\n  want {want}"
        n += 1
        ends = oracles.longest_path(want, [tf] * p, [tb] * p)
        for s, steps in enumerate(out["steps"]):
            assert [(k, j) for k, j, _, _ in steps] == want[s], f"{where}: stage {s} ran {steps} out of its order"
            for k, j, start, end in steps:
                want_end = ends[(k, s, j)]
                assert end == want_end and start == want_end - (tf if k == "F" else tb), (
                    f"{where}, t_f={tf}, t_b={tb}: stage {s}'s {k}{j} ran [{start}, {end}]; as soon as it may: "
                    f"[{want_end - (tf if k == 'F' else tb)}, {want_end}]")
        span = (m + p - 1) * (tf + tb if training else tf)
        assert out["makespan"] == span, f"{where}, t_f={tf}, t_b={tb}: makespan {out['makespan']}, expected {span}"
        want_bubble = Fraction(p - 1, m + p - 1)
        assert out["bubble"] == want_bubble and isinstance(out["bubble"], Fraction), (
            f"{where}, t_f={tf}, t_b={tb}: simulated bubble {out['bubble']!r}, expected (p-1)/(m+p-1) = {want_bubble}")
        assert out["busy"] == [m * (tf + tb if training else tf)] * p, f"{where}: busy {out['busy']}"
        flight = [min(p - s, m) for s in range(p)] if kind == "1f1b" and training else [m] * p
        assert list(out["peak_in_flight"]) == flight, (
            f"{where}: activations in flight at peak {list(out['peak_in_flight'])}, expected {flight}")
        assert got_b == want_bubble and isinstance(got_b, Fraction), f"bubble_fraction({p}, {m}) = {got_b!r}, expected {want_bubble}"
    assert n == SIMULATED
