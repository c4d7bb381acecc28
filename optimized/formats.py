"""Number formats, fast: vectorised bit manipulation in torch, bit-equal to ``reference/formats.py``.

The reference rounds with float64 arithmetic (frexp, a step, ``torch.round``); here the rounding
is done on the integer bit pattern of the input, the way hardware converts:

    value = full * 2^(e - p)                       (full: the p+1-bit significand, implicit 1 set)
    step  = 2^(max(e, emin) - m)                   (the target's quantum at that exponent)
    n     = RNE(full >> r), r = step's exponent - (e - p)  (round bit, sticky bits, ties to even)
    code  = ((max(e, emin) - emin) << m) + n       (a carry out of the mantissa bumps the exponent)

so a subnormal target, a carry into the next binade and the overflow midpoint all fall out of one
integer expression; a code above the largest finite code is an overflow. Where torch has a cast
that is the same function (float32/float16/bfloat16 into fp8_e4m3, fp8_e5m2, bf16, fp16: torch
rounds float32 once, to nearest even), the cast does the rounding and only the format's own rules
are applied around it (saturation by clamping first, e4m3's NaN on overflow, the canonical NaN);
float64 inputs always take the bit path (torch casts float64 through float32: two roundings).
Decoding is a gather from a 16- or 256-entry table built from the bit fields, or a reinterpreting
view for bf16/fp16/fp8.
"""
from __future__ import annotations

import torch

from reference._checks import FLOAT_DTYPES, check_tensor
from reference.formats import (
    FORMATS,
    NVFP4_RANGE,
    Format,
    check_block_codes,
    check_block_input,
    check_bool,
    check_codes,
    check_format,
    check_out_dtype,
)

__all__ = ["encode", "decode", "representable", "quantize_blocks", "dequantize_blocks"]

_TORCH_DTYPE = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2,
                "bf16": torch.bfloat16, "fp16": torch.float16}
# float64 source: 52 fraction bits, bias 1023
_P, _SRC_BIAS = 52, 1023


def _max_code(f: Format) -> int:
    """The largest finite code magnitude (sign bit clear)."""
    top = (1 << f.exp_bits) - 1
    if f.has_inf:
        return ((top - 1) << f.man_bits) | ((1 << f.man_bits) - 1)
    if f.has_nan:                                   # fp8_e4m3: S.1111.110
        return (top << f.man_bits) | ((1 << f.man_bits) - 2)
    return (top << f.man_bits) | ((1 << f.man_bits) - 1)


def _half_step_at_max(f: Format) -> float:
    """Half the spacing of the top binade: max + this is the overflow midpoint (e4m3: 448 + 16)."""
    top = (1 << f.exp_bits) - 1 - (1 if f.has_inf else 0)
    return 2.0 ** (top - f.bias - f.man_bits - 1)


def _nan_code(f: Format) -> int:
    top = ((1 << f.exp_bits) - 1) << f.man_bits
    return top | (((1 << f.man_bits) - 1) if not f.has_inf else 1 << (f.man_bits - 1))


def _encode_bits(x: torch.Tensor, f: Format, saturate: bool) -> torch.Tensor:
    """Float formats from float64 bits (any input dtype is first made float64: exact)."""
    t = x.to(torch.float64).view(torch.int64)
    negative = t < 0
    mag = t & 0x7FFF_FFFF_FFFF_FFFF
    field = mag >> _P
    frac = mag & ((1 << _P) - 1)
    e = field.clamp(min=1) - _SRC_BIAS                       # exponent of the leading bit
    full = frac | ((field > 0).to(torch.int64) << _P)
    emin = 1 - f.bias
    ee = e.clamp(min=emin)
    r = (ee - f.man_bits - e + _P).clamp(max=_P + 2)         # >= p - m > 0
    n = full >> r
    rem = full & ((1 << r) - 1)
    half = 1 << (r - 1)
    n = n + ((rem > half) | ((rem == half) & ((n & 1) == 1))).to(torch.int64)
    code = ((ee - emin) << f.man_bits) + n
    special = field == 0x7FF                                 # Inf or NaN
    over = (code > _max_code(f)) | special
    if saturate or not f.has_nan:
        code = torch.where(over, _max_code(f), code)
    else:
        overflow = ((1 << f.exp_bits) - 1) << f.man_bits if f.has_inf else _nan_code(f)
        code = torch.where(over, overflow, code)
    code = torch.where(special & (frac != 0), _nan_code(f), code)
    return code | (negative.to(torch.int64) << (f.bits - 1))


