"""FLOPs and bytes of one forward pass of the reference transformer (course 02.02, 02.04, 02.06).

The course's claim: resource accounting comes first. A forward pass of a decoder costs about
2 FLOPs per parameter per token (one multiply and one add per weight), plus an attention term that
grows with the context; it reads every weight once, plus the KV cache. A decode step (one token per
sequence) reads each 2-byte weight to do 2 FLOPs per sequence with it: an arithmetic intensity of
about ``batch`` FLOPs per byte, far below a GPU's ridge point (an H100's: ~300), so decode is
memory bound and batching is its lever (02.06); a prefill of L tokens does L times the work on
the same bytes and is compute bound.

One forward pass of :class:`reference.model.Transformer`: ``batch`` sequences (B), each feeding
``new_tokens`` (T) tokens after ``context`` (N) tokens already in its KV cache. Prefill is
``context=0`` (a prompt of T tokens, no cache), decode is ``new_tokens=1`` against a cache of N;
anything else is a chunk of a chunked prefill. Every new query attends to S = N + T keys (the
cache and the new tokens, its own included). Notation: L layers, d = dim, H = n_heads,
K = n_kv_heads, h = head_dim, F = hidden_dim (the SwiGLU width), V = vocab_size, R = B x T rows.

What counts as a FLOP: a multiply-add of a matrix product is 2 FLOPs, and only matrix products
count -- exactly what ``torch.utils.flop_counter.FlopCounterMode`` counts (``mm``/``bmm``/
``addmm``/``matmul``: 2 x m x n x k; elementwise ops, RMSNorm, RoPE, SiLU, softmax, the masking and
the embedding lookup count 0). Attention is counted as the reference computes it: the full
T x S score rectangle, masked entries included (the causal mask is applied after the matmul).

    attention_projections = L x 2R x d x h x (2H + 2K)      q, o: H heads; k, v: K heads (GQA)
    attention_scores      = L x 2B x H x T x S x h          Q K^T, every query head
    attention_values      = L x 2B x H x T x S x h          P V
    mlp                   = L x 2R x 3 x d x F              gate, up, down (SwiGLU)
    lm_head               = 2R x d x V
    forward_flops         = the sum

What counts as a byte: the compulsory traffic of an engine that keeps a KV cache, in the model's
dtype (``config.dtype``), each tensor read or written once per pass:

    weights   = (parameter_count - V x d) + R x d    every weight once; of the embedding table
                                                     only the R rows looked up (one per token)
    kv_read   = 2 x L x K x h x N x B                the cached keys and values
    kv_write  = 2 x L x K x h x T x B                the new tokens' keys and values
    (each x element bytes); forward_bytes = the sum

Activations (the hidden states, the logits, the score matrix) are not counted: their traffic
depends on which kernels are fused, and an ideal pass keeps them on chip; this is the lower bound
of the bytes a pass must move. ``arithmetic_intensity`` = forward_flops / forward_bytes.

Choices the law leaves open: none beyond the definitions above (they are the contract); the counts
are exact Python ints.
"""
from __future__ import annotations

import torch

from reference._checks import check_int
from reference.model import ModelConfig

__all__ = ["parameter_count", "flops_breakdown", "forward_flops", "bytes_breakdown", "forward_bytes",
           "arithmetic_intensity"]  # the contract: what an implementation must provide
__optional__ = []  # checked when an implementation provides them


def _check_config(config) -> ModelConfig:
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a reference.model.ModelConfig, got {type(config).__name__}")
    return config


def _check_pass(config, batch, new_tokens, context) -> ModelConfig:
    """Validate one forward pass's arguments (module doc); return the config."""
    _check_config(config)
    check_int("batch", batch, minimum=1)
    check_int("new_tokens", new_tokens, minimum=1)
    check_int("context", context, minimum=0)
    if context + new_tokens > config.max_seq_len:
        raise ValueError(f"context + new_tokens = {context} + {new_tokens} exceeds the model's "
                         f"max_seq_len={config.max_seq_len}")
    return config


def parameter_count(config: ModelConfig) -> int:
    """The number of parameters of ``Transformer(config)``: the embedding table and the LM head
    (untied, V x d each), per layer the four attention projections (d x h x (2H + 2K)), the three
    SwiGLU matrices (3 x d x F) and two RMSNorm weights (2d), and the final norm (d).

    ``config`` must be a ``reference.model.ModelConfig`` (else TypeError naming ``config``)."""
    c = _check_config(config)
    per_layer = c.dim * c.head_dim * (2 * c.n_heads + 2 * c.n_kv_heads) + 3 * c.dim * c.hidden_dim + 2 * c.dim
    return 2 * c.vocab_size * c.dim + c.n_layers * per_layer + c.dim


