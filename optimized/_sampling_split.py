"""The sort-free sampler with each row split over SPLIT programs (issue 14's next lever).

Same contract and same search as ``optimized._sampling_triton.sort_free`` (read its header first:
keys, pivots, the kept set {t : key_t <= K}); only the schedule differs. There one program owns a
row and streams it 4-8 times, so 256 rows keep 256 programs busy on 132 SMs and the kernel is
bound by per-program work. Here every full pass over the logits is a grid of (SPLIT, rows)
programs, each over one chunk of its row, and a small one-program-per-row kernel combines the
chunks' partial results in a fixed order (deterministic: no atomics) and moves the row's state
on. A row goes through these modes:

    SEARCH_K  the top-k search: counts at PP pivots in [lo, hi] (until lo == hi, or <= CAP
              tokens have key <= hi: then GATHER them)
    SEARCH_P  the top-p search: masses at PP pivots in [lo, hi] over key <= kcut (until lo == hi,
              or <= CAP tokens lie in [lo, hi]: then GATHER them, the mass below lo known)
    GATHER    its candidates are copied (z and id, token-id order) to a per-row scratch; the
              chunk offsets come from the last pass's per-chunk counts, so the copy is ordered
              and needs no atomics; one program per row finishes the search in registers (and,
              for a top-k gather, top-p, min-p and the draw too)
    THRESH    the threshold is final; with uniforms: per-chunk kept masses, then one program per
              row picks the chunk where the CDF crosses u * total and scans only that chunk
    DRAWN     the token is known (greedy rows at once: the first index of the row max)
    BAD       NaN, +inf, or every token -inf (the caller raises the reference's error)

Unlike the one-program search, a pass does not shrink [lo, hi] to the real keys around the
chosen pivot (that costs a max and a min per pivot and element); the interval is
[pivot_{j-1} + 1, pivot_j], which shrinks strictly every pass, and the register finish ends on
an exact key, so ties are never split and the result is the same threshold.

Host side: the first passes are launched without a sync; one sync then checks that no row is
still searching (a row needs more passes only when its candidates are spread over many keys
with > CAP tokens each time: then more passes run, each strictly shrinking its interval)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from optimized._sampling_triton import BIGKEY, KEYMAX, _pivots, _select_regs, _zkey

SEARCH_K, SEARCH_P, GATHER, THRESH, DRAWN, BAD = (tl.constexpr(i) for i in range(6))
# state columns (int32): mode, lo, hi, kcut, count, gather kind (0 top-k, 1 top-p), thr, status
_MODE, _LO, _HI, _KCUT, _CNT, _KIND, _THR, _STATUS = range(8)
NI = 8
# float state: row max, mass below lo, total mass
_M, _MLO, _TOT = range(3)
NF = 4
BIGIDX = tl.constexpr(2147483647)


@triton.jit
def _chunk(s, V, L):
    start = s * L
    return start, tl.minimum(start + L, V)


@triton.jit
def _scan_kernel(x_ptr, stride, V, L, pf_ptr, pi_ptr, S, BLOCK: tl.constexpr):
    """Per chunk: max (NaN excluded), smallest finite value, NaN / +inf flags, count of finite
    logits, first index of the chunk max."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    base = x_ptr + row.to(tl.int64) * stride
    offs = tl.arange(0, BLOCK)
    start, end = _chunk(s, V, L)
    best = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    bidx = tl.full([BLOCK], BIGIDX, dtype=tl.int32)
    mnf = tl.full([BLOCK], float("inf"), dtype=tl.float32)
    nan_acc = tl.zeros([BLOCK], dtype=tl.int32)
    inf_acc = tl.zeros([BLOCK], dtype=tl.int32)
    fin_acc = tl.zeros([BLOCK], dtype=tl.int32)
    for i in range(start, end, BLOCK):
        idx = i + offs
        inb = idx < end
        x = tl.load(base + idx, mask=inb, other=float("-inf"))
        isnan = x != x
        fin = (x > float("-inf")) & (x < float("inf"))
        nan_acc = tl.maximum(nan_acc, isnan.to(tl.int32))
        inf_acc = tl.maximum(inf_acc, (x == float("inf")).to(tl.int32))
        fin_acc += fin.to(tl.int32)
        xv = tl.where(isnan, float("-inf"), x)
        better = (xv > best) | ((bidx == BIGIDX) & inb & (xv == best))
        bidx = tl.where(better, idx, bidx)
        best = tl.where(better, xv, best)
        mnf = tl.minimum(mnf, tl.where(fin, x, float("inf")))
    cmax = tl.max(best, axis=0)
    cidx = tl.min(tl.where(best == cmax, bidx, BIGIDX), axis=0)
    o = (row * S + s).to(tl.int64)
    tl.store(pf_ptr + o * 2, cmax)
    tl.store(pf_ptr + o * 2 + 1, tl.min(mnf, axis=0))
    tl.store(pi_ptr + o * 4, tl.max(nan_acc, axis=0))
    tl.store(pi_ptr + o * 4 + 1, tl.max(inf_acc, axis=0))
    tl.store(pi_ptr + o * 4 + 2, tl.sum(fin_acc, axis=0))
    tl.store(pi_ptr + o * 4 + 3, cidx)


