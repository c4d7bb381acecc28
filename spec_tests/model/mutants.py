"""Planted bugs of `model` (each must make a model test fail)."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("rope_interleaved",
          "RoPE applied to interleaved pairs (x[2i], x[2i+1]) -- Meta's complex-number layout -- on "
          "weights laid out for HF's half-split pairs (x[i], x[i + head_dim/2]): the classic bug of "
          "loading an HF checkpoint into Meta-style rotary code without permuting q_proj/k_proj.",
          "    return x * cos + rotate_half(x) * sin",
          "    half = x.shape[-1] // 2\n"
          "    cos, sin = cos[..., :half].repeat_interleave(2, -1), sin[..., :half].repeat_interleave(2, -1)\n"
          "    pairs = x.unflatten(-1, (half, 2))\n"
          "    return x * cos + torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2) * sin"),
    Patch("gqa_kv_tiled",
          "GQA heads mapped by modulo: K/V heads are expanded with ``repeat`` (tiling: query head h "
          "reads KV head h % n_kv_heads) instead of ``repeat_interleave`` (h // group) before "
          "attention. Right for MHA and MQA, wrong for every GQA model with more than one KV head.",
          "        out = attention_fn(q, k, v, causal=True, window=None, scale=None)",
          "        group = self.n_heads // self.n_kv_heads\n"
          "        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)\n"
          "        out = attention_fn(q, k, v, causal=True, window=None, scale=None)"),
    Patch("rmsnorm_no_eps",
          "RMSNorm that adds eps outside the square root (x / (sqrt(mean(x^2)) + eps)) -- a common "
          "slip when porting from LayerNorm-style code; off by about eps/2 relative, visible in "
          "float64 and with a large eps.",
          "    normed = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)",
          "    normed = xf / (xf.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)"),
    Patch("decode_position_off_by_one",
          "With a non-empty KV cache, the new tokens' RoPE positions start at cache length - 1 "
          "instead of the cache length (the first decode token gets the last prompt token's "
          "position). A whole-sequence forward is right; only prefill-then-decode is wrong.",
          "        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)",
          "        start = max(start - 1, 0)\n"
          "        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)"),
    Patch("cached_path_skips_final_norm",
          "The cached path (forward with a KV cache) forgets the final RMSNorm before lm_head, so "
          "cached logits differ from uncached ones -- a mismatch between two code paths that "
          "should be one.",
          "        return self.lm_head(self.model.norm(h))",
          "        return self.lm_head(h if cache is not None else self.model.norm(h))"),
]

# Long-range numerics, defaults and boundaries.
MUTANTS += [
    Patch("rope_positions_in_model_dtype",
          "The positions are cast to the activation dtype before the float32 RoPE table "
          "(``positions.to(x.dtype)``, as code that builds the table from a tensor of the model's "
          "dtype does): exact while bfloat16 holds the integers (up to 256) and float16 (up to "
          "2048), so every short test passes; at position 3,000 bfloat16 rounds to a multiple of "
          "16. Only the long-range test reaches it.",
          "    angles = positions.to(acc)[:, None] * inv_freq[None, :]",
          "    angles = positions.to(dtype).to(acc)[:, None] * inv_freq[None, :]"),
    Patch("rope_inv_freq_in_model_dtype",
          "The RoPE frequencies are rounded to the activation dtype and the angles then computed "
          "in float32 -- what ``LlamaForCausalLM(config).to(torch.bfloat16)`` does to HF's "
          "``inv_freq`` buffer. A relative error of 2^-9 per frequency is invisible over the ~30 "
          "positions of the short tests and radians off at a distance of 4,000.",
          "    angles = positions.to(acc)[:, None] * inv_freq[None, :]",
          "    angles = positions.to(acc)[:, None] * inv_freq.to(dtype).to(acc)[None, :]"),
    Patch("default_rope_theta_llama3",
          "ModelConfig's default rope_theta is Llama 3's 500000 instead of the documented 10000 "
          "(a config copied from another model); every test that passes rope_theta is unaffected.",
          "    rope_theta: float = 10000.0\n",
          "    rope_theta: float = 500000.0\n"),
    Patch("new_cache_default_from_class",
          "new_cache's default length is the dataclass default max_seq_len (128) instead of this "
          "model's config.max_seq_len: a cache too short (or too long) for the model.",
          "        max_seq_len = c.max_seq_len if max_seq_len is None else",
          "        max_seq_len = ModelConfig.max_seq_len if max_seq_len is None else"),
    Patch("norm_eps_zero_rejected",
          "norm_eps must be > 0 (\"an epsilon is positive\"): the legal boundary norm_eps = 0 "
          "raises ValueError.",
          '        check_real("norm_eps", self.norm_eps, minimum=0)\n',
          '        if check_real("norm_eps", self.norm_eps) <= 0:\n'
          '            raise ValueError(f"norm_eps must be > 0, got {self.norm_eps}")\n'),
    Patch("rope_theta_one_accepted",
          "rope_theta = 1 is accepted (``< 1`` for ``<= 1``): every frequency is then 1 and RoPE "
          "rotates all pairs by the same angle.",
          "        if check_real(\"rope_theta\", self.rope_theta) <= 1:",
          "        if check_real(\"rope_theta\", self.rope_theta) < 1:"),
    Patch("max_seq_len_exclusive",
          "The model rejects positions reaching max_seq_len - 1 (``>=`` for ``>``): a sequence of "
          "exactly max_seq_len tokens raises.",
          "    if start + tokens.shape[1] > c.max_seq_len:",
          "    if start + tokens.shape[1] >= c.max_seq_len:"),
    Patch("cache_full_rejected",
          "A KV cache of max_seq_len tokens rejects the token that fills it (``>=`` for ``>`` in "
          "the room check): the last position of a full-length generation raises.",
          "        if start + tokens.shape[1] > cache.max_seq_len:",
          "        if start + tokens.shape[1] >= cache.max_seq_len:"),
    Patch("rope_width_from_dim",
          "The rotary table is built for dim // n_heads features (the usual derivation) instead of "
          "config.head_dim: a model whose head_dim is given and differs (Gemma-, Qwen3-style) "
          "cannot run (the pinned 'MHA, given head_dim' example).",
          "rope_cos_sin(positions, self.config.head_dim, ",
          "rope_cos_sin(positions, self.config.dim // self.config.n_heads, "),
]
