"""Prefix-cache CPU timings (docs/prefix_cache.md). Small and quick: not a test, no floors.

    PYTHONPATH=. python3 spec_tests/bench/prefix_cache_speed.py

* lookup of a 1,700-token prompt (block 16, 106 full blocks all cached) against a pool holding
  2,000 cached sequences of 1,700 tokens sharing a 1,024-token system prompt: median per call.
* allocate + free of a 256-token prompt with no hits, as the pool grows (1k .. 64k blocks, all
  free and cached, so each allocation evicts): median per pair. The reference's free queue is a
  list (pop(0), remove: O(n)); the optimized one an OrderedDict (O(1)).
"""
from __future__ import annotations

import random
import statistics
import time

from optimized.prefix_cache import PrefixCache as Opt
from reference.prefix_cache import PrefixCache as Ref


def median_us(fn, reps: int = 50) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def main():
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
        print(f"{name}: lookup 1.7k tokens vs {n} cached sequences: {median_us(lambda: c.lookup(q)):.0f} us")
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
            print(f"{name}: allocate+free 256 tokens, pool {nb} blocks: {median_us(pair, 30):.0f} us")


if __name__ == "__main__":
    main()
