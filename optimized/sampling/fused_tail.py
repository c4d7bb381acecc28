"""The fused tail of the torch schedule's fast path (optimized/sampling/torch_path.py), in Triton:
one program per row does temperature, the tie check at the k-th place, top-p on the top-k
survivors, min-p and the inverse-CDF draw in token-id order over the row's <= k candidates (about
35 small torch ops otherwise; on a GPU their launches cost more than the topk itself)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def tail_kernel(vals_ptr, ids_ptr, temperature_ptr, top_k_ptr, top_p_ptr, min_p_ptr, uniform_ptr, token_ptr,
                status_ptr, n_candidates, stride_v, stride_i, WIDTH: tl.constexpr):
    """WIDTH: the candidates padded to a power of 2."""
    row = tl.program_id(0)
    offs = tl.arange(0, WIDTH)
    inb = offs < n_candidates
    v = tl.load(vals_ptr + row * stride_v + offs, mask=inb, other=float("-inf"))
    ix = tl.load(ids_ptr + row * stride_i + offs, mask=inb, other=0)
    m = tl.load(vals_ptr + row * stride_v)           # the row max (topk sorts NaN first)
    temperature = tl.load(temperature_ptr + row)
    k = tl.load(top_k_ptr + row)
    p = tl.load(top_p_ptr + row)
    min_p = tl.load(min_p_ptr + row)
    u = tl.load(uniform_ptr + row)

    z = (v - m) / temperature
    z_kth = tl.sum(tl.where(offs == k - 1, z, 0.0), axis=0)
    z_next = tl.sum(tl.where(offs == k, z, 0.0), axis=0)
    bad = tl.where(m != m, 1, tl.where(m == float("inf"), 2, tl.where(m == float("-inf"), 3, 0)))
    status = tl.where(bad != 0, bad, tl.where(z_kth == z_next, 4, 0))

    cand = offs < k
    e = tl.where(cand, tl.exp(z), 0.0)
    q = e / tl.sum(e, axis=0)
    above = tl.cumsum(q, axis=0) - q
    p_eff = tl.where(p >= 1.0, float("inf"), p)            # top_p = 1 disables
    kept = cand & (above < p_eff)
    thr = tl.min(tl.where(kept, z, float("inf")), axis=0)
    keep = cand & (z >= thr) & (e >= min_p)
    w = tl.where(keep, e, 0.0)

    # inverse CDF in token-id order: C_i = sum of w_j over candidates with id_j <= id_i
    before = ix[None, :] <= ix[:, None]
    c = tl.sum(tl.where(before, w[None, :], 0.0), axis=1)
    target = u.to(tl.float32) * tl.sum(w, axis=0)
    big = 9223372036854775807
    first = tl.min(tl.where((c > target) & cand, ix, big), axis=0)
    last = tl.max(tl.where(w > 0, ix, -1), axis=0)
    tok = tl.where(first == big, last, first)
    tl.store(token_ptr + row, tok)
    tl.store(status_ptr + row, status)


def fused_tail(vals, ids, temperature, top_k, top_p, min_p, u):
    """vals/ids: (batch, n_candidates) from topk (sorted descending, float32); per-row params
    (batch,); u float64 (batch,). Returns (tokens int64, status int32): 0 fine, 1 NaN, 2 +inf,
    3 all -inf, 4 a tie crosses the k-th place (the caller recomputes such rows on the general
    path)."""
    b, n_candidates = vals.shape
    vals, ids = vals.contiguous(), ids.contiguous()
    tok = torch.empty(b, dtype=torch.int64, device=vals.device)
    status = torch.empty(b, dtype=torch.int32, device=vals.device)
    if b == 0:
        return tok, status
    width = max(16, triton.next_power_of_2(n_candidates))
    tail_kernel[(b,)](vals, ids, temperature.contiguous(), top_k.contiguous(), top_p.contiguous(),
                      min_p.contiguous(), u.contiguous(), tok, status, n_candidates, vals.stride(0), ids.stride(0),
                      WIDTH=width, num_warps=4 if width <= 64 else 8)
    return tok, status
