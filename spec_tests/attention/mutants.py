"""Planted bugs of `attention` (each must make an attention test fail): source patches of
reference/attention.py, and one memoising wrapper that a patch cannot express."""
from conformance.mutants import Patch, Replace

REF = "reference/attention.py"


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
          REF,
          "        mask &= pos_k <= pos_q\n",
          "        mask &= pos_k <= pos_q + 1\n"),
    Patch("top_left_causal",
          "Causal mask aligned top-left (j <= i) instead of bottom-right (j <= i + kv_len - q_len): "
          "right when q_len == kv_len, wrong for decode and chunked prefill.",
          REF,
          "        mask &= pos_k <= pos_q\n",
          "        mask &= pos_k <= pos_q - (kv_len - q_len)\n"),
    Patch("gqa_wrong_head",
          "GQA head mapping by modulo (h % kv_heads) instead of by group (h // group): right for MHA "
          "and MQA, wrong for every real GQA model.",
          REF,
          "    qg = q.reshape(batch, kv_heads, group, q_len, head_dim)\n",
          "    idx = torch.arange(q_heads, device=q.device) % kv_heads\n"
          "    k, v, kv_heads, group = k[:, idx], v[:, idx], q_heads, 1\n"
          "    qg = q.reshape(batch, kv_heads, group, q_len, head_dim)\n"),
    Patch("masked_row_nan",
          "Plain softmax over a fully masked row: exp(-inf - (-inf)) = NaN leaks into the output "
          "instead of the specified 0.",
          REF,
          "    probs = torch.exp(scores - lse.unsqueeze(-1).clamp(min=torch.finfo(acc).min))\n"
          "    probs = torch.nan_to_num(probs, nan=0.0)",
          "    probs = torch.softmax(scores, dim=-1)"),
    Patch("mutates_input",
          "Scales q in place to save a multiply (q.mul_(scale)): the output is right, the caller's "
          "q is silently changed.",
          REF,
          "    acc = compute_dtype(q.dtype)\n",
          "    acc = compute_dtype(q.dtype)\n"
          "    q, scale = q.mul_(scale), 1.0\n"),
    Patch("tiled_no_rescale",
          "Online softmax that forgets to rescale the denominator and accumulator when the running "
          "max grows: the exact bug FlashAttention's correction step exists to prevent. Plain "
          "attention is correct.",
          REF,
          "                l = l * alpha + p.sum(dim=-1)\n"
          "                pv = torch.matmul(p.to(v.dtype), vh[:, j0:j0 + block_k]).to(acc_dtype)\n"
          "                acc = acc * alpha.unsqueeze(-1) + pv\n",
          "                l = l + p.sum(dim=-1)\n"
          "                pv = torch.matmul(p.to(v.dtype), vh[:, j0:j0 + block_k]).to(acc_dtype)\n"
          "                acc = acc + pv\n"),
    Replace("cached_result",
            "Memoises results by input shape and options (a \"plan cache\" gone wrong): the second "
            "call with the same shapes returns the first call's output.",
            names={"attention": _cached_attention}),
]
