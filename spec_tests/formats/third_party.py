"""A third-party "must pass" submission for `formats`: ml_dtypes' casts (and numpy's float16).

Every rounding here is ml_dtypes' ``astype`` (``bfloat16``, ``float8_e4m3fn``, ``float8_e5m2``,
``float4_e2m1fn``, ``float8_e8m0fnu``, ``int4``) or numpy's (``float16``, ``rint`` for the
integers), and every decoding is ml_dtypes' widening of the stored bits. What is NOT from
ml_dtypes, and why:

- argument validation and its messages: the contract's own checks (``reference.formats``'
  ``check_*`` helpers, as the sampling adapter uses the contract's), so the bad-input tables hold.
- ``saturate=True``: ml_dtypes has no saturating cast; values are clipped to +-max first (np.clip
  keeps NaN), which is exactly the contract's saturation. ml_dtypes' ``float8_e4m3fn`` is
  otherwise the contract's non-saturating E4M3 (overflow -> NaN).
- integers: ml_dtypes' ``int4`` and numpy's ``int8`` casts truncate and wrap (C casts), so values
  are rounded half-to-even with ``np.rint`` and clipped first; the cast then only stores the bits.
- NaN into E2M1 / int: ml_dtypes maps NaN to -0 (E2M1) or garbage (ints); the contract raises,
  so this adapter checks first. numpy's float16 keeps a NaN's payload: it is made the canonical
  quiet NaN (sign kept), as ml_dtypes does for its own types.
- block scaling: OCP MX and NVFP4 are not in ml_dtypes; the per-block amax, frexp exponent and
  float32 tensor scale are numpy, written from the spec text; the scale and element codes are
  ml_dtypes casts (``float8_e8m0fnu``, ``float8_e4m3fn``, the element types).

Run: ``pytest spec_tests/formats --impl spec_tests/formats/third_party.py`` (test_third_party.py
requires it to pass). Needs ``ml_dtypes`` (the ``test`` extra).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

from reference._checks import FLOAT_DTYPES, check_tensor
from reference.formats import (FORMATS, check_block_codes, check_block_input, check_bool,
                               check_codes, check_format, check_out_dtype)

__all__ = ["encode", "decode", "representable", "quantize_blocks", "dequantize_blocks"]

TYPES = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp8_e4m3": ml_dtypes.float8_e4m3fn,
         "fp8_e5m2": ml_dtypes.float8_e5m2, "fp4_e2m1": ml_dtypes.float4_e2m1fn,
         "e8m0": ml_dtypes.float8_e8m0fnu, "int8": np.int8, "int4": ml_dtypes.int4}


def _max(fmt: str) -> float:
    return float(ml_dtypes.finfo(TYPES[fmt]).max) if fmt not in ("int8", "int4") else float(ml_dtypes.iinfo(TYPES[fmt]).max)


def _encode_np(x: np.ndarray, fmt: str, saturate: bool) -> np.ndarray:
    """float64 values -> codes (uint8 or uint16) through ml_dtypes."""
    f = FORMATS[fmt]
    with np.errstate(all="ignore"):
        if f.is_int:
            info = ml_dtypes.iinfo(TYPES[fmt])
            return np.clip(np.rint(x), info.min, info.max).astype(TYPES[fmt]).view(np.uint8)
        if saturate:
            m = _max(fmt)
            x = np.clip(x, None if fmt == "e8m0" else -m, m)
        codes = x.astype(TYPES[fmt]).view(np.uint16 if f.bits == 16 else np.uint8)
    if fmt == "fp16":
        nan = np.isnan(x)
        codes = np.where(nan, np.uint16(0x7E00) | (np.signbit(x).astype(np.uint16) << 15), codes)
    return codes


def encode(x, fmt, *, saturate=False):
    check_tensor("x", x, dtypes=FLOAT_DTYPES)
    f = check_format(fmt)
    check_bool("saturate", saturate)
    if not f.has_nan and bool(torch.isnan(x).any()):
        raise ValueError(f"x holds NaN, which {fmt} cannot encode")
    codes = _encode_np(x.detach().to(torch.float64).cpu().numpy(), fmt, saturate)
    out = torch.from_numpy(np.ascontiguousarray(codes).astype(np.int32 if f.bits == 16 else np.uint8))
    return out.reshape(x.shape)


def _decode_np(codes: np.ndarray, fmt: str) -> np.ndarray:
    f = FORMATS[fmt]
    stored = codes.astype(np.uint16 if f.bits == 16 else np.uint8)
    return stored.view(TYPES[fmt]).astype(np.float64)


def decode(codes, fmt, *, dtype=torch.float64):
    f = check_format(fmt)
    check_codes(codes, f)
    check_out_dtype(dtype)
    values = _decode_np(codes.detach().cpu().to(torch.int64).numpy(), fmt)
    return torch.from_numpy(np.ascontiguousarray(values)).reshape(codes.shape).to(dtype)


def representable(fmt):
    f = check_format(fmt)
    v = _decode_np(np.arange(1 << f.bits), fmt)
    return torch.from_numpy(np.unique(v[np.isfinite(v)] + 0.0))


def _quantize_mx(b: np.ndarray, bf):
    special = ~np.isfinite(b).all(axis=-1)
    with np.errstate(all="ignore"):
        amax = np.where(special, 1.0, np.abs(b).max(axis=-1, initial=0.0))
    e = np.where(amax > 0, np.frexp(amax)[1] - 1 - bf.emax_elem, -127).clip(min=-127)
    nan = special | (e > 127)
    e = np.where(nan, 0, e)
    scales = np.ldexp(1.0, e).astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
    scales = np.where(nan, np.uint8(0xFF), scales)
    scaled = np.where(nan[..., None], 0.0, np.ldexp(np.where(nan[..., None], 0.0, b), -e[..., None]))
    return _encode_np(scaled, bf.element, True), scales, 1.0


def _quantize_nvfp4(b: np.ndarray, bf, tensor_scale):
    if tensor_scale is None:
        tensor_scale = (float(np.abs(b).max()) if b.size else 0.0) / (6.0 * 448.0)
        given = False
    else:
        given = True
    with np.errstate(over="ignore"):
        s = float(np.float32(tensor_scale))
    if given and not 0 < s < np.inf:
        raise ValueError(f"tensor_scale {tensor_scale!r} is not a positive float32 value")
    if s == np.inf:
        raise ValueError("x's amax is beyond a float32 tensor scale's range")
    s = s if s > 0 else 1.0
    amax = np.abs(b).max(axis=-1, initial=0.0)
    scales = _encode_np(amax / (6.0 * s), bf.scale, True)
    d = scales.view(ml_dtypes.float8_e4m3fn).astype(np.float64) * s
    with np.errstate(all="ignore"):
        scaled = np.where(d[..., None] == 0, 0.0, b / np.where(d == 0, 1.0, d)[..., None])
    return _encode_np(scaled, bf.element, True), scales, s


def quantize_blocks(x, fmt, *, tensor_scale=None):
    bf = check_block_input(x, fmt, tensor_scale)   # the contract's argument checks
    b = x.detach().to(torch.float64).cpu().numpy().reshape(*x.shape[:-1], x.shape[-1] // bf.block, bf.block)
    if bf.tensor_scale:
        codes, scales, s = _quantize_nvfp4(b, bf, tensor_scale)
    else:
        codes, scales, s = _quantize_mx(b, bf)
    return (torch.from_numpy(np.ascontiguousarray(codes, dtype=np.uint8)).reshape(x.shape),
            torch.from_numpy(np.ascontiguousarray(scales, dtype=np.uint8)),
            torch.tensor(s, dtype=torch.float32))


def dequantize_blocks(codes, scales, tensor_scale, fmt, *, dtype=torch.float64):
    bf, s, expect = check_block_codes(codes, scales, tensor_scale, fmt, dtype)   # the contract's argument checks
    el = _decode_np(codes.cpu().to(torch.int64).numpy(), bf.element).reshape(*expect, bf.block)
    sc = _decode_np(scales.cpu().to(torch.int64).numpy(), bf.scale)[..., None]
    return torch.from_numpy(np.ascontiguousarray((el * sc * s).reshape(tuple(codes.shape)))).to(dtype)
