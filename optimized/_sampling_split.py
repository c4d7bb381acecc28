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

Host side: NPASS search passes are launched, then the gather, finish and draw, with no sync in
between; one sync at the end asks whether a row was still searching after NPASS passes (its
candidates spread over many keys, > CAP tokens each time): such rows are redone by the
one-program kernel. The kernels are compiled without value specialisation and relaunched
through their compiled form (_launch): a Triton launch costs ~15-20 us of host time, and the
call makes about 14 of them."""
from __future__ import annotations

import inspect
import threading

import torch
import triton
import triton.language as tl

from optimized._sampling_triton import (BIGKEY, KEYMAX, _bad_flags, _kept_weight, _pick, _pivots, _select_regs,
                                         _zkey, sort_free)

SEARCH_K, SEARCH_P, GATHER, THRESH, DRAWN, BAD = (tl.constexpr(i) for i in range(6))
# a row's int32 state: mode, search interval [lo, hi], kcut (top-p counts key <= kcut), gather
# count, gather kind (0 top-k, 1 top-p), threshold, status; its float32 state: row max, mass below
# lo, total mass (top-p)
MODE, LO, HI, KCUT, CNT, KIND, THR, STATUS = (tl.constexpr(i) for i in range(8))
NI = tl.constexpr(8)
ROWMAX, MLO, TOTAL = (tl.constexpr(i) for i in range(3))
NF = tl.constexpr(4)
BIGIDX = tl.constexpr(2147483647)
UNFINISHED = tl.constexpr(4)   # status of a row whose search had not ended after NPASS passes


def _kernel(fn):
    """triton.jit with no value or alignment specialisation of the runtime arguments: one compiled
    kernel per set of constexprs whatever the pointers and integers are, so _launch can reuse it
    without Triton's per-call specialisation (each launch's host cost counts in a ~0.5 ms call)."""
    names = [n for n, prm in inspect.signature(fn).parameters.items() if "constexpr" not in str(prm.annotation)]
    return triton.jit(fn, do_not_specialize=names, do_not_specialize_on_alignment=names)


@triton.jit
def _chunk(s, V, L):
    start = s * L
    return start, tl.minimum(start + L, V)


@_kernel
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
        nan_acc, inf_acc, fin_acc, mnf, xv = _bad_flags(x, nan_acc, inf_acc, fin_acc, mnf)
        better = (xv > best) | ((bidx == BIGIDX) & inb & (xv == best))
        bidx = tl.where(better, idx, bidx)
        best = tl.where(better, xv, best)
    cmax = tl.max(best, axis=0)
    cidx = tl.min(tl.where(best == cmax, bidx, BIGIDX), axis=0)
    o = (row * S + s).to(tl.int64)
    tl.store(pf_ptr + o * 2, cmax)
    tl.store(pf_ptr + o * 2 + 1, tl.min(mnf, axis=0))
    tl.store(pi_ptr + o * 4, tl.max(nan_acc, axis=0))
    tl.store(pi_ptr + o * 4 + 1, tl.max(inf_acc, axis=0))
    tl.store(pi_ptr + o * 4 + 2, tl.sum(fin_acc, axis=0))
    tl.store(pi_ptr + o * 4 + 3, cidx)


@_kernel
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
    sb = st_ptr + row.to(tl.int64) * NI
    tl.store(sb + MODE, mode)
    tl.store(sb + LO, 0)
    tl.store(sb + HI, hi0)
    tl.store(sb + KCUT, hi0)            # kcut: every finite token (no top-k, or -inf among the top k)
    tl.store(sb + CNT, 0)
    tl.store(sb + KIND, 0)
    tl.store(sb + THR, thr)
    tl.store(sb + STATUS, status)
    fb = sf_ptr + row.to(tl.int64) * NF
    tl.store(fb + ROWMAX, m)
    tl.store(fb + MLO, 0.0)
    tl.store(fb + TOTAL, -1.0)
    tl.store(tok_ptr + row, first.to(tl.int64))


@triton.jit
def _flip(o):
    """Float bits <-> ordered ints (an involution): ordered ints increase with the float."""
    return o ^ ((o >> 31) & 0x7FFFFFFF)


@triton.jit
def _x_threshold(key, m, t):
    """Per key K (a vector): the smallest float x with key(x) <= K, key(x) as _zkey computes it
    (the bits of 0 - z, z = fl(fl(x - m) / t)). z is non-decreasing in x, so key(x) <= K  <=>
    x >= the result: a pass compares the raw logits with these thresholds and divides nothing.
    Found by bisection over the ordered float bits in [-inf, m] (key(m) = 0 <= K); K < 0: +inf
    (no x); K >= KEYMAX: -inf (every x, -inf included)."""
    lo = _flip(tl.full(key.shape, float("-inf"), tl.float32).to(tl.int32, bitcast=True)).to(tl.int64)
    hi = _flip((m + tl.zeros(key.shape, tl.float32)).to(tl.int32, bitcast=True)).to(tl.int64)
    for _ in tl.static_range(33):              # hi - lo < 2^33 halves to 1
        mid = lo + (hi - lo) // 2
        z, kx = _zkey(_flip(mid.to(tl.int32)).to(tl.float32, bitcast=True), m, t)
        ok = kx <= key
        hi = tl.where(ok, mid, hi)
        lo = tl.where(ok, lo, mid)
    xt = _flip(hi.to(tl.int32)).to(tl.float32, bitcast=True)
    xt = tl.where(key >= KEYMAX, float("-inf"), xt)
    return tl.where(key < 0, float("inf"), xt)


@triton.jit
def _ge(c, f, x, w, xt):
    """One pivot's running count and mass of the logits >= its threshold (per lane)."""
    ge = x >= xt
    return c + ge.to(tl.int32), f + tl.where(ge, w, 0.0)


