"""The split-row Triton schedule of the sort-free sampler: each row split over several programs.

The same contract and the same search as the one-program schedule (one_program.py; read
key_search.py's module doc first: keys, pivots, the kept set {t : key_t <= K}); only the schedule
differs. There one program owns a row and streams it 4-8 times, so 256 rows keep 256 programs
busy on 132 SMs and the kernel is bound by per-program work. Here every full pass over the logits
is a grid of (programs_per_row, rows) programs, each over one chunk of its row, and a small
one-program-per-row kernel combines the chunks' partial results in a fixed order
(deterministic: no atomics) and moves the row's state on. A row goes through these modes:

    SEARCHING_TOP_K  the top-k search: counts at the pivots in [lo, hi] (until lo == hi, or
                     <= gather_cap tokens have key <= hi: then GATHERING them)
    SEARCHING_TOP_P  the top-p search: masses at the pivots in [lo, hi] over key <= top_k_cut
                     (until lo == hi, or <= gather_cap tokens lie in [lo, hi]: then GATHERING
                     them, the mass below lo known)
    GATHERING        its candidates are copied (z and id, token-id order) to a per-row scratch;
                     the chunk offsets come from the last pass's per-chunk counts, so the copy is
                     ordered and needs no atomics; one program per row finishes the search in
                     registers (and, for a top-k gather, top-p, min-p and the draw too)
    THRESHOLD_KNOWN  the threshold is final; with uniforms: per-chunk kept masses, then one
                     program per row picks the chunk where the CDF crosses u * total and scans
                     only that chunk
    DRAWN            the token is known (greedy rows at once: the first index of the row max)
    BAD_ROW          NaN, +inf, or every token -inf (the caller raises the reference's error)

Unlike the one-program search, a pass does not shrink [lo, hi] to the real keys around the
chosen pivot (that costs a max and a min per pivot and element); the interval is
[pivot_{j-1} + 1, pivot_j], which shrinks strictly every pass, and the register finish ends on
an exact key, so ties are never split and the result is the same threshold.

Host side: ``search_passes`` search passes are launched, then the gather, finish and draw, with
no sync in between; one sync at the end asks whether a row was still searching after them (its
candidates spread over many keys, > gather_cap tokens each time): such rows are redone by the
one-program kernel. The kernels are compiled without value specialisation and relaunched through
their compiled form (launch_cache.py), and on CUDA the whole schedule replays as one CUDA graph
(graph_cache.py). Every setting is a field of
:class:`optimized.sampling.config.SplitConfig`, passed in."""
from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from optimized.sampling import graph_cache, one_program
from optimized.sampling.config import OneProgramConfig, SplitConfig, split_default
from optimized.sampling.key_search import (NEG_INF_KEY, NO_KEY, bad_flags, kept_weight, pick, pivot_keys,
                                           search_in_registers, z_and_key)
from optimized.sampling.launch_cache import launch, unspecialised_jit
from optimized.sampling.one_program import SortFreeResult

# a row's mode (module doc); the searching modes come first (mode <= SEARCHING_TOP_P)
SEARCHING_TOP_K, SEARCHING_TOP_P, GATHERING, THRESHOLD_KNOWN, DRAWN, BAD_ROW = (tl.constexpr(i) for i in range(6))
# a row's int32 state: mode, search interval [lo, hi], top_k_cut (top-p counts key <= top_k_cut),
# gather count, gather kind (0 top-k, 1 top-p), threshold, status; its float32 state: row max,
# mass below lo, total mass (top-p)
MODE, LO, HI, TOP_K_CUT, GATHER_COUNT, GATHER_KIND, THRESHOLD, STATUS = (tl.constexpr(i) for i in range(8))
INT_STATE_WIDTH = tl.constexpr(8)
ROW_MAX, MASS_BELOW_LO, TOTAL_MASS = (tl.constexpr(i) for i in range(3))
FLOAT_STATE_WIDTH = tl.constexpr(4)
NO_INDEX = tl.constexpr(2147483647)
UNFINISHED = tl.constexpr(4)   # status of a row whose search had not ended after the search passes


@triton.jit
def _chunk_bounds(s, vocab, chunk_len):
    start = s * chunk_len
    return start, tl.minimum(start + chunk_len, vocab)


