"""Bounded-exhaustive checks of the two discrete rules of `moe` (docs/moe.md states the counts).

* **Ties** (route_topk): every row of logits over E <= 4 experts with values in {0, 1, 2} (and,
  for E <= 3, values in {-0.0, 0.0, 1.0}: -0.0 equals 0.0), every k: the chosen experts are the k
  largest, equal values by the lower index.
* **Queue and drops** (dispatch_positions): every routing of T <= 4 tokens to k <= 2 distinct
  experts of E <= 3, up to relabelling the experts (the rule does not look at labels), at every
  capacity 0..T+1.
* **Drops through the layer** (moe_forward): every routing of 3 tokens over 3 experts, top-1 and
  top-2, up to relabelling, at every capacity that drops something (1 and 2): the (token, expert)
  pairs that contribute are exactly the kept ones. The routings are checked in ONE call per
  capacity: sub-problem i gets its own 3 experts and 3 tokens, so the experts' queues do not mix
  and the capacity ceil(k 3S factor / 3S) is the sub-problem's own; expert e writes output column
  e mod 3 (its signature).
"""
from __future__ import annotations

import itertools

import pytest
import torch

from spec_tests.moe import oracles


def canonical(ids: list[list[int]]) -> tuple:
    """The routing with experts renamed in order of first appearance (queue order)."""
    names: dict[int, int] = {}
    for j in range(len(ids[0])):
        for row in ids:
            names.setdefault(row[j], len(names))
    return tuple(tuple(names[e] for e in row) for row in ids)


def routings(tokens: int, experts: int, k: int) -> list[list[list[int]]]:
    """Every routing (each token k distinct experts, in order), one per relabelling class."""
    seen, out = set(), []
    choices = list(itertools.permutations(range(experts), k))
    for combo in itertools.product(choices, repeat=tokens):
        ids = [list(c) for c in combo]
        key = canonical(ids)
        if key not in seen:
            seen.add(key)
            out.append(ids)
    return out


def test_ties_exhaustive(impl):
    """Every logit row over E <= 4 with values in {0, 1, 2}, and over E <= 3 with values in
    {-0.0, 0.0, 1.0}, at every k <= E: the k largest, equal values by the lower expert index
    (3 + 9 + 27 + 81 rows, and 3 + 9 + 27 with signed zeros)."""
    fn = impl.get("route_topk")
    for values in ((0.0, 1.0, 2.0), (-0.0, 0.0, 1.0)):
        for experts in range(1, 5 if values[0] == 0.0 else 4):
            rows = list(itertools.product(values, repeat=experts))
            lg = torch.tensor(rows, dtype=torch.float32)
            for k in range(1, experts + 1):
                ids, _ = fn(lg, k)
                for row, got in zip(rows, ids.tolist()):
                    want = oracles.topk(row, k)
                    assert got == want, (f"route_topk: logits {list(row)}, k={k}: chose {got}; the k largest with "
                                         f"ties to the lower index are {want}")


QUEUE_DOMAIN = [(t, e, k) for t in range(1, 5) for e in range(1, 4) for k in (1, 2) if k <= e]


@pytest.mark.parametrize("tokens,experts,k", QUEUE_DOMAIN, ids=lambda v: str(v))
def test_queue_exhaustive(impl, tokens, experts, k):
    """Every routing of ``tokens`` tokens to k distinct experts of ``experts`` (up to relabelling),
    at every capacity 0..T+1: positions and kept equal the GShard queue counted in a loop."""
    fn = impl.get("dispatch_positions")
    for ids in routings(tokens, experts, k):
        want = oracles.positions(ids, experts)
        t = torch.tensor(ids)
        for capacity in range(tokens + 2):
            positions, kept = fn(t, experts, capacity)
            assert positions.tolist() == want and kept.tolist() == [[p < capacity for p in row] for row in want], (
                f"dispatch_positions(expert_ids={ids}, num_experts={experts}, capacity={capacity}): positions "
                f"{positions.tolist()}, kept {kept.tolist()}; the GShard queue gives positions {want}")


def batched_signature_layer(problems: list[list[list[int]]], factor: float) -> dict:
    """Sub-problem i (3 tokens, experts 3i..3i+2) routed as ``problems[i]``; expert e writes
    output column e mod 3."""
    k = len(problems[0][0])
    n = 3 * len(problems)
    lg = torch.full((n, n), -1.0)
    for i, ids in enumerate(problems):
        for t, row in enumerate(ids):
            for j, e in enumerate(row):
                lg[3 * i + t, 3 * i + e] = float(k - j)
    w_down = torch.zeros(n, 3, 1)
    w_down[torch.arange(n), torch.arange(n) % 3, 0] = 1.0
    return dict(x=torch.ones(n, 3), router_logits=lg, w_gate=torch.full((n, 1, 3), 1 / 3), w_up=torch.full((n, 1, 3), 1 / 3),
                w_down=w_down, k=k, capacity_factor=factor, renormalize=True)


TOP2_SLOW = pytest.mark.slow  # 36 sub-problems: 108 experts, ~1.5 s a call of a kernel under the interpreter


@pytest.mark.parametrize("k,factor", [(1, 1.0), (1, 2.0), pytest.param(2, 0.5, marks=TOP2_SLOW),
                                      pytest.param(2, 1.0, marks=TOP2_SLOW)],
                         ids=("top1-C1", "top1-C2", "top2-C1", "top2-C2"))
def test_layer_drops_exhaustive(impl, k, factor):
    """Every routing of 3 tokens over 3 experts (5 classes top-1, 36 top-2), at capacity 1 and 2
    (factor 1 and 2 top-1, 0.5 and 1 top-2): the contributing (token, expert) pairs of moe_forward
    are exactly the capacity rule's kept set. The top-2 cases are ``slow`` (the default run checks
    top-2 drops on random routings, test_moe.py, and the queue exhaustively, above)."""
    problems = routings(3, 3, k)
    kw = batched_signature_layer(problems, factor)
    y = impl.get("moe_forward")(**kw)
    cap = oracles.capacity(3 * len(problems), 3 * len(problems), k, factor)
    for i, ids in enumerate(problems):
        pos = oracles.positions(ids, 3)
        for t, row in enumerate(ids):
            want = {e for j, e in enumerate(row) if pos[t][j] < cap}
            got = {c for c in range(3) if float(y[3 * i + t, c]) != 0.0}
            assert got == want, (f"routing {ids} (top-{k}, capacity {cap}): token {t}'s contributing experts are "
                                 f"{sorted(got)}; the rule keeps {sorted(want)}")
