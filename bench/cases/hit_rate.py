"""Lesson 03.10's claim, checked with the reference simulation (reference/hit_rate.py
``simulate``): "a prefix-cache-aware scheduler delivers 57x faster response and 2x throughput on
identical hardware" (docs/hit_rate.md). Simulations, deterministic: metric "value".

Workload (seeded): an agent-like trace (spec_tests/hit_rate/strategies.py ``agent_trace``):
``agents`` conversations share one system prompt of ``system`` tokens; turn k of an agent sends
its whole history (system prompt + k chunks of ``turn_tokens`` tokens), agents interleaved round
robin. Requests arrive open loop, evenly spaced at rate lambda (request j at j / lambda).

One server (one prefill at a time, no batching, decode not modelled), the default cost model (an
8B model on one H100), block size 16, a radix cache of ``capacity`` tokens with LRU eviction:
optimized/radix.py's tree (same contract as reference/radix.py, checked equal on a small trace).
Policies: FCFS (arrival order) and LPM (longest cached prefix first, SGLang's default). Load:
lambda = rho x mu_fcfs, mu_fcfs = FCFS's rate when every request waits from time 0.

* "sweep, capacity C": per rho (and all at t = 0), both policies' hit rates, mean and p99 response
  (time to first token), throughput, and the FCFS/LPM ratios;
* "growth": 1, 2, 4, 8 sessions of the 32-agent trace back to back (capacity 32,000, arrivals at
  1.5 x mu_fcfs of one session): how the response ratio depends on how long the load lasts;
* "designs: <trace>, capacity C": hash-chained full blocks (optimized/prefix_cache.py) against
  the radix tree (page 16, and page 1) on the same trace served in order: hit rates, lookup time
  (each prompt looked up in the final cache: min of 5 calls, median over prompts) and the memory
  of the index (tracemalloc: bytes allocated while the cache is built and still held).
"""
from __future__ import annotations

import statistics
import time
import tracemalloc

import optimized.prefix_cache as opc
import optimized.radix as opt
from bench.runner import Case, P
from bench.timing import time_ms
from reference.hit_rate import PrefillCost, hit_rates, replay, simulate
from reference.radix import RadixCache as RefRadix
from spec_tests.hit_rate.strategies import agent_trace

BLOCK = 16
FULL = dict(agents=32, turns=8, system=2000, turn_tokens=300)
QUICK = dict(agents=8, turns=4, system=1000, turn_tokens=200)
TINY = dict(agents=3, turns=3, system=40, turn_tokens=20)
RHOS = (0.5, 0.9, 1.1, 1.5, 3.0)


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]


def run(trace, arrivals, policy, capacity):
    r = simulate(list(zip(arrivals, trace)), policy=policy, block_size=BLOCK, capacity=capacity,
                 cache=opt.RadixCache(page_size=BLOCK))
    rates = hit_rates(trace, r["hits"])
    return {"policy": policy, "token_hit_rate": rates["token_hit_rate"],
            "request_hit_rate": rates["request_hit_rate"], "prefill_tokens": rates["prefill_tokens"],
            "mean_response_s": r["mean_response"], "p99_response_s": p99(r["response"]),
            "throughput_rps": r["throughput"]}


def sweep(shape: dict, capacity, rhos=RHOS) -> dict:
    trace = agent_trace(**shape, seed=0, interleave=True)
    n = len(trace)
    sat = {p: run(trace, [0.0] * n, p, capacity) for p in ("fcfs", "lpm")}
    mu = sat["fcfs"]["throughput_rps"]
    rows = [{"rho": "all at t=0", "lambda_rps": None, **sat[p]} for p in ("fcfs", "lpm")]
    for rho in rhos:
        arrivals = [j / (rho * mu) for j in range(n)]
        rows += [{"rho": rho, "lambda_rps": rho * mu, **run(trace, arrivals, p, capacity)} for p in ("fcfs", "lpm")]
    ratios = [{"rho": f["rho"], "fcfs_over_lpm_mean_response": f["mean_response_s"] / l["mean_response_s"],
               "lpm_over_fcfs_throughput": l["throughput_rps"] / f["throughput_rps"],
               "fcfs_over_lpm_p99_response": f["p99_response_s"] / l["p99_response_s"]}
              for f, l in zip(rows[::2], rows[1::2])]
    return {"requests": n, "prompt_tokens": sum(map(len, trace)),
            "distinct_tokens": shape["system"] + shape["agents"] * shape["turns"] * shape["turn_tokens"],
            "cost": dict(zip("abc", PrefillCost())), "rows": rows, "ratios": ratios}


def sessions(k: int):
    """``k`` sessions of the 32-agent x 8-turn trace one after another: the same system prompt,
    every session's conversations new (its chunk token ids shifted by 10**7 per session)."""
    one = agent_trace(**FULL, seed=0)
    return [[t if t < 30000 else t + b * 10**7 for t in p] for b in range(k) for p in one]


