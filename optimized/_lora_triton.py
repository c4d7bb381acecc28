"""The BGMV Triton kernels of optimized/lora.py (kernels only; the module doc there).

Punica's batched gather matrix-vector products: every row of the batch gathers its OWN adapter by
its id (no sorting, no padding, no host sync), so rows of different adapters, and rows of none
(id -1, masked out here), share one launch. A program owns BLOCK_M rows:

* ``_shrink_kernel`` -- program (rows, split s of SPLIT_K): split-K over d_in, so that a small batch
  still fills the GPU. Split s owns columns ``[s k_per_split, (s + 1) k_per_split)`` of d_in
  (``k_per_split`` a multiple of BLOCK_K, so the splits are whole BLOCK_K steps) and writes the
  float32 partial ``v_s[row] = x[row, cols] A[id[row], :, cols]^T`` of its columns to
  ``V_PART[s, row, :]`` (elementwise products of the gathered ``[BLOCK_M, BLOCK_R, BLOCK_K]``
  adapter tile with the rows' x, summed over K: matrix-vector products, the decode batch's shape).
  It writes every one of the BLOCK_R values of every row of the batch, zeros for the padded r
  (r >= rank), for rows of id -1 and for an empty split (d_in = 0), so the expand never reads
  memory that no program wrote (the workspace is a ``torch.empty``); no atomics.
* ``_expand_kernel`` -- program (rows, BLOCK_N outputs): ``v[row] = v_0[row] + v_1[row] + ... +
  v_{SPLIT_K-1}[row]``, summed in that fixed order (so the result is deterministic, the same bits
  on every run of one launch configuration; the loop over the splits is unrolled, its loads
  independent of each other), then ``y[row, n] = base[row, n] + scaling * sum_r
  B[id[row], n, r] v[row, r]`` in float32, rounded to y's dtype; reads the base product and writes
  y in place, rows of id -1 left as they are (the base alone).
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _shrink_kernel(X, A, IDS, V_PART, batch, d_in, rank, k_per_split, sxm, sxk, sae, sar, sak, svs, svm,
                   BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    pid_k = tl.program_id(1)
    row_ok = rows < batch
    adapter = tl.load(IDS + rows, mask=row_ok, other=-1).to(tl.int64)
    use = row_ok & (adapter >= 0)
    offs_r = tl.arange(0, BLOCK_R)
    r_ok = offs_r < rank
    offs_k = tl.arange(0, BLOCK_K)
    a_base = A + tl.where(use, adapter, 0)[:, None, None] * sae + offs_r[None, :, None] * sar
    x_rows = X + rows.to(tl.int64)[:, None] * sxm
    acc = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)
    k_start = pid_k * k_per_split
    k_stop = tl.minimum(k_start + k_per_split, d_in)
    for k0 in range(k_start, k_stop, BLOCK_K):
        k_ok = (k0 + offs_k) < k_stop
        xv = tl.load(x_rows + (k0 + offs_k)[None, :] * sxk, mask=use[:, None] & k_ok[None, :], other=0.0)
        a = tl.load(a_base + (k0 + offs_k)[None, None, :] * sak,
                    mask=use[:, None, None] & r_ok[None, :, None] & k_ok[None, None, :], other=0.0)
        acc += tl.sum(a.to(tl.float32) * xv.to(tl.float32)[:, None, :], axis=2)
    # every row of the batch, all BLOCK_R values (zeros where masked above): the whole workspace
    v_ptr = V_PART + pid_k.to(tl.int64) * svs + rows.to(tl.int64)[:, None] * svm + offs_r[None, :]
    tl.store(v_ptr, acc, mask=row_ok[:, None])


@triton.jit
def _expand_kernel(V_PART, B, IDS, Y, batch, d_out, rank, scaling, svs, svm, sbe, sbn, sbr, sym, syn,
                   BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < batch
    adapter = tl.load(IDS + rows, mask=row_ok, other=-1).to(tl.int64)
    use = row_ok & (adapter >= 0)
    offs_r = tl.arange(0, BLOCK_R)
    r_ok = offs_r < rank
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < d_out
    v_ptr = V_PART + rows.to(tl.int64)[:, None] * svm + offs_r[None, :]
    v_ok = use[:, None] & r_ok[None, :]
    v = tl.load(v_ptr, mask=v_ok, other=0.0)
    for _ in tl.static_range(1, SPLIT_K):   # the partials added in the fixed order 0, 1, ..., SPLIT_K - 1
        v_ptr += svs
        v += tl.load(v_ptr, mask=v_ok, other=0.0)
    b = tl.load(B + tl.where(use, adapter, 0)[:, None, None] * sbe + offs_n[None, :, None] * sbn
                + offs_r[None, None, :] * sbr,
                mask=use[:, None, None] & n_ok[None, :, None] & r_ok[None, None, :], other=0.0)
    delta = tl.sum(b.to(tl.float32) * v[:, None, :], axis=2)
    y_ptr = Y + rows.to(tl.int64)[:, None] * sym + offs_n[None, :] * syn
    tile = use[:, None] & n_ok[None, :]
    base = tl.load(y_ptr, mask=tile, other=0.0).to(tl.float32)
    tl.store(y_ptr, (base + scaling * delta).to(Y.dtype.element_ty), mask=tile)
