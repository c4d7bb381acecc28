"""GQA heads mapped by modulo: K/V heads are expanded with ``repeat`` (tiling: query head h reads
KV head h % n_kv_heads) instead of ``repeat_interleave`` (h // group) before attention. Right for
MHA and MQA, wrong for every real GQA model with more than one KV head."""
from reference.model import Attention, ModelConfig, Transformer as _Ref, apply_rope, load_weights, save_weights  # noqa: F401

TARGET = "model"


class _Attention(Attention):
    def forward(self, x, cos, sin, cache, layer, attention_fn):
        batch, seq, _ = x.shape
        q = self.q_proj(x).view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.append(layer, k, v)
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
        out = attention_fn(q, k, v, causal=True, window=None, scale=None)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, self.n_heads * self.head_dim))


class Transformer(_Ref):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for layer in self.model.layers:
            layer.self_attn.__class__ = _Attention