@triton.jit
def _pass_chunk(base, start, end, m, t, x0, x1, x2, x3, x4, x5, x6, x7, x_hi, x_below, x_cut,
                WEIGHTED: tl.constexpr, UNIT_T: tl.constexpr, PP: tl.constexpr, BLOCK: tl.constexpr):
    """The pass over one chunk against the thresholds of the PP pivots (x0..x7; PP = 4 uses
    x0..x3), of hi (x_hi), of lo - 1 (x_below) and of kcut (x_cut). WEIGHTED (top-p) also sums
    the weights exp(z) (z exact: a plain subtraction when every T of the row is 1)."""
    offs = tl.arange(0, BLOCK)
    zi = tl.zeros([BLOCK], dtype=tl.int32)
    zf = tl.zeros([BLOCK], dtype=tl.float32)
    c0, c1, c2, c3, c4, c5, c6, c7 = zi, zi, zi, zi, zi, zi, zi, zi
    f0, f1, f2, f3, f4, f5, f6, f7 = zf, zf, zf, zf, zf, zf, zf, zf
    hc, lc, tot, lw = zi, zi, zf, zf
    for i in range(start, end, BLOCK):
        idx = i + offs
        x = tl.load(base + idx, mask=idx < end, other=float("-inf"))
        w = zf
        if WEIGHTED:
            if UNIT_T:
                z = x - m
            else:
                z = tl.math.div_rn(x - m, t)
            w = tl.where(x >= x_cut, tl.exp(z), 0.0)
        c0, f0 = _ge(c0, f0, x, w, x0)
        c1, f1 = _ge(c1, f1, x, w, x1)
        c2, f2 = _ge(c2, f2, x, w, x2)
        c3, f3 = _ge(c3, f3, x, w, x3)
        if PP == 8:
            c4, f4 = _ge(c4, f4, x, w, x4)
            c5, f5 = _ge(c5, f5, x, w, x5)
            c6, f6 = _ge(c6, f6, x, w, x6)
            c7, f7 = _ge(c7, f7, x, w, x7)
        below = x >= x_below
        hc += (x >= x_hi).to(tl.int32)
        lc += below.to(tl.int32)
        if WEIGHTED:
            tot += w
            lw += tl.where(below, w, 0.0)
    return (tl.sum(c0, axis=0), tl.sum(c1, axis=0), tl.sum(c2, axis=0), tl.sum(c3, axis=0),
            tl.sum(c4, axis=0), tl.sum(c5, axis=0), tl.sum(c6, axis=0), tl.sum(c7, axis=0),
            tl.sum(f0, axis=0), tl.sum(f1, axis=0), tl.sum(f2, axis=0), tl.sum(f3, axis=0),
            tl.sum(f4, axis=0), tl.sum(f5, axis=0), tl.sum(f6, axis=0), tl.sum(f7, axis=0),
            tl.sum(hc, axis=0), tl.sum(lc, axis=0), tl.sum(tot, axis=0), tl.sum(lw, axis=0))


