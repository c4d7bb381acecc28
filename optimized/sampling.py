"""Sort-free batched sampling: the contract of reference/sampling.py, computed without sorting the
vocabulary.

On CUDA (float32 compute: float16/bfloat16/float32 logits) ``sample`` and ``sampling_probs`` run
the sort-free Triton sampler by default: each row's threshold key is found by a pivot search over
the float bits of z (no sort, nothing of size vocab written), each full pass split over several
programs per row (optimized/_sampling_split.py; rows it does not finish in its fixed number of
passes are redone by the one-program-per-row kernel of optimized/_sampling_triton.py), replayed
as one CUDA graph; the draw is the contract's inverse CDF in token-id order with the contract's
float64 uniform, so tokens equal the reference's for the same uniforms up to float32 rounding at
a cut or a CDF step (which the contract leaves open). The sampling spec passes through it natively
on the H200 (docs/performance.md). INFERSPEC_SAMPLING_TRITON=0 turns it off; =1 also runs it on the
CPU through the Triton interpreter for batches of up to INTERPRET_MAX_ROWS rows x
INTERPRET_MAX_VOCAB tokens (how the bundled tests run it in CI). Elsewhere the torch paths below
run:

Every filter of the pinned order keeps an upper set of the scaled logits z, so a row's kept set is
{t : z_t >= v} for one threshold v. This module finds v without a vocab-wide sort:

* fast path (temperature > 0, 1 <= top_k <= KMAX_FAST, top_k < vocab): select the k + 1 largest
  logits through chunk maxima (``_topk``: two small topks of ~sqrt(vocab * k) elements instead of
  one over the vocabulary). The (k+1)-th value tells whether a tie crosses the k-th place (then
  the row takes the general path, so ties stay exact). Temperature, top-p on the survivors,
  min-p and the draw then work on those <= k candidates only: on CUDA in one fused Triton kernel
  per batch (``optimized/_sampling_triton.py``), elsewhere in ~30 (batch, k) torch ops.
* general path (top-p without top-k, top_k > KMAX_FAST): a one-level bucket select. Weights
  (probability mass for top-p, 1 for top-k) are summed per bucket of z with ``scatter_add_``; the
  bucket where the cumulative weight crosses the target comes from the (batch, NB) histogram;
  only that bucket's members (typically 10-150 per row) are gathered and sorted to place v
  exactly, ties kept together. On the CPU it uses float 0/1 masks (``torch.where`` branches on a
  random mask), an 8-flags-at-a-time nonzero and reused scratch buffers.
* the draw is the reference's inverse CDF in token-id order (one float64 uniform per row, no
  ``torch.multinomial``); ``sampling_probs`` normalises with the reference's softmax over the
  kept set.

Numbers: docs/sampling.md (spec_tests/bench/sampling_speed.py).
"""
from __future__ import annotations

import math
import os

import torch

from optimized._scratch import scratch

from reference.sampling import (  # noqa: F401  (SamplingParams re-exported: same names as reference)
    Rows,
    SamplingParams,
    check_generator,
    check_logits,
    check_sampling_inputs,
    check_uniforms,
    draw_uniforms,
)
from reference._checks import compute_dtype

KMAX_FAST = 256          # top_k up to this takes the topk fast path
NB = 1024                # buckets of the general path's select
TOPK_CHUNK = None        # topk via chunk maxima, chunks of this many logits (None: sqrt(vocab/k); 0: off)
FUSED = "auto"           # the Triton tail: "auto" (on CUDA), True, False
FUSED_KMAX = 128         # the fused tail handles k + 1 <= this
ROW_BLOCK = 64           # CPU: rows per block of the general path (bounds its temporaries)
CDF_CHUNK = 256          # the draw's two-level inverse CDF: chunk length
# The sort-free Triton sampler (optimized/_sampling_split.py, optimized/_sampling_triton.py):
# "auto" (default) = on CUDA for float32 compute; "1" = also on the CPU when the Triton interpreter
# is on (TRITON_INTERPRET=1, small batches); "0" = never. Environment: INFERSPEC_SAMPLING_TRITON.
SORT_FREE = os.environ.get("INFERSPEC_SAMPLING_TRITON", "auto")
# Its schedule: True = each row split over several programs per pass (optimized/_sampling_split.py),
# False = one program per row (optimized/_sampling_triton.py: sort_free). Same contract and search.
SORT_FREE_SPLIT = True
INTERPRET_MAX_VOCAB = 4096   # off CUDA (the interpreter runs one program at a time) "1" applies
INTERPRET_MAX_ROWS = 64      # to batches up to this many rows of up to this many tokens


