"""Planted bugs of `attention` (each must make an attention test fail): source patches of
reference/attention.py, and one memoising wrapper that a patch cannot express."""
from conformance.declarations import Patch, Replace


_cache: dict = {}


def _cached_attention(q, k, v, *, causal=False, window=None, scale=None, return_lse=False):
    """Memoised by shapes and options (a "plan cache" keyed on the wrong thing)."""
    from reference.attention import attention
    key = (q.shape, k.shape, q.dtype, q.device, causal, window, scale, return_lse)
    if key not in _cache:
        _cache[key] = attention(q, k, v, causal=causal, window=window, scale=scale, return_lse=return_lse)
    return _cache[key]


MUTANTS = [
    Patch("causal_off_by_one",
          "Causal mask off by one: each query also sees the next key (j <= p_i + 1), a classic bug "
          "when porting a top-left-aligned mask to bottom-right alignment.",
          "        mask &= pos_k <= pos_q\n",
          "        mask &= pos_k <= pos_q + 1\n"),
    Patch("top_left_causal",
          "Causal mask aligned top-left (j <= i) instead of bottom-right (j <= i + kv_len - q_len): "
          "right when q_len == kv_len, wrong for decode and chunked prefill.",
          "        mask &= pos_k <= pos_q\n",
          "        mask &= pos_k <= pos_q - (kv_len - q_len)\n"),
    Patch("gqa_wrong_head",
          "GQA head mapping by modulo (h % kv_heads) instead of by group (h // group): right for MHA "
          "and MQA, wrong for every real GQA model.",
          "    qg = q.reshape(batch, kv_heads, group, q_len, head_dim)\n",
          "    idx = torch.arange(q_heads, device=q.device) % kv_heads\n"
          "    k, v, kv_heads, group = k[:, idx], v[:, idx], q_heads, 1\n"
          "    qg = q.reshape(batch, kv_heads, group, q_len, head_dim)\n"),
    Patch("masked_row_nan",
          "Plain softmax over a fully masked row: exp(-inf - (-inf)) = NaN leaks into the output "
          "instead of the specified 0.",
          "    probs = torch.exp(scores - lse.unsqueeze(-1).clamp(min=torch.finfo(acc).min))\n"
          "    probs = torch.nan_to_num(probs, nan=0.0)",
          "    probs = torch.softmax(scores, dim=-1)"),
    Patch("mutates_input",
          "Scales q in place to save a multiply (q.mul_(scale)): the output is right, the caller's "
          "q is silently changed.",
          "    acc = compute_dtype(q.dtype)\n",
          "    acc = compute_dtype(q.dtype)\n"
          "    q, scale = q.mul_(scale), 1.0\n"),
    Patch("tiled_no_rescale",
          "Online softmax that forgets to rescale the denominator and accumulator when the running "
          "max grows: the exact bug FlashAttention's correction step exists to prevent. Plain "
          "attention is correct.",
          "                l = l * alpha + p.sum(dim=-1)\n"
          "                pv = torch.matmul(p.to(v.dtype), vh[:, j0:j0 + block_k]).to(acc_dtype)\n"
          "                acc = acc * alpha.unsqueeze(-1) + pv\n",
          "                l = l + p.sum(dim=-1)\n"
          "                pv = torch.matmul(p.to(v.dtype), vh[:, j0:j0 + block_k]).to(acc_dtype)\n"
          "                acc = acc + pv\n"),
    Patch("window_off_by_one",
          "Left window one key short: key j visible only if j > p_i - window (not >=), so window w "
          "sees w - 1 keys to the left and window=0 sees nothing.",
          "        mask &= pos_k >= pos_q - window\n",
          "        mask &= pos_k > pos_q - window\n"),
    Patch("window_zero_is_none",
          "`if window:` instead of `if window is not None:`: window=0 (only the query's own "
          "position) is taken for 'no window'.",
          "    if window is not None:\n",
          "    if window:\n"),
    Patch("scale_zero_is_default",
          "`scale or 1/sqrt(head_dim)`: a scale of 0 (legal: uniform weights) is replaced by the "
          "default scale.",
          "    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)\n    acc = ",
          "    scale = float(scale or 1.0 / math.sqrt(head_dim))\n    acc = "),
    Patch("default_causal_true",
          "The documented default causal=False changed to True (as in many decoder-only code "
          "bases): every call that passes causal explicitly is right, a call that omits it is not.",
          "def attention(q, k, v, *, causal: bool = False,",
          "def attention(q, k, v, *, causal: bool = True,"),
    Patch("default_returns_lse",
          "The documented default return_lse=False changed to True: a call that omits it gets an "
          "(out, lse) tuple instead of out.",
          "scale: float | None = None, return_lse: bool = False):\n",
          "scale: float | None = None, return_lse: bool = True):\n"),
    Patch("decode_lse_squeezed",
          "lse squeezed on its last axis: right for prefill, but a single query (q_len 1, decode) "
          "gets lse of shape (batch, q_heads) instead of (batch, q_heads, 1).",
          "    lse = lse.reshape(batch, q_heads, q_len)\n",
          "    lse = lse.reshape(batch, q_heads, q_len).squeeze(-1)\n"),
    Patch("empty_keys_crash",
          "Row max taken with amax before the log-sum-exp (a common way to write a stable "
          "softmax): fine for any key, but kv_len 0 (legal: every row fully masked) raises.",
          "    lse = torch.logsumexp(scores, dim=-1)  ",
          "    row_max = scores.amax(dim=-1)\n    lse = torch.logsumexp(scores, dim=-1)  "),
    Patch("tiled_drops_ragged_tail",
          "The tiled form walks only whole key tiles (range(0, kv_len - block_k + 1, block_k)): "
          "right when kv_len is a multiple of block_k, the last keys are dropped otherwise.",
          "            for j0 in range(0, kv_len, block_k):\n",
          "            for j0 in range(0, kv_len - block_k + 1, block_k):\n"),
    Replace("cached_result",
            "Memoises results by input shape and options (a \"plan cache\" gone wrong): the second "
            "call with the same shapes returns the first call's output.",
            names={"attention": _cached_attention}),
]