@triton.jit
def _init_kernel(pf_ptr, pi_ptr, st_ptr, sf_ptr, tok_ptr, temp_ptr, k_ptr, p_ptr, V, S,
                 SP: tl.constexpr):
    """One program per row: combines the scan's chunks (in chunk order) and starts the row."""
    row = tl.program_id(0)
    ss = tl.arange(0, SP)
    ok = ss < S
    o = (row * S + ss).to(tl.int64)
    cmax = tl.load(pf_ptr + o * 2, mask=ok, other=float("-inf"))
    cmin = tl.load(pf_ptr + o * 2 + 1, mask=ok, other=float("inf"))
    nan = tl.max(tl.load(pi_ptr + o * 4, mask=ok, other=0), axis=0)
    inf = tl.max(tl.load(pi_ptr + o * 4 + 1, mask=ok, other=0), axis=0)
    nfin = tl.sum(tl.load(pi_ptr + o * 4 + 2, mask=ok, other=0), axis=0)
    cidx = tl.load(pi_ptr + o * 4 + 3, mask=ok, other=BIGIDX)
    m = tl.max(cmax, axis=0)
    xmin = tl.min(cmin, axis=0)
    status = tl.where(nan > 0, 1, tl.where(inf > 0, 2, tl.where(nfin == 0, 3, 0)))
    temp = tl.load(temp_ptr + row)
    k = tl.load(k_ptr + row).to(tl.int32)
    p = tl.load(p_ptr + row)
    zmin, hi0 = _zkey(xmin, m, temp)
    first = tl.min(tl.where(ok & (cmax == m), cidx, BIGIDX), axis=0)     # greedy: first max
    search = tl.where((k > 0) & (k < V) & (nfin >= k), SEARCH_K, tl.where(p < 1.0, SEARCH_P, THRESH))
    # hi0 == 0: every finite token has z = 0, so both searches end at key 0 at once
    thr = tl.where(temp == 0, 0, tl.where((search != THRESH) & (hi0 == 0), 0, KEYMAX))
    mode = tl.where(status != 0, BAD, tl.where(temp == 0, DRAWN, tl.where(hi0 == 0, THRESH, search)))
    sb = st_ptr + row.to(tl.int64) * 8
    tl.store(sb + 0, mode)
    tl.store(sb + 1, 0)
    tl.store(sb + 2, hi0)
    tl.store(sb + 3, hi0)            # kcut: every finite token (no top-k, or -inf among the top k)
    tl.store(sb + 4, 0)
    tl.store(sb + 5, 0)
    tl.store(sb + 6, thr)
    tl.store(sb + 7, status)
    fb = sf_ptr + row.to(tl.int64) * 4
    tl.store(fb + 0, m)
    tl.store(fb + 1, 0.0)
    tl.store(fb + 2, -1.0)
    tl.store(tok_ptr + row, first.to(tl.int64))


