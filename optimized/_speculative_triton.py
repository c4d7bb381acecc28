"""The verifier's per-row draw in Triton (optimized/speculative.py, step 2): one program per batch
row forms the row's one distribution -- the residual max(p_k - q_k, 0) at its first rejection,
or the bonus p_k -- in float64, and draws the contract's inverse-CDF token from it (the smallest
t with C_t > v * C_last, C the cumulative sum in token-id order); greedy rows take the argmax of
p_k instead (ties to the smallest id, torch.argmax's rule). Nothing of size vocab is written.

Exactness: a certificate, not luck. The reference (reference.sampling.inverse_cdf) and the torch
path compute C by torch.cumsum in float64; this kernel sums the same float64 weights in another
order (block sums, then tl.cumsum inside the block where the target is crossed). The weights
themselves are bit for bit the reference's: the same IEEE float64 subtraction and clamp on the
same exactly-cast inputs. Write u = 2^-53, n = vocab, S = the exact total, E_t = the exact prefix
sums (non-decreasing: the weights are >= 0), gamma = (n - 1) u / (1 - (n - 1) u). Any float64
summation of n nonnegative terms, in any order or tree, is within gamma * (its exact sum) of it
(each addition errs by at most u times its result, subnormal results are exact), so every C_t the
reference computes and every C'_t the kernel computes is within gamma * S of E_t. The two targets
T = fl(v * C_last) (reference) and T' = fl(v * S') (kernel, S' its own total) then differ by at
most 2 gamma S + 2 u S + 2 * 2^-1075 (the last term: a product in the subnormal range). Let t' be
the kernel's token, the first t with C'_t > T'. If

    (hi)  C'_{t'} - T' > M                      or v == 0 (then T = T' = 0 exactly), and
    (lo)  T' - C'_{t'-1} > M                    or every weight before t' is 0 (C'_{t'-1} == 0),

with M = 8 (n + 1) u S', then for every t < t':  C_t <= E_{t'-1} + gamma S <= C'_{t'-1} + 2 gamma S
< T' - M + 2 gamma S <= T, and C_{t'} >= C'_{t'} - 2 gamma S > T' + M - 2 gamma S >= T: whatever
order the reference sums in, its first t with C_t > T is t' too (M exceeds the 4 gamma S + 2 u S
+ 2^-1074 needed with a factor ~2 to spare, which covers S <= S' / (1 - gamma) and the rounding of
M itself, as long as S' >= 2^-999 and n < 2^40; the differences are compared after float64
rounding, which is monotone, so fl(x - y) > M implies x - y > M). The kernel FLAGS a sampled row
instead of trusting it when

* the certificate fails (v * total within ~8 n ulps of the total from a cumulative step: an event
  of probability ~1e-12 at n = 128k for random uniforms);
* the total is below 2^-999, including 0: an empty residual (the contract then draws from p_k;
  reachable only through rounding) and subnormal totals (where v * total may round up to the
  total and the reference falls back to the last positive weight);
* no t is found (only possible in the cases above).

The caller (optimized/speculative.py) then launches ``redraw_flagged``: one program per row,
whose programs of unflagged rows exit at once, and whose programs of flagged rows draw the token
again in the contract's own order -- C_t = C_{t-1} + w_t, one float64 addition after another in
token order (torch.cumsum's loop on the CPU, the reference's), the empty residual replaced by p,
the reference's fallback to the last positive weight -- so the result is the reference's for
every row, and no value is read on the host (no sync: the pair is capturable in a CUDA graph).
That program walks the row one token at a time (slow: a few ms per flagged row at vocab 128k on
a GPU), which the rarity of flagged rows pays for. Greedy rows are never flagged (the argmax is
exact: a comparison of exactly cast values).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

NUM_WARPS = 4

MARGIN_U = tl.constexpr(8 * 2.0 ** -53)   # M = 8 (n + 1) u S' (a power of 2: exact as a literal)
MIN_TOTAL_BITS = tl.constexpr(24 << 52)  # float64 bits of 2^-999: smaller totals are flagged


@triton.jit
def _weights(p_row, q_row, sp_v, sq_v, idx, inb, rej, xk, HAS_Q: tl.constexpr):
    """p and the float64 weights at token ids ``idx``: the residual max(p - q, 0) on a rejected
    row (q one-hot on the drafted token xk without draft probabilities), p itself on a bonus row
    (q is then not read: at the bonus position it is padding)."""
    p = tl.load(p_row + idx * sp_v, mask=inb, other=0.0).to(tl.float64)
    if HAS_Q:
        q = tl.load(q_row + idx * sq_v, mask=inb & rej, other=0.0).to(tl.float64)
    else:
        q = tl.where(rej & (idx == xk), 1.0, 0.0).to(tl.float64)
    return p, tl.maximum(p - q, 0.0)


@triton.jit
def _draw_kernel(p_ptr, q_ptr, x_ptr, k_ptr, lens_ptr, greedy_ptr, v_ptr, tok_ptr, flag_ptr,
                 V, G, sp_b, sp_i, sp_v, sq_b, sq_i, sq_v, sx_b, sv,
                 HAS_Q: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    k = tl.load(k_ptr + b)
    rej = k < tl.load(lens_ptr + b)                 # then k < lens <= G: a real draft position
    greedy = tl.load(greedy_ptr + b).to(tl.int32)
    kq = tl.minimum(k, G - 1)                       # read only where rej
    offs = tl.arange(0, BLOCK)
    p_row = p_ptr + b * sp_b + k * sp_i
    q_row = q_ptr + b * sq_b + kq * sq_i
    xk = tl.load(x_ptr + b * sx_b + kq, mask=rej, other=-1)   # the drafted token (n-gram)

    # pass 1: the total of the weights, and the argmax of p (greedy rows)
    total = tl.zeros([], dtype=tl.float64)
    best = tl.full([BLOCK], -1.0, dtype=tl.float64)  # per lane: the largest p seen, its first id
    best_i = tl.zeros([BLOCK], dtype=tl.int64)
    for s in range(0, V, BLOCK):
        idx = s + offs
        inb = idx < V
        p, w = _weights(p_row, q_row, sp_v, sq_v, idx, inb, rej, xk, HAS_Q)
        better = inb & (p > best)
        best = tl.where(better, p, best)
        best_i = tl.where(better, idx.to(tl.int64), best_i)
        total += tl.sum(w, axis=0)
    pmax = tl.max(best, axis=0)
    token = tl.min(tl.where(best == pmax, best_i, V), axis=0)
    flag = tl.zeros([], dtype=tl.int32)

    if greedy == 0:
        v = tl.load(v_ptr + b * sv)
        big = total.to(tl.int64, bitcast=True) >= MIN_TOTAL_BITS
        target = v * total
        margin = total * (V + 1) * MARGIN_U         # (V + 1: V may be a constexpr 1 on a GPU)
        # pass 2: the first t with C'_t > target, C' = (sum of earlier blocks) + in-block cumsum
        found = tl.full([], -1, dtype=tl.int64)
        c_at = tl.zeros([], dtype=tl.float64)
        c_prev = tl.zeros([], dtype=tl.float64)
        run = tl.zeros([], dtype=tl.float64)
        start = tl.zeros([], dtype=tl.int64)
        while big & (found < 0) & (start < V):
            ids = start + offs                      # (names apart from pass 1's: other types)
            in_v = ids < V
            _, w2 = _weights(p_row, q_row, sp_v, sq_v, ids, in_v, rej, xk, HAS_Q)
            c = run + tl.cumsum(w2, axis=0)
            first = tl.min(tl.where(in_v & (c > target), ids, V), axis=0)
            c_at = tl.sum(tl.where(ids == first, c, 0.0), axis=0)
            # the largest computed cumulative sum before `first` (run: C' before this block;
            # 0 exactly iff every earlier weight is 0)
            c_prev = tl.max(tl.where(ids < first, c, run), axis=0)
            found = tl.where(first < V, first, -1)
            run = tl.sum(tl.where(offs == BLOCK - 1, c, 0.0), axis=0)   # the full block's prefix
            start += BLOCK
        hi_ok = (c_at - target > margin) | (v == 0.0)
        lo_ok = (target - c_prev > margin) | (c_prev == 0.0)
        token = found
        flag = (~big | (found < 0) | ~hi_ok | ~lo_ok).to(tl.int32)
    tl.store(tok_ptr + b, token)
    tl.store(flag_ptr + b, flag.to(tl.int8))


@triton.jit
def _exact_kernel(p_ptr, q_ptr, x_ptr, k_ptr, lens_ptr, v_ptr, tok_ptr, flag_ptr,
                  V, G, sp_b, sp_i, sp_v, sq_b, sq_i, sq_v, sx_b, sv, HAS_Q: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    if tl.load(flag_ptr + b) != 0:                  # an unflagged row: nothing to do
        k = tl.load(k_ptr + b)
        rej = k < tl.load(lens_ptr + b)
        kq = tl.minimum(k, G - 1)
        p_row = p_ptr + b * sp_b + k * sp_i
        q_row = q_ptr + b * sq_b + kq * sq_i
        xk = tl.load(x_ptr + b * sx_b + kq, mask=rej, other=-1)
        # pass 1, in token order: the total of the weights, and of p (an empty residual draws from p)
        total = tl.zeros([], dtype=tl.float64)
        total_p = tl.zeros([], dtype=tl.float64)
        for t in range(0, V):
            p, w = _weights(p_row, q_row, sp_v, sq_v, t, t < V, rej, xk, HAS_Q)
            total += w
            total_p += p
        use_p = total == 0.0
        total = tl.where(use_p, total_p, total)
        target = tl.load(v_ptr + b * sv) * total
        # pass 2, the same additions: count C_t <= target; the last positive weight's id
        c = tl.zeros([], dtype=tl.float64)
        count = tl.zeros([], dtype=tl.int64)
        last = tl.full([], -1, dtype=tl.int64)
        for t in range(0, V):
            p, w = _weights(p_row, q_row, sp_v, sq_v, t, t < V, rej, xk, HAS_Q)
            w = tl.where(use_p, p, w)
            c += w
            count += (c <= target).to(tl.int64)
            last = tl.where(w > 0.0, t, last)
        last = tl.where(last < 0, V - 1, last)      # no positive weight: reference.sampling's V - 1
        tl.store(tok_ptr + b, tl.minimum(count, last))


def redraw_flagged(target_probs: torch.Tensor, draft_probs: torch.Tensor | None, drafts: torch.Tensor,
                   k: torch.Tensor, lens: torch.Tensor, v: torch.Tensor, tokens: torch.Tensor,
                   flags: torch.Tensor) -> None:
    """Overwrite ``tokens[b]`` of every row whose ``flags[b]`` is set (``draw_rows``' outputs) by the
    contract's own draw (module doc): the inverse CDF of the row's weights summed sequentially in
    token order, an empty residual replaced by p. One program per row; unflagged rows' programs
    exit at once, and nothing is read on the host. Arguments as for ``draw_rows``."""
    b, positions, vocab = target_probs.shape
    if b == 0:
        return
    g = positions - 1
    p = target_probs
    has_q = draft_probs is not None and g > 0
    q = draft_probs if has_q else p                   # placeholders: never read
    x = drafts if g > 0 else k
    _exact_kernel[(b,)](p, q, x, k, lens, v, tokens, flags, vocab, g,
                        p.stride(0), p.stride(1), p.stride(2), q.stride(0), q.stride(1), q.stride(2),
                        x.stride(0), v.stride(0), HAS_Q=has_q, num_warps=1)


def draw_rows(target_probs: torch.Tensor, draft_probs: torch.Tensor | None, drafts: torch.Tensor,
              k: torch.Tensor, lens: torch.Tensor, greedy: torch.Tensor, v: torch.Tensor, *,
              block_v: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The emitted (recovered or bonus) token of every row, and which rows to recompute.

    target_probs (B, G + 1, V) and draft_probs (B, G, V) or None (one-hot on the drafts), any
    float dtype and strides, already validated at the active positions; drafts (B, G) int64 (the
    drafted ids, any valid id at padding); k (B,) int64 the number accepted (<= lens); lens (B,)
    int64 the per-row draft lengths; greedy (B,) bool; v (B,) float64 the draw's uniforms
    (``uniforms[:, G]``, any stride); block_v the tokens one program reads per step (a power of
    2: optimized.speculative.VerifyConfig.block_v; tests lower it to 4 or 16 so that the small
    vocabularies the interpreter can afford still cross several blocks). A row is rejected iff
    k < lens: its weights are the residual at position k, else p at position k. Reads p[b, k] (and q[b, k], drafts[b, k] on
    rejected rows) only: padding is never read.

    Returns (tokens (B,) int64, flags (B,) int8): greedy rows get the argmax of p[b, k] (ties to
    the smallest id) and flag 0; sampled rows the inverse-CDF token of the module doc, and flag 1
    where it is not certified (the token is then meaningless, possibly -1) and the caller must
    recompute the row (``redraw_flagged``)."""
    b, positions, vocab = target_probs.shape
    g = positions - 1
    dev = target_probs.device
    tok = torch.empty(b, dtype=torch.int64, device=dev)
    flag = torch.empty(b, dtype=torch.int8, device=dev)
    if b == 0:
        return tok, flag
    assert vocab >= 1 and k.dtype == torch.int64 and lens.dtype == torch.int64 and v.dtype == torch.float64
    p = target_probs
    has_q = draft_probs is not None and g > 0
    q = draft_probs if has_q else p                   # placeholders: never read
    x = drafts if g > 0 else k
    block = min(block_v, max(16, triton.next_power_of_2(vocab)))
    _draw_kernel[(b,)](p, q, x, k, lens, greedy, v, tok, flag, vocab, g,
                       p.stride(0), p.stride(1), p.stride(2), q.stride(0), q.stride(1), q.stride(2),
                       x.stride(0), v.stride(0), HAS_Q=has_q, BLOCK=block, num_warps=NUM_WARPS)
    return tok, flag
