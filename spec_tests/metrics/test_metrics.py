"""Serving metrics (course 01.11, 04.09-04.12): TTFT, TPOT, ITL, E2E, throughput, goodput and
percentiles, checked by closed forms on synthetic timelines and against numpy.

Floating comparisons: the quantities are differences and ratios of float64 timestamps, so two
correct implementations may differ by rounding at the timestamps' magnitude (an epoch time of
1.7e9 s has an ulp of 2.4e-7 s). :func:`close` allows ``64 x eps x scale`` with ``scale`` the
largest timestamp magnitude (the float64 rounding floor, the same idea as tolerance.py's), scaled
by ``value / duration`` for throughputs. Every planted bug moves a result by far more.
"""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import assume, example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.metrics.strategies import request, runs


EPS = sys.float_info.epsilon
finite = dict(allow_nan=False, allow_infinity=False)


def floor_at(scale: float) -> float:
    """The float64 rounding floor for results derived from timestamps of magnitude ``scale``."""
    return 64 * EPS * max(1.0, abs(scale))


def close(got, want, tol: float, what: str) -> None:
    assert got is not None and abs(got - want) <= tol, (
        f"{what}: got {got!r}, expected {want!r} (float64 rounding floor {tol:.3g})")


def scale_of(reqs) -> float:
    return max(max(abs(a), abs(t[-1])) for a, t in reqs)


# --- one request ---------------------------------------------------------------------------
@example(arrival=0.0, first=0.25, gap=0.125, n=5).via("mutant:tpot_counts_first_token")
# one token: TPOT None
@example(arrival=3.0, first=0.5, gap=0.25, n=1).via("mutant:one_token_tpot_zero")
# TTFT 0, every token in one step: TPOT 0
@example(arrival=2.0, first=0.0, gap=0.0, n=4).via("mutant:zero_gap_tpot_none")
@given(arrival=st.floats(0, 1e9, **finite), first=st.floats(0, 10, **finite),
       gap=st.floats(0, 2, **finite), n=st.integers(1, 40))
def test_uniform_stream_closed_form(impl, arrival, first, gap, n):
    """Tokens every `gap` seconds after a first-token delay `first`: TTFT = first, TPOT = gap,
    ITL = (gap,) * (n - 1), E2E = first + (n - 1) gap; TPOT is None for one token."""
    times = [arrival + first + i * gap for i in range(n)]
    m = impl.get("request_metrics")(arrival, times)
    tol = floor_at(arrival + first + n * gap)
    close(m.ttft, first, tol, "TTFT")
    close(m.e2e, first + (n - 1) * gap, tol, "E2E")
    assert m.output_tokens == n
    assert len(m.itl) == n - 1, f"ITL has {len(m.itl)} gaps for {n} tokens, expected {n - 1}"
    for g in m.itl:
        close(g, gap, tol, "ITL gap")
    if n == 1:
        assert m.tpot is None, f"TPOT of a one-token request must be None (undefined), got {m.tpot!r}"
    else:
        close(m.tpot, gap, tol, "TPOT (the first token must not be counted)")


# one token at the arrival instant; zero TTFT and zero gaps; epoch-scale timestamps
@example(req=(5.0, (5.0,))).via("mutant:one_token_tpot_zero")
@example(req=(1.0, (1.0, 1.0, 1.0))).via("mutant:zero_gap_tpot_none")
@example(req=(1.7e9, (1.7e9 + 0.5, 1.7e9 + 0.75))).via(
    "mutant:float32_timestamps mutant:tpot_counts_first_token")
@given(req=request(max_tokens=10))
def test_request_metrics_definitions(impl, req):
    """Oracle with numpy: TTFT = t0 - arrival, ITL = diff(t), TPOT = mean(ITL), E2E = t[-1] - arrival,
    in float64: at epoch-scale times a float32 timestamp is off by up to 64 s."""
    arrival, times = req
    m = impl.get("request_metrics")(arrival, list(times))
    t = np.asarray(times, dtype=np.float64)
    tol = floor_at(max(abs(arrival), abs(times[-1])))
    close(m.ttft, t[0] - arrival, tol, "TTFT")
    close(m.e2e, t[-1] - arrival, tol, "E2E")
    np.testing.assert_allclose(np.asarray(m.itl, dtype=np.float64).reshape(-1), np.diff(t), rtol=0, atol=tol)
    if len(t) > 1:
        close(m.tpot, float(np.mean(np.diff(t))), tol, "TPOT")
    else:
        assert m.tpot is None


