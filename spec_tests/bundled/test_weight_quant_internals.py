"""optimized/weight_quant.py's launch configurations for the GPU, run under the interpreter.

The cuda branch of ``launch_config`` cannot be reached on a CPU machine through the public call,
so its configurations are asked for directly and run with ``w4a16_matmul_with(config=...)`` on small
shapes: every configuration it returns is legal (BLOCK_K a multiple of 32 dividing the group,
power-of-two tiles, a split of at least 1) and computes x ŵᵀ within the tolerance rule.
"""
from __future__ import annotations

import pytest
import torch

import optimized.weight_quant as wq
from conformance.tolerance import assert_close_to_oracle
from spec_tests.weight_quant.oracles import low_precision_reference, matmul_oracle
from spec_tests.weight_quant.strategies import MatmulCase

pytestmark = pytest.mark.heavy


@pytest.mark.parametrize("m,n,k,group", [(1, 8, 512, 128), (3, 40, 256, 64), (5, 16, 256, 32), (16, 70, 128, 128),
                                          (17, 8, 256, 128), (65, 24, 128, 64), (130, 16, 128, 128)])
def test_gpu_configurations_compute_the_product(m, n, k, group):
    cfg = wq.launch_config(m, n, k, group, "cuda", 132)
    assert cfg["BLOCK_K"] % 32 == 0 and group % cfg["BLOCK_K"] == 0, cfg
    for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps"):
        assert cfg[key] & (cfg[key] - 1) == 0, (key, cfg)
    assert cfg["SPLIT_K"] >= 1 and cfg["DOT"], cfg   # the tensor-core tile at every M on the GPU (launch_config)
    if not wq.kernel_supports(torch.empty(1, dtype=torch.bfloat16), group):
        pytest.skip("the kernels need a GPU or the Triton interpreter")
    x, packed, scales, zeros = MatmulCase(m, n, k, group, "bfloat16", m + n).build()
    y = wq.w4a16_matmul_with(x, packed, scales, zeros, config=cfg)
    assert_close_to_oracle(y, low_precision_reference(x, packed, scales, zeros), matmul_oracle(x, packed, scales, zeros),
                           name="y", inputs=dict(config=cfg))


def test_kernels_compile_for_sm90():
    """The W4A16 kernel compiles for an H100/H200 (sm_90) without a GPU, both paths (the GEMV
    path and the tensor-core path with its interleave of the unpacked nibbles), with and without
    split-K, bf16 and fp16, and the split reduction: the interpreter accepts code the compiler
    rejects (layouts of tl.interleave + tl.trans feeding tl.dot, loop-carried types)."""
    from spec_tests.bundled._sm90 import assert_compiles_for_sm90
    code = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import optimized._weight_quant_triton as m
ints = ['M', 'N', 'K', 'k_per_split', 'sxm', 'sxk', 'sqn', 'sqk', 'ssn', 'ssg', 'szn', 'szg', 'som', 'son']
for dtype, dot, split, bm, bn, bk in [('bf16', True, False, 16, 64, 128), ('fp16', True, True, 128, 128, 64),
                                      ('bf16', False, True, 1, 32, 128), ('fp16', False, False, 4, 64, 64)]:
    sig = {'X': '*' + dtype, 'QW': '*u8', 'S': '*' + dtype, 'Z': '*u8', 'OUT': '*' + dtype, 'PART': '*fp32',
           **{n: 'i32' for n in ints}, 'GROUP': 'constexpr', 'BLOCK_M': 'constexpr', 'BLOCK_N': 'constexpr',
           'BLOCK_K': 'constexpr', 'DOT': 'constexpr', 'SPLIT': 'constexpr'}
    const = dict(GROUP=128, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, DOT=dot, SPLIT=split)
    triton.compile(ASTSource(fn=m._w4a16_kernel, signature=sig, constexprs=const),
                   target=GPUTarget('cuda', 90, 32), options=dict(num_warps=4, num_stages=3))
sig = {'PART': '*fp32', 'OUT': '*bf16', 'total': 'i32', 'split': 'i32', 'BLOCK': 'constexpr'}
triton.compile(ASTSource(fn=m._reduce_kernel, signature=sig, constexprs=dict(BLOCK=1024)),
               target=GPUTarget('cuda', 90, 32), options=dict(num_warps=4))
"""
    assert_compiles_for_sm90(code)
