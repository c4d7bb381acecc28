"""Round-to-nearest group-wise quantisation, dequantisation and 4-bit packing (course 05.03).

What any correct implementation must satisfy (the law), from the contract's formulas
(reference/weight_quant.py): the scale of a group (symmetric: exactly fl32(absmax / qmax);
asymmetric: (hi - lo) / maxq over a range holding 0, to a couple of float32 ulps), its zero point
(2^(bits-1), or the nearest integer to -lo/s), every code the nearest grid point to w/s + z given
the implementation's OWN scale and zero (ties to even, checked exactly on representable midpoints),
hence the per-element bound |w - ŵ| <= s/2 (+ the float rounding derived in the module doc);
exact round trips of representable weights; groups that are independent of each other; and 4-bit
packing with element 2i in the low nibble, checked on all 256 pairs. The reference's own float
bits are choice tests.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings

from spec_tests.weight_quant.oracles import exact_dequant, expand
from spec_tests.weight_quant.strategies import QuantCase, quant_cases


def _scaled(n: int) -> int:
    return max(1, round(n * settings().max_examples / 25))


def _quantize(impl, case: QuantCase, device="cpu"):
    w = case.weight(device)
    before = w.clone()
    codes, scales, zeros = impl.get("quantize")(w, **case.kwargs)
    assert torch.equal(w, before), "quantize modified its input w"
    out_f, in_f = w.shape
    groups = in_f // case.group
    for name, t, dtype, shape in (("codes", codes, torch.uint8, (out_f, in_f)),
                                  ("scales", scales, torch.float32, (out_f, groups)),
                                  ("zeros", zeros, torch.uint8, (out_f, groups))):
        assert isinstance(t, torch.Tensor) and t.dtype == dtype and tuple(t.shape) == shape, (
            f"{name} must be a {dtype} tensor of shape {shape}, got "
            f"{getattr(t, 'dtype', type(t).__name__)} {tuple(getattr(t, 'shape', ()))}\n    case: {case!r}")
    return w, codes.cpu(), scales.cpu(), zeros.cpu()


def _check_rtn_law(case: QuantCase, w, codes, scales, zeros):
    """The law of round-to-nearest for one case (module doc)."""
    maxq = (1 << case.bits) - 1
    w64 = w.cpu().float().double()
    g = case.group
    wg = w64.reshape(w64.shape[0], w64.shape[1] // g, g)
    s64 = scales.double()
    assert bool((scales > 0).all() & torch.isfinite(scales).all()), f"scales must be positive and finite\n    case: {case!r}"
    if case.symmetric:
        qmax = (1 << (case.bits - 1)) - 1
        want = (wg.abs().amax(-1) / qmax).float()
        want = torch.where(want > 0, want, torch.ones_like(want))
        bad = scales != want
        assert not bad.any(), (f"symmetric scale must be fl32(absmax / {qmax}) (1 for an all-zero group): at "
                               f"{tuple(bad.nonzero()[0].tolist())} got {float(scales[bad][0])!r}, expected "
                               f"{float(want[bad][0])!r}\n    case: {case!r}")
        assert bool((zeros == 1 << (case.bits - 1)).all()), (
            f"symmetric zero point must be {1 << (case.bits - 1)}, got {zeros.unique().tolist()}\n    case: {case!r}")
    else:
        lo, hi = wg.amin(-1).clamp(max=0), wg.amax(-1).clamp(min=0)
        want = (hi - lo) / maxq
        live = want > 0
        rel = ((s64 - want).abs() / want.clamp(min=1e-300))[live]
        assert not rel.numel() or float(rel.max()) <= 2 ** -22, (
            f"asymmetric scale must be (max(w_max, 0) - min(w_min, 0)) / {maxq} (the range holds 0): relative "
            f"error {float(rel.max()):.3g}\n    case: {case!r}")
        assert bool((scales[~live] == 1).all()), f"an all-zero group must get scale 1\n    case: {case!r}"
        dz = (zeros.double() + lo / s64).abs()
        assert (float(dz.max()) if dz.numel() else 0.0) <= 0.5 + 1e-6, (
            f"asymmetric zero point must be round(-min(w_min, 0) / s): off by {float(dz.max()):.3g}\n    case: {case!r}")
    t = (w64 / expand(s64, w64.shape[1]) + expand(zeros.double(), w64.shape[1])).clamp(0, maxq)
    off = (codes.double() - t).abs()
    assert (float(off.max()) if off.numel() else 0.0) <= 0.5 + 1e-6, (
        f"codes must be the nearest grid point to w / s + z (clamped to [0, {maxq}]): at "
        f"{tuple((off == off.max()).nonzero()[0].tolist())} code {int(codes[off == off.max()][0])} is "
        f"{float(off.max()):.3f} steps away\n    case: {case!r}")
    step = expand(s64, w64.shape[1])
    err = (w64 - exact_dequant(codes, scales, zeros)).abs()
    bound = step / 2 + 2.0 ** -52 * w64.abs()
    assert bool((err <= bound).all()), f"|w - s(u - z)| exceeds s/2 at {tuple((err > bound).nonzero()[0].tolist())}"


@example(case=QuantCase(4, 64, 32, 4, True, "float32", 1)).via(
    "mutant:scale_from_max_not_absmax mutant:scale_over_maxq_symmetric")
@example(case=QuantCase(3, 96, 32, 4, False, "bfloat16", 2, "positive")).via(
    "mutant:asym_range_without_zero")
@example(case=QuantCase(2, 48, 16, 8, False, "float32", 3, "outliers")).via("mutant:zero_point_truncated")
@example(case=QuantCase(3, 64, 16, 4, True, "float16", 4, "zero_groups")).via("boundary: all-zero groups, s = 1")
@settings(max_examples=_scaled(25))
@given(case=quant_cases())
def test_rtn_codes_are_nearest_on_the_stated_grid(impl, case):
    """Every group's scale and zero point follow the contract's formula, and every code is the
    grid point nearest to w/s + z for the implementation's own s and z: so |w - s(u - z)| <= s/2
    per element, for INT4/INT8, symmetric/asymmetric, group sizes 2-128 and per channel, weights
    with outliers, all positive, all-zero groups and tiny magnitudes, in every float dtype."""
    _check_rtn_law(case, *_quantize(impl, case))


@settings(max_examples=_scaled(12))
@given(case=quant_cases(kinds=("normal", "outliers", "zero_groups")))
def test_dequantized_error_within_half_a_step(impl, case):
    """``dequantize(quantize(w))`` is within the bound of the module doc: |w - ŵ| <= s/2 +
    2^-24 |ŵ| + 2^-52 |w| per element (half a step of its own group, plus float32's one rounding
    of the product); the worst element of a group of normal weights is at least a quarter step
    away for some group (a bound that is never approached would not test the step)."""
    w, codes, scales, zeros = _quantize(impl, case)
    w_hat = impl.get("dequantize")(codes, scales, zeros)
    assert isinstance(w_hat, torch.Tensor) and w_hat.dtype == torch.float32 and w_hat.shape == w.shape, (
        f"dequantize must return float32 {tuple(w.shape)}, got {getattr(w_hat, 'dtype', type(w_hat))}")
    w64, h64 = w.cpu().float().double(), w_hat.cpu().double()
    step = expand(scales.double(), w.shape[1])
    bound = step / 2 + 2.0 ** -24 * h64.abs() + 2.0 ** -52 * w64.abs()
    err = (w64 - h64).abs()
    bad = err > bound
    assert not bad.any(), (f"|w - ŵ| = {float(err[bad][0]):.6g} > s/2 + rounding = {float(bound[bad][0]):.6g} at "
                           f"{tuple(bad.nonzero()[0].tolist())} (s = {float(step[bad][0]):.6g})\n    case: {case!r}")


def _representable(bits: int, symmetric: bool, exponent: int):
    """A group (1, 2^bits) holding every code of the grid once (a weight per code, power-of-two
    step 2^exponent, so absmax / qmax and (hi - lo) / maxq are exact): (w, expected codes, zero)."""
    maxq = (1 << bits) - 1
    z = 1 << (bits - 1)
    codes = torch.arange(0, maxq + 1)
    if symmetric:
        codes = codes[1:]                                  # RTN never reaches -2^(bits-1)
    else:
        z = z - 1                                          # lo = -z s, hi = (maxq - z) s
    w = (codes - z).double() * 2.0 ** exponent
    return w[None].float(), codes[None].to(torch.uint8), z


@pytest.mark.parametrize("bits", (4, 8))
@pytest.mark.parametrize("symmetric", (True, False), ids=("symmetric", "asymmetric"))
def test_representable_weights_round_trip_exactly(impl, bits, symmetric):
    """A weight already on the grid comes back bit for bit: every code of INT4/INT8 (one group
    holding each, step 2^-3 and 2^5), each reordered; quantize returns exactly those codes and
    dequantize exactly the weight."""
    for exponent in (-3, 5):
        w, want, z = _representable(bits, symmetric, exponent)
        perm = torch.randperm(w.shape[1], generator=torch.Generator().manual_seed(bits + exponent))
        w, want = w[:, perm], want[:, perm]
        codes, scales, zeros = impl.get("quantize")(w, bits=bits, group_size=w.shape[1], symmetric=symmetric)
        assert float(scales[0, 0]) == 2.0 ** exponent and int(zeros[0, 0]) == z, (
            f"grid of step 2^{exponent}: expected scale {2.0 ** exponent} and zero {z}, got {float(scales[0, 0])} "
            f"and {int(zeros[0, 0])}")
        assert torch.equal(codes.cpu(), want), f"codes of representable weights differ (step 2^{exponent})"
        back = impl.get("dequantize")(codes, scales, zeros)
        assert torch.equal(back.cpu(), w), f"dequantize(quantize(w)) != w for representable w (step 2^{exponent})"


@pytest.mark.parametrize("bits", (4, 8))
@pytest.mark.parametrize("symmetric", (True, False), ids=("symmetric", "asymmetric"))
def test_every_midpoint_rounds_half_to_even(impl, bits, symmetric):
    """Exhaustive: every midpoint between two codes (w/s = k + 1/2, exact in binary with a
    power-of-two step) rounds w/s to its EVEN neighbour before z is added (u = round(w/s) + z,
    torch.round; not round-half-away, floor(x + 0.5), nor round(w/s + z), whose parity flips with
    an odd z); the group also holds the grid's two ends so its scale is exactly the step."""
    w_ends, _, z = _representable(bits, symmetric, -2)
    maxq = (1 << bits) - 1
    lo, hi = (1, maxq) if symmetric else (0, maxq)
    mids = torch.arange(lo, hi).double() + 0.5                       # t = w / s + z
    w = torch.cat([w_ends[0, [0, -1]].double(), (mids - z) * 2.0 ** -2])
    pad = (-len(w)) % 4                                              # a group size dividing in_features
    w = torch.cat([w, torch.zeros(pad, dtype=torch.float64)])[None].float()
    codes, scales, zeros = impl.get("quantize")(w, bits=bits, group_size=w.shape[1], symmetric=symmetric)
    got = codes[0, 2:2 + len(mids)].cpu().long()
    want = (torch.round(mids - z) + z).long()                       # round(w / s) + z, w / s = t - z
    assert float(scales[0, 0]) == 0.25, f"scale should be the step 0.25, got {float(scales[0, 0])}"
    bad = got != want
    assert not bad.any(), (f"midpoint w/s = {float(mids[bad][0]) - z} (z = {z}) gave code {int(got[bad][0])}, "
                           f"expected {int(want[bad][0])} (round w/s half to even, then add z)")


