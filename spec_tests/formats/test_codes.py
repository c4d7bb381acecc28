"""Element formats (02.08, 05.02): every code point, every midpoint, the special values.

Bounded-exhaustive where the domain is small: all 2^bits codes of every format (65,536 for
bf16/fp16), every midpoint between adjacent representable values and its two float neighbours.
Bit equality is the contract here: a format's rounding fixes every bit.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from spec_tests.formats.oracles import (
    FLOAT_FORMATS,
    HAS_NAN,
    SPECS,
    decode_one,
    encode_one,
    max_finite,
    nan_code,
    overflow_code,
    positive_table,
)

ALL = tuple(SPECS)
CODE_DTYPE = {f: (torch.int32 if SPECS[f].bits == 16 else torch.uint8) for f in ALL}


def codes_of(fmt: str) -> torch.Tensor:
    return torch.arange(1 << SPECS[fmt].bits, dtype=torch.int64)


def oracle_values(fmt: str) -> torch.Tensor:
    return torch.tensor([decode_one(c, fmt) for c in range(1 << SPECS[fmt].bits)], dtype=torch.float64)


def same_values(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Elementwise: equal with the same sign bit (so -0.0 != 0.0), or both NaN."""
    return ((got == want) & (torch.signbit(got) == torch.signbit(want))) | (torch.isnan(got) & torch.isnan(want))


def assert_codes(got: torch.Tensor, want, x, fmt: str, what: str):
    want = torch.as_tensor(want, dtype=torch.int64)
    assert got.dtype == CODE_DTYPE[fmt], f"encode(..., {fmt!r}) returned {got.dtype}, expected {CODE_DTYPE[fmt]}"
    assert got.shape == want.shape, f"encode(..., {fmt!r}) returned shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    bad = got.to(torch.int64) != want
    if bool(bad.any()):
        i = bad.nonzero()[:5].flatten().tolist()
        xs = x.reshape(-1) if isinstance(x, torch.Tensor) else torch.as_tensor(x).reshape(-1)
        g, w = got.reshape(-1).to(torch.int64), want.reshape(-1)
        rows = [f"x={float(xs[j])!r}: got {int(g[j]):#x} ({decode_one(int(g[j]) % (1 << SPECS[fmt].bits), fmt)!r}), "
                f"expected {int(w[j]):#x} ({decode_one(int(w[j]), fmt)!r})" for j in i]
        raise AssertionError(f"{fmt} {what}: {int(bad.sum())} wrong codes, e.g.\n  " + "\n  ".join(rows))


# --- every code point -------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ALL)
def test_every_code_decodes_to_its_bit_fields(impl, fmt):
    """decode of every one of the 2^bits codes equals the value its sign/exponent/mantissa fields
    spell (oracle written from the format's spec), -0 with its sign bit, Inf as Inf, NaN as NaN.
    Mutants: e8m0_bias_126, e4m3_nan_is_inf_pattern, fp4_subnormal_as_normal, int4_offset_binary."""
    got = impl.get("decode")(codes_of(fmt), fmt)
    want = oracle_values(fmt)
    assert got.dtype == torch.float64 and got.shape == want.shape, (got.dtype, got.shape)
    ok = same_values(got, want)
    bad = (~ok).nonzero().flatten()[:5].tolist()
    assert bool(ok.all()), f"{fmt}: codes {[hex(c) for c in bad]} decode to {got[bad].tolist()}, expected {want[bad].tolist()}"


@pytest.mark.parametrize("fmt", ALL)
def test_every_code_round_trips(impl, fmt):
    """encode(decode(c)) == c for every code c that is not NaN (all 256 / 16 / 65,536, -0 and Inf
    included), from float64 and, where exact, float32; every NaN code decodes to a NaN."""
    c = codes_of(fmt)
    v = impl.get("decode")(c, fmt)
    nan = torch.isnan(v)
    expect_nan = torch.isnan(oracle_values(fmt))
    assert torch.equal(nan, expect_nan), f"{fmt}: NaN codes {c[nan].tolist()[:8]}, expected {c[expect_nan].tolist()[:8]}"
    keep = ~nan
    for dtype in (torch.float64, torch.float32):
        x = v[keep].to(dtype)
        assert_codes(impl.get("encode")(x, fmt), c[keep], x, fmt, f"round trip from {dtype}")


