"""The grouped-matmul Triton kernels of optimized/moe.py (kernels only; the module doc there).

The rows (one per (token, choice) assignment, or per received token under expert parallelism) are
sorted by expert and each expert's run is padded to a whole number of BLOCK_M-row tiles
(``sorted_rows``: a row index, or ``n_rows`` for padding; ``tile_expert``: each tile's expert,
``num_experts`` past the last tile), so that every tile belongs to ONE expert and one launch
covers all experts (vLLM's fused_moe layout). A program owns one tile of rows and BLOCK_N output
columns:

* ``_gate_up_kernel``: gathers its rows of x (row r reads token ``r // TOP_K``), multiplies them by
  the tile's expert's ``w_gate`` and ``w_up`` (two float32 accumulators, one pass over d), and
  stores ``h = silu(a) * b`` rounded to x's dtype at the rows' own indices;
* ``_down_kernel``: multiplies the rows of h by the expert's ``w_down``, optionally by each row's
  gate (float32), and stores the float32 result at the rows' indices (the combine over a token's
  choices is a sum of those rows).
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _gate_up_kernel(X, SORTED, TILE_EXPERT, WG, WU, H, n_rows, num_experts, d, f, top_k,
                    sxm, sxk, swe, swn, swk, shm, shn,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e = tl.load(TILE_EXPERT + pid_m)
    if e < num_experts:
        rows = tl.load(SORTED + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
        row_ok = rows < n_rows
        tokens = tl.where(row_ok, rows // top_k, 0).to(tl.int64)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        n_ok = offs_n < f
        offs_k = tl.arange(0, BLOCK_K)
        x_rows = X + tokens[:, None] * sxm
        w_off = e.to(tl.int64) * swe + offs_n.to(tl.int64)[:, None] * swn
        acc_g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, d, BLOCK_K):
            k_ok = (k0 + offs_k) < d
            xt = tl.load(x_rows + (k0 + offs_k)[None, :] * sxk, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            w_mask = n_ok[:, None] & k_ok[None, :]
            g = tl.load(WG + w_off + (k0 + offs_k)[None, :] * swk, mask=w_mask, other=0.0)
            u = tl.load(WU + w_off + (k0 + offs_k)[None, :] * swk, mask=w_mask, other=0.0)
            acc_g = tl.dot(xt, tl.trans(g), acc_g, input_precision="ieee")
            acc_u = tl.dot(xt, tl.trans(u), acc_u, input_precision="ieee")
        h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
        out = H + rows.to(tl.int64)[:, None] * shm + offs_n[None, :] * shn
        tl.store(out, h.to(H.dtype.element_ty), mask=row_ok[:, None] & n_ok[None, :])


@triton.jit
def _down_kernel(H, SORTED, TILE_EXPERT, WD, GATES, OUT, n_rows, num_experts, d, f,
                 shm, shn, swe, swn, swk, som, son,
                 MUL_GATE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e = tl.load(TILE_EXPERT + pid_m)
    if e < num_experts:
        rows = tl.load(SORTED + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
        row_ok = rows < n_rows
        safe = tl.where(row_ok, rows, 0).to(tl.int64)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        n_ok = offs_n < d
        offs_k = tl.arange(0, BLOCK_K)
        h_rows = H + safe[:, None] * shm
        w_off = e.to(tl.int64) * swe + offs_n.to(tl.int64)[:, None] * swn
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, f, BLOCK_K):
            k_ok = (k0 + offs_k) < f
            ht = tl.load(h_rows + (k0 + offs_k)[None, :] * shn, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            w = tl.load(WD + w_off + (k0 + offs_k)[None, :] * swk, mask=n_ok[:, None] & k_ok[None, :], other=0.0)
            acc = tl.dot(ht, tl.trans(w), acc, input_precision="ieee")
        if MUL_GATE:
            gate = tl.load(GATES + safe, mask=row_ok, other=0.0)
            acc = acc * gate[:, None]
        out = OUT + safe[:, None] * som + offs_n[None, :] * son
        tl.store(out, acc, mask=row_ok[:, None] & n_ok[None, :])
