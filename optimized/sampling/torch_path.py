"""The torch schedule: a row's threshold v (its kept set is {t : z_t >= v}) found without a
vocab-wide sort, in torch ops, on any device and dtype.

* fast path (temperature > 0, 1 <= top_k <= fast_path_max_k, top_k < vocab): select the k + 1
  largest logits through chunk maxima (:func:`chunked_topk`: two small topks of ~sqrt(vocab * k)
  elements instead of one over the vocabulary). The (k+1)-th value tells whether a tie crosses
  the k-th place (then the row takes the general path, so ties stay exact). Temperature, top-p on
  the survivors, min-p and the draw then work on those <= k candidates only: on CUDA in one fused
  Triton kernel per batch (optimized/sampling/fused_tail.py), elsewhere in ~30 (batch, k) torch
  ops (:func:`fast_tail`).
* general path (top-p without top-k, top_k > fast_path_max_k): a one-level bucket select.
  Weights (probability mass for top-p, 1 for top-k) are summed per bucket of z with
  ``scatter_add_``; the bucket where the cumulative weight crosses the target comes from the
  (batch, buckets) histogram; only that bucket's members (typically 10-150 per row) are gathered
  and sorted to place v exactly, ties kept together. On the CPU it uses float 0/1 masks
  (``torch.where`` branches on a random mask), an 8-flags-at-a-time nonzero and reused scratch
  buffers.
* the draw is the reference's inverse CDF in token-id order (one float64 uniform per row, no
  ``torch.multinomial``); probabilities are the reference's softmax over the kept set.

Every setting is a field of :class:`optimized.sampling.config.TorchPathConfig`, passed in."""
from __future__ import annotations

import math
import warnings

import torch

from optimized._scratch import scratch
from optimized.sampling.config import TorchPathConfig
from optimized.sampling.inputs import raise_bad_rows, row_status
from reference.sampling import Rows

# The fused tail's first build or launch failure: the torch tail is used from then on (warned once).
_fused_tail_failure: list[Exception] = []


def _scratch(name: str, shape, dtype, device) -> torch.Tensor:
    """optimized._scratch.scratch, in this module's namespace."""
    return scratch("sampling." + name, shape, dtype, device)


# ----------------------------------------------------------------------------- selection
def chunked_topk(x: torch.Tensor, n_candidates: int, chunk: int | None = None):
    """The n_candidates largest values per row, sorted descending, with their token ids (NaN sorts
    first).

    Through chunk maxima: the row is cut into n chunks of L logits (strided, x[:, i*n + c] for
    chunk c, so the maxima are a vectorised reduction); the n_candidates chunks with the largest
    maxima hold the row's n_candidates largest values (those maxima are distinct logits >= the
    n_candidates-th largest chunk maximum, and every chunk with a larger maximum is among them),
    so a topk over their n_candidates * L logits is exact: the same sorted values; ids can differ
    only among equal values, and a tie that crosses the k-th place sends the row to the general
    path anyway. A NaN makes its chunk's maximum NaN, so it is selected and still sorts first. Two
    topks of ~sqrt(vocab * n_candidates) elements replace one of vocab (torch.topk costs ~10 ns
    per element on the CPU). ``chunk``: L (None = sqrt(vocab / n_candidates); 0 = one plain
    torch.topk)."""
    b, vocab = x.shape
    if chunk is None:
        chunk = max(4, int(math.sqrt(vocab / n_candidates)))
    n = vocab // chunk if chunk else 0
    if n < 4 * n_candidates:
        return torch.topk(x, n_candidates, dim=1)
    main = x[:, :n * chunk].reshape(b, chunk, n)                            # chunk c = main[:, :, c]
    best = torch.topk(main.amax(dim=1), n_candidates, dim=1).indices        # (b, n_candidates) chunks
    cand = main.gather(2, best[:, None, :].expand(b, chunk, n_candidates)).reshape(b, chunk * n_candidates)
    ids = (torch.arange(chunk, device=x.device)[None, :, None] * n + best[:, None, :]).reshape(b, chunk * n_candidates)
    if n * chunk < vocab:                                                    # the ragged end
        cand = torch.cat([cand, x[:, n * chunk:]], dim=1)
        ids = torch.cat([ids, torch.arange(n * chunk, vocab, device=x.device).expand(b, -1)], dim=1)
    vals, j = torch.topk(cand, n_candidates, dim=1)
    return vals, ids.gather(1, j)


