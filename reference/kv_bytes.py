"""KV-cache bytes and the context budget (course 01.08, 03.03, 03.05).

Every layer stores, for every token of every sequence, one key and one value vector per KV head:

    kv_cache_bytes = 2 x layers x kv_heads x head_dim x seq_len x batch x element_bytes

The 2 is K and V; ``kv_heads`` (not query heads) is why GQA/MQA shrink the cache (03.05). Example
(docs/kv_bytes.md): a Llama-2-7B-shaped model (32 layers, 32 KV heads, head_dim 128, fp16) holds
0.5 MiB per token: 1 GiB at 2K context, 16 GiB at 32K, per sequence.

:class:`KVCache` is the cache the reference model actually allocates; its ``nbytes`` is what the
formula must equal.
"""
from __future__ import annotations

import torch

from reference._checks import check_int, check_tensor

__all__ = ["kv_cache_bytes"]  # the contract: what an implementation must provide
__optional__ = ["KVCache"]  # checked when an implementation provides them


def _positive_int(name: str, value, allow_zero: bool = False) -> int:
    return check_int(name, value, minimum=0 if allow_zero else 1)


def element_bytes(dtype: torch.dtype) -> int:
    """Bytes of one element of ``dtype`` (fp16/bf16: 2, fp8: 1, fp32: 4)."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    return torch.empty((), dtype=dtype).element_size()


def kv_bytes_per_token(*, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype = torch.float16) -> int:
    """Bytes one token adds to the cache: 2 x layers x kv_heads x head_dim x element_bytes."""
    _positive_int("layers", layers)
    _positive_int("kv_heads", kv_heads)
    _positive_int("head_dim", head_dim)
    return 2 * layers * kv_heads * head_dim * element_bytes(dtype)


def kv_cache_bytes(*, layers: int, kv_heads: int, head_dim: int, seq_len: int, batch: int = 1,
                   dtype: torch.dtype = torch.float16) -> int:
    """Bytes of the KV cache for ``batch`` sequences of ``seq_len`` tokens (module doc formula).

    Defaults: ``batch=1`` (one sequence) and ``dtype=torch.float16`` (a half-precision cache).
    ``seq_len == 0`` or ``batch == 0`` is legal and gives 0 (an empty cache). The result is an
    exact Python ``int`` at every size up to the largest a tensor can have (2**63 - 1 bytes): no
    float arithmetic (a 53-bit mantissa is not exact past 2**53). Bad input: a size that is not an int (bools included) -> ``TypeError``; ``layers``,
    ``kv_heads``, ``head_dim`` < 1 or ``seq_len``, ``batch`` < 0 -> ``ValueError``; a ``dtype``
    that is not a ``torch.dtype`` -> ``TypeError``; each message names the argument."""
    _positive_int("seq_len", seq_len, allow_zero=True)
    _positive_int("batch", batch, allow_zero=True)
    return kv_bytes_per_token(layers=layers, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype) * seq_len * batch


def max_context_tokens(free_bytes: int, *, layers: int, kv_heads: int, head_dim: int,
                       dtype: torch.dtype = torch.float16) -> int:
    """The context budget: how many tokens (summed over sequences) fit in ``free_bytes`` of memory."""
    _positive_int("free_bytes", free_bytes, allow_zero=True)
    return free_bytes // kv_bytes_per_token(layers=layers, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype)


class KVCache:
    """A contiguous per-layer KV cache: ``k[layer]`` and ``v[layer]`` are
    (batch, kv_heads, max_seq_len, head_dim) and hold the first ``lengths[layer]`` positions.

    ``append(layer, k, v)`` writes new positions and returns views of all cached positions of
    that layer; ``k``/``v`` are (batch, kv_heads, n, head_dim) with ``n >= 0`` (an empty append
    is legal), and filling the cache exactly to ``max_seq_len`` is legal.

    Defaults: ``dtype=torch.float32`` (the reference model's cache) and ``device="cpu"``.
    Bad input (the cache is then unchanged): every size must be an int >= 1 (``TypeError`` /
    ``ValueError`` naming it) and ``dtype`` a ``torch.dtype`` (``TypeError``); in ``append``, a
    non-int ``layer`` -> ``TypeError`` and one outside [0, layers) -> ``ValueError`` naming
    ``layer``; a ``k``/``v`` that is not a tensor -> ``TypeError``, of the wrong rank or shape
    -> ``ValueError`` naming it (both when their shapes differ); appending past
    ``max_seq_len`` -> ``ValueError`` naming ``max_seq_len``.
    """

    def __init__(self, *, layers: int, batch: int, kv_heads: int, head_dim: int, max_seq_len: int,
                 dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
        _positive_int("layers", layers)
        _positive_int("batch", batch)
        _positive_int("kv_heads", kv_heads)
        _positive_int("head_dim", head_dim)
        _positive_int("max_seq_len", max_seq_len)
        element_bytes(dtype)
        shape = (layers, batch, kv_heads, max_seq_len, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = [0] * layers
        self.max_seq_len = max_seq_len

    @property
    def seq_len(self) -> int:
        """Tokens cached in layer 0 (every layer holds the same count between forward passes)."""
        return self.lengths[0]

    @property
    def nbytes(self) -> int:
        """Bytes this cache actually allocated (the storage of ``k`` and ``v``)."""
        return self.k.untyped_storage().nbytes() + self.v.untyped_storage().nbytes()

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        check_int("layer", layer)
        if not 0 <= layer < len(self.lengths):
            raise ValueError(f"layer must be in [0, {len(self.lengths)}), got {layer!r}")
        expect = (self.k.shape[1], self.k.shape[2], None, self.k.shape[4])
        for name, t in (("k", k), ("v", v)):
            check_tensor(name, t)
            if t.dim() != 4 or any(e is not None and s != e for s, e in zip(t.shape, expect)):
                raise ValueError(f"{name} must be (batch={expect[0]}, kv_heads={expect[1]}, n, "
                                 f"head_dim={expect[3]}), got {getattr(t, 'shape', t)}")
        if k.shape != v.shape:
            raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
        start, n = self.lengths[layer], k.shape[2]
        if start + n > self.max_seq_len:
            raise ValueError(f"k: appending {n} tokens at position {start} exceeds max_seq_len={self.max_seq_len}")
        self.k[layer, :, :, start:start + n] = k
        self.v[layer, :, :, start:start + n] = v
        self.lengths[layer] = start + n
        return self.k[layer, :, :, :start + n], self.v[layer, :, :, :start + n]