@pytest.mark.parametrize("group", (2, 16, 32, 64, 128))
def test_groups_are_independent(impl, group):
    """Quantising the whole weight equals quantising each group's columns on their own (one group
    each): a group is exactly columns g*G .. g*G + G - 1 of its row, no column of a neighbour."""
    case = QuantCase(3, 4 * group, group, 4, False, "float32", group, "outliers")
    w = case.weight()
    codes, scales, zeros = impl.get("quantize")(w, **case.kwargs)
    for gi in range(4):
        cols = slice(gi * group, (gi + 1) * group)
        c1, s1, z1 = impl.get("quantize")(w[:, cols].contiguous(), bits=4, group_size=group, symmetric=False)
        assert torch.equal(codes[:, cols].cpu(), c1.cpu()) and torch.equal(scales[:, gi:gi + 1].cpu(), s1.cpu()) \
            and torch.equal(zeros[:, gi:gi + 1].cpu(), z1.cpu()), (
            f"group {gi} (columns {gi * group}..{(gi + 1) * group - 1}) quantised alone differs from its part of "
            f"the whole: a group boundary is off")


def test_per_channel_is_one_group_per_row(impl):
    """``group_size=None`` means one group per row: the same as group_size = in_features; and the
    default group size is 128 (omitting it equals passing 128)."""
    w = QuantCase(3, 256, None, 4, True, "float32", 9, "outliers").weight()
    q = impl.get("quantize")
    a, b = q(w, bits=4, group_size=None, symmetric=True), q(w, bits=4, group_size=256, symmetric=True)
    assert all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(a, b)), "group_size=None must equal in_features"
    default, explicit = q(w), q(w, bits=4, group_size=128, symmetric=True)
    assert all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(default, explicit)), (
        "quantize(w) must mean bits=4, group_size=128, symmetric=True")
    assert default[1].shape == (3, 2)