def _buf(name: str, shape, dtype, device) -> torch.Tensor:
    """optimized._scratch.scratch, in this module's namespace."""
    return scratch("sampling." + name, shape, dtype, device)


# ----------------------------------------------------------------------------- steps 1-2
_FLOAT_FIELDS = ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")


def _scalar_inputs(logits, params):
    """The common case -- every field one plain Python number, in range, no logit_bias, no seen
    tokens -- resolved without the reference's per-row Python loops (~0.5-1 ms at batch 256,
    more than the GPU sampler itself): the same Rows the reference's validation builds (same
    float32 rounding of the values, one host-to-device copy per dtype). Anything else -- a
    per-row value, a tensor, a bad value -- returns None and the reference's validation runs (so
    every error and its message stay the reference's)."""
    if params is None:
        params = SamplingParams()
    try:
        vals = [getattr(params, n) for n in _FLOAT_FIELDS]
        k = params.top_k
        if params.logit_bias is not None:
            return None
    except AttributeError:
        return None
    if type(k) is not int or any(type(v) not in (int, float) for v in vals):
        return None
    t, tp, mp, rp, pp, fp = vals
    if not (math.isfinite(t) and t >= 0 and k >= 0 and 0 < tp <= 1 and 0 <= mp <= 1
            and math.isfinite(rp) and rp > 0 and math.isfinite(pp) and math.isfinite(fp)):
        return None
    batch = logits.shape[0]
    dtype = compute_dtype(logits.dtype)
    floats = torch.tensor(vals, dtype=dtype)[:, None].expand(len(vals), batch).contiguous().to(logits.device)
    top_k = torch.full((batch,), k, dtype=torch.int64).to(logits.device)
    f = dict(zip(_FLOAT_FIELDS, floats.unbind(0)))
    host = {n: [v] * batch for n, v in zip(_FLOAT_FIELDS, vals)}
    host["top_k"] = [k] * batch
    rows = Rows(f["temperature"], top_k, f["top_p"], f["min_p"], f["repetition_penalty"],
                f["presence_penalty"], f["frequency_penalty"], None, host)
    return dtype, rows, None, None


def _prepare(logits, params, prompt_tokens, output_tokens):
    """Validate (shared checks of the reference) and apply penalties and bias, batched."""
    fast = None
    if prompt_tokens is None and output_tokens is None:
        check_logits(logits)
        fast = _scalar_inputs(logits, params)
    dtype, rows, prompt, output = fast or check_sampling_inputs(logits, params, prompt_tokens, output_tokens)
    batch, vocab = logits.shape
    x = logits.detach()
    x = x if x.dtype == dtype else x.to(dtype)
    h = rows.host
    seen_tokens = prompt is not None or output is not None       # checked first: the common case
    penalised = seen_tokens and (any(v != 1 for v in h["repetition_penalty"]) or any(   # skips the
        v != 0 for v in h["presence_penalty"] + h["frequency_penalty"]))              # per-row scan
    if penalised:
        seen = torch.zeros(batch, vocab + 1, dtype=torch.bool, device=x.device)
        counts = torch.zeros(batch, vocab + 1, dtype=dtype, device=x.device)
        if prompt is not None:
            seen.scatter_(1, _padded(prompt, vocab, x.device), True)
        if output is not None:
            ids = _padded(output, vocab, x.device)
            counts.scatter_add_(1, ids, torch.ones(ids.shape, dtype=dtype, device=x.device))
        counts = counts[:, :vocab]
        present = counts > 0
        seen = seen[:, :vocab] | present
        rp = rows.repetition_penalty[:, None]
        x = torch.where(seen, torch.where(x > 0, x / rp, x * rp), x)
        x = x - rows.frequency_penalty[:, None] * counts - rows.presence_penalty[:, None] * present.to(dtype)
    if rows.logit_bias is not None:
        x = x + rows.logit_bias
    return x, rows


