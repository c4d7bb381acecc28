"""W4A16 matmul (course 05.03) on a CUDA GPU: the Triton kernel against cuBLAS bf16 ``x @ w.T``.

The full table (four (K, N), M 1-256, torchao in the same run) is bench/cases/weight_quant.py
(``python -m bench run --concept weight_quant``; docs/weight_quant.md). Here one cheap check of
the claim that matters for decode: at M = 1, K = N = 4096 the int4 kernel reads a quarter of the
bytes and is faster than cuBLAS reading the bf16 weight (graph replay, L2 flushed, timed
alternately). No floor in bench/floors.py until the lead has measured it: the test asserts only
> 1x and prints the ratio. On CPU it is skipped (marker ``gpu``).

    python -m pytest bench/tests/test_bench_weight_quant.py -s
"""
from __future__ import annotations

import pytest
import torch

from bench.timing import compare, cuda_graph

pytestmark = pytest.mark.gpu


def test_w4a16_faster_than_cublas_at_m1():
    import optimized.weight_quant as wq
    from reference.weight_quant import dequantize, pack_int4, quantize
    g = torch.Generator(device="cuda").manual_seed(0)
    w = torch.randn(4096, 4096, device="cuda", generator=g) * 0.02
    x = torch.randn(1, 4096, device="cuda", generator=g, dtype=torch.bfloat16)
    codes, scales, zeros = quantize(w, bits=4, group_size=128, symmetric=False)
    scales = scales.to(torch.bfloat16)
    qweight = pack_int4(codes)
    w_bf16 = dequantize(codes, scales, zeros).to(torch.bfloat16)
    times = compare({"ours": cuda_graph(lambda: wq.w4a16_matmul(x, qweight, scales, zeros)),
                     "cublas": cuda_graph(lambda: x @ w_bf16.T)}, rounds=5, device="cuda", warmup_ms=5, budget_ms=30)
    ratio = times["cublas"].median_ms / times["ours"].median_ms
    print(f"\nw4a16 m1 k4096 n4096: ours {times['ours'].median_ms * 1e3:.1f} us, cuBLAS bf16 "
          f"{times['cublas'].median_ms * 1e3:.1f} us, speed-up {ratio:.2f}x")
    assert ratio > 1.0
