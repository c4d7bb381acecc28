"""Number formats: what a weight, an activation or a KV entry costs in bits (course 02.08, 05.02).

A low-precision float is three bit fields, sign ``s``, biased exponent ``E`` (``e`` bits) and
mantissa ``M`` (``m`` bits), read with the format's bias ``b``:

    normal     (E >= 1):  (-1)^s * 2^(E - b) * (1 + M / 2^m)
    subnormal  (E == 0):  (-1)^s * 2^(1 - b) * (M / 2^m)          (M == 0: a signed zero)

and each format says which codes are Inf and NaN. Where the exponent bits went is the lesson:

| fmt          | bits | e | m  | bias | max finite   | Inf | NaN codes                         | overflow (saturate=False) |
|--------------|------|---|----|------|--------------|-----|-----------------------------------|---------------------------|
| ``bf16``     | 16   | 8 | 7  | 127  | 3.3895e38    | yes | E=255, M!=0                       | Inf                       |
| ``fp16``     | 16   | 5 | 10 | 15   | 65504        | yes | E=31, M!=0                        | Inf                       |
| ``fp8_e4m3`` | 8    | 4 | 3  | 7    | 448          | no  | S.1111.111 (0x7F, 0xFF)           | NaN                       |
| ``fp8_e5m2`` | 8    | 5 | 2  | 15   | 57344        | yes | E=31, M!=0                        | Inf                       |
| ``fp4_e2m1`` | 4    | 2 | 1  | 1    | 6            | no  | none                              | saturates to +-6          |
| ``e8m0``     | 8    | 8 | 0  | 127  | 2^127        | no  | 0xFF (no sign, no zero)           | NaN                       |
| ``int8``     | 8    | two's complement, [-128, 127]                                 | saturates                 |
| ``int4``     | 4    | two's complement, [-8, 7]                                     | saturates                 |

``fp8_e4m3`` is OCP's E4M3 "fn" (finite, torch's ``float8_e4m3fn``): the top exponent holds
normal numbers (256..448), so only S.1111.111 is NaN and there is no Inf. ``fp4_e2m1`` holds
{0, 0.5, 1, 1.5, 2, 3, 4, 6} with a sign. ``e8m0`` is the OCP Microscaling scale: 2^(E - 127).

**Encoding** rounds the exact value of ``x`` (every float16/bfloat16/float32/float64 input is
exact in float64) to the nearest representable value, ties to the one whose code is even (the
mantissa's last bit 0; for ints the even integer; for ``e8m0``, whose significand is always 1,
the tie 1.5*2^k goes up to 2^(k+1), the even significand). Rounding is done once, as if the
exponent range were unbounded, and then:

- a result beyond the largest finite magnitude is an overflow: Inf (bf16, fp16, fp8_e5m2), NaN
  (fp8_e4m3, e8m0: no Inf), or the largest finite value when ``saturate=True``; fp4_e2m1, int8
  and int4 always saturate (they have neither Inf nor NaN). Because rounding comes first, the
  overflow threshold is the midpoint above the maximum: fp8_e4m3 takes 464 to 448 (448's mantissa
  110 is even) and 464.0001 to NaN; fp8_e5m2 takes 61440 to Inf (57344's mantissa 11 is odd).
- Inf in: Inf where the format has it, else NaN (fp8_e4m3, e8m0) or the largest finite value
  (fp4_e2m1, int8, int4, and every format with ``saturate=True``: NVIDIA's "satfinite").
- NaN in: a NaN code (the reference's choice: the canonical quiet NaN with the input's sign
  bit, as ml_dtypes does); a NaN into a format without NaN (fp4_e2m1, int8, int4) is a
  ``ValueError``.
- -0.0 and negative values that round to zero keep the sign in the float formats (code 0x80,
  0x8, 0x8000); the integer formats have one zero.
- ``e8m0`` has no sign and no zero: 0, -0.0 and every negative value are NaN (0xFF); values below
  2^-127 round up to 2^-127 (code 0), the nearest representable.

**Block scaling** (OCP Microscaling spec v1.0 section 6.3; NVIDIA's NVFP4): a block of k values
shares one scale X and each value stores the element code of V_i / X.

- MX (``mxfp8_e4m3``, ``mxfp8_e5m2``, ``mxfp4``): k = 32, X an E8M0 power of two,
  X = 2^(floor(log2(max_i |V_i|)) - emax_elem), emax_elem the exponent of the element format's
  largest normal (8 for E4M3, 15 for E5M2, 2 for E2M1); elements saturate (V_i / X can reach
  2^(emax_elem + 1) > max). The shared exponent is clamped below at -127 (an all-zero block has
  scale code 0); a block holding NaN or +-Inf, or whose exponent exceeds 127, gets the NaN scale
  0xFF, and the whole block decodes as NaN.
- NVFP4 (``nvfp4``): k = 16, E2M1 elements, an E4M3 block scale and a float32 per-tensor scale:
  s = fl32(amax(|x|) / (6 * 448)) (1 when that is 0), block scale code
  S_b = encode(amax_b / (6 * s), "fp8_e4m3", saturate=True), element codes
  encode(x_i / (decode(S_b) * s), "fp4_e2m1"); a zero block scale makes the block's codes 0.
  x = decode(code) * decode(S_b) * s.

Choices the law leaves open (tests marked ``choice``): the NaN a NaN encodes to (here the
canonical quiet NaN with the input's sign bit, as ml_dtypes; torch's float8_e5m2 gives 0x7F), and
the element codes of a NaN-scaled MX block (here 0; decode never reads them).

Every operation above is float64 (products of a scale and an element are exact in float64);
the only roundings are the ones the formats define, so encode/decode is bit-exact: the spec
asserts equality, never closeness.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from reference._checks import FLOAT_DTYPES, check_real, check_tensor

__all__ = ["encode", "decode", "representable", "quantize_blocks", "dequantize_blocks"]
__optional__: list[str] = []


@dataclass(frozen=True)
class Format:
    """One element format's bit layout (see the module table)."""
    name: str
    bits: int
    exp_bits: int = 0         # 0: an integer format
    man_bits: int = 0
    bias: int = 0
    has_inf: bool = False
    has_nan: bool = True
    signed: bool = True

    @property
    def is_int(self) -> bool:
        return self.exp_bits == 0

    @property
    def int_range(self) -> tuple[int, int]:
        return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1

    @property
    def max_finite(self) -> float:
        """The largest finite magnitude."""
        if self.is_int:
            return float(self.int_range[1])
        top = (1 << self.exp_bits) - 1                     # the all-ones exponent
        if self.has_inf:                                    # IEEE: all-ones is Inf/NaN
            return 2.0 ** (top - 1 - self.bias) * (2 - 2.0 ** -self.man_bits)
        if self.name == "e8m0":                             # 0xFF is NaN
            return 2.0 ** (top - 1 - self.bias)
        if self.has_nan:                                    # only S.1..1.1..1 is NaN
            return 2.0 ** (top - self.bias) * (2 - 2.0 ** (1 - self.man_bits))
        return 2.0 ** (top - self.bias) * (2 - 2.0 ** -self.man_bits)

    @property
    def code_dtype(self) -> torch.dtype:
        return torch.uint8 if self.bits <= 8 else torch.int32