def test_one_input_feature_int8(impl):
    """INT8 has no packing, so a single input feature (in_features 1, one group of one column) is a
    legal weight: it quantises and dequantises within half a step (w = absmax: exactly)."""
    w = torch.tensor([[0.75], [-2.5], [0.0]])
    codes, scales, zeros = impl.get("quantize")(w, bits=8, group_size=None, symmetric=True)
    assert codes.shape == (3, 1) and scales.shape == (3, 1), (codes.shape, scales.shape)
    got = impl.get("dequantize")(codes, scales, zeros)
    assert torch.equal(got.cpu().to(torch.float32), w), f"a one-column int8 weight round trip gave {got.tolist()}"


@pytest.mark.parametrize("bits,symmetric", [(4, True), (4, False), (8, True), (8, False)])
def test_a_group_of_one_weight(impl, bits, symmetric):
    """group_size 1 is legal (an int >= 1 dividing in_features): one scale per weight, codes and
    scales of w's shape, and every weight back within half its own step (a nonzero weight:
    exactly, up to float rounding, since its own absmax / range sets the step)."""
    w = torch.tensor([[0.75, -2.5, 0.0, 3e-3], [1.0, -1.0, 7.0, -0.125]])
    codes, scales, zeros = impl.get("quantize")(w, bits=bits, group_size=1, symmetric=symmetric)
    assert codes.shape == w.shape and scales.shape == w.shape, (codes.shape, scales.shape)
    got = impl.get("dequantize")(codes, scales, zeros).cpu().double()
    bound = scales.cpu().double() / 2 + 2.0 ** -20 * w.double().abs()
    assert bool(((got - w.double()).abs() <= bound).all()), f"group_size 1 round trip gave {got.tolist()}"


