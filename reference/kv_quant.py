"""KV-cache quantisation: an FP8 (E4M3) or INT8 cache with per-token-head scales (course 05.06).

Decode reads the whole KV cache every step (03.06-03.08), so at long context and large batch the
cache is what decode is waiting for. Storing it in one byte per element instead of two halves the
bytes each step must read (and doubles the tokens that fit): "the largest win available at long
context and large batch, because the cache is what decode is actually reading" (05.06).

Formats (the storage dtype ``dtype`` of the codes):

    torch.float8_e4m3fn   FP8 E4M3 ("fn": no infinities, max 448): 1 sign, 4 exponent (bias 7),
                          3 mantissa bits; normals 2^-6 .. 448, subnormals k * 2^-9
    torch.int8            symmetric INT8: integers -127 .. 127 (-128 unused, so the grid is
                          symmetric and 0 is a code)

Scales: one float32 scale per (token, KV head) -- the *last* axis (head_dim) shares it:

    s = max(absmax(x) / QMAX, 2^-126)            QMAX = 448 (E4M3) or 127 (INT8)
    code = RN(x / s)                               x / s computed in float32; RN = round to
                                                   nearest, ties to even (torch's float8 cast;
                                                   torch.round for INT8)
    x_hat = code * s                               (dequantise)

``absmax / QMAX`` maps the row's largest magnitude onto the format's largest code, so no code
saturates (|x / s| <= QMAX(1 + 2^-23) rounds to QMAX in both formats). The floor 2^-126 (the
smallest normal float32) keeps ``s`` a normal number: a zero row (absmax 0) gets s = 2^-126 and
codes 0, dequantising to exactly 0 (no 0/0), and a row of tiny values (bf16 keeps float32's
exponent range, down to 1e-40) never divides by a subnormal or zero scale.

Paged layout (the cache of reference/paged_attention.py, with the scales beside it):

    k_cache, v_cache    (num_blocks, block_size, kv_heads, head_dim)   float8_e4m3fn or int8 codes
    k_scale, v_scale    (num_blocks, block_size, kv_heads)             float32
    block_tables        (batch, max_blocks_per_seq), seq_lens (batch,) exactly paged_attention's

The scale pool is parallel to the code pool: position ``j`` of sequence ``b`` has its codes at
``k_cache[blk, slot]`` and its scales at ``k_scale[blk, slot]`` with the same ``blk =
block_tables[b, j // block_size]``, ``slot = j % block_size``: one block table serves both, and
``quantize_kv(k_cache_bf16, dtype)`` of a whole paged cache returns exactly this layout (the scale
of each token-head is its own row's, so quantising a token alone or inside its block gives the
same codes: appending a token never changes another token's codes).

Error bound (derived from the format's step, not tuned; spec_tests/kv_quant/oracles.py computes it
and docs/kv_quant.md gives the derivation in full).

1. One element. With y = x / s, RN moves y by at most half the format's step at y:
       INT8     |code - y| <= 1/2                                      -> |x_hat - x| <= s / 2
       E4M3     normals (|y| >= 2^-6, 3 mantissa bits): <= 2^-4 |y|    -> <= 2^-4 |x|
                subnormals (|y| < 2^-6, step 2^-9):     <= 2^-10       -> <= 2^-10 s
   i.e. u(x) = s * h(|x| / s) with h(y) = 1/2 (INT8) or max(2^-4 y, 2^-10) (E4M3), plus the
   float32 arithmetic of x / s (relative 2^-24), covered generously by adding 2^-20 (|x| + s).
2. Logits. z_j = tau q . k_j with tau the softmax scale: |z_hat_j - z_j| <= tau sum_d |q_d| u(k_jd)
   =: eps_j (Hoelder; with one scale per row, <= tau ||q||_1 s_j / 2 for INT8). eps = max_j eps_j.
3. Softmax. Shifting all logits by a constant changes nothing, so only the spread of the logit
   errors counts: p_hat_j / p_j lies in [e^-2eps, e^2eps], and since both sum to 1,
   ||p_hat - p||_1 <= 2 tanh(eps)   (the worst case splits the mass between keys moved up and down).
4. Output. o = sum_j p_j v_j, so for each dim d (and any constant c, since sum_j (p_hat_j - p_j) = 0)
       o_hat_d - o_d = sum_j p_hat_j (v_hat_jd - v_jd) + sum_j (p_hat_j - p_j)(v_jd - c)
       |o_hat_d - o_d| <= max_j u(v_jd) + tanh(eps) * (max_j v_jd - min_j v_jd)
   over the keys the query sees. That is the bound of the exact (float64) attention over the
   dequantised cache against the exact attention over the original one; a low-precision run adds
   its own rounding, judged by the tolerance rule against the float64 attention over the
   dequantised cache.

KV bytes: ``quantized_kv_bytes`` is reference/kv_bytes.py's formula for the codes plus the scales,
which are a cache of head_dim 1 in float32:

    2 x layers x kv_heads x seq_len x batch x (head_dim x code_bytes + 4)

(head_dim 128, FP8: 132 bytes per token-head against bf16's 256, 1.94x fewer.) A float dtype
(float16, bfloat16, float32, float64) has no scales: kv_bytes's formula as it is.

Choices (a correct implementation may differ; checked at the token-exact level only): the
scale's float32 value, the floor 2^-126, dividing by s (not multiplying by 1/s) and dequantising
in float32 (float64 for a float64 target) before rounding to the target dtype.
"""
from __future__ import annotations