@pytest.mark.parametrize("fmt", ALL)
def test_decode_float32_output_and_code_dtypes(impl, fmt):
    """decode(..., dtype=torch.float32) holds the same values (every format is exact in float32),
    and codes may come as any integer dtype that holds them."""
    c = codes_of(fmt)
    want = oracle_values(fmt)
    dec = impl.get("decode")
    got32 = dec(c, fmt, dtype=torch.float32)
    assert got32.dtype == torch.float32
    assert bool(same_values(got32.to(torch.float64), want).all()), f"{fmt}: float32 decode differs"
    for cd in (torch.int32, torch.int64) + ((torch.uint8,) if SPECS[fmt].bits <= 8 else ()):
        assert bool(same_values(dec(c.to(cd), fmt), want).all()), f"{fmt}: codes as {cd} decode differently"


@pytest.mark.parametrize("fmt", ALL)
def test_representable_is_the_finite_decoded_set(impl, fmt):
    """representable(fmt) is every finite value, sorted, distinct, zero once as +0.0; sizes
    pinned (fp4_e2m1: 15, fp8_e4m3: 253, fp8_e5m2: 247, e8m0: 255, int8: 256, int4: 16)."""
    got = impl.get("representable")(fmt)
    v = oracle_values(fmt)
    want = sorted({float(a) + 0.0 for a in v.tolist() if math.isfinite(a)})
    assert got.dtype == torch.float64 and got.dim() == 1
    assert got.tolist() == want, f"{fmt}: {got.tolist()[:10]}... vs {want[:10]}..."
    assert not bool(torch.signbit(got[got == 0]).any()), f"{fmt}: zero must appear as +0.0"
    sizes = {"fp4_e2m1": 15, "fp8_e4m3": 253, "fp8_e5m2": 247, "e8m0": 255, "int8": 256, "int4": 16,
             "bf16": 65279, "fp16": 63487}
    assert got.numel() == sizes[fmt]


def test_fp4_values_are_the_course_table(impl):
    """FP4 E2M1 holds exactly +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}."""
    pos = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert impl.get("representable")("fp4_e2m1").tolist() == [-v for v in pos[:0:-1]] + pos


# --- every midpoint ---------------------------------------------------------------------------
def _float_pairs(fmt: str):
    """(lo value, hi value, lo code, hi code) for adjacent non-negative values, the last pair
    being (max, the overflow neighbour)."""
    vals, codes = positive_table(fmt)
    return vals[:-1], vals[1:], codes[:-1], codes[1:]


def _expected_tie(fmt, lo_codes, hi_codes, saturate):
    if fmt == "e8m0":
        want = list(hi_codes)                       # 1.5 * 2^k -> 2^(k+1): the even significand
    elif SPECS[fmt].e == 0:
        want = [lo if lo % 2 == 0 else hi for lo, hi in zip(lo_codes, hi_codes)]
    else:
        want = [lo if lo % 2 == 0 else hi for lo, hi in zip(lo_codes, hi_codes)]
    top = positive_table(fmt)[1][-2]
    return [overflow_code(fmt, saturate) if c > top else c for c in want]


def _nextafter(x: np.ndarray, direction: float) -> np.ndarray:
    return np.nextafter(x, np.full_like(x, direction))


@pytest.mark.parametrize("saturate", [False, True], ids=["nonsat", "sat"])
@pytest.mark.parametrize("fmt", FLOAT_FORMATS + ("e8m0",))
def test_every_midpoint_rounds_half_to_even(impl, fmt, saturate):
    """Every midpoint between adjacent representable values (both signs, the overflow midpoint
    above the max included) encodes to the neighbour whose code is even (e8m0: the larger
    power); the next float below/above it (float64 and float32) to the lower/upper neighbour.
    Mutants: round_half_away, overflow_before_rounding, saturate_ignored."""
    lo, hi, lc, hc = _float_pairs(fmt)
    lo, hi = np.array(lo), np.array(hi)
    mid = (lo + hi) / 2                              # exact in float64: adjacent values of <= 11 bits
    tie = _expected_tie(fmt, lc, hc, saturate)
    top = positive_table(fmt)[1][-2]
    down = list(lc)
    up = [overflow_code(fmt, saturate) if c > top else c for c in hc]
    enc = impl.get("encode")
    signs = (1.0,) if fmt == "e8m0" else (1.0, -1.0)
    for dtype, npd in ((torch.float64, np.float64), (torch.float32, np.float32)):
        m = mid.astype(npd)
        if not np.array_equal(m.astype(np.float64), mid):  # float32 cannot hold these midpoints
            continue
        for sign in signs:
            sb = 0 if sign > 0 else 1 << (SPECS[fmt].bits - 1)
            for what, xs, want in (("midpoint", m, tie), ("just below the midpoint", _nextafter(m, 0.0), down),
                                   ("just above the midpoint", _nextafter(m, np.inf), up)):
                x = torch.from_numpy(np.ascontiguousarray(sign * xs))
                assert_codes(enc(x, fmt, saturate=saturate), [w | sb for w in want], x, fmt,
                             f"{what} ({dtype}, sign {sign:+.0f}, saturate={saturate})")


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_every_integer_midpoint_rounds_half_to_even(impl, fmt):
    """n + 0.5 for every n in range (and one past each end) encodes to the even integer, saturated;
    n + 0.5 -+ one ulp to n / n + 1. Mutants: round_half_away, int4_symmetric_range."""
    lo, hi = -(1 << (SPECS[fmt].bits - 1)), (1 << (SPECS[fmt].bits - 1)) - 1
    n = np.arange(lo - 2, hi + 2, dtype=np.float64)
    mid = n + 0.5
    clamp = lambda v: np.clip(v, lo, hi).astype(np.int64) % (1 << SPECS[fmt].bits)  # noqa: E731
    even = np.where(n % 2 == 0, n, n + 1)
    enc = impl.get("encode")
    for xs, want, what in ((mid, clamp(even), "midpoint"), (_nextafter(mid, -np.inf), clamp(n), "below"),
                           (_nextafter(mid, np.inf), clamp(n + 1), "above")):
        x = torch.from_numpy(xs)
        assert_codes(enc(x, fmt), want, x, fmt, f"integer {what}")


