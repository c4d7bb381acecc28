"""W4A16 matmul: y = x ŵᵀ with ŵ unpacked from 4-bit codes and dequantised, x in bf16/fp16.

The reference is dequantise-then-matmul; an implementation (a kernel that dequantises tiles in
registers) must be as close to the float64 oracle x ŵᵀ (ŵ exact) as the tolerance rule allows:
2 x the error of the contract's own low-precision computation (ŵ rounded to x's dtype, x @ ŵᵀ)
plus the rounding floor of x's dtype. The weights are random BYTES, scales and zero points 0-15,
not quantize's output: the math must hold for any codes (a swapped nibble or a zero point read
from the wrong group changes the answer). On CPU the optimized kernels run under the Triton
interpreter, so the shapes are small: M 1-17 (the GEMV-style and tensor-core tiles, split-K),
K up to 256, groups 32/64/128 and per channel.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings

from conformance.tolerance import assert_close_to_oracle
from spec_tests.weight_quant.oracles import float64_matmul_bound, low_precision_reference, matmul_oracle
from spec_tests.weight_quant.strategies import MatmulCase, matmul_cases


def _scaled(n: int) -> int:
    return max(1, round(n * settings().max_examples / 25))


def _check(impl, case: MatmulCase, device, *, rewrite=None):
    args = case.build(device)
    if rewrite is not None:
        args = rewrite(*args)
    before = [t.clone() for t in args]
    y = impl.get("w4a16_matmul")(*args)
    for name, t, b in zip(("x", "qweight", "scales", "zeros"), args, before):
        assert torch.equal(t, b), f"w4a16_matmul modified its input {name}"
    x, packed, scales, zeros = args
    ref = low_precision_reference(x, packed, scales, zeros).to(device)
    oracle = matmul_oracle(x, packed, scales, zeros)
    if x.dtype == torch.float64:        # no rounding floor of float64 in the tolerance rule: the sum's own bound
        assert isinstance(y, torch.Tensor) and y.dtype == x.dtype and y.shape == oracle.shape, y
        err = (y.detach().cpu() - oracle).abs()
        bound = float64_matmul_bound(x, packed, scales, zeros)
        worst = int((err - bound).argmax())
        assert bool((err <= bound).all()), (
            f"y = x ŵᵀ (float64): error {float(err.flatten()[worst]):.3e} at flat index {worst} is over the "
            f"summation bound {float(bound.flatten()[worst]):.3e}\n    case: {case!r}")
        return y
    assert_close_to_oracle(y, ref, oracle, name="y = x ŵᵀ", inputs=dict(case=case))
    return y


@example(case=MatmulCase(1, 24, 64, 32, "bfloat16", 1)).via(
    "mutant:kernel_nibbles_swapped mutant:kernel_zero_not_subtracted")
@example(case=MatmulCase(3, 20, 128, 64, "float16", 2, "bfloat16")).via(
    "mutant:kernel_group_index_off mutant:kernel_scale_before_zero")
@example(case=MatmulCase(2, 33, 96, 32, "bfloat16", 3)).via("mutant:kernel_last_split_dropped")
@example(case=MatmulCase(17, 17, 96, 32, "float16", 4, "float16")).via(
    "boundary: M 17 > one 16-row tile, N 17 > one 16-feature tile, three 32-column tiles")
@settings(max_examples=_scaled(12))
@given(case=matmul_cases())
def test_matches_dequantize_then_matmul(impl, device, case):
    """y == x ŵᵀ within the tolerance rule for M 1-17, N 1-40, K 32-256, groups 32/64/128 and per
    channel, bf16/fp16 activations, float32/bf16/fp16 scales, any codes and zero points."""
    _check(impl, case, device)


SHAPES = [MatmulCase(1, 64, 512, 128, "bfloat16", 11), MatmulCase(4, 48, 256, 32, "float16", 12),
          MatmulCase(16, 32, 256, 64, "bfloat16", 13), MatmulCase(32, 40, 128, 128, "float16", 14, "float16"),
          MatmulCase(2, 8, 64, 64, "bfloat16", 15, batch=(2, 3))]


@pytest.mark.parametrize("case", SHAPES, ids=lambda c: f"m{c.m}-n{c.n}-k{c.k}-g{c.group}-{c.dtype}")
def test_shapes(impl, device, case):
    """Fixed shapes: M 1 with K 512 (many K tiles and splits), M 4/16/32 (each tile kind), x with
    leading dimensions (2, 3, 2, 64) -> (2, 3, 2, 8)."""
    y = _check(impl, case, device)
    assert y.shape == (*case.batch, case.m, case.n)


@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_wide_activations(impl, device, dtype):
    """x in float32/float64 is legal: the same contract (ŵ rounded to x's dtype, here exact or
    nearly), output in x's dtype."""
    y = _check(impl, MatmulCase(3, 10, 64, 32, dtype, 21), device)
    assert y.dtype == getattr(torch, dtype)