def _raw_sign(x: torch.Tensor) -> torch.Tensor:
    """The sign bit of x as stored (a NaN's too: widening a float16 NaN may drop it)."""
    return x.view({8: torch.int64, 4: torch.int32, 2: torch.int16}[x.element_size()]) < 0


def _encode_cast(x: torch.Tensor, f: Format, saturate: bool) -> torch.Tensor:
    """float32/float16/bfloat16 into fp8/bf16/fp16 through torch's cast (one rounding of a float32)."""
    y = x if x.dtype == torch.float32 else x.to(torch.float32)
    limit = f.max_finite
    if saturate:
        y = y.clamp(-limit, limit)                          # clamp to a representable value, then round
    if f.bits == 8:
        code = y.to(_TORCH_DTYPE[f.name]).view(torch.uint8)
        if not saturate and not f.has_inf:                  # e4m3: a rounding past 448 is NaN
            near = (code & 0x7F) == _max_code(f)            # torch may have saturated these
            if bool(near.any()):
                over = near & (y.abs() > limit + _half_step_at_max(f))
                code = torch.where(over, code | 0x7F, code)
        if x.dtype == torch.float32:                        # torch's NaN keeps a float32's sign
            nan = (code & 0x7F) > (((1 << f.exp_bits) - 1) << f.man_bits if f.has_inf else _max_code(f))
            return torch.where(nan, (code & 0x80) | _nan_code(f), code)
    else:
        code = y.to(_TORCH_DTYPE[f.name]).view(torch.int16).to(torch.int32) & 0xFFFF
    nan = torch.isnan(x)
    if bool(nan.any()):
        code = torch.where(nan, _nan_code(f) | (_raw_sign(x).to(code.dtype) << (f.bits - 1)), code)
    return code


_FP4_EDGES: dict[torch.dtype, torch.Tensor] = {}


def _encode_fp4(x: torch.Tensor) -> torch.Tensor:
    """E2M1 by comparison with its 7 midpoints (0.25, 0.75, ..., 5): a tie goes to the even code,
    so the midpoints whose upper neighbour is even (0.75, 1.75, 3.5) are moved one float down;
    |x| past 5 is bucket 7 (6: E2M1 saturates), Inf included."""
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if dtype not in _FP4_EDGES:
        mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=dtype)
        up = torch.tensor([False, True, False, True, False, True, False])
        _FP4_EDGES[dtype] = torch.where(up, torch.nextafter(mids, torch.zeros_like(mids)), mids)
    y = x.to(dtype)
    code = torch.bucketize(y.abs(), _FP4_EDGES[dtype]).to(torch.uint8)
    return code | (_raw_sign(y).to(torch.uint8) << 3)


def _encode_e8m0(x: torch.Tensor, f: Format, saturate: bool) -> torch.Tensor:
    x = x.to(torch.float64)
    m, e = torch.frexp(x)                                   # x = m * 2^e, m in [0.5, 1)
    k = e.to(torch.int64) - 1 + (m >= 0.75).to(torch.int64)  # the nearest power, a tie goes up
    code = k.clamp(min=-127) + f.bias
    ok = (x > 0) & torch.isfinite(x)
    big = x == float("inf")
    if saturate:
        code = torch.where(big | (code > 254), 254, code)
        return torch.where(ok | big, code, 0xFF).to(torch.uint8)
    return torch.where(ok & (code <= 254), code, 0xFF).to(torch.uint8)


