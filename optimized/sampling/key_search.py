"""The sort-free search shared by both Triton schedules (one_program.py: one program per row;
split_row.py: each row split over several programs): the keys, the pivots, the register finish.

Both stream each row's logits (x, float32, after penalties and bias) a few times (one program
per row, or each pass split over several programs); nothing is sorted and nothing of size vocab
is written. Every filter keeps an upper set of
z = (x - max x) / T, so a row's kept set is {t : key_t <= K} for one integer K, where
    key_t = the float32 bits of (0 - z_t)   (z <= 0: key is monotone DEcreasing in z; +0 -> 0,
                                             -inf -> NEG_INF_KEY = 0x7f800000; ties share a key)
K is found by a pivot search over the integer keys (a bisection with PIVOTS pivots per pass):
    top-k: K_k = the smallest K with #{t : key_t <= K} >= k    (= the k-th largest z; ties kept)
    top-p: K_p = the smallest K with F(K) >= p * F(K_k), F(K) = sum of exp(z_t) over
           key_t <= min(K, K_k)  (token t is kept iff the mass strictly above it,
           F(key_t - 1), is < p * total: key_t <= K_p; whole tie groups, as the contract says)
Each pass counts/sums the weights at PIVOTS sorted pivots inside the current interval [lo, hi] and
tightens the interval to real keys (the largest key <= the chosen pivot, the smallest key above
the one before), so it shrinks strictly every pass and ends on an exact key: the threshold is
exact up to the float32 rounding of the sums (which the contract leaves open), never an
approximation of the cut. Half the pivots are spaced evenly in the keys (log scale of |z|), half
in the values |z| (linear): the first handles wide dynamic ranges, the second LLM-like rows.
Once <= GATHER_CAP tokens are left in play (top-k: every token with key <= hi; top-p: those in
[lo, hi], with the mass below lo known) one pass gathers them (z and id, in token-id order) to a
per-row scratch and the search finishes in registers; with top-k the kept set lies inside the
gathered tokens, so top-p, min-p and the draw run there too, without touching the row again.
min-p is elementwise (exp(z) >= min_p). The draw is the contract's inverse CDF in token-id
order over the kept weights (u: the contract's float64 uniform, rounded to float32 as the
reference does): on the row, one pass for the total and one scan that stops at the token.

The helpers here are Triton device functions; the kernels live in the two schedule modules."""
from __future__ import annotations

import triton
import triton.language as tl

NEG_INF_KEY = tl.constexpr(0x7F800000)   # the key of z = -inf (the float32 bits of +inf)
NO_KEY = tl.constexpr(0x7FFFFFFF)        # above every key: padding, "none"


@triton.jit
def z_and_key(x, m, t):
    """z = (x - m) / t and its key, the float32 bits of 0 - z (module doc)."""
    z = tl.math.div_rn(x - m, t)          # IEEE division: the same z as torch's (x - m) / T
    key = (0.0 - z).to(tl.int32, bitcast=True)
    return z, key


@triton.jit
def kept_weight(base, idx, inb, m, t, thr, min_p):
    """The draw's weight of the tokens at idx: exp(z) if kept (key <= thr, exp(z) >= min_p), else 0."""
    x = tl.load(base + idx, mask=inb, other=float("-inf"))
    z, key = z_and_key(x, m, t)
    e = tl.exp(z)
    return tl.where(inb & (key <= thr) & (e >= min_p), e, 0.0)


@triton.jit
def bad_flags(x, nan_acc, inf_acc, fin_acc, mnf):
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
def pivot_keys(lo, hi, PIVOTS: tl.constexpr):
    """PIVOTS sorted pivots in [lo, hi - 1]: even slots evenly spaced in the keys, odd slots evenly
    spaced in the values |z| = bitcast(key)."""
    jj = tl.arange(0, PIVOTS)
    frac_i = (jj // 2 + 1).to(tl.int64)
    span = (hi - lo).to(tl.int64)
    kl = (lo.to(tl.int64) + (span * frac_i) // (PIVOTS // 2 + 1)).to(tl.int32)
    alo = lo.to(tl.float32, bitcast=True)
    ahi = hi.to(tl.float32, bitcast=True)
    av = alo + (ahi - alo) * (frac_i.to(tl.float32) / (PIVOTS // 2 + 1))
    vl = av.to(tl.int32, bitcast=True)
    piv = tl.where(jj % 2 == 0, kl, vl)
    piv = tl.minimum(tl.maximum(piv, lo), hi - 1)
    return tl.sort(piv)


@triton.jit
def pick(v, jj, j):
    """v[j] of a small vector indexed by jj = arange (a scalar j chosen at run time)."""
    return tl.sum(tl.where(jj == j, v, 0), axis=0)


@triton.jit
def search_in_registers(key, w, lo, hi, target, PIVOTS: tl.constexpr):
    """The search on a block held in registers (the gathered candidates): the smallest key K in
    [lo, hi] with sum{w : key <= K} >= target."""
    jj = tl.arange(0, PIVOTS)
    while lo < hi:
        piv = pivot_keys(lo, hi, PIVOTS)
        le = key[:, None] <= piv[None, :]
        f = tl.sum(tl.where(le, w[:, None], 0.0), axis=0)
        amax = tl.max(tl.where(le, key[:, None], -1), axis=0)
        amin = tl.min(tl.where(le, NO_KEY, key[:, None]), axis=0)
        jstar = tl.min(tl.where(f >= target, jj, PIVOTS), axis=0)
        hi_new = tl.where(jstar < PIVOTS, tl.sum(tl.where(jj == jstar, amax, 0), axis=0), hi)
        lo_new = tl.where(jstar > 0, tl.sum(tl.where(jj == jstar - 1, amin, 0), axis=0), lo)
        hi = hi_new
        lo = tl.minimum(lo_new, hi_new)
    return hi
