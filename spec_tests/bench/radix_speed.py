"""Radix prefix cache: ``match_prefix`` time as the cache grows from 100 to 10,000 sequences, the
tree (optimized/radix.py) against the naive store (reference/radix.py), on the CPU.

    PYTHONPATH=. python3 spec_tests/bench/radix_speed.py                       # the full curve
    PYTHONPATH=. python3 spec_tests/bench/radix_speed.py --sizes 100,1000      # a quick look
    PYTHONPATH=. python3 spec_tests/bench/radix_speed.py --plot-only           # redraw the PNG

Workload (seeded, page size 1): 8 system prompts of 200-800 tokens; cached sequence ``i`` is
prompt ``i % 8`` followed by its own tokens, 1,000-2,000 tokens in all (token ids < 128,000, as a
Llama-3-sized vocabulary). Both caches are filled by their own ``insert``, one sequence at a
time, with the same slots; the curve is measured at each size on the way up. Queries, as a
tokenizer would hand them (fresh int objects, not the cached lists):

- ``hit``: a cached sequence, whole (1,000-2,000 tokens matched);
- ``next turn``: a cached sequence and 200 new tokens (the conversation goes on);
- ``new request``: a system prompt and 1,000 new tokens (only the prompt matches).

Timing. Each optimized call is timed alone (``perf_counter_ns``), the minimum of 15 repeats of the
same query (this 2-core machine is shared and loaded: the minimum drops the time slices other
processes take), and the median over 150 queries (50 of each kind) is reported, with the 90th
percentile; ``batch`` is the best of 5 passes over all queries divided by their number (it
includes the load). A repeated query changes nothing the timing sees (its splits happened on the
first call). The reference is timed once per query on 6 queries (2 of each kind) at each size: it
scans every cached sequence. Every query's result (length and slots) is checked equal between
the two before timing. Writes docs/results/radix_speed_cpu.json and docs/img/radix_match.png.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import struct
import sys
import time

import optimized.radix as opt
import reference.radix as ref

SIZES = (100, 300, 1000, 3000, 10000)
PROMPTS, VOCAB = 8, 128_000
RESULT = "docs/results/radix_speed_cpu.json"
PLOT = "docs/img/radix_match.png"


def workload(n: int, seed: int = 0):
    rng = random.Random(seed)
    prompts = [[rng.randrange(VOCAB) for _ in range(rng.randint(200, 800))] for _ in range(PROMPTS)]
    seqs = []
    for i in range(n):
        p = prompts[i % PROMPTS]
        seqs.append(p + [rng.randrange(VOCAB) for _ in range(rng.randint(1000, 2000) - len(p))])
    return rng, prompts, seqs


def fresh(tokens: list[int]) -> list[int]:
    """The same ids as new int objects (a tokenizer's output never shares the cache's objects)."""
    return list(struct.unpack(f"{len(tokens)}I", struct.pack(f"{len(tokens)}I", *tokens)))


def queries(rng, prompts, seqs, n_cached: int, per_kind: int):
    out = []
    for _ in range(per_kind):
        s = seqs[rng.randrange(n_cached)]
        out.append(("hit", fresh(s)))
        s = seqs[rng.randrange(n_cached)]
        out.append(("next turn", fresh(s + [rng.randrange(VOCAB) for _ in range(200)])))
        p = prompts[rng.randrange(PROMPTS)]
        out.append(("new request", fresh(p + [rng.randrange(VOCAB) for _ in range(1000)])))
    return out


def per_call_us(cache, qs, repeats: int = 15) -> list[float]:
    out = []
    for _, q in qs:
        best = min(_timed(cache, q) for _ in range(repeats))
        out.append(best / 1e3)
    return out


def _timed(cache, q) -> int:
    t0 = time.perf_counter_ns()
    cache.match_prefix(q)
    return time.perf_counter_ns() - t0


def batch_us(cache, qs, passes: int = 5) -> float:
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        for _, q in qs:
            cache.match_prefix(q)
        best = min(best, time.perf_counter() - t0)
    return best / len(qs) * 1e6


def same(a, b, q) -> None:
    ra, rb = a.match_prefix(q), b.match_prefix(q)
    assert ra[0] == rb[0] and list(ra[1]) == list(rb[1]), ("optimized and reference disagree", ra[0], rb[0])


def run(sizes, with_reference: bool = True) -> dict:
    rng, prompts, seqs = workload(max(sizes))
    tree = opt.RadixCache()
    naive = ref.RadixCache() if with_reference else None
    rows, filled, slot = [], 0, 0
    build = {"optimized_s": 0.0, "reference_s": 0.0}
    for n in sorted(sizes):
        for s in seqs[filled:n]:
            slots = list(range(slot, slot + len(s)))
            slot += len(s)
            t0 = time.perf_counter()
            tree.insert(s, slots)
            build["optimized_s"] += time.perf_counter() - t0
            if naive is not None:
                t0 = time.perf_counter()
                naive.insert(s, slots)
                build["reference_s"] += time.perf_counter() - t0
        filled = n
        qs = queries(rng, prompts, seqs, n, per_kind=50)
        ref_qs = qs[:6]
        if naive is not None:
            for _, q in ref_qs:
                same(tree, naive, q)
        for _, q in qs:
            tree.match_prefix(q)   # first calls: their splits and touches
        times = per_call_us(tree, qs)
        kinds = {k: statistics.median(t for (kk, _), t in zip(qs, times) if kk == k) for k, _ in qs[:3]}
        row = {"cached_sequences": n, "cached_tokens": tree.total,
               "match_us_median": statistics.median(times),
               "match_us_p90": statistics.quantiles(times, n=10)[-1],
               "match_us_by_kind": kinds, "match_us_batch": batch_us(tree, qs),
               "query_tokens_mean": statistics.mean(len(q) for _, q in qs)}
        if naive is not None:
            ref_times = []
            for _, q in ref_qs:
                t0 = time.perf_counter()
                naive.match_prefix(q)
                ref_times.append((time.perf_counter() - t0) * 1e6)
            row["reference_us_median"] = statistics.median(ref_times)
            row["speedup"] = row["reference_us_median"] / row["match_us_median"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return {"rows": rows, "build_seconds": build}


def plot(result: dict, dst: str = PLOT) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    n = [r["cached_sequences"] for r in rows]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    ax.plot(n, [r["match_us_median"] for r in rows], "o-", color="tab:red",
            label="radix tree (optimized): median per call")
    ax.fill_between(n, [r["match_us_median"] for r in rows], [r["match_us_p90"] for r in rows],
                    color="tab:red", alpha=0.15, label="  ... to the 90th percentile")
    ax.plot(n, [r["match_us_batch"] for r in rows], "s--", color="tab:orange",
            label="radix tree: batch mean (includes machine load)")
    if "reference_us_median" in rows[0]:
        ax.plot(n, [r["reference_us_median"] for r in rows], "o-", color="tab:gray",
                label="naive store (reference): scans every sequence")
    ax.axhline(30, color="black", ls=":", lw=1, label="target: 30 µs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cached sequences (1,000-2,000 tokens each, 8 shared system prompts)")
    ax.set_ylabel("match_prefix time (µs)")
    load = result.get("load_average_at_end")
    busy = f", load average {load[0]:.1f} at the end" if load else ""
    ax.set_title(f"match_prefix of a 1-2k-token prompt, page 1\n({result.get('machine', 'CPU')}{busy})", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    fig.savefig(dst, dpi=110)


def _cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--out", default=RESULT)
    ap.add_argument("--plot", default=PLOT)
    ap.add_argument("--plot-only", action="store_true")
    args = ap.parse_args(argv)
    if args.plot_only:
        plot(json.load(open(args.out)), args.plot)
        return
    sizes = tuple(int(s) for s in args.sizes.split(","))
    result = run(sizes, with_reference=not args.no_reference)
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    result.update(machine=f"{_cpu_name()}, {os.cpu_count()} CPUs (shared)",
                  python=sys.version.split()[0], load_average_at_end=load,
                  command="PYTHONPATH=. python3 spec_tests/bench/radix_speed.py " + " ".join(argv or sys.argv[1:]))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    plot(result, args.plot)
    print(f"wrote {args.out} and {args.plot}")


if __name__ == "__main__":
    main()
