"""Agreement with the third-party casts (torch's float8/bfloat16/float16, ml_dtypes) on every value
both define. Where they define something else, it is stated here and in docs/formats.md:

- torch's CPU cast to ``float8_e4m3fn`` SATURATES (500 -> 448, Inf -> 448): it is this contract's
  ``saturate=True``; ml_dtypes' ``float8_e4m3fn`` is ``saturate=False`` (overflow -> NaN).
- torch casts float64 through float32 (two roundings: 1 + 2^-8 + 2^-52 -> bf16 1.0); it is
  compared on float32/float16/bfloat16 inputs only. ml_dtypes rounds float64 once, as here.
- NaN codes: torch's float8_e5m2 NaN is 0x7F (here 0x7E), its bfloat16 NaN drops the sign, numpy's
  float16 keeps the payload: compared as "is a NaN".
- ml_dtypes' float4_e2m1fn maps NaN to -0 (the contract raises: E2M1 has no NaN); its int4 and
  numpy's int8 casts truncate toward zero and wrap on overflow (C casts), so the integer formats
  are compared on their codes and on integer-valued inputs in range.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from spec_tests.formats.oracles import SPECS, decode_one, positive_table

ml_dtypes = pytest.importorskip("ml_dtypes")


def _probe(fmt: str, seed: int = 0, n: int = 20_000) -> np.ndarray:
    """float32 values that exercise fmt: every representable value, every midpoint and its two
    float32 neighbours (both signs), random bit patterns and random values in the format's range."""
    vals, _ = positive_table(fmt)
    v = np.array(vals, dtype=np.float64)
    mids = (v[:-1] + v[1:]) / 2
    base = np.concatenate([v, mids]).astype(np.float32)
    near = np.concatenate([base, np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(0))])
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    top = float(vals[-1])
    scaled = (rng.standard_normal(n) * np.exp2(rng.uniform(np.log2(max(vals[1], 1e-38)) - 2, np.log2(top) + 1, n))).astype(np.float32)
    x = np.concatenate([near, -near, bits, scaled, np.array([0, -0.0, np.inf, -np.inf], np.float32)])
    return x.astype(np.float32)


def _codes(impl, x: np.ndarray, fmt: str, saturate=False) -> np.ndarray:
    return impl.get("encode")(torch.from_numpy(x), fmt, saturate=saturate).to(torch.int64).numpy()


def _check(got, want, x, what, nan_free=None, fmt=None):
    keep = np.ones(len(x), bool) if nan_free is None else nan_free
    bad = keep & (got != want)
    if bad.any():
        i = np.flatnonzero(bad)[:5]
        value = (lambda c: f" ({decode_one(int(c), fmt)!r})") if fmt else (lambda c: "")  # noqa: E731
        rows = [f"x={float(x[j])!r}: encode gave {got[j]:#x}{value(got[j])}, the library {want[j]:#x}{value(want[j])}"
                for j in i]
        raise AssertionError(f"{what}: {bad.sum()} disagreements, e.g.\n  " + "\n  ".join(rows))


# --- torch ------------------------------------------------------------------------------------
def _torch_e4m3_saturates() -> bool:
    """torch's float32 -> float8_e4m3fn cast of an overflow: NaN (0x7F) in torch 2.11, 448 (0x7E,
    saturating) in torch 2.13 (both measured): the agreement is with whichever this torch does."""
    return int(torch.tensor([480.0]).to(torch.float8_e4m3fn).view(torch.uint8)) == 0x7E


TORCH_CASTS = [("fp8_e4m3", torch.float8_e4m3fn, _torch_e4m3_saturates()), ("fp8_e5m2", torch.float8_e5m2, False),
               ("bf16", torch.bfloat16, False), ("fp16", torch.float16, False)]


