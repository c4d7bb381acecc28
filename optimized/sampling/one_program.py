"""The one-program-per-row Triton schedule of the sort-free sampler: one program owns a row and
streams it a few times (the search and the draw: key_search.py's module doc). It also redoes the
rows that the split-row schedule (split_row.py) did not finish in its fixed number of passes."""
from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from optimized.sampling.config import OneProgramConfig, one_program_default
from optimized.sampling.key_search import (NEG_INF_KEY, NO_KEY, bad_flags, kept_weight, pick, pivot_keys,
                                           search_in_registers, z_and_key)


class SortFreeResult(NamedTuple):
    """What a Triton schedule returns: tokens (int64, None without uniforms), status (int32: 0
    fine, 1 NaN, 2 +inf, 3 every token -inf), the row max (float32) and the threshold key (int32):
    the kept set of a non-greedy row is {t : bits(0 - (x_t - max) / T) <= threshold and
    exp(z_t) >= min_p}. ``rows_redone``: how many rows the split-row schedule handed to the
    one-program kernel (0 for the one-program schedule)."""
    tokens: torch.Tensor | None
    status: torch.Tensor
    row_max: torch.Tensor
    threshold: torch.Tensor
    rows_redone: int = 0


@triton.jit
def _search_top_k(base, vocab, m, t, lo, hi, k, count_hi, GATHER_CAP: tl.constexpr, BLOCK: tl.constexpr,
                  PIVOTS: tl.constexpr):
    """The top-k search on the row: the smallest key K in [lo, hi] with #{key <= K} >= k (the
    caller's invariant: #{key <= hi} >= k > #{key < lo}). Returns (lo, hi, count_hi): lo == hi == K
    when done; it stops early, lo < hi, once count_hi = #{key <= hi} (pass an upper bound in) is
    <= GATHER_CAP: the caller then gathers those tokens and finishes on them."""
    offs = tl.arange(0, BLOCK)
    jj = tl.arange(0, PIVOTS)
    while (lo < hi) & (count_hi > GATHER_CAP):
        piv = pivot_keys(lo, hi, PIVOTS)
        f_acc = tl.zeros([BLOCK, PIVOTS], dtype=tl.float32)
        mx_acc = tl.full([BLOCK, PIVOTS], -1, dtype=tl.int32)
        mn_acc = tl.full([BLOCK, PIVOTS], NO_KEY, dtype=tl.int32)
        for s in range(0, vocab, BLOCK):
            idx = s + offs
            inb = idx < vocab
            x = tl.load(base + idx, mask=inb, other=float("-inf"))
            z, key = z_and_key(x, m, t)
            key = tl.where(inb, key, NO_KEY)
            le = key[:, None] <= piv[None, :]
            f_acc += le.to(tl.float32)
            mx_acc = tl.maximum(mx_acc, tl.where(le, key[:, None], -1))
            mn_acc = tl.minimum(mn_acc, tl.where(le, NO_KEY, key[:, None]))
        f = tl.sum(f_acc, axis=0)
        amax = tl.max(mx_acc, axis=0)
        amin = tl.min(mn_acc, axis=0)
        jstar = tl.min(tl.where(f >= k, jj, PIVOTS), axis=0)
        hi_new = tl.where(jstar < PIVOTS, pick(amax, jj, jstar), hi)
        lo_new = tl.where(jstar > 0, pick(amin, jj, jstar - 1), lo)
        count_hi = tl.where(jstar < PIVOTS, pick(f, jj, jstar), count_hi)
        hi = hi_new
        lo = tl.minimum(lo_new, hi_new)
    return lo, hi, count_hi