import torch

from reference._checks import FLOAT_DTYPES, check_tensor, compute_dtype
from reference.kv_bytes import kv_cache_bytes
from reference.paged_attention import paged_attention

__all__ = ["quantize_kv", "dequantize_kv", "quantized_paged_attention", "quantized_kv_bytes"]
__optional__ = []

QMAX = {torch.float8_e4m3fn: 448.0, torch.int8: 127.0}   # the largest code of each storage format
CODE_DTYPES = tuple(QMAX)
SCALE_DTYPE = torch.float32
SCALE_MIN = 2.0 ** -126                                   # the smallest normal float32


def check_code_dtype(name: str, dtype) -> torch.dtype:
    """``dtype`` is a storage format of the cache: float8_e4m3fn or int8 (TypeError naming ``name``)."""
    if dtype not in CODE_DTYPES:
        raise TypeError(f"{name} must be torch.float8_e4m3fn or torch.int8, got {dtype!r}")
    return dtype


def quantize_kv(x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise ``x`` (..., head_dim) with one scale per row of its last axis (module doc).

    Returns ``(codes, scale)``: ``codes`` has x's shape and ``dtype`` (float8_e4m3fn or int8),
    ``scale`` is x's shape without the last axis, float32, ``scale = max(absmax / QMAX, 2^-126)``.
    For a K or V of shape (tokens, kv_heads, head_dim), or a whole paged cache (num_blocks,
    block_size, kv_heads, head_dim), that is one scale per token and KV head, and a row's codes
    depend on that row alone. A zero row gets codes 0 (and scale 2^-126); zero rows
    (x.shape[:-1] containing 0) are legal and give empty results. ``x`` is not modified.

    Bad input: ``x`` not a floating tensor (float16/bfloat16/float32/float64) -> TypeError; rank 0,
    head_dim 0 or a non-finite value (NaN or +-inf: it has no scale) -> ValueError naming ``x``;
    ``dtype`` not float8_e4m3fn or int8 -> TypeError naming ``dtype``.
    """
    check_tensor("x", x, dtypes=FLOAT_DTYPES)
    check_code_dtype("dtype", dtype)
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"x must have a last axis (head_dim) of length >= 1, got shape {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x must be finite: a NaN or infinite value has no scale")
    x32 = x.to(torch.float32)
    absmax = x32.abs().amax(dim=-1)
    scale = torch.clamp(absmax / QMAX[dtype], min=SCALE_MIN)
    y = x32 / scale[..., None]                  # |y| <= QMAX (1 + 2^-23): never saturates
    codes = y.to(dtype) if dtype.is_floating_point else torch.round(y).to(dtype)
    return codes, scale


def dequantize_kv(codes: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``codes * scale[..., None]`` in ``dtype``: the product in float32 (float64 for a float64
    ``dtype``), then rounded to ``dtype`` (float16/bfloat16/float32/float64).

    ``codes`` (..., head_dim) float8_e4m3fn or int8, ``scale`` codes' shape without the last axis.
    Every code converts to float32 exactly. A NaN code or scale (a slot never written) gives NaN.
    Bad input: ``codes`` not a tensor of a code dtype, ``scale`` not a float32 tensor, ``dtype``
    not a float dtype -> TypeError naming it; rank 0 codes or ``scale.shape != codes.shape[:-1]``
    -> ValueError naming ``scale`` (or ``codes``).
    """
    check_tensor("codes", codes)
    check_code_dtype("codes", codes.dtype)
    check_tensor("scale", scale, dtypes=(SCALE_DTYPE,))
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    if codes.dim() == 0:
        raise ValueError("codes must have a last axis (head_dim), got a scalar")
    if scale.shape != codes.shape[:-1]:
        raise ValueError(f"scale must have codes' shape without head_dim {tuple(codes.shape[:-1])}, "
                         f"got {tuple(scale.shape)}")
    if scale.device != codes.device:
        raise ValueError(f"scale must be on codes' device {codes.device}, got {scale.device}")
    work = compute_dtype(dtype)
    return (codes.to(work) * scale.to(work)[..., None]).to(dtype)


def check_quantized_cache(q, k_cache, v_cache, k_scale, v_scale) -> None:
    """The checks the quantised cache adds to paged attention's (TypeError/ValueError naming the
    argument): q floating; caches of one code dtype and one shape (rank 4); scales float32 of the
    caches' shape without head_dim, on q's device. The rest (q's shape, tables, lengths, window,
    scale) is reference.paged_attention.check_paged_attention_inputs'."""
    check_tensor("q", q, dtypes=FLOAT_DTYPES)
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_tensor(name, t, ndim=4, dims="num_blocks, block_size, kv_heads, head_dim")
        check_code_dtype(name, t.dtype)
    if v_cache.dtype != k_cache.dtype:
        raise TypeError(f"v_cache must have k_cache's dtype {k_cache.dtype}, got {v_cache.dtype}")
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"v_cache must have k_cache's shape {tuple(k_cache.shape)}, got {tuple(v_cache.shape)}")
    for name, t in (("k_scale", k_scale), ("v_scale", v_scale)):
        check_tensor(name, t, ndim=3, dims="num_blocks, block_size, kv_heads", dtypes=(SCALE_DTYPE,))
        if t.shape != k_cache.shape[:-1]:
            raise ValueError(f"{name} must be (num_blocks, block_size, kv_heads) = {tuple(k_cache.shape[:-1])} "
                             f"(the caches' shape without head_dim), got {tuple(t.shape)}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("k_scale", k_scale), ("v_scale", v_scale)):
        if t.device != q.device:
            raise ValueError(f"{name} must be on q's device {q.device}, got {t.device}")


def quantized_paged_attention(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens, *,
                              scale: float | None = None, window: int | None = None, return_lse: bool = False):
    """Paged attention (reference/paged_attention.py: q, tables, lengths, causality, window, GQA,
    edge cases, outputs) over a quantised cache: codes ``k_cache``/``v_cache`` (num_blocks,
    block_size, kv_heads, head_dim) float8_e4m3fn or int8 and float32 scales ``k_scale``/``v_scale``
    (num_blocks, block_size, kv_heads), read through the same block table (module doc).

    Equal to ``paged_attention(q, dequantize_kv(k_cache, k_scale, q.dtype), dequantize_kv(v_cache,
    v_scale, q.dtype), ...)``; within the module doc's bound of attention over the unquantised
    cache. Slots no query can see (codes or scales) may hold anything, NaN included. ``scale`` is
    the softmax scale (None: 1/sqrt(head_dim)), not a quantisation scale.

    Bad input: paged_attention's, with the caches' dtype float8_e4m3fn or int8 (both the same)
    instead of q's, and the scales float32 of the caches' shape without head_dim (check_quantized_cache).
    """
    check_quantized_cache(q, k_cache, v_cache, k_scale, v_scale)
    k = dequantize_kv(k_cache, k_scale, q.dtype)
    v = dequantize_kv(v_cache, v_scale, q.dtype)
    return paged_attention(q, k, v, block_tables, seq_lens, scale=scale, window=window, return_lse=return_lse)


def quantized_kv_bytes(*, layers: int, kv_heads: int, head_dim: int, seq_len: int, batch: int = 1,
                       dtype: torch.dtype = torch.float8_e4m3fn) -> int:
    """Bytes of a KV cache stored in ``dtype``: for a code dtype (float8_e4m3fn, int8) the codes
    plus the float32 scales, ``2 x layers x kv_heads x seq_len x batch x (head_dim x 1 + 4)``; for
    a float dtype (float16/bfloat16/float32/float64) kv_bytes' formula, no scales. An exact int.

    Defaults: ``batch=1``, ``dtype=torch.float8_e4m3fn``. seq_len or batch 0 gives 0. Bad input is
    reference.kv_bytes.kv_cache_bytes' (sizes: TypeError for a non-int, ValueError below 1, or
    below 0 for seq_len and batch, naming the argument), and a ``dtype`` that is neither a code
    dtype nor a float dtype -> TypeError naming ``dtype``.
    """
    if dtype not in CODE_DTYPES + FLOAT_DTYPES:
        raise TypeError(f"dtype must be float8_e4m3fn, int8 or a float dtype, got {dtype!r}")
    shape = dict(layers=layers, kv_heads=kv_heads, seq_len=seq_len, batch=batch)
    codes = kv_cache_bytes(head_dim=head_dim, dtype=dtype, **shape)
    if dtype not in CODE_DTYPES:
        return codes
    return codes + kv_cache_bytes(head_dim=1, dtype=SCALE_DTYPE, **shape)
