"""Prefix-cache CPU timings (docs/prefix_cache.md). Small and quick: not a test, no floors.

    PYTHONPATH=. python3 spec_tests/bench/prefix_cache_speed.py      # writes docs/results/prefix_cache_speed_cpu.json

* lookup of a 1,700-token prompt (block 16, 106 full blocks all cached) against a pool holding
  2,000 cached sequences of 1,700 tokens sharing a 1,024-token system prompt: median per call.
* allocate + free of a 256-token prompt with no hits, as the pool grows (1k .. 64k blocks, all
  free and cached, so each allocation evicts): median per pair. The reference's free queue is a
  list (pop(0), remove: O(n)); the optimized one an OrderedDict (O(1)).

Lookup timing: the same query repeated (lookup is a read: nothing changes between calls), the
median of 200 calls and the minimum of 200 (this 2-core machine is shared: the minimum drops the
time slices other processes take); also 20 different cached prompts, each timed as the minimum of
15 calls, their median. The 1-minute load average (``os.getloadavg``) is recorded before and after.
"""
from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import time

from optimized.prefix_cache import PrefixCache as Opt
from reference.prefix_cache import PrefixCache as Ref


OUT = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "results", "prefix_cache_speed_cpu.json")


def times_us(fn, reps: int = 50) -> list:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return [x * 1e6 for x in ts]


def median_us(fn, reps: int = 50) -> float:
    return statistics.median(times_us(fn, reps))


def main():
    result = {"command": "PYTHONPATH=. python3 spec_tests/bench/prefix_cache_speed.py",
              "load_before": os.getloadavg()[0], "lookup": {}, "allocate_free": [],
              "python": sys.version.split()[0], "machine": platform.machine(), "cpus": os.cpu_count()}
    rng = random.Random(0)
    bs, n_seqs, length = 16, 2000, 1700
    system = [rng.randrange(32000) for _ in range(1024)]
    prompts = [system + [rng.randrange(32000) for _ in range(length - 1024)] for _ in range(n_seqs)]
    blocks = 1024 // bs + n_seqs * (-(-(length - 1024) // bs)) + 8
    for name, C in (("reference", Ref), ("optimized", Opt)):
        c = C(blocks, bs)
        # the reference keys every block by its whole prefix (memory quadratic in the length):
        # it gets 200 sequences, the optimized all 2,000
        n = 200 if C is Ref else n_seqs
        for i, p in enumerate(prompts[:n]):
            c.allocate(i, p)
            c.mark_computed(i, len(p))
            c.free(i)
        q = prompts[n // 2] + [1]
        assert len(c.lookup(q)) == length // bs
        reps = 20 if C is Ref else 200
        ts = times_us(lambda: c.lookup(q), reps)
        # different cached prompts, fresh lists (as a tokenizer would hand them), min of 15 each
        qs = [list(prompts[i]) + [rng.randrange(32000)] for i in rng.sample(range(n), 20 if C is Opt else 3)]
        per_query = [min(times_us(lambda: c.lookup(x), 15 if C is Opt else 3)) for x in qs]
        row = {"cached_sequences": n, "median_us": statistics.median(ts), "min_us": min(ts),
               "median_over_queries_of_min_us": statistics.median(per_query)}
        result["lookup"][name] = row
        print(f"{name}: lookup 1.7k tokens vs {n} cached sequences: median {row['median_us']:.0f} us, "
              f"min {row['min_us']:.0f} us, 20 queries' median of min-of-15 {row['median_over_queries_of_min_us']:.0f} us")
    for nb in (1024, 4096, 16384, 65536):
        for name, C in (("reference", Ref), ("optimized", Opt)):
            c = C(nb, bs)
            for b in range(nb):                        # every block cached, then all freed
                c.allocate(f"fill{b}", [b] * bs)
                c.mark_computed(f"fill{b}", bs)
            for b in range(nb):
                c.free(f"fill{b}")
            k = iter(range(10**9))

            def pair():
                s = next(k)
                c.allocate(s, [10**6 + s] * 256)
                c.free(s)
            us = median_us(pair, 30)
            result["allocate_free"].append({"impl": name, "pool_blocks": nb, "median_us": us})
            print(f"{name}: allocate+free 256 tokens, pool {nb} blocks: {us:.0f} us")
    result["load_after"] = os.getloadavg()[0]
    print(f"load average (1 min): {result['load_before']:.2f} before, {result['load_after']:.2f} after")
    with open(OUT, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"wrote {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