def _padded(lists, vocab, device):
    """Ragged token lists -> (batch, L) int64 padded with ``vocab`` (a dropped extra column)."""
    lengths = {len(t) for t in lists}
    if len(lengths) == 1 and 0 not in lengths:
        return torch.stack(lists).to(device)
    width = max(lengths | {1})
    out = torch.full((len(lists), width), vocab, dtype=torch.int64)
    for r, t in enumerate(lists):
        out[r, :len(t)] = t
    return out.to(device)


def _raise_bad(kind: torch.Tensor) -> None:
    """``kind`` per row: 0 fine, 1 NaN, 2 +inf, 3 all -inf (the reference's messages)."""
    bad = (kind == 1).nonzero()
    if bad.numel():
        raise ValueError(f"logits contain NaN (row {int(bad[0])})")
    bad = (kind == 2).nonzero()
    if bad.numel():
        raise ValueError(f"logits row {int(bad[0])} is +inf after penalties and logit_bias "
                         "(+inf logits, or a penalty/bias overflowed)")
    bad = (kind == 3).nonzero()
    if bad.numel():
        raise ValueError(f"logits row {int(bad[0])}: every token is masked (all -inf after "
                         "logit_bias and penalties); nothing can be sampled")


def _row_status(m: torch.Tensor) -> torch.Tensor:
    """From each row's max (NaN propagates into it): 0 fine, 1 NaN, 2 +inf, 3 all -inf."""
    return (torch.isnan(m).to(torch.int8) + 2 * torch.isposinf(m).to(torch.int8)
            + 3 * torch.isneginf(m).to(torch.int8))


# ----------------------------------------------------------------------------- selection
def _topk(x: torch.Tensor, kq: int, chunk: int | None = None):
    """The kq largest values per row, sorted descending, with their token ids (NaN sorts first).

    Through chunk maxima: the row is cut into n chunks of L logits (strided, x[:, i*n + c] for
    chunk c, so the maxima are a vectorised reduction); the kq chunks with the largest maxima hold
    the row's kq largest values (those kq maxima are distinct logits >= the kq-th largest chunk
    maximum, and every chunk with a larger maximum is among them), so a topk over their kq * L
    logits is exact: the same sorted values; ids can differ only among equal values, and a tie
    that crosses the k-th place sends the row to the general path anyway. A NaN makes its chunk's
    maximum NaN, so it is selected and still sorts first. Two topks of ~sqrt(vocab * kq)
    elements replace one of vocab (torch.topk costs ~10 ns per element on the CPU).
    ``chunk``: L (default TOPK_CHUNK; None = sqrt(vocab / kq); 0 = one plain torch.topk)."""
    b, vocab = x.shape
    chunk = TOPK_CHUNK if chunk is None else chunk
    if chunk is None:
        chunk = max(4, int(math.sqrt(vocab / kq)))
    n = vocab // chunk if chunk else 0
    if n < 4 * kq:
        return torch.topk(x, kq, dim=1)
    main = x[:, :n * chunk].reshape(b, chunk, n)                            # chunk c = main[:, :, c]
    best = torch.topk(main.amax(dim=1), kq, dim=1).indices                  # (b, kq) chunks
    cand = main.gather(2, best[:, None, :].expand(b, chunk, kq)).reshape(b, chunk * kq)
    ids = (torch.arange(chunk, device=x.device)[None, :, None] * n + best[:, None, :]).reshape(b, chunk * kq)
    if n * chunk < vocab:                                                    # the ragged end
        cand = torch.cat([cand, x[:, n * chunk:]], dim=1)
        ids = torch.cat([ids, torch.arange(n * chunk, vocab, device=x.device).expand(b, -1)], dim=1)
    vals, j = torch.topk(cand, kq, dim=1)
    return vals, ids.gather(1, j)