@given(req=request(), delay=st.floats(0, 100, **finite))
def test_first_token_delay_moves_ttft_only(impl, req, delay):
    """Metamorphic: delaying every token by `delay` adds it to TTFT and E2E; TPOT and ITL do not
    change (TPOT excludes the first token's wait)."""
    arrival, times = req
    f = impl.get("request_metrics")
    a, b = f(arrival, times), f(arrival, [t + delay for t in times])
    tol = floor_at(max(abs(arrival), abs(times[-1]) + delay))
    close(b.ttft, a.ttft + delay, tol, "TTFT")
    close(b.e2e, a.e2e + delay, tol, "E2E")
    assert (a.tpot is None) == (b.tpot is None)
    if a.tpot is not None:
        close(b.tpot, a.tpot, tol, "TPOT")
    for x, y in zip(a.itl, b.itl, strict=True):
        close(y, x, tol, "ITL")


# --- a run ---------------------------------------------------------------------------------
@example(n=3, m=4, first=0.5, gap=0.25).via("mutant:goodput_either_slo")
@given(n=st.integers(1, 6), m=st.integers(1, 12), first=st.floats(0.01, 5, **finite),
       gap=st.floats(0, 1, **finite))
def test_back_to_back_requests_closed_form(impl, n, m, first, gap):
    """n identical requests, each arriving when the previous one finished (period T = first +
    (m - 1) gap): duration n T, request throughput 1/T, output throughput m/T, and goodput = 1/T
    with loose SLOs, 0 with a TTFT SLO below `first`."""
    period = first + (m - 1) * gap
    reqs = [(i * period, [i * period + first + j * gap for j in range(m)]) for i in range(n)]
    s = impl.get("summarize")(reqs, ttft_slo=first + 1, tpot_slo=gap + 1)
    tol = floor_at(n * period) * 4
    close(s.duration, n * period, tol, "duration")
    close(s.request_throughput, 1 / period, tol / period ** 2, "request throughput")
    close(s.output_throughput, m / period, m * tol / period ** 2, "output throughput")
    close(s.goodput, 1 / period, tol / period ** 2, "goodput (every request meets loose SLOs)")
    assert (s.num_requests, s.output_tokens, s.good_requests) == (n, n * m, n)
    strict = impl.get("summarize")(reqs, ttft_slo=first / 2)
    assert strict.good_requests == 0 and strict.goodput == 0.0


def _dist_matches(dist, values, qs, tol, what):
    assert dist is not None, f"{what}: expected a distribution of {len(values)} values, got None"
    v = np.asarray(values, dtype=np.float64)
    assert dist.count == len(values), what
    close(dist.mean, float(np.mean(v)), tol * max(1, len(values)), f"{what} mean")
    close(dist.min, float(v.min()), tol, f"{what} min")
    close(dist.max, float(v.max()), tol, f"{what} max")
    for q in qs:
        close(dist.percentiles[q], float(np.percentile(v, q, method="linear")), tol, f"{what} p{q:g}")


# one one-token request: no TPOT, no ITL; zero TTFTs and a zero gap; three overlapping requests
@example(reqs=[(0.0, (1.0,))], qs=[0.0, 100.0]).via(
    "mutant:one_token_tpot_zero mutant:p100_out_of_range")
@example(reqs=[(0.0, (0.0, 0.5, 0.5, 2.0)), (0.0, (0.0,))], qs=[50.0]).via(
    "mutant:tpot_counts_first_token mutant:one_token_tpot_zero mutant:percentile_unsorted")
@example(reqs=[(0.0, (0.5, 1.0)), (1.0, (3.0,)), (0.5, (0.75, 1.0, 2.0))], qs=[0.0, 37.5, 100.0]).via(
    "mutant:percentile_off_by_one mutant:percentile_unsorted mutant:p100_out_of_range")
