"""Oracles of `moe` written without the reference: routing by sorting Python numbers, the capacity
in exact fractions, queue positions by counting in a loop, the layer token by token in float64,
and the load-balance statistic from exact counts."""
from __future__ import annotations

import math
from fractions import Fraction

import torch


def topk(row, k: int) -> list[int]:
    """The k largest of ``row`` (a sequence of numbers), largest first, equal values by index."""
    values = [float(v) for v in row]
    return sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]


def gates(row: torch.Tensor, ids: list[int], renormalize: bool) -> torch.Tensor:
    """float64 gates of the experts ``ids`` of one token's logits ``row``."""
    lg = row.double()
    p = torch.exp(lg - lg.max())
    if renormalize:
        return p[ids] / p[ids].sum()
    return p[ids] / p.sum()


def capacity(tokens: int, experts: int, k: int, factor) -> int:
    if factor is None:
        return tokens
    return math.ceil(Fraction(k * tokens) * Fraction(factor) / experts)


def positions(ids: list[list[int]], experts: int) -> list[list[int]]:
    """GShard's queue: column 0 of every token, then column 1, ...; tokens in order."""
    count = [0] * experts
    pos = [[0] * len(row) for row in ids]
    for j in range(len(ids[0]) if ids else 0):
        for t, row in enumerate(ids):
            pos[t][j] = count[row[j]]
            count[row[j]] += 1
    return pos


def expert(v: torch.Tensor, w_gate, w_up, w_down, e: int) -> torch.Tensor:
    a = w_gate[e].double() @ v
    b = w_up[e].double() @ v
    return w_down[e].double() @ (a / (1 + torch.exp(-a)) * b)


def expert_magnitude(v: torch.Tensor, w_gate, w_up, w_down, e: int) -> torch.Tensor:
    """First-order size of the rounding error of :func:`expert` in any order of summation: each dot
    product's error is at most a few ulps of the sum of its terms' magnitudes (not of its value,
    which cancellation can make small), and h = silu(a) b carries the errors of a and b into the
    down projection: |w_down| @ (|h| + |b| (|w_gate| @ |v|) + |silu(a)| (|w_up| @ |v|))."""
    wg, wu, wd = w_gate[e].double(), w_up[e].double(), w_down[e].double()
    a, b = wg @ v, wu @ v
    silu = a / (1 + torch.exp(-a))
    return wd.abs() @ ((silu * b).abs() + b.abs() * (wg.abs() @ v.abs()) + silu.abs() * (wu.abs() @ v.abs()))


def moe_magnitude(x, router_logits, w_gate, w_up, w_down, k, capacity_factor=None, renormalize=True):
    """(T, d) float64: the gate-weighted :func:`expert_magnitude` of every kept choice (the scale of
    the tolerance rule's rounding floor for the layer: ``floor_from``)."""
    return _combine(expert_magnitude, x, router_logits, w_gate, w_up, w_down, k, capacity_factor, renormalize)[0]


def moe(x, router_logits, w_gate, w_up, w_down, k, capacity_factor=None, renormalize=True):
    """(y float64 (T, d), kept: list of lists of bool, ids: list of lists)."""
    return _combine(expert, x, router_logits, w_gate, w_up, w_down, k, capacity_factor, renormalize)


def _combine(per_expert, x, router_logits, w_gate, w_up, w_down, k, capacity_factor, renormalize):
    """(the sum over every token's kept choices of gate x per_expert(token, expert), kept, ids);
    the gates are >= 0 (a softmax), so a sum of magnitudes stays one."""
    tokens, experts = router_logits.shape
    ids = [topk(router_logits[t].tolist(), k) for t in range(tokens)]
    cap = capacity(tokens, experts, k, capacity_factor)
    pos = positions(ids, experts)
    kept = [[p < cap for p in row] for row in pos]
    y = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(tokens):
        g = gates(router_logits[t].cpu(), ids[t], renormalize)
        v = x[t].cpu().double()
        for j, e in enumerate(ids[t]):
            if kept[t][j]:
                y[t] += g[j] * per_expert(v, w_gate.cpu(), w_up.cpu(), w_down.cpu(), e)
    return y, kept, ids


def load_balance(router_logits, k: int) -> float:
    """E * sum_i f_i P_i with f from exact counts of the top-k choices and P in float64."""
    tokens, experts = router_logits.shape
    counts = [0] * experts
    for t in range(tokens):
        for e in topk(router_logits[t].tolist(), k):
            counts[e] += 1
    p = torch.softmax(router_logits.cpu().double(), dim=-1).mean(dim=0)
    return experts * sum(counts[i] / (tokens * k) * float(p[i]) for i in range(experts))
