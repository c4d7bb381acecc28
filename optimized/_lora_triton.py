"""The BGMV Triton kernels of optimized/lora.py (kernels only; the module doc there).

Punica's batched gather matrix-vector products: every row of the batch gathers its OWN adapter by
its id (no sorting, no padding, no host sync), so rows of different adapters, and rows of none
(id -1, masked out here), share one launch. A program owns BLOCK_M rows:

* ``_shrink_kernel`` -- program (rows): ``v[row] = x[row] A[id[row]]^T``, the r values of each row
  summed over d_in in BLOCK_K steps in float32 (elementwise products of the gathered
  ``[BLOCK_M, BLOCK_R, BLOCK_K]`` adapter tile with the rows' x, summed over K: matrix-vector
  products, the decode batch's shape);
* ``_expand_kernel`` -- program (rows, BLOCK_N outputs): ``y[row, n] = base[row, n] + scaling *
  sum_r B[id[row], n, r] v[row, r]`` in float32, rounded to y's dtype; reads the base product
  and writes y in place, rows of id -1 left as they are (the base alone).
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _shrink_kernel(X, A, IDS, V, batch, d_in, rank, sxm, sxk, sae, sar, sak, svm,
                   BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < batch
    adapter = tl.load(IDS + rows, mask=row_ok, other=-1).to(tl.int64)
    use = row_ok & (adapter >= 0)
    offs_r = tl.arange(0, BLOCK_R)
    r_ok = offs_r < rank
    offs_k = tl.arange(0, BLOCK_K)
    a_base = A + tl.where(use, adapter, 0)[:, None, None] * sae + offs_r[None, :, None] * sar
    x_rows = X + rows.to(tl.int64)[:, None] * sxm
    acc = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)
    for k0 in range(0, d_in, BLOCK_K):
        k_ok = (k0 + offs_k) < d_in
        xv = tl.load(x_rows + (k0 + offs_k)[None, :] * sxk, mask=use[:, None] & k_ok[None, :], other=0.0)
        a = tl.load(a_base + (k0 + offs_k)[None, None, :] * sak,
                    mask=use[:, None, None] & r_ok[None, :, None] & k_ok[None, None, :], other=0.0)
        acc += tl.sum(a.to(tl.float32) * xv.to(tl.float32)[:, None, :], axis=2)
    tl.store(V + rows.to(tl.int64)[:, None] * svm + offs_r[None, :], acc, mask=use[:, None] & r_ok[None, :])


@triton.jit
def _expand_kernel(V, B, IDS, Y, batch, d_out, rank, scaling, svm, sbe, sbn, sbr, sym, syn,
                   BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < batch
    adapter = tl.load(IDS + rows, mask=row_ok, other=-1).to(tl.int64)
    use = row_ok & (adapter >= 0)
    offs_r = tl.arange(0, BLOCK_R)
    r_ok = offs_r < rank
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < d_out
    v = tl.load(V + rows.to(tl.int64)[:, None] * svm + offs_r[None, :], mask=use[:, None] & r_ok[None, :], other=0.0)
    b = tl.load(B + tl.where(use, adapter, 0)[:, None, None] * sbe + offs_n[None, :, None] * sbn
                + offs_r[None, None, :] * sbr,
                mask=use[:, None, None] & n_ok[None, :, None] & r_ok[None, None, :], other=0.0)
    delta = tl.sum(b.to(tl.float32) * v[:, None, :], axis=2)
    y_ptr = Y + rows.to(tl.int64)[:, None] * sym + offs_n[None, :] * syn
    tile = use[:, None] & n_ok[None, :]
    base = tl.load(y_ptr, mask=tile, other=0.0).to(tl.float32)
    tl.store(y_ptr, (base + scaling * delta).to(Y.dtype.element_ty), mask=tile)
