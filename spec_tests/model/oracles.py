"""The model concept's independent oracle: a float64 Llama forward written from the formulas,
one token at a time, sharing no code with reference/model.py."""
from __future__ import annotations

import math

import torch


def llama_brute_force(weights, config, tokens):
    """Float64 Llama forward (the model concept's oracle), written from the formulas one token at a
    time: RMSNorm per vector, RoPE as a complex rotation of the pairs (x[i], x[i + head_dim/2]) by
    pos * theta^(-2i/head_dim), query head h reading K/V head h // group through an explicit index
    list, softmax by hand, SwiGLU. ``weights``: a dict of HF LlamaForCausalLM names -> tensors;
    ``config``: any object with the ModelConfig fields; ``tokens`` (batch, seq). Returns float64
    logits on the CPU."""
    w = {name: t.detach().to("cpu", torch.float64) for name, t in weights.items()}
    n_heads, n_kv, d, eps = config.n_heads, config.n_kv_heads, config.head_dim, config.norm_eps
    half, group = d // 2, config.n_heads // config.n_kv_heads
    kv_of_head = [h // group for h in range(n_heads)]
    freqs = torch.tensor([config.rope_theta ** (-2.0 * i / d) for i in range(half)], dtype=torch.float64)

    def norm(x, weight):
        return weight * x / math.sqrt(float((x * x).mean()) + eps)

    def rope(x, pos):  # x (heads, d)
        z = torch.complex(x[:, :half], x[:, half:]) * torch.polar(torch.ones(half, dtype=torch.float64), pos * freqs)
        return torch.cat([z.real, z.imag], dim=-1)

    logits = []
    for row in tokens.tolist():
        h = [w["model.embed_tokens.weight"][t].clone() for t in row]
        for layer in range(config.n_layers):
            p = f"model.layers.{layer}."
            keys, values = [], []                       # per position: (n_kv, d)
            for pos in range(len(row)):
                x = norm(h[pos], w[p + "input_layernorm.weight"])
                q = rope((w[p + "self_attn.q_proj.weight"] @ x).reshape(n_heads, d), pos)
                keys.append(rope((w[p + "self_attn.k_proj.weight"] @ x).reshape(n_kv, d), pos))
                values.append((w[p + "self_attn.v_proj.weight"] @ x).reshape(n_kv, d))
                k = torch.stack(keys)[:, kv_of_head]       # (pos + 1, n_heads, d)
                v = torch.stack(values)[:, kv_of_head]
                scores = (q[None] * k).sum(-1) / math.sqrt(d)            # (pos + 1, n_heads)
                e = torch.exp(scores - scores.max(dim=0).values)
                attn = ((e / e.sum(dim=0))[..., None] * v).sum(0)      # (n_heads, d)
                h[pos] = h[pos] + w[p + "self_attn.o_proj.weight"] @ attn.reshape(-1)
                x = norm(h[pos], w[p + "post_attention_layernorm.weight"])
                gate = w[p + "mlp.gate_proj.weight"] @ x
                up = w[p + "mlp.up_proj.weight"] @ x
                h[pos] = h[pos] + w[p + "mlp.down_proj.weight"] @ (gate / (1 + torch.exp(-gate)) * up)
        logits.append(torch.stack([w["lm_head.weight"] @ norm(x, w["model.norm.weight"]) for x in h]))
    return torch.stack(logits)