@given(reqs=runs(), qs=st.lists(st.floats(0, 100, **finite), min_size=1, max_size=4, unique=True))
def test_summary_matches_numpy(impl, reqs, qs):
    """Oracle: throughputs from the run window, and TTFT/TPOT/ITL/E2E distributions (mean, min,
    max, percentiles) equal numpy's over the per-request values (ITL pooled over all gaps; TPOT
    over requests with >= 2 tokens)."""
    s = impl.get("summarize")(reqs, percentiles=qs)
    tol = floor_at(scale_of(reqs))
    duration = max(t[-1] for _, t in reqs) - min(a for a, _ in reqs)
    tokens = sum(len(t) for _, t in reqs)
    close(s.duration, duration, tol, "duration")
    close(s.request_throughput, len(reqs) / duration, len(reqs) * tol / duration ** 2 + tol, "request throughput")
    close(s.output_throughput, tokens / duration, tokens * tol / duration ** 2 + tol, "output throughput")
    assert (s.num_requests, s.output_tokens) == (len(reqs), tokens)
    _dist_matches(s.ttft, [t[0] - a for a, t in reqs], qs, tol, "TTFT")
    _dist_matches(s.e2e, [t[-1] - a for a, t in reqs], qs, tol, "E2E")
    tpots = [(t[-1] - t[0]) / (len(t) - 1) for _, t in reqs if len(t) > 1]
    gaps = [float(g) for _, t in reqs for g in np.diff(np.asarray(t, dtype=np.float64))]
    if tpots:
        _dist_matches(s.tpot, tpots, qs, tol, "TPOT")
        _dist_matches(s.itl, gaps, qs, tol, "ITL (pooled gaps)")
    else:
        assert s.tpot is None and s.itl is None, "no request has 2 tokens: TPOT and ITL must be None"


def _midpoint_slo(values, k: int):
    """An SLO of 0 (legal; met only by a value of exactly 0, which every implementation computes
    exactly: t - t == 0), or one strictly between two distinct observed values (below all / above
    all at the ends), so that rounding differences between implementations cannot flip a
    decision."""
    v = sorted(set(values))
    cuts = [0.0] + [v[0] / 2] * (v[0] > 0) + [(x + y) / 2 for x, y in zip(v, v[1:])] + [v[-1] + 1]
    return cuts[k % len(cuts)]


@given(reqs=runs(), i=st.integers(0, 20), j=st.integers(0, 20))
def test_goodput_counts_requests_meeting_both_slos(impl, reqs, i, j):
    """goodput = (#requests with TTFT <= ttft_slo AND (one token OR TPOT <= tpot_slo)) / duration."""
    ttfts = [t[0] - a for a, t in reqs]
    tpots = [(t[-1] - t[0]) / (len(t) - 1) if len(t) > 1 else None for _, t in reqs]
    ttft_slo = _midpoint_slo(ttfts, i)
    tpot_slo = _midpoint_slo([x for x in tpots if x is not None] or [0.0], j)
    tol = floor_at(scale_of(reqs))
    assume(all(abs(x - ttft_slo) > tol or ttft_slo == 0 for x in ttfts)
           and all(abs(x - tpot_slo) > tol or tpot_slo == 0 for x in tpots if x is not None))
    good = sum(1 for f, p in zip(ttfts, tpots) if f <= ttft_slo and (p is None or p <= tpot_slo))
    s = impl.get("summarize")(reqs, ttft_slo=ttft_slo, tpot_slo=tpot_slo)
    assert s.good_requests == good, (
        f"{s.good_requests} good requests, expected {good} meeting both TTFT <= {ttft_slo} and "
        f"TPOT <= {tpot_slo}; (TTFT, TPOT) per request: {list(zip(ttfts, tpots))}")
    duration = max(t[-1] for _, t in reqs) - min(a for a, _ in reqs)
    close(s.goodput, good / duration, good * tol / duration ** 2 + tol, "goodput")


@given(reqs=runs(), slos=st.lists(st.floats(0, 10, **finite), min_size=4, max_size=4))
def test_goodput_monotone_in_slos(impl, reqs, slos):
    """Loosening either SLO never lowers goodput; goodput <= request throughput, with equality
    when no SLO is set."""
    f = impl.get("summarize")
    a_ttft, b_ttft = sorted(slos[:2])
    a_tpot, b_tpot = sorted(slos[2:])
    tight, loose = f(reqs, ttft_slo=a_ttft, tpot_slo=a_tpot), f(reqs, ttft_slo=b_ttft, tpot_slo=b_tpot)
    free = f(reqs)
    assert tight.good_requests <= loose.good_requests <= free.good_requests == len(reqs)
    assert tight.goodput <= loose.goodput <= free.goodput == free.request_throughput