@triton.jit
def _search_top_p(base, vocab, m, t, hi, frac, GATHER_CAP: tl.constexpr, BLOCK: tl.constexpr,
                  PIVOTS: tl.constexpr):
    """The top-p search on the row (weights exp(z) over key <= hi, the top-k survivors): like
    _search_top_k with weights, but it also counts the tokens at each pivot and stops once
    <= GATHER_CAP tokens lie in [lo, hi]. Returns (lo, hi, mass below lo, total mass or -1 if no
    pass ran)."""
    offs = tl.arange(0, BLOCK)
    jj = tl.arange(0, PIVOTS)
    top_k_cut = hi
    lo = tl.zeros([], dtype=tl.int32)
    count_in = vocab
    mass_below = tl.zeros([], dtype=tl.float32)
    total = tl.full([], -1.0, dtype=tl.float32)
    while (lo < hi) & (count_in > GATHER_CAP):
        piv = pivot_keys(lo, hi, PIVOTS)
        f_acc = tl.zeros([BLOCK, PIVOTS], dtype=tl.float32)
        c_acc = tl.zeros([BLOCK, PIVOTS], dtype=tl.int32)
        mx_acc = tl.full([BLOCK, PIVOTS], -1, dtype=tl.int32)
        mn_acc = tl.full([BLOCK, PIVOTS], NO_KEY, dtype=tl.int32)
        tot_acc = tl.zeros([BLOCK], dtype=tl.float32)
        bw_acc = tl.zeros([BLOCK], dtype=tl.float32)
        bc_acc = tl.zeros([BLOCK], dtype=tl.int32)
        hc_acc = tl.zeros([BLOCK], dtype=tl.int32)
        for s in range(0, vocab, BLOCK):
            idx = s + offs
            inb = idx < vocab
            x = tl.load(base + idx, mask=inb, other=float("-inf"))
            z, key = z_and_key(x, m, t)
            key = tl.where(inb, key, NO_KEY)
            w = tl.where(inb & (key <= top_k_cut), tl.exp(z), 0.0)
            tot_acc += w
            below = key < lo
            bw_acc += tl.where(below, w, 0.0)
            bc_acc += below.to(tl.int32)
            hc_acc += (key <= hi).to(tl.int32)
            le = key[:, None] <= piv[None, :]
            f_acc += tl.where(le, w[:, None], 0.0)
            c_acc += le.to(tl.int32)
            mx_acc = tl.maximum(mx_acc, tl.where(le, key[:, None], -1))
            mn_acc = tl.minimum(mn_acc, tl.where(le, NO_KEY, key[:, None]))
        f = tl.sum(f_acc, axis=0)
        c = tl.sum(c_acc, axis=0)
        amax = tl.max(mx_acc, axis=0)
        amin = tl.min(mn_acc, axis=0)
        total = tl.sum(tot_acc, axis=0)
        jstar = tl.min(tl.where(f >= frac * total, jj, PIVOTS), axis=0)
        hi_new = tl.where(jstar < PIVOTS, pick(amax, jj, jstar), hi)
        lo_new = tl.where(jstar > 0, pick(amin, jj, jstar - 1), lo)
        c_hi = tl.where(jstar < PIVOTS, pick(c, jj, jstar), tl.sum(hc_acc, axis=0))
        c_lo = tl.where(jstar > 0, pick(c, jj, jstar - 1), tl.sum(bc_acc, axis=0))
        mass_below = tl.where(jstar > 0, pick(f, jj, jstar - 1), tl.sum(bw_acc, axis=0))
        count_in = c_hi - c_lo
        hi = hi_new
        lo = tl.minimum(lo_new, hi_new)
    return lo, hi, mass_below, total