@unspecialised_jit
def scan_kernel(x_ptr, stride, vocab, chunk_len, scan_float_ptr, scan_int_ptr, n_chunks, BLOCK: tl.constexpr):
    """Per chunk: max (NaN excluded), smallest finite value, NaN / +inf flags, count of finite
    logits, first index of the chunk max."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    base = x_ptr + row.to(tl.int64) * stride
    offs = tl.arange(0, BLOCK)
    start, end = _chunk_bounds(s, vocab, chunk_len)
    best = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    bidx = tl.full([BLOCK], NO_INDEX, dtype=tl.int32)
    mnf = tl.full([BLOCK], float("inf"), dtype=tl.float32)
    nan_acc = tl.zeros([BLOCK], dtype=tl.int32)
    inf_acc = tl.zeros([BLOCK], dtype=tl.int32)
    fin_acc = tl.zeros([BLOCK], dtype=tl.int32)
    for i in range(start, end, BLOCK):
        idx = i + offs
        inb = idx < end
        x = tl.load(base + idx, mask=inb, other=float("-inf"))
        nan_acc, inf_acc, fin_acc, mnf, xv = bad_flags(x, nan_acc, inf_acc, fin_acc, mnf)
        better = (xv > best) | ((bidx == NO_INDEX) & inb & (xv == best))
        bidx = tl.where(better, idx, bidx)
        best = tl.where(better, xv, best)
    cmax = tl.max(best, axis=0)
    cidx = tl.min(tl.where(best == cmax, bidx, NO_INDEX), axis=0)
    o = (row * n_chunks + s).to(tl.int64)
    tl.store(scan_float_ptr + o * 2, cmax)
    tl.store(scan_float_ptr + o * 2 + 1, tl.min(mnf, axis=0))
    tl.store(scan_int_ptr + o * 4, tl.max(nan_acc, axis=0))
    tl.store(scan_int_ptr + o * 4 + 1, tl.max(inf_acc, axis=0))
    tl.store(scan_int_ptr + o * 4 + 2, tl.sum(fin_acc, axis=0))
    tl.store(scan_int_ptr + o * 4 + 3, cidx)


@unspecialised_jit
def init_kernel(scan_float_ptr, scan_int_ptr, state_int_ptr, state_float_ptr, token_ptr, temperature_ptr, top_k_ptr,
                top_p_ptr, vocab, n_chunks, CHUNKS_POW2: tl.constexpr):
    """One program per row: combines the scan's chunks (in chunk order) and starts the row."""
    row = tl.program_id(0)
    ss = tl.arange(0, CHUNKS_POW2)
    ok = ss < n_chunks
    o = (row * n_chunks + ss).to(tl.int64)
    cmax = tl.load(scan_float_ptr + o * 2, mask=ok, other=float("-inf"))
    cmin = tl.load(scan_float_ptr + o * 2 + 1, mask=ok, other=float("inf"))
    nan = tl.max(tl.load(scan_int_ptr + o * 4, mask=ok, other=0), axis=0)
    inf = tl.max(tl.load(scan_int_ptr + o * 4 + 1, mask=ok, other=0), axis=0)
    nfin = tl.sum(tl.load(scan_int_ptr + o * 4 + 2, mask=ok, other=0), axis=0)
    cidx = tl.load(scan_int_ptr + o * 4 + 3, mask=ok, other=NO_INDEX)
    m = tl.max(cmax, axis=0)
    xmin = tl.min(cmin, axis=0)
    status = tl.where(nan > 0, 1, tl.where(inf > 0, 2, tl.where(nfin == 0, 3, 0)))
    temperature = tl.load(temperature_ptr + row)
    k = tl.load(top_k_ptr + row).to(tl.int32)
    p = tl.load(top_p_ptr + row)
    zmin, hi0 = z_and_key(xmin, m, temperature)
    first = tl.min(tl.where(ok & (cmax == m), cidx, NO_INDEX), axis=0)     # greedy: first max
    search = tl.where((k > 0) & (k < vocab) & (nfin >= k), SEARCHING_TOP_K,
                      tl.where(p < 1.0, SEARCHING_TOP_P, THRESHOLD_KNOWN))
    # hi0 == 0: every finite token has z = 0, so both searches end at key 0 at once
    thr = tl.where(temperature == 0, 0, tl.where((search != THRESHOLD_KNOWN) & (hi0 == 0), 0, NEG_INF_KEY))
    mode = tl.where(status != 0, BAD_ROW,
                    tl.where(temperature == 0, DRAWN, tl.where(hi0 == 0, THRESHOLD_KNOWN, search)))
    row_int = state_int_ptr + row.to(tl.int64) * INT_STATE_WIDTH
    tl.store(row_int + MODE, mode)
    tl.store(row_int + LO, 0)
    tl.store(row_int + HI, hi0)
    tl.store(row_int + TOP_K_CUT, hi0)      # every finite token (no top-k, or -inf among the top k)
    tl.store(row_int + GATHER_COUNT, 0)
    tl.store(row_int + GATHER_KIND, 0)
    tl.store(row_int + THRESHOLD, thr)
    tl.store(row_int + STATUS, status)
    row_float = state_float_ptr + row.to(tl.int64) * FLOAT_STATE_WIDTH
    tl.store(row_float + ROW_MAX, m)
    tl.store(row_float + MASS_BELOW_LO, 0.0)
    tl.store(row_float + TOTAL_MASS, -1.0)
    tl.store(token_ptr + row, first.to(tl.int64))


@triton.jit
def _ordered(o):
    """Float bits <-> ordered ints (an involution): ordered ints increase with the float."""
    return o ^ ((o >> 31) & 0x7FFFFFFF)


