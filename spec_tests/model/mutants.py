"""Planted bugs of `model` (each must make a model test fail)."""
from conformance.mutants import Patch

MODEL = "reference/model.py"

MUTANTS = [
    Patch("rope_interleaved",
          "RoPE applied to interleaved pairs (x[2i], x[2i+1]) -- Meta's complex-number layout -- on "
          "weights laid out for HF's half-split pairs (x[i], x[i + head_dim/2]): the classic bug of "
          "loading an HF checkpoint into Meta-style rotary code without permuting q_proj/k_proj.",
          MODEL,
          "    return x * cos + rotate_half(x) * sin",
          "    half = x.shape[-1] // 2\n"
          "    cos, sin = cos[..., :half].repeat_interleave(2, -1), sin[..., :half].repeat_interleave(2, -1)\n"
          "    pairs = x.unflatten(-1, (half, 2))\n"
          "    return x * cos + torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2) * sin"),
    Patch("gqa_kv_tiled",
          "GQA heads mapped by modulo: K/V heads are expanded with ``repeat`` (tiling: query head h "
          "reads KV head h % n_kv_heads) instead of ``repeat_interleave`` (h // group) before "
          "attention. Right for MHA and MQA, wrong for every GQA model with more than one KV head.",
          MODEL,
          "        out = attention_fn(q, k, v, causal=True, window=None, scale=None)",
          "        group = self.n_heads // self.n_kv_heads\n"
          "        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)\n"
          "        out = attention_fn(q, k, v, causal=True, window=None, scale=None)"),
    Patch("rmsnorm_no_eps",
          "RMSNorm that adds eps outside the square root (x / (sqrt(mean(x^2)) + eps)) -- a common "
          "slip when porting from LayerNorm-style code; off by about eps/2 relative, visible in "
          "float64 and with a large eps.",
          MODEL,
          "    normed = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "    normed = xf / (xf.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)"),
    Patch("decode_position_off_by_one",
          "With a non-empty KV cache, the new tokens' RoPE positions start at cache length - 1 "
          "instead of the cache length (the first decode token gets the last prompt token's "
          "position). A whole-sequence forward is right; only prefill-then-decode is wrong.",
          MODEL,
          "        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)",
          "        start = max(start - 1, 0)\n"
          "        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)"),
    Patch("cached_path_skips_final_norm",
          "The cached path (forward with a KV cache) forgets the final RMSNorm before lm_head, so "
          "cached logits differ from uncached ones -- a mismatch between two code paths that "
          "should be one.",
          MODEL,
          "        return self.lm_head(self.model.norm(h))",
          "        return self.lm_head(h if cache is not None else self.model.norm(h))"),
]