def _encode_int(x: torch.Tensor, f: Format) -> torch.Tensor:
    lo, hi = f.int_range
    y = x if x.dtype in (torch.float32, torch.float64) else x.to(torch.float32)
    n = torch.round(y).clamp(lo, hi)                        # round half to even, saturate
    if f.bits == 8:
        return n.to(torch.int8).view(torch.uint8)
    return (n.to(torch.int16) & 0xF).to(torch.uint8)


def encode(x: torch.Tensor, fmt: str, *, saturate: bool = False) -> torch.Tensor:
    """See ``reference.formats.encode`` (the contract); bit-equal to it."""
    check_tensor("x", x, dtypes=FLOAT_DTYPES)
    f = check_format(fmt)
    check_bool("saturate", saturate)
    if not f.has_nan and bool(torch.isnan(x).any()):
        raise ValueError(f"x holds NaN, which {f.name} cannot encode (it has no NaN code)")
    if f.is_int:
        return _encode_int(x, f)
    if f.name == "e8m0":
        return _encode_e8m0(x, f, saturate)
    if f.name in _TORCH_DTYPE and x.dtype != torch.float64:
        return _encode_cast(x, f, saturate)
    if f.name == "fp4_e2m1":
        return _encode_fp4(x)
    return _encode_bits(x, f, saturate).to(f.code_dtype)


_TABLES: dict[tuple[str, torch.dtype], torch.Tensor] = {}


def _table(f: Format, dtype: torch.dtype) -> torch.Tensor:
    """Every code's value, built from the bit fields as float64 bit patterns."""
    key = (f.name, dtype)
    if key not in _TABLES:
        c = torch.arange(1 << f.bits, dtype=torch.int64)
        if f.is_int:
            value = (c - ((c >> (f.bits - 1)) << f.bits)).to(torch.float64)
        elif f.name == "e8m0":
            value = ((c - f.bias + _SRC_BIAS) << _P).view(torch.float64)
            value = torch.where(c == 0xFF, float("nan"), value)
        else:
            sign = (c >> (f.bits - 1)) << 63
            field = (c >> f.man_bits) & ((1 << f.exp_bits) - 1)
            man = c & ((1 << f.man_bits) - 1)
            normal = (((field - f.bias + _SRC_BIAS) << _P) | (man << (_P - f.man_bits))).view(torch.float64)
            sub = man.to(torch.float64) * 2.0 ** (1 - f.bias - f.man_bits)
            value = torch.where(field == 0, sub, normal).abs()
            value = torch.where(sign != 0, -value, value)
            nan = (c & ((1 << (f.bits - 1)) - 1)) > _max_code(f)
            if f.has_inf:
                inf = (c & ((1 << (f.bits - 1)) - 1)) == ((1 << f.exp_bits) - 1) << f.man_bits
                value = torch.where(inf, value.sign() * float("inf"), value)
                nan = nan & ~inf
            value = torch.where(nan, float("nan"), value)
        _TABLES[key] = value.to(dtype)
    return _TABLES[key]


