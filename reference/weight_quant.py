"""Weight-only quantisation: group-wise INT4/INT8, round-to-nearest and GPTQ (course 05.03).

Decode is bandwidth bound: every step reads every weight once, so the bytes of the weights ARE
the cost of a step. Storing a linear layer's weight in 4 bits instead of 16 reads a quarter of the
bytes; the activations stay in bf16/fp16 (W4A16) and the weight is dequantised on the fly.

Layout. A weight ``w`` is (out_features, in_features), the layout of ``torch.nn.Linear`` (y = x wᵀ).
Groups run ALONG in_features: row ``n``'s columns ``g*G .. g*G + G - 1`` share one scale
``scales[n, g]`` and one integer zero point ``zeros[n, g]`` (G = ``group_size``, which must divide
in_features; ``None`` is one group per row, "per channel"). A weight is stored as an unsigned code
``u`` in ``[0, 2^bits - 1]`` (uint8) and means

    ŵ = s · (u − z)                                                    (dequantize)

* symmetric: ``z = 2^(bits-1)`` (8 for INT4, 128 for INT8), ``s = absmax / qmax`` with
  ``qmax = 2^(bits-1) − 1`` (7, 127) and absmax the group's largest |w|. Round-to-nearest gives
  ``u − z = round(w / s)`` in ``[−qmax, qmax]``; the code ``u = 0`` (−8, −128) is legal (GPTQ's error
  feedback can reach it) but RTN never produces it.
* asymmetric: the range is widened to contain 0, ``lo = min(w_min, 0)``, ``hi = max(w_max, 0)``
  (as GPTQ's quantizer does, so that 0 is exactly representable and ``z`` needs no clamp),
  ``s = (hi − lo) / (2^bits − 1)``, ``z = round(−lo / s)``, ``u = clamp(round(w / s) + z, 0, 2^bits − 1)``.
* ``round`` is round-half-to-even (``torch.round``). Scales are float32, computed in float64 from
  the float32 value of the weights and rounded once; the codes are computed in float64 with the
  *stored* (float32) scale, so ŵ is exactly what ``dequantize`` reconstructs. A group whose scale
  is 0 (every weight 0, or an underflow) gets ``s = 1``: its codes are ``z`` and ŵ = 0 exactly.

The bound (round-to-nearest, both modes). Let ``t = w / s + z`` (real arithmetic, stored s).
Symmetric: ``|w| <= absmax <= qmax·s·(1 + 2^-24)`` so ``t − z`` lies in ``[−qmax − ½, qmax + ½]``
and ``round`` lands in ``[−qmax, qmax]``: no clamp bites, ``|t − u| <= ½``. Asymmetric: ``z`` is the
nearest integer to ``−lo/s`` (in ``[0, maxq]`` as ``lo <= 0 <= hi``), so ``t`` lies in
``[−½, maxq + ½]`` up to the scale's rounding; ``round`` then clamp moves ``t`` at most ½ (a tie at
``maxq + ½`` rounds to the even ``maxq + 1`` and is clamped back to ``maxq``, still ½ away).
Hence ``|w − s(u − z)| <= s/2`` exactly, and in floating point (the quotient ``w/s`` in float64,
relative error 2^-53; ``dequantize``'s one float32 rounding of the product)

    |w − ŵ| <= s/2 + 2^-24·|ŵ| + 2^-52·|w|                        per element, s its group's scale.

Packing (``pack_int4``): two 4-bit codes per byte along the last axis, element ``2i`` in the LOW
nibble and ``2i + 1`` in the HIGH nibble of byte ``i``: ``byte = u[2i] | u[2i+1] << 4``. This is
GPTQ's order (GPTQ-for-LLaMa / AutoGPTQ ``QuantLinear.pack``: ``qweight[row] |= intweight[j] <<
(bits * (j - i))``, the first of eight codes in the lowest nibble of an int32; read as
little-endian bytes that int32 is exactly this layout). It is NOT AWQ's (which interleaves the
eight nibbles of an int32 as 0, 2, 4, 6, 1, 3, 5, 7) nor the uint8 input of torch's tinygemm
``_convert_weight_to_int4pack`` as torchao builds it (``u[2i] << 4 | u[2i+1]``: high nibble first).
Old GPTQ checkpoints also store ``zeros − 1``; here zeros are stored as they are.

GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained
Transformers", Algorithm 1). Quantise the columns left to right; after each column, spread its
rounding error over the columns not yet quantised so that the layer's output on the calibration
inputs ``X`` (n_samples, in_features) changes least:

    H = 2 XᵀX + λI,  λ = damp · mean(diag(2 XᵀX))                     (the paper's 1 % damping)
    U = cholesky(H⁻¹) (upper: H⁻¹ = UᵀU)
    for j = 0 .. in_features − 1:
        if j % G == 0: s, z = the group's parameters from W[:, j:j+G] as it is NOW (updated)
        u_j = quantise(W[:, j]);  e = (W[:, j] − ŵ_j) / U[j, j]
        W[:, j+1:] −= e · U[j, j+1:]

A column no calibration input touches (diag(H)[i] = 0) gets H[i, i] = 1 before damping, as in the
paper's code (H stays invertible; that column's error reaches no output). The objective is the
layer-output error ``||X wᵀ − X ŵᵀ||²_F``; GPTQ minimises it greedily, so it is no theorem that it
beats round-to-nearest on every input. What IS a theorem: when H is diagonal (calibration columns
orthogonal) U is diagonal, no error is fed forward and GPTQ's codes are round-to-nearest's. The
spec's statistical test of "GPTQ <= RTN" is described in spec_tests/weight_quant/.

W4A16 (``w4a16_matmul``): ``y = x ŵᵀ`` with ŵ unpacked and dequantised, here literally: dequantise
the whole weight in float32 (float64 for float64 x), round it to x's dtype, then ``x @ ŵᵀ`` in x's
dtype (float32 accumulation). A fast kernel dequantises a tile in registers instead; the spec
holds it to the tolerance rule against a float64 oracle.

Choices the law leaves open (tests marked ``choice``): the exact float32 bits of the scales (the
order of the float operations that produce them), the GPTQ column order (natural order, no
act-order), no lazy batching (the plain column loop; lazy batches change the result only through
rounding, except that the paper's code computes a group's scale from weights that have not yet
received the pending updates of the current batch -- not done here), its arithmetic in float64.
"""
from __future__ import annotations

