"""Block allocator (course 03.06-03.08): speed of the operations as the pool grows, and the waste
of KV-cache memory under contiguous reservation vs paging (docs/paged.md).

Speed: 10,000 allocate/append/free operations (seeded; block_size 16; at most 32 live sequences
of at most 480 tokens, so the workload never needs more than 960 blocks and fits the smallest
pool), reference vs optimized, pools of 1k to 1M blocks; only the operations are timed (a fresh
allocator is built before each run, untimed), best of 3 (the reference at 1M blocks: 1 run, and
only with ``--tag reference-1m``). The optimized allocator's time per operation must not grow with
the pool (O(1) per block); the reference's free list is used from the front (O(pool) per block).

Waste (a simulation, metric "value"): a server decodes BATCH requests at a time (continuous
batching); every step each running request adds one token. Per step, the slots holding a token
against the slots reserved: contiguous max-length (every request reserves MAX_LEN = 2048 slots),
contiguous oracle (exactly its final length, up front), paged (blocks of 16 from
optimized/paged.py's BlockAllocator). waste = 1 - token-slots / reserved slots, summed over the
run; also at completion (final lengths only). Lengths (prompt, output), each clipped to 1..1024:
uniform; long-tailed ShareGPT-like (log-normal sigma 1, vLLM paper's means 161 / 338); short
Alpaca-like (means 19 / 58).
"""
from __future__ import annotations

import math
import random

from bench.runner import Case, P
from bench.timing import Prepared
from optimized import paged as fast
from reference import paged as ref

BLOCK_SIZE = 16
N_OPS = 10_000
MAX_LIVE = 32
MAX_TOKENS = 480  # 30 blocks: 32 x 30 = 960 blocks at most, under the smallest pool (1,000)
POOLS = (1_000, 10_000, 100_000, 1_000_000)
MAX_LEN, BATCH, N_REQUESTS = 2048, 64, 2000
MODULES = {"optimized": fast, "reference": ref}


def workload(n_ops: int = N_OPS, seed: int = 0) -> list[tuple]:
    """``n_ops`` operations ("allocate", seq, n) / ("append", seq, n) / ("free", seq)."""
    rng = random.Random(seed)
    live: dict[int, int] = {}  # seq -> tokens
    ops, next_id = [], 0
    while len(ops) < n_ops:
        if not live or (len(live) < MAX_LIVE and rng.random() < 0.15):
            n = rng.randint(1, 256)
            ops.append(("allocate", next_id, n))
            live[next_id] = n
            next_id += 1
            continue
        seq = rng.choice(list(live))
        n = rng.randint(1, 32)
        if live[seq] + n > MAX_TOKENS or rng.random() < 0.04:
            ops.append(("free", seq))
            del live[seq]
        else:
            ops.append(("append", seq, n))
            live[seq] += n
    return ops


def ops_call(module, num_blocks: int, ops: list[tuple]) -> Prepared:
    """Run ``ops`` on a fresh allocator of ``num_blocks`` blocks; the allocator is built untimed."""
    def before():
        alloc = module.BlockAllocator(num_blocks, BLOCK_SIZE)
        return [(getattr(alloc, op[0]), op[1:]) for op in ops]

    def run(calls):
        for fn, args in calls:
            fn(*args)
    return Prepared(before, run)


def same_results(num_blocks: int, ops: list[tuple]) -> bool:
    """Both allocators return the same thing for every operation and end in the same state."""
    a, b = ref.BlockAllocator(num_blocks, BLOCK_SIZE), fast.BlockAllocator(num_blocks, BLOCK_SIZE)
    for op in ops:
        if getattr(a, op[0])(*op[1:]) != getattr(b, op[0])(*op[1:]):
            return False
    return a.num_free_blocks == b.num_free_blocks and all(
        a.block_table(s) == b.block_table(s) for s in a.sequences())


# ----------------------------------------------------------------------------- waste
def lognormal(rng: random.Random, mean: float, sigma: float = 1.0) -> float:
    return rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)


def clip(x: float) -> int:
    return max(1, min(1024, round(x)))


DISTRIBUTIONS = {
    "uniform 1..1024 (prompt and output)":
        lambda rng: (rng.randint(1, 1024), rng.randint(1, 1024)),
    "long-tailed, ShareGPT-like (log-normal, means 161 / 338)":
        lambda rng: (clip(lognormal(rng, 161)), clip(lognormal(rng, 338))),
    "short, Alpaca-like (log-normal, means 19 / 58)":
        lambda rng: (clip(lognormal(rng, 19)), clip(lognormal(rng, 58))),
}


