"""Prefix cache with hash-chained blocks (course 03.09): CPU timings (docs/prefix_cache.md).

* lookup of a 1,700-token prompt (block 16, its 106 full blocks all cached) against a pool holding
  cached sequences of 1,700 tokens sharing a 1,024-token system prompt: the same query repeated
  (lookup is a read), median and minimum of 200 calls (20 for the reference). The reference keys
  every block by its whole prefix (memory quadratic in the length): it gets 200 sequences, the
  optimized 200 and 2,000.
* allocate + free of a 256-token prompt with no hits, as the pool grows (1k .. 64k blocks, all
  free and cached, so each allocation evicts): median of 30 pairs. The reference's free queue is a
  list (pop(0), remove: O(n)); the optimized one an OrderedDict (O(1)).
"""
from __future__ import annotations

import itertools
import random

from bench.runner import Case, P
from optimized.prefix_cache import PrefixCache as Opt
from reference.prefix_cache import PrefixCache as Ref

IMPLS = {"optimized": Opt, "reference": Ref}
BLOCK, LENGTH, SYSTEM = 16, 1700, 1024


def filled(impl, n_seqs: int, length: int = LENGTH, system_len: int = SYSTEM, block: int = BLOCK, seed: int = 0):
    """A cache holding ``n_seqs`` computed-then-freed prompts sharing a system prompt; a query
    (the middle prompt plus one token) whose every full block is cached."""
    rng = random.Random(seed)
    system = [rng.randrange(32000) for _ in range(system_len)]
    prompts = [system + [rng.randrange(32000) for _ in range(length - system_len)] for _ in range(n_seqs)]
    c = IMPLS[impl](system_len // block + n_seqs * (-(-(length - system_len) // block)) + 8, block)
    for i, p in enumerate(prompts):
        c.allocate(i, p)
        c.mark_computed(i, len(p))
        c.free(i)
    return c, prompts[n_seqs // 2] + [1]


def pool_of_cached_blocks(impl, num_blocks: int, block: int = BLOCK):
    """A pool whose every block is cached and free (each allocation must evict)."""
    c = IMPLS[impl](num_blocks, block)
    for b in range(num_blocks):
        c.allocate(f"fill{b}", [b] * block)
        c.mark_computed(f"fill{b}", block)
    for b in range(num_blocks):
        c.free(f"fill{b}")
    return c


def _lookup_case(n: int, impls, length=LENGTH, system=SYSTEM, tags=()) -> Case:
    return Case(f"lookup {length}-token prompt, {n} cached sequences",
                dict(cached_sequences=n, length=length, system=system, block=BLOCK),
                tuple(P(i, "lookup", impl=i) for i in impls), metric="us", devices=("cpu",), tags=tags,
                timing=dict(repeats=200 if "reference" not in impls else 20, budget_ms=None))


def _alloc_case(nb: int, tags=()) -> Case:
    return Case(f"allocate + free 256 tokens, pool {nb} blocks", dict(pool=nb, tokens=256, block=BLOCK),
                tuple(P(i, "allocate_free", impl=i) for i in IMPLS), metric="us", devices=("cpu",), tags=tags,
                timing=dict(repeats=30, budget_ms=None))


CASES = ([_lookup_case(200, ("optimized", "reference")), _lookup_case(2000, ("optimized",))]
         + [_alloc_case(nb) for nb in (1024, 4096, 16384, 65536)]
         + [_lookup_case(20, ("optimized", "reference"), length=200, system=128, tags=("smoke",)),
            _alloc_case(256, ("smoke",))])


def setup(case, device):
    return None


def _lookup(_, case, device, impl):
    p = case.params
    c, q = filled(impl, p["cached_sequences"], p["length"], p["system"], p["block"])
    if len(c.lookup(q)) != p["length"] // p["block"]:
        raise AssertionError("the query's blocks are not all cached")
    return lambda: c.lookup(q)


def _allocate_free(_, case, device, impl):
    c = pool_of_cached_blocks(impl, case.params["pool"], case.params["block"])
    ids = itertools.count()
    n = case.params["tokens"]

    def pair():
        s = next(ids)
        c.allocate(s, [10**6 + s] * n)
        c.free(s)
    return pair


BUILDERS = {"lookup": _lookup, "allocate_free": _allocate_free}
