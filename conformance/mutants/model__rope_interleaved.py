"""RoPE applied to interleaved pairs (x[2i], x[2i+1]) -- Meta's complex-number layout -- on
weights laid out for HF's half-split pairs (x[i], x[i + head_dim/2]): the classic bug of loading
an HF checkpoint into Meta-style rotary code without permuting q_proj/k_proj."""
import torch

from reference.model import Attention, ModelConfig, Transformer as _Ref, load_weights, save_weights  # noqa: F401

TARGET = "model"


def _apply_rope_interleaved(x, cos, sin):
    half = x.shape[-1] // 2
    cos, sin = cos[..., :half].repeat_interleave(2, -1), sin[..., :half].repeat_interleave(2, -1)
    pairs = x.unflatten(-1, (half, 2))
    rotated = torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)
    return x * cos + rotated * sin


class _Attention(Attention):
    def forward(self, x, cos, sin, cache, layer, attention_fn):
        batch, seq, _ = x.shape
        q = self.q_proj(x).view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = _apply_rope_interleaved(q, cos, sin), _apply_rope_interleaved(k, cos, sin)
        if cache is not None:
            k, v = cache.append(layer, k, v)
        out = attention_fn(q, k, v, causal=True, window=None, scale=None)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, self.n_heads * self.head_dim))


class Transformer(_Ref):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for layer in self.model.layers:
            layer.self_attn.__class__ = _Attention