def _bucket_select(z: torch.Tensor, w: torch.Tensor, target: torch.Tensor, tail: float | None,
                   buckets: int, relative: bool = False) -> torch.Tensor:
    """Per row, v = min{z_t : W(t) < target} with W(t) = sum of w_j over z_j > z_t (with
    ``relative``: target * sum of w, the top-p case).

    z <= 0 with max 0 in every row. One level of ``buckets`` buckets over [lo, 0], lo = the row's
    smallest z (or -``tail`` when that is lower or -inf: everything below falls into the last
    bucket). The histogram of w per bucket locates the bucket where the cumulative weight crosses
    ``target``; only that bucket's members are gathered and sorted to place v exactly. Ties share
    a bucket, so a tie is never split.
    """
    b, vocab = z.shape
    lo = z.amin(dim=1)
    clipped = True
    if tail is not None:
        clipped = bool((lo <= -tail).any())           # -inf (banned tokens) or a long tail
        lo = torch.where(lo > -tail, lo, torch.full_like(lo, -tail))
    else:                                             # counting (top-k): the smallest finite z
        lo = torch.where(z == -math.inf, torch.zeros_like(z), z).amin(dim=1)
    scale = (buckets - 0.5) / (-lo).clamp_min(1e-30)
    key = torch.mul(z, (-scale)[:, None], out=_scratch("keyf", z.shape, z.dtype, z.device))
    if clipped:                                       # else already in [0, buckets - 0.5]
        key.clamp_(0, buckets - 1)
    key = _scratch("key", z.shape, torch.int64, z.device).copy_(key)
    hist = torch.zeros(b, buckets, dtype=w.dtype, device=z.device).scatter_add_(1, key, w)
    incl = hist.cumsum(dim=1)
    if relative:
        target = target * incl[:, -1]
    star = (incl < target[:, None]).sum(dim=1).clamp_(max=buckets - 1)
    above = torch.where(star > 0, incl.gather(1, (star - 1).clamp(min=0)[:, None])[:, 0],
                        torch.zeros_like(target))
    r, c = _nonzero_2d(torch.eq(key, star[:, None], out=_scratch("member", z.shape, torch.bool, z.device)))
    count = torch.bincount(r, minlength=b)
    width_m = int(count.max())
    start = torch.cumsum(count, 0) - count
    pos = torch.arange(r.numel(), device=z.device) - start[r]
    cz = torch.full((b, width_m), -math.inf, dtype=z.dtype, device=z.device)
    cw = torch.zeros((b, width_m), dtype=w.dtype, device=z.device)
    valid = torch.zeros((b, width_m), dtype=torch.bool, device=z.device)
    cz[r, pos] = z[r, c]
    cw[r, pos] = w[r, c]
    valid[r, pos] = True
    zs, order = torch.sort(cz, dim=1, descending=True, stable=True)
    ws, valid = cw.gather(1, order), valid.gather(1, order)
    exclusive = torch.cumsum(ws, dim=1) - ws
    kept = valid & (above[:, None] + exclusive < target[:, None])
    return torch.where(kept, zs, torch.full_like(zs, math.inf)).amin(dim=1)


