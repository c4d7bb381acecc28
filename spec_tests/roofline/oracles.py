"""Oracles of `roofline`, written without reference/roofline.py or reference/flops.py.

* the roofline's closed forms in exact rational arithmetic (``fractions.Fraction``: a float is
  taken at its binary value), so a float result can be compared with the exact value rounded once;
* the FLOPs and bytes of one decode step of a ``ModelConfig``, counted matrix by matrix (the
  shape of every weight times the rows that multiply it, times 2; every weight's bytes once, the
  embedding rows looked up, the KV cache read and written) -- concept ``flops``'s definitions,
  which spec_tests/flops checks against ``FlopCounterMode`` on the running model;
* the batch at which decode turns compute-bound by a linear scan over batch sizes.
"""
from __future__ import annotations

from fractions import Fraction

import torch


def exact(x) -> Fraction:
    return Fraction(x)


def attainable(i, p, b) -> Fraction:
    return min(exact(p), exact(i) * exact(b))


def regime(i, p, b) -> str:
    return "memory" if exact(i) * exact(b) < exact(p) else "compute"


def element_bytes(dtype: torch.dtype) -> int:
    return {torch.float16: 2, torch.bfloat16: 2, torch.float32: 4, torch.float64: 8}[dtype]


def weight_shapes(c) -> list[tuple[int, int]]:
    """Every weight matrix that multiplies (rows in x cols out), the LM head included."""
    per_layer = [(c.dim, c.n_heads * c.head_dim), (c.dim, c.n_kv_heads * c.head_dim),
                 (c.dim, c.n_kv_heads * c.head_dim), (c.n_heads * c.head_dim, c.dim),
                 (c.dim, c.hidden_dim), (c.dim, c.hidden_dim), (c.hidden_dim, c.dim)]
    return per_layer * c.n_layers + [(c.dim, c.vocab_size)]


def decode_counts(c, batch: int, context: int) -> tuple[int, int]:
    """(FLOPs, bytes) of one decode step: ``batch`` sequences, one new token each after
    ``context`` cached tokens."""
    e = element_bytes(c.dtype)
    keys = context + 1
    flops = sum(2 * batch * i * o for i, o in weight_shapes(c))
    flops += c.n_layers * 2 * (2 * batch * c.n_heads * keys * c.head_dim)     # Q K^T and P V
    weights = sum(i * o for i, o in weight_shapes(c)) + (2 * c.n_layers + 1) * c.dim   # + the RMSNorm weights
    embedding_rows = batch * c.dim
    kv = 2 * c.n_layers * c.n_kv_heads * c.head_dim * keys * batch              # read N, write 1
    return flops, (weights + embedding_rows + kv) * e


def decode_regime(c, batch: int, context: int, p, b) -> str:
    flops, moved = decode_counts(c, batch, context)
    return "memory" if flops * exact(b) < exact(p) * moved else "compute"


def per_sequence_limit(c, context: int) -> Fraction:
    """The intensity a decode step tends to as the batch grows: one sequence's FLOPs over the
    bytes one more sequence adds."""
    f1, b1 = decode_counts(c, 1, context)
    _, b2 = decode_counts(c, 2, context)
    return Fraction(f1, b2 - b1)


def first_compute_bound_batch(c, context: int, p, b, limit: int) -> int | None:
    """The smallest batch <= ``limit`` whose decode step is compute-bound (a scan), else None."""
    for batch in range(1, limit + 1):
        if decode_regime(c, batch, context, p, b) == "compute":
            return batch
    return None
