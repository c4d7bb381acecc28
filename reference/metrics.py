"""Serving metrics (course 01.11, 04.09-04.12): TTFT, TPOT, ITL, end-to-end latency, throughput,
goodput under TTFT/TPOT SLOs, and percentiles, from per-request timestamps.

A request is ``(arrival, token_times)``: when it arrived and when each of its output tokens was
emitted (seconds on one clock; ``token_times`` non-empty, non-decreasing, none before arrival).

Per request (:func:`request_metrics`), with ``t = token_times`` and ``n = len(t)``:
    TTFT = t[0] - arrival                     what a streaming-chat user waits before text appears
    ITL  = (t[1] - t[0], ..., t[n-1] - t[n-2])    the gaps between consecutive tokens (n - 1 of them)
    TPOT = (t[n-1] - t[0]) / (n - 1)          the mean ITL: the first token is NOT counted (its
                                              time is TTFT); None when n == 1 (undefined: no
                                              token after the first). None, not NaN: NaN would
                                              silently poison means and compare false to any SLO.
    E2E  = t[n-1] - arrival                   what a batch job waits for
Over a run (:func:`summarize`):
    duration           = last token time of any request - first arrival (the run window)
    request_throughput = requests / duration;  output_throughput = output tokens / duration
    goodput            = requests that met BOTH SLOs / duration, where a request meets the TTFT SLO
                         if TTFT <= ttft_slo and the TPOT SLO if TPOT <= tpot_slo; a one-token
                         request has no TPOT and meets any TPOT SLO (as in vLLM's benchmark,
                         which counts its TPOT as 0). An SLO of None (the default) imposes no
                         limit; an SLO of 0 is legal and strict: only a TTFT (TPOT) of exactly 0
                         meets it (tokens at the arrival instant, or all in one step).
    distributions      TTFT and E2E over requests; TPOT over requests with >= 2 tokens (None if
                       there are none); ITL pooled over all gaps of all requests (None if none).
                       Each holds the percentiles ``percentiles`` (default DEFAULT_PERCENTILES =
                       (50, 90, 95, 99)), keyed by float(q); ``percentiles=()`` is legal and gives
                       empty percentile dicts (it is not replaced by the default).
                       Note mean TPOT (per request) != mean ITL (per token) when lengths differ.
Percentiles (:func:`percentile`): linear interpolation between the closest ranks, numpy's default
``method="linear"`` (Hyndman-Fan type 7): sort the n values v, h = (n - 1) * q / 100, and return
v[floor(h)] + (h - floor(h)) * (v[floor(h) + 1] - v[floor(h)]). Chosen because it is what
numpy-based benchmark scripts (vLLM's benchmark_serving among them) report, so numbers compare;
it is continuous and monotone in q, p0 = min, p100 = max, and a single value is every percentile.
(Nearest-rank, the other common definition, always returns an observed value but jumps between
them.)

Bad input raises ValueError (an illegal value) or TypeError (the wrong kind of value: not a number,
not a sequence) whose message names the argument: an empty request list or one that is not a
sequence, a request that is not a pair, a zero-length run window (all ``requests``); an empty,
decreasing, non-finite or before-arrival ``token_times``; a non-finite ``arrival``; a negative or
non-finite SLO (``ttft_slo``/``tpot_slo``); a percentile outside [0, 100] (``q``/``percentiles``);
no values (``values``). A request that is not an ``(arrival, token_times)`` pair is a ValueError
naming ``requests``; in :func:`summarize`, a request whose fields are bad is rejected as
:func:`request_metrics` would reject it, naming the field (``arrival``/``token_times``). Bools
are not numbers. Inputs are never modified.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reference._checks import check_real

__all__ = ["request_metrics", "summarize", "percentile"]  # the contract: what an implementation must provide
__optional__ = []  # checked when an implementation provides them

DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)  # summarize's default: vocabulary, importable by a template


@dataclass(frozen=True)
class RequestMetrics:
    """One request's TTFT, TPOT (None for one token), ITL gaps, E2E (seconds) and token count."""

    ttft: float
    tpot: float | None
    itl: tuple[float, ...]
    e2e: float
    output_tokens: int


@dataclass(frozen=True)
class Distribution:
    """Summary of one metric's values: count, mean, min, max and ``percentiles[q]``."""

    count: int
    mean: float
    min: float
    max: float
    percentiles: dict[float, float]


@dataclass(frozen=True)
class Summary:
    """A run's counts, throughputs (per second of the run window), goodput and distributions."""

    num_requests: int
    output_tokens: int
    duration: float
    request_throughput: float   # requests / s
    output_throughput: float    # output tokens / s
    good_requests: int          # requests that met both SLOs
    goodput: float              # good requests / s
    ttft: Distribution
    tpot: Distribution | None
    itl: Distribution | None
    e2e: Distribution


def _is_array(x) -> bool:
    """A list, tuple, numpy array... of numbers (anything sized and iterable but a string)."""
    return not isinstance(x, (str, bytes)) and hasattr(x, "__len__") and hasattr(x, "__iter__")