@_kernel
def _pass_kernel(x_ptr, stride, V, L, S, st_ptr, sf_ptr, temp_ptr, pc_ptr, pcx_ptr, pf_ptr, pfx_ptr,
                 BLOCK: tl.constexpr, PP: tl.constexpr):
    """One search pass over one chunk: per pivot, the count (and for top-p the mass) of keys <=
    the pivot; plus the count of keys <= hi and < lo, the total mass and the mass below lo.
    Every key bound becomes a threshold on the raw logit first (_x_threshold), so counting
    divides nothing; the PP pivots are scalars with one pair of 1-D accumulators each, written
    out (a (BLOCK, PP) tile spreads the pivots over a warp's lanes and moves every logit through
    shared memory: 2-5x the read time in the H200 profile)."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    sb = st_ptr + row.to(tl.int64) * NI
    mode = tl.load(sb + MODE)
    if mode <= SEARCH_P:
        lo = tl.load(sb + LO)
        hi = tl.load(sb + HI)
        kcut = tl.load(sb + KCUT)
        m = tl.load(sf_ptr + row.to(tl.int64) * NF + ROWMAX)
        t = tl.load(temp_ptr + row)
        piv = _pivots(lo, hi, PP)
        jj = tl.arange(0, 16)
        keys = tl.where(jj < PP, tl.sum(tl.where(jj[:, None] == tl.arange(0, PP)[None, :], piv[None, :], 0), axis=1),
                        tl.where(jj == 8, hi, tl.where(jj == 9, lo - 1, kcut)))
        xs = _x_threshold(keys, m, t)
        x0, x1, x2, x3 = _pick(xs, jj, 0), _pick(xs, jj, 1), _pick(xs, jj, 2), _pick(xs, jj, 3)
        x4, x5, x6, x7 = _pick(xs, jj, 4), _pick(xs, jj, 5), _pick(xs, jj, 6), _pick(xs, jj, 7)
        x_hi, x_below, x_cut = _pick(xs, jj, 8), _pick(xs, jj, 9), _pick(xs, jj, 10)
        base = x_ptr + row.to(tl.int64) * stride
        start, end = _chunk(s, V, L)
        if mode == SEARCH_K:
            r = _pass_chunk(base, start, end, m, t, x0, x1, x2, x3, x4, x5, x6, x7, x_hi, x_below, x_cut,
                            False, False, PP, BLOCK)
        elif t == 1.0:
            r = _pass_chunk(base, start, end, m, t, x0, x1, x2, x3, x4, x5, x6, x7, x_hi, x_below, x_cut,
                            True, True, PP, BLOCK)
        else:
            r = _pass_chunk(base, start, end, m, t, x0, x1, x2, x3, x4, x5, x6, x7, x_hi, x_below, x_cut,
                            True, False, PP, BLOCK)
        o = (row * S + s).to(tl.int64)
        for j in tl.static_range(PP):
            tl.store(pc_ptr + o * PP + j, r[j])
            tl.store(pf_ptr + o * PP + j, r[8 + j])
        tl.store(pcx_ptr + o * 2, r[16])
        tl.store(pcx_ptr + o * 2 + 1, r[17])
        tl.store(pfx_ptr + o * 2, r[18])
        tl.store(pfx_ptr + o * 2 + 1, r[19])


@_kernel
def _decide_kernel(st_ptr, sf_ptr, k_ptr, p_ptr, pc_ptr, pcx_ptr, pf_ptr, pfx_ptr, goff_ptr, S,
                   SP: tl.constexpr, PP: tl.constexpr, CAP: tl.constexpr):
    """One program per row: sums the chunks' pass results in chunk order, picks the pivot
    interval holding the threshold and moves the row on (module doc). For a gather it writes
    each chunk's offset in the row's scratch (exclusive prefix of its candidate counts)."""
    row = tl.program_id(0)
    sb = st_ptr + row.to(tl.int64) * NI
    fb = sf_ptr + row.to(tl.int64) * NF
    mode = tl.load(sb + MODE)
    if mode <= SEARCH_P:
        lo = tl.load(sb + LO)
        hi = tl.load(sb + HI)
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
            mlo = tl.where(jstar > 0, _pick(f, jj, jstar - 1),
                           tl.sum(tl.load(pfx_ptr + o * 2 + 1, mask=ok, other=0.0), axis=0))
            tl.store(fb + MLO, mlo)
            tl.store(fb + TOTAL, total)
        new_hi = tl.where(jstar < PP, _pick(piv, jj, jstar), hi)
        new_lo = tl.where(jstar > 0, _pick(piv, jj, jstar - 1) + 1, lo)
        # per chunk: tokens with key <= new_hi, and with key < new_lo
        chi = tl.where(jstar < PP, tl.sum(tl.where(jj[None, :] == jstar, C, 0), axis=1), c_hi_s)
        clo = tl.where(jstar > 0, tl.sum(tl.where(jj[None, :] == jstar - 1, C, 0), axis=1), c_lo_s)
        n_hi = tl.sum(chi, axis=0)
        n_in = n_hi - tl.sum(clo, axis=0)
        if mode == SEARCH_K:
            if new_lo == new_hi:                      # the k-th key, exactly (a tie group > CAP)
                p = tl.load(p_ptr + row)
                tl.store(sb + MODE, tl.where((p < 1.0) & (new_hi > 0), SEARCH_P, THRESH))
                tl.store(sb + LO, 0)
                tl.store(sb + HI, new_hi)
                tl.store(sb + KCUT, new_hi)
                tl.store(sb + THR, new_hi)
            elif n_hi <= CAP:                         # gather every token with key <= new_hi
                tl.store(sb + MODE, GATHER)
                tl.store(sb + LO, 0)
                tl.store(sb + HI, new_hi)
                tl.store(sb + CNT, n_hi)
                tl.store(sb + KIND, 0)
                tl.store(goff_ptr + o, tl.cumsum(chi, axis=0) - chi, mask=ok)
            else:
                tl.store(sb + LO, new_lo)
                tl.store(sb + HI, new_hi)
        else:
            if new_lo == new_hi:
                tl.store(sb + MODE, THRESH)
                tl.store(sb + THR, new_hi)
            elif n_in <= CAP:                         # gather the tokens in [new_lo, new_hi]
                tl.store(sb + MODE, GATHER)
                tl.store(sb + LO, new_lo)
                tl.store(sb + HI, new_hi)
                tl.store(sb + CNT, n_in)
                tl.store(sb + KIND, 1)
                tl.store(goff_ptr + o, tl.cumsum(chi - clo, axis=0) - (chi - clo), mask=ok)
            else:
                tl.store(sb + LO, new_lo)
                tl.store(sb + HI, new_hi)


@_kernel
def _gather_kernel(x_ptr, stride, V, L, S, st_ptr, sf_ptr, temp_ptr, goff_ptr, gz_ptr, gi_ptr,
                   BLOCK: tl.constexpr, CAP: tl.constexpr):
    """Copy a GATHER row's candidates of one chunk to the row's scratch at the chunk's offset."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    sb = st_ptr + row.to(tl.int64) * NI
    mode = tl.load(sb + MODE)
    if mode == GATHER:
        lo = tl.load(sb + LO)
        hi = tl.load(sb + HI)
        m = tl.load(sf_ptr + row.to(tl.int64) * NF + ROWMAX)
        t = tl.load(temp_ptr + row)
        n = tl.load(goff_ptr + (row * S + s).to(tl.int64))
        jj = tl.arange(0, 2)
        xs = _x_threshold(tl.where(jj == 0, hi, lo - 1), m, t)     # key <= hi, key < lo
        x_hi = _pick(xs, jj, 0)
        x_below = _pick(xs, jj, 1)
        base = x_ptr + row.to(tl.int64) * stride
        offs = tl.arange(0, BLOCK)
        start, end = _chunk(s, V, L)
        for i in range(start, end, BLOCK):
            idx = i + offs
            x = tl.load(base + idx, mask=idx < end, other=float("-inf"))
            sel = (x >= x_hi) & (x < x_below)
            cnt = tl.sum(sel.to(tl.int32), axis=0)
            if cnt > 0:                               # most blocks hold none: skip the scan
                z, key = _zkey(x, m, t)
                pos = n + tl.cumsum(sel.to(tl.int32), axis=0) - 1
                dst = row.to(tl.int64) * CAP + pos
                tl.store(gz_ptr + dst, z, mask=sel & (pos < CAP))
                tl.store(gi_ptr + dst, idx, mask=sel & (pos < CAP))
            n += cnt


