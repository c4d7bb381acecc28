"""CPU benchmark of the block allocator (course 03.06-03.08): 10,000 allocate/append/free
operations, reference vs optimized, as the pool grows from 1k to 1M blocks.

The workload is the same at every pool size (seeded; block_size 16; at most 32 live sequences of
at most 480 tokens, so it never needs more than 960 blocks and fits the smallest pool): a new
request allocates its prompt (1-256 tokens), a running one appends 1-32 tokens (decode steps and
chunks), and a finished one is freed. Only the operations are timed, not building the pool.
The optimized allocator's time per operation must not grow with the pool (O(1) per block); the
reference's free list is a Python list used from the front (O(pool) per block taken or returned).

    python3 spec_tests/bench/paged_speed.py                 # table + docs/results/paged_speed_cpu.json
    python3 spec_tests/bench/paged_speed.py --plot          # also docs/img/paged_speed_cpu.png
"""
from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from optimized import paged as fast  # noqa: E402
from reference import paged as ref  # noqa: E402

BLOCK_SIZE = 16
N_OPS = 10_000
MAX_LIVE = 32
MAX_TOKENS = 480  # 30 blocks: 32 x 30 = 960 blocks at most, under the smallest pool (1,000)
POOLS = (1_000, 10_000, 100_000, 1_000_000)


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


def run(module, num_blocks: int, ops: list[tuple]) -> float:
    """Seconds to run ``ops`` on a fresh allocator of ``num_blocks`` blocks (building excluded)."""
    alloc = module.BlockAllocator(num_blocks, BLOCK_SIZE)
    calls = [(getattr(alloc, op[0]), op[1:]) for op in ops]
    t0 = time.perf_counter()
    for fn, args in calls:
        fn(*args)
    return time.perf_counter() - t0


def best_of(module, num_blocks: int, ops: list[tuple], repeats: int) -> float:
    return min(run(module, num_blocks, ops) for _ in range(repeats))


def same_results(num_blocks: int, ops: list[tuple]) -> bool:
    """Both allocators return the same thing for every operation and end in the same state."""
    a, b = ref.BlockAllocator(num_blocks, BLOCK_SIZE), fast.BlockAllocator(num_blocks, BLOCK_SIZE)
    for op in ops:
        if getattr(a, op[0])(*op[1:]) != getattr(b, op[0])(*op[1:]):
            return False
    return a.num_free_blocks == b.num_free_blocks and all(
        a.block_table(s) == b.block_table(s) for s in a.sequences())


def measure(pools=POOLS, ref_pools=POOLS[:3], repeats: int = 3) -> dict:
    ops = workload()
    assert same_results(pools[0], ops)
    rows = []
    for nb in pools:
        row = {"num_blocks": nb, "optimized_s": best_of(fast, nb, ops, repeats)}
        if nb in ref_pools:
            row["reference_s"] = best_of(ref, nb, ops, 1 if nb >= 1_000_000 else repeats)
            row["speedup"] = row["reference_s"] / row["optimized_s"]
        row["optimized_us_per_op"] = row["optimized_s"] / len(ops) * 1e6
        if "reference_s" in row:
            row["reference_us_per_op"] = row["reference_s"] / len(ops) * 1e6
        rows.append(row)
    kinds = {k: sum(op[0] == k for op in ops) for k in ("allocate", "append", "free")}
    return {"n_ops": len(ops), "ops": kinds, "block_size": BLOCK_SIZE, "max_live": MAX_LIVE,
            "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
            "rows": rows}


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["num_blocks"] for r in rows], [r["optimized_us_per_op"] for r in rows], "o-",
            label="optimized (free stack, ref-count array)")
    refs = [r for r in rows if "reference_us_per_op" in r]
    ax.plot([r["num_blocks"] for r in refs], [r["reference_us_per_op"] for r in refs], "s-",
            label="reference (list front, counted refs)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pool size (blocks of 16 slots)")
    ax.set_ylabel("time per operation (µs)")
    ax.set_title(f"Block allocator: {result['n_ops']:,} allocate/append/free ops")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--plot", action="store_true")
    p.add_argument("--ref-1m", action="store_true", help="also time the reference at 1M blocks (slow)")
    p.add_argument("--out", default=str(ROOT / "docs/results/paged_speed_cpu.json"))
    args = p.parse_args()
    result = measure(ref_pools=POOLS if args.ref_1m else POOLS[:3])
    print(f"{result['n_ops']} ops {result['ops']}, block_size {BLOCK_SIZE}; {result['machine']}")
    print(f"{'blocks':>10} {'optimized us/op':>16} {'reference us/op':>16} {'speedup':>8}")
    for r in result["rows"]:
        print(f"{r['num_blocks']:>10,} {r['optimized_us_per_op']:>16.2f} "
              f"{r.get('reference_us_per_op', float('nan')):>16.2f} {r.get('speedup', float('nan')):>8.1f}")
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        plot(result, ROOT / "docs/img/paged_speed_cpu.png")


if __name__ == "__main__":
    main()
