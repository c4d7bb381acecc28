"""Counts only the keys: forgets the factor 2 for K *and* V."""
from reference.kv_bytes import KVCache, element_bytes  # noqa: F401

TARGET = "kv_bytes"


def kv_cache_bytes(*, layers, kv_heads, head_dim, seq_len, batch=1, dtype=None):
    import torch
    dtype = torch.float16 if dtype is None else dtype
    return layers * kv_heads * head_dim * seq_len * batch * element_bytes(dtype)