import torch

from reference._checks import FLOAT_DTYPES, check_int, check_real, check_tensor

__all__ = ["quantize", "dequantize", "pack_int4", "unpack_int4", "gptq", "w4a16_matmul"]
__optional__ = []

BITS = (4, 8)
CODE_DTYPES = (torch.uint8,)
FLOAT32_MAX = torch.finfo(torch.float32).max


# ------------------------------------------------------------------------------------ checks
def check_weight(name: str, w) -> torch.Tensor:
    """``w`` is a finite floating (out_features, in_features) tensor whose values fit float32."""
    check_tensor(name, w, ndim=2, dims="out_features, in_features", dtypes=FLOAT_DTYPES)
    if w.numel() and not bool(torch.isfinite(w).all()):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    if w.numel() and float(w.abs().max()) > FLOAT32_MAX:
        raise ValueError(f"{name} must fit float32 (the scales are float32), max |{name}| = {float(w.abs().max())}")
    return w


def check_format(in_features: int, bits, group_size, symmetric) -> int:
    """Validate ``bits``, ``group_size`` and ``symmetric``; return the group size (None: in_features)."""
    check_int("bits", bits)
    if bits not in BITS:
        raise ValueError(f"bits must be 4 or 8, got {bits}")
    check_int("group_size", group_size, minimum=1, allow_none=True)
    if not isinstance(symmetric, bool):
        raise TypeError(f"symmetric must be a bool, got {symmetric!r}")
    group = in_features if group_size is None else group_size
    if in_features < 1:
        raise ValueError("w must have at least one column (in_features >= 1)")
    if in_features % group:
        raise ValueError(f"group_size {group} must divide in_features {in_features}")
    return group


