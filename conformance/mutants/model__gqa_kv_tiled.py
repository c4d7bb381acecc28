"""GQA heads mapped by modulo: K/V heads are expanded with ``repeat`` (tiling: query head h reads
KV head h % n_kv_heads) instead of ``repeat_interleave`` (h // group) before attention. Right for
MHA and MQA, wrong for every real GQA model with more than one KV head."""
from conformance.mutants._source_mutant import plant

TARGET = "model"

globals().update({k: v for k, v in vars(plant(
    "reference/model.py",
    '        out = attention_fn(q, k, v, causal=True, window=None, scale=None)',
    '        group = self.n_heads // self.n_kv_heads\n        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)\n        out = attention_fn(q, k, v, causal=True, window=None, scale=None)',
    "model__gqa_kv_tiled")).items() if not k.startswith("__")})
