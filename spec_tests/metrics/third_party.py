"""A third-party "must pass" submission for `metrics`: the numbers computed by numpy.

``percentile`` is ``numpy.percentile(values, q)`` (its default ``method="linear"``, which the
contract pins); ``request_metrics`` and ``summarize`` compute every quantity with numpy the way a
benchmark script does (``np.diff`` for ITL, ``np.mean`` of the gaps for TPOT, ``np.mean`` /
``np.min`` / ``np.max`` / ``np.percentile`` for the distributions, ``np.sum`` for token counts).
Nothing here comes from ``reference/``: this file only validates the arguments the way the
contract says (numpy does not) and packs numpy's results into records with the contract's
fields. numpy rounds differently from the reference (pairwise sums, its own interpolation
formula), so this is the false-alarm check of the suite's float64 tolerances.

Run: ``pytest spec_tests/metrics --impl spec_tests/metrics/third_party.py`` (test_third_party.py
requires it to pass).
"""
from __future__ import annotations

import math
from numbers import Real
from types import SimpleNamespace

import numpy as np

__all__ = ["request_metrics", "summarize", "percentile"]


def _number(name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, Real):
        raise TypeError(f"{name}: expected a real number, got {x!r}")
    if not math.isfinite(x):
        raise ValueError(f"{name}: expected a finite number, got {x!r}")
    return float(x)


def _numbers(name: str, xs) -> np.ndarray:
    if isinstance(xs, (str, bytes)) or not hasattr(xs, "__len__") or not hasattr(xs, "__iter__"):
        raise TypeError(f"{name}: expected a sequence of numbers, got {type(xs).__name__}")
    if len(xs) == 0:
        raise ValueError(f"{name}: expected at least one number")
    return np.array([_number(name, x) for x in xs], dtype=np.float64)


def _unit_interval(name: str, q) -> float:
    q = _number(name, q)
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"{name}: {q} is outside [0, 100]")
    return q


def _timeline(arrival, token_times) -> tuple[float, np.ndarray]:
    a = _number("arrival", arrival)
    t = _numbers("token_times", token_times)
    if t[0] < a:
        raise ValueError(f"token_times: the first token ({t[0]}) comes before the arrival ({a})")
    if np.any(np.diff(t) < 0):
        raise ValueError("token_times: must not decrease")
    return a, t


def _request(a: float, t: np.ndarray) -> SimpleNamespace:
    gaps = np.diff(t)
    return SimpleNamespace(ttft=float(t[0] - a), tpot=float(np.mean(gaps)) if gaps.size else None,
                           itl=tuple(float(g) for g in gaps), e2e=float(t[-1] - a), output_tokens=int(t.size))


def request_metrics(arrival, token_times):
    return _request(*_timeline(arrival, token_times))


def percentile(values, q):
    q = _unit_interval("q", q)
    return float(np.percentile(_numbers("values", values), q))


def _distribution(values: list[float], qs: tuple[float, ...]) -> SimpleNamespace | None:
    if not values:
        return None
    v = np.asarray(values, dtype=np.float64)
    return SimpleNamespace(count=int(v.size), mean=float(np.mean(v)), min=float(np.min(v)), max=float(np.max(v)),
                           percentiles={q: float(np.percentile(v, q)) for q in qs})


def summarize(requests, *, ttft_slo=None, tpot_slo=None, percentiles=(50.0, 90.0, 95.0, 99.0)):
    if isinstance(requests, (str, bytes)) or not isinstance(requests, (list, tuple)):
        raise TypeError(f"requests: expected a list of (arrival, token_times), got {type(requests).__name__}")
    if not requests:
        raise ValueError("requests: expected at least one request")
    slos = {name: None if slo is None else _number(name, slo) for name, slo in
            (("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo))}
    for name, slo in slos.items():
        if slo is not None and slo < 0:
            raise ValueError(f"{name}: must be >= 0, got {slo}")
    if isinstance(percentiles, (str, bytes)) or not hasattr(percentiles, "__iter__"):
        raise TypeError(f"percentiles: expected a sequence of numbers, got {type(percentiles).__name__}")
    qs = tuple(_unit_interval("percentiles", q) for q in percentiles)
    timelines = []
    for i, r in enumerate(requests):
        if not isinstance(r, (list, tuple)) or len(r) != 2:
            raise ValueError(f"requests[{i}]: expected a pair (arrival, token_times), got {r!r}")
        timelines.append(_timeline(*r))
    per = [_request(a, t) for a, t in timelines]
    window = float(np.max([t[-1] for _, t in timelines]) - np.min([a for a, _ in timelines]))
    if not window > 0:
        raise ValueError("requests: the run lasts 0 seconds (last token time == first arrival)")
    tokens = int(np.sum([m.output_tokens for m in per]))
    ttft_slo, tpot_slo = slos["ttft_slo"], slos["tpot_slo"]
    good = sum(1 for m in per if (ttft_slo is None or m.ttft <= ttft_slo)
               and (tpot_slo is None or m.tpot is None or m.tpot <= tpot_slo))
    return SimpleNamespace(
        num_requests=len(per), output_tokens=tokens, duration=window,
        request_throughput=len(per) / window, output_throughput=tokens / window,
        good_requests=good, goodput=good / window,
        ttft=_distribution([m.ttft for m in per], qs),
        tpot=_distribution([m.tpot for m in per if m.tpot is not None], qs),
        itl=_distribution([g for m in per for g in m.itl], qs),
        e2e=_distribution([m.e2e for m in per], qs),
    )