@_kernel
def _finish_kernel(st_ptr, sf_ptr, k_ptr, p_ptr, minp_ptr, u_ptr, tok_ptr, gz_ptr, gi_ptr,
                   HAS_U: tl.constexpr, PP: tl.constexpr, CAP: tl.constexpr):
    """One program per GATHER row: the search ends on the gathered candidates, in registers.
    A top-k gather holds every token the filters can keep: top-p, min-p and the draw run here
    too. A top-p gather holds the tokens in [lo, hi]; the mass below lo comes from the pass."""
    row = tl.program_id(0)
    sb = st_ptr + row.to(tl.int64) * NI
    fb = sf_ptr + row.to(tl.int64) * NF
    mode = tl.load(sb + MODE)
    if mode <= SEARCH_P:                              # NPASS passes were not enough
        tl.store(sb + STATUS, UNFINISHED)
    if mode == GATHER:
        lo = tl.load(sb + LO)
        hi = tl.load(sb + HI)
        n = tl.load(sb + CNT)
        kind = tl.load(sb + KIND)
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
            tl.store(sb + THR, thr)
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
                tl.store(sb + MODE, DRAWN)
            else:
                tl.store(sb + MODE, THRESH)
        else:
            mlo = tl.load(fb + MLO)
            total = tl.load(fb + TOTAL)
            thr = _select_regs(gkey, ge, lo, hi, p * total - mlo, PP)
            tl.store(sb + THR, thr)
            tl.store(sb + MODE, THRESH)


