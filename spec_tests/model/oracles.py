"""The model concept's independent oracles: a float64 Llama forward written from the formulas,
one token at a time, sharing no code with reference/model.py; HF transformers' LlamaForCausalLM
made float64-exact; and the sink + window attention callable of the long-range test."""
from __future__ import annotations

import math
import types

import torch


def llama_brute_force(weights, config, tokens, positions=None):
    """Float64 Llama forward (the model concept's oracle), written from the formulas one token at a
    time: RMSNorm per vector, RoPE as a complex rotation of the pairs (x[i], x[i + head_dim/2]) by
    pos * theta^(-2i/head_dim), query head h reading K/V head h // group through an explicit index
    list, softmax by hand, SwiGLU. ``weights``: a dict of HF LlamaForCausalLM names -> tensors;
    ``config``: any object with the ModelConfig fields; ``tokens`` (batch, seq). ``positions``:
    the absolute position of each token (increasing; default 0..seq-1); each token attends to
    itself and every earlier token of ``tokens``. Returns float64 logits on the CPU."""
    return llama_brute_force_with_magnitude(weights, config, tokens, positions)[0]


def llama_brute_force_with_magnitude(weights, config, tokens, positions=None):
    """:func:`llama_brute_force` and, of the same shape, the magnitude each logit is rounded at:
    ``sum_j |lm_head[v, j]| * |x_j|`` with ``x`` the final-normed hidden state, the sum of the
    absolute terms of the logit's dot product. A low-precision logit's rounding error scales with
    it, not with the (possibly cancelled) logit itself: it is the ``floor_from`` of the tolerance
    rule for logits."""
    w = {name: t.detach().to("cpu", torch.float64) for name, t in weights.items()}
    n_heads, n_kv, d, eps = config.n_heads, config.n_kv_heads, config.head_dim, config.norm_eps
    half, group = d // 2, config.n_heads // config.n_kv_heads
    kv_of_head = [h // group for h in range(n_heads)]
    freqs = torch.tensor([config.rope_theta ** (-2.0 * i / d) for i in range(half)], dtype=torch.float64)
    seq = tokens.shape[1]
    positions = list(range(seq)) if positions is None else [int(p) for p in positions]
    assert len(positions) == seq and all(a < b for a, b in zip(positions, positions[1:])), positions

    def norm(x, weight):
        return weight * x / math.sqrt(float((x * x).mean()) + eps)

    def rope(x, pos):  # x (heads, d)
        z = torch.complex(x[:, :half], x[:, half:]) * torch.polar(torch.ones(half, dtype=torch.float64), pos * freqs)
        return torch.cat([z.real, z.imag], dim=-1)

    logits, magnitudes = [], []
    lm_head = w["lm_head.weight"]
    for row in tokens.tolist():
        h = [w["model.embed_tokens.weight"][t].clone() for t in row]
        for layer in range(config.n_layers):
            p = f"model.layers.{layer}."
            keys, values = [], []                       # per token: (n_kv, d)
            for t, pos in enumerate(positions):
                x = norm(h[t], w[p + "input_layernorm.weight"])
                q = rope((w[p + "self_attn.q_proj.weight"] @ x).reshape(n_heads, d), pos)
                keys.append(rope((w[p + "self_attn.k_proj.weight"] @ x).reshape(n_kv, d), pos))
                values.append((w[p + "self_attn.v_proj.weight"] @ x).reshape(n_kv, d))
                k = torch.stack(keys)[:, kv_of_head]       # (t + 1, n_heads, d)
                v = torch.stack(values)[:, kv_of_head]
                scores = (q[None] * k).sum(-1) / math.sqrt(d)            # (t + 1, n_heads)
                e = torch.exp(scores - scores.max(dim=0).values)
                attn = ((e / e.sum(dim=0))[..., None] * v).sum(0)      # (n_heads, d)
                h[t] = h[t] + w[p + "self_attn.o_proj.weight"] @ attn.reshape(-1)
                x = norm(h[t], w[p + "post_attention_layernorm.weight"])
                gate = w[p + "mlp.gate_proj.weight"] @ x
                up = w[p + "mlp.up_proj.weight"] @ x
                h[t] = h[t] + w[p + "mlp.down_proj.weight"] @ (gate / (1 + torch.exp(-gate)) * up)
        finals = [norm(x, w["model.norm.weight"]) for x in h]
        logits.append(torch.stack([lm_head @ x for x in finals]))
        magnitudes.append(torch.stack([lm_head.abs() @ x.abs() for x in finals]))
    return torch.stack(logits), torch.stack(magnitudes)


def logit_magnitude(hidden: torch.Tensor, lm_head_weight: torch.Tensor) -> torch.Tensor:
    """``|hidden| @ |lm_head|^T`` in float64: the magnitude logits of a final-normed hidden state
    (batch, seq, dim) are rounded at (see :func:`llama_brute_force_with_magnitude`)."""
    return hidden.detach().to("cpu", torch.float64).abs() @ lm_head_weight.detach().to("cpu", torch.float64).abs().T


# --- HF transformers ---------------------------------------------------------------------------
def hf_llama_config(config, attn_implementation: str = "sdpa"):
    """The ``transformers.LlamaConfig`` of a model with the ModelConfig fields of ``config``
    (resolved head_dim and hidden_dim). HF's config validator rejects ``dim`` not a multiple of
    ``n_heads`` even when ``head_dim`` is given, though HF's modelling code never uses
    ``dim // n_heads`` then; such a config is built with a valid ``hidden_size`` and given the
    real one afterwards (the only way to express it)."""
    from transformers import LlamaConfig
    fits = config.dim % config.n_heads == 0
    hf = LlamaConfig(
        vocab_size=config.vocab_size, hidden_size=config.dim if fits else config.n_heads * config.head_dim,
        intermediate_size=config.hidden_dim, num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads, num_key_value_heads=config.n_kv_heads,
        head_dim=config.head_dim, rms_norm_eps=config.norm_eps, rope_theta=config.rope_theta,
        max_position_embeddings=config.max_seq_len, tie_word_embeddings=False, attention_bias=False,
        mlp_bias=False, attn_implementation=attn_implementation)
    hf.hidden_size = config.dim
    return hf


def hf_in_float64(hf):
    """Make a float64 HF Llama compute what the contract says a float64 model computes.

    HF hard-codes float32 in two places (LlamaRMSNorm upcasts to float32 and casts back; the rotary
    table is computed in float32), so a float64 HF model is only float32-accurate. Patch exactly
    those two forwards to keep float64, leaving everything else HF's own (the rotate_half pairing,
    GQA's repeat_kv, the attention, the MLP). inv_freq is HF's own formula
    (compute_default_rope_parameters) in float64, from HF's config. Works on a LlamaForCausalLM or
    a LlamaModel; returns it, in float64."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding

    def rms_norm_forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    def rotary_forward(self, x, position_ids):
        freqs = position_ids[..., None].to(torch.float64) * self.inv_freq64.to(x.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    hf = hf.double()
    cfg = hf.config
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    for module in hf.modules():
        if isinstance(module, LlamaRMSNorm):
            module.forward = types.MethodType(rms_norm_forward, module)
        elif isinstance(module, LlamaRotaryEmbedding):
            theta = cfg.rope_parameters["rope_theta"]
            module.inv_freq64 = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
            module.forward = types.MethodType(rotary_forward, module)
    return hf


# --- the long-range test's attention -----------------------------------------------------------
def sink_window_attention(sinks: int, window: int):
    """An attention callable with the signature of ``reference.attention.attention`` (what the
    model calls), in which query i (bottom-right aligned: absolute index kv_len - q_len + i) sees
    key j iff j <= i and (j < sinks or i - j < window): ``sinks`` first tokens plus a sliding
    window (StreamingLLM's pattern). It costs O(q_len * (sinks + window)), so a model runs at
    positions in the thousands in milliseconds; and it pairs every query with keys both near
    (the window) and up to its whole position away (the sinks), so an error in the absolute
    positions (a table rounded at large positions) and an error in the frequencies (which grows
    with the distance) both show. Scores and softmax in float32 (float64 for float64 inputs),
    output in q's dtype; query head h reads K/V head h // group. ``causal`` must be True and
    ``window`` None (the model's call); ``scale`` None means 1/sqrt(head_dim).

    With one layer, position p's logits are :func:`llama_brute_force` over exactly the tokens it
    sees (:func:`sink_window_tokens`) at their positions, the last row."""

    def attend(q, k, v, *, causal, window=None, scale=None, _w=window):
        assert causal and window is None, (causal, window)
        b, hq, lq, d = q.shape
        hk, lk = k.shape[1], k.shape[2]
        acc = torch.float64 if q.dtype == torch.float64 else torch.float32
        scale = d ** -0.5 if scale is None else scale
        qpos = torch.arange(lk - lq, lk, device=q.device)[:, None]                     # (lq, 1)
        sink = torch.arange(sinks, device=q.device)[None, :].expand(lq, sinks)
        near = qpos - torch.arange(_w, device=q.device)[None, :]                        # (lq, W)
        idx = torch.cat([sink, near], dim=1)                                            # (lq, S + W)
        valid = torch.cat([(sink <= qpos - _w) & (sink < lk), near >= 0], dim=1)       # no duplicates
        idx = idx.clamp(0, lk - 1)
        group = hq // hk
        kg = k[:, :, idx].repeat_interleave(group, dim=1).to(acc)                      # (b, hq, lq, S+W, d)
        vg = v[:, :, idx].repeat_interleave(group, dim=1).to(acc)
        scores = (q.to(acc)[..., None, :] * kg).sum(-1) * scale                         # (b, hq, lq, S+W)
        scores = scores.masked_fill(~valid, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        return (probs[..., None] * vg).sum(-2).to(q.dtype)

    return attend


def sink_window_tokens(position: int, sinks: int, window: int) -> list[int]:
    """The positions query ``position`` sees under :func:`sink_window_attention`, in order."""
    return [j for j in range(sinks) if j <= position - window] + list(range(max(0, position - window + 1), position + 1))
