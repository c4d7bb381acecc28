"""The fused tail of optimized/sampling.py's fast path, in Triton: one program per row does
temperature, the tie check at the k-th place, top-p on the top-k survivors, min-p and the
inverse-CDF draw in token-id order over the row's <= k candidates (about 35 small torch ops
otherwise; on a GPU their launches cost more than the topk itself)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _tail_kernel(vals_ptr, ids_ptr, temp_ptr, k_ptr, p_ptr, minp_ptr, u_ptr, tok_ptr, status_ptr,
                 kq, stride_v, stride_i, KP: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, KP)
    inb = offs < kq
    v = tl.load(vals_ptr + row * stride_v + offs, mask=inb, other=float("-inf"))
    ix = tl.load(ids_ptr + row * stride_i + offs, mask=inb, other=0)
    m = tl.load(vals_ptr + row * stride_v)           # the row max (topk sorts NaN first)
    temp = tl.load(temp_ptr + row)
    k = tl.load(k_ptr + row)
    p = tl.load(p_ptr + row)
    mp = tl.load(minp_ptr + row)
    u = tl.load(u_ptr + row)

    z = (v - m) / temp
    zk = tl.sum(tl.where(offs == k - 1, z, 0.0), axis=0)
    zn = tl.sum(tl.where(offs == k, z, 0.0), axis=0)
    bad = tl.where(m != m, 1, tl.where(m == float("inf"), 2, tl.where(m == float("-inf"), 3, 0)))
    status = tl.where(bad != 0, bad, tl.where(zk == zn, 4, 0))

    cand = offs < k
    e = tl.where(cand, tl.exp(z), 0.0)
    q = e / tl.sum(e, axis=0)
    above = tl.cumsum(q, axis=0) - q
    p_eff = tl.where(p >= 1.0, float("inf"), p)            # top_p = 1 disables
    kept = cand & (above < p_eff)
    thr = tl.min(tl.where(kept, z, float("inf")), axis=0)
    keep = cand & (z >= thr) & (e >= mp)
    w = tl.where(keep, e, 0.0)

    # inverse CDF in token-id order: C_i = sum of w_j over candidates with id_j <= id_i
    before = ix[None, :] <= ix[:, None]
    c = tl.sum(tl.where(before, w[None, :], 0.0), axis=1)
    target = u.to(tl.float32) * tl.sum(w, axis=0)
    big = 9223372036854775807
    first = tl.min(tl.where((c > target) & cand, ix, big), axis=0)
    last = tl.max(tl.where(w > 0, ix, -1), axis=0)
    tok = tl.where(first == big, last, first)
    tl.store(tok_ptr + row, tok)
    tl.store(status_ptr + row, status)


def fused_tail(vals, ids, temperature, top_k, top_p, min_p, u):
    """vals/ids: (batch, kq) from topk (sorted descending, float32); per-row params (batch,);
    u float64 (batch,). Returns (tokens int64, status int32): 0 fine, 1 NaN, 2 +inf, 3 all -inf,
    4 a tie crosses the k-th place (the caller recomputes such rows on the general path)."""
    b, kq = vals.shape
    vals, ids = vals.contiguous(), ids.contiguous()
    tok = torch.empty(b, dtype=torch.int64, device=vals.device)
    status = torch.empty(b, dtype=torch.int32, device=vals.device)
    if b == 0:
        return tok, status
    kp = max(16, triton.next_power_of_2(kq))
    _tail_kernel[(b,)](vals, ids, temperature.contiguous(), top_k.contiguous(), top_p.contiguous(),
                       min_p.contiguous(), u.contiguous(), tok, status, kq, vals.stride(0), ids.stride(0),
                       KP=kp, num_warps=4 if kp <= 64 else 8)
    return tok, status


# ============================================================================= sort-free sampler
# One program per row streams the row's logits (x, float32, after penalties and bias) a few times;
# nothing is sorted and nothing of size vocab is written. Every filter keeps an upper set of
# z = (x - max x) / T, so a row's kept set is {t : key_t <= K} for one integer K, where
#     key_t = the float32 bits of (0 - z_t)   (z <= 0: key is monotone DEcreasing in z; +0 -> 0,
#                                              -inf -> KEYMAX = 0x7f800000; ties share a key)
# K is found by a pivot search over the integer keys (a bisection with PP pivots per pass):
#     top-k: K_k = the smallest K with #{t : key_t <= K} >= k    (= the k-th largest z; ties kept)
#     top-p: K_p = the smallest K with F(K) >= p * F(K_k), F(K) = sum of exp(z_t) over
#            key_t <= min(K, K_k)  (token t is kept iff the mass strictly above it,
#            F(key_t - 1), is < p * total: key_t <= K_p; whole tie groups, as the contract says)
# Each pass counts/sums the weights at PP sorted pivots inside the current interval [lo, hi] and
# tightens the interval to real keys (the largest key <= the chosen pivot, the smallest key above
# the one before), so it shrinks strictly every pass and ends on an exact key: the threshold is
# exact up to the float32 rounding of the sums (which the contract leaves open), never an
# approximation of the cut. Half the pivots are spaced evenly in the keys (log scale of |z|), half
# in the values |z| (linear): the first handles wide dynamic ranges, the second LLM-like rows.
# Once <= CAP tokens are left in play (top-k: every token with key <= hi; top-p: those in
# [lo, hi], with the mass below lo known) one pass gathers them (z and id, in token-id order) to a
# per-row scratch and the search finishes in registers; with top-k the kept set lies inside the
# gathered tokens, so top-p, min-p and the draw run there too, without touching the row again.
# min-p is elementwise (exp(z) >= min_p). The draw is the contract's inverse CDF in token-id
# order over the kept weights (u: the contract's float64 uniform, rounded to float32 as the
# reference does): on the row, one pass for the total and one scan that stops at the token.
KEYMAX = tl.constexpr(0x7F800000)
BIGKEY = tl.constexpr(0x7FFFFFFF)


@triton.jit
def _zkey(x, m, t):
    z = tl.math.div_rn(x - m, t)          # IEEE division: the same z as torch's (x - m) / T
    key = (0.0 - z).to(tl.int32, bitcast=True)
    return z, key


@triton.jit
def _kept_weight(base, idx, inb, m, t, thr, mp):
    """The draw's weight of the tokens at idx: exp(z) if kept (key <= thr, exp(z) >= min_p), else 0."""
    x = tl.load(base + idx, mask=inb, other=float("-inf"))
    z, key = _zkey(x, m, t)
    e = tl.exp(z)
    return tl.where(inb & (key <= thr) & (e >= mp), e, 0.0)