@triton.jit
def _le(c, f, key, w, pivot):
    """One pivot's running count and mass of keys <= pivot (per lane)."""
    le = key <= pivot
    return c + le.to(tl.int32), f + tl.where(le, w, 0.0)


@triton.jit
def _pass_kernel(x_ptr, stride, V, L, S, st_ptr, sf_ptr, temp_ptr, pc_ptr, pcx_ptr, pf_ptr, pfx_ptr,
                 BLOCK: tl.constexpr, PP: tl.constexpr):
    """One search pass over one chunk: per pivot, the count (and for top-p the mass) of keys <=
    the pivot; plus the count of keys <= hi and < lo, the total mass and the mass below lo.
    The PP (4 or 8) pivots are scalars with one pair of 1-D accumulators each, written out: a
    (BLOCK, PP) tile would spread the pivots over a warp's lanes and move every key through
    shared memory (what the H200 profile of the tiled version showed: 2-5x the read time)."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    sb = st_ptr + row.to(tl.int64) * 8
    mode = tl.load(sb + 0)
    if mode <= SEARCH_P:
        lo = tl.load(sb + 1)
        hi = tl.load(sb + 2)
        kcut = tl.load(sb + 3)
        weighted = mode == SEARCH_P
        m = tl.load(sf_ptr + row.to(tl.int64) * 4)
        t = tl.load(temp_ptr + row)
        piv = _pivots(lo, hi, PP)
        jj = tl.arange(0, PP)
        p0 = tl.sum(tl.where(jj == 0, piv, 0), axis=0)
        p1 = tl.sum(tl.where(jj == 1, piv, 0), axis=0)
        p2 = tl.sum(tl.where(jj == 2, piv, 0), axis=0)
        p3 = tl.sum(tl.where(jj == 3, piv, 0), axis=0)
        p4 = tl.sum(tl.where(jj == PP // 2, piv, 0), axis=0)       # PP = 4: copies of p2, p3
        p5 = tl.sum(tl.where(jj == PP // 2 + 1, piv, 0), axis=0)   # (computed, never stored)
        p6 = tl.sum(tl.where(jj == PP - 2, piv, 0), axis=0)
        p7 = tl.sum(tl.where(jj == PP - 1, piv, 0), axis=0)
        base = x_ptr + row.to(tl.int64) * stride
        offs = tl.arange(0, BLOCK)
        start, end = _chunk(s, V, L)
        zi = tl.zeros([BLOCK], dtype=tl.int32)
        zf = tl.zeros([BLOCK], dtype=tl.float32)
        c0, c1, c2, c3, c4, c5, c6, c7 = zi, zi, zi, zi, zi, zi, zi, zi
        f0, f1, f2, f3, f4, f5, f6, f7 = zf, zf, zf, zf, zf, zf, zf, zf
        hc_acc = zi
        lc_acc = zi
        tot_acc = zf
        lw_acc = zf
        for i in range(start, end, BLOCK):
            idx = i + offs
            inb = idx < end
            x = tl.load(base + idx, mask=inb, other=float("-inf"))
            z, key = _zkey(x, m, t)
            key = tl.where(inb, key, BIGKEY)
            w = tl.where(weighted & (key <= kcut), tl.exp(z), 0.0)
            c0, f0 = _le(c0, f0, key, w, p0)
            c1, f1 = _le(c1, f1, key, w, p1)
            c2, f2 = _le(c2, f2, key, w, p2)
            c3, f3 = _le(c3, f3, key, w, p3)
            if PP == 8:
                c4, f4 = _le(c4, f4, key, w, p4)
                c5, f5 = _le(c5, f5, key, w, p5)
                c6, f6 = _le(c6, f6, key, w, p6)
                c7, f7 = _le(c7, f7, key, w, p7)
            below = key < lo
            hc_acc += (key <= hi).to(tl.int32)
            lc_acc += below.to(tl.int32)
            tot_acc += w
            lw_acc += tl.where(below, w, 0.0)
        o = (row * S + s).to(tl.int64)
        cb = pc_ptr + o * PP
        fb = pf_ptr + o * PP
        tl.store(cb + 0, tl.sum(c0, axis=0))
        tl.store(cb + 1, tl.sum(c1, axis=0))
        tl.store(cb + 2, tl.sum(c2, axis=0))
        tl.store(cb + 3, tl.sum(c3, axis=0))
        tl.store(fb + 0, tl.sum(f0, axis=0))
        tl.store(fb + 1, tl.sum(f1, axis=0))
        tl.store(fb + 2, tl.sum(f2, axis=0))
        tl.store(fb + 3, tl.sum(f3, axis=0))
        if PP == 8:
            tl.store(cb + 4, tl.sum(c4, axis=0))
            tl.store(cb + 5, tl.sum(c5, axis=0))
            tl.store(cb + 6, tl.sum(c6, axis=0))
            tl.store(cb + 7, tl.sum(c7, axis=0))
            tl.store(fb + 4, tl.sum(f4, axis=0))
            tl.store(fb + 5, tl.sum(f5, axis=0))
            tl.store(fb + 6, tl.sum(f6, axis=0))
            tl.store(fb + 7, tl.sum(f7, axis=0))
        tl.store(pcx_ptr + o * 2, tl.sum(hc_acc, axis=0))
        tl.store(pcx_ptr + o * 2 + 1, tl.sum(lc_acc, axis=0))
        tl.store(pfx_ptr + o * 2, tl.sum(tot_acc, axis=0))
        tl.store(pfx_ptr + o * 2 + 1, tl.sum(lw_acc, axis=0))


@triton.jit
def _decide_kernel(st_ptr, sf_ptr, k_ptr, p_ptr, pc_ptr, pcx_ptr, pf_ptr, pfx_ptr, goff_ptr, S,
                   SP: tl.constexpr, PP: tl.constexpr, CAP: tl.constexpr):
    """One program per row: sums the chunks' pass results in chunk order, picks the pivot
    interval holding the threshold and moves the row on (module doc). For a gather it writes
    each chunk's offset in the row's scratch (exclusive prefix of its candidate counts)."""
    row = tl.program_id(0)
    sb = st_ptr + row.to(tl.int64) * 8
    fb = sf_ptr + row.to(tl.int64) * 4
    mode = tl.load(sb + 0)
    if mode <= SEARCH_P:
        lo = tl.load(sb + 1)
        hi = tl.load(sb + 2)
        kcut = tl.load(sb + 3)
        piv = _pivots(lo, hi, PP)
        ss = tl.arange(0, SP)
        jj = tl.arange(0, PP)
        ok = ss < S
        o = (row * S + ss).to(tl.int64)
        C = tl.load(pc_ptr + o[:, None] * PP + jj[None, :], mask=ok[:, None], other=0)    # (SP, PP)
        F = tl.load(pf_ptr + o[:, None] * PP + jj[None, :], mask=ok[:, None], other=0.0)
        c_hi_s = tl.load(pcx_ptr + o * 2, mask=ok, other=0)
        c_lo_s = tl.load(pcx_ptr + o * 2 + 1, mask=ok, other=0)
        c = tl.sum(C, axis=0)
        f = tl.sum(F, axis=0)
        if mode == SEARCH_K:
            k = tl.load(k_ptr + row).to(tl.int32)
            jstar = tl.min(tl.where(c >= k, jj, PP), axis=0)
        else:
            total = tl.sum(tl.load(pfx_ptr + o * 2, mask=ok, other=0.0), axis=0)
            p = tl.load(p_ptr + row)
            jstar = tl.min(tl.where(f >= p * total, jj, PP), axis=0)
            mlo = tl.where(jstar > 0, tl.sum(tl.where(jj == jstar - 1, f, 0.0), axis=0),
                           tl.sum(tl.load(pfx_ptr + o * 2 + 1, mask=ok, other=0.0), axis=0))
            tl.store(fb + 1, mlo)
            tl.store(fb + 2, total)
        new_hi = tl.where(jstar < PP, tl.sum(tl.where(jj == jstar, piv, 0), axis=0), hi)
        new_lo = tl.where(jstar > 0, tl.sum(tl.where(jj == jstar - 1, piv, 0), axis=0) + 1, lo)
        # per chunk: tokens with key <= new_hi, and with key < new_lo
        chi = tl.where(jstar < PP, tl.sum(tl.where(jj[None, :] == jstar, C, 0), axis=1), c_hi_s)
        clo = tl.where(jstar > 0, tl.sum(tl.where(jj[None, :] == jstar - 1, C, 0), axis=1), c_lo_s)
        n_hi = tl.sum(chi, axis=0)
        n_in = n_hi - tl.sum(clo, axis=0)
        if mode == SEARCH_K:
            if new_lo == new_hi:                      # the k-th key, exactly (a tie group > CAP)
                p = tl.load(p_ptr + row)
                tl.store(sb + 0, tl.where((p < 1.0) & (new_hi > 0), SEARCH_P, THRESH))
                tl.store(sb + 1, 0)
                tl.store(sb + 2, new_hi)
                tl.store(sb + 3, new_hi)
                tl.store(sb + 6, new_hi)
            elif n_hi <= CAP:                         # gather every token with key <= new_hi
                tl.store(sb + 0, GATHER)
                tl.store(sb + 1, 0)
                tl.store(sb + 2, new_hi)
                tl.store(sb + 4, n_hi)
                tl.store(sb + 5, 0)
                tl.store(goff_ptr + o, tl.cumsum(chi, axis=0) - chi, mask=ok)
            else:
                tl.store(sb + 1, new_lo)
                tl.store(sb + 2, new_hi)
        else:
            if new_lo == new_hi:
                tl.store(sb + 0, THRESH)
                tl.store(sb + 6, new_hi)
            elif n_in <= CAP:                         # gather the tokens in [new_lo, new_hi]
                tl.store(sb + 0, GATHER)
                tl.store(sb + 1, new_lo)
                tl.store(sb + 2, new_hi)
                tl.store(sb + 4, n_in)
                tl.store(sb + 5, 1)
                tl.store(goff_ptr + o, tl.cumsum(chi - clo, axis=0) - (chi - clo), mask=ok)
            else:
                tl.store(sb + 1, new_lo)
                tl.store(sb + 2, new_hi)


@triton.jit
def _gather_kernel(x_ptr, stride, V, L, S, st_ptr, sf_ptr, temp_ptr, goff_ptr, gz_ptr, gi_ptr,
                   BLOCK: tl.constexpr, CAP: tl.constexpr):
    """Copy a GATHER row's candidates of one chunk to the row's scratch at the chunk's offset."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    sb = st_ptr + row.to(tl.int64) * 8
    mode = tl.load(sb + 0)
    if mode == GATHER:
        lo = tl.load(sb + 1)
        hi = tl.load(sb + 2)
        m = tl.load(sf_ptr + row.to(tl.int64) * 4)
        t = tl.load(temp_ptr + row)
        n = tl.load(goff_ptr + (row * S + s).to(tl.int64))
        base = x_ptr + row.to(tl.int64) * stride
        offs = tl.arange(0, BLOCK)
        start, end = _chunk(s, V, L)
        for i in range(start, end, BLOCK):
            idx = i + offs
            inb = idx < end
            x = tl.load(base + idx, mask=inb, other=float("-inf"))
            z, key = _zkey(x, m, t)
            sel = inb & (key >= lo) & (key <= hi)
            cnt = tl.sum(sel.to(tl.int32), axis=0)
            if cnt > 0:                               # most blocks hold none: skip the scan
                pos = n + tl.cumsum(sel.to(tl.int32), axis=0) - 1
                dst = row.to(tl.int64) * CAP + pos
                tl.store(gz_ptr + dst, z, mask=sel & (pos < CAP))
                tl.store(gi_ptr + dst, idx, mask=sel & (pos < CAP))
            n += cnt