FORMATS = {f.name: f for f in (
    Format("bf16", 16, 8, 7, 127, has_inf=True),
    Format("fp16", 16, 5, 10, 15, has_inf=True),
    Format("fp8_e4m3", 8, 4, 3, 7),
    Format("fp8_e5m2", 8, 5, 2, 15, has_inf=True),
    Format("fp4_e2m1", 4, 2, 1, 1, has_nan=False),
    Format("e8m0", 8, 8, 0, 127, signed=False),
    Format("int8", 8, has_nan=False),
    Format("int4", 4, has_nan=False),
)}


@dataclass(frozen=True)
class BlockFormat:
    """A block-scaled format: ``block`` elements of ``element`` share one ``scale``-format code."""
    name: str
    element: str
    scale: str
    block: int
    emax_elem: int = 0        # MX: the exponent of the element format's largest normal
    tensor_scale: bool = False


BLOCK_FORMATS = {f.name: f for f in (
    BlockFormat("mxfp8_e4m3", "fp8_e4m3", "e8m0", 32, emax_elem=8),
    BlockFormat("mxfp8_e5m2", "fp8_e5m2", "e8m0", 32, emax_elem=15),
    BlockFormat("mxfp4", "fp4_e2m1", "e8m0", 32, emax_elem=2),
    BlockFormat("nvfp4", "fp4_e2m1", "fp8_e4m3", 16, tensor_scale=True),
)}