def test_all_zero_group_dequantizes_to_exact_zero(impl):
    """A group of zeros (and one of -0.0) dequantises to exactly 0 with a positive finite scale,
    in both modes: no 0/0."""
    w = torch.zeros(2, 64)
    w[1, :32] = -0.0
    w[1, 32:] = torch.linspace(-1, 1, 32)
    for symmetric in (True, False):
        codes, scales, zeros = impl.get("quantize")(w, bits=4, group_size=32, symmetric=symmetric)
        assert bool((scales > 0).all()) and bool(torch.isfinite(scales).all()), "scales must be positive and finite"
        back = impl.get("dequantize")(codes, scales, zeros).cpu()
        assert bool((back[0] == 0).all()) and bool((back[1, :32] == 0).all()), "an all-zero group must give ŵ = 0"


@pytest.mark.choice("scale of an all-zero group = 1; scales computed in float64 and rounded once")
def test_reference_bits(impl, reference):
    """The reference's exact codes, scales and zeros (its float order: float64 then one rounding)."""
    for case in (QuantCase(5, 128, 32, 4, False, "bfloat16", 21, "outliers"),
                 QuantCase(4, 64, 16, 8, True, "float32", 22, "zero_groups"),
                 QuantCase(3, 96, None, 4, False, "float16", 23)):
        w = case.weight()
        got = impl.get("quantize")(w, **case.kwargs)
        want = reference.get("quantize")(w, **case.kwargs)
        for name, a, b in zip(("codes", "scales", "zeros"), got, want):
            assert torch.equal(a.cpu(), b.cpu()), f"{name} differ from the reference's\n    case: {case!r}"


