"""Block allocator (course 03.06-03.08): the optimized allocator is O(1) per block.

Workload and measurement: bench/cases/paged.py (``python -m bench run --concept paged``;
docs/paged.md has the table and the curve). Here, in the default run, two cheap checks of the same
claims:

- at a pool of 100k blocks the optimized allocator is >= FLOORS["paged.ops_100k_blocks"] x the
  reference on the first 3,000 operations of the 10,000-operation workload (measured ~90x on all
  10,000; the reference's free list is used from the front, O(pool) per block);
- its time per operation is flat from 1k to 1M blocks (ratio <= FLOORS["paged.flat_1k_to_1m"],
  a ceiling; measured ~1.0).

    python -m pytest bench/tests/test_bench_paged.py -s
"""
from __future__ import annotations

from bench.cases.paged import ops_call, same_results, workload
from bench.floors import FLOORS
from bench.timing import time_ms
from optimized import paged as fast
from reference import paged as ref

OPS = workload()


def best_of(module, num_blocks: int, ops: list[tuple], repeats: int) -> float:
    """Seconds of the best of ``repeats`` runs of ``ops`` on a fresh allocator (built untimed)."""
    return time_ms(ops_call(module, num_blocks, ops), repeats=repeats, budget_ms=None, min_warmup=0,
                   warmup_ms=0).min_ms / 1e3


def test_same_results_as_reference():
    assert same_results(1_000, OPS)


def test_speedup_over_reference_at_100k_blocks():
    ops = OPS[:3_000]
    t_ref = best_of(ref, 100_000, ops, repeats=1)
    t_fast = best_of(fast, 100_000, ops, repeats=5)
    ratio = t_ref / t_fast
    print(f"\npaged, {len(ops)} ops at 100k blocks: reference {t_ref * 1e3:.1f} ms, optimized "
          f"{t_fast * 1e3:.1f} ms, speedup {ratio:.1f}x")
    assert ratio >= FLOORS["paged.ops_100k_blocks"], (t_ref, t_fast)


def test_time_per_op_flat_from_1k_to_1m_blocks():
    small = best_of(fast, 1_000, OPS, repeats=3)
    large = best_of(fast, 1_000_000, OPS, repeats=3)
    print(f"\npaged optimized, {len(OPS)} ops: {small / len(OPS) * 1e6:.2f} us/op at 1k blocks, "
          f"{large / len(OPS) * 1e6:.2f} us/op at 1M blocks")
    assert large / small <= FLOORS["paged.flat_1k_to_1m"], (small, large)