def decode(codes: torch.Tensor, fmt: str, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """See ``reference.formats.decode`` (the contract); bit-equal to it (NaN: any NaN)."""
    f = check_format(fmt)
    if not (isinstance(codes, torch.Tensor) and codes.dtype == torch.uint8 and f.bits == 8):
        check_codes(codes, f)                               # a uint8 tensor is in range for 8 bits
    check_out_dtype(dtype)
    if f.bits == 16:
        c = codes.to(torch.int32)
        if f.name == "bf16":
            return (c << 16).view(torch.float32).to(dtype)
        return c.to(torch.int16).view(torch.float16).to(dtype)
    c = codes if codes.dtype == torch.uint8 else codes.to(torch.uint8)
    if f.name in _TORCH_DTYPE:
        return c.view(_TORCH_DTYPE[f.name]).to(dtype)
    if f.name == "int8":
        return c.view(torch.int8).to(dtype)
    return _table(f, dtype)[c.to(torch.int64)]


def representable(fmt: str) -> torch.Tensor:
    """See ``reference.formats.representable``."""
    f = check_format(fmt)
    values = _table(f, torch.float64)
    return torch.unique(values[torch.isfinite(values)] + 0.0)


def _pow2(e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """2^e for integer-valued e (int64), built from the exponent field: exact."""
    if dtype == torch.float32:
        return ((e + 127) << 23).to(torch.int32).view(torch.float32)
    return ((e + _SRC_BIAS) << _P).view(torch.float64)


def _quantize_mx(x: torch.Tensor, bf):
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    blocks = x.to(work).reshape(*x.shape[:-1], x.shape[-1] // bf.block, bf.block)
    amax = blocks.abs().amax(dim=-1)                        # NaN and Inf propagate
    special = ~torch.isfinite(amax)
    e = torch.frexp(torch.where(special, 1.0, amax).to(work)).exponent.to(torch.int64) - 1 - bf.emax_elem
    e = torch.where(amax > 0, e, -127).clamp(min=-127)
    nan = special | (e > 127)
    e = torch.where(nan, 0, e)
    scaled = blocks * _pow2(-e, work).unsqueeze(-1)          # exact: a power of two, no underflow that matters
    scaled = torch.where(nan.unsqueeze(-1), 0.0, scaled)
    codes = encode(scaled, bf.element, saturate=True)
    scales = torch.where(nan, 0xFF, e + 127).to(torch.uint8)
    return codes.reshape(x.shape), scales, torch.tensor(1.0, dtype=torch.float32)


def _quantize_nvfp4(x: torch.Tensor, bf, tensor_scale):
    blocks = x.to(torch.float64).reshape(*x.shape[:-1], x.shape[-1] // bf.block, bf.block)
    given = tensor_scale is not None
    if not given:
        tensor_scale = (float(blocks.abs().max()) if blocks.numel() else 0.0) / NVFP4_RANGE
    s = float(torch.tensor(tensor_scale, dtype=torch.float64).to(torch.float32))
    if given and not 0 < s < float("inf"):
        raise ValueError(f"tensor_scale must be a positive float32 value, got {tensor_scale!r} (rounds to {s})")
    if s == float("inf"):
        raise ValueError(f"x's amax {tensor_scale * NVFP4_RANGE:g} is beyond a float32 tensor scale's range (amax / 2688 > 3.4e38)")
    s = s if s > 0 else 1.0
    amax = blocks.abs().amax(dim=-1)
    scales = _encode_bits(amax / (6.0 * s), FORMATS[bf.scale], True).to(torch.uint8)
    scale = _table(FORMATS[bf.scale], torch.float64)[scales.to(torch.int64)] * s
    zero = (scale == 0).unsqueeze(-1)
    scaled = torch.where(zero, 0.0, blocks / torch.where(zero, 1.0, scale.unsqueeze(-1)))
    codes = _encode_bits(scaled, FORMATS[bf.element], True).to(torch.uint8)
    return codes.reshape(x.shape), scales, torch.tensor(s, dtype=torch.float32)


def quantize_blocks(x: torch.Tensor, fmt: str, *, tensor_scale: float | None = None):
    """See ``reference.formats.quantize_blocks`` (the contract); bit-equal to it."""
    bf = check_block_input(x, fmt, tensor_scale)
    if bf.tensor_scale:
        return _quantize_nvfp4(x, bf, tensor_scale)
    return _quantize_mx(x, bf)


def dequantize_blocks(codes: torch.Tensor, scales: torch.Tensor, tensor_scale, fmt: str, *,
                      dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """See ``reference.formats.dequantize_blocks`` (the contract); bit-equal to it."""
    bf, s, expect = check_block_codes(codes, scales, tensor_scale, fmt, dtype)
    elements = decode(codes, bf.element).reshape(*expect, bf.block)
    scale = decode(scales, bf.scale).unsqueeze(-1)
    return (elements * scale * s).reshape(codes.shape).to(dtype)
