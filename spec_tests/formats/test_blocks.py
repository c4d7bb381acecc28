"""Block-scaled formats: MXFP8 (E4M3, E5M2) and MXFP4 (OCP Microscaling v1.0: 32-element blocks,
E8M0 scales) and NVFP4 (16-element blocks, E4M3 scales, a float32 per-tensor scale), against a
float64 re-derivation from the spec texts (spec_tests/formats/oracles.py: mx_block, nvfp4_tensor).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from spec_tests.formats.oracles import BLOCK, MX, decode_one, mx_block, nvfp4_tensor

MX_FORMATS = tuple(MX)
ALL_BLOCK = MX_FORMATS + ("nvfp4",)
ELEMENT = {"mxfp8_e4m3": "fp8_e4m3", "mxfp8_e5m2": "fp8_e5m2", "mxfp4": "fp4_e2m1", "nvfp4": "fp4_e2m1"}


def _oracle(x: torch.Tensor, fmt: str, tensor_scale=None):
    rows = x.to(torch.float64).reshape(-1, BLOCK[fmt]).tolist()
    if fmt == "nvfp4":
        codes, scales, s = nvfp4_tensor(rows, tensor_scale)
    else:
        pairs = [mx_block(b, fmt) for b in rows]
        codes, scales, s = [p[0] for p in pairs], [p[1] for p in pairs], 1.0
    return (torch.tensor(codes, dtype=torch.int64).reshape(x.shape),
            torch.tensor(scales, dtype=torch.int64).reshape(*x.shape[:-1], x.shape[-1] // BLOCK[fmt]), s)


def _assert_matches_oracle(impl, x, fmt, tensor_scale=None):
    kw = {} if tensor_scale is None else {"tensor_scale": tensor_scale}
    codes, scales, s = impl.get("quantize_blocks")(x, fmt, **kw)
    want_codes, want_scales, want_s = _oracle(x, fmt, tensor_scale)
    assert codes.dtype == torch.uint8 and codes.shape == x.shape, (codes.dtype, codes.shape)
    assert scales.dtype == torch.uint8 and scales.shape == want_scales.shape, (scales.dtype, scales.shape)
    assert isinstance(s, torch.Tensor) and s.dim() == 0 and s.dtype == torch.float32, f"tensor_scale {s!r}"
    assert float(s) == want_s, f"{fmt}: tensor scale {float(s)!r}, expected {want_s!r}"
    bad = scales.to(torch.int64) != want_scales
    assert not bool(bad.any()), (f"{fmt}: block scales {scales[bad][:6].tolist()}, expected "
                                 f"{want_scales[bad][:6].tolist()} (block amax "
                                 f"{x.to(torch.float64).reshape(*want_scales.shape, -1).abs().amax(-1)[bad][:6].tolist()})")
    bad = codes.to(torch.int64) != want_codes
    assert not bool(bad.any()), (f"{fmt}: element codes {codes[bad][:6].tolist()}, expected "
                                 f"{want_codes[bad][:6].tolist()} for x {x[bad][:6].tolist()}")
    return codes, scales, s


# Blocks built to hit the rules: amax just below / at a power of two (floor(log2) exactly), zero
# blocks, one large outlier, tiny values, signed zeros, and (MX) NaN / Inf.
@st.composite
def blocks(draw, fmt: str, allow_special: bool):
    k = BLOCK[fmt]
    n_blocks = draw(st.integers(1, 3))
    out = []
    for _ in range(n_blocks):
        kind = draw(st.sampled_from(["random", "power", "below_power", "zero", "outlier", "tiny"]
                                    + (["special"] if allow_special else [])))
        e = draw(st.integers(-30, 30))
        vals = [draw(st.floats(-2.0, 2.0, width=32)) * 2.0**e for _ in range(k)]
        if kind == "power":
            vals[draw(st.integers(0, k - 1))] = draw(st.sampled_from([1.0, -1.0])) * 2.0**e
            vals = [max(min(v, 2.0**e), -(2.0**e)) for v in vals]
        elif kind == "below_power":
            m = float(np.nextafter(np.float32(2.0**e), np.float32(0)))
            vals = [max(min(v, m), -m) for v in vals]
            vals[draw(st.integers(0, k - 1))] = m
        elif kind == "zero":
            vals = [draw(st.sampled_from([0.0, -0.0])) for _ in range(k)]
        elif kind == "outlier":
            vals[draw(st.integers(0, k - 1))] = 2.0 ** (e + draw(st.integers(5, 20)))
        elif kind == "tiny":
            vals = [v * 2.0**-100 for v in vals]
        elif kind == "special":
            vals[draw(st.integers(0, k - 1))] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        out.extend(vals)
    return torch.tensor(out, dtype=torch.float32).reshape(n_blocks, k)


@settings(max_examples=40, deadline=None)
@example(fmt="mxfp8_e4m3", data=None).via("mutant:mx_scale_uses_log2")
@given(fmt=st.sampled_from(MX_FORMATS), data=st.data())
def test_mx_matches_the_spec(impl, fmt, data):
    """MX: scale code = floor(log2(amax)) - emax_elem + 127 (clamped below at 0; 0xFF for a block
    with NaN/Inf), element codes = the saturated element encoding of V_i / X, exactly as the OCP
    MX v1.0 text derives them. Mutants: mx_scale_without_emax, mx_scale_uses_log2,
    mx_elements_not_saturated, mx_block_size_16, e8m0_bias_126."""
    if data is None:   # amax 2^3 (1 - 2^-53): float64 log2 rounds it up to 3, floor(log2) is 2
        x = torch.full((1, 32), 0.25, dtype=torch.float64)
        x[0, 3] = float(np.nextafter(8.0, 0.0))
        x[0, 4] = -2.0
    else:
        x = data.draw(blocks(fmt, allow_special=True))
    _assert_matches_oracle(impl, x, fmt)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), given_scale=st.booleans())
def test_nvfp4_matches_nvidia_scheme(impl, data, given_scale):
    """NVFP4: s = fl32(amax / (6 * 448)), block scale = E4M3(amax_b / (6 s)) saturated, element =
    E2M1(x / (scale * s)); a given tensor_scale replaces s. Mutants: nvfp4_block_size_32,
    nvfp4_global_scale_448, nvfp4_scale_not_saturated."""
    x = data.draw(blocks("nvfp4", allow_special=False))
    ts = None
    if given_scale:
        ts = float(np.float32(data.draw(st.floats(1e-6, 1e3)))) * float(x.abs().max() + 1) / 2688
    _assert_matches_oracle(impl, x, "nvfp4", ts)


@pytest.mark.parametrize("fmt", ALL_BLOCK)
def test_shapes_and_edge_blocks(impl, fmt):
    """Rank 3 input (2, 2, 2 blocks); an all-zero tensor (MX scale code 0 and -0.0 keeps its sign
    bit; NVFP4 s = 1, block scale 0 and codes 0); an empty last dimension gives empty codes and
    scales."""
    k = BLOCK[fmt]
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 2, 2 * k, generator=g) * 10
    codes, scales, _ = _assert_matches_oracle(impl, x, fmt)
    assert scales.shape == (2, 2, 2)
    z = torch.zeros(1, k)
    z[0, 1] = -0.0
    codes, scales, s = _assert_matches_oracle(impl, z, fmt)
    if fmt != "nvfp4":
        assert int(codes[0, 1]) == (0x8 if ELEMENT[fmt] == "fp4_e2m1" else 0x80), "-0.0 must keep its sign bit"
        assert scales.tolist() == [[0]]
    else:
        assert float(s) == 1.0 and scales.tolist() == [[0]] and codes.tolist() == [[0] * 16]
    e = torch.zeros(3, 0)
    codes, scales, _ = impl.get("quantize_blocks")(e, fmt)
    assert codes.shape == (3, 0) and scales.shape == (3, 0)
    one = torch.linspace(-2, 3, 2 * k)                          # rank 1: a single row of blocks
    codes, scales, s = _assert_matches_oracle(impl, one, fmt)
    assert scales.shape == (2,)
    back = impl.get("dequantize_blocks")(codes, scales, s, fmt)
    assert back.shape == (2 * k,)
    want = torch.tensor([decode_one(int(c), ELEMENT[fmt]) for c in codes], dtype=torch.float64) * torch.tensor(
        [decode_one(int(c), "e8m0" if fmt != "nvfp4" else "fp8_e4m3") for c in scales],
        dtype=torch.float64).repeat_interleave(k) * float(s)
    assert torch.equal(back, want), (back, want)


@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_mx_nan_and_inf_blocks(impl, fmt):
    """A block holding NaN, Inf or -Inf gets the NaN scale 0xFF and decodes to NaN throughout;
    its neighbours are untouched. Mutant: mx_inf_block_finite_scale."""
    x = torch.ones(4, 32)
    x[1, 5], x[2, 0], x[3, 31] = math.nan, math.inf, -math.inf
    codes, scales, s = impl.get("quantize_blocks")(x.reshape(1, 128), fmt)
    assert scales.tolist() == [[127 - MX[fmt][1], 0xFF, 0xFF, 0xFF]], scales.tolist()
    back = impl.get("dequantize_blocks")(codes, scales, s, fmt).reshape(4, 32)
    assert bool(torch.isnan(back[1:]).all()) and bool((back[0] == 1.0).all()), back


@pytest.mark.choice("a NaN-scaled MX block stores element codes 0")
def test_mx_nan_block_codes_are_zero(impl):
    """The element codes of a NaN-scaled block are not read by decode; the reference stores 0."""
    x = torch.ones(1, 32)
    x[0, 0] = math.nan
    codes, _, _ = impl.get("quantize_blocks")(x, "mxfp4")
    assert codes.tolist() == [[0] * 32]


@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_mx_dequantizes_every_scale_element_pair(impl, fmt):
    """Every (scale code, element code) pair: 256 x 256 (MXFP8) or 256 x 16 (MXFP4) values equal
    decode(element) * 2^(scale - 127), NaN for scale 0xFF; float64 and float32 out (exact)."""
    elem = ELEMENT[fmt]
    n_el = 1 << (4 if elem == "fp4_e2m1" else 8)
    codes = torch.arange(n_el).repeat(256, 1)                 # (256, n_el): row = scale code
    pad = (-n_el) % 32
    codes = torch.cat([codes, torch.zeros(256, pad, dtype=torch.int64)], 1) if pad else codes
    scales = torch.arange(256).reshape(256, 1).repeat(1, codes.shape[1] // 32)
    got = impl.get("dequantize_blocks")(codes, scales, 1.0, fmt)
    ev = torch.tensor([decode_one(c, elem) for c in range(n_el)] + [0.0] * pad, dtype=torch.float64)
    sv = torch.tensor([decode_one(c, "e8m0") for c in range(256)], dtype=torch.float64).reshape(256, 1)
    want = ev.reshape(1, -1) * sv
    same = ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (torch.isnan(got) & torch.isnan(want))
    assert bool(same.all()), f"{fmt}: first wrong (scale, element) {(~same).nonzero()[:4].tolist()}"
    got32 = impl.get("dequantize_blocks")(codes, scales, 1.0, fmt, dtype=torch.float32)
    assert got32.dtype == torch.float32
    w32 = want.to(torch.float32)
    assert bool(((got32 == w32) | (torch.isnan(got32) & torch.isnan(w32))).all())


def test_nvfp4_dequantizes_every_scale_element_pair(impl):
    """NVFP4: every (E4M3 scale, E2M1 element) pair times a float32 tensor scale: the exact product
    decode(e) * decode(scale) * s (exact in float64; rounded once to float32 for dtype=float32)."""
    codes = torch.arange(16).repeat(256, 1)
    scales = torch.arange(256).reshape(256, 1)
    ev = torch.tensor([decode_one(c, "fp4_e2m1") for c in range(16)], dtype=torch.float64)
    sv = torch.tensor([decode_one(c, "fp8_e4m3") for c in range(256)], dtype=torch.float64).reshape(256, 1)
    for s in (1.0, float(np.float32(0.1)), float(np.float32(3e-7))):
        got = impl.get("dequantize_blocks")(codes, scales, s, "nvfp4")
        want = ev.reshape(1, -1) * sv * s
        assert bool(((got == want) | (torch.isnan(got) & torch.isnan(want))).all()), s
        got32 = impl.get("dequantize_blocks")(codes, scales, torch.tensor(s, dtype=torch.float32), "nvfp4",
                                              dtype=torch.float32)
        w32 = want.to(torch.float32)
        assert bool(((got32 == w32) | (torch.isnan(got32) & torch.isnan(w32))).all()), s


@settings(max_examples=25, deadline=None)
@given(fmt=st.sampled_from(MX_FORMATS), data=st.data(), j=st.integers(-20, 20))
def test_mx_scaling_by_a_power_of_two_moves_only_the_scale(impl, fmt, data, j):
    """Metamorphic: x * 2^j (no clamping involved) has the same element codes and every scale
    code moved by j. Mutant: mx_scale_without_emax (clamps hide nothing here)."""
    x = data.draw(blocks(fmt, allow_special=False))
    amax = x.abs().amax(-1)
    if bool((amax == 0).any()) or bool((amax < 2.0**-90).any()):
        return
    q = impl.get("quantize_blocks")
    c1, s1, _ = q(x, fmt)
    c2, s2, _ = q(x.to(torch.float64) * 2.0**j, fmt)
    assert torch.equal(c1, c2), "element codes changed when x was scaled by a power of two"
    assert torch.equal(s2.to(torch.int64), s1.to(torch.int64) + j), (s1.tolist(), s2.tolist(), j)


@settings(max_examples=25, deadline=None)
@given(fmt=st.sampled_from(ALL_BLOCK), data=st.data())
def test_error_within_half_a_step_unless_saturated(impl, fmt, data):
    """|x - dequantize(quantize(x))| <= half the element format's step at |x| / X, times the block's
    scale (the step of E2M1/E4M3/E5M2 at that magnitude, or the subnormal step), except where the
    scaled value exceeded the element max (MX E4M3/E5M2 blocks: up to 2^(emax+1), saturated)."""
    x = data.draw(blocks(fmt, allow_special=False)).to(torch.float64)
    codes, scales, s = impl.get("quantize_blocks")(x, fmt)
    back = impl.get("dequantize_blocks")(codes, scales, s, fmt)
    elem = ELEMENT[fmt]
    m, emin, top = {"fp8_e4m3": (3, -6, 448.0), "fp8_e5m2": (2, -14, 57344.0), "fp4_e2m1": (1, 0, 6.0)}[elem]
    k = BLOCK[fmt]
    scale = back.new_tensor([decode_one(int(c), "e8m0" if fmt != "nvfp4" else "fp8_e4m3") for c in scales.reshape(-1)])
    scale = (scale * float(s)).repeat_interleave(k).reshape(x.shape)
    ok_blocks = scale > 0
    y = (x / torch.where(ok_blocks, scale, 1.0)).abs()
    e = (torch.frexp(torch.where(y > 0, y, 1.0)).exponent - 1).to(torch.float64).clamp(min=emin)
    half = torch.exp2(e - m) / 2 * scale
    sat = y > top
    err = (x - back).abs()
    ok = ~ok_blocks | sat | (err <= half * (1 + 2.0**-40))
    assert bool(ok.all()), f"{fmt}: error {err[~ok][:4].tolist()} > half step {half[~ok][:4].tolist()}"