@triton.jit
def _finish_kernel(st_ptr, sf_ptr, k_ptr, p_ptr, minp_ptr, u_ptr, tok_ptr, gz_ptr, gi_ptr,
                   HAS_U: tl.constexpr, PP: tl.constexpr, CAP: tl.constexpr):
    """One program per GATHER row: the search ends on the gathered candidates, in registers.
    A top-k gather holds every token the filters can keep: top-p, min-p and the draw run here
    too. A top-p gather holds the tokens in [lo, hi]; the mass below lo comes from the pass."""
    row = tl.program_id(0)
    sb = st_ptr + row.to(tl.int64) * 8
    fb = sf_ptr + row.to(tl.int64) * 4
    mode = tl.load(sb + 0)
    if mode == GATHER:
        lo = tl.load(sb + 1)
        hi = tl.load(sb + 2)
        n = tl.load(sb + 4)
        kind = tl.load(sb + 5)
        p = tl.load(p_ptr + row)
        co = tl.arange(0, CAP)
        valid = co < n
        gz = tl.load(gz_ptr + row.to(tl.int64) * CAP + co, mask=valid, other=float("-inf"))
        gkey = tl.where(valid, (0.0 - gz).to(tl.int32, bitcast=True), BIGKEY)
        ge = tl.where(valid, tl.exp(gz), 0.0)
        if kind == 0:
            k = tl.load(k_ptr + row)
            thr = _select_regs(gkey, valid.to(tl.float32), lo, hi, k.to(tl.float32), PP)
            if p < 1.0:
                wk = tl.where(gkey <= thr, ge, 0.0)
                thr = _select_regs(gkey, wk, tl.zeros([], dtype=tl.int32), thr, p * tl.sum(wk, axis=0), PP)
            tl.store(sb + 6, thr)
            if HAS_U:
                gi = tl.load(gi_ptr + row.to(tl.int64) * CAP + co, mask=valid, other=0)
                mp = tl.load(minp_ptr + row)
                u = tl.load(u_ptr + row).to(tl.float32)
                w = tl.where((gkey <= thr) & (ge >= mp), ge, 0.0)
                c = tl.cumsum(w, axis=0)
                target = u * tl.sum(w, axis=0)
                first = tl.min(tl.where(valid & (c > target), gi, BIGIDX), axis=0)
                last = tl.max(tl.where(w > 0, gi, -1), axis=0)
                tl.store(tok_ptr + row, tl.where(first < BIGIDX, first, last).to(tl.int64))
                tl.store(sb + 0, DRAWN)
            else:
                tl.store(sb + 0, THRESH)
        else:
            mlo = tl.load(fb + 1)
            total = tl.load(fb + 2)
            thr = _select_regs(gkey, ge, lo, hi, p * total - mlo, PP)
            tl.store(sb + 6, thr)
            tl.store(sb + 0, THRESH)