@triton.jit
def _logit_threshold(key, m, t):
    """Per key K (a vector): the smallest float x with key(x) <= K, key(x) as z_and_key computes it
    (the bits of 0 - z, z = fl(fl(x - m) / t)). z is non-decreasing in x, so key(x) <= K  <=>
    x >= the result: a pass compares the raw logits with these thresholds and divides nothing.
    Found by bisection over the ordered float bits in [-inf, m] (key(m) = 0 <= K); K < 0: +inf
    (no x); K >= NEG_INF_KEY: -inf (every x, -inf included)."""
    lo = _ordered(tl.full(key.shape, float("-inf"), tl.float32).to(tl.int32, bitcast=True)).to(tl.int64)
    hi = _ordered((m + tl.zeros(key.shape, tl.float32)).to(tl.int32, bitcast=True)).to(tl.int64)
    for _ in tl.static_range(33):              # hi - lo < 2^33 halves to 1
        mid = lo + (hi - lo) // 2
        z, kx = z_and_key(_ordered(mid.to(tl.int32)).to(tl.float32, bitcast=True), m, t)
        ok = kx <= key
        hi = tl.where(ok, mid, hi)
        lo = tl.where(ok, lo, mid)
    xt = _ordered(hi.to(tl.int32)).to(tl.float32, bitcast=True)
    xt = tl.where(key >= NEG_INF_KEY, float("-inf"), xt)
    return tl.where(key < 0, float("inf"), xt)


@triton.jit
def _count_at_or_above(c, f, x, w, xt):
    """One pivot's running count and mass of the logits >= its threshold (per lane)."""
    ge = x >= xt
    return c + ge.to(tl.int32), f + tl.where(ge, w, 0.0)


@triton.jit
def _search_pass_chunk(base, start, end, m, t, x0, x1, x2, x3, x4, x5, x6, x7, x_hi, x_below, x_cut,
                       WEIGHTED: tl.constexpr, UNIT_T: tl.constexpr, PIVOTS: tl.constexpr, BLOCK: tl.constexpr):
    """The pass over one chunk against the thresholds of the PIVOTS pivots (x0..x7; PIVOTS = 4
    uses x0..x3), of hi (x_hi), of lo - 1 (x_below) and of top_k_cut (x_cut). WEIGHTED (top-p)
    also sums the weights exp(z) (z exact: a plain subtraction when every T of the row is 1)."""
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
        c0, f0 = _count_at_or_above(c0, f0, x, w, x0)
        c1, f1 = _count_at_or_above(c1, f1, x, w, x1)
        c2, f2 = _count_at_or_above(c2, f2, x, w, x2)
        c3, f3 = _count_at_or_above(c3, f3, x, w, x3)
        if PIVOTS == 8:
            c4, f4 = _count_at_or_above(c4, f4, x, w, x4)
            c5, f5 = _count_at_or_above(c5, f5, x, w, x5)
            c6, f6 = _count_at_or_above(c6, f6, x, w, x6)
            c7, f7 = _count_at_or_above(c7, f7, x, w, x7)
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


