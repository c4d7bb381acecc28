"""Tensor parallelism: Megatron's column-then-row split, one all-reduce per block (course 06.02).

A linear layer ``y = x @ W.T`` (``W`` of shape (out, in), torch's layout) splits over ``p`` ranks
in two ways::

    column-parallel   W split along `out`: rank r holds W[r*out/p : (r+1)*out/p] (rows of torch's W,
                      the *columns* of Megatron's A = W.T) and computes y_r = x @ W_r.T, a slice of
                      y's features. No communication; x is replicated.
    row-parallel      W split along `in`: rank r holds W[:, r*in/p : (r+1)*in/p] and the matching
                      slice x_r of its input; y = sum_r x_r @ W_r.T. Each rank holds a partial sum:
                      one all-reduce (sum) gives every rank y.

Column then row: the column-parallel output slice is the row-parallel input slice, so the pair
costs one all-reduce and nothing in between (what runs between them -- attention per head,
SwiGLU's silu(gate) * up per feature -- needs no feature of another rank). On the reference model
(reference/model.py), per decoder layer::

    attention   q_proj, k_proj, v_proj  column-parallel by heads: rank r holds query heads
                                        q_heads(r) and the KV heads they read (GQA below)
                attention               per head, local; K/V of its KV heads go to its own cache
                o_proj                  row-parallel over the same head slice     -> all-reduce
    MLP         gate_proj, up_proj      column-parallel (hidden features r*hidden/p ...)
                down_proj               row-parallel over the same features       -> all-reduce
    replicated  embed_tokens, both norms of every layer, the final norm and lm_head: every rank
                computes the same full logits (batch, seq, vocab).

The all-reduce is ``torch.distributed.all_reduce(partial, op=SUM, group=group)`` of the
(batch, seq, dim) partial output in the activation dtype, added to the residual stream after
the reduction. **Bytes all-reduced per token**: two all-reduces per layer, each of ``dim``
elements::

    allreduce_bytes_per_token = 2 x n_layers x dim x element_bytes        (0 when world_size == 1)

the payload handed to the collective (what a ring all-reduce then moves over the wire is
2 (p-1)/p of it per rank). A Llama-3-70B shape (80 layers, dim 8192, bf16) all-reduces 2.5 MiB
per token (2 x 80 x 8192 x 2 = 2,621,440 B), whatever p.

**Heads and divisibility** (vLLM's rule). ``n_heads`` must be a multiple of ``world_size``; rank r
holds query heads [r*H/p, (r+1)*H/p). KV heads (``n_kv_heads`` = K, GQA: query head h reads KV
head h // (H/K)): when K is a multiple of p they are split, rank r holds [r*K/p, (r+1)*K/p); when
p is a multiple of K (MQA included) each rank holds one KV head, r // (p/K), *replicated* on p/K
ranks (its K/V projections and cache are duplicated there); any other K (neither divides the
other) is a ValueError naming ``n_kv_heads``. ``hidden_dim`` must be a multiple of
``world_size`` (ValueError naming ``hidden_dim``), ``n_heads`` too (ValueError naming
``n_heads``). Each rank's KV cache holds only its KV heads: max(K/p, 1) of K.

``world_size == 1`` is the unsharded model: every weight whole, no collective called and no
process group needed (``group`` is never read).

Float: the sharded forward sums o_proj/down_proj's products in another order (p partial sums then
the all-reduce) than the unsharded one, so its logits equal the unsharded model's within the
tolerance rule (conformance/tolerance.py), not bit for bit; every rank returns the same logits bit
for bit (the all-reduce gives every rank the same sum and the rest is replicated).

Bad input (TypeError/ValueError naming the argument, raised before any collective and nothing
changed): ranks and world sizes not ints (bools included), ``world_size`` < 1, ``rank`` outside
[0, world_size); a weight not a 2-d tensor or its split dimension not a multiple of
``world_size`` (ValueError naming ``weight``); a head count or hidden size that does not divide
as above; for the model, ``world_size`` > 1 without an initialised process group whose size is
``world_size`` and whose rank is ``rank`` (ValueError naming them); tokens and caches as
:class:`reference.model.Transformer` rejects them (the cache must hold this rank's KV heads).

Choices the law leaves open (the reference's): the embedding and lm_head replicated (vLLM shards
them by vocabulary: VocabParallelEmbedding and ParallelLMHead, one more all-reduce or a gather);
contiguous shards in rank order; shards are contiguous copies, never views of the full weight.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from reference._checks import check_int, check_tensor
from reference.attention import attention as reference_attention
from reference.kv_bytes import KVCache, element_bytes
from reference.model import apply_rope, check_tokens_and_cache, rms_norm, rope_cos_sin

__all__ = ["column_shard", "row_shard", "head_shard", "shard_state_dict", "allreduce_bytes_per_token",
           "TensorParallelTransformer"]  # the contract
__optional__: list[str] = []  # checked when an implementation provides them

def _check_rank(rank, world_size) -> None:
    check_int("world_size", world_size, minimum=1)
    check_int("rank", rank, minimum=0)
    if rank >= world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")


def _shard(weight, rank: int, world_size: int, dim: int) -> torch.Tensor:
    _check_rank(rank, world_size)
    check_tensor("weight", weight, ndim=2, dims="out, in")
    n = weight.shape[dim]
    if n % world_size:
        raise ValueError(f"weight: its dimension {dim} ({n}) is not a multiple of world_size={world_size}")
    size = n // world_size
    return weight.narrow(dim, rank * size, size).contiguous().clone()


def column_shard(weight: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank ``rank``'s shard of a column-parallel linear's weight (out, in): the rows
    ``[rank * out / world_size, (rank + 1) * out / world_size)`` -- Megatron's columns of A = W.T,
    the output features this rank computes. A contiguous copy (never a view of ``weight``);
    concatenating every rank's shard along dim 0 gives ``weight`` bit for bit. ``out`` not a
    multiple of ``world_size``: ValueError naming ``weight``."""
    return _shard(weight, rank, world_size, 0)