NVFP4_RANGE = 6.0 * 448.0     # fp4's max times e4m3's max: what s maps amax(|x|) onto
CODE_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


# --- argument checks --------------------------------------------------------------------------
def check_format(fmt, table=None, what: str = "an element format"):
    """The Format (or BlockFormat, from ``table``) named ``fmt``; TypeError / ValueError naming fmt."""
    table = FORMATS if table is None else table
    if not isinstance(fmt, str):
        raise TypeError(f"fmt must be a str naming {what}, got {fmt!r}")
    if fmt not in table:
        raise ValueError(f"fmt must be one of {sorted(table)}, got {fmt!r}")
    return table[fmt]


def check_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


def check_out_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    return dtype


def check_codes(codes, f: Format, name: str = "codes") -> torch.Tensor:
    check_tensor(name, codes)
    if codes.dtype not in CODE_DTYPES:
        raise TypeError(f"{name} must be an integer tensor (uint8/int8/int16/int32/int64), got {codes.dtype}")
    if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= (1 << f.bits)):
        raise ValueError(f"{name} of {f.name} must lie in [0, {1 << f.bits}), "
                         f"got values in [{int(codes.min())}, {int(codes.max())}]")
    return codes


# --- one element format -----------------------------------------------------------------------
def _exponent(a: torch.Tensor) -> torch.Tensor:
    """floor(log2(a)) of positive finite float64 ``a``, exactly: frexp's a = m * 2^e, m in [0.5, 1).
    (log2 is not exact just below a power of two.)"""
    return torch.frexp(a).exponent.to(torch.float64) - 1


def _round_float(a: torch.Tensor, f: Format) -> torch.Tensor:
    """``a`` (float64, finite, >= 0) rounded to f's grid, ties to even, exponent range unbounded
    above: the step in [2^e, 2^(e+1)) is 2^(e - m), and below 2^emin (subnormals) 2^(emin - m)."""
    emin = 1 - f.bias
    e = torch.where(a > 0, _exponent(torch.where(a > 0, a, 1.0)), float(emin)).clamp(min=emin)
    step = torch.exp2(e - f.man_bits)
    return torch.round(a / step) * step            # torch.round: round half to even


def _round_e8m0(a: torch.Tensor) -> torch.Tensor:
    """``a`` (float64, finite, > 0) rounded to a power of two >= 2^-127; a tie 1.5 * 2^e goes up."""
    e = _exponent(a)
    e = torch.where(a / torch.exp2(e) >= 1.5, e + 1, e)
    return torch.exp2(e.clamp(min=-127))


def _float_code(q: torch.Tensor, negative: torch.Tensor, f: Format) -> torch.Tensor:
    """The bit pattern of representable magnitudes ``q`` (float64 >= 0) with sign ``negative``."""
    emin = 1 - f.bias
    e = torch.where(q > 0, _exponent(torch.where(q > 0, q, 1.0)), float(emin)).clamp(min=emin)
    subnormal = q < 2.0 ** emin
    biased = torch.where(subnormal, 0.0, e + f.bias)
    mantissa = torch.where(subnormal, q / 2.0 ** (emin - f.man_bits), (q / torch.exp2(e) - 1) * 2 ** f.man_bits)
    code = biased.to(torch.int64) * (1 << f.man_bits) + mantissa.to(torch.int64)
    return code + negative.to(torch.int64) * (1 << (f.bits - 1))


def _nan_code(f: Format, negative: torch.Tensor) -> torch.Tensor:
    """The canonical NaN (the reference's choice): all-ones exponent, the mantissa's top bit (and,
    for fp8_e4m3, every bit) set, the input's sign; e8m0's one NaN is 0xFF."""
    if f.name == "e8m0":
        return torch.full_like(negative, 0xFF, dtype=torch.int64)
    top = ((1 << f.exp_bits) - 1) << f.man_bits
    quiet = (1 << f.man_bits) - 1 if not f.has_inf else 1 << (f.man_bits - 1)
    return top + quiet + negative.to(torch.int64) * (1 << (f.bits - 1))


def _inf_code(f: Format, negative: torch.Tensor) -> torch.Tensor:
    return ((1 << f.exp_bits) - 1 << f.man_bits) + negative.to(torch.int64) * (1 << (f.bits - 1))


