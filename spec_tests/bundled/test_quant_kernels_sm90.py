"""The quantised paged-decode kernel (kv_quant's FP8 / INT8 path of optimized/paged_attention.py)
and the multi-LoRA kernels (optimized/_lora_triton.py, split-K) compile for an H100/H200 (sm_90)
without a GPU: the interpreter the spec runs them under on the CPU accepts code the compiler
rejects (spec_tests/bundled/_sm90.py)."""
from __future__ import annotations

import pytest

from spec_tests.bundled._sm90 import assert_compiles_for_sm90



def test_quantised_paged_decode_compiles_for_sm90():
    """bf16 and fp16 q over float8_e4m3fn and int8 codes, one split and several, GQA tiles."""
    code = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import optimized.paged_attention as m
ptrs = ['Q', 'K', 'V', 'BT', 'LENS', 'O', 'LSE', 'O_PART', 'LSE_PART', 'KS', 'VS']
ints = ['sq_b', 'sq_n', 'sq_h', 'sk_blk', 'sk_slot', 'sk_h', 'sv_blk', 'sv_slot', 'sv_h', 'sbt_b',
        'so_b', 'so_n', 'so_h', 'sl_b', 'sl_n', 'sl_h', 'q_len', 'q_heads', 'group', 'left', 'split_len',
        'sks_blk', 'sks_slot', 'sks_h', 'svs_blk', 'svs_slot', 'svs_h']
for qdt, code, quant, split, bn in [('bf16', 'fp8e4nv', 1, True, 64), ('fp16', 'fp8e4nv', 1, False, 128),
                                    ('bf16', 'i8', 2, True, 64), ('fp16', 'i8', 2, False, 32)]:
    types = dict(Q='*' + qdt, K='*' + code, V='*' + code, BT='*i32', LENS='*i32', O='*' + qdt, LSE='*fp32',
                 O_PART='*fp32', LSE_PART='*fp32', KS='*fp32', VS='*fp32')
    sig = {**{p: types[p] for p in ptrs}, **{n: 'i32' for n in ints}, 'qk_scale': 'fp32',
           **{c: 'constexpr' for c in ('HEAD_DIM', 'BLOCK_D', 'BLOCK_M', 'BLOCK_N', 'BLOCK_SIZE', 'SPLIT', 'QUANT')}}
    const = dict(HEAD_DIM=128, BLOCK_D=128, BLOCK_M=16, BLOCK_N=bn, BLOCK_SIZE=16, SPLIT=split, QUANT=quant)
    triton.compile(ASTSource(fn=m._split_kernel, signature=sig, constexprs=const),
                   target=GPUTarget('cuda', 90, 32), options=dict(num_warps=4, num_stages=2))
"""
    assert_compiles_for_sm90(code)


def test_lora_kernels_compile_for_sm90():
    """The split-K shrink and the expand that sums its partials, bf16 and fp16, SPLIT_K 1 and 16."""
    code = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import optimized._lora_triton as m
for dt in ('bf16', 'fp16'):
    sig = dict(X='*' + dt, A='*' + dt, IDS='*i64', V_PART='*fp32', **{n: 'i32' for n in (
        'batch', 'd_in', 'rank', 'k_per_split', 'sxm', 'sxk', 'sae', 'sar', 'sak', 'svs', 'svm')},
        BLOCK_M='constexpr', BLOCK_R='constexpr', BLOCK_K='constexpr')
    triton.compile(ASTSource(fn=m._shrink_kernel, signature=sig, constexprs=dict(BLOCK_M=4, BLOCK_R=16, BLOCK_K=128)),
                   target=GPUTarget('cuda', 90, 32), options=dict(num_warps=4))
    for split in (1, 16):
        sig = dict(V_PART='*fp32', B='*' + dt, IDS='*i64', Y='*' + dt, batch='i32', d_out='i32', rank='i32',
                   scaling='fp32', **{n: 'i32' for n in ('svs', 'svm', 'sbe', 'sbn', 'sbr', 'sym', 'syn')},
                   BLOCK_M='constexpr', BLOCK_R='constexpr', BLOCK_N='constexpr', SPLIT_K='constexpr')
        triton.compile(ASTSource(fn=m._expand_kernel, signature=sig,
                                 constexprs=dict(BLOCK_M=4, BLOCK_R=16, BLOCK_N=128, SPLIT_K=split)),
                       target=GPUTarget('cuda', 90, 32), options=dict(num_warps=4))
"""
    assert_compiles_for_sm90(code)