def check_request(arrival, token_times) -> tuple[float, tuple[float, ...]]:
    """Validate one request; return it as floats."""
    a = check_real("arrival", arrival)
    if not _is_array(token_times):
        raise TypeError(f"token_times must be a sequence of numbers, got {type(token_times).__name__}")
    if len(token_times) == 0:
        raise ValueError("token_times must hold at least one token time (a request without output "
                         "tokens has no TTFT; count failed requests separately)")
    t = tuple(check_real("token_times", x) for x in token_times)
    if t[0] < a:
        raise ValueError(f"token_times[0] = {t[0]} is before arrival = {a}")
    for i in range(1, len(t)):
        if t[i] < t[i - 1]:
            raise ValueError(f"token_times must be non-decreasing: token_times[{i}] = {t[i]} < "
                             f"token_times[{i - 1}] = {t[i - 1]}")
    return a, t


def request_metrics(arrival: float, token_times: Sequence[float]) -> RequestMetrics:
    """TTFT, TPOT, ITL and E2E of one request (module docstring)."""
    arrival, t = check_request(arrival, token_times)
    n = len(t)
    first, last = t[0], t[-1]
    itl = tuple(t[i + 1] - t[i] for i in range(n - 1))
    tpot = (last - first) / (n - 1) if n > 1 else None
    return RequestMetrics(ttft=first - arrival, tpot=tpot, itl=itl, e2e=last - arrival, output_tokens=n)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) by linear interpolation between closest ranks
    (numpy's default method; module docstring)."""
    q = check_real("q", q, minimum=0.0, maximum=100.0)
    if not _is_array(values):
        raise TypeError(f"values must be a sequence of numbers, got {type(values).__name__}")
    if len(values) == 0:
        raise ValueError("values must hold at least one number")
    v = sorted(check_real("values", x) for x in values)
    h = (len(v) - 1) * q / 100.0
    lo = math.floor(h)
    if lo + 1 >= len(v):
        return v[-1]
    return v[lo] + (h - lo) * (v[lo + 1] - v[lo])


def distribution(values: Sequence[float], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> Distribution:
    """Count, mean, min, max and the requested percentiles of ``values``."""
    return Distribution(count=len(values), mean=math.fsum(values) / len(values), min=min(values),
                        max=max(values), percentiles={float(q): percentile(values, q) for q in percentiles})


def meets_slos(m: RequestMetrics, ttft_slo: float | None, tpot_slo: float | None) -> bool:
    """Both targets met (a one-token request has no TPOT and meets any TPOT target)."""
    ttft_ok = ttft_slo is None or m.ttft <= ttft_slo
    tpot_ok = tpot_slo is None or m.tpot is None or m.tpot <= tpot_slo
    return ttft_ok and tpot_ok


def summarize(requests: Sequence[tuple[float, Sequence[float]]], *, ttft_slo: float | None = None,
              tpot_slo: float | None = None,
              percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> Summary:
    """Throughput, goodput and metric distributions of a run (module docstring)."""
    if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence):
        raise TypeError(f"requests must be a sequence of (arrival, token_times), got {type(requests).__name__}")
    if len(requests) == 0:
        raise ValueError("requests must hold at least one (arrival, token_times)")
    check_real("ttft_slo", ttft_slo, minimum=0.0, allow_none=True)
    check_real("tpot_slo", tpot_slo, minimum=0.0, allow_none=True)
    if not _is_array(percentiles):
        raise TypeError(f"percentiles must be a sequence of numbers, got {type(percentiles).__name__}")
    percentiles = tuple(check_real("percentiles", q, minimum=0.0, maximum=100.0) for q in percentiles)
    checked = []
    for i, req in enumerate(requests):
        if not isinstance(req, Sequence) or len(req) != 2:
            raise ValueError(f"requests[{i}] must be a pair (arrival, token_times), got {req!r}")
        checked.append(check_request(*req))
    per_request = [request_metrics(a, t) for a, t in checked]
    start = min(a for a, _ in checked)
    end = max(t[-1] for _, t in checked)
    duration = end - start
    if duration <= 0:
        raise ValueError("requests: the run window (last token - first arrival) is zero")
    tokens = sum(m.output_tokens for m in per_request)
    good = sum(1 for m in per_request if meets_slos(m, ttft_slo, tpot_slo))
    tpots = [m.tpot for m in per_request if m.tpot is not None]
    gaps = [g for m in per_request for g in m.itl]
    return Summary(
        num_requests=len(per_request), output_tokens=tokens, duration=duration,
        request_throughput=len(per_request) / duration, output_throughput=tokens / duration,
        good_requests=good, goodput=good / duration,
        ttft=distribution([m.ttft for m in per_request], percentiles),
        tpot=distribution(tpots, percentiles) if tpots else None,
        itl=distribution(gaps, percentiles) if gaps else None,
        e2e=distribution([m.e2e for m in per_request], percentiles),
    )