@unspecialised_jit
def search_pass_kernel(x_ptr, stride, vocab, chunk_len, n_chunks, state_int_ptr, state_float_ptr, temperature_ptr,
                       pivot_count_ptr, bound_count_ptr, pivot_mass_ptr, bound_mass_ptr,
                       BLOCK: tl.constexpr, PIVOTS: tl.constexpr):
    """One search pass over one chunk: per pivot, the count (and for top-p the mass) of keys <=
    the pivot; plus the count of keys <= hi and < lo, the total mass and the mass below lo.
    Every key bound becomes a threshold on the raw logit first (_logit_threshold), so counting
    divides nothing; the PIVOTS pivots are scalars with one pair of 1-D accumulators each, written
    out (a (BLOCK, PIVOTS) tile spreads the pivots over a warp's lanes and moves every logit
    through shared memory: 2-5x the read time in the H200 profile)."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    row_int = state_int_ptr + row.to(tl.int64) * INT_STATE_WIDTH
    mode = tl.load(row_int + MODE)
    if mode <= SEARCHING_TOP_P:
        lo = tl.load(row_int + LO)
        hi = tl.load(row_int + HI)
        top_k_cut = tl.load(row_int + TOP_K_CUT)
        m = tl.load(state_float_ptr + row.to(tl.int64) * FLOAT_STATE_WIDTH + ROW_MAX)
        t = tl.load(temperature_ptr + row)
        piv = pivot_keys(lo, hi, PIVOTS)
        jj = tl.arange(0, 16)
        keys = tl.where(jj < PIVOTS,
                        tl.sum(tl.where(jj[:, None] == tl.arange(0, PIVOTS)[None, :], piv[None, :], 0), axis=1),
                        tl.where(jj == 8, hi, tl.where(jj == 9, lo - 1, top_k_cut)))
        xs = _logit_threshold(keys, m, t)
        x0, x1, x2, x3 = pick(xs, jj, 0), pick(xs, jj, 1), pick(xs, jj, 2), pick(xs, jj, 3)
        x4, x5, x6, x7 = pick(xs, jj, 4), pick(xs, jj, 5), pick(xs, jj, 6), pick(xs, jj, 7)
        x_hi, x_below, x_cut = pick(xs, jj, 8), pick(xs, jj, 9), pick(xs, jj, 10)
        base = x_ptr + row.to(tl.int64) * stride
        start, end = _chunk_bounds(s, vocab, chunk_len)
        if mode == SEARCHING_TOP_K:
            r = _search_pass_chunk(base, start, end, m, t, x0, x1, x2, x3, x4, x5, x6, x7, x_hi, x_below, x_cut,
                                   False, False, PIVOTS, BLOCK)
        elif t == 1.0:
            r = _search_pass_chunk(base, start, end, m, t, x0, x1, x2, x3, x4, x5, x6, x7, x_hi, x_below, x_cut,
                                   True, True, PIVOTS, BLOCK)
        else:
            r = _search_pass_chunk(base, start, end, m, t, x0, x1, x2, x3, x4, x5, x6, x7, x_hi, x_below, x_cut,
                                   True, False, PIVOTS, BLOCK)
        o = (row * n_chunks + s).to(tl.int64)
        for j in tl.static_range(PIVOTS):
            tl.store(pivot_count_ptr + o * PIVOTS + j, r[j])
            tl.store(pivot_mass_ptr + o * PIVOTS + j, r[8 + j])
        tl.store(bound_count_ptr + o * 2, r[16])
        tl.store(bound_count_ptr + o * 2 + 1, r[17])
        tl.store(bound_mass_ptr + o * 2, r[18])
        tl.store(bound_mass_ptr + o * 2 + 1, r[19])


@unspecialised_jit
def decide_kernel(state_int_ptr, state_float_ptr, top_k_ptr, top_p_ptr, pivot_count_ptr, bound_count_ptr,
                  pivot_mass_ptr, bound_mass_ptr, gather_offset_ptr, n_chunks,
                  CHUNKS_POW2: tl.constexpr, PIVOTS: tl.constexpr, GATHER_CAP: tl.constexpr):
    """One program per row: sums the chunks' pass results in chunk order, picks the pivot
    interval holding the threshold and moves the row on (module doc). For a gather it writes
    each chunk's offset in the row's scratch (exclusive prefix of its candidate counts)."""
    row = tl.program_id(0)
    row_int = state_int_ptr + row.to(tl.int64) * INT_STATE_WIDTH
    row_float = state_float_ptr + row.to(tl.int64) * FLOAT_STATE_WIDTH
    mode = tl.load(row_int + MODE)
    if mode <= SEARCHING_TOP_P:
        lo = tl.load(row_int + LO)
        hi = tl.load(row_int + HI)
        piv = pivot_keys(lo, hi, PIVOTS)
        ss = tl.arange(0, CHUNKS_POW2)
        jj = tl.arange(0, PIVOTS)
        ok = ss < n_chunks
        o = (row * n_chunks + ss).to(tl.int64)
        at = o[:, None] * PIVOTS + jj[None, :]                                  # (CHUNKS_POW2, PIVOTS)
        chunk_counts = tl.load(pivot_count_ptr + at, mask=ok[:, None], other=0)
        chunk_masses = tl.load(pivot_mass_ptr + at, mask=ok[:, None], other=0.0)
        c_hi_s = tl.load(bound_count_ptr + o * 2, mask=ok, other=0)
        c_lo_s = tl.load(bound_count_ptr + o * 2 + 1, mask=ok, other=0)
        c = tl.sum(chunk_counts, axis=0)
        f = tl.sum(chunk_masses, axis=0)
        if mode == SEARCHING_TOP_K:
            k = tl.load(top_k_ptr + row).to(tl.int32)
            jstar = tl.min(tl.where(c >= k, jj, PIVOTS), axis=0)
        else:
            total = tl.sum(tl.load(bound_mass_ptr + o * 2, mask=ok, other=0.0), axis=0)
            p = tl.load(top_p_ptr + row)
            jstar = tl.min(tl.where(f >= p * total, jj, PIVOTS), axis=0)
            mass_below = tl.where(jstar > 0, pick(f, jj, jstar - 1),
                                  tl.sum(tl.load(bound_mass_ptr + o * 2 + 1, mask=ok, other=0.0), axis=0))
            tl.store(row_float + MASS_BELOW_LO, mass_below)
            tl.store(row_float + TOTAL_MASS, total)
        new_hi = tl.where(jstar < PIVOTS, pick(piv, jj, jstar), hi)
        new_lo = tl.where(jstar > 0, pick(piv, jj, jstar - 1) + 1, lo)
        # per chunk: tokens with key <= new_hi, and with key < new_lo
        chi = tl.where(jstar < PIVOTS, tl.sum(tl.where(jj[None, :] == jstar, chunk_counts, 0), axis=1), c_hi_s)
        clo = tl.where(jstar > 0, tl.sum(tl.where(jj[None, :] == jstar - 1, chunk_counts, 0), axis=1), c_lo_s)
        n_hi = tl.sum(chi, axis=0)
        n_in = n_hi - tl.sum(clo, axis=0)
        if mode == SEARCHING_TOP_K:
            if new_lo == new_hi:                    # the k-th key, exactly (a tie group > GATHER_CAP)
                p = tl.load(top_p_ptr + row)
                tl.store(row_int + MODE, tl.where((p < 1.0) & (new_hi > 0), SEARCHING_TOP_P, THRESHOLD_KNOWN))
                tl.store(row_int + LO, 0)
                tl.store(row_int + HI, new_hi)
                tl.store(row_int + TOP_K_CUT, new_hi)
                tl.store(row_int + THRESHOLD, new_hi)
            elif n_hi <= GATHER_CAP:                # gather every token with key <= new_hi
                tl.store(row_int + MODE, GATHERING)
                tl.store(row_int + LO, 0)
                tl.store(row_int + HI, new_hi)
                tl.store(row_int + GATHER_COUNT, n_hi)
                tl.store(row_int + GATHER_KIND, 0)
                tl.store(gather_offset_ptr + o, tl.cumsum(chi, axis=0) - chi, mask=ok)
            else:
                tl.store(row_int + LO, new_lo)
                tl.store(row_int + HI, new_hi)
        else:
            if new_lo == new_hi:
                tl.store(row_int + MODE, THRESHOLD_KNOWN)
                tl.store(row_int + THRESHOLD, new_hi)
            elif n_in <= GATHER_CAP:                # gather the tokens in [new_lo, new_hi]
                tl.store(row_int + MODE, GATHERING)
                tl.store(row_int + LO, new_lo)
                tl.store(row_int + HI, new_hi)
                tl.store(row_int + GATHER_COUNT, n_in)
                tl.store(row_int + GATHER_KIND, 1)
                tl.store(gather_offset_ptr + o, tl.cumsum(chi - clo, axis=0) - (chi - clo), mask=ok)
            else:
                tl.store(row_int + LO, new_lo)
                tl.store(row_int + HI, new_hi)


@unspecialised_jit
def gather_kernel(x_ptr, stride, vocab, chunk_len, n_chunks, state_int_ptr, state_float_ptr, temperature_ptr,
                  gather_offset_ptr, gathered_z_ptr, gathered_id_ptr, BLOCK: tl.constexpr, GATHER_CAP: tl.constexpr):
    """Copy a GATHERING row's candidates of one chunk to the row's scratch at the chunk's offset."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    row_int = state_int_ptr + row.to(tl.int64) * INT_STATE_WIDTH
    mode = tl.load(row_int + MODE)
    if mode == GATHERING:
        lo = tl.load(row_int + LO)
        hi = tl.load(row_int + HI)
        m = tl.load(state_float_ptr + row.to(tl.int64) * FLOAT_STATE_WIDTH + ROW_MAX)
        t = tl.load(temperature_ptr + row)
        n = tl.load(gather_offset_ptr + (row * n_chunks + s).to(tl.int64))
        jj = tl.arange(0, 2)
        xs = _logit_threshold(tl.where(jj == 0, hi, lo - 1), m, t)     # key <= hi, key < lo
        x_hi = pick(xs, jj, 0)
        x_below = pick(xs, jj, 1)
        base = x_ptr + row.to(tl.int64) * stride
        offs = tl.arange(0, BLOCK)
        start, end = _chunk_bounds(s, vocab, chunk_len)
        for i in range(start, end, BLOCK):
            idx = i + offs
            x = tl.load(base + idx, mask=idx < end, other=float("-inf"))
            sel = (x >= x_hi) & (x < x_below)
            cnt = tl.sum(sel.to(tl.int32), axis=0)
            if cnt > 0:                               # most blocks hold none: skip the scan
                z, key = z_and_key(x, m, t)
                pos = n + tl.cumsum(sel.to(tl.int32), axis=0) - 1
                dst = row.to(tl.int64) * GATHER_CAP + pos
                tl.store(gathered_z_ptr + dst, z, mask=sel & (pos < GATHER_CAP))
                tl.store(gathered_id_ptr + dst, idx, mask=sel & (pos < GATHER_CAP))
            n += cnt


