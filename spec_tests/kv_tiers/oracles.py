"""Oracles of the reload-or-recompute arithmetic (07.05), written without reference/kv_tiers.py or
reference/flops.py: the prefill FLOPs of n tokens counted matrix by matrix (concept ``flops``'s
definition: every weight matrix, the LM head included, 2 FLOPs per multiply-add per row; attention
over the full n x n score square, Q K^T and P V), the KV bytes of a token, exact rational times,
and the crossover by scanning every prefix length."""
from __future__ import annotations

from fractions import Fraction

import torch


def element_bytes(dtype) -> int:
    return {torch.float16: 2, torch.bfloat16: 2, torch.float32: 4, torch.float64: 8}[dtype]


def kv_bytes_per_token(c) -> int:
    return 2 * c.n_layers * c.n_kv_heads * c.head_dim * element_bytes(c.dtype)


def matrix_params(c) -> int:
    per_layer = (c.dim * c.n_heads * c.head_dim + 2 * c.dim * c.n_kv_heads * c.head_dim
                 + c.n_heads * c.head_dim * c.dim + 3 * c.dim * c.hidden_dim)
    return c.n_layers * per_layer + c.dim * c.vocab_size


def prefill_flops(c, n: int) -> int:
    return 2 * n * matrix_params(c) + 4 * c.n_layers * c.n_heads * c.head_dim * n * n


def reload(c, n: int, bandwidth, latency=0) -> Fraction:
    return Fraction(latency) + Fraction(n * kv_bytes_per_token(c)) / Fraction(bandwidth)


def recompute(c, n: int, rate) -> Fraction:
    return Fraction(prefill_flops(c, n)) / Fraction(rate)


def crossover_scan(c, bandwidth, rate, latency=0, start: int = 1, stop: int | None = None):
    """The first n in [start, stop] (default [1, max_seq_len]) with reload <= recompute, else None."""
    for n in range(start, (c.max_seq_len if stop is None else stop) + 1):
        if reload(c, n, bandwidth, latency) <= recompute(c, n, rate):
            return n
    return None