@given(reqs=runs(), data=st.data())
def test_summary_ignores_request_order(impl, reqs, data):
    """Metamorphic: permuting the requests changes nothing (up to the rounding of sums)."""
    f = impl.get("summarize")
    perm = data.draw(st.permutations(reqs))
    a, b = f(perm, ttft_slo=1.0, tpot_slo=0.5), f(reqs, ttft_slo=1.0, tpot_slo=0.5)
    tol = floor_at(scale_of(reqs))
    assert (a.num_requests, a.output_tokens, a.good_requests) == (b.num_requests, b.output_tokens, b.good_requests)
    for name in ("duration", "request_throughput", "output_throughput", "goodput"):
        close(getattr(a, name), getattr(b, name), tol * getattr(b, name) / b.duration + tol, name)
    for name in ("ttft", "tpot", "itl", "e2e"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.count == y.count and x.percentiles.keys() == y.percentiles.keys(), name
            close(x.mean, y.mean, tol * x.count, f"{name} mean")
            for field in ("min", "max"):
                close(getattr(x, field), getattr(y, field), tol, f"{name} {field}")
            for q in x.percentiles:
                close(x.percentiles[q], y.percentiles[q], tol, f"{name} p{q:g}")


# --- percentiles ---------------------------------------------------------------------------
# p50 / p90 between ranks; one value is every percentile; q = 100 exactly (the last rank, no
# rank after it); unsorted input
@example(values=[1.0, 2.0, 3.0, 4.0], q=50.0).via("mutant:percentile_off_by_one")
@example(values=[10.0, 20.0], q=90.0).via("mutant:percentile_off_by_one")
@example(values=[5.0], q=37.0).via("mutant:p100_out_of_range")
@example(values=[3.0, -1.0], q=100.0).via("mutant:p100_out_of_range")
@example(values=[4.0, 1.0, 3.0, 2.0], q=50.0).via("mutant:percentile_unsorted")
@given(values=st.lists(st.floats(-1e6, 1e6, **finite), min_size=1, max_size=30),
       q=st.floats(0, 100, **finite))
def test_percentile_matches_numpy_linear(impl, values, q):
    """percentile(values, q) == numpy.percentile(values, q, method='linear'); p0 = min,
    p100 = max; monotone in q; the input list is not modified."""
    p = impl.get("percentile")
    before = list(values)
    tol = floor_at(max(abs(x) for x in values))
    close(p(values, q), float(np.percentile(values, q, method="linear")), tol, f"p{q:g}")
    assert p(values, 0) == min(values) and p(values, 100) == max(values)
    assert p(values, q) <= p(values, min(100.0, q + 7.5)) + tol
    assert values == before, "percentile modified its input"


def test_pinned_examples(impl):
    """Exact, readable instances: SLOs are inclusive; mean TPOT (per request) differs from mean
    ITL (per token); a one-token request meets any TPOT SLO."""
    f = impl.get("summarize")
    close(impl.get("percentile")([1.0, 2.0, 3.0, 4.0], 90), 3.7, floor_at(4.0), "p90")  # 3 + 0.7 x 1
    assert impl.get("percentile")([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    reqs = [(0.0, [0.5, 1.0, 1.5]),          # TTFT 0.5, TPOT 0.5
            (0.0, [1.0, 1.25, 1.5, 1.75, 2.0]),  # TTFT 1.0, TPOT 0.25
            (1.0, [1.25])]                    # TTFT 0.25, one token: no TPOT
    s = f(reqs, ttft_slo=0.5, tpot_slo=0.5)
    assert (s.duration, s.output_tokens, s.good_requests) == (2.0, 9, 2)   # the 2nd misses TTFT
    assert (s.request_throughput, s.output_throughput, s.goodput) == (1.5, 4.5, 1.0)
    assert s.tpot.mean == 0.375                   # (0.5 + 0.25) / 2 over requests
    assert s.itl.mean == (2 * 0.5 + 4 * 0.25) / 6  # over the 6 gaps: 1/3
    assert f(reqs, ttft_slo=1.0, tpot_slo=0.25).good_requests == 2  # 2nd and the one-token 3rd
    m = impl.get("request_metrics")(1.0, [1.25])
    assert (m.ttft, m.tpot, m.itl, m.e2e, m.output_tokens) == (0.25, None, (), 0.25, 1)


# --- boundaries and defaults ---------------------------------------------------------------
# The documented defaults of summarize (reference/metrics.py): what omitting an argument means.
SUMMARIZE_DEFAULTS = dict(ttft_slo=None, tpot_slo=None, percentiles=(50.0, 90.0, 95.0, 99.0))


def _dist_fields(d):
    return None if d is None else (d.count, d.mean, d.min, d.max, sorted(d.percentiles.items()))


def _summary_fields(s) -> tuple:
    return (s.num_requests, s.output_tokens, s.duration, s.request_throughput, s.output_throughput,
            s.good_requests, s.goodput, *(_dist_fields(getattr(s, n)) for n in ("ttft", "tpot", "itl", "e2e")))


slo_values = st.one_of(st.none(), st.just(0.0), st.floats(0, 10, **finite))


@example(reqs=[(0.0, (0.5, 1.0, 1.5)), (1.0, (1.25,))], ttft_slo=0.25, tpot_slo=0.0, qs=[10.0],
         omit={"percentiles"}).via("mutant:default_percentiles_without_p95")
@example(reqs=[(0.0, (0.5, 1.0, 1.5)), (1.0, (1.25,))], ttft_slo=0.25, tpot_slo=0.0, qs=[10.0],
         omit={"ttft_slo", "tpot_slo"}).via("mutant:no_slo_meets_nothing")
@given(reqs=runs(), ttft_slo=slo_values, tpot_slo=slo_values,
       qs=st.lists(st.floats(0, 100, **finite), max_size=3, unique=True),
       omit=st.sets(st.sampled_from(sorted(SUMMARIZE_DEFAULTS)), min_size=1))
def test_summarize_omitted_arguments_mean_the_defaults(impl, reqs, ttft_slo, tpot_slo, qs, omit):
    """Omitting ``ttft_slo`` / ``tpot_slo`` / ``percentiles`` gives exactly the summary of passing
    the documented default (no limit, no limit, (50, 90, 95, 99)). Mutants:
    default_percentiles_without_p95, empty_percentiles_become_default."""
    f = impl.get("summarize")
    drawn = dict(ttft_slo=ttft_slo, tpot_slo=tpot_slo, percentiles=tuple(qs))
    given_args = {k: v for k, v in drawn.items() if k not in omit}
    explicit = {**drawn, **{k: SUMMARIZE_DEFAULTS[k] for k in omit}}
    got, want = f(reqs, **given_args), f(reqs, **explicit)
    assert _summary_fields(got) == _summary_fields(want), (
        f"omitting {sorted(omit)} must mean {({k: SUMMARIZE_DEFAULTS[k] for k in omit})}")
    keys = set(map(float, explicit["percentiles"]))
    for name in ("ttft", "tpot", "itl", "e2e"):
        d = getattr(got, name)
        if d is not None:
            assert set(d.percentiles) == keys, (f"{name}: percentiles {sorted(d.percentiles)}, "
                                                f"expected {sorted(keys)} (omitted: {sorted(omit)})")
    if "ttft_slo" in omit and "tpot_slo" in omit:
        assert got.good_requests == len(reqs), "with no SLO every request is good"


def test_zero_slos(impl):
    """An SLO of 0 is a limit, not "no limit": only a TTFT (TPOT) of exactly 0 meets it; a
    one-token request meets any TPOT SLO, 0 included. Mutants: zero_ttft_slo_ignored,
    zero_tpot_slo_ignored, slo_exclusive."""
    f = impl.get("summarize")
    reqs = [(0.0, [0.0, 0.0]),   # TTFT 0, TPOT 0 (two tokens in one step)
            (0.0, [0.0, 1.0]),   # TTFT 0, TPOT 1
            (0.5, [1.0]),        # TTFT 0.5, one token
            (1.0, [1.0])]        # TTFT 0, one token
    assert f(reqs, ttft_slo=0.0, tpot_slo=0.0).good_requests == 2
    assert f(reqs, ttft_slo=0.0).good_requests == 3
    assert f(reqs, tpot_slo=0.0).good_requests == 3
    assert f(reqs, ttft_slo=0.0, tpot_slo=1.0).good_requests == 3
    assert f(reqs, ttft_slo=0.5, tpot_slo=0.0).good_requests == 3
    s = f(reqs, ttft_slo=0, tpot_slo=0)  # ints are numbers too
    assert (s.good_requests, s.goodput, s.duration) == (2, 2.0, 1.0)


def test_empty_percentiles(impl):
    """``percentiles=()`` is legal: every distribution holds an empty percentile dict (the
    default is not substituted) and everything else as usual. Mutant:
    empty_percentiles_become_default."""
    f = impl.get("summarize")
    reqs = [(0.0, [0.5, 1.0, 1.5]), (1.0, [1.25])]
    s = f(reqs, percentiles=())
    for name in ("ttft", "tpot", "itl", "e2e"):
        d = getattr(s, name)
        assert d is not None and dict(d.percentiles) == {}, f"{name}: {d.percentiles if d else d}"
    assert (s.ttft.count, s.ttft.min, s.ttft.max, s.tpot.count, s.itl.count) == (2, 0.25, 0.5, 1, 2)
    assert f(reqs, percentiles=[100, 0]).e2e.percentiles == {100.0: 1.5, 0.0: 0.25}


# --- bad input -----------------------------------------------------------------------------
REQUEST_VALID = dict(arrival=0.0, token_times=[0.5, 1.0])
REQUEST_BAD = [
    Bad("empty token_times", dict(token_times=[]), ValueError, ("token_times",)),
    Bad("decreasing token_times", dict(token_times=[1.0, 0.5]), ValueError, ("token_times",)),
    Bad("token before arrival", dict(arrival=2.0, token_times=[1.0]), ValueError, ("token_times",)),
    Bad("first token before arrival, the last after", dict(arrival=2.0, token_times=[1.0, 3.0]), ValueError,
        ("token_times",)),
    Bad("NaN token time", dict(token_times=[1.0, math.nan]), ValueError, ("token_times",)),
    Bad("infinite token time", dict(token_times=[1.0, math.inf]), ValueError, ("token_times",)),
    Bad("token_times a string", dict(token_times="12"), TypeError, ("token_times",)),
    Bad("token_times None", dict(token_times=None), TypeError, ("token_times",)),
    Bad("str token time", dict(token_times=[0.5, "1"]), TypeError, ("token_times",)),
    Bad("infinite arrival", dict(arrival=math.inf), ValueError, ("arrival",)),
    Bad("NaN arrival", dict(arrival=math.nan), ValueError, ("arrival",)),
    Bad("str arrival", dict(arrival="0"), TypeError, ("arrival",)),
    Bad("bool arrival", dict(arrival=False), TypeError, ("arrival",)),
    Bad("None arrival", dict(arrival=None), TypeError, ("arrival",)),
    Bad("-inf arrival", dict(arrival=-math.inf), ValueError, ("arrival",)),
    Bad("token_times a number", dict(token_times=1.0), TypeError, ("token_times",)),
    Bad("bool token time", dict(token_times=[0.5, True]), TypeError, ("token_times",)),
]


@bad_cases(REQUEST_BAD)
def test_request_metrics_rejects_bad_input(impl, bad):
    """request_metrics: ValueError for an illegal timeline, TypeError for the wrong kind, naming
    ``arrival`` or ``token_times``."""
    assert_rejects(impl.get("request_metrics"), REQUEST_VALID, bad)


SUMMARIZE_VALID = dict(requests=[(0.0, [0.5, 1.0]), (0.25, [1.5])])
SUMMARIZE_BAD = [
    Bad("no requests", dict(requests=[]), ValueError, ("requests",)),
    Bad("requests an int", dict(requests=3), TypeError, ("requests",)),
    Bad("requests a string", dict(requests="01"), TypeError, ("requests",)),
    Bad("zero-length run window", dict(requests=[(0.0, [0.0])]), ValueError, ("requests",)),
    Bad("request not a pair", dict(requests=[(0.0, [1.0]), (0.0,)]), ValueError, ("requests",)),
    # Mutant: request_longer_than_pair_accepted.
    Bad("request a triple", dict(requests=[(0.0, [1.0]), (0.0, [1.0], 2.0)]), ValueError, ("requests",)),
    Bad("request with empty token_times", dict(requests=[(0.0, [1.0]), (0.0, [])]), ValueError,
        ("token_times",)),
    Bad("request with decreasing token_times", dict(requests=[(0.0, [1.0, 0.5])]), ValueError,
        ("token_times",)),
    Bad("request with NaN arrival", dict(requests=[(0.0, [1.0]), (math.nan, [1.0])]), ValueError,
        ("arrival",)),
    Bad("negative ttft_slo", dict(ttft_slo=-1.0), ValueError, ("ttft_slo",)),
    Bad("NaN ttft_slo", dict(ttft_slo=math.nan), ValueError, ("ttft_slo",)),
    Bad("str ttft_slo", dict(ttft_slo="1"), TypeError, ("ttft_slo",)),
    Bad("negative tpot_slo", dict(tpot_slo=-0.1), ValueError, ("tpot_slo",)),
    Bad("bool tpot_slo", dict(tpot_slo=True), TypeError, ("tpot_slo",)),
    Bad("infinite ttft_slo", dict(ttft_slo=math.inf), ValueError, ("ttft_slo",)),
    Bad("bool ttft_slo", dict(ttft_slo=False), TypeError, ("ttft_slo",)),
    Bad("NaN tpot_slo", dict(tpot_slo=math.nan), ValueError, ("tpot_slo",)),
    Bad("infinite tpot_slo", dict(tpot_slo=math.inf), ValueError, ("tpot_slo",)),
    Bad("str tpot_slo", dict(tpot_slo="0.1"), TypeError, ("tpot_slo",)),
    Bad("requests None", dict(requests=None), TypeError, ("requests",)),
    Bad("percentile above 100", dict(percentiles=(50, 101)), ValueError, ("percentiles",)),
    Bad("negative percentile", dict(percentiles=(-1,)), ValueError, ("percentiles",)),
    Bad("str percentile", dict(percentiles=("50",)), TypeError, ("percentiles",)),
    Bad("percentiles a number", dict(percentiles=50), TypeError, ("percentiles",)),
    Bad("percentiles a string", dict(percentiles="50"), TypeError, ("percentiles",)),
    Bad("percentiles None", dict(percentiles=None), TypeError, ("percentiles",)),
    Bad("NaN percentile", dict(percentiles=(50, math.nan)), ValueError, ("percentiles",)),
    Bad("bool percentile", dict(percentiles=(True,)), TypeError, ("percentiles",)),
]


@bad_cases(SUMMARIZE_BAD)
def test_summarize_rejects_bad_input(impl, bad):
    """summarize: ValueError for an illegal value, TypeError for the wrong kind, naming the
    argument (a malformed request names the request's field)."""
    assert_rejects(impl.get("summarize"), SUMMARIZE_VALID, bad)


PERCENTILE_VALID = dict(values=[1.0, 2.0, 4.0], q=50)
PERCENTILE_BAD = [
    Bad("no values", dict(values=[]), ValueError, ("values",)),
    Bad("NaN value", dict(values=[1.0, math.nan]), ValueError, ("values",)),
    Bad("str value", dict(values=[1.0, "2"]), TypeError, ("values",)),
    Bad("values a number", dict(values=1.0), TypeError, ("values",)),
    Bad("negative q", dict(q=-1), ValueError, ("q",)),
    Bad("q above 100", dict(q=100.5), ValueError, ("q",)),
    Bad("NaN q", dict(q=math.nan), ValueError, ("q",)),
    Bad("str q", dict(q="50"), TypeError, ("q",)),
    Bad("None q", dict(q=None), TypeError, ("q",)),
    Bad("bool q", dict(q=True), TypeError, ("q",)),
    Bad("infinite q", dict(q=math.inf), ValueError, ("q",)),
    Bad("values None", dict(values=None), TypeError, ("values",)),
    Bad("values a string", dict(values="12"), TypeError, ("values",)),
    Bad("infinite value", dict(values=[1.0, -math.inf]), ValueError, ("values",)),
    Bad("bool value", dict(values=[1.0, False]), TypeError, ("values",)),
]


@bad_cases(PERCENTILE_BAD)
def test_percentile_rejects_bad_input(impl, bad):
    """percentile: ValueError for no values, a non-finite value or q outside [0, 100]; TypeError
    for the wrong kind; naming ``values`` or ``q``."""
    assert_rejects(impl.get("percentile"), PERCENTILE_VALID, bad)


@given(reqs=runs())
def test_inputs_not_modified(impl, reqs):
    lists = [(a, list(t)) for a, t in reqs]
    copy = [(a, list(t)) for a, t in lists]
    impl.get("summarize")(lists, ttft_slo=1.0)
    for a, t in lists:
        impl.get("request_metrics")(a, t)
    assert lists == copy, "summarize/request_metrics modified the timestamps they were given"
