"""Lesson 03.10's claim, checked with the reference simulation (reference/hit_rate.py ``simulate``):
"a prefix-cache-aware scheduler delivers 57x faster response and 2x throughput on identical
hardware". Not a test: prints tables, writes docs/results/hit_rate_sim.json.

    PYTHONPATH=. python3 spec_tests/bench/hit_rate_sim.py            # the full sweep (~1-2 min)
    PYTHONPATH=. python3 spec_tests/bench/hit_rate_sim.py --quick    # a smaller trace
    PYTHONPATH=. python3 spec_tests/bench/hit_rate_sim.py --designs  # hash blocks vs radix (lesson 03.09)
    PYTHONPATH=. python3 spec_tests/bench/hit_rate_sim.py --growth   # response ratio vs run length

Workload (seeded): an agent-like trace (spec_tests/hit_rate/strategies.py ``agent_trace``):
``agents`` conversations share one system prompt of ``system`` tokens; turn k of an agent sends
its whole history (system prompt + k chunks of ``turn`` tokens), agents interleaved round robin.
Requests arrive open loop, evenly spaced at rate lambda (request j at j / lambda), in that order.

One server (the reference model: one prefill at a time, no batching, decode not modelled), the
default cost model (an 8B model on one H100: a = 4.8 ms, b = 32 us/token, c = 1.1 ns/pair),
block size 16, a radix cache of ``capacity`` tokens with LRU eviction. The cache is
optimized/radix.py's tree (same contract as reference/radix.py, checked equal on a small trace
below): the naive reference store is too slow for 8k-token prompts. Two policies: FCFS (cache-
oblivious, arrival order) and LPM (longest cached prefix first, SGLang's default policy).

Load: lambda = rho x mu_fcfs, where mu_fcfs is FCFS's service rate when every request waits from
time 0 (requests / makespan). Reported per capacity and rho: hit rates, mean and p99 response
(time to first token), throughput (requests / (last finish - first arrival)), and the ratios.

``--growth`` (writes docs/results/hit_rate_growth.json): 1, 2, 4, 8 sessions of the 32-agent
trace back to back (same system prompt, new conversations), capacity 32,000, arrivals at
1.5 x mu_fcfs of one session: how the FCFS/LPM response ratio depends on how long the load lasts.

``--designs`` (writes docs/results/hit_rate_designs.json): the two cache designs on the same
traces, served in order: vLLM-style hash-chained full blocks (optimized/prefix_cache.py: per
request lookup, allocate, mark_computed, free) and SGLang-style radix tree (optimized/radix.py via
``replay``), block/page 16 (and the radix at page 1). Hit rate (unbounded, and a 64k-token
capacity: the block pool has 4,000 blocks, the radix evicts LRU leaves past 64,000 tokens);
lookup time (each prompt of the trace looked up in the final cache: min of 5 calls, median over
prompts; PrefixCache.lookup vs RadixCache.match_prefix); memory of the index (tracemalloc: Python
bytes allocated while the cache is built and still held afterwards; the KV itself is not counted).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc

import optimized.prefix_cache as opc
import optimized.radix as opt
from reference.hit_rate import PrefillCost, hit_rates, replay, simulate
from reference.radix import RadixCache as RefRadix
from spec_tests.hit_rate.strategies import agent_trace

BLOCK = 16
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "results", "hit_rate_sim.json")


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]


def run(trace, arrivals, policy, capacity):
    reqs = list(zip(arrivals, trace))
    t = time.perf_counter()
    r = simulate(reqs, policy=policy, block_size=BLOCK, capacity=capacity,
                 cache=opt.RadixCache(page_size=BLOCK))
    rates = hit_rates(trace, r["hits"])
    return {"policy": policy, "token_hit_rate": rates["token_hit_rate"],
            "request_hit_rate": rates["request_hit_rate"], "prefill_tokens": rates["prefill_tokens"],
            "mean_response_s": r["mean_response"], "p99_response_s": p99(r["response"]),
            "throughput_rps": r["throughput"], "sim_seconds": time.perf_counter() - t}


def min_us(fn, reps: int = 5) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter_ns()
        fn()
        best = min(best, time.perf_counter_ns() - t)
    return best / 1e3


def blocks_replay(trace, num_blocks):
    """Serve the trace through a hash-block PrefixCache: hits per request, and the cache."""
    c = opc.PrefixCache(num_blocks, BLOCK)
    hits = []
    for i, p in enumerate(trace):
        hits.append(c.allocate(i, p))
        c.mark_computed(i, len(p))
        c.free(i)
    return hits, c


def designs():
    rows = []
    traces = {
        "agent 32x8 (system 2000, turns of 300)": agent_trace(agents=32, turns=8, system=2000, turn_tokens=300, seed=0),
        "agent 8x4 (system 1000, turns of 200), grouped": agent_trace(agents=8, turns=4, system=1000, turn_tokens=200,
                                                                     seed=1, interleave=False),
    }
    for tname, trace in traces.items():
        total_blocks = sum(-(-len(p) // BLOCK) for p in trace)
        for cap in (None, 64_000):
            nb = total_blocks if cap is None else cap // BLOCK
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            bh, bc = blocks_replay(trace, nb)
            bmem = tracemalloc.get_traced_memory()[0] - base
            tracemalloc.stop()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            rc = opt.RadixCache(page_size=BLOCK)
            rh = replay(trace, block_size=BLOCK, capacity=cap, cache=rc)
            rmem = tracemalloc.get_traced_memory()[0] - base
            tracemalloc.stop()
            r1 = opt.RadixCache(page_size=1)
            r1h = replay(trace, block_size=1, capacity=cap, cache=r1)
            qs = [list(p) for p in trace]
            b_us = statistics.median(min_us(lambda q=q: bc.lookup(q)) for q in qs)
            r_us = statistics.median(min_us(lambda q=q: rc.match_prefix(q[:-1])) for q in qs)
            row = {"trace": tname, "requests": len(trace), "prompt_tokens": sum(map(len, trace)), "capacity": cap,
                   "blocks16": {"token_hit_rate": hit_rates(trace, bh)["token_hit_rate"], "lookup_us": b_us,
                                "index_bytes": bmem, "cached_tokens": sum(bc.is_cached(b) for b in range(nb)) * BLOCK},
                   "radix16": {"token_hit_rate": hit_rates(trace, rh)["token_hit_rate"], "lookup_us": r_us,
                               "index_bytes": rmem, "cached_tokens": rc.total},
                   "radix1": {"token_hit_rate": hit_rates(trace, r1h)["token_hit_rate"], "cached_tokens": r1.total},
                   "same_hits_blocks_vs_radix16": bh == rh}
            rows.append(row)
            print(f"{tname}, capacity {cap}: hit rate blocks16 {row['blocks16']['token_hit_rate']:.3f} / radix16 "
                  f"{row['radix16']['token_hit_rate']:.3f} / radix1 {row['radix1']['token_hit_rate']:.3f} "
                  f"(same hits blocks vs radix16: {bh == rh}); lookup {b_us:.0f} us vs {r_us:.0f} us; index "
                  f"{bmem / 1e6:.2f} MB vs {rmem / 1e6:.2f} MB; cached tokens {row['blocks16']['cached_tokens']} vs {rc.total}")
    out = {"command": "PYTHONPATH=. python3 spec_tests/bench/hit_rate_sim.py --designs", "rows": rows,
           "load_avg_1min": os.getloadavg()[0], "python": sys.version.split()[0]}
    path = OUT.replace("hit_rate_sim.json", "hit_rate_designs.json")
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"wrote {os.path.normpath(path)} (load {out['load_avg_1min']:.2f})")


def batches(k: int):
    """``k`` sessions of the 32-agent x 8-turn trace one after another: the same system prompt,
    every session's conversations new (its chunk token ids shifted by 10**7 per session)."""
    one = agent_trace(agents=32, turns=8, system=2000, turn_tokens=300, seed=0)
    return [[t if t < 30000 else t + b * 10**7 for t in p] for b in range(k) for p in one]