@triton.jit
def sort_free_kernel(x_ptr, stride, vocab, temperature_ptr, top_k_ptr, top_p_ptr, min_p_ptr, uniform_ptr,
                     token_ptr, status_ptr, row_max_ptr, threshold_ptr, gathered_z_ptr, gathered_id_ptr, active_ptr,
                     HAS_UNIFORMS: tl.constexpr, BLOCK: tl.constexpr, PIVOTS: tl.constexpr,
                     GATHER_CAP: tl.constexpr, ONLY_ACTIVE: tl.constexpr):
    """One program per row: the row's max and bad-row status, its threshold key and (with
    uniforms) its token (key_search.py's module doc). ONLY_ACTIVE: a row whose ``active_ptr``
    entry is 0 reads nothing and writes nothing (the split schedule's redo without a sync)."""
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * stride
    offs = tl.arange(0, BLOCK)
    write = True
    if ONLY_ACTIVE:                                     # an inactive row loads nothing: status 3, skipped
        write = tl.load(active_ptr + row) != 0

    # pass 1: max, smallest finite value, NaN / +inf flags, count of finite logits
    mx = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    mnf = tl.full([BLOCK], float("inf"), dtype=tl.float32)
    nan_acc = tl.zeros([BLOCK], dtype=tl.int32)
    inf_acc = tl.zeros([BLOCK], dtype=tl.int32)
    fin_acc = tl.zeros([BLOCK], dtype=tl.int32)
    for s in range(0, vocab, BLOCK):
        idx = s + offs
        inb = (idx < vocab) & write
        x = tl.load(base + idx, mask=inb, other=float("-inf"))
        nan_acc, inf_acc, fin_acc, mnf, xv = bad_flags(x, nan_acc, inf_acc, fin_acc, mnf)
        mx = tl.maximum(mx, xv)
    m = tl.max(mx, axis=0)
    xmin = tl.min(mnf, axis=0)
    nfin = tl.sum(fin_acc, axis=0)
    status = tl.where(tl.max(nan_acc, axis=0) > 0, 1,
                      tl.where(tl.max(inf_acc, axis=0) > 0, 2, tl.where(nfin == 0, 3, 0)))
    if write:
        tl.store(status_ptr + row, status)
        tl.store(row_max_ptr + row, m)

    temperature = tl.load(temperature_ptr + row)
    k = tl.load(top_k_ptr + row)
    p = tl.load(top_p_ptr + row)
    min_p = tl.load(min_p_ptr + row)
    thr = tl.full([], NEG_INF_KEY, dtype=tl.int32)
    tok = tl.full([], -1, dtype=tl.int64)
    zero = tl.zeros([], dtype=tl.int32)
    if status == 0:
        if temperature == 0:                            # greedy: the first index of the max
            first_acc = tl.full([BLOCK], 2147483647, dtype=tl.int32)
            for s in range(0, vocab, BLOCK):
                idx = s + offs
                x = tl.load(base + idx, mask=idx < vocab, other=float("-inf"))
                first_acc = tl.minimum(first_acc, tl.where(x == m, idx, 2147483647))
            tok = tl.min(first_acc, axis=0).to(tl.int64)
            thr = tl.zeros([], dtype=tl.int32)
        else:
            zmin, hi0 = z_and_key(xmin, m, temperature)     # the largest finite key
            gathered = zero
            if (k > 0) & (k < vocab):
                if nfin >= k:                           # else -inf tokens are among the top k
                    lo, hi, count_hi = _search_top_k(base, vocab, m, temperature, zero, hi0, k.to(tl.float32),
                                                     tl.cast(vocab, tl.float32), GATHER_CAP, BLOCK, PIVOTS)
                    thr = hi
                    if lo < hi:                         # <= GATHER_CAP tokens have key <= hi: gather them
                        n = zero                        # (in token-id order) and finish on them
                        for s in range(0, vocab, BLOCK):
                            idx = s + offs
                            inb = idx < vocab
                            x = tl.load(base + idx, mask=inb, other=float("-inf"))
                            z, key = z_and_key(x, m, temperature)
                            sel = inb & (key <= hi)
                            pos = n + tl.cumsum(sel.to(tl.int32), axis=0) - 1
                            dst = row.to(tl.int64) * GATHER_CAP + pos
                            tl.store(gathered_z_ptr + dst, z, mask=sel & (pos < GATHER_CAP))
                            tl.store(gathered_id_ptr + dst, idx, mask=sel & (pos < GATHER_CAP))
                            n += tl.sum(sel.to(tl.int32), axis=0)
                        tl.debug_barrier()              # the stores above are read by other threads
                        co = tl.arange(0, GATHER_CAP)
                        valid = co < tl.minimum(n, GATHER_CAP)
                        src = row.to(tl.int64) * GATHER_CAP + co
                        gz = tl.load(gathered_z_ptr + src, mask=valid, other=float("-inf"))
                        gi = tl.load(gathered_id_ptr + src, mask=valid, other=0)
                        gkey = tl.where(valid, (0.0 - gz).to(tl.int32, bitcast=True), NO_KEY)
                        thr = search_in_registers(gkey, valid.to(tl.float32), lo, hi, k.to(tl.float32), PIVOTS)
                        ge = tl.exp(gz)
                        if p < 1.0:
                            wk = tl.where(valid & (gkey <= thr), ge, 0.0)
                            thr = search_in_registers(gkey, wk, zero, thr, p * tl.sum(wk, axis=0), PIVOTS)
                        if HAS_UNIFORMS:
                            u = tl.load(uniform_ptr + row).to(tl.float32)
                            w = tl.where(valid & (gkey <= thr) & (ge >= min_p), ge, 0.0)
                            c = tl.cumsum(w, axis=0)
                            target = u * tl.sum(w, axis=0)
                            first = tl.min(tl.where(valid & (c > target), gi, 2147483647), axis=0)
                            last = tl.max(tl.where(w > 0, gi, -1), axis=0)
                            tok = tl.where(first < 2147483647, first, last).to(tl.int64)
                        gathered = n
            if (p < 1.0) & (gathered == 0):
                hi = tl.minimum(thr, hi0)
                lo, thr, mass_below, total = _search_top_p(base, vocab, m, temperature, hi, p, GATHER_CAP, BLOCK,
                                                           PIVOTS)
                if lo < thr:                            # <= GATHER_CAP tokens in [lo, thr]: gather them
                    n = zero
                    for s in range(0, vocab, BLOCK):
                        idx = s + offs
                        inb = idx < vocab
                        x = tl.load(base + idx, mask=inb, other=float("-inf"))
                        z, key = z_and_key(x, m, temperature)
                        sel = inb & (key >= lo) & (key <= thr)
                        pos = n + tl.cumsum(sel.to(tl.int32), axis=0) - 1
                        dst = row.to(tl.int64) * GATHER_CAP + pos
                        tl.store(gathered_z_ptr + dst, z, mask=sel & (pos < GATHER_CAP))
                        n += tl.sum(sel.to(tl.int32), axis=0)
                    tl.debug_barrier()                  # the stores above are read by other threads
                    co = tl.arange(0, GATHER_CAP)
                    valid = co < tl.minimum(n, GATHER_CAP)
                    src = row.to(tl.int64) * GATHER_CAP + co
                    gz = tl.load(gathered_z_ptr + src, mask=valid, other=float("-inf"))
                    gkey = tl.where(valid, (0.0 - gz).to(tl.int32, bitcast=True), NO_KEY)
                    gw = tl.where(valid, tl.exp(gz), 0.0)
                    total = tl.where(total < 0, mass_below + tl.sum(gw, axis=0), total)
                    thr = search_in_registers(gkey, gw, lo, thr, p * total - mass_below, PIVOTS)
            if HAS_UNIFORMS:
                if gathered == 0:
                    u = tl.load(uniform_ptr + row).to(tl.float32)
                    w_acc = tl.zeros([BLOCK], dtype=tl.float32)
                    last_acc = tl.full([BLOCK], -1, dtype=tl.int32)
                    for s in range(0, vocab, BLOCK):
                        idx = s + offs
                        inb = idx < vocab
                        w = kept_weight(base, idx, inb, m, temperature, thr, min_p)
                        w_acc += w
                        last_acc = tl.maximum(last_acc, tl.where(w > 0, idx, -1))
                    target = u * tl.sum(w_acc, axis=0)
                    last = tl.max(last_acc, axis=0)
                    run = tl.zeros([], dtype=tl.float32)
                    found = tl.full([], -1, dtype=tl.int32)
                    s2 = tl.zeros([], dtype=tl.int32)
                    while (found < 0) & (s2 < vocab):
                        idx = s2 + offs
                        inb = idx < vocab
                        w = kept_weight(base, idx, inb, m, temperature, thr, min_p)
                        c = run + tl.cumsum(w, axis=0)
                        found = tl.min(tl.where(inb & (c > target), idx, 2147483647), axis=0)
                        found = tl.where(found == 2147483647, -1, found)
                        run = tl.max(c, axis=0)
                        s2 += BLOCK
                    tok = tl.where(found >= 0, found, last).to(tl.int64)
    if write:
        tl.store(threshold_ptr + row, thr)
        if HAS_UNIFORMS:
            tl.store(token_ptr + row, tok)