def _select(z: torch.Tensor, w: torch.Tensor, target: torch.Tensor, tail: float | None,
            relative: bool = False) -> torch.Tensor:
    """Per row, v = min{z_t : W(t) < target} with W(t) = sum of w_j over z_j > z_t (with
    ``relative``: target * sum of w, the top-p case).

    z <= 0 with max 0 in every row. One level of NB buckets over [lo, 0], lo = the row's smallest
    z (or -``tail`` when that is lower or -inf: everything below falls into the last bucket). The
    histogram of w per bucket locates the bucket where the cumulative weight crosses ``target``;
    only that bucket's members are gathered and sorted to place v exactly. Ties share a bucket,
    so a tie is never split.
    """
    b, vocab = z.shape
    lo = z.amin(dim=1)
    clipped = True
    if tail is not None:
        clipped = bool((lo <= -tail).any())           # -inf (banned tokens) or a long tail
        lo = torch.where(lo > -tail, lo, torch.full_like(lo, -tail))
    else:                                             # counting (top-k): the smallest finite z
        lo = torch.where(z == -math.inf, torch.zeros_like(z), z).amin(dim=1)
    scale = (NB - 0.5) / (-lo).clamp_min(1e-30)
    key = torch.mul(z, (-scale)[:, None], out=_buf("keyf", z.shape, z.dtype, z.device))
    if clipped:                                       # else already in [0, NB - 0.5]
        key.clamp_(0, NB - 1)
    key = _buf("key", z.shape, torch.int64, z.device).copy_(key)
    hist = torch.zeros(b, NB, dtype=w.dtype, device=z.device).scatter_add_(1, key, w)
    incl = hist.cumsum(dim=1)
    if relative:
        target = target * incl[:, -1]
    star = (incl < target[:, None]).sum(dim=1).clamp_(max=NB - 1)
    above = torch.where(star > 0, incl.gather(1, (star - 1).clamp(min=0)[:, None])[:, 0],
                        torch.zeros_like(target))
    r, c = _nonzero_2d(torch.eq(key, star[:, None], out=_buf("member", z.shape, torch.bool, z.device)))
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
def _general_weights(x: torch.Tensor, rows_t: dict, host: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(w, z) for rows with T > 0, any top_k/top_p/min_p: w = exp(z) on the kept set, 0
    elsewhere (unnormalised); both are scratch buffers, valid until the next call."""
    b, vocab = x.shape
    m = x.amax(dim=1)
    _raise_bad(_row_status(m))
    z = torch.sub(x, m[:, None], out=_buf("z", x.shape, x.dtype, x.device))   # max z = 0 exactly
    if any(t != 1 for t in host["temperature"]):
        z.div_(rows_t["temperature"][:, None])        # (x - m) / T, as the reference rounds it
    e = torch.exp(z, out=_buf("e", x.shape, x.dtype, x.device))
    v = None
    ks = [kk if 0 < kk < vocab else 0 for kk in host["top_k"]]
    if any(ks):
        small = [kk for kk in ks if kk]
        if max(small) <= KMAX_FAST:
            top = _topk(z, max(small))[0]
            kk = torch.tensor([max(kk, 1) for kk in ks], device=z.device)
            vk = top.gather(1, (kk - 1)[:, None])[:, 0]
        else:
            target = torch.tensor([float(max(kk, 1)) for kk in ks], dtype=z.dtype, device=z.device)
            vk = _select(z, torch.ones_like(z), target, None)
        on = torch.tensor([kk > 0 for kk in ks], device=z.device)
        v = torch.where(on, vk, torch.full_like(vk, -math.inf))
    w = e if v is None else _mask(z, v, "w").mul_(e)
    if any(p < 1 for p in host["top_p"]):
        p = rows_t["top_p"]
        frac = torch.where(p < 1, p, torch.zeros_like(p))        # p = 1: a cheap no-op
        vp = _select(z, w, frac, 750.0 if z.dtype == torch.float64 else 110.0, relative=True)
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
    return torch.ge(a, thr[:, None], out=_buf(name, a.shape, a.dtype, a.device))


def _inverse_cdf(w: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Reference's draw on unnormalised weights in token-id order (scale-free): the first t with
    cumsum(w)_t > u * total; if rounding leaves none, the last positive t. Long rows go in two
    levels (sums of CDF_CHUNK-token chunks, then one chunk's cumsum) instead of a full cumsum."""
    b, vocab = w.shape
    n = vocab // CDF_CHUNK
    if vocab % CDF_CHUNK or n < 4:
        c = torch.cumsum(w, dim=1, out=_buf("cdf", w.shape, w.dtype, w.device))
        return _first_above(c, w, u.to(w.dtype) * c[:, -1])
    chunks = w.view(b, n, CDF_CHUNK)
    sums = chunks.sum(dim=2)                                                 # (b, n)
    cs = sums.cumsum(dim=1)
    target = u.to(w.dtype) * cs[:, -1]
    ci = _first_above(cs, sums, target)
    before = torch.where(ci > 0, cs.gather(1, (ci - 1).clamp(min=0)[:, None])[:, 0], torch.zeros_like(target))
    part = chunks.gather(1, ci[:, None, None].expand(b, 1, CDF_CHUNK))[:, 0]  # (b, CDF_CHUNK)
    j = _first_above(part.cumsum(dim=1) + before[:, None], part, target)
    return ci * CDF_CHUNK + j


def _first_above(c: torch.Tensor, w: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The first position with c > target (c non-decreasing), else the last with w > 0."""
    idx = torch.searchsorted(c, target[:, None], right=True)[:, 0]
    over = idx >= c.shape[1]
    if bool(over.any()):
        last = c.shape[1] - 1 - (w.flip(1) > 0).to(torch.int8).argmax(dim=1)
        idx = torch.where(over, last, idx)
    return idx


# ----------------------------------------------------------------------------- fast path
def _fast_tail_torch(vals, ids, rows_t, k, u):
    """Top-p, min-p and the draw on the kq = k_max + 1 candidates of every row (torch ops).

    Returns (tokens, status, w) with status 0 fine, 1-3 bad row (see _raise_bad), 4 tie at the
    k-th place (the row must take the general path); w are the kept weights of the candidates.
    """
    b, kq = vals.shape
    m = vals[:, :1]
    z = (vals - m) / rows_t["temperature"][:, None]
    status = _row_status(m[:, 0])
    kth = z.gather(1, (k - 1)[:, None])
    nxt = z.gather(1, k[:, None])
    status = torch.where((status == 0) & (nxt == kth)[:, 0], torch.full_like(status, 4), status)
    cand = torch.arange(kq, device=z.device)[None, :] < k[:, None]
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
    tokens = sids.gather(1, _inverse_cdf(w.gather(1, perm), u)[:, None])[:, 0]
    return tokens, status, (w, z)


def _fast(x: torch.Tensor, rows_t: dict, host: dict, u: torch.Tensor | None):
    """topk candidates + tail; returns (tokens or None, status, vals_ids_w for probs)."""
    kmax = max(host["top_k"])
    kq = kmax + 1
    vals, ids = _topk(x, kq)
    k = rows_t["top_k"]
    use_fused = (u is not None and kq <= FUSED_KMAX and x.dtype == torch.float32
                 and (FUSED is True or (FUSED == "auto" and x.is_cuda)))
    if use_fused:
        try:
            from optimized._sampling_triton import fused_tail
            tokens, status = fused_tail(vals, ids, rows_t["temperature"], k, rows_t["top_p"], rows_t["min_p"], u)
            return tokens, status, None
        except Exception as exc:  # a Triton build/launch failure: use the torch tail from now on
            _disable_fused(exc)
    tokens, status, w = _fast_tail_torch(vals, ids, rows_t, k, u)
    return tokens, status, (ids, w)


def _use_sort_free(x: torch.Tensor) -> bool:
    if x.dtype != torch.float32 or SORT_FREE in ("0", False):
        return False
    if x.is_cuda:
        return SORT_FREE in ("1", "auto", True)
    return (SORT_FREE in ("1", True) and os.environ.get("TRITON_INTERPRET") == "1"
            and x.shape[0] <= INTERPRET_MAX_ROWS and x.shape[1] <= INTERPRET_MAX_VOCAB)


def _sort_free(x: torch.Tensor, rows: Rows, u: torch.Tensor | None):
    """The Triton sort-free sampler: tokens (u given) or dense probabilities (u None)."""
    if SORT_FREE_SPLIT:
        from optimized._sampling_split import sort_free_split as sort_free
    else:
        from optimized._sampling_triton import sort_free
    tok, status, m, thr = sort_free(x, rows.temperature, rows.top_k, rows.top_p, rows.min_p, u)
    if bool(status.any()):                               # the one device sync
        _raise_bad(status)
    if u is not None:
        return tok
    t = rows.temperature
    z = (x - m[:, None]) / torch.where(t > 0, t, torch.ones_like(t))[:, None]
    keep = ((0.0 - z).view(torch.int32) <= thr[:, None]) & (torch.exp(z) >= rows.min_p[:, None])
    probs = torch.softmax(torch.where(keep, z, -math.inf), dim=1)
    if any(v == 0 for v in rows.host["temperature"]):
        greedy = torch.zeros_like(x).scatter_(1, x.argmax(dim=1, keepdim=True), 1.0)
        probs = torch.where((t == 0)[:, None], greedy, probs)
    return probs


def _disable_fused(exc: Exception) -> None:
    global FUSED
    import warnings
    warnings.warn(f"optimized.sampling: the fused Triton tail failed ({exc!r}); using torch ops instead",
                  RuntimeWarning, stacklevel=3)
    FUSED = False


# ----------------------------------------------------------------------------- contract
def _split(host: dict, vocab: int):
    """Per row: 'greedy', 'fast' or 'general' (host-side, no device sync)."""
    kinds = []
    for t, k in zip(host["temperature"], host["top_k"]):
        if t == 0:
            kinds.append("greedy")
        elif 1 <= k <= KMAX_FAST and k < vocab:
            kinds.append("fast")
        else:
            kinds.append("general")
    return kinds


def _sub(rows: Rows, sel: torch.Tensor | None, idx: list[int]) -> tuple[dict, dict]:
    names = ("temperature", "top_k", "top_p", "min_p")
    t = {n: (getattr(rows, n) if sel is None else getattr(rows, n)[sel]) for n in names}
    h = {n: [rows.host[n][i] for i in idx] for n in names}
    return t, h


def _weights_or_tokens(x: torch.Tensor, rows: Rows, u: torch.Tensor | None):
    """Shared driver. With u: token per row. Without: dense kept weights (batch, vocab)."""
    batch, vocab = x.shape
    kinds = _split(rows.host, vocab)
    general = [i for i, kd in enumerate(kinds) if kd == "general"]
    fast = [i for i, kd in enumerate(kinds) if kd == "fast"]
    greedy = [i for i, kd in enumerate(kinds) if kd == "greedy"]
    if len(greedy) == batch:
        _raise_bad(_row_status(x.amax(dim=1)))
        am = x.argmax(dim=1)
        return am if u is not None else torch.zeros_like(x).scatter_(1, am[:, None], 1.0)
    fast_done = None
    if len(fast) == batch:                              # the common case: no index shuffling
        t, h = _sub(rows, None, fast)
        tokens, status, extra = _fast(x, t, h, u)
        status_h = status.tolist()                      # the one device sync of the fast path
        if not any(status_h):
            if u is not None:
                return tokens
            return _dense_probs(vocab, *extra)
        fast_done = (tokens, status_h, extra)
    if len(general) == batch:
        return _general(x, rows, general, u)
    out = (torch.empty(batch, dtype=torch.int64, device=x.device) if u is not None
           else torch.zeros(batch, vocab, dtype=x.dtype, device=x.device))
    if greedy:
        sel = torch.tensor(greedy, device=x.device)
        xg = x[sel]
        _raise_bad(_row_status(xg.amax(dim=1)))
        am = xg.argmax(dim=1)
        out[sel] = am if u is not None else torch.zeros_like(xg).scatter_(1, am[:, None], 1.0)
    if fast:
        sel = None if len(fast) == batch else torch.tensor(fast, device=x.device)
        t, h = _sub(rows, sel, fast)
        xf = x if sel is None else x[sel]
        uf = None if u is None else (u if sel is None else u[sel])
        if fast_done is not None:
            tokens, status_h, extra = fast_done
        else:
            tokens, status, extra = _fast(xf, t, h, uf)
            status_h = status.tolist()
        _raise_bad(torch.tensor([s if s != 4 else 0 for s in status_h]))
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
        out[sel] = _general(x[sel], rows, general, None if u is None else u[sel], sel)
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


def _general(x, rows, idx, u, sel=None):
    """The general path over row blocks of ROW_BLOCK rows (CPU: a block's temporaries stay in
    cache; the path makes ~15 passes over the vocabulary)."""
    step = ROW_BLOCK if not x.is_cuda else x.shape[0]
    outs = []
    for s in range(0, x.shape[0], step):
        part = idx[s:s + step]
        psel = None if sel is None and len(part) == x.shape[0] else torch.tensor(part, device=x.device)
        w, z = _general_weights(x[s:s + step], *_sub(rows, psel, part))
        outs.append(_inverse_cdf(w, u[s:s + step]) if u is not None else _softmax_kept(z, w))
    return outs[0] if len(outs) == 1 else torch.cat(outs)


def sampling_probs(logits, params: SamplingParams | None = None, *, prompt_tokens=None,
                   output_tokens=None) -> torch.Tensor:
    """Same contract as :func:`reference.sampling.sampling_probs`, computed sort-free."""
    x, rows = _prepare(logits, params, prompt_tokens, output_tokens)
    if x.shape[0] == 0:
        return x.clone()
    if _use_sort_free(x):
        return _sort_free(x, rows, None)
    return _weights_or_tokens(x, rows, None)


def sample(logits, params: SamplingParams | None = None, generator: torch.Generator | None = None, *,
           prompt_tokens=None, output_tokens=None, uniforms: torch.Tensor | None = None) -> torch.Tensor:
    """Same contract as :func:`reference.sampling.sample`: inverse CDF in token-id order over the
    kept set, one float64 uniform per row (from ``generator`` or ``uniforms``)."""
    check_logits(logits)
    batch = logits.shape[0]
    if uniforms is not None:
        uniforms = check_uniforms(uniforms, batch, logits.device)
    check_generator(generator, uniforms, logits.device)
    x, rows = _prepare(logits, params, prompt_tokens, output_tokens)
    if batch == 0:
        return torch.zeros(0, dtype=torch.int64, device=logits.device)
    state = None
    if uniforms is None:
        state = generator.get_state()
        u = draw_uniforms(generator, batch, logits.device)
    else:
        u = uniforms
    try:
        if _use_sort_free(x):
            return _sort_free(x, rows, u)
        return _weights_or_tokens(x, rows, u)
    except ValueError:
        if state is not None:       # a rejected call leaves the generator as it found it
            generator.set_state(state)
        raise
