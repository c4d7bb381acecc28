"""FlashAttention-2 (course 05.07) on a CUDA GPU: the Triton kernel against the plain reference.

The reference materialises the (N, N) score matrix in float32 (several passes over N^2 bytes);
the kernel streams K/V tiles through on-chip memory and never writes it. Shape: batch 4 x 16
heads x 4096 tokens x head_dim 128, fp16, causal (the 16k-token, 2048-wide point of
docs/performance.md). A speedup is the ratio of medians of the two, timed alternately in one
run; its floor lives in bench/floors.py. On CPU these are skipped (marker ``gpu``).

    python -m pytest bench/tests/test_bench_flash_attention.py --benchmark-enable -s
"""
from __future__ import annotations

import pytest
import torch

from bench.floors import FLOORS
from bench.timing import compare

pytestmark = pytest.mark.gpu
B, H, N, D = 4, 16, 4096, 128


def _inputs(requires_grad=False):
    g = torch.Generator(device="cuda").manual_seed(0)
    return [torch.randn(B, H, N, D, device="cuda", dtype=torch.float16, generator=g)
            .requires_grad_(requires_grad) for _ in range(3)]


def _forward(module):
    q, k, v = _inputs()

    def run():
        with torch.no_grad():
            module.attention(q, k, v, causal=True)
        torch.cuda.synchronize()
    return run


def _backward(module):
    q, k, v = _inputs(requires_grad=True)
    out = module.attention(q, k, v, causal=True)
    do = torch.randn_like(out)

    def run():
        q.grad = k.grad = v.grad = None
        out.backward(do, retain_graph=True)
        torch.cuda.synchronize()
    return run


def _speedup(make) -> float:
    """Median time of reference / median time of optimized, the two timed alternately (5 rounds,
    each 30 ms of calls after 5 ms of warm-up)."""
    from optimized import attention as fast
    from reference import attention as ref
    times = compare({"fast": make(fast), "ref": make(ref)}, rounds=5, device="cuda", warmup_ms=5, budget_ms=30)
    return times["ref"].median_ms / times["fast"].median_ms


def test_bench_flash_attention_forward(benchmark):
    from optimized import attention as fast
    benchmark(_forward(fast))


def test_bench_reference_forward(benchmark):
    from reference import attention as ref
    benchmark.pedantic(_forward(ref), rounds=3, iterations=1)


def test_bench_flash_attention_backward(benchmark):
    from optimized import attention as fast
    benchmark(_backward(fast))


def test_forward_speedup_over_reference():
    ratio = _speedup(_forward)
    floor = FLOORS["flash_attention.fwd_causal_b4_h16_n4096_d128"]
    print(f"flash_attention forward speedup over the reference: {ratio:.1f}x (floor {floor}x)")
    assert ratio >= floor, f"forward speedup {ratio:.1f}x < floor {floor}x"


def test_backward_speedup_over_reference():
    ratio = _speedup(_backward)
    floor = FLOORS["flash_attention.bwd_causal_b4_h16_n4096_d128"]
    print(f"flash_attention backward speedup over the reference: {ratio:.1f}x (floor {floor}x)")
    assert ratio >= floor, f"backward speedup {ratio:.1f}x < floor {floor}x"