@unspecialised_jit
def finish_kernel(state_int_ptr, state_float_ptr, top_k_ptr, top_p_ptr, min_p_ptr, uniform_ptr, token_ptr,
                  gathered_z_ptr, gathered_id_ptr,
                  HAS_UNIFORMS: tl.constexpr, PIVOTS: tl.constexpr, GATHER_CAP: tl.constexpr):
    """One program per GATHERING row: the search ends on the gathered candidates, in registers.
    A top-k gather holds every token the filters can keep: top-p, min-p and the draw run here
    too. A top-p gather holds the tokens in [lo, hi]; the mass below lo comes from the pass."""
    row = tl.program_id(0)
    row_int = state_int_ptr + row.to(tl.int64) * INT_STATE_WIDTH
    row_float = state_float_ptr + row.to(tl.int64) * FLOAT_STATE_WIDTH
    mode = tl.load(row_int + MODE)
    if mode <= SEARCHING_TOP_P:                 # the search passes were not enough
        tl.store(row_int + STATUS, UNFINISHED)
    if mode == GATHERING:
        lo = tl.load(row_int + LO)
        hi = tl.load(row_int + HI)
        n = tl.load(row_int + GATHER_COUNT)
        kind = tl.load(row_int + GATHER_KIND)
        p = tl.load(top_p_ptr + row)
        co = tl.arange(0, GATHER_CAP)
        valid = co < n
        gz = tl.load(gathered_z_ptr + row.to(tl.int64) * GATHER_CAP + co, mask=valid, other=float("-inf"))
        gkey = tl.where(valid, (0.0 - gz).to(tl.int32, bitcast=True), NO_KEY)
        ge = tl.where(valid, tl.exp(gz), 0.0)
        if kind == 0:
            k = tl.load(top_k_ptr + row)
            thr = search_in_registers(gkey, valid.to(tl.float32), lo, hi, k.to(tl.float32), PIVOTS)
            if p < 1.0:
                wk = tl.where(gkey <= thr, ge, 0.0)
                thr = search_in_registers(gkey, wk, tl.zeros([], dtype=tl.int32), thr, p * tl.sum(wk, axis=0),
                                          PIVOTS)
            tl.store(row_int + THRESHOLD, thr)
            if HAS_UNIFORMS:
                gi = tl.load(gathered_id_ptr + row.to(tl.int64) * GATHER_CAP + co, mask=valid, other=0)
                min_p = tl.load(min_p_ptr + row)
                u = tl.load(uniform_ptr + row).to(tl.float32)
                w = tl.where((gkey <= thr) & (ge >= min_p), ge, 0.0)
                c = tl.cumsum(w, axis=0)
                target = u * tl.sum(w, axis=0)
                first = tl.min(tl.where(valid & (c > target), gi, NO_INDEX), axis=0)
                last = tl.max(tl.where(w > 0, gi, -1), axis=0)
                tl.store(token_ptr + row, tl.where(first < NO_INDEX, first, last).to(tl.int64))
                tl.store(row_int + MODE, DRAWN)
            else:
                tl.store(row_int + MODE, THRESHOLD_KNOWN)
        else:
            mass_below = tl.load(row_float + MASS_BELOW_LO)
            total = tl.load(row_float + TOTAL_MASS)
            thr = search_in_registers(gkey, ge, lo, hi, p * total - mass_below, PIVOTS)
            tl.store(row_int + THRESHOLD, thr)
            tl.store(row_int + MODE, THRESHOLD_KNOWN)


