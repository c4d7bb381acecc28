"""Oracles of the formats spec, written from the formats' own texts (IEEE 754 for bf16/fp16, the
OCP 8-bit FP spec for E4M3/E5M2, OCP Microscaling v1.0 for E2M1/E8M0 and MX block scaling,
NVIDIA's NVFP4 description), scalar Python with exact ``fractions.Fraction`` comparisons. Nothing
here imports ``reference/``.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class Spec:
    bits: int
    e: int = 0                # exponent bits (0: integer)
    m: int = 0                # mantissa bits
    bias: int = 0
    special: str = ""         # "ieee": all-ones exponent is Inf/NaN; "fn": only S.1..1 is NaN;
                              # "none": no Inf/NaN; "e8m0": 0xFF is NaN, no sign


SPECS = {
    "bf16": Spec(16, 8, 7, 127, "ieee"),
    "fp16": Spec(16, 5, 10, 15, "ieee"),
    "fp8_e4m3": Spec(8, 4, 3, 7, "fn"),
    "fp8_e5m2": Spec(8, 5, 2, 15, "ieee"),
    "fp4_e2m1": Spec(4, 2, 1, 1, "none"),
    "e8m0": Spec(8, 8, 0, 127, "e8m0"),
    "int8": Spec(8),
    "int4": Spec(4),
}
FLOAT_FORMATS = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1")
SMALL_FORMATS = tuple(f for f, s in SPECS.items() if s.bits <= 8)
HAS_NAN = {"bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "e8m0"}


def decode_one(code: int, fmt: str) -> float:
    """The value of one bit pattern, read field by field."""
    s = SPECS[fmt]
    if s.e == 0:                                                   # two's complement
        return float(code - (1 << s.bits) if code >> (s.bits - 1) else code)
    if s.special == "e8m0":
        return math.nan if code == 0xFF else math.ldexp(1.0, code - 127)
    sign = -1.0 if code >> (s.bits - 1) else 1.0
    E = (code >> s.m) & ((1 << s.e) - 1)
    M = code & ((1 << s.m) - 1)
    if s.special == "ieee" and E == (1 << s.e) - 1:
        return sign * math.inf if M == 0 else math.nan
    if s.special == "fn" and E == (1 << s.e) - 1 and M == (1 << s.m) - 1:
        return math.nan
    if E == 0:
        return sign * math.ldexp(M, 1 - s.bias - s.m)
    return sign * math.ldexp((1 << s.m) + M, E - s.bias - s.m)


@lru_cache(maxsize=None)
def positive_table(fmt: str) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """The non-negative finite values in increasing order with their codes (sign bit clear),
    and one more: the value the next code would have if the exponent range were unbounded
    (the overflow neighbour of the maximum)."""
    s = SPECS[fmt]
    if s.e == 0:
        hi = (1 << (s.bits - 1)) - 1
        return tuple(float(v) for v in range(hi + 2)), tuple(range(hi + 2))
    top = 1 << (s.bits - (0 if s.special == "e8m0" else 1))
    pairs = [(decode_one(c, fmt), c) for c in range(top)]
    pairs = [(v, c) for v, c in pairs if math.isfinite(v)]
    vmax, cmax = pairs[-1]
    if s.special == "e8m0":
        nxt = 2 * vmax
    else:
        nxt = vmax + math.ldexp(1.0, math.frexp(vmax)[1] - 1 - s.m)   # one more step of the top binade
    pairs.append((nxt, cmax + 1))
    return tuple(v for v, _ in pairs), tuple(c for _, c in pairs)


def max_finite(fmt: str) -> float:
    return positive_table(fmt)[0][-2]


def overflow_code(fmt: str, saturate: bool) -> int:
    """The magnitude code an overflow becomes: Inf, NaN, or the largest finite code."""
    s = SPECS[fmt]
    vals, codes = positive_table(fmt)
    if saturate or s.special == "none" or s.e == 0:
        return codes[-2]
    if s.special == "ieee":
        return ((1 << s.e) - 1) << s.m
    return 0xFF if s.special == "e8m0" else 0x7F                   # fn: S.1111.111


def nan_code(fmt: str, negative: bool) -> int:
    """The canonical quiet NaN with the input's sign (the contract's choice)."""
    s = SPECS[fmt]
    if s.special == "e8m0":
        return 0xFF
    top = ((1 << s.e) - 1) << s.m
    quiet = (1 << (s.m - 1)) if s.special == "ieee" else (1 << s.m) - 1
    return top | quiet | (int(negative) << (s.bits - 1))


def encode_one(x: float, fmt: str, saturate: bool = False) -> int:
    """The code of ``x``: nearest representable value, ties to the even code (e8m0: up), rounding
    with an unbounded exponent first, then the format's overflow rule."""
    s = SPECS[fmt]
    if math.isnan(x):
        if fmt not in HAS_NAN:
            raise ValueError("no NaN code")
        return nan_code(fmt, math.copysign(1.0, x) < 0)
    negative = math.copysign(1.0, x) < 0
    if s.e == 0:
        lo, hi = -(1 << (s.bits - 1)), (1 << (s.bits - 1)) - 1
        n = lo if x == -math.inf else hi if x == math.inf else round(Fraction(x))   # round(): half to even
        return min(max(n, lo), hi) % (1 << s.bits)
    if s.special == "e8m0":
        if negative or x == 0:
            return 0xFF
        if x == math.inf:
            return 254 if saturate else 0xFF
    sign = (int(negative) << (s.bits - 1)) if s.special != "e8m0" else 0
    a = abs(x)
    vals, codes = positive_table(fmt)
    if a == math.inf:
        return overflow_code(fmt, saturate) | sign if (saturate or s.special != "ieee") else codes[-1] | sign
    i = bisect_left(vals, a)
    if i < len(vals) and vals[i] == a:
        code = codes[i]
    elif i == 0:                                                 # e8m0 below 2^-127
        code = codes[0]
    elif i == len(vals):                                         # beyond the overflow neighbour
        code = codes[-1]
    else:
        lo, hi = Fraction(vals[i - 1]), Fraction(vals[i])
        mid, fa = (lo + hi) / 2, Fraction(a)
        if fa < mid:
            code = codes[i - 1]
        elif fa > mid:
            code = codes[i]
        elif s.special == "e8m0":
            code = codes[i]
        else:
            code = codes[i - 1] if codes[i - 1] % 2 == 0 else codes[i]
    if code > codes[-2]:
        code = overflow_code(fmt, saturate)
    return code | sign