# ------------------------------------------------------------------------------- the format
def group_params(wg: torch.Tensor, bits: int, symmetric: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale float32, zero int64) of each row of ``wg`` (rows, group) float64 (module doc)."""
    maxq = (1 << bits) - 1
    if symmetric:
        qmax = (1 << (bits - 1)) - 1
        scale = (wg.abs().amax(dim=-1) / qmax).to(torch.float32)
    else:
        lo = wg.amin(dim=-1).clamp(max=0.0)
        hi = wg.amax(dim=-1).clamp(min=0.0)
        scale = ((hi - lo) / maxq).to(torch.float32)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))      # an all-zero group: s = 1
    if symmetric:
        zero = torch.full(scale.shape, 1 << (bits - 1), dtype=torch.int64, device=wg.device)
    else:
        zero = torch.round(-lo / scale.double()).clamp(0, maxq).to(torch.int64)
    return scale, zero


def quantize_column(w: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bits: int) -> torch.Tensor:
    """Codes ``clamp(round(w / s) + z, 0, 2^bits - 1)`` (int64) of float64 ``w``; s, z broadcast."""
    return (torch.round(w / scale.double()) + zero).clamp(0, (1 << bits) - 1).to(torch.int64)


def quantize(w, *, bits: int = 4, group_size: int | None = 128, symmetric: bool = True):
    """Round-to-nearest group-wise quantisation of ``w`` (out_features, in_features).

    Returns ``(codes, scales, zeros)``: codes uint8 (out_features, in_features) in
    ``[0, 2^bits - 1]``; scales float32 and zeros uint8, both (out_features, in_features /
    group_size). ``dequantize(codes, scales, zeros)`` is within ``s/2`` (plus float rounding, module
    doc) of every weight. ``bits`` 4 or 8; ``group_size`` must divide in_features (None: one group
    per row); ``symmetric`` a bool. ``w`` any floating dtype, finite. Zero rows are fine
    (out_features 0).
    """
    check_weight("w", w)
    group = check_format(w.shape[1], bits, group_size, symmetric)
    out_f, in_f = w.shape
    wg = w.detach().to(torch.float32).double().reshape(out_f, in_f // group, group)
    scale, zero = group_params(wg, bits, symmetric)
    codes = quantize_column(wg, scale[..., None], zero[..., None], bits)
    return codes.reshape(out_f, in_f).to(torch.uint8), scale, zero.to(torch.uint8)


def check_quantized(codes, scales, zeros, *, codes_name: str = "codes") -> int:
    """``codes`` uint8 (out, in), ``scales`` floating and ``zeros`` uint8 (out, groups), groups
    dividing in; same device. Returns the group size."""
    check_tensor(codes_name, codes, ndim=2, dims="out_features, in_features", dtypes=CODE_DTYPES)
    check_scales_zeros(scales, zeros, codes.shape[0], codes.device, codes_name)
    return check_groups(scales.shape[1], codes.shape[1], codes_name)


def check_scales_zeros(scales, zeros, out_features: int, device, owner: str) -> None:
    """``scales`` floating and ``zeros`` uint8, both (out_features, groups), on ``owner``'s device."""
    check_tensor("scales", scales, ndim=2, dims="out_features, groups", dtypes=FLOAT_DTYPES)
    check_tensor("zeros", zeros, ndim=2, dims="out_features, groups", dtypes=CODE_DTYPES)
    for name, t in (("scales", scales), ("zeros", zeros)):
        if t.device != device:
            raise ValueError(f"{name} must be on {owner}'s device {device}, got {t.device}")
    if scales.shape[0] != out_features:
        raise ValueError(f"scales must have one row per output feature ({out_features}), got {scales.shape[0]}")
    if zeros.shape != scales.shape:
        raise ValueError(f"zeros must have scales' shape {tuple(scales.shape)}, got {tuple(zeros.shape)}")