def test_group_sizes_no_kernel_tile_fits(impl, device):
    """Group sizes that are legal but not multiples of 32 (2, 6, 16; an odd count of groups):
    the same math (a kernel may fall back to dequantise-then-matmul)."""
    for k, group in ((12, 2), (36, 6), (48, 16)):
        _check(impl, MatmulCase(2, 5, k, group, "bfloat16", 30 + group), device)


def test_strided_and_broadcast_inputs(impl, device):
    """x a non-contiguous view (every other column of a wider buffer) and x a transposed view; the
    scales and zeros views of wider tensors: the same result as contiguous inputs."""
    def strided(x, packed, scales, zeros):
        wide = torch.stack([x, torch.full_like(x, float("nan"))], dim=-1)[..., 0]
        s2 = torch.cat([scales, scales], dim=1)[:, : scales.shape[1]]
        z2 = torch.stack([zeros, zeros], dim=-1)[..., 0]
        return wide, packed, s2, z2

    def transposed(x, packed, scales, zeros):
        return x.T.contiguous().T, packed, scales.T.contiguous().T, zeros

    _check(impl, MatmulCase(3, 20, 64, 32, "bfloat16", 41), device, rewrite=strided)
    _check(impl, MatmulCase(5, 12, 128, 64, "float16", 42), device, rewrite=transposed)


def test_empty_dimensions(impl, device):
    """M = 0 (no tokens) gives an empty (0, N) output; N = 0 an (M, 0) one."""
    x, packed, scales, zeros = MatmulCase(2, 6, 64, 32, "bfloat16", 51).build(device)
    fn = impl.get("w4a16_matmul")
    y = fn(x[:0], packed, scales, zeros)
    assert isinstance(y, torch.Tensor) and y.shape == (0, 6) and y.dtype == x.dtype
    y = fn(x, packed[:0], scales[:0], zeros[:0])
    assert isinstance(y, torch.Tensor) and y.shape == (2, 0) and y.dtype == x.dtype


def test_quantized_layer_end_to_end(impl, device):
    """quantize -> pack_int4 -> w4a16_matmul approximates the float layer x wᵀ: within the
    tolerance rule of x ŵᵀ, and ||x wᵀ - y|| is what the dequantised weight's error explains
    (checked against the float64 product with ŵ)."""
    g = torch.Generator().manual_seed(61)
    w = torch.randn(24, 128, generator=g)
    x = torch.randn(4, 128, generator=g).to(torch.bfloat16)
    codes, scales, zeros = impl.get("quantize")(w, bits=4, group_size=64, symmetric=False)
    packed = impl.get("pack_int4")(codes)
    args = (x.to(device), packed.to(device), scales.to(device), zeros.to(device))
    y = impl.get("w4a16_matmul")(*args)
    assert_close_to_oracle(y, low_precision_reference(*args).to(device), matmul_oracle(*args), name="y",
                           inputs=dict(w=w, x=x))


# ------------------------------------------------------------------------- GPU, natively
LARGE = [MatmulCase(m, n, k, 128, "bfloat16", 100 + m) for m, n, k in
         ((1, 4096, 4096), (4, 14336, 4096), (16, 4096, 14336), (64, 8192, 8192), (256, 4096, 4096),
          (300, 1000, 2048))] + [MatmulCase(7, 4096, 4096, 32, "float16", 120, "float16")]


@pytest.mark.gpu
@pytest.mark.parametrize("case", LARGE, ids=lambda c: f"m{c.m}-n{c.n}-k{c.k}-g{c.group}")
def test_large_shapes_gpu(impl, device, case):
    """The benchmark's shapes natively (K up to 14336, M 1-300, split-K on)."""
    _check(impl, case, device)