@unspecialised_jit
def mass_kernel(x_ptr, stride, vocab, chunk_len, n_chunks, state_int_ptr, state_float_ptr, temperature_ptr, min_p_ptr,
                chunk_mass_ptr, chunk_last_ptr, BLOCK: tl.constexpr):
    """Per chunk of a THRESHOLD_KNOWN row: the kept mass, and the last token with positive weight."""
    s = tl.program_id(0)
    row = tl.program_id(1)
    row_int = state_int_ptr + row.to(tl.int64) * INT_STATE_WIDTH
    mode = tl.load(row_int + MODE)
    if mode == THRESHOLD_KNOWN:
        thr = tl.load(row_int + THRESHOLD)
        m = tl.load(state_float_ptr + row.to(tl.int64) * FLOAT_STATE_WIDTH + ROW_MAX)
        t = tl.load(temperature_ptr + row)
        min_p = tl.load(min_p_ptr + row)
        base = x_ptr + row.to(tl.int64) * stride
        offs = tl.arange(0, BLOCK)
        start, end = _chunk_bounds(s, vocab, chunk_len)
        w_acc = tl.zeros([BLOCK], dtype=tl.float32)
        last_acc = tl.full([BLOCK], -1, dtype=tl.int32)
        for i in range(start, end, BLOCK):
            idx = i + offs
            inb = idx < end
            w = kept_weight(base, idx, inb, m, t, thr, min_p)
            w_acc += w
            last_acc = tl.maximum(last_acc, tl.where(w > 0, idx, -1))
        o = (row * n_chunks + s).to(tl.int64)
        tl.store(chunk_mass_ptr + o, tl.sum(w_acc, axis=0))
        tl.store(chunk_last_ptr + o, tl.max(last_acc, axis=0))


@unspecialised_jit
def draw_kernel(x_ptr, stride, vocab, chunk_len, n_chunks, state_int_ptr, state_float_ptr, temperature_ptr, min_p_ptr,
                uniform_ptr, chunk_mass_ptr, chunk_last_ptr, token_ptr, CHUNKS_POW2: tl.constexpr, BLOCK: tl.constexpr):
    """One program per THRESHOLD_KNOWN row: the contract's inverse CDF in token-id order. The
    chunk where the running kept mass first exceeds u * total, then the token inside it (a
    rounding miss in the chunk: its last positive token; past the last chunk: the row's last
    positive token)."""
    row = tl.program_id(0)
    row_int = state_int_ptr + row.to(tl.int64) * INT_STATE_WIDTH
    mode = tl.load(row_int + MODE)
    if mode == THRESHOLD_KNOWN:
        ss = tl.arange(0, CHUNKS_POW2)
        ok = ss < n_chunks
        o = (row * n_chunks + ss).to(tl.int64)
        chunk_masses = tl.load(chunk_mass_ptr + o, mask=ok, other=0.0)
        chunk_lasts = tl.load(chunk_last_ptr + o, mask=ok, other=-1)
        cs = tl.cumsum(chunk_masses, axis=0)
        total = tl.sum(tl.where(ss == n_chunks - 1, cs, 0.0), axis=0)
        u = tl.load(uniform_ptr + row).to(tl.float32)
        target = u * total
        cstar = tl.min(tl.where(ok & (cs > target), ss, CHUNKS_POW2), axis=0)
        tok = tl.max(chunk_lasts, axis=0)
        if cstar < CHUNKS_POW2:
            run = tl.sum(tl.where(ss == cstar, cs - chunk_masses, 0.0), axis=0)
            tok = tl.sum(tl.where(ss == cstar, chunk_lasts, 0), axis=0)
            thr = tl.load(row_int + THRESHOLD)
            m = tl.load(state_float_ptr + row.to(tl.int64) * FLOAT_STATE_WIDTH + ROW_MAX)
            t = tl.load(temperature_ptr + row)
            min_p = tl.load(min_p_ptr + row)
            base = x_ptr + row.to(tl.int64) * stride
            offs = tl.arange(0, BLOCK)
            start, end = _chunk_bounds(cstar, vocab, chunk_len)
            found = tl.full([], -1, dtype=tl.int32)
            i = start
            while (found < 0) & (i < end):
                idx = i + offs
                inb = idx < end
                w = kept_weight(base, idx, inb, m, t, thr, min_p)
                c = run + tl.cumsum(w, axis=0)
                hit = tl.min(tl.where(inb & (c > target), idx, NO_INDEX), axis=0)
                found = tl.where(hit < NO_INDEX, hit, -1)
                run = tl.max(tl.where(inb, c, run), axis=0)
                i += BLOCK
            tok = tl.where(found >= 0, found, tok)
        tl.store(token_ptr + row, tok.to(tl.int64))
        tl.store(row_int + MODE, DRAWN)