# --- block scaling, from the spec texts --------------------------------------------------------
MX = {"mxfp8_e4m3": ("fp8_e4m3", 8), "mxfp8_e5m2": ("fp8_e5m2", 15), "mxfp4": ("fp4_e2m1", 2)}
BLOCK = {"mxfp8_e4m3": 32, "mxfp8_e5m2": 32, "mxfp4": 32, "nvfp4": 16}


def mx_block(values: list[float], fmt: str) -> tuple[list[int], int]:
    """OCP MX v1.0 6.3: X = 2^(floor(log2(max|V_i|)) - emax_elem) (E8M0: clamp below at -127, NaN
    for a block with NaN/Inf or an exponent over 127), P_i = the element code of V_i / X with
    normal values clamped to the element's max. A NaN-scaled block stores codes 0."""
    elem, emax = MX[fmt]
    if any(not math.isfinite(v) for v in values):
        return [0] * len(values), 0xFF
    amax = max(abs(v) for v in values)
    k = -127 if amax == 0 else max(math.frexp(amax)[1] - 1 - emax, -127)
    if k > 127:
        return [0] * len(values), 0xFF
    return [encode_one(math.ldexp(v, -k), elem, saturate=True) for v in values], k + 127


def nvfp4_tensor(values: list[list[float]], tensor_scale: float | None = None):
    """NVIDIA's NVFP4: s (float32) = amax / (6 * 448) (1 if 0), block scale = E4M3(amax_b / (6 s))
    saturated, element = E2M1(x / (scale * s)); a zero scale stores codes 0."""
    amax = max((abs(v) for b in values for v in b), default=0.0)
    s = float(np.float32(amax / 2688.0 if tensor_scale is None else tensor_scale))
    s = s if s > 0 else 1.0
    codes, scales = [], []
    for block in values:
        sc = encode_one(max((abs(v) for v in block), default=0.0) / (6.0 * s), "fp8_e4m3", saturate=True)
        d = decode_one(sc, "fp8_e4m3") * s
        codes.append([0 if d == 0 else encode_one(v / d, "fp4_e2m1") for v in block])
        scales.append(sc)
    return codes, scales, s