def _nonzero_2d(mask: torch.Tensor):
    """``mask.nonzero(as_tuple=True)`` for a sparse (b, n) bool mask, row-major order. On the CPU
    it scans 8 flags at a time (as int64 words) and expands only the nonzero words: ~4x faster."""
    b, n = mask.shape
    if mask.is_cuda or n % 8 or not mask.is_contiguous():
        return mask.nonzero(as_tuple=True)
    words = mask.view(torch.uint8).view(torch.int64).view(b, n // 8)
    r, wi = words.nonzero(as_tuple=True)
    rr, bit = mask.view(b, n // 8, 8)[r, wi].nonzero(as_tuple=True)
    return r[rr], wi[rr] * 8 + bit


# ----------------------------------------------------------------------------- general path
def _general_weights(x: torch.Tensor, rows_t: dict, host: dict,
                     config: TorchPathConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(w, z) for rows with T > 0, any top_k/top_p/min_p: w = exp(z) on the kept set, 0
    elsewhere (unnormalised); both are scratch buffers, valid until the next call."""
    b, vocab = x.shape
    m = x.amax(dim=1)
    raise_bad_rows(row_status(m))
    z = torch.sub(x, m[:, None], out=_scratch("z", x.shape, x.dtype, x.device))   # max z = 0 exactly
    if any(t != 1 for t in host["temperature"]):
        z.div_(rows_t["temperature"][:, None])        # (x - m) / T, as the reference rounds it
    e = torch.exp(z, out=_scratch("e", x.shape, x.dtype, x.device))
    v = None
    ks = [kk if 0 < kk < vocab else 0 for kk in host["top_k"]]
    if any(ks):
        small = [kk for kk in ks if kk]
        if max(small) <= config.fast_path_max_k:
            top = chunked_topk(z, max(small), config.topk_chunk)[0]
            kk = torch.tensor([max(kk, 1) for kk in ks], device=z.device)
            vk = top.gather(1, (kk - 1)[:, None])[:, 0]
        else:
            target = torch.tensor([float(max(kk, 1)) for kk in ks], dtype=z.dtype, device=z.device)
            vk = _bucket_select(z, torch.ones_like(z), target, None, config.buckets)
        on = torch.tensor([kk > 0 for kk in ks], device=z.device)
        v = torch.where(on, vk, torch.full_like(vk, -math.inf))
    w = e if v is None else _mask(z, v, "w").mul_(e)
    if any(p < 1 for p in host["top_p"]):
        p = rows_t["top_p"]
        frac = torch.where(p < 1, p, torch.zeros_like(p))        # p = 1: a cheap no-op
        vp = _bucket_select(z, w, frac, 750.0 if z.dtype == torch.float64 else 110.0, config.buckets,
                            relative=True)
        vp = torch.where(p < 1, vp, torch.full_like(vp, -math.inf))
        v = vp if v is None else torch.maximum(v, vp)
    if v is not None:
        w = _mask(z, v, "w").mul_(e)
    if any(q > 0 for q in host["min_p"]):
        w = w.mul_(_mask(e, rows_t["min_p"], "w2")) if w is not e else _mask(e, rows_t["min_p"], "w").mul_(e)
    return w, z


def _mask(a: torch.Tensor, thr: torch.Tensor, name: str) -> torch.Tensor:
    """(a >= thr per row) as 0/1 in a's dtype: a float mask and a product are branch-free
    (torch.where on a random mask costs 3-5x more on the CPU)."""
    return torch.ge(a, thr[:, None], out=_scratch(name, a.shape, a.dtype, a.device))


def _inverse_cdf(w: torch.Tensor, u: torch.Tensor, chunk: int) -> torch.Tensor:
    """Reference's draw on unnormalised weights in token-id order (scale-free): the first t with
    cumsum(w)_t > u * total; if rounding leaves none, the last positive t. Long rows go in two
    levels (sums of ``chunk``-token chunks, then one chunk's cumsum) instead of a full cumsum."""
    b, vocab = w.shape
    n = vocab // chunk
    if vocab % chunk or n < 4:
        c = torch.cumsum(w, dim=1, out=_scratch("cdf", w.shape, w.dtype, w.device))
        return _first_above(c, w, u.to(w.dtype) * c[:, -1])
    chunks = w.view(b, n, chunk)
    sums = chunks.sum(dim=2)                                                 # (b, n)
    cs = sums.cumsum(dim=1)
    target = u.to(w.dtype) * cs[:, -1]
    ci = _first_above(cs, sums, target)
    before = torch.where(ci > 0, cs.gather(1, (ci - 1).clamp(min=0)[:, None])[:, 0], torch.zeros_like(target))
    part = chunks.gather(1, ci[:, None, None].expand(b, 1, chunk))[:, 0]     # (b, chunk)
    j = _first_above(part.cumsum(dim=1) + before[:, None], part, target)
    return ci * chunk + j


def _first_above(c: torch.Tensor, w: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The first position with c > target (c non-decreasing), else the last with w > 0."""
    idx = torch.searchsorted(c, target[:, None], right=True)[:, 0]
    over = idx >= c.shape[1]
    if bool(over.any()):
        last = c.shape[1] - 1 - (w.flip(1) > 0).to(torch.int8).argmax(dim=1)
        idx = torch.where(over, last, idx)
    return idx


# ----------------------------------------------------------------------------- fast path
def fast_tail(vals, ids, rows_t, k, u, cdf_chunk: int = TorchPathConfig.cdf_chunk):
    """Top-p, min-p and the draw on the k_max + 1 candidates of every row (torch ops).

    Returns (tokens, status, (w, z)) with status 0 fine, 1-3 bad row (see raise_bad_rows), 4 tie
    at the k-th place (the row must take the general path); w are the kept weights of the
    candidates, z their scaled logits.
    """
    b, n_candidates = vals.shape
    m = vals[:, :1]
    z = (vals - m) / rows_t["temperature"][:, None]
    status = row_status(m[:, 0])
    kth = z.gather(1, (k - 1)[:, None])
    nxt = z.gather(1, k[:, None])
    status = torch.where((status == 0) & (nxt == kth)[:, 0], torch.full_like(status, 4), status)
    cand = torch.arange(n_candidates, device=z.device)[None, :] < k[:, None]
    e = torch.where(cand, torch.exp(z), torch.zeros_like(z))
    q = e / e.sum(dim=1, keepdim=True)
    above = torch.cumsum(q, dim=1) - q
    p = rows_t["top_p"][:, None]
    kept = cand & ((above < p) | (p >= 1))
    v = torch.where(kept, z, torch.full_like(z, math.inf)).amin(dim=1, keepdim=True)
    keep = cand & (z >= v) & (e >= rows_t["min_p"][:, None])
    w = torch.where(keep, e, torch.zeros_like(e))
    if u is None:
        return None, status, (w, z)
    sids, perm = torch.sort(ids, dim=1)
    tokens = sids.gather(1, _inverse_cdf(w.gather(1, perm), u, cdf_chunk)[:, None])[:, 0]
    return tokens, status, (w, z)


def _fast(x: torch.Tensor, rows_t: dict, host: dict, u: torch.Tensor | None, config: TorchPathConfig):
    """topk candidates + tail; returns (tokens or None, status, (ids, (w, z)) for probs or None)."""
    n_candidates = max(host["top_k"]) + 1
    vals, ids = chunked_topk(x, n_candidates, config.topk_chunk)
    k = rows_t["top_k"]
    use_fused = (u is not None and n_candidates <= config.fused_tail_max_candidates
                 and x.dtype == torch.float32 and not _fused_tail_failure
                 and (config.fused_tail is True or (config.fused_tail == "auto" and x.is_cuda)))
    if use_fused:
        try:
            from optimized.sampling.fused_tail import fused_tail
            tokens, status = fused_tail(vals, ids, rows_t["temperature"], k, rows_t["top_p"], rows_t["min_p"], u)
            return tokens, status, None
        except Exception as exc:  # a Triton build/launch failure: use the torch tail from now on
            _fused_tail_failure.append(exc)
            warnings.warn(f"optimized.sampling: the fused Triton tail failed ({exc!r}); using torch ops instead",
                          RuntimeWarning, stacklevel=3)
    tokens, status, wz = fast_tail(vals, ids, rows_t, k, u, config.cdf_chunk)
    return tokens, status, (ids, wz)


# ----------------------------------------------------------------------------- the schedule
def _row_kinds(host: dict, vocab: int, fast_path_max_k: int):
    """Per row: 'greedy', 'fast' or 'general' (host-side, no device sync)."""
    kinds = []
    for t, k in zip(host["temperature"], host["top_k"]):
        if t == 0:
            kinds.append("greedy")
        elif 1 <= k <= fast_path_max_k and k < vocab:
            kinds.append("fast")
        else:
            kinds.append("general")
    return kinds


def _row_subset(rows: Rows, sel: torch.Tensor | None, idx: list[int]) -> tuple[dict, dict]:
    """The filters' parameters of rows ``idx`` (``sel``: the same rows as a device index, None
    for all): per-row tensors and host lists."""
    names = ("temperature", "top_k", "top_p", "min_p")
    t = {n: (getattr(rows, n) if sel is None else getattr(rows, n)[sel]) for n in names}
    h = {n: [rows.host[n][i] for i in idx] for n in names}
    return t, h


def tokens_or_probs(x: torch.Tensor, rows: Rows, u: torch.Tensor | None,
                    config: TorchPathConfig = TorchPathConfig()):
    """The torch schedule on processed logits x (after penalties and bias). With u: one token
    per row. Without: dense probabilities (batch, vocab)."""
    batch, vocab = x.shape
    kinds = _row_kinds(rows.host, vocab, config.fast_path_max_k)
    general = [i for i, kd in enumerate(kinds) if kd == "general"]
    fast = [i for i, kd in enumerate(kinds) if kd == "fast"]
    greedy = [i for i, kd in enumerate(kinds) if kd == "greedy"]
    if len(greedy) == batch:
        raise_bad_rows(row_status(x.amax(dim=1)))
        am = x.argmax(dim=1)
        return am if u is not None else torch.zeros_like(x).scatter_(1, am[:, None], 1.0)
    fast_done = None
    if len(fast) == batch:                              # the common case: no index shuffling
        t, h = _row_subset(rows, None, fast)
        tokens, status, extra = _fast(x, t, h, u, config)
        status_h = status.tolist()                      # the one device sync of the fast path
        if not any(status_h):
            if u is not None:
                return tokens
            return _dense_probs(vocab, *extra)
        fast_done = (tokens, status_h, extra)
    if len(general) == batch:
        return _general(x, rows, general, u, None, config)
    out = (torch.empty(batch, dtype=torch.int64, device=x.device) if u is not None
           else torch.zeros(batch, vocab, dtype=x.dtype, device=x.device))
    if greedy:
        sel = torch.tensor(greedy, device=x.device)
        xg = x[sel]
        raise_bad_rows(row_status(xg.amax(dim=1)))
        am = xg.argmax(dim=1)
        out[sel] = am if u is not None else torch.zeros_like(xg).scatter_(1, am[:, None], 1.0)
    if fast:
        sel = None if len(fast) == batch else torch.tensor(fast, device=x.device)
        t, h = _row_subset(rows, sel, fast)
        xf = x if sel is None else x[sel]
        uf = None if u is None else (u if sel is None else u[sel])
        if fast_done is not None:
            tokens, status_h, extra = fast_done
        else:
            tokens, status, extra = _fast(xf, t, h, uf, config)
            status_h = status.tolist()
        raise_bad_rows(torch.tensor([s if s != 4 else 0 for s in status_h]))
        ok = [fast[i] for i, s in enumerate(status_h) if s == 0]
        general += [fast[i] for i, s in enumerate(status_h) if s == 4]
        if ok:
            keep = [i for i, s in enumerate(status_h) if s == 0]
            rsel = torch.tensor(ok, device=x.device)
            ksel = torch.tensor(keep, device=x.device)
            if u is not None:
                out[rsel] = tokens[ksel]
            else:
                ids, (w, zc) = extra
                out[rsel] = _dense_probs(vocab, ids[ksel], (w[ksel], zc[ksel]))
    if general:
        general.sort()
        sel = torch.tensor(general, device=x.device)
        out[sel] = _general(x[sel], rows, general, None if u is None else u[sel], sel, config)
    return out


def _softmax_kept(z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """probs = softmax(z over the kept set), the reference's own normalisation (a kept token
    whose exp underflowed has w = 0 and probability 0 either way)."""
    return torch.softmax(torch.where(w > 0, z, -math.inf), dim=1)


def _dense_probs(vocab: int, ids: torch.Tensor, wz) -> torch.Tensor:
    """Fast-path candidates -> dense (b, vocab) probabilities (softmax over the kept set)."""
    w, zc = wz
    z = torch.full((ids.shape[0], vocab), -math.inf, dtype=zc.dtype, device=zc.device)
    return torch.softmax(z.scatter_(1, ids, torch.where(w > 0, zc, -math.inf)), dim=1)


def _general(x, rows, idx, u, sel, config: TorchPathConfig):
    """The general path over blocks of ``config.row_block`` rows (CPU: a block's temporaries stay
    in cache; the path makes ~15 passes over the vocabulary)."""
    step = config.row_block if not x.is_cuda else x.shape[0]
    outs = []
    for s in range(0, x.shape[0], step):
        part = idx[s:s + step]
        psel = None if sel is None and len(part) == x.shape[0] else torch.tensor(part, device=x.device)
        w, z = _general_weights(x[s:s + step], *_row_subset(rows, psel, part), config)
        outs.append(_inverse_cdf(w, u[s:s + step], config.cdf_chunk) if u is not None else _softmax_kept(z, w))
    return outs[0] if len(outs) == 1 else torch.cat(outs)