KERNELS = (scan_kernel, init_kernel, search_pass_kernel, decide_kernel, gather_kernel, finish_kernel, mass_kernel,
           draw_kernel)


def _carve(dtype, device, *shapes):
    """Views of one fresh allocation, one per shape, each 16-byte aligned (contents undefined)."""
    sizes = [-(-int(torch.Size(sh).numel()) // 4) * 4 for sh in shapes]
    flat = torch.empty(sum(sizes), dtype=dtype, device=device)
    return [part[:torch.Size(sh).numel()].view(sh) for part, sh in zip(flat.split(sizes), shapes)]


class Workspace(NamedTuple):
    """The schedule's geometry and scratch for one (batch, vocab, device, config): the row state
    and every per-chunk and gather buffer, carved from one int32 and one float32 allocation
    (contents undefined; each launch of the schedule overwrites what it reads)."""
    block: int
    chunk_len: int
    n_chunks: int
    chunks_pow2: int
    scan_block: int
    ints: tuple        # state_int, scan_int, pivot_count, bound_count, gather_offset, gathered_id, chunk_last
    floats: tuple      # state_float, scan_float, pivot_mass, bound_mass, gathered_z, chunk_mass


def workspace(b: int, vocab: int, device, config: SplitConfig) -> Workspace:
    """Allocate the schedule's scratch (each allocation and launch costs host time that the
    ~0.5 ms call cannot hide; a plan allocates it once for all its runs)."""
    block = min(config.block, max(16, triton.next_power_of_2(vocab)))
    chunk_len = triton.cdiv(triton.cdiv(vocab, max(1, config.programs_per_row)), block) * block
    n_chunks = triton.cdiv(vocab, chunk_len)
    pivots, cap = config.pivots, config.gather_cap
    ints = _carve(torch.int32, device, (b, INT_STATE_WIDTH.value), (b, n_chunks, 4), (b, n_chunks, pivots),
                  (b, n_chunks, 2), (b, n_chunks), (b, cap), (b, n_chunks))
    floats = _carve(torch.float32, device, (b, FLOAT_STATE_WIDTH.value), (b, n_chunks, 2), (b, n_chunks, pivots),
                    (b, n_chunks, 2), (b, cap), (b, n_chunks))
    return Workspace(block, chunk_len, n_chunks, max(2, triton.next_power_of_2(n_chunks)),
                     min(config.scan_block, max(16, triton.next_power_of_2(vocab))), tuple(ints), tuple(floats))


def _launch_schedule(x, temperature, top_k, top_p, min_p, u, config: SplitConfig, ws: Workspace | None = None):
    """Launch the whole schedule (no sync) on the scratch of ``ws`` (None: a fresh
    :func:`workspace`); only the tokens are allocated. Returns (tokens, int32 state (mode, ...,
    threshold, status), float32 state (row max, ...))."""
    b, vocab = x.shape
    dev = x.device
    ws = workspace(b, vocab, dev, config) if ws is None else ws
    block, chunk_len, n_chunks, chunks_pow2, scan_block = ws[:5]
    pivots, cap, warps = config.pivots, config.gather_cap, config.num_warps
    cache = config.cache_launches
    tok = torch.empty(b, dtype=torch.int64, device=dev)
    state_int, scan_int, pivot_count, bound_count, gather_offset, gathered_id, chunk_last = ws.ints
    state_float, scan_float, pivot_mass, bound_mass, gathered_z, chunk_mass = ws.floats
    uniforms = u if u is not None else state_float          # a placeholder pointer without uniforms
    rows, chunks = (b,), (n_chunks, b)
    common = (x, x.stride(0), vocab, chunk_len)
    launch(scan_kernel, chunks, (*common, scan_float, scan_int, n_chunks), dict(BLOCK=scan_block),
           config.scan_warps, cache=cache)
    launch(init_kernel, rows, (scan_float, scan_int, state_int, state_float, tok, temperature, top_k, top_p, vocab,
                               n_chunks), dict(CHUNKS_POW2=chunks_pow2), 4, cache=cache)
    for _ in range(config.search_passes):
        launch(search_pass_kernel, chunks, (*common, n_chunks, state_int, state_float, temperature, pivot_count,
                                            bound_count, pivot_mass, bound_mass),
               dict(BLOCK=block, PIVOTS=pivots), warps, cache=cache)
        launch(decide_kernel, rows, (state_int, state_float, top_k, top_p, pivot_count, bound_count, pivot_mass,
                                     bound_mass, gather_offset, n_chunks),
               dict(CHUNKS_POW2=chunks_pow2, PIVOTS=pivots, GATHER_CAP=cap), 4, cache=cache)
    launch(gather_kernel, chunks, (*common, n_chunks, state_int, state_float, temperature, gather_offset, gathered_z,
                                   gathered_id), dict(BLOCK=block, GATHER_CAP=cap), warps, cache=cache)
    launch(finish_kernel, rows, (state_int, state_float, top_k, top_p, min_p, uniforms, tok, gathered_z, gathered_id),
           dict(HAS_UNIFORMS=u is not None, PIVOTS=pivots, GATHER_CAP=cap), 8 if cap >= 1024 else 4, cache=cache)
    if u is not None:
        launch(mass_kernel, chunks, (*common, n_chunks, state_int, state_float, temperature, min_p, chunk_mass,
                                     chunk_last), dict(BLOCK=block), warps, cache=cache)
        launch(draw_kernel, rows, (*common, n_chunks, state_int, state_float, temperature, min_p, uniforms, chunk_mass,
                                   chunk_last, tok), dict(CHUNKS_POW2=chunks_pow2, BLOCK=block), 4, cache=cache)
    return tok, state_int, state_float


def sort_free(x, temperature, top_k, top_p, min_p, u=None, *, config: SplitConfig | None = None,
              redo_config: OneProgramConfig | None = None) -> SortFreeResult:
    """:func:`optimized.sampling.one_program.sort_free`'s contract and result, each row split over
    ``config.programs_per_row`` programs per full pass (module doc). One device sync (are all rows
    finished?); rows whose search needed more than ``config.search_passes`` passes are redone by
    the one-program kernel (at ``redo_config``; None: its default for x's device), counted in the
    result's ``rows_redone``. On CUDA with ``config.cuda_graph`` (the default) the schedule
    replays a captured CUDA graph (graph_cache.py). ``config`` None:
    :func:`optimized.sampling.config.split_default` for x's device."""
    assert x.dtype == torch.float32 and x.dim() == 2
    config = split_default(x.device) if config is None else config
    if x.stride(1) != 1:
        x = x.contiguous()
    b = x.shape[0]
    if b == 0:
        empty = torch.empty(0, dtype=torch.int32, device=x.device)
        tok = torch.empty(0, dtype=torch.int64, device=x.device) if u is not None else None
        return SortFreeResult(tok, empty, torch.empty(0, device=x.device), empty)
    params = [a.contiguous() for a in (temperature, top_k, top_p, min_p)]
    u = None if u is None else u.contiguous()
    if config.cuda_graph and x.is_cuda and config.cache_launches:
        key = (tuple(x.shape), x.device, u is not None, config)
        tok, state_int, state_float = graph_cache.replay(
            key, lambda *inputs: _launch_schedule(*inputs, config), [x, *params, u])
    else:
        tok, state_int, state_float = _launch_schedule(x, *params, u, config)
    status, m, thr = state_int[:, STATUS.value], state_float[:, ROW_MAX.value], state_int[:, THRESHOLD.value]
    redo = (status == UNFINISHED.value).nonzero()[:, 0]         # the one sync
    if redo.numel():
        again = one_program.sort_free(x[redo], *(a[redo] for a in params), None if u is None else u[redo],
                                      config=redo_config)
        status[redo], m[redo], thr[redo] = again.status, again.row_max, again.threshold
        if u is not None:
            tok[redo] = again.tokens
    return SortFreeResult(tok if u is not None else None, status, m, thr, int(redo.numel()))


def run_tokens(x, params, u, config: SplitConfig, ws: Workspace, redo) -> torch.Tensor:
    """The schedule for a plan's run (optimized/sampling/plan.py): tokens only, on the plan's
    workspace, with NO sync. Rows still searching after the search passes are redone by the
    one-program kernel launched over every row with only those rows active (``redo``: the plan's
    (active bool (b,), status, row max, threshold scratch (b,), gather buffers, OneProgramConfig)),
    so nothing is asked of the host; a finished row's program reads and writes nothing."""
    tok, state_int, _ = _launch_schedule(x, *params, u, config, ws)
    active, status, m, thr, gathered, redo_config = redo
    torch.eq(state_int[:, STATUS.value], UNFINISHED.value, out=active)
    one_program.launch_rows(x, params, u, (tok, status, m, thr), gathered, active, redo_config)
    return tok