def check_groups(groups: int, in_features: int, codes_name: str) -> int:
    if groups < 1 or in_features < 1 or in_features % groups:
        raise ValueError(f"scales' {groups} groups must divide {codes_name}' in_features {in_features} "
                         "(both >= 1)")
    return in_features // groups


def dequantize(codes, scales, zeros):
    """ŵ = s · (u − z), each element's group read from ``scales``/``zeros`` (out, groups): group
    ``g`` covers columns ``g*G .. g*G + G - 1``, G = in_features / groups.

    The product is computed in float32 (float64 for float64 scales) and rounded ONCE: (u − z) is an
    exact small integer, so ŵ is the correctly rounded value of the exact product. Returns float32
    (float64) (out_features, in_features).
    """
    group = check_quantized(codes, scales, zeros)
    dtype = torch.float64 if scales.dtype == torch.float64 else torch.float32
    diff = codes.to(torch.int32) - zeros.to(torch.int32).repeat_interleave(group, dim=1)
    return diff.to(dtype) * scales.to(dtype).repeat_interleave(group, dim=1)


# ------------------------------------------------------------------------------------ packing
def pack_int4(codes):
    """Two 4-bit codes per byte along the last axis: byte ``i`` = ``codes[..., 2i] |
    codes[..., 2i+1] << 4`` (GPTQ's nibble order, module doc). ``codes`` uint8 of any rank >= 1
    with an even last dimension and every value in [0, 15]; returns uint8 (..., last / 2)."""
    check_tensor("codes", codes, dtypes=CODE_DTYPES)
    if codes.dim() < 1 or codes.shape[-1] % 2:
        raise ValueError(f"codes must have an even last dimension, got shape {tuple(codes.shape)}")
    if codes.numel() and int(codes.max()) > 15:
        raise ValueError(f"codes must be 4-bit values in [0, 15], got {int(codes.max())}")
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_int4(packed):
    """The inverse of :func:`pack_int4`: uint8 (..., n) -> uint8 codes (..., 2n), element ``2i`` the
    low nibble of byte ``i`` and ``2i + 1`` its high nibble. Every byte is a valid pair."""
    check_tensor("packed", packed, dtypes=CODE_DTYPES)
    if packed.dim() < 1:
        raise ValueError(f"packed must have rank >= 1, got shape {tuple(packed.shape)}")
    return torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(*packed.shape[:-1], 2 * packed.shape[-1])


# --------------------------------------------------------------------------------------- GPTQ
def hessian(x: torch.Tensor, in_features: int, damp: float) -> torch.Tensor:
    """H = 2 XᵀX (float64), dead columns' diagonal set to 1, plus damp · mean(diag) · I."""
    xs = x.detach().reshape(-1, in_features).to(torch.float32).double()
    h = 2.0 * xs.T @ xs
    diag = h.diagonal()
    diag[diag == 0] = 1.0                      # a column no input touches (the paper's code)
    diag += damp * float(diag.mean())
    return h