def simulate(sample, n_requests: int = N_REQUESTS, batch: int = BATCH, block_size: int = BLOCK_SIZE,
             seed: int = 0) -> dict:
    rng = random.Random(seed)
    requests = [sample(rng) for _ in range(n_requests)]
    pool = fast.BlockAllocator(batch * (MAX_LEN // block_size), block_size)  # room for a full batch
    queue, running = list(enumerate(requests)), {}  # seq -> [tokens now, final tokens]
    used = res_max = res_oracle = res_paged = 0
    while queue or running:
        while queue and len(running) < batch:  # admit: prefill the prompt
            seq, (prompt, output) = queue.pop(0)
            pool.allocate(seq, prompt)
            running[seq] = [prompt, prompt + output]
        for seq, st in list(running.items()):   # one decode step for every running request
            pool.append(seq, 1)
            st[0] += 1
        used += sum(st[0] for st in running.values())
        res_max += MAX_LEN * len(running)
        res_oracle += sum(st[1] for st in running.values())
        res_paged += (pool.num_blocks - pool.num_free_blocks) * block_size
        for seq, st in list(running.items()):
            if st[0] == st[1]:
                pool.free(seq)
                del running[seq]
    final = [p + o for p, o in requests]
    paged_final = sum(math.ceil(n / block_size) * block_size for n in final)
    return {
        "mean_prompt": sum(p for p, _ in requests) / n_requests,
        "mean_output": sum(o for _, o in requests) / n_requests,
        "mean_total": sum(final) / n_requests,
        "waste_over_time": {"contiguous_max_len": 1 - used / res_max,
                            "contiguous_oracle": 1 - used / res_oracle,
                            "paged": 1 - used / res_paged},
        "waste_at_completion": {"contiguous_max_len": 1 - sum(final) / (MAX_LEN * n_requests),
                                "contiguous_oracle": 0.0,
                                "paged": 1 - sum(final) / paged_final},
        "paged_max_empty_slots_per_seq": block_size - 1,
    }


# ----------------------------------------------------------------------------- cases
BEST_OF_3 = dict(rounds=3, repeats=1, min_warmup=0, warmup_ms=0, budget_ms=None)


def _speed(pool: int, n_ops: int = N_OPS, tags=(), with_ref: bool = True, suffix: str = "") -> Case:
    providers = (P("optimized", "ops", impl="optimized"),) + ((P("reference", "ops", impl="reference"),)
                                                              if with_ref else ())
    return Case(f"{n_ops} ops, pool {pool} blocks{suffix}", dict(pool=pool, ops=n_ops, block_size=BLOCK_SIZE),
                providers, metric="us/op", work=n_ops, devices=("cpu",), tags=tags,
                timing=dict(BEST_OF_3, rounds=1 if pool >= 1_000_000 else 3))


CASES = ([_speed(pool, with_ref=pool < 1_000_000) for pool in POOLS]
         + [_speed(1_000_000, tags=("reference-1m", "long"), suffix=", with the reference")]
         + [Case(f"waste: {name}", dict(distribution=name, requests=N_REQUESTS, batch=BATCH, max_len=MAX_LEN,
                                        block_size=BLOCK_SIZE), (P("simulate"),), metric="value", devices=("cpu",))
            for name in DISTRIBUTIONS]
         + [_speed(1_000, 500, ("smoke",)),
            Case("waste: 100 short requests", dict(distribution="short, Alpaca-like (log-normal, means 19 / 58)",
                                                  requests=100, batch=8, max_len=MAX_LEN, block_size=BLOCK_SIZE),
                 (P("simulate"),), metric="value", devices=("cpu",), tags=("smoke",))])


def setup(case, device):
    return workload(case.params["ops"]) if "ops" in case.params else None


def check(problem, case, device) -> dict:
    if problem is None:
        return dict(ok=True)
    return dict(ok=same_results(1_000, problem), what="same results and state as the reference, pool 1,000")


BUILDERS = {
    "ops": lambda ops, case, device, impl: ops_call(MODULES[impl], case.params["pool"], ops),
    "simulate": lambda _, case, device: lambda: simulate(DISTRIBUTIONS[case.params["distribution"]],
                                                         case.params["requests"], case.params["batch"],
                                                         case.params["block_size"]),
}