def row_shard(weight: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank ``rank``'s shard of a row-parallel linear's weight (out, in): the columns
    ``[rank * in / world_size, (rank + 1) * in / world_size)`` of torch's W -- the input features
    this rank multiplies (its partial sum is all-reduced). A contiguous copy; concatenating every
    rank's shard along dim 1 gives ``weight`` bit for bit. ``in`` not a multiple of
    ``world_size``: ValueError naming ``weight``."""
    return _shard(weight, rank, world_size, 1)


def head_shard(n_heads: int, n_kv_heads: int, rank: int, world_size: int) -> tuple[range, range]:
    """The global head indices rank ``rank`` of ``world_size`` holds: ``(q_heads, kv_heads)``, two
    ranges. ``q_heads`` = [rank*H/p, (rank+1)*H/p); ``kv_heads`` = [rank*K/p, (rank+1)*K/p) when
    K is a multiple of p (split), [r // (p/K), r // (p/K) + 1) when p is a multiple of K
    (replicated). Every query head of ``q_heads`` reads a KV head of ``kv_heads``. ``n_heads`` not
    a multiple of ``world_size``: ValueError naming ``n_heads``; ``n_kv_heads`` not dividing
    ``n_heads``, or neither a multiple nor a divisor of ``world_size``: ValueError naming
    ``n_kv_heads``."""
    check_int("n_heads", n_heads, minimum=1)
    check_int("n_kv_heads", n_kv_heads, minimum=1)
    _check_rank(rank, world_size)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads ({n_kv_heads}) must divide n_heads ({n_heads})")
    if n_heads % world_size:
        raise ValueError(f"n_heads ({n_heads}) is not a multiple of world_size={world_size}: "
                         "query heads cannot be split evenly")
    q = n_heads // world_size
    q_heads = range(rank * q, (rank + 1) * q)
    if n_kv_heads % world_size == 0:
        kv = n_kv_heads // world_size
        return q_heads, range(rank * kv, (rank + 1) * kv)
    if world_size % n_kv_heads == 0:
        head = rank // (world_size // n_kv_heads)
        return q_heads, range(head, head + 1)
    raise ValueError(f"n_kv_heads ({n_kv_heads}) must be a multiple or a divisor of world_size={world_size} "
                     "(KV heads are split when a multiple, replicated when a divisor)")


def _check_config(config) -> None:
    for name in ("n_layers", "dim", "n_heads", "n_kv_heads", "head_dim", "hidden_dim", "dtype"):
        if not hasattr(config, name):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")


def _check_divisible(config, rank: int, world_size: int) -> tuple[range, range]:
    heads = head_shard(config.n_heads, config.n_kv_heads, rank, world_size)
    if config.hidden_dim % world_size:
        raise ValueError(f"hidden_dim ({config.hidden_dim}) is not a multiple of world_size={world_size}: "
                         "the MLP cannot be split evenly")
    return heads


def shard_state_dict(state_dict: dict, config, rank: int, world_size: int) -> dict:
    """Rank ``rank``'s weights of the reference model (``Transformer.state_dict()``, HF names):
    the same names, local shapes, contiguous copies. q_proj/o_proj take the rows/columns of the
    rank's query heads (:func:`head_shard`), k_proj/v_proj the rows of its KV heads (a replicated
    KV head's rows on each rank that holds it), gate_proj/up_proj :func:`column_shard`,
    down_proj :func:`row_shard`; every other tensor (embedding, norms, lm_head) whole.
    Divisibility as in :func:`head_shard` plus ``hidden_dim`` a multiple of ``world_size``
    (ValueError naming it); a ``state_dict`` without exactly the model's names, or with a
    tensor of another shape: ValueError naming ``state_dict``."""
    _check_config(config)
    _check_rank(rank, world_size)
    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict of tensors, got {type(state_dict).__name__}")
    q_heads, kv_heads = _check_divisible(config, rank, world_size)
    c, hd = config, config.head_dim
    shapes = {"model.embed_tokens.weight": (c.vocab_size, c.dim), "model.norm.weight": (c.dim,),
              "lm_head.weight": (c.vocab_size, c.dim)}
    for i in range(c.n_layers):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (c.dim,), p + "post_attention_layernorm.weight": (c.dim,),
                       p + "self_attn.q_proj.weight": (c.n_heads * hd, c.dim),
                       p + "self_attn.k_proj.weight": (c.n_kv_heads * hd, c.dim),
                       p + "self_attn.v_proj.weight": (c.n_kv_heads * hd, c.dim),
                       p + "self_attn.o_proj.weight": (c.dim, c.n_heads * hd),
                       p + "mlp.gate_proj.weight": (c.hidden_dim, c.dim), p + "mlp.up_proj.weight": (c.hidden_dim, c.dim),
                       p + "mlp.down_proj.weight": (c.dim, c.hidden_dim)})
    missing, extra = sorted(set(shapes) - set(state_dict)), sorted(set(state_dict) - set(shapes))
    if missing or extra:
        raise ValueError(f"state_dict: missing {missing[:4]}, unexpected {extra[:4]} (the reference model's names)")
    for name, shape in shapes.items():
        t = state_dict[name]
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape:
            raise ValueError(f"state_dict: {name} must be a tensor of shape {shape}, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    out = {}
    for name, t in state_dict.items():
        kind = name.split(".")[-2]
        if kind == "q_proj":
            out[name] = t[q_heads.start * hd:q_heads.stop * hd].contiguous().clone()
        elif kind in ("k_proj", "v_proj"):
            out[name] = t[kv_heads.start * hd:kv_heads.stop * hd].contiguous().clone()
        elif kind == "o_proj":
            out[name] = t[:, q_heads.start * hd:q_heads.stop * hd].contiguous().clone()
        elif kind in ("gate_proj", "up_proj"):
            out[name] = column_shard(t, rank, world_size)
        elif kind == "down_proj":
            out[name] = row_shard(t, rank, world_size)
        else:
            out[name] = t.detach().clone()
    return out


def allreduce_bytes_per_token(config, world_size: int, dtype: torch.dtype | None = None) -> int:
    """Bytes handed to all-reduces per token of a forward pass: ``2 x config.n_layers x config.dim
    x element_bytes(dtype)`` (one all-reduce after o_proj and one after down_proj, each of the
    token's ``dim`` activations), 0 when ``world_size`` is 1 (nothing to reduce). ``dtype``
    defaults to ``config.dtype``. An int. ``world_size`` not an int >= 1: TypeError/ValueError
    naming it; ``dtype`` not a torch.dtype: TypeError naming it."""
    _check_config(config)
    check_int("world_size", world_size, minimum=1)
    dtype = config.dtype if dtype is None else dtype
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    if world_size == 1:
        return 0
    return 2 * config.n_layers * config.dim * element_bytes(dtype)


class TensorParallelTransformer:
    """Rank ``rank``'s part of a ``world_size``-way tensor-parallel reference model (module doc).

    ``TensorParallelTransformer(model, rank, world_size, *, group=None)``: ``model`` a
    :class:`reference.model.Transformer` (the full model, present on every rank; its weights are
    sharded with :func:`shard_state_dict`, nothing is sent); ``group`` the process group of the
    ``world_size`` ranks (None: the default group), used only when ``world_size`` > 1, where it
    must be initialised with size ``world_size`` and this process at rank ``rank`` (else
    ValueError naming ``world_size`` or ``rank``). Divisibility errors as :func:`shard_state_dict`.
    No collective runs in the constructor.

    ``forward(tokens, cache=None)`` (also ``__call__``): every rank of the group calls it with the
    same ``tokens`` (int (batch, seq), ids in [0, vocab_size)) and its own ``cache``; each returns
    the full logits (batch, seq, vocab_size) in the model's dtype, the same on every rank. Two
    all-reduces per layer, none when ``world_size`` is 1. With a ``cache`` (from
    :meth:`new_cache`), the new positions' K/V of this rank's KV heads are appended and the RoPE
    positions start at ``cache.seq_len``, as in the unsharded model. Bad tokens or cache: the
    unsharded model's errors (ValueError/TypeError naming ``tokens`` or ``cache``), raised before
    any collective.

    ``new_cache(batch, max_seq_len=None)``: an empty :class:`reference.kv_bytes.KVCache` of this
    rank's KV heads only (``len(head_shard(...)[1])`` of them), ``max_seq_len`` defaulting to
    ``config.max_seq_len``."""

    def __init__(self, model, rank: int, world_size: int, *, group=None):
        config = getattr(model, "config", None)
        if config is None or not callable(getattr(model, "state_dict", None)):
            raise TypeError(f"model must be a reference Transformer, got {type(model).__name__}")
        _check_config(config)
        _check_rank(rank, world_size)
        self.q_heads, self.kv_heads = _check_divisible(config, rank, world_size)
        if world_size > 1:
            if not dist.is_available() or not dist.is_initialized():
                raise ValueError(f"world_size={world_size} needs an initialised torch.distributed process group")
            if dist.get_world_size(group) != world_size:
                raise ValueError(f"world_size={world_size} but the process group has {dist.get_world_size(group)} ranks")
            if dist.get_rank(group) != rank:
                raise ValueError(f"rank={rank} but this process is rank {dist.get_rank(group)} of the process group")
        self.config, self.rank, self.world_size, self.group = config, rank, world_size, group
        self.weights = shard_state_dict(model.state_dict(), config, rank, world_size)
        self.dtype = self.weights["model.embed_tokens.weight"].dtype
        self.attention_fn = getattr(model, "attention_fn", reference_attention)

    def new_cache(self, batch: int, max_seq_len: int | None = None) -> KVCache:
        c = self.config
        check_int("batch", batch, minimum=1)
        max_seq_len = c.max_seq_len if max_seq_len is None else check_int("max_seq_len", max_seq_len, minimum=1)
        return KVCache(layers=c.n_layers, batch=batch, kv_heads=len(self.kv_heads), head_dim=c.head_dim,
                       max_seq_len=max_seq_len, dtype=self.dtype)

    def _check_inputs(self, tokens, cache) -> int:
        return check_tokens_and_cache(tokens, cache, self.config, self.dtype, len(self.kv_heads),
                                      " (this rank's KV heads)")

    def _all_reduce(self, partial: torch.Tensor) -> torch.Tensor:
        """Sum the row-parallel partial outputs of every rank (in place); nothing at world_size 1."""
        if self.world_size > 1:
            dist.all_reduce(partial, op=dist.ReduceOp.SUM, group=self.group)
        return partial

    @torch.no_grad()
    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        c, w = self.config, self.weights
        start = self._check_inputs(tokens, cache)
        batch, seq = tokens.shape
        hq, hkv, hd = len(self.q_heads), len(self.kv_heads), c.head_dim
        positions = torch.arange(start, start + seq)
        cos, sin = rope_cos_sin(positions, hd, c.rope_theta, self.dtype)
        h = F.embedding(tokens, w["model.embed_tokens.weight"])
        for i in range(c.n_layers):
            p = f"model.layers.{i}."
            x = rms_norm(h, w[p + "input_layernorm.weight"], c.norm_eps)
            q = F.linear(x, w[p + "self_attn.q_proj.weight"]).view(batch, seq, hq, hd).transpose(1, 2)
            k = F.linear(x, w[p + "self_attn.k_proj.weight"]).view(batch, seq, hkv, hd).transpose(1, 2)
            v = F.linear(x, w[p + "self_attn.v_proj.weight"]).view(batch, seq, hkv, hd).transpose(1, 2)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            if cache is not None:
                k, v = cache.append(i, k, v)
            out = self.attention_fn(q, k, v, causal=True, window=None, scale=None)
            out = out.transpose(1, 2).reshape(batch, seq, hq * hd)
            h = h + self._all_reduce(F.linear(out, w[p + "self_attn.o_proj.weight"]))
            x = rms_norm(h, w[p + "post_attention_layernorm.weight"], c.norm_eps)
            act = F.silu(F.linear(x, w[p + "mlp.gate_proj.weight"])) * F.linear(x, w[p + "mlp.up_proj.weight"])
            h = h + self._all_reduce(F.linear(act, w[p + "mlp.down_proj.weight"]))
        return F.linear(rms_norm(h, w["model.norm.weight"], c.norm_eps), w["lm_head.weight"])

    __call__ = forward