def sort_free(x, temperature, top_k, top_p, min_p, u=None, *,
              config: OneProgramConfig | None = None) -> SortFreeResult:
    """The sort-free sampler on float32 logits x (batch, vocab) after penalties and bias, one
    program per row; per-row parameters (batch,) as resolved by reference.sampling.resolve_params
    (float32, top_k int64); u: float64 (batch,) or None. ``config``: the launch configuration (None:
    :func:`optimized.sampling.config.one_program_default` for x's device)."""
    assert x.dtype == torch.float32 and x.dim() == 2
    config = one_program_default(x.device) if config is None else config
    b, vocab = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    dev = x.device
    status = torch.empty(b, dtype=torch.int32, device=dev)
    m = torch.empty(b, dtype=torch.float32, device=dev)
    thr = torch.empty(b, dtype=torch.int32, device=dev)
    tok = torch.empty(b, dtype=torch.int64, device=dev) if u is not None else status
    if b == 0:
        return SortFreeResult(tok if u is not None else None, status, m, thr)
    gathered = gather_buffers(b, config, dev)
    launch_rows(x, (temperature.contiguous(), top_k.contiguous(), top_p.contiguous(), min_p.contiguous()),
                u if u is None else u.contiguous(), (tok, status, m, thr), gathered, None, config)
    return SortFreeResult(tok if u is not None else None, status, m, thr)


