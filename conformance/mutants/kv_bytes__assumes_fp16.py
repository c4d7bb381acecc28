"""Hard-codes 2 bytes per element (fp16), wrong for an fp32 or fp8 cache."""
from reference.kv_bytes import KVCache  # noqa: F401

TARGET = "kv_bytes"


def kv_cache_bytes(*, layers, kv_heads, head_dim, seq_len, batch=1, dtype=None):
    return 2 * layers * kv_heads * head_dim * seq_len * batch * 2