def _encode_int(x: torch.Tensor, f: Format) -> torch.Tensor:
    lo, hi = f.int_range
    n = torch.round(x).clamp(lo, hi).to(torch.int64)   # round half to even, then saturate
    return n % (1 << f.bits)                            # two's complement bit pattern


def _encode_e8m0(x: torch.Tensor, f: Format, saturate: bool) -> torch.Tensor:
    big = torch.isinf(x) & (x > 0)
    ok = torch.isfinite(x) & (x > 0)
    q = _round_e8m0(torch.where(ok, x, 1.0))
    over = ok & (q > f.max_finite)
    code = _exponent(torch.where(over, 1.0, q)).to(torch.int64) + f.bias
    if saturate:
        code = torch.where(over | big, 254, code)
        return torch.where(ok | big, code, 0xFF)
    return torch.where(ok & ~over, code, 0xFF)


def _encode_float(x: torch.Tensor, f: Format, saturate: bool) -> torch.Tensor:
    negative = torch.signbit(x)
    finite = torch.isfinite(x)
    q = _round_float(torch.where(finite, x.abs(), 0.0), f)
    over = q > f.max_finite                             # an overflow after rounding, or an Inf
    over = over | torch.isinf(x)
    saturates = saturate or not f.has_nan              # fp4_e2m1 has no Inf and no NaN
    q = torch.where(over, f.max_finite, q)
    code = _float_code(q, negative, f)
    if not saturates:
        code = torch.where(over, _inf_code(f, negative) if f.has_inf else _nan_code(f, negative), code)
    return torch.where(torch.isnan(x), _nan_code(f, negative), code)


def encode(x: torch.Tensor, fmt: str, *, saturate: bool = False) -> torch.Tensor:
    """The codes of ``x`` in element format ``fmt`` (one of ``bf16``, ``fp16``, ``fp8_e4m3``,
    ``fp8_e5m2``, ``fp4_e2m1``, ``e8m0``, ``int8``, ``int4``; the module doc's table).

    ``x``: a float16/bfloat16/float32/float64 tensor of any shape (0-d and empty included); its
    exact value is rounded once to the nearest representable value, ties to even (``e8m0``: ties
    up). Returns the bit patterns as unsigned integers, same shape: ``torch.uint8`` for the 4- and
    8-bit formats (a 4-bit code in the low nibble, one code per byte; packing two per byte is not
    this contract), ``torch.int32`` in [0, 65536) for bf16/fp16. Integer codes are two's
    complement (int8 -1 -> 0xFF, int4 -1 -> 0xF).

    Edge cases: overflow gives Inf (bf16/fp16/fp8_e5m2) or NaN (fp8_e4m3, e8m0), and the largest
    finite value with ``saturate=True`` (Inf included; NaN stays NaN); fp4_e2m1/int8/int4 always
    saturate. NaN gives the canonical quiet NaN with the input's sign (a choice); -0.0 and
    negatives that round to zero give -0 in the float formats; ``e8m0`` takes 0, negatives and
    -Inf to NaN (0xFF) and values below 2^-127 to 2^-127.

    Bad input: ``x`` not a tensor -> ``TypeError``, not float16/bfloat16/float32/float64 ->
    ``TypeError``, holding NaN for fp4_e2m1/int8/int4 (no NaN code) -> ``ValueError``, each
    naming ``x``; ``fmt`` not a str -> ``TypeError``, unknown -> ``ValueError`` naming ``fmt``;
    ``saturate`` not a bool -> ``TypeError`` naming it."""
    check_tensor("x", x, dtypes=FLOAT_DTYPES)
    f = check_format(fmt)
    check_bool("saturate", saturate)
    if not f.has_nan and bool(torch.isnan(x).any()):
        raise ValueError(f"x holds NaN, which {f.name} cannot encode (it has no NaN code)")
    x = x.to(torch.float64)
    if f.is_int:
        code = _encode_int(torch.where(torch.isnan(x), 0.0, x), f)
    elif f.name == "e8m0":
        code = _encode_e8m0(x, f, saturate)
    else:
        code = _encode_float(x, f, saturate)
    return code.to(f.code_dtype)