def growth():
    rows = []
    cap = 32_000
    mu = run(batches(1), [0.0] * 256, "fcfs", cap)["throughput_rps"]
    lam = 1.5 * mu
    print(f"capacity {cap}, lambda = 1.5 x mu_fcfs = {lam:.1f} req/s")
    print(f"{'sessions':>8} {'requests':>8} {'FCFS mean s':>11} {'LPM mean s':>10} {'resp x':>7} "
          f"{'FCFS p99':>8} {'LPM p99':>8} {'FCFS rps':>8} {'LPM rps':>8} {'thru x':>7}")
    for k in (1, 2, 4, 8):
        trace = batches(k)
        arrivals = [j / lam for j in range(len(trace))]
        f, l = run(trace, arrivals, "fcfs", cap), run(trace, arrivals, "lpm", cap)
        row = {"sessions": k, "requests": len(trace), "fcfs": f, "lpm": l,
               "fcfs_over_lpm_mean_response": f["mean_response_s"] / l["mean_response_s"],
               "lpm_over_fcfs_throughput": l["throughput_rps"] / f["throughput_rps"]}
        rows.append(row)
        print(f"{k:>8} {len(trace):>8} {f['mean_response_s']:11.3f} {l['mean_response_s']:10.3f} "
              f"{row['fcfs_over_lpm_mean_response']:7.1f} {f['p99_response_s']:8.2f} {l['p99_response_s']:8.2f} "
              f"{f['throughput_rps']:8.1f} {l['throughput_rps']:8.1f} {row['lpm_over_fcfs_throughput']:7.2f}")
    path = OUT.replace("hit_rate_sim.json", "hit_rate_growth.json")
    with open(path, "w") as fh:
        json.dump({"command": "PYTHONPATH=. python3 spec_tests/bench/hit_rate_sim.py --growth", "capacity": cap,
                   "lambda_rps": lam, "rho": 1.5, "session": "32 agents x 8 turns, system 2000, turns of 300",
                   "block_size": BLOCK, "rows": rows}, fh, indent=1)
    print(f"wrote {os.path.normpath(path)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--designs", action="store_true")
    ap.add_argument("--growth", action="store_true")
    args = ap.parse_args()
    if args.designs:
        return designs()
    if args.growth:
        return growth()
    shape = (dict(agents=8, turns=4, system=1000, turn_tokens=200) if args.quick else
             dict(agents=32, turns=8, system=2000, turn_tokens=300))
    trace = agent_trace(**shape, seed=0, interleave=True)
    n = len(trace)
    distinct = shape["system"] + shape["agents"] * shape["turns"] * shape["turn_tokens"]
    small = agent_trace(agents=3, turns=3, system=40, turn_tokens=20, seed=1)
    for cap in (None, 64, 200):  # the tree and the naive store agree (the contract's cache)
        assert replay(small, block_size=BLOCK, capacity=cap, cache=opt.RadixCache(page_size=BLOCK)) == \
            replay(small, block_size=BLOCK, capacity=cap, cache=RefRadix(page_size=BLOCK))
    caps = ([None, 4000, 8000] if args.quick else [None, 16_000, 32_000, 64_000])
    rhos = (0.5, 0.9, 1.1, 1.5, 3.0)
    print(f"trace: {n} requests, {shape}, prompts {min(map(len, trace))}-{max(map(len, trace))} tokens, "
          f"{sum(map(len, trace))} prompt tokens, {distinct} distinct; block {BLOCK}; cost {PrefillCost()}")
    rows = []
    for cap in caps:
        at0 = [0.0] * n
        sat = {p: run(trace, at0, p, cap) for p in ("fcfs", "lpm")}
        mu = sat["fcfs"]["throughput_rps"]
        for p in ("fcfs", "lpm"):
            rows.append({"capacity": cap, "rho": "all at t=0", "lambda_rps": None, **sat[p]})
        for rho in rhos:
            lam = rho * mu
            arrivals = [j / lam for j in range(n)]
            for p in ("fcfs", "lpm"):
                rows.append({"capacity": cap, "rho": rho, "lambda_rps": lam, **run(trace, arrivals, p, cap)})
    hdr = (f"{'capacity':>9} {'load':>10} {'policy':>5} {'tok hit':>8} {'req hit':>8} {'mean resp s':>11} "
           f"{'p99 resp s':>10} {'thru rps':>8} {'resp x':>7} {'thru x':>7}")
    print(hdr)
    summary = []
    for i in range(0, len(rows), 2):
        f, l = rows[i], rows[i + 1]
        rx = f["mean_response_s"] / l["mean_response_s"]
        tx = l["throughput_rps"] / f["throughput_rps"]
        summary.append({"capacity": f["capacity"], "rho": f["rho"], "lambda_rps": f["lambda_rps"],
                        "fcfs_over_lpm_mean_response": rx, "lpm_over_fcfs_throughput": tx,
                        "fcfs_over_lpm_p99_response": f["p99_response_s"] / l["p99_response_s"]})
        for r, extra in ((f, ""), (l, f"{rx:7.1f} {tx:7.2f}")):
            print(f"{str(r['capacity']):>9} {str(r['rho']):>10} {r['policy']:>5} {r['token_hit_rate']:8.3f} "
                  f"{r['request_hit_rate']:8.3f} {r['mean_response_s']:11.3f} {r['p99_response_s']:10.3f} "
                  f"{r['throughput_rps']:8.2f} {extra}")
    out = {"command": "PYTHONPATH=. python3 spec_tests/bench/hit_rate_sim.py" + (" --quick" if args.quick else ""),
           "trace": {**shape, "requests": n, "prompt_tokens": sum(map(len, trace)), "distinct_tokens": distinct,
                     "interleave": True, "arrivals": "evenly spaced at lambda = rho x mu_fcfs"},
           "block_size": BLOCK, "cost": PrefillCost()._asdict(), "rows": rows, "ratios": summary,
           "python": sys.version.split()[0], "machine": platform.machine()}
    if not args.quick:
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(OUT, "w") as fh:
            json.dump(out, fh, indent=1)
        print(f"wrote {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