# --- generated values against the oracle ------------------------------------------------------
def _bits_to_float(bits: list[int], dtype) -> torch.Tensor:
    if dtype == torch.float32:
        return torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)
    return torch.tensor([b - (1 << 64) if b >> 63 else b for b in bits], dtype=torch.int64).view(torch.float64)


@settings(max_examples=60, deadline=None)
@example(fmt="fp8_e4m3", saturate=False, bits=[0x43E80000, 0x43E80001, 0x7F800000, 0xFF800000, 0x80000000, 0x3A800000],
         dtype="float32").via("mutant:e4m3_overflow_saturates")
@example(fmt="fp8_e5m2", saturate=True, bits=[0x7F800000, 0x47700000, 0xC7700001], dtype="float32").via("mutant:saturate_ignored")
@example(fmt="e8m0", saturate=False, bits=[0x00000000, 0x80000000, 0xBF800000, 0x3FC00000, 0x00400000, 0x7F400000],
         dtype="float32").via("boundary: e8m0 of 0, -0, -1, the tie 1.5, 2^-127 and 1.5 * 2^127")
@example(fmt="bf16", saturate=False, bits=[0x3FF0_1000_0000_0001, 0x3FF0_1000_0000_0000], dtype="float64").via("mutant:float64_through_float32")
@given(fmt=st.sampled_from(ALL), saturate=st.booleans(), dtype=st.sampled_from(["float32", "float64"]),
       bits=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=64))
def test_random_bit_patterns_match_the_oracle(impl, fmt, saturate, dtype, bits):
    """Any float (random bit patterns: subnormals, NaN payloads, Inf, huge float64) encodes to the
    oracle's code: the nearest value, ties even, then the format's overflow/NaN/Inf rule."""
    td = torch.float32 if dtype == "float32" else torch.float64
    x = _bits_to_float([b & (0xFFFFFFFF if dtype == "float32" else 0xFFFFFFFFFFFFFFFF) for b in bits], td)
    if fmt not in HAS_NAN:
        x = torch.where(torch.isnan(x), 0.0, x)
    want = [encode_one(v, fmt, saturate) for v in x.to(torch.float64).tolist()]
    assert_codes(impl.get("encode")(x, fmt, saturate=saturate), want, x, fmt, f"{dtype} bit patterns")


@settings(max_examples=40, deadline=None)
@given(fmt=st.sampled_from(ALL), dtype=st.sampled_from(["float16", "bfloat16"]),
       bits=st.lists(st.integers(0, 2**16 - 1), min_size=1, max_size=64), saturate=st.booleans())
def test_half_precision_inputs_match_the_oracle(impl, fmt, dtype, bits, saturate):
    """float16 / bfloat16 inputs are exact values too: same codes as the oracle."""
    x = torch.tensor(bits, dtype=torch.int64).to(torch.int16).view(getattr(torch, dtype))
    if fmt not in HAS_NAN:
        x = torch.where(torch.isnan(x), 0.0, x).to(getattr(torch, dtype))
    want = [encode_one(v, fmt, saturate) for v in x.to(torch.float64).tolist()]
    assert_codes(impl.get("encode")(x, fmt, saturate=saturate), want, x, fmt, f"{dtype} inputs")


