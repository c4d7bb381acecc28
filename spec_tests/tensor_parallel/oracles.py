"""Independent oracles of tensor parallelism: the heads a rank holds, the closed form of the bytes
all-reduced, and the float64 unsharded model's logits (the tolerance rule's oracle)."""
from __future__ import annotations

import torch


def expected_heads(n_heads: int, n_kv_heads: int, rank: int, world: int):
    """(query heads, KV heads) of ``rank``, as lists, or None where the contract raises: query
    heads in contiguous blocks of H/p; KV heads split in blocks of K/p when p divides K, else
    (K divides p) the one KV head that the rank's query heads read."""
    if n_heads % world or (n_kv_heads % world and world % n_kv_heads):
        return None
    q = list(range(rank * n_heads // world, (rank + 1) * n_heads // world))
    group = n_heads // n_kv_heads                    # query heads per KV head
    kv = sorted({h // group for h in q})
    if n_kv_heads % world == 0:
        assert len(kv) == n_kv_heads // world
    return q, kv


def allreduce_bytes(n_layers: int, dim: int, element_bytes: int, world: int) -> int:
    """Per token: two all-reduces of dim elements per layer (o_proj and down_proj), none at p = 1."""
    return 0 if world == 1 else 2 * n_layers * dim * element_bytes


def unsharded_logits(model, tokens_list) -> list[torch.Tensor]:
    """The model's logits for each chunk of ``tokens_list`` (prefill then decode steps) with its
    own KV cache: what the sharded model must give."""
    cache = model.new_cache(tokens_list[0].shape[0])
    with torch.no_grad():
        return [model(t, cache=cache) for t in tokens_list]