def growth(capacity: int = 32_000, counts=(1, 2, 4, 8), rho: float = 1.5) -> dict:
    lam = rho * run(sessions(1), [0.0] * 256, "fcfs", capacity)["throughput_rps"]
    rows = []
    for k in counts:
        trace = sessions(k)
        arrivals = [j / lam for j in range(len(trace))]
        f, l = run(trace, arrivals, "fcfs", capacity), run(trace, arrivals, "lpm", capacity)
        rows.append({"sessions": k, "requests": len(trace), "fcfs": f, "lpm": l,
                     "fcfs_over_lpm_mean_response": f["mean_response_s"] / l["mean_response_s"],
                     "lpm_over_fcfs_throughput": l["throughput_rps"] / f["throughput_rps"]})
    return {"lambda_rps": lam, "rho": rho, "rows": rows}


def _memory(build):
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    out = build()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return out, used


def designs(shape: dict, seed: int, interleave: bool, capacity) -> dict:
    trace = agent_trace(**shape, seed=seed, interleave=interleave)
    nb = sum(-(-len(p) // BLOCK) for p in trace) if capacity is None else capacity // BLOCK

    def blocks():
        c, hits = opc.PrefixCache(nb, BLOCK), []
        for i, p in enumerate(trace):
            hits.append(c.allocate(i, p))
            c.mark_computed(i, len(p))
            c.free(i)
        return hits, c

    def radix():
        c = opt.RadixCache(page_size=BLOCK)
        return replay(trace, block_size=BLOCK, capacity=capacity, cache=c), c
    (bh, bc), bmem = _memory(blocks)
    (rh, rc), rmem = _memory(radix)
    r1 = opt.RadixCache(page_size=1)
    r1h = replay(trace, block_size=1, capacity=capacity, cache=r1)
    fastest = dict(repeats=5, budget_ms=None, min_warmup=0, warmup_ms=0)
    b_us = statistics.median(time_ms(lambda q=q: bc.lookup(q), **fastest).min_ms * 1e3 for q in trace)
    r_us = statistics.median(time_ms(lambda q=q: rc.match_prefix(q[:-1]), **fastest).min_ms * 1e3 for q in trace)
    return {"requests": len(trace), "prompt_tokens": sum(map(len, trace)),
            "blocks16": {"token_hit_rate": hit_rates(trace, bh)["token_hit_rate"], "lookup_us": b_us,
                         "index_bytes": bmem, "cached_tokens": sum(bc.is_cached(b) for b in range(nb)) * BLOCK},
            "radix16": {"token_hit_rate": hit_rates(trace, rh)["token_hit_rate"], "lookup_us": r_us,
                        "index_bytes": rmem, "cached_tokens": rc.total},
            "radix1": {"token_hit_rate": hit_rates(trace, r1h)["token_hit_rate"], "cached_tokens": r1.total},
            "same_hits_blocks_vs_radix16": bh == rh}


def _label(cap) -> str:
    return "unbounded" if cap is None else str(cap)


DESIGN_TRACES = {"agent 32x8 (system 2000, turns of 300)": (FULL, 0, True),
                 "agent 8x4 (system 1000, turns of 200), grouped": (QUICK, 1, False)}
CPU = ("cpu",)
CASES = (
    [Case(f"sweep, capacity {_label(cap)}", dict(trace=FULL, capacity=cap, block=BLOCK, rhos=list(RHOS)),
          (P("sweep"),), metric="value", devices=CPU) for cap in (None, 16_000, 32_000, 64_000)]
    + [Case("growth, capacity 32000", dict(capacity=32_000, sessions=[1, 2, 4, 8], rho=1.5, block=BLOCK),
            (P("growth"),), metric="value", devices=CPU)]
    + [Case(f"designs: {name}, capacity {_label(cap)}", dict(trace=name, capacity=cap, block=BLOCK),
            (P("designs"),), metric="value", devices=CPU) for name in DESIGN_TRACES for cap in (None, 64_000)]
    + [Case(f"sweep (quick trace), capacity {_label(cap)}", dict(trace=QUICK, capacity=cap, block=BLOCK,
                                                                  rhos=list(RHOS)),
            (P("sweep"),), metric="value", devices=CPU, tags=("quick",)) for cap in (None, 4000, 8000)]
    + [Case("sweep (tiny trace), capacity 200", dict(trace=TINY, capacity=200, block=BLOCK, rhos=[1.5]),
            (P("sweep"),), metric="value", devices=CPU, tags=("smoke",))])


def setup(case, device):
    return None


def check(problem, case, device) -> dict:
    """The tree and the naive store agree on a small trace (the contract's cache)."""
    small = agent_trace(**TINY, seed=1)
    for cap in (None, 64, 200):
        if replay(small, block_size=BLOCK, capacity=cap, cache=opt.RadixCache(page_size=BLOCK)) != \
                replay(small, block_size=BLOCK, capacity=cap, cache=RefRadix(page_size=BLOCK)):
            return dict(ok=False, what=f"optimized and reference radix caches differ at capacity {cap}")
    return dict(ok=True, what="optimized radix == reference radix on a small trace")


BUILDERS = {
    "sweep": lambda _, case, device: lambda: sweep(case.params["trace"], case.params["capacity"], case.params["rhos"]),
    "growth": lambda _, case, device: lambda: growth(case.params["capacity"], case.params["sessions"],
                                                     case.params["rho"]),
    "designs": lambda _, case, device: lambda: designs(*DESIGN_TRACES[case.params["trace"]], case.params["capacity"]),
}