def gather_buffers(b: int, config: OneProgramConfig, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's per-row gather scratch: (b, gather_cap) float32 z and int32 ids."""
    return (torch.empty(b, config.gather_cap, dtype=torch.float32, device=device),
            torch.empty(b, config.gather_cap, dtype=torch.int32, device=device))


def launch_rows(x, params, u, outputs, gathered, active, config: OneProgramConfig) -> None:
    """Launch :func:`sort_free_kernel` over every row of x (contiguous rows, batch >= 1), no sync:
    ``params`` the four contiguous per-row tensors (temperature, top_k, top_p, min_p), ``u``
    float64 (batch,) or None, ``outputs`` (tokens int64, status int32, row max float32,
    threshold int32), each (batch,) (tokens may be status's tensor when u is None),
    ``gathered`` from :func:`gather_buffers`, ``active`` None (every row) or an int32 (batch,)
    tensor: only rows whose entry is nonzero are computed and written."""
    tok, status, m, thr = outputs
    b, vocab = x.shape
    block = min(config.block, max(16, triton.next_power_of_2(vocab)))
    sort_free_kernel[(b,)](x, x.stride(0), vocab, *params, u if u is not None else m, tok, status, m, thr,
                           *gathered, active if active is not None else status,
                           HAS_UNIFORMS=u is not None, BLOCK=block, PIVOTS=config.pivots,
                           GATHER_CAP=config.gather_cap, ONLY_ACTIVE=active is not None,
                           num_warps=config.num_warps)
