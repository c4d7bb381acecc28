"""Radix prefix cache (course 03.09-03.11): ``match_prefix`` time as the cache grows from 100 to
10,000 sequences, the tree (optimized/radix.py) against the naive store (reference/radix.py).

Workload (seeded, page size 1): 8 system prompts of 200-800 tokens; cached sequence ``i`` is
prompt ``i % 8`` followed by its own tokens, 1,000-2,000 tokens in all (token ids < 128,000).
Both caches are filled by their own ``insert``. Queries, as a tokenizer would hand them (fresh int
objects, not the cached lists): ``hit`` (a cached sequence, whole), ``next turn`` (a cached
sequence and 200 new tokens), ``new request`` (a system prompt and 1,000 new tokens).

Statistics (metric "value": each provider returns its numbers; docs/radix.md). The tree: each of
150 queries (50 per kind) timed alone, the minimum of 15 calls (a shared, loaded machine: the
minimum drops other processes' time slices), then the median and 90th percentile over queries,
the median per kind, and ``batch``: the best of 5 passes over all queries divided by their number
(it includes the load). A repeated query changes nothing the timing sees (its splits happened on
its first call, made before timing). The reference: one call on each of 6 queries (2 per kind),
its answers checked equal to the tree's first. Filling the naive store costs O(cached sequences)
per insert: the 10,000-sequence case takes ~20 minutes on a 2-core machine.
"""
from __future__ import annotations

import random
import statistics
import struct
import time

import optimized.radix as opt
import reference.radix as ref
from bench.runner import Case, P
from bench.timing import time_ms

SIZES = (100, 300, 1000, 3000, 10000)
PROMPTS, VOCAB = 8, 128_000


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


def fill(cache, seqs) -> float:
    """Insert every sequence (slots numbered in order); seconds taken."""
    slot, t0 = 0, time.perf_counter()
    for s in seqs:
        cache.insert(s, list(range(slot, slot + len(s))))
        slot += len(s)
    return time.perf_counter() - t0


def tree_stats(tree, qs, repeats: int = 15) -> dict:
    for _, q in qs:
        tree.match_prefix(q)       # first calls: their splits and touches
    per = [time_ms(lambda q=q: tree.match_prefix(q), repeats=repeats, budget_ms=None, min_warmup=0,
                   warmup_ms=0).min_ms * 1e3 for _, q in qs]
    batch = time_ms(lambda: [tree.match_prefix(q) for _, q in qs], repeats=5, budget_ms=None, min_warmup=0,
                    warmup_ms=0).min_ms * 1e3 / len(qs)
    kinds = {k: statistics.median(t for (kk, _), t in zip(qs, per) if kk == k) for k, _ in qs[:3]}
    return {"cached_tokens": tree.total, "match_us_median": statistics.median(per),
            "match_us_p90": statistics.quantiles(per, n=10)[-1], "match_us_by_kind": kinds,
            "match_us_batch": batch, "query_tokens_mean": statistics.mean(len(q) for _, q in qs)}


def _case(n: int, per_kind: int = 50, tags=(), with_ref: bool = True) -> Case:
    return Case(f"match_prefix, {n} cached sequences", dict(cached_sequences=n, queries_per_kind=per_kind, page=1),
                (P("optimized"),) + ((P("reference"),) if with_ref else ()), metric="value", devices=("cpu",),
                tags=tags)


CASES = [_case(n) for n in SIZES] + [_case(20, per_kind=3, tags=("smoke",))]


def setup(case, device):
    n = case.params["cached_sequences"]
    rng, prompts, seqs = workload(n)
    with_ref = any(p.name == "reference" for p in case.providers)
    tree, naive = opt.RadixCache(), ref.RadixCache() if with_ref else None
    build = {"optimized_s": fill(tree, seqs)}
    if naive is not None:
        build["reference_s"] = fill(naive, seqs)
    return dict(tree=tree, naive=naive, build=build,
                queries=queries(rng, prompts, seqs, n, case.params["queries_per_kind"]))


def check(problem, case, device) -> dict:
    if problem["naive"] is None:
        return dict(ok=True)
    for _, q in problem["queries"][:6]:
        a, b = problem["tree"].match_prefix(q), problem["naive"].match_prefix(q)
        if a[0] != b[0] or list(a[1]) != list(b[1]):
            return dict(ok=False, what="tree and naive store disagree", lengths=[a[0], b[0]])
    return dict(ok=True, what="same answers on 6 queries")


def _reference(problem, case, device):
    def run():
        ts = [time_ms(lambda q=q: problem["naive"].match_prefix(q), repeats=1, budget_ms=None, min_warmup=0,
                      warmup_ms=0).min_ms * 1e3 for _, q in problem["queries"][:6]]
        return {"reference_us_median": statistics.median(ts), "fill_s": problem["build"]["reference_s"]}
    return run


BUILDERS = {
    "optimized": lambda p, case, device: lambda: dict(tree_stats(p["tree"], p["queries"]),
                                                      fill_s=p["build"]["optimized_s"]),
    "reference": _reference,
}
