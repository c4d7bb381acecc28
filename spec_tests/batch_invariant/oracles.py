"""Oracles of the batch_invariant tests: plain (split-free) decode attention, and a batched
forward of the reference model with packed prompts and ragged per-request KV caches."""
from __future__ import annotations

import torch

from reference.attention import attention as plain_attention


def plain_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens) -> torch.Tensor:
    """Decode attention the plain way, one sequence at a time through reference/attention.py
    (scores by matmul, softmax, P @ V; GQA without repeating K/V), in q's dtype. In float64 it
    is the oracle; in a low dtype the baseline of the tolerance rule."""
    return torch.stack([plain_attention(q[b:b + 1, :, None], k[b:b + 1, :, :n], v[b:b + 1, :, :n])[0, :, 0]
                        for b, n in enumerate(lens)])


# --- a batched forward of the reference model: packed prefill, ragged decode ------------------
class PackedRunner:
    """Batched generation with reference/model.py's public pieces (its modules and weights,
    ``rope_cos_sin``, ``rotate_half``), because the model's own ``forward`` batches only prompts of
    one length (one shared position, no attention mask).

    *Packing with per-sequence positions* (no padding tokens): a prefill step is one flat row of
    all new tokens of all requests (T = sum of prompt lengths); token t carries its request id and
    its own position (0.. within its prompt). Every per-token op (embedding, RMSNorm, the
    projections, RoPE, the MLP, the head) runs once over the T rows. Each request has its own KV
    cache slot (B, Hkv, max_len, head_dim); token t attends to its request's keys 0..pos[t]
    through ``decode_attention(q, k_slots[req], v_slots[req], pos + 1)`` -- ragged lengths, no
    mask tensor. A decode step is the same with one new token per request. The RoPE table is
    computed once for positions 0..max_len-1 and gathered per token (as servers do)."""

    def __init__(self, model, decode_attention, max_len: int):
        from reference.model import rope_cos_sin
        c = model.config
        self.model, self.att, self.max_len = model, decode_attention, max_len
        self.cos, self.sin = rope_cos_sin(torch.arange(max_len, device=model.device), c.head_dim,
                                          c.rope_theta, model.dtype)

    def _rope(self, x, pos):                      # x (N, heads, hd), pos (N,)
        from reference.model import rotate_half
        return x * self.cos[pos][:, None] + rotate_half(x) * self.sin[pos][:, None]

    def forward(self, tokens, req, pos, cache):
        """tokens, req, pos: (N,) new tokens, their request ids and positions; cache: list of
        (k, v) per layer, each (B, Hkv, max_len, hd), written in place. Returns logits (N, V)."""
        m, c = self.model, self.model.config
        N = tokens.shape[0]
        x = m.model.embed_tokens(tokens)                                    # (N, dim)
        for layer, (kc, vc) in zip(m.model.layers, cache):
            a = layer.self_attn
            h = layer.input_layernorm(x)
            q = self._rope(a.q_proj(h).view(N, c.n_heads, c.head_dim), pos)
            k = self._rope(a.k_proj(h).view(N, c.n_kv_heads, c.head_dim), pos)
            v = a.v_proj(h).view(N, c.n_kv_heads, c.head_dim)
            kc[req, :, pos], vc[req, :, pos] = k, v
            out = self.att(q, kc[req], vc[req], pos + 1)                   # (N, H, hd)
            x = x + a.o_proj(out.reshape(N, c.n_heads * c.head_dim))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return m.lm_head(m.model.norm(x))

    def generate(self, prompts, ids, steps: int, sample: bool, gen_seed: int = 1000):
        """Greedy or seeded-sampled decoding of ``prompts`` (lists of token ids) for ``steps``
        tokens. Sampling is Gumbel-max with each request's own generator (seeded by its id in
        ``ids``), so a request's noise never depends on its neighbours. Returns per request its
        tokens (steps,) and logprobs (steps, V)."""
        from conformance.strategies import generator
        m, c = self.model, self.model.config
        dev = m.device
        B = len(prompts)
        cache = [(torch.zeros(B, c.n_kv_heads, self.max_len, c.head_dim, dtype=m.dtype, device=dev),
                  torch.zeros(B, c.n_kv_heads, self.max_len, c.head_dim, dtype=m.dtype, device=dev))
                 for _ in range(c.n_layers)]
        gens = [generator(gen_seed + i) for i in ids]
        tokens = torch.tensor([t for p in prompts for t in p], device=dev)
        req = torch.tensor([b for b, p in enumerate(prompts) for _ in p], device=dev)
        pos = torch.tensor([i for p in prompts for i in range(len(p))], device=dev)
        last = torch.tensor([len(p) for p in prompts]).cumsum(0).to(dev) - 1
        logits = self.forward(tokens, req, pos, cache)[last]                 # (B, V)
        lens = torch.tensor([len(p) for p in prompts], device=dev)
        out, lps = [], []
        for _ in range(steps):
            lp = torch.log_softmax(logits, -1)
            score = lp
            if sample:
                u = torch.stack([torch.rand(lp.shape[-1], generator=g) for g in gens]).to(dev)
                score = lp - torch.log(-torch.log(u.clamp_min(1e-12)))
            nxt = score.argmax(-1)
            out.append(nxt)
            lps.append(lp)
            logits = self.forward(nxt, torch.arange(B, device=dev), lens, cache)
            lens = lens + 1
        return torch.stack(out, 1), torch.stack(lps, 1)