def _decode_float(c: torch.Tensor, f: Format) -> torch.Tensor:
    sign = torch.where(c >> (f.bits - 1) & 1 == 1, -1.0, 1.0) if f.signed else torch.ones(c.shape, dtype=torch.float64)
    field = c & ((1 << (f.bits - 1 if f.signed else f.bits)) - 1)
    biased = (field >> f.man_bits).to(torch.float64)
    mantissa = (field & ((1 << f.man_bits) - 1)).to(torch.float64) / 2 ** f.man_bits
    if f.name == "e8m0":                                 # no subnormals: E=0 is 2^-127
        value = torch.exp2(biased - f.bias)
    else:
        value = torch.where(biased == 0, 2.0 ** (1 - f.bias) * mantissa,
                            torch.exp2(biased - f.bias) * (1 + mantissa))
    value = sign * value
    top = (1 << f.exp_bits) - 1
    if f.has_inf:
        value = torch.where((biased == top) & (mantissa == 0), sign * math.inf, value)
        value = torch.where((biased == top) & (mantissa != 0), math.nan, value)
    elif f.has_nan:                                      # only the all-ones code (per sign) is NaN
        value = torch.where(field == (1 << (f.bits - (1 if f.signed else 0))) - 1, math.nan, value)
    return value


def decode(codes: torch.Tensor, fmt: str, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The values of the bit patterns ``codes`` of element format ``fmt`` (``encode``'s formats).

    ``codes``: an integer tensor (uint8/int8/int16/int32/int64) of any shape, each entry an
    unsigned bit pattern in [0, 2^bits). Returns a ``dtype`` tensor of the same shape
    (``torch.float64`` by default, or ``torch.float32``: every value of every format is exact in
    both). -0 decodes to -0.0 (sign bit set), Inf codes to +-inf, every NaN code to a NaN (its sign
    and payload are not part of the contract); integer codes are two's complement.

    Bad input: ``codes`` not a tensor or not an integer dtype -> ``TypeError``, an entry outside
    [0, 2^bits) -> ``ValueError``, each naming ``codes``; ``fmt`` as in ``encode``; ``dtype`` not
    a torch.dtype -> ``TypeError``, not float32/float64 -> ``ValueError``, naming ``dtype``."""
    f = check_format(fmt)
    check_codes(codes, f)
    check_out_dtype(dtype)
    c = codes.to(torch.int64)
    if f.is_int:
        value = torch.where(c >= 1 << (f.bits - 1), c - (1 << f.bits), c).to(torch.float64)
    else:
        value = _decode_float(c, f)
    return value.to(dtype)


def representable(fmt: str) -> torch.Tensor:
    """Every finite value of element format ``fmt``, as a sorted 1-d float64 tensor of distinct
    values (zero once, as +0.0; no Inf, no NaN). E.g. ``fp4_e2m1``: -6, -4, -3, -2, -1.5, -1,
    -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6 (15 values); ``fp8_e4m3``: 253; ``int4``: -8..7.
    Bad input: ``fmt`` as in ``encode``."""
    f = check_format(fmt)
    values = decode(torch.arange(1 << f.bits), fmt)
    values = values[torch.isfinite(values)] + 0.0       # + 0.0 turns -0.0 into +0.0
    return torch.unique(values)                         # sorted


# --- block-scaled formats ---------------------------------------------------------------------
def check_block_input(x, fmt, tensor_scale) -> "BlockFormat":
    """:func:`quantize_blocks`' argument checks (its docstring's bad input, but the float32 range of
    the tensor scale, checked where it is computed), before anything is computed: the block format."""
    check_tensor("x", x, dtypes=FLOAT_DTYPES)
    bf = check_format(fmt, BLOCK_FORMATS, "a block format")
    if tensor_scale is not None:
        check_real("tensor_scale", tensor_scale)
        if not bf.tensor_scale:
            raise ValueError(f"tensor_scale is for nvfp4 only; {bf.name} has no per-tensor scale")
        if tensor_scale <= 0:
            raise ValueError(f"tensor_scale must be > 0, got {tensor_scale}")
    if x.dim() < 1 or x.shape[-1] % bf.block:
        raise ValueError(f"x's last dimension must be a multiple of {bf.name}'s block size "
                         f"{bf.block}, got shape {tuple(x.shape)}")
    if bf.tensor_scale and not bool(torch.isfinite(x).all()):
        raise ValueError("x must be finite for nvfp4 (its per-tensor scale needs a finite amax)")
    return bf


def _blocks(x: torch.Tensor, bf: BlockFormat) -> torch.Tensor:
    """``x`` (checked by :func:`check_block_input`) as float64 (..., n_blocks, block)."""
    return x.to(torch.float64).reshape(*x.shape[:-1], x.shape[-1] // bf.block, bf.block)


def _mx_scale_exponent(blocks: torch.Tensor, bf: BlockFormat) -> torch.Tensor:
    """The OCP MX shared exponent floor(log2(amax)) - emax_elem per block, clamped below at -127;
    NaN where the block holds NaN/Inf or the exponent exceeds 127."""
    amax = blocks.abs().amax(dim=-1)
    special = ~torch.isfinite(blocks).all(dim=-1)
    amax = torch.where(special, 1.0, amax)
    e = torch.where(amax > 0, _exponent(torch.where(amax > 0, amax, 1.0)) - bf.emax_elem, -127.0)
    e = e.clamp(min=-127)
    return torch.where(special | (e > 127), math.nan, e)


def _quantize_mx(blocks: torch.Tensor, bf: BlockFormat):
    e = _mx_scale_exponent(blocks, bf)
    nan_scale = torch.isnan(e)
    scale_codes = torch.where(nan_scale, 0xFF, torch.where(nan_scale, 0.0, e) + 127).to(torch.uint8)
    scaled = blocks / torch.exp2(torch.where(nan_scale, 0.0, e)).unsqueeze(-1)
    scaled = torch.where(nan_scale.unsqueeze(-1), 0.0, scaled)   # a NaN-scaled block stores codes 0
    codes = encode(scaled, bf.element, saturate=True)
    return codes, scale_codes, torch.tensor(1.0, dtype=torch.float32)


def _nvfp4_tensor_scale(blocks: torch.Tensor, tensor_scale) -> float:
    """s = fl32(amax / (6 * 448)), 1 when that is 0; a given ``tensor_scale`` rounded to float32."""
    given = tensor_scale is not None
    if not given:
        amax = float(blocks.abs().max()) if blocks.numel() else 0.0
        tensor_scale = amax / NVFP4_RANGE
    s = float(torch.tensor(tensor_scale, dtype=torch.float64).to(torch.float32))
    if given and not 0 < s < math.inf:
        raise ValueError(f"tensor_scale must be a positive float32 value, got {tensor_scale!r} (rounds to {s})")
    if s == float("inf"):
        raise ValueError(f"x's amax {tensor_scale * NVFP4_RANGE:g} is beyond a float32 tensor scale's range (amax / 2688 > 3.4e38)")
    return s if s > 0 else 1.0


def _quantize_nvfp4(blocks: torch.Tensor, bf: BlockFormat, tensor_scale):
    s = _nvfp4_tensor_scale(blocks, tensor_scale)
    amax = blocks.abs().amax(dim=-1)
    scale_codes = encode(amax / (6.0 * s), bf.scale, saturate=True)
    scale = decode(scale_codes, bf.scale) * s                    # exact: 4 x 24 significant bits
    zero = (scale == 0).unsqueeze(-1)
    scaled = torch.where(zero, 0.0, blocks / torch.where(zero, 1.0, scale.unsqueeze(-1)))
    codes = encode(scaled, bf.element)
    return codes, scale_codes, torch.tensor(s, dtype=torch.float32)


def quantize_blocks(x: torch.Tensor, fmt: str, *, tensor_scale: float | None = None):
    """Block-scaled quantisation of ``x`` along its last dimension: ``(codes, scales, tensor_scale)``.

    ``fmt``: ``mxfp8_e4m3``, ``mxfp8_e5m2``, ``mxfp4`` (OCP MX v1.0: 32-element blocks, E8M0
    scales) or ``nvfp4`` (16-element blocks, E4M3 scales, a float32 per-tensor scale); the rules
    are the module doc's. ``x``: float16/bfloat16/float32/float64, rank >= 1, the last dimension a
    multiple of the block size. Returns ``codes``: uint8, ``x``'s shape, one element code per
    entry (unpacked); ``scales``: uint8, shape (..., last // block), the E8M0 (MX) or E4M3
    (NVFP4) scale codes; ``tensor_scale``: a 0-d float32 tensor, 1.0 for MX, s for NVFP4.

    Edge cases: an all-zero MX block has scale code 0 (2^-127) and zero codes (-0.0 keeps its
    sign); a block holding NaN or +-Inf (or, from float64 input, an exponent above 127) gets the
    NaN scale 0xFF and element codes 0; elements saturate at the element format's max. NVFP4: an
    all-zero tensor has s = 1; a block whose scale underflows to 0 stores codes 0.
    ``tensor_scale`` (NVFP4 only): a given s (a positive finite real, rounded to float32) instead
    of amax / 2688, e.g. calibrated offline; values beyond it saturate.

    Bad input: ``x`` not a tensor / not a float dtype -> ``TypeError``; rank 0 or a last dimension
    that is not a multiple of the block -> ``ValueError``; NVFP4 with NaN or Inf in ``x`` (no
    finite tensor scale) -> ``ValueError``; each naming ``x``. ``fmt`` not a str -> ``TypeError``,
    not a block format -> ``ValueError``. ``tensor_scale`` not a real -> ``TypeError``, <= 0,
    not finite, rounding to 0 or Inf in float32, or given for an MX format -> ``ValueError``,
    naming ``tensor_scale``; NVFP4 from float64 ``x`` whose amax / 2688 overflows float32 ->
    ``ValueError`` naming ``x``."""
    bf = check_block_input(x, fmt, tensor_scale)
    blocks = _blocks(x, bf)
    if bf.tensor_scale:
        codes, scales, s = _quantize_nvfp4(blocks, bf, tensor_scale)
    else:
        codes, scales, s = _quantize_mx(blocks, bf)
    return codes.reshape(x.shape), scales, s


def check_block_codes(codes, scales, tensor_scale, fmt, dtype) -> tuple["BlockFormat", float, tuple]:
    """:func:`dequantize_blocks`' argument checks (its docstring's bad input), before anything is
    computed: ``(the block format, tensor_scale as a float, the shape scales must have)``."""
    bf = check_format(fmt, BLOCK_FORMATS, "a block format")
    check_codes(codes, FORMATS[bf.element])
    check_codes(scales, FORMATS[bf.scale], "scales")
    if isinstance(tensor_scale, torch.Tensor):
        if tensor_scale.dim() != 0 or not tensor_scale.is_floating_point():
            raise TypeError(f"tensor_scale must be a real or a 0-d float tensor, got {tensor_scale!r}")
        tensor_scale = float(tensor_scale)
    s = check_real("tensor_scale", tensor_scale, minimum=0.0)
    if s == 0:
        raise ValueError("tensor_scale must be > 0, got 0")
    check_out_dtype(dtype)
    if codes.dim() < 1 or codes.shape[-1] % bf.block:
        raise ValueError(f"codes' last dimension must be a multiple of {bf.name}'s block size "
                         f"{bf.block}, got shape {tuple(codes.shape)}")
    expect = (*codes.shape[:-1], codes.shape[-1] // bf.block)
    if tuple(scales.shape) != expect:
        raise ValueError(f"scales must have shape {expect} for codes of shape {tuple(codes.shape)}, "
                         f"got {tuple(scales.shape)}")
    return bf, s, expect


def dequantize_blocks(codes: torch.Tensor, scales: torch.Tensor, tensor_scale, fmt: str, *,
                      dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The values of block-quantised ``codes``: decode(code) * decode(scale of its block) *
    tensor_scale, in ``dtype`` (float64 by default, or float32), ``codes``' shape.

    ``codes``: an integer tensor of element codes, rank >= 1, last dimension a multiple of the
    block; ``scales``: an integer tensor of scale codes, shape (..., last // block);
    ``tensor_scale``: a 0-d tensor or a real, finite and > 0 (1.0 for MX). An MX NaN scale (0xFF)
    makes its whole block NaN. The product is exact in float64 (an element's significand, a
    scale's, and a float32's fit in 53 bits).

    Bad input: ``codes``/``scales`` as in ``decode`` (naming each), ``scales`` of the wrong shape
    -> ``ValueError`` naming ``scales``; a last dimension not a multiple of the block ->
    ``ValueError`` naming ``codes``; ``tensor_scale`` not a real or 0-d tensor -> ``TypeError``,
    <= 0 or not finite -> ``ValueError``, naming it; ``fmt``, ``dtype`` as in ``decode``."""
    bf, s, expect = check_block_codes(codes, scales, tensor_scale, fmt, dtype)
    elements = decode(codes, bf.element).reshape(*expect, bf.block)
    scale = decode(scales, bf.scale).unsqueeze(-1)
    return (elements * scale * s).reshape(codes.shape).to(dtype)