@triton.jit
def _mass_kernel(x_ptr, stride, V, L, S, st_ptr, sf_ptr, temp_ptr, minp_ptr, ws_ptr, lp_ptr,
                 BLOCK: tl.constexpr):
    """Per chunk of a THRESH row: the kept mass, and the last token with positive weight."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    sb = st_ptr + row.to(tl.int64) * 8
    mode = tl.load(sb + 0)
    if mode == THRESH:
        thr = tl.load(sb + 6)
        m = tl.load(sf_ptr + row.to(tl.int64) * 4)
        t = tl.load(temp_ptr + row)
        mp = tl.load(minp_ptr + row)
        base = x_ptr + row.to(tl.int64) * stride
        offs = tl.arange(0, BLOCK)
        start, end = _chunk(s, V, L)
        w_acc = tl.zeros([BLOCK], dtype=tl.float32)
        last_acc = tl.full([BLOCK], -1, dtype=tl.int32)
        for i in range(start, end, BLOCK):
            idx = i + offs
            inb = idx < end
            x = tl.load(base + idx, mask=inb, other=float("-inf"))
            z, key = _zkey(x, m, t)
            e = tl.exp(z)
            w = tl.where(inb & (key <= thr) & (e >= mp), e, 0.0)
            w_acc += w
            last_acc = tl.maximum(last_acc, tl.where(w > 0, idx, -1))
        o = (row * S + s).to(tl.int64)
        tl.store(ws_ptr + o, tl.sum(w_acc, axis=0))
        tl.store(lp_ptr + o, tl.max(last_acc, axis=0))


@triton.jit
def _draw_kernel(x_ptr, stride, V, L, S, st_ptr, sf_ptr, temp_ptr, minp_ptr, u_ptr, ws_ptr, lp_ptr,
                 tok_ptr, SP: tl.constexpr, BLOCK: tl.constexpr):
    """One program per THRESH row: the contract's inverse CDF in token-id order. The chunk where
    the running kept mass first exceeds u * total, then the token inside it (a rounding miss in
    the chunk: its last positive token; past the last chunk: the row's last positive token)."""
    row = tl.program_id(0)
    sb = st_ptr + row.to(tl.int64) * 8
    mode = tl.load(sb + 0)
    if mode == THRESH:
        ss = tl.arange(0, SP)
        ok = ss < S
        o = (row * S + ss).to(tl.int64)
        ws = tl.load(ws_ptr + o, mask=ok, other=0.0)
        lp = tl.load(lp_ptr + o, mask=ok, other=-1)
        cs = tl.cumsum(ws, axis=0)
        total = tl.sum(tl.where(ss == S - 1, cs, 0.0), axis=0)
        u = tl.load(u_ptr + row).to(tl.float32)
        target = u * total
        cstar = tl.min(tl.where(ok & (cs > target), ss, SP), axis=0)
        tok = tl.max(lp, axis=0)
        if cstar < SP:
            run = tl.sum(tl.where(ss == cstar, cs - ws, 0.0), axis=0)
            tok = tl.sum(tl.where(ss == cstar, lp, 0), axis=0)
            thr = tl.load(sb + 6)
            m = tl.load(sf_ptr + row.to(tl.int64) * 4)
            t = tl.load(temp_ptr + row)
            mp = tl.load(minp_ptr + row)
            base = x_ptr + row.to(tl.int64) * stride
            offs = tl.arange(0, BLOCK)
            start, end = _chunk(cstar, V, L)
            found = tl.full([], -1, dtype=tl.int32)
            i = start
            while (found < 0) & (i < end):
                idx = i + offs
                inb = idx < end
                x = tl.load(base + idx, mask=inb, other=float("-inf"))
                z, key = _zkey(x, m, t)
                e = tl.exp(z)
                w = tl.where(inb & (key <= thr) & (e >= mp), e, 0.0)
                c = run + tl.cumsum(w, axis=0)
                hit = tl.min(tl.where(inb & (c > target), idx, BIGIDX), axis=0)
                found = tl.where(hit < BIGIDX, hit, -1)
                run = tl.max(tl.where(inb, c, run), axis=0)
                i += BLOCK
            tok = tl.where(found >= 0, found, tok)
        tl.store(tok_ptr + row, tok.to(tl.int64))
        tl.store(sb + 0, DRAWN)


# SPLIT programs per row (the chunk length is rounded up to whole BLOCKs); NPASS search passes are
# launched before the one sync that checks every row has left the search. Under the interpreter
# the tests pass small CAP / BLOCK / SPLIT so that every mode runs on small rows.
SPLIT_CONFIG = dict(SPLIT=16, BLOCK=1024, PP=8, num_warps=8, CAP=2048, NPASS=3)
MAX_PASSES = 64      # each pass strictly shrinks a 31-bit key interval: never reached


def _carve(dtype, device, *shapes):
    """Views of one fresh allocation, one per shape (contents undefined)."""
    sizes = [int(torch.Size(sh).numel()) for sh in shapes]
    flat = torch.empty(sum(sizes), dtype=dtype, device=device)
    return [part.view(sh) for part, sh in zip(flat.split(sizes), shapes)]


def sort_free_split(x, temperature, top_k, top_p, min_p, u=None, *, config=None):
    """``optimized._sampling_triton.sort_free``'s contract and return value, each row split over
    ``SPLIT`` programs per full pass (module doc)."""
    assert x.dtype == torch.float32 and x.dim() == 2
    cfg = dict(SPLIT_CONFIG, **(config or {}))
    if cfg["PP"] not in (4, 8):
        raise ValueError(f"config PP must be 4 or 8 (the pass kernel's written-out pivots), got {cfg['PP']}")
    b, vocab = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    dev = x.device
    block = min(cfg["BLOCK"], max(16, triton.next_power_of_2(vocab)))
    chunk = triton.cdiv(triton.cdiv(vocab, max(1, cfg["SPLIT"])), block) * block
    s = triton.cdiv(vocab, chunk)
    sp = max(2, triton.next_power_of_2(s))
    pp, cap, warps = cfg["PP"], cfg["CAP"], cfg["num_warps"]
    tok = torch.empty(b, dtype=torch.int64, device=dev)
    st = torch.empty(b, NI, dtype=torch.int32, device=dev)
    if b == 0:
        return (tok if u is not None else None), st[:, _STATUS], torch.empty(0, device=dev), st[:, _THR]
    temperature, top_k, top_p, min_p = (a.contiguous() for a in (temperature, top_k, top_p, min_p))
    # the scratch, carved from one int32 and one float32 allocation (each allocation and launch
    # costs host time that the ~0.5 ms call cannot hide)
    pi, pc, pcx, goff, gi, lp = _carve(torch.int32, dev, (b, s, 4), (b, s, pp), (b, s, 2), (b, s), (b, cap), (b, s))
    sf, pf, pfw, pfx, gz, ws = _carve(torch.float32, dev, (b, NF), (b, s, 2), (b, s, pp), (b, s, 2), (b, cap), (b, s))
    grid_rows, grid_chunks = (b,), (s, b)
    common = (x, x.stride(0), vocab, chunk)
    _scan_kernel[grid_chunks](*common, pf, pi, s, BLOCK=block, num_warps=warps)
    _init_kernel[grid_rows](pf, pi, st, sf, tok, temperature, top_k, top_p, vocab, s, SP=sp, num_warps=4)

    def search_pass():
        _pass_kernel[grid_chunks](*common, s, st, sf, temperature, pc, pcx, pfw, pfx,
                                  BLOCK=block, PP=pp, num_warps=warps)
        _decide_kernel[grid_rows](st, sf, top_k, top_p, pc, pcx, pfw, pfx, goff, s,
                                  SP=sp, PP=pp, CAP=cap, num_warps=4)
    for _ in range(cfg["NPASS"]):
        search_pass()
    extra = 0
    while bool((st[:, _MODE] <= SEARCH_P.value).any()):      # the one sync (module doc)
        if extra == MAX_PASSES:
            raise RuntimeError("sort_free_split: the threshold search did not end")
        search_pass()
        extra += 1
    _gather_kernel[grid_chunks](*common, s, st, sf, temperature, goff, gz, gi, BLOCK=block, CAP=cap,
                                num_warps=warps)
    uu = u.contiguous() if u is not None else sf
    _finish_kernel[grid_rows](st, sf, top_k, top_p, min_p, uu, tok, gz, gi, HAS_U=u is not None,
                              PP=pp, CAP=cap, num_warps=8 if cap >= 1024 else 4)
    if u is not None:
        _mass_kernel[grid_chunks](*common, s, st, sf, temperature, min_p, ws, lp, BLOCK=block, num_warps=warps)
        _draw_kernel[grid_rows](*common, s, st, sf, temperature, min_p, uu, ws, lp, tok, SP=sp, BLOCK=block,
                                num_warps=4)
    return (tok if u is not None else None), st[:, _STATUS], sf[:, _M], st[:, _THR]