def gptq(w, x, *, bits: int = 4, group_size: int | None = 128, symmetric: bool = True, damp: float = 0.01):
    """GPTQ (Frantar et al. 2022, Algorithm 1; module doc) of ``w`` (out_features, in_features) on
    calibration inputs ``x`` (..., in_features): the layer's inputs, one row per token.

    Returns ``(codes, scales, zeros)`` in :func:`quantize`'s format; each group's scale and zero
    point come from the group's weights as updated when its first column is reached. ``damp``
    (real >= 0) is λ / mean(diag(2 XᵀX)): 0.01 as in the paper. ValueError naming ``damp`` when
    H + λI is not positive definite (damp 0 with fewer independent inputs than columns). Natural
    column order; arithmetic in float64.
    """
    check_weight("w", w)
    group = check_format(w.shape[1], bits, group_size, symmetric)
    check_tensor("x", x, dtypes=FLOAT_DTYPES)
    if x.dim() < 2 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"x must be (..., in_features = {w.shape[1]}), got shape {tuple(x.shape)}")
    if x.device != w.device:
        raise ValueError(f"x must be on w's device {w.device}, got {x.device}")
    if x.numel() and not bool(torch.isfinite(x).all()):
        raise ValueError("x must be finite (no NaN or inf)")
    damp = check_real("damp", damp, minimum=0.0)
    out_f, in_f = w.shape
    h = hessian(x, in_f, damp)
    chol, info = torch.linalg.cholesky_ex(h)
    if int(info):
        raise ValueError(f"damp = {damp}: H + damp * mean(diag H) * I is not positive definite; use damp > 0")
    u = torch.linalg.cholesky(torch.cholesky_inverse(chol), upper=True)   # H^-1 = UᵀU
    work = w.detach().to(torch.float32).double().clone()
    codes = torch.empty((out_f, in_f), dtype=torch.int64, device=w.device)
    scales = torch.empty((out_f, in_f // group), dtype=torch.float32, device=w.device)
    zeros = torch.empty((out_f, in_f // group), dtype=torch.int64, device=w.device)
    for j in range(in_f):
        g = j // group
        if j % group == 0:                          # a group starts: its parameters from W now
            scales[:, g], zeros[:, g] = group_params(work[:, j:j + group], bits, symmetric)
        s, z = scales[:, g], zeros[:, g]
        codes[:, j] = quantize_column(work[:, j], s, z, bits)
        err = (work[:, j] - (codes[:, j] - z).double() * s.double()) / u[j, j]
        work[:, j + 1:] -= err[:, None] * u[j, j + 1:][None, :]
    return codes.to(torch.uint8), scales, zeros.to(torch.uint8)


# -------------------------------------------------------------------------------------- W4A16
def check_w4a16_inputs(x, qweight, scales, zeros) -> int:
    """x floating (..., in_features); qweight uint8 (out_features, in_features / 2) packed by
    :func:`pack_int4`; scales/zeros as for :func:`dequantize`; one device. Returns the group size."""
    check_tensor("x", x, dtypes=FLOAT_DTYPES)
    check_tensor("qweight", qweight, ndim=2, dims="out_features, in_features / 2", dtypes=CODE_DTYPES)
    if x.dim() < 1:
        raise ValueError("x must have rank >= 1 (..., in_features)")
    if qweight.device != x.device:
        raise ValueError(f"qweight must be on x's device {x.device}, got {qweight.device}")
    if x.shape[-1] != 2 * qweight.shape[1]:
        raise ValueError(f"x's in_features ({x.shape[-1]}) must be twice qweight's packed columns "
                         f"({qweight.shape[1]}): in_features / 2 bytes per row")
    check_scales_zeros(scales, zeros, qweight.shape[0], x.device, "x")
    return check_groups(scales.shape[1], x.shape[-1], "x")


def w4a16_matmul(x, qweight, scales, zeros):
    """``y = x ŵᵀ``: x (..., in_features) float16/bfloat16 (any float dtype), qweight uint8
    (out_features, in_features / 2) (:func:`pack_int4` of the codes), scales floating and zeros
    uint8 (out_features, groups). Returns (..., out_features) in x's dtype.

    The reference: dequantise (float32, float64 for float64 x), round ŵ to x's dtype, matmul.
    """
    check_w4a16_inputs(x, qweight, scales, zeros)
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    w_hat = dequantize(unpack_int4(qweight), scales.to(wide), zeros)
    return x @ w_hat.to(x.dtype).T
