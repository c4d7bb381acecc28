"""Oracles of `flops`: what ``torch.utils.flop_counter.FlopCounterMode`` counts when the reference
model really runs one pass, and the bytes its tensors really hold.

``measure(case)`` builds ``Transformer(config)`` (reference/model.py), fills a real KV cache with
``context`` tokens (``model.new_cache`` + a forward of the context), then runs the pass's
``new_tokens`` under ``FlopCounterMode`` and returns:

* ``total``: ``get_total_flops()``;
* ``components``: the per-module counts mapped onto the contract's keys -- the q/k/v/o_proj
  modules of every layer (``attention_projections``), the ``mlp`` modules, ``lm_head``; what the
  ``self_attn`` modules count beyond their projections is the attention itself, split into the
  Q K^T and P V products by the order of the two batched matmuls of each attention call (a
  dispatch-mode log inside the attention callable the model is given);
* ``bytes``: ``weights`` = the bytes of every parameter but the embedding table, plus the bytes of
  the rows the pass looks up in it (``embed_tokens(tokens)``); ``kv_read`` = the bytes of the
  cache's K and V positions filled before the pass; ``kv_write`` = those the pass filled
  (the cache's lengths before and after).

With ``context == 0`` and ``cache=False`` the pass runs without a cache (the reference model's
prefill); the bytes are then measured on a cache built beside it.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from reference.attention import attention as reference_attention
from reference.model import Transformer

from spec_tests.flops.strategies import Pass

_MATMULS = {torch.ops.aten.bmm.default, torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
            torch.ops.aten.baddbmm.default}


class _MatmulLog(TorchDispatchMode):
    """Records the FLOPs (2 m n k, with the batch) of every matrix product, in call order."""

    def __init__(self):
        super().__init__()
        self.flops: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in _MATMULS:
            a, b = (args[1], args[2]) if func in (torch.ops.aten.addmm.default, torch.ops.aten.baddbmm.default) else args[:2]
            batch = a.shape[0] if a.dim() == 3 else 1
            self.flops.append(2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1])
        return out


class _SplitAttention:
    """The reference attention, its two matmuls logged per call: (Q K^T, P V)."""

    def __init__(self):
        self.calls: list[list[int]] = []

    def __call__(self, q, k, v, *, causal, window, scale):
        with _MatmulLog() as log:
            out = reference_attention(q, k, v, causal=causal, window=window, scale=scale)
        self.calls.append(log.flops)
        return out


def _tokens(case: Pass, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, case.vocab_size, (case.batch, n), generator=g)


@torch.no_grad()
def measure(case: Pass, *, cache: bool = True) -> dict:
    config = case.config()
    split = _SplitAttention()
    model = Transformer(config, seed=0, attention=split)
    kv = model.new_cache(case.batch)
    if case.context:
        model(_tokens(case, case.context, 1), kv)
    use_cache = cache or case.context > 0
    before = kv.seq_len
    tokens = _tokens(case, case.new_tokens, 2)
    split.calls.clear()
    with FlopCounterMode(display=False) as counter:
        model(tokens, kv if use_cache else None)
    calls = list(split.calls)
    if not use_cache:  # the bytes: the same pass's K/V written to a cache beside it
        model(tokens, kv)
    after = kv.seq_len

    counts = {name: sum(per_op.values()) for name, per_op in counter.get_flop_counts().items()}
    layers = [f"Transformer.model.layers.{i}" for i in range(config.n_layers)]
    projections = sum(counts.get(f"{layer}.self_attn.{p}", 0) for layer in layers
                      for p in ("q_proj", "k_proj", "v_proj", "o_proj"))
    attention_module = sum(counts.get(f"{layer}.self_attn", 0) for layer in layers) - projections
    assert all(len(c) == 2 for c in calls) and len(calls) == config.n_layers, calls
    scores = sum(c[0] for c in calls)
    values = sum(c[1] for c in calls)
    assert scores + values == attention_module, (scores, values, attention_module)
    components = {
        "attention_projections": projections,
        "attention_scores": scores,
        "attention_values": values,
        "mlp": sum(counts.get(f"{layer}.mlp", 0) for layer in layers),
        "lm_head": counts.get("Transformer.lm_head", 0),
    }
    weights = sum(p.nbytes for name, p in model.named_parameters() if name != "model.embed_tokens.weight")
    weights += model.model.embed_tokens(tokens).nbytes
    position = lambda lo, hi: kv.k[:, :, :, lo:hi].nbytes + kv.v[:, :, :, lo:hi].nbytes  # noqa: E731
    return {"total": counter.get_total_flops(), "components": components,
            "bytes": {"weights": weights, "kv_read": position(0, before), "kv_write": position(before, after)},
            "parameters": sum(p.numel() for p in model.parameters())}


def course_flops(c, *, batch: int, new_tokens: int, context: int = 0) -> dict:
    """The course's count, written per layer and per matrix (shape of each weight times the rows
    that multiply it, times 2), for configs too large to run: checked equal to ``measure`` on
    every small pass, then used for the worked numbers."""
    rows, keys = batch * new_tokens, context + new_tokens
    matrices = {"q_proj": (c.dim, c.n_heads * c.head_dim), "k_proj": (c.dim, c.n_kv_heads * c.head_dim),
                "v_proj": (c.dim, c.n_kv_heads * c.head_dim), "o_proj": (c.n_heads * c.head_dim, c.dim)}
    out = {"attention_projections": 0, "attention_scores": 0, "attention_values": 0, "mlp": 0}
    for _ in range(c.n_layers):
        out["attention_projections"] += sum(2 * rows * i * o for i, o in matrices.values())
        for head in range(c.n_heads):
            out["attention_scores"] += 2 * batch * new_tokens * c.head_dim * keys   # (T, h) @ (h, S)
            out["attention_values"] += 2 * batch * new_tokens * keys * c.head_dim   # (T, S) @ (S, h)
        out["mlp"] += 2 * rows * (c.dim * c.hidden_dim * 2 + c.hidden_dim * c.dim)
    out["lm_head"] = 2 * rows * c.dim * c.vocab_size
    return out