def flops_breakdown(config: ModelConfig, *, batch: int, new_tokens: int, context: int = 0) -> dict[str, int]:
    """Matmul FLOPs of one forward pass per component (module doc), as a dict with exactly the keys
    ``attention_projections``, ``attention_scores``, ``attention_values``, ``mlp``, ``lm_head``
    (all layers summed), each an exact int.

    The pass: ``batch`` sequences each feed ``new_tokens`` tokens after ``context`` cached ones
    (default 0: a prefill). They are what ``FlopCounterMode`` counts for
    ``Transformer(config)(tokens, cache)`` with ``tokens`` of shape (batch, new_tokens) and a cache
    holding ``context`` positions (without a cache when ``context`` is 0: the same count).

    Bad input: ``config`` not a ModelConfig -> TypeError naming ``config``; ``batch``,
    ``new_tokens``, ``context`` not ints (a bool is not one) -> TypeError naming it; ``batch`` or
    ``new_tokens`` < 1, ``context`` < 0 -> ValueError naming it; ``context + new_tokens`` past
    ``config.max_seq_len`` (a pass the model refuses) -> ValueError naming ``context``,
    ``new_tokens`` and ``max_seq_len``."""
    c = _check_pass(config, batch, new_tokens, context)
    rows = batch * new_tokens
    keys = context + new_tokens
    attention = 2 * batch * c.n_heads * new_tokens * keys * c.head_dim * c.n_layers
    return {
        "attention_projections": 2 * rows * c.dim * c.head_dim * (2 * c.n_heads + 2 * c.n_kv_heads) * c.n_layers,
        "attention_scores": attention,
        "attention_values": attention,
        "mlp": 2 * rows * 3 * c.dim * c.hidden_dim * c.n_layers,
        "lm_head": 2 * rows * c.dim * c.vocab_size,
    }


def forward_flops(config: ModelConfig, *, batch: int, new_tokens: int, context: int = 0) -> int:
    """Total matmul FLOPs of one forward pass: the sum of :func:`flops_breakdown` (same arguments,
    same errors). Prefill of a prompt of L tokens: ``new_tokens=L`` (context 0); decode against a
    cache of N tokens: ``new_tokens=1, context=N``."""
    return sum(flops_breakdown(config, batch=batch, new_tokens=new_tokens, context=context).values())


def bytes_breakdown(config: ModelConfig, *, batch: int, new_tokens: int, context: int = 0) -> dict[str, int]:
    """Bytes one forward pass must move (module doc), as a dict with exactly the keys ``weights``,
    ``kv_read``, ``kv_write``, each an exact int, in ``config.dtype``'s element size: every
    weight read once (of the embedding table only the ``batch x new_tokens`` rows looked up), the
    ``context`` cached positions' K and V read, the new positions' K and V written. Activations
    are not counted. Same arguments and errors as :func:`flops_breakdown`."""
    c = _check_pass(config, batch, new_tokens, context)
    element = torch.empty((), dtype=c.dtype).element_size()
    rows = batch * new_tokens
    kv_position = 2 * c.n_layers * c.n_kv_heads * c.head_dim * batch * element
    return {
        "weights": (parameter_count(c) - c.vocab_size * c.dim + rows * c.dim) * element,
        "kv_read": kv_position * context,
        "kv_write": kv_position * new_tokens,
    }


def forward_bytes(config: ModelConfig, *, batch: int, new_tokens: int, context: int = 0) -> int:
    """Total bytes of one forward pass: the sum of :func:`bytes_breakdown` (same arguments, same
    errors)."""
    return sum(bytes_breakdown(config, batch=batch, new_tokens=new_tokens, context=context).values())


def arithmetic_intensity(config: ModelConfig, *, batch: int, new_tokens: int, context: int = 0) -> float:
    """FLOPs per byte of one forward pass, ``forward_flops / forward_bytes`` (a float; same
    arguments and errors). Decode in 16-bit weights is about ``batch`` FLOPs per byte (memory
    bound); a prefill of L tokens about L times more."""
    return forward_flops(config, batch=batch, new_tokens=new_tokens, context=context) / forward_bytes(
        config, batch=batch, new_tokens=new_tokens, context=context)