# ------------------------------------------------------------------------------- dequantize
def test_dequantize_is_one_rounding_of_the_exact_product(impl):
    """ŵ = s (u - z) with one rounding: within half a float32 ulp of the exact float64 product
    (every code, every zero point 0-15 and 0-255, random scales), and exact in float64 for float64
    scales; group g covers columns g*G .. g*G + G - 1."""
    g = torch.Generator().manual_seed(5)
    for maxq in (15, 255):
        codes = torch.arange(maxq + 1).repeat(4, 2)[:, : 2 * (maxq + 1)].to(torch.uint8)
        groups = 8
        scales = torch.rand(4, groups, generator=g) * 3
        zeros = torch.randint(0, maxq + 1, (4, groups), generator=g).to(torch.uint8)
        exact = exact_dequant(codes, scales, zeros)
        got = impl.get("dequantize")(codes, scales, zeros)
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float32 and got.shape == codes.shape
        ulp = torch.finfo(torch.float32).eps * exact.abs()
        assert bool(((got.cpu().double() - exact).abs() <= ulp / 2 + 1e-45).all()), (
            "dequantize is not (u - z) * s rounded once to float32 (or a group covers the wrong columns)")
        got64 = impl.get("dequantize")(codes, scales.double(), zeros)
        assert got64.dtype == torch.float64 and torch.equal(got64.cpu(), exact), (
            "dequantize with float64 scales must return the exact float64 product")


# -------------------------------------------------------------------------------- packing
def _all_pairs() -> torch.Tensor:
    """All 256 (even, odd) 4-bit pairs as codes (1, 512): pair i = (i % 16, i // 16)."""
    i = torch.arange(256)
    return torch.stack([i % 16, i // 16], dim=-1).reshape(1, 512).to(torch.uint8)


def test_pack_every_pair_low_nibble_first(impl):
    """Exhaustive: pack_int4 of every (a, b) pair of 4-bit codes is the byte a | b << 4 (element
    2i in the LOW nibble, GPTQ's order), and unpack_int4 of every byte 0-255 returns its pair; each
    is the other's inverse on all 256 values."""
    pairs = _all_pairs()
    packed = impl.get("pack_int4")(pairs)
    want = torch.arange(256, dtype=torch.uint8)[None]
    assert isinstance(packed, torch.Tensor) and packed.dtype == torch.uint8 and packed.shape == (1, 256)
    assert torch.equal(packed.cpu(), want), (
        f"pack_int4([a, b]) must be a | b << 4: pack_int4([1, 0]) gave {int(packed[0, 1])}, "
        f"pack_int4([0, 1]) gave {int(packed[0, 16])}")
    unpacked = impl.get("unpack_int4")(want)
    assert isinstance(unpacked, torch.Tensor) and unpacked.dtype == torch.uint8
    assert torch.equal(unpacked.cpu(), pairs), "unpack_int4(byte) must be (byte & 15, byte >> 4)"


def test_pack_round_trip_any_shape(impl):
    """unpack(pack(c)) == c and pack(unpack(p)) == p for ranks 1-3, last dims 0-64 (random codes)."""
    g = torch.Generator().manual_seed(3)
    for shape in ((2,), (0,), (3, 64), (2, 3, 10), (1, 0), (5, 2)):
        codes = torch.randint(0, 16, shape, generator=g).to(torch.uint8)
        packed = impl.get("pack_int4")(codes)
        assert tuple(packed.shape) == (*shape[:-1], shape[-1] // 2), f"pack_int4 shape for {shape}"
        assert torch.equal(impl.get("unpack_int4")(packed).cpu(), codes), f"unpack(pack(c)) != c for shape {shape}"
        assert torch.equal(impl.get("pack_int4")(impl.get("unpack_int4")(packed)).cpu(), packed.cpu())
