"""A third-party "must pass" submission for `kv_bytes`: Hugging Face transformers' ``StaticCache``.

``KVCache`` is a ``transformers.StaticCache`` (the preallocated per-layer cache HF's models fill
during ``generate``), and ``kv_cache_bytes`` is the number of bytes a ``StaticCache`` of that shape
allocates (built on the ``meta`` device, so a 16 GiB cache costs no memory). Nothing here comes
from ``reference/``: the byte counts are HF's tensors' sizes; the code of this file only
translates the contract's arguments, validates them (HF does not check them the way the contract
does) and exposes HF's per-layer tensors as the contract's ``k``/``v``.

Run: ``pytest spec_tests/kv_bytes --impl spec_tests/kv_bytes/third_party.py`` (test_third_party.py
requires it to pass). Needs ``transformers`` (the ``test`` extra).
"""
from __future__ import annotations

import torch
from transformers import PretrainedConfig, StaticCache

__all__ = ["kv_cache_bytes", "KVCache"]


def _size(name: str, value, minimum: int) -> int:
    if type(value) is not int:  # bools and floats are not sizes
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def _dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    return dtype


def _static_cache(layers: int, batch: int, kv_heads: int, head_dim: int, max_len: int,
                  dtype: torch.dtype, device) -> StaticCache:
    cache = StaticCache(config=PretrainedConfig(num_hidden_layers=layers), max_cache_len=max_len)
    cache.early_initialization(batch, kv_heads, head_dim, dtype, torch.device(device))
    return cache


def _allocated(cache: StaticCache) -> int:
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)


def kv_cache_bytes(*, layers, kv_heads, head_dim, seq_len, batch=1, dtype=torch.float16) -> int:
    for name, value, minimum in (("layers", layers, 1), ("kv_heads", kv_heads, 1), ("head_dim", head_dim, 1),
                                 ("seq_len", seq_len, 0), ("batch", batch, 0)):
        _size(name, value, minimum)
    cache = _static_cache(layers, batch, kv_heads, head_dim, seq_len, _dtype(dtype), "meta")
    return int(_allocated(cache))


class KVCache:
    """The contract's KVCache over an HF StaticCache: ``k``/``v`` stack HF's per-layer tensors."""

    def __init__(self, *, layers, batch, kv_heads, head_dim, max_seq_len, dtype=torch.float32, device="cpu"):
        for name, value in (("layers", layers), ("batch", batch), ("kv_heads", kv_heads),
                            ("head_dim", head_dim), ("max_seq_len", max_seq_len)):
            _size(name, value, 1)
        self._shape = (batch, kv_heads, head_dim)
        self.max_seq_len = max_seq_len
        self._hf = _static_cache(layers, batch, kv_heads, head_dim, max_seq_len, _dtype(dtype), device)

    @property
    def k(self) -> torch.Tensor:
        return torch.stack([layer.keys for layer in self._hf.layers])

    @property
    def v(self) -> torch.Tensor:
        return torch.stack([layer.values for layer in self._hf.layers])

    @property
    def lengths(self) -> list[int]:
        return [int(self._hf.get_seq_length(i)) for i in range(len(self._hf.layers))]

    @property
    def seq_len(self) -> int:
        return self.lengths[0]

    @property
    def nbytes(self) -> int:
        return int(_allocated(self._hf))

    def append(self, layer, k, v):
        if type(layer) is not int:
            raise TypeError(f"layer must be an int, got {layer!r}")
        if not 0 <= layer < len(self._hf.layers):
            raise ValueError(f"layer must be in [0, {len(self._hf.layers)}), got {layer}")
        batch, heads, dim = self._shape
        for name, t in (("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
            if t.dim() != 4 or (t.shape[0], t.shape[1], t.shape[3]) != (batch, heads, dim):
                raise ValueError(f"{name} must be ({batch}, {heads}, n, {dim}), got {tuple(t.shape)}")
        if k.shape != v.shape:
            raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} differ")
        start = self.lengths[layer]
        if start + k.shape[2] > self.max_seq_len:
            raise ValueError(f"{start} + {k.shape[2]} tokens exceed max_seq_len {self.max_seq_len}")
        keys, values = self._hf.update(k, v, layer)
        end = start + k.shape[2]
        return keys[:, :, :end], values[:, :, :end]