# --- special values, pinned -------------------------------------------------------------------
INF, NAN = math.inf, math.nan
# (fmt, saturate, x, code): overflow, Inf, -0, underflow, the overflow midpoints.
SPECIAL = [
    ("fp8_e4m3", False, 448.0, 0x7E), ("fp8_e4m3", False, 464.0, 0x7E), ("fp8_e4m3", False, 464.5, 0x7F),
    ("fp8_e4m3", False, -500.0, 0xFF), ("fp8_e4m3", False, INF, 0x7F), ("fp8_e4m3", False, -INF, 0xFF),
    ("fp8_e4m3", True, 500.0, 0x7E), ("fp8_e4m3", True, INF, 0x7E), ("fp8_e4m3", True, -INF, 0xFE),
    ("fp8_e4m3", False, -0.0, 0x80), ("fp8_e4m3", False, 2.0**-10, 0x00), ("fp8_e4m3", False, -2.0**-10, 0x80),
    ("fp8_e4m3", False, 2.0**-9, 0x01), ("fp8_e4m3", False, 3 * 2.0**-10, 0x02), ("fp8_e4m3", False, 2.0**-6, 0x08),
    ("fp8_e5m2", False, 57344.0, 0x7B), ("fp8_e5m2", False, 61439.0, 0x7B), ("fp8_e5m2", False, 61440.0, 0x7C),
    ("fp8_e5m2", False, INF, 0x7C), ("fp8_e5m2", False, -INF, 0xFC), ("fp8_e5m2", True, 61440.0, 0x7B),
    ("fp8_e5m2", True, -INF, 0xFB), ("fp8_e5m2", False, 2.0**-16, 0x01), ("fp8_e5m2", False, 2.0**-17, 0x00),
    ("fp4_e2m1", False, 5.0, 0x6), ("fp4_e2m1", False, 7.0, 0x7), ("fp4_e2m1", False, 1e30, 0x7),
    ("fp4_e2m1", False, -INF, 0xF), ("fp4_e2m1", False, 0.25, 0x0), ("fp4_e2m1", False, -0.25, 0x8),
    ("fp4_e2m1", False, 0.75, 0x2), ("fp4_e2m1", False, 2.5, 0x4), ("fp4_e2m1", False, -0.0, 0x8),
    ("bf16", False, 3.3895313892515355e38, 0x7F7F), ("bf16", False, 1e39, 0x7F80), ("bf16", True, 1e39, 0x7F7F),
    ("bf16", False, -0.0, 0x8000), ("bf16", False, 1.0 + 2.0**-8, 0x3F80), ("bf16", False, 1.0 + 3 * 2.0**-8, 0x3F82),
    ("fp16", False, 65504.0, 0x7BFF), ("fp16", False, 65520.0, 0x7C00), ("fp16", True, 65520.0, 0x7BFF),
    ("fp16", False, 2.0**-24, 0x0001), ("fp16", False, 2.0**-25, 0x0000), ("fp16", False, -INF, 0xFC00),
    ("e8m0", False, 1.0, 127), ("e8m0", False, 1.5, 128), ("e8m0", False, 1.4999, 127), ("e8m0", False, 3.0, 129),
    ("e8m0", False, 0.0, 0xFF), ("e8m0", False, -0.0, 0xFF), ("e8m0", False, -1.0, 0xFF), ("e8m0", False, INF, 0xFF),
    ("e8m0", True, INF, 254), ("e8m0", True, -INF, 0xFF), ("e8m0", False, 2.0**-140, 0), ("e8m0", False, 2.0**127, 254),
    ("e8m0", False, 1.5 * 2.0**127, 0xFF), ("e8m0", True, 1.5 * 2.0**127, 254), ("e8m0", False, 1.9 * 2.0**-127, 1),
    ("int8", False, 127.5, 0x7F), ("int8", False, -128.5, 0x80), ("int8", False, INF, 0x7F), ("int8", False, -INF, 0x80),
    ("int8", False, -0.0, 0x00), ("int8", False, -1.0, 0xFF), ("int8", False, 2.5, 0x02), ("int8", False, -2.5, 0xFE),
    ("int4", False, 7.5, 0x7), ("int4", False, -8.5, 0x8), ("int4", False, -8.0, 0x8), ("int4", False, -1.0, 0xF),
    ("int4", False, 1e9, 0x7), ("int4", False, -0.5, 0x0),
]


