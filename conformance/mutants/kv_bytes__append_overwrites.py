"""A cache whose append writes at position length - 1 when the cache is non-empty (an off-by-one
that overwrites the last cached token) and grows the length anyway."""
import torch

from reference.kv_bytes import KVCache as _Ref, kv_cache_bytes  # noqa: F401

TARGET = "kv_bytes"


class KVCache(_Ref):
    def append(self, layer, k, v):
        start = self.lengths[layer]
        if start > 0:
            self.lengths[layer] = start - 1
            kk, vv = super().append(layer, k, v)
            self.lengths[layer] = start + k.shape[2]
            return self.k[layer, :, :, :start + k.shape[2]], self.v[layer, :, :, :start + k.shape[2]]
        return super().append(layer, k, v)