@triton.jit
def _bad_flags(x, nan_acc, inf_acc, fin_acc, mnf):
    """Running per-lane NaN / +inf flags, finite count and smallest finite value of the row; also
    x with NaN read as -inf (for the max)."""
    isnan = x != x
    fin = (x > float("-inf")) & (x < float("inf"))
    nan_acc = tl.maximum(nan_acc, isnan.to(tl.int32))
    inf_acc = tl.maximum(inf_acc, (x == float("inf")).to(tl.int32))
    fin_acc += fin.to(tl.int32)
    mnf = tl.minimum(mnf, tl.where(fin, x, float("inf")))
    return nan_acc, inf_acc, fin_acc, mnf, tl.where(isnan, float("-inf"), x)


@triton.jit
def _pivots(lo, hi, PP: tl.constexpr):
    """PP sorted pivots in [lo, hi - 1]: even slots evenly spaced in the keys, odd slots evenly
    spaced in the values |z| = bitcast(key)."""
    jj = tl.arange(0, PP)
    frac_i = (jj // 2 + 1).to(tl.int64)
    span = (hi - lo).to(tl.int64)
    kl = (lo.to(tl.int64) + (span * frac_i) // (PP // 2 + 1)).to(tl.int32)
    alo = lo.to(tl.float32, bitcast=True)
    ahi = hi.to(tl.float32, bitcast=True)
    av = alo + (ahi - alo) * (frac_i.to(tl.float32) / (PP // 2 + 1))
    vl = av.to(tl.int32, bitcast=True)
    piv = tl.where(jj % 2 == 0, kl, vl)
    piv = tl.minimum(tl.maximum(piv, lo), hi - 1)
    return tl.sort(piv)


@triton.jit
def _pick(v, jj, j):
    return tl.sum(tl.where(jj == j, v, 0), axis=0)


@triton.jit
def _select_k(base, V, m, t, lo, hi, k, fhi, CAP: tl.constexpr, BLOCK: tl.constexpr, PP: tl.constexpr):
    """The top-k search on the row: the smallest key K in [lo, hi] with #{key <= K} >= k (the
    caller's invariant: #{key <= hi} >= k > #{key < lo}). Returns (lo, hi, fhi): lo == hi == K
    when done; it stops early, lo < hi, once fhi = #{key <= hi} (pass an upper bound in) is
    <= CAP: the caller then gathers those tokens and finishes on them."""
    offs = tl.arange(0, BLOCK)
    jj = tl.arange(0, PP)
    while (lo < hi) & (fhi > CAP):
        piv = _pivots(lo, hi, PP)
        f_acc = tl.zeros([BLOCK, PP], dtype=tl.float32)
        mx_acc = tl.full([BLOCK, PP], -1, dtype=tl.int32)
        mn_acc = tl.full([BLOCK, PP], BIGKEY, dtype=tl.int32)
        for s in range(0, V, BLOCK):
            idx = s + offs
            inb = idx < V
            x = tl.load(base + idx, mask=inb, other=float("-inf"))
            z, key = _zkey(x, m, t)
            key = tl.where(inb, key, BIGKEY)
            le = key[:, None] <= piv[None, :]
            f_acc += le.to(tl.float32)
            mx_acc = tl.maximum(mx_acc, tl.where(le, key[:, None], -1))
            mn_acc = tl.minimum(mn_acc, tl.where(le, BIGKEY, key[:, None]))
        f = tl.sum(f_acc, axis=0)
        amax = tl.max(mx_acc, axis=0)
        amin = tl.min(mn_acc, axis=0)
        jstar = tl.min(tl.where(f >= k, jj, PP), axis=0)
        hi_new = tl.where(jstar < PP, _pick(amax, jj, jstar), hi)
        lo_new = tl.where(jstar > 0, _pick(amin, jj, jstar - 1), lo)
        fhi = tl.where(jstar < PP, _pick(f, jj, jstar), fhi)
        hi = hi_new
        lo = tl.minimum(lo_new, hi_new)
    return lo, hi, fhi


@triton.jit
def _select_p(base, V, m, t, hi, frac, CAP: tl.constexpr, BLOCK: tl.constexpr, PP: tl.constexpr):
    """The top-p search on the row (weights exp(z) over key <= hi, the top-k survivors): like
    _select_k with weights, but it also counts the tokens at each pivot and stops once <= CAP tokens lie
    in [lo, hi]. Returns (lo, hi, mass below lo, total mass or -1 if no pass ran)."""
    offs = tl.arange(0, BLOCK)
    jj = tl.arange(0, PP)
    kcut = hi
    lo = tl.zeros([], dtype=tl.int32)
    cnt_in = V
    mlo = tl.zeros([], dtype=tl.float32)
    total = tl.full([], -1.0, dtype=tl.float32)
    while (lo < hi) & (cnt_in > CAP):
        piv = _pivots(lo, hi, PP)
        f_acc = tl.zeros([BLOCK, PP], dtype=tl.float32)
        c_acc = tl.zeros([BLOCK, PP], dtype=tl.int32)
        mx_acc = tl.full([BLOCK, PP], -1, dtype=tl.int32)
        mn_acc = tl.full([BLOCK, PP], BIGKEY, dtype=tl.int32)
        tot_acc = tl.zeros([BLOCK], dtype=tl.float32)
        bw_acc = tl.zeros([BLOCK], dtype=tl.float32)
        bc_acc = tl.zeros([BLOCK], dtype=tl.int32)
        hc_acc = tl.zeros([BLOCK], dtype=tl.int32)
        for s in range(0, V, BLOCK):
            idx = s + offs
            inb = idx < V
            x = tl.load(base + idx, mask=inb, other=float("-inf"))
            z, key = _zkey(x, m, t)
            key = tl.where(inb, key, BIGKEY)
            w = tl.where(inb & (key <= kcut), tl.exp(z), 0.0)
            tot_acc += w
            below = key < lo
            bw_acc += tl.where(below, w, 0.0)
            bc_acc += below.to(tl.int32)
            hc_acc += (key <= hi).to(tl.int32)
            le = key[:, None] <= piv[None, :]
            f_acc += tl.where(le, w[:, None], 0.0)
            c_acc += le.to(tl.int32)
            mx_acc = tl.maximum(mx_acc, tl.where(le, key[:, None], -1))
            mn_acc = tl.minimum(mn_acc, tl.where(le, BIGKEY, key[:, None]))
        f = tl.sum(f_acc, axis=0)
        c = tl.sum(c_acc, axis=0)
        amax = tl.max(mx_acc, axis=0)
        amin = tl.min(mn_acc, axis=0)
        total = tl.sum(tot_acc, axis=0)
        jstar = tl.min(tl.where(f >= frac * total, jj, PP), axis=0)
        hi_new = tl.where(jstar < PP, _pick(amax, jj, jstar), hi)
        lo_new = tl.where(jstar > 0, _pick(amin, jj, jstar - 1), lo)
        c_hi = tl.where(jstar < PP, _pick(c, jj, jstar), tl.sum(hc_acc, axis=0))
        c_lo = tl.where(jstar > 0, _pick(c, jj, jstar - 1), tl.sum(bc_acc, axis=0))
        mlo = tl.where(jstar > 0, _pick(f, jj, jstar - 1), tl.sum(bw_acc, axis=0))
        cnt_in = c_hi - c_lo
        hi = hi_new
        lo = tl.minimum(lo_new, hi_new)
    return lo, hi, mlo, total


@triton.jit
def _select_regs(key, w, lo, hi, target, PP: tl.constexpr):
    """The search on a block held in registers (the gathered candidates): the smallest key K in
    [lo, hi] with sum{w : key <= K} >= target."""
    jj = tl.arange(0, PP)
    while lo < hi:
        piv = _pivots(lo, hi, PP)
        le = key[:, None] <= piv[None, :]
        f = tl.sum(tl.where(le, w[:, None], 0.0), axis=0)
        amax = tl.max(tl.where(le, key[:, None], -1), axis=0)
        amin = tl.min(tl.where(le, BIGKEY, key[:, None]), axis=0)
        jstar = tl.min(tl.where(f >= target, jj, PP), axis=0)
        hi_new = tl.where(jstar < PP, tl.sum(tl.where(jj == jstar, amax, 0), axis=0), hi)
        lo_new = tl.where(jstar > 0, tl.sum(tl.where(jj == jstar - 1, amin, 0), axis=0), lo)
        hi = hi_new
        lo = tl.minimum(lo_new, hi_new)
    return hi


@triton.jit
def _sort_free_kernel(x_ptr, stride, V, temp_ptr, k_ptr, p_ptr, minp_ptr, u_ptr,
                      tok_ptr, status_ptr, m_ptr, thr_ptr, gz_ptr, gi_ptr,
                      HAS_U: tl.constexpr, BLOCK: tl.constexpr, PP: tl.constexpr,
                      CAP: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * stride
    offs = tl.arange(0, BLOCK)

    # pass 1: max, smallest finite value, NaN / +inf flags, count of finite logits
    mx = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    mnf = tl.full([BLOCK], float("inf"), dtype=tl.float32)
    nan_acc = tl.zeros([BLOCK], dtype=tl.int32)
    inf_acc = tl.zeros([BLOCK], dtype=tl.int32)
    fin_acc = tl.zeros([BLOCK], dtype=tl.int32)
    for s in range(0, V, BLOCK):
        idx = s + offs
        inb = idx < V
        x = tl.load(base + idx, mask=inb, other=float("-inf"))
        nan_acc, inf_acc, fin_acc, mnf, xv = _bad_flags(x, nan_acc, inf_acc, fin_acc, mnf)
        mx = tl.maximum(mx, xv)
    m = tl.max(mx, axis=0)
    xmin = tl.min(mnf, axis=0)
    nfin = tl.sum(fin_acc, axis=0)
    status = tl.where(tl.max(nan_acc, axis=0) > 0, 1,
                      tl.where(tl.max(inf_acc, axis=0) > 0, 2, tl.where(nfin == 0, 3, 0)))
    tl.store(status_ptr + row, status)
    tl.store(m_ptr + row, m)

    temp = tl.load(temp_ptr + row)
    k = tl.load(k_ptr + row)
    p = tl.load(p_ptr + row)
    mp = tl.load(minp_ptr + row)
    thr = tl.full([], KEYMAX, dtype=tl.int32)
    tok = tl.full([], -1, dtype=tl.int64)
    zero = tl.zeros([], dtype=tl.int32)
    if status == 0:
        if temp == 0:                                   # greedy: the first index of the max
            first_acc = tl.full([BLOCK], 2147483647, dtype=tl.int32)
            for s in range(0, V, BLOCK):
                idx = s + offs
                x = tl.load(base + idx, mask=idx < V, other=float("-inf"))
                first_acc = tl.minimum(first_acc, tl.where(x == m, idx, 2147483647))
            tok = tl.min(first_acc, axis=0).to(tl.int64)
            thr = tl.zeros([], dtype=tl.int32)
        else:
            zmin, hi0 = _zkey(xmin, m, temp)            # the largest finite key
            gathered = zero
            if (k > 0) & (k < V):
                if nfin >= k:                           # else -inf tokens are among the top k
                    lo, hi, fhi = _select_k(base, V, m, temp, zero, hi0, k.to(tl.float32),
                                            tl.cast(V, tl.float32), CAP, BLOCK, PP)
                    thr = hi
                    if lo < hi:                         # <= CAP tokens have key <= hi: gather them
                        n = zero                        # (in token-id order) and finish on them
                        for s in range(0, V, BLOCK):
                            idx = s + offs
                            inb = idx < V
                            x = tl.load(base + idx, mask=inb, other=float("-inf"))
                            z, key = _zkey(x, m, temp)
                            sel = inb & (key <= hi)
                            pos = n + tl.cumsum(sel.to(tl.int32), axis=0) - 1
                            tl.store(gz_ptr + row.to(tl.int64) * CAP + pos, z, mask=sel & (pos < CAP))
                            tl.store(gi_ptr + row.to(tl.int64) * CAP + pos, idx, mask=sel & (pos < CAP))
                            n += tl.sum(sel.to(tl.int32), axis=0)
                        tl.debug_barrier()              # the stores above are read by other threads
                        co = tl.arange(0, CAP)
                        valid = co < tl.minimum(n, CAP)
                        gz = tl.load(gz_ptr + row.to(tl.int64) * CAP + co, mask=valid, other=float("-inf"))
                        gi = tl.load(gi_ptr + row.to(tl.int64) * CAP + co, mask=valid, other=0)
                        gkey = tl.where(valid, (0.0 - gz).to(tl.int32, bitcast=True), BIGKEY)
                        thr = _select_regs(gkey, valid.to(tl.float32), lo, hi, k.to(tl.float32), PP)
                        ge = tl.exp(gz)
                        if p < 1.0:
                            wk = tl.where(valid & (gkey <= thr), ge, 0.0)
                            thr = _select_regs(gkey, wk, zero, thr, p * tl.sum(wk, axis=0), PP)
                        if HAS_U:
                            u = tl.load(u_ptr + row).to(tl.float32)
                            w = tl.where(valid & (gkey <= thr) & (ge >= mp), ge, 0.0)
                            c = tl.cumsum(w, axis=0)
                            target = u * tl.sum(w, axis=0)
                            first = tl.min(tl.where(valid & (c > target), gi, 2147483647), axis=0)
                            last = tl.max(tl.where(w > 0, gi, -1), axis=0)
                            tok = tl.where(first < 2147483647, first, last).to(tl.int64)
                        gathered = n
            if (p < 1.0) & (gathered == 0):
                hi = tl.minimum(thr, hi0)
                lo, thr, mlo, total = _select_p(base, V, m, temp, hi, p, CAP, BLOCK, PP)
                if lo < thr:                            # <= CAP tokens in [lo, thr]: gather them
                    n = zero
                    for s in range(0, V, BLOCK):
                        idx = s + offs
                        inb = idx < V
                        x = tl.load(base + idx, mask=inb, other=float("-inf"))
                        z, key = _zkey(x, m, temp)
                        sel = inb & (key >= lo) & (key <= thr)
                        pos = n + tl.cumsum(sel.to(tl.int32), axis=0) - 1
                        tl.store(gz_ptr + row.to(tl.int64) * CAP + pos, z, mask=sel & (pos < CAP))
                        n += tl.sum(sel.to(tl.int32), axis=0)
                    tl.debug_barrier()                  # the stores above are read by other threads
                    co = tl.arange(0, CAP)
                    valid = co < tl.minimum(n, CAP)
                    gz = tl.load(gz_ptr + row.to(tl.int64) * CAP + co, mask=valid, other=float("-inf"))
                    gkey = tl.where(valid, (0.0 - gz).to(tl.int32, bitcast=True), BIGKEY)
                    gw = tl.where(valid, tl.exp(gz), 0.0)
                    total = tl.where(total < 0, mlo + tl.sum(gw, axis=0), total)
                    thr = _select_regs(gkey, gw, lo, thr, p * total - mlo, PP)
            if HAS_U:
                if gathered == 0:
                    u = tl.load(u_ptr + row).to(tl.float32)
                    w_acc = tl.zeros([BLOCK], dtype=tl.float32)
                    last_acc = tl.full([BLOCK], -1, dtype=tl.int32)
                    for s in range(0, V, BLOCK):
                        idx = s + offs
                        inb = idx < V
                        w = _kept_weight(base, idx, inb, m, temp, thr, mp)
                        w_acc += w
                        last_acc = tl.maximum(last_acc, tl.where(w > 0, idx, -1))
                    target = u * tl.sum(w_acc, axis=0)
                    last = tl.max(last_acc, axis=0)
                    run = tl.zeros([], dtype=tl.float32)
                    found = tl.full([], -1, dtype=tl.int32)
                    s2 = tl.zeros([], dtype=tl.int32)
                    while (found < 0) & (s2 < V):
                        idx = s2 + offs
                        inb = idx < V
                        w = _kept_weight(base, idx, inb, m, temp, thr, mp)
                        c = run + tl.cumsum(w, axis=0)
                        found = tl.min(tl.where(inb & (c > target), idx, 2147483647), axis=0)
                        found = tl.where(found == 2147483647, -1, found)
                        run = tl.max(c, axis=0)
                        s2 += BLOCK
                    tok = tl.where(found >= 0, found, last).to(tl.int64)
    tl.store(thr_ptr + row, thr)
    if HAS_U:
        tl.store(tok_ptr + row, tok)


# launch config (spec_tests/bench/sampling_speed.py sweeps it). CAP: a top-k search gathers its
# candidates once <= CAP tokens are left (a power of 2); under the interpreter (CPU) it is small so
# that the tests run both the row passes and the gathered finish.
SORT_FREE_CONFIG = dict(BLOCK=1024, PP=8, num_warps=8, CAP=1024)
INTERPRET_CAP = 16


def sort_free(x, temperature, top_k, top_p, min_p, u=None, *, config=None):
    """The sort-free sampler on float32 logits x (batch, vocab) after penalties and bias; per-row
    parameters (batch,) as resolved by reference.sampling.resolve_params (float32, top_k int64);
    u: float64 (batch,) or None. Returns (tokens int64 or None, status int32, row max float32,
    threshold key int32): status 0 fine, 1 NaN, 2 +inf, 3 every token -inf; the kept set of a
    non-greedy row is {t : bits(0 - (x_t - max) / T) <= threshold and exp(z_t) >= min_p}."""
    assert x.dtype == torch.float32 and x.dim() == 2
    cfg = dict(SORT_FREE_CONFIG, **(config or {}))
    b, vocab = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    dev = x.device
    status = torch.empty(b, dtype=torch.int32, device=dev)
    m = torch.empty(b, dtype=torch.float32, device=dev)
    thr = torch.empty(b, dtype=torch.int32, device=dev)
    tok = torch.empty(b, dtype=torch.int64, device=dev) if u is not None else status
    if b == 0:
        return (tok if u is not None else None), status, m, thr
    block = min(cfg["BLOCK"], max(16, triton.next_power_of_2(vocab)))
    cap = cfg["CAP"] if x.is_cuda or "CAP" in (config or {}) else INTERPRET_CAP
    gz = torch.empty(b, cap, dtype=torch.float32, device=dev)
    gi = torch.empty(b, cap, dtype=torch.int32, device=dev)
    _sort_free_kernel[(b,)](x, x.stride(0), vocab, temperature.contiguous(), top_k.contiguous(),
                            top_p.contiguous(), min_p.contiguous(),
                            (u if u is not None else m).contiguous(), tok, status, m, thr, gz, gi,
                            HAS_U=u is not None, BLOCK=block, PP=cfg["PP"], CAP=cap,
                            num_warps=cfg["num_warps"])
    return (tok if u is not None else None), status, m, thr