@pytest.mark.parametrize("fmt,saturate,x,code", SPECIAL, ids=[f"{f}-{'sat' if s else 'nonsat'}-{x!r}" for f, s, x, _ in SPECIAL])
def test_special_values(impl, fmt, saturate, x, code):
    """Pinned per format: overflow to Inf (bf16/fp16/e5m2) or NaN (e4m3, e8m0), saturation, Inf
    in, -0 and negative underflow keep the sign, the smallest subnormal, e8m0's missing zero and
    sign, integer saturation and two's complement. Mutants: e4m3_overflow_saturates,
    saturate_ignored, negative_zero_dropped, int4_symmetric_range, e8m0_zero_is_smallest."""
    assert encode_one(x, fmt, saturate) == code   # the oracle agrees with the table
    got = impl.get("encode")(torch.tensor([x], dtype=torch.float64), fmt, saturate=saturate)
    assert_codes(got, [code], torch.tensor([x]), fmt, f"saturate={saturate}")


@pytest.mark.parametrize("fmt", sorted(HAS_NAN))
def test_nan_encodes_to_a_nan(impl, fmt):
    """NaN in (either sign, any payload, float32 and float64, saturating or not) gives a code that
    decodes to NaN."""
    x = torch.tensor([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF], dtype=torch.int64).to(torch.int32).view(torch.float32)
    for xs in (x, x.to(torch.float64)):
        for sat in (False, True):
            codes = impl.get("encode")(xs, fmt, saturate=sat)
            values = impl.get("decode")(codes, fmt)
            assert bool(torch.isnan(values).all()), f"{fmt}: NaN encoded to {codes.tolist()}, decoding to {values.tolist()}"


@pytest.mark.choice("NaN encodes to the canonical quiet NaN with the input's sign bit (ml_dtypes' choice)")
@pytest.mark.parametrize("fmt", sorted(HAS_NAN))
def test_nan_code_is_canonical(impl, fmt):
    """bf16 0x7FC0/0xFFC0, fp16 0x7E00/0xFE00, fp8_e4m3 0x7F/0xFF, fp8_e5m2 0x7E/0xFE, e8m0 0xFF."""
    x = torch.tensor([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF], dtype=torch.int64).to(torch.int32).view(torch.float32)
    want = [nan_code(fmt, neg) for neg in (False, True, False, True)]
    for xs in (x, x.to(torch.float64)):
        assert_codes(impl.get("encode")(xs, fmt), want, xs, fmt, "NaN codes")


@pytest.mark.parametrize("fmt", ALL)
def test_shapes_empty_and_zero_d(impl, fmt):
    """encode/decode keep the shape: a 0-d tensor, an empty tensor and a (2, 3, 4) tensor."""
    enc, dec = impl.get("encode"), impl.get("decode")
    for shape in ((), (0,), (2, 0), (2, 3, 4)):
        x = torch.full(shape, 1.0, dtype=torch.float32)
        c = enc(x, fmt)
        assert c.shape == x.shape and c.dtype == CODE_DTYPE[fmt], (shape, c.shape, c.dtype)
        v = dec(c, fmt)
        assert v.shape == x.shape and bool((v == 1.0).all()), (shape, v)


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "bf16", "fp16", "fp4_e2m1"])
def test_encode_is_odd(impl, fmt):
    """encode(-x) is encode(x) with the sign bit set, for every representable and midpoint value
    (the float formats are sign-magnitude)."""
    vals, _ = positive_table(fmt)
    v = np.array(vals[:-1])
    x = np.concatenate([v, (v[:-1] + v[1:]) / 2])
    enc = impl.get("encode")
    pos = enc(torch.from_numpy(x), fmt).to(torch.int64)
    neg = enc(torch.from_numpy(-x), fmt).to(torch.int64)
    assert torch.equal(neg, pos | (1 << (SPECS[fmt].bits - 1)))


def test_max_finite_values(impl):
    """The largest finite value of each float format: bf16 (2 - 2^-7) 2^127, fp16 65504, e4m3 448,
    e5m2 57344, fp4 6, e8m0 2^127."""
    rep = impl.get("representable")
    want = {"bf16": (2 - 2.0**-7) * 2.0**127, "fp16": 65504.0, "fp8_e4m3": 448.0, "fp8_e5m2": 57344.0,
            "fp4_e2m1": 6.0, "e8m0": 2.0**127, "int8": 127.0, "int4": 7.0}
    for fmt, m in want.items():
        assert max_finite(fmt) == m
        assert float(rep(fmt)[-1]) == m, (fmt, float(rep(fmt)[-1]))
