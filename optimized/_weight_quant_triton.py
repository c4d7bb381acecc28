"""The W4A16 Triton kernels of optimized/weight_quant.py (kernels only; the module doc there).

``_w4a16_kernel`` -- one program owns an output tile (BLOCK_M rows of x, BLOCK_N output features)
and one stretch of K (split-K). Per K tile of BLOCK_K columns (BLOCK_K divides the group size, so
the tile has ONE scale and ONE zero point per output feature):

* it loads the packed weights as they lie in memory, ``[BLOCK_N, BLOCK_K / 2]`` bytes (contiguous,
  vectorised loads: no byte is read twice), and splits each byte into its low nibble (the code of
  the even column 2i) and its high nibble (the odd column 2i + 1);
* GEMV-style it loads x's even and odd columns of the tile (two ``[BLOCK_M, BLOCK_K / 2]`` strided
  loads), so the unpacked halves need no interleaving: ``x wᵀ = x_even w_lowᵀ + x_odd w_highᵀ``;
* ``DOT``: puts the halves back in column order (``tl.interleave``), dequantises in registers,
  ``((u − z) · s)`` in float32 rounded to x's dtype (the reference's ŵ), loads x's tile
  contiguously and accumulates one ``tl.dot`` in float32 (tensor cores);
  otherwise (GEMV-style, a few rows of x): sums ``x · u`` on the CUDA cores in float32 and applies
  the tile's scale and zero point once per output, ``s · (Σ x u − z Σ x)``, instead of per weight.
* with ``SPLIT`` the float32 partial tile goes to a workspace ``[split, M, N]`` and
  ``_reduce_kernel`` adds the splits in order (deterministic) and writes x's dtype.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _w4a16_kernel(X, QW, S, Z, OUT, PART, M, N, K, k_per_split,
                  sxm, sxk, sqn, sqk, ssn, ssg, szn, szg, som, son,
                  GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, DOT: tl.constexpr, SPLIT: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_j = tl.arange(0, BLOCK_K // 2)               # byte j of the tile: columns 2j and 2j + 1
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    x_rows = X + offs_m.to(tl.int64)[:, None] * sxm
    q_rows = QW + offs_n.to(tl.int64)[:, None] * sqn
    s_rows = S + offs_n.to(tl.int64) * ssn
    z_rows = Z + offs_n.to(tl.int64) * szn

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    k_start = pid_k * k_per_split
    k_stop = tl.minimum(k_start + k_per_split, K)
    for k0 in range(k_start, k_stop, BLOCK_K):
        packed = tl.load(q_rows + (k0 // 2 + offs_j)[None, :] * sqk, mask=n_ok[:, None], other=0)
        low = (packed & 0xF).to(tl.float32)           # codes of columns k0 + 2j
        high = (packed >> 4).to(tl.float32)           # codes of columns k0 + 2j + 1
        g = k0 // GROUP
        s = tl.load(s_rows + g * ssg, mask=n_ok, other=0.0).to(tl.float32)
        z = tl.load(z_rows + g * szg, mask=n_ok, other=0).to(tl.float32)
        if DOT:   # the tile's columns back in order (low, high, low, ...), one contiguous x tile, one dot
            w = ((tl.interleave(low, high) - z[:, None]) * s[:, None]).to(X.dtype.element_ty)
            x = tl.load(x_rows + (k0 + offs_k)[None, :] * sxk, mask=m_ok[:, None], other=0.0)
            acc = tl.dot(x, tl.trans(w), acc)
        else:
            cols = k0 + 2 * offs_j
            x_even = tl.load(x_rows + cols[None, :] * sxk, mask=m_ok[:, None], other=0.0)
            x_odd = tl.load(x_rows + (cols + 1)[None, :] * sxk, mask=m_ok[:, None], other=0.0)
            xe = x_even.to(tl.float32)
            xo = x_odd.to(tl.float32)
            dot = tl.sum(xe[:, None, :] * low[None, :, :] + xo[:, None, :] * high[None, :, :], axis=2)
            x_sum = tl.sum(xe + xo, axis=1)
            acc += s[None, :] * (dot - z[None, :] * x_sum[:, None])

    tile_ok = m_ok[:, None] & n_ok[None, :]
    if SPLIT:
        part = PART + (pid_k.to(tl.int64) * M + offs_m.to(tl.int64)[:, None]) * N + offs_n[None, :]
        tl.store(part, acc, mask=tile_ok)
    else:
        out = OUT + offs_m.to(tl.int64)[:, None] * som + offs_n.to(tl.int64)[None, :] * son
        tl.store(out, acc.to(OUT.dtype.element_ty), mask=tile_ok)


@triton.jit
def _reduce_kernel(PART, OUT, total, split, BLOCK: tl.constexpr):
    """OUT[i] = sum over s of PART[s, i], s in order (OUT contiguous (M, N), total = M * N)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < total
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in range(0, split):
        acc += tl.load(PART + s * total + offs, mask=ok, other=0.0)
    tl.store(OUT + offs, acc.to(OUT.dtype.element_ty), mask=ok)