@_kernel
def _mass_kernel(x_ptr, stride, V, L, S, st_ptr, sf_ptr, temp_ptr, minp_ptr, ws_ptr, lp_ptr,
                 BLOCK: tl.constexpr):
    """Per chunk of a THRESH row: the kept mass, and the last token with positive weight."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    sb = st_ptr + row.to(tl.int64) * NI
    mode = tl.load(sb + MODE)
    if mode == THRESH:
        thr = tl.load(sb + THR)
        m = tl.load(sf_ptr + row.to(tl.int64) * NF + ROWMAX)
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
            w = _kept_weight(base, idx, inb, m, t, thr, mp)
            w_acc += w
            last_acc = tl.maximum(last_acc, tl.where(w > 0, idx, -1))
        o = (row * S + s).to(tl.int64)
        tl.store(ws_ptr + o, tl.sum(w_acc, axis=0))
        tl.store(lp_ptr + o, tl.max(last_acc, axis=0))


@_kernel
def _draw_kernel(x_ptr, stride, V, L, S, st_ptr, sf_ptr, temp_ptr, minp_ptr, u_ptr, ws_ptr, lp_ptr,
                 tok_ptr, SP: tl.constexpr, BLOCK: tl.constexpr):
    """One program per THRESH row: the contract's inverse CDF in token-id order. The chunk where
    the running kept mass first exceeds u * total, then the token inside it (a rounding miss in
    the chunk: its last positive token; past the last chunk: the row's last positive token)."""
    row = tl.program_id(0)
    sb = st_ptr + row.to(tl.int64) * NI
    mode = tl.load(sb + MODE)
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
            thr = tl.load(sb + THR)
            m = tl.load(sf_ptr + row.to(tl.int64) * NF + ROWMAX)
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
                w = _kept_weight(base, idx, inb, m, t, thr, mp)
                c = run + tl.cumsum(w, axis=0)
                hit = tl.min(tl.where(inb & (c > target), idx, BIGIDX), axis=0)
                found = tl.where(hit < BIGIDX, hit, -1)
                run = tl.max(tl.where(inb, c, run), axis=0)
                i += BLOCK
            tok = tl.where(found >= 0, found, tok)
        tl.store(tok_ptr + row, tok.to(tl.int64))
        tl.store(sb + MODE, DRAWN)


# SPLIT programs per row (the chunk length is rounded up to whole BLOCKs); NPASS search passes are
# launched (no sync); a row still searching after them is redone by the one-program kernel. Under
# the interpreter the tests pass small CAP / BLOCK / SPLIT / NPASS so every mode runs on small rows.
# H200, 256 x 128,256 fp32 (docs/performance.md): PP 4 with 5 passes beat PP 8 with 4 on every
# workload; the CUDA graph (GRAPH) beat eager launches in 7 of 8 workload-runs (by 15-23 % when the
# host was loaded), although it copies the logits; it keeps one copy per cached shape. BLOCK 256
# with 2 warps vs 512 with 4: 5-20 % faster in two runs, 5-13 % slower in the third (the one with
# the sampling spec passed natively at this config): within the run-to-run noise of a host-bound call.
# The first pass (max, flags; a plain reduction) runs at its own block, 1024 / 8 warps: 0.11 ms at
# 256 / 2 (sampling_split_profile5.log) against 0.09 ms in the final profile (profile6.log) and
# 0.05 ms in an earlier one where every kernel ran at 1024 / 8 (profile.log, docs/results/).
SPLIT_CONFIG = dict(SPLIT=16, BLOCK=256, PP=4, num_warps=2, CAP=2048, NPASS=5, GRAPH=True,
                    SCAN_BLOCK=1024, SCAN_WARPS=8)
# off CUDA (the interpreter): small chunks and CAP, so a few-hundred-token row takes several
# passes, gathers, finishes on the row, and sometimes needs the one-program redo
INTERPRET_CONFIG = dict(SPLIT=4, BLOCK=32, CAP=16, NPASS=3, SCAN_BLOCK=64, SCAN_WARPS=4)
CACHE_LAUNCHES = True    # reuse each compiled kernel (_launch); False: plain kernel[grid](...) launches
_COMPILED: dict = {}


def _launch(kernel, grid, args, consts, num_warps):
    """kernel[grid](*args, **consts) -- on CUDA through the compiled kernel of the first such call
    (Triton's CompiledKernel[grid](...), as its fused-softmax tutorial launches): the kernels are
    not specialised on argument values (_kernel), so the compiled kernel depends only on the
    argument types, the constexprs and num_warps, which make the key."""
    if not (CACHE_LAUNCHES and args[0].is_cuda):
        kernel[grid](*args, **consts, num_warps=num_warps)
        return
    types = tuple(a.dtype if isinstance(a, torch.Tensor) else abs(a) >= 2 ** 31 for a in args)
    key = (kernel, types, tuple(consts.items()), num_warps, args[0].device)
    compiled = _COMPILED.get(key)
    if compiled is None:
        _COMPILED[key] = kernel[grid](*args, **consts, num_warps=num_warps)
        return
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    compiled[grid3](*args, *(consts[n] for n in kernel.arg_names if n in consts))


def _carve(dtype, device, *shapes):
    """Views of one fresh allocation, one per shape, each 16-byte aligned (contents undefined)."""
    sizes = [-(-int(torch.Size(sh).numel()) // 4) * 4 for sh in shapes]
    flat = torch.empty(sum(sizes), dtype=dtype, device=device)
    return [part[:torch.Size(sh).numel()].view(sh) for part, sh in zip(flat.split(sizes), shapes)]


def _launch_all(x, temperature, top_k, top_p, min_p, u, cfg):
    """Allocate the outputs and scratch and launch the whole schedule (no sync). Returns
    (tok, st, sf): tokens, int32 state (mode, ..., thr, status), float32 state (row max, ...)."""
    b, vocab = x.shape
    dev = x.device
    block = min(cfg["BLOCK"], max(16, triton.next_power_of_2(vocab)))
    chunk = triton.cdiv(triton.cdiv(vocab, max(1, cfg["SPLIT"])), block) * block
    s = triton.cdiv(vocab, chunk)
    sp = max(2, triton.next_power_of_2(s))
    pp, cap, warps = cfg["PP"], cfg["CAP"], cfg["num_warps"]
    tok = torch.empty(b, dtype=torch.int64, device=dev)
    # the state and scratch, carved from one int32 and one float32 allocation (each allocation and
    # launch costs host time that the ~0.5 ms call cannot hide)
    st, pi, pc, pcx, goff, gi, lp = _carve(torch.int32, dev, (b, NI.value), (b, s, 4), (b, s, pp), (b, s, 2), (b, s),
                                           (b, cap), (b, s))
    sf, pf, pfw, pfx, gz, ws = _carve(torch.float32, dev, (b, NF.value), (b, s, 2), (b, s, pp), (b, s, 2), (b, cap), (b, s))
    uu = u if u is not None else sf
    rows, chunks = (b,), (s, b)
    common = (x, x.stride(0), vocab, chunk)
    scan_block = min(cfg.get("SCAN_BLOCK", block), max(16, triton.next_power_of_2(vocab)))
    _launch(_scan_kernel, chunks, (*common, pf, pi, s), dict(BLOCK=scan_block), cfg.get("SCAN_WARPS", warps))
    _launch(_init_kernel, rows, (pf, pi, st, sf, tok, temperature, top_k, top_p, vocab, s), dict(SP=sp), 4)
    for _ in range(cfg["NPASS"]):
        _launch(_pass_kernel, chunks, (*common, s, st, sf, temperature, pc, pcx, pfw, pfx),
                dict(BLOCK=block, PP=pp), warps)
        _launch(_decide_kernel, rows, (st, sf, top_k, top_p, pc, pcx, pfw, pfx, goff, s),
                dict(SP=sp, PP=pp, CAP=cap), 4)
    _launch(_gather_kernel, chunks, (*common, s, st, sf, temperature, goff, gz, gi), dict(BLOCK=block, CAP=cap),
            warps)
    _launch(_finish_kernel, rows, (st, sf, top_k, top_p, min_p, uu, tok, gz, gi),
            dict(HAS_U=u is not None, PP=pp, CAP=cap), 8 if cap >= 1024 else 4)
    if u is not None:
        _launch(_mass_kernel, chunks, (*common, s, st, sf, temperature, min_p, ws, lp), dict(BLOCK=block), warps)
        _launch(_draw_kernel, rows, (*common, s, st, sf, temperature, min_p, uu, ws, lp, tok),
                dict(SP=sp, BLOCK=block), 4)
    return tok, st, sf


_GRAPHS = threading.local()   # per thread: a graph's buffers must not be shared by concurrent calls
MAX_GRAPHS = 8       # captured schedules kept per thread (one per shape / config / stream), oldest dropped


def _launch_graphed(x, params, u, cfg):
    """_launch_all through a CUDA graph: the ~14 launches (each ~15-40 us of host time, which the
    ~0.4 ms of GPU work cannot hide) become one replay. The graph reads fixed buffers, so the
    inputs are copied in (the logits: one device copy) and the outputs cloned out. Captured on
    the first call per (thread, shape, device, stream, with/without uniforms, config), after an
    eager warm-up run that compiles every kernel; it holds its buffers (the logits' size) until
    dropped. Per thread and stream, so that concurrent calls never share the fixed buffers."""
    graphs = _GRAPHS.__dict__.setdefault("d", {})
    key = (tuple(x.shape), x.device, torch.cuda.current_stream(x.device).cuda_stream, u is not None,
           tuple(sorted(cfg.items())))
    entry = graphs.get(key)
    if entry is None:
        sx = x.clone()
        sp = [p.clone() for p in params]
        su = None if u is None else u.clone()
        _launch_all(sx, *sp, su, cfg)                    # warm-up: compile, fill the launch cache
        torch.cuda.synchronize(x.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = _launch_all(sx, *sp, su, cfg)
        while len(graphs) >= MAX_GRAPHS:
            graphs.pop(next(iter(graphs)))
        entry = graphs[key] = (graph, sx, sp, su, outs)
    graph, sx, sp, su, outs = entry
    sx.copy_(x)
    for dst, src in zip(sp, params):
        dst.copy_(src)
    if u is not None:
        su.copy_(u)
    graph.replay()
    return tuple(t.clone() for t in outs)


def sort_free_split(x, temperature, top_k, top_p, min_p, u=None, *, config=None):
    """``optimized._sampling_triton.sort_free``'s contract and return value, each row split over
    ``SPLIT`` programs per full pass (module doc). One device sync (are all rows finished?); rows
    whose search needed more than NPASS passes are redone by ``sort_free`` (one program per row).
    On CUDA with config GRAPH (the default) the schedule replays a captured CUDA graph
    (_launch_graphed)."""
    assert x.dtype == torch.float32 and x.dim() == 2
    cfg = {**SPLIT_CONFIG, **({} if x.is_cuda else INTERPRET_CONFIG), **(config or {})}
    if cfg["PP"] not in (4, 8):
        raise ValueError(f"config PP must be 4 or 8 (the pass kernel's written-out pivots), got {cfg['PP']}")
    if x.stride(1) != 1:
        x = x.contiguous()
    b = x.shape[0]
    if b == 0:
        empty = torch.empty(0, dtype=torch.int32, device=x.device)
        tok = torch.empty(0, dtype=torch.int64, device=x.device) if u is not None else None
        return tok, empty, torch.empty(0, device=x.device), empty
    params = [a.contiguous() for a in (temperature, top_k, top_p, min_p)]
    u = None if u is None else u.contiguous()
    graphed = cfg.pop("GRAPH", False) and x.is_cuda and CACHE_LAUNCHES
    tok, st, sf = _launch_graphed(x, params, u, cfg) if graphed else _launch_all(x, *params, u, cfg)
    status, m, thr = st[:, STATUS.value], sf[:, ROWMAX.value], st[:, THR.value]
    redo = (status == UNFINISHED.value).nonzero()[:, 0]         # the one sync
    if redo.numel():
        t1, s1, m1, thr1 = sort_free(x[redo], *(a[redo] for a in params), None if u is None else u[redo])
        status[redo], m[redo], thr[redo] = s1, m1, thr1
        if u is not None:
            tok[redo] = t1
    return (tok if u is not None else None), status, m, thr
