"""Every small trace (issue 22, bounded-exhaustive exploration).

``replay``: every trace of up to three prompts over a token alphabet of two (the first token 0:
the tokens are symmetric), prompts of one to three tokens, block sizes 1 and 2, capacities None
and 0 to 4: the implementation's hits for the trace equal the reference's, request by request,
and ``hit_rates`` of the trace and those hits equals its definition computed here. Every trace is
replayed (``replay`` takes a whole trace; its prefixes are the shorter traces): no two are merged
by the state they leave, because a wrong implementation's cache need not be in the reference's
state (a cache that skips the eviction after a hit leaves the reference's state after [0], [0, 1]
equal to the state after [0], and a dedup by that state would never grow that trace).

``simulate``: every request list of two and three prompts of one or two tokens (first token 0)
with arrivals 0 or 2 s, both policies, capacities None and 1 to 3, under a cost model whose every
prefill takes exactly 1 s (``PrefillCost(a=1, b=0, c=0)``), so that the server idles, and a third
request arrives exactly when the server frees up: the order, hits, start, finish and response
times equal the reference's (1344 calls of each).

Traces per block/capacity setting (measured): 7 of one request, 98 of two, 1372 of three (dev:
1372 x 12 replays, about 2 s in-process, 6 s for an isolated submission, whose every call crosses
the process boundary); thorough: four requests (19208 each).
"""
from __future__ import annotations

import itertools
import math

from hypothesis import settings

from reference.hit_rate import PrefillCost

PROMPTS = [p for n in (1, 2, 3) for p in itertools.product((0, 1), repeat=n)]
CONFIGS = [(b, c) for b in (1, 2) for c in (None, 0, 1, 2, 3, 4)]
UNIT = PrefillCost(a=1.0, b=0.0, c=0.0)


def depth() -> int:
    return 4 if settings.get_current_profile_name() == "thorough" else 3


def rates(trace, hits) -> dict:
    """hit_rates by its definition (reference/hit_rate.py's docstring)."""
    n, tokens, hit = len(trace), sum(len(p) for p in trace), sum(hits)
    return {"requests": n, "prompt_tokens": tokens, "hit_tokens": hit, "prefill_tokens": tokens - hit,
            "token_hit_rate": hit / tokens if n else 0.0,
            "request_hit_rate": sum(1 for h in hits if h >= 1) / n if n else 0.0}


def traces(n: int):
    """Every trace of ``n`` prompts whose first token is 0."""
    for trace in itertools.product(PROMPTS, repeat=n):
        if trace[0][0] == 0:
            yield [list(p) for p in trace]


def test_every_small_trace_replays_as_the_reference(impl, reference):
    """Every trace of the module docstring, every block size and capacity: the same hits as the
    reference, request by request, and hit_rates by definition."""
    replay, want_replay, hit_rates = impl.get("replay"), reference.get("replay"), impl.get("hit_rates")
    for block, capacity in CONFIGS:
        for t in traces(depth()):
            want = want_replay(t, block_size=block, capacity=capacity)
            got = list(replay(t, block_size=block, capacity=capacity))
            assert got == want, f"replay({t}, block_size={block}, capacity={capacity}) = {got}; the reference serves {want}"
            r, w = hit_rates(t, want), rates(t, want)
            assert set(r) >= set(w) and all(math.isclose(r[k], w[k]) for k in w), (
                f"hit_rates({t}, {want}) = {r}; by definition {w}")


def test_every_small_request_list_simulates_as_the_reference(impl, reference):
    """Every request list of the module docstring, both policies, capacities None and 1 to 3, unit
    prefill cost (ties of arrival and finish times are exact): the same schedule as the reference."""
    simulate, want_simulate = impl.get("simulate"), reference.get("simulate")
    prompts = [p for n in (1, 2) for p in itertools.product((0, 1), repeat=n)]
    for n in (2, 3):
        for trace in itertools.product(prompts, repeat=n):
            if trace[0][0] != 0:
                continue
            for arrivals in itertools.product((0.0, 2.0), repeat=n):
                requests = [(a, list(p)) for a, p in zip(arrivals, trace)]
                for policy in ("fcfs", "lpm"):
                    for capacity in (None, 1, 2, 3):
                        got = simulate(requests, policy=policy, capacity=capacity, cost=UNIT)
                        want = want_simulate(requests, policy=policy, capacity=capacity, cost=UNIT)
                        where = f"simulate({requests}, policy={policy!r}, capacity={capacity}, cost={UNIT})"
                        for k in ("order", "hits"):
                            assert list(got[k]) == want[k], f"{where}: {k} {list(got[k])}; the reference: {want[k]}"
                        for k in ("start", "finish", "response"):
                            assert all(math.isclose(x, y) for x, y in zip(got[k], want[k])), (
                                f"{where}: {k} {list(got[k])}; the reference: {want[k]}")
                        for k in ("mean_response", "throughput"):
                            assert math.isclose(got[k], want[k]), f"{where}: {k} {got[k]}; the reference: {want[k]}"