@pytest.mark.parametrize("fmt,dtype,saturate", TORCH_CASTS, ids=[c[0] for c in TORCH_CASTS])
def test_matches_torch_cast(impl, fmt, dtype, saturate):
    """encode equals torch's cast (float32, float16 and bfloat16 inputs; float8_e4m3fn as
    saturate=True where this torch saturates an overflow (2.13) and saturate=False where it gives
    NaN (2.11), the others as saturate=False) on every non-NaN input, and a NaN gives a NaN
    code on both sides; decode equals torch's widening of every code. Mutant: e4m3_nan_is_inf_pattern."""
    x32 = _probe(fmt)
    for x in (x32, torch.from_numpy(x32).to(torch.float16), torch.from_numpy(x32).to(torch.bfloat16)):
        xt = torch.from_numpy(x) if isinstance(x, np.ndarray) else x
        theirs = xt.to(dtype).view(torch.uint8 if SPECS[fmt].bits == 8 else torch.int16).to(torch.int64)
        theirs = theirs & ((1 << SPECS[fmt].bits) - 1)
        ours = impl.get("encode")(xt, fmt, saturate=saturate).to(torch.int64)
        nan = torch.isnan(xt)
        _check(ours.numpy(), theirs.numpy(), xt.to(torch.float64).numpy(), f"{fmt} vs torch {dtype} from {xt.dtype}",
               (~nan).numpy(), fmt)
        assert bool(torch.isnan(impl.get("decode")(ours[nan], fmt)).all())
    codes = torch.arange(1 << SPECS[fmt].bits)
    view = codes.to(torch.uint8) if SPECS[fmt].bits == 8 else codes.to(torch.int16)
    theirs = view.view(dtype).to(torch.float64)
    ours = impl.get("decode")(codes, fmt)
    same = ((ours == theirs) & (torch.signbit(ours) == torch.signbit(theirs))) | (torch.isnan(ours) & torch.isnan(theirs))
    assert bool(same.all()), f"{fmt}: decode differs from torch at codes {codes[~same][:8].tolist()}"


# --- ml_dtypes --------------------------------------------------------------------------------
ML = [("fp8_e4m3", "float8_e4m3fn"), ("fp8_e5m2", "float8_e5m2"), ("fp4_e2m1", "float4_e2m1fn"),
      ("e8m0", "float8_e8m0fnu"), ("bf16", "bfloat16"), ("fp16", None)]


def _ml_type(name):
    return np.float16 if name is None else getattr(ml_dtypes, name)


@pytest.mark.parametrize("fmt,name", ML, ids=[m[0] for m in ML])
def test_matches_ml_dtypes(impl, fmt, name):
    """encode (saturate=False) equals ml_dtypes' astype (numpy's float16 for fp16) on float32 and
    float64 inputs, NaN compared as NaN; decode equals ml_dtypes' widening of every code.
    Mutants: round_half_away, e8m0_ties_to_even_code."""
    t = _ml_type(name)
    bits = SPECS[fmt].bits
    view = np.uint16 if bits == 16 else np.uint8
    x32 = _probe(fmt, seed=1)
    rng = np.random.default_rng(2)
    x64 = np.concatenate([x32.astype(np.float64),
                          x32.astype(np.float64) * (1 + rng.uniform(-2**-20, 2**-20, len(x32)))])
    for x in (x32, x64):
        nan = np.isnan(x)
        if fmt == "fp4_e2m1":                                   # E2M1 has no NaN (ml_dtypes gives -0)
            x = x[~nan]
            nan = nan[~nan]
        with np.errstate(all="ignore"):
            theirs = x.astype(t).view(view).astype(np.int64)
        ours = _codes(impl, x, fmt)
        _check(ours, theirs, x, f"{fmt} (saturate=False) vs ml_dtypes {name} from {x.dtype}", ~nan, fmt)
        if nan.any():
            assert bool(torch.isnan(impl.get("decode")(torch.from_numpy(ours[nan]), fmt)).all())
    codes = np.arange(1 << bits).astype(view)
    theirs = torch.from_numpy(codes.view(t).astype(np.float64))
    ours = impl.get("decode")(torch.from_numpy(codes.astype(np.int64)), fmt)
    same = ((ours == theirs) & (torch.signbit(ours) == torch.signbit(theirs))) | (torch.isnan(ours) & torch.isnan(theirs))
    assert bool(same.all()), f"{fmt}: decode differs from ml_dtypes at codes {np.flatnonzero(~same.numpy())[:8]}"


@pytest.mark.parametrize("fmt,t", [("int4", "int4"), ("int8", None)])
def test_integer_codes_match_ml_dtypes(impl, fmt, t):
    """int4 (ml_dtypes) and int8 (numpy): every code decodes to the same integer, and every
    integer in range encodes to the same two's-complement bits. Mutant: int4_offset_binary."""
    typ = np.int8 if t is None else getattr(ml_dtypes, t)
    lo, hi = -(1 << (SPECS[fmt].bits - 1)), (1 << (SPECS[fmt].bits - 1)) - 1
    n = np.arange(lo, hi + 1)
    theirs = n.astype(typ).view(np.uint8).astype(np.int64)
    _check(_codes(impl, n.astype(np.float32), fmt), theirs, n, f"{fmt} codes vs {typ.__name__}", None, fmt)
    codes = np.arange(1 << SPECS[fmt].bits).astype(np.uint8)
    if t is None:
        want = codes.view(np.int8).astype(np.float64)
    else:
        want = np.array([int(c) for c in codes.view(typ)], dtype=np.float64)
    got = impl.get("decode")(torch.from_numpy(codes.astype(np.int64)), fmt).numpy()
    assert np.array_equal(got, want), (got, want)
