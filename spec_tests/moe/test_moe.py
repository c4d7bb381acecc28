"""The MoE layer (course 06.05): moe_forward against a float64 oracle computed token by token
(its own top-k, capacity and queue), under the tolerance rule: 2 x the error of the contract's
own low-precision computation (the reference: float32 accumulation, the hidden activation rounded
to x's dtype) plus the rounding floor. A token whose every choice was dropped gets exactly 0. The
dropped set itself is read off exactly from experts that each write one output column."""
from __future__ import annotations

import torch
from hypothesis import example, given, settings, strategies as st

from conformance.tolerance import assert_close_to_oracle
from spec_tests.moe import oracles
from spec_tests.moe.strategies import MoECase, moe_cases


def _scaled(n: int) -> int:
    return max(1, round(n * settings().max_examples / 25))


def _call(kw: dict) -> str:
    parts = [f"{k}={tuple(v.shape)} {str(v.dtype)[6:]}" if isinstance(v, torch.Tensor) else f"{k}={v!r}"
             for k, v in kw.items()]
    return f"moe_forward({', '.join(parts)})"


def check_layer(impl, reference, kw: dict, *, name: str = "y"):
    """moe_forward(**kw) within the tolerance rule of the float64 oracle; fully dropped tokens 0;
    inputs unchanged. Returns (y, kept)."""
    before = {k: v.clone() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    y = impl.get("moe_forward")(**kw)
    for k, v in before.items():
        assert torch.equal(kw[k], v), f"{_call(kw)} modified its input {k}"
    oracle, kept, _ = oracles.moe(**kw)
    ref = reference.get("moe_forward")(**kw)
    # the rounding floor at the size of the layer's terms, not of its output: a sum that cancels
    # to a small y still carries the rounding of its large terms (oracles.expert_magnitude)
    assert_close_to_oracle(y, ref, oracle, name=f"{_call(kw)}: {name}", inputs=kw,
                           floor_from=oracles.moe_magnitude(**kw))
    for t, row in enumerate(kept):
        if not any(row):
            assert bool((y[t] == 0).all()), f"{_call(kw)}: token {t} had every choice dropped; its output must be 0, got {y[t]}"
    return y, kept


@example(case=MoECase(6, 8, 5, 4, 2, None, True, "float32", 1)).via(
    "mutant:silu_on_up_projection mutant:gates_not_renormalized mutant:no_gate_weighting")
@example(case=MoECase(8, 6, 4, 3, 1, 0.5, False, "float32", 2, "skewed")).via(
    "mutant:capacity_floor mutant:kept_at_capacity mutant:renormalize_ignored")
@example(case=MoECase(9, 5, 3, 4, 2, 0.75, True, "float32", 3, "skewed")).via("mutant:queue_token_major")
@example(case=MoECase(7, 4, 4, 5, 2, 1.0, True, "float32", 4, "ties")).via("mutant:ties_to_highest_index")
@example(case=MoECase(0, 4, 3, 2, 1, 1.0, True, "bfloat16", 5)).via("boundary: no token")
@example(case=MoECase(5, 6, 4, 1, 1, 0.5, True, "float32", 7)).via("boundary: one expert, half of the tokens dropped")
@example(case=MoECase(4, 7, 5, 3, 2, 1.0, False, "float64", 8, "normal", "float64")).via(
    "boundary: float64 x and logits (the compute dtype float64)")
@example(case=MoECase(5, 20, 17, 3, 3, None, True, "bfloat16", 6, "normal", "bfloat16")).via(
    "boundary: k = E, bfloat16 x and logits, widths past one 16-wide tile")
@settings(max_examples=_scaled(6))
@given(case=moe_cases())
def test_matches_oracle(impl, reference, case):
    """moe_forward == sum over kept choices of gate x SwiGLU expert, within the tolerance rule of
    the float64 oracle, for T 0-9, E 1-6, k 1-3, d and F 1-20, capacity factors None and 0.25-2,
    both gate kinds, float16/bfloat16/float32/float64 x and float32/bfloat16/float64 logits."""
    check_layer(impl, reference, case.build())


def signature_layer(ids: list[list[int]], experts: int, capacity_factor) -> dict:
    """A layer whose expert e writes only output column e (d = E, F = 1, x all ones: h = silu(1)),
    routed by logits that make token t choose ``ids[t]`` in that order: y[t, e] != 0 iff some
    kept choice of token t is expert e."""
    tokens, k = len(ids), len(ids[0]) if ids else 1
    lg = torch.full((tokens, experts), -1.0)
    for t, row in enumerate(ids):
        for j, e in enumerate(row):
            lg[t, e] = float(k - j)
    return dict(x=torch.ones(tokens, experts), router_logits=lg,
                w_gate=torch.full((experts, 1, experts), 1.0 / experts), w_up=torch.full((experts, 1, experts), 1.0 / experts),
                w_down=torch.eye(experts).reshape(experts, experts, 1), k=k, capacity_factor=capacity_factor,
                renormalize=True)


def check_drops(impl, ids: list[list[int]], experts: int, capacity_factor) -> None:
    """The nonzero entries of the signature layer's output are exactly the kept (token, expert)
    pairs of the capacity rule."""
    kw = signature_layer(ids, experts, capacity_factor)
    y = impl.get("moe_forward")(**kw)
    cap = oracles.capacity(len(ids), experts, len(ids[0]), capacity_factor)
    pos = oracles.positions(ids, experts)
    for t, row in enumerate(ids):
        want = {e for j, e in enumerate(row) if pos[t][j] < cap}
        got = {e for e in range(experts) if float(y[t, e]) != 0.0}
        assert got == want, (
            f"token {t} (choices {row}) of expert choices {ids}, capacity factor {capacity_factor!r} (capacity {cap}): "
            f"the experts that contributed are {sorted(got)}; the rule (first choices of every token before second "
            f"choices, tokens in order, position < capacity) keeps {sorted(want)}")
        for e in want:
            assert float(y[t, e]) > 0.05, f"token {t}: expert {e}'s contribution {float(y[t, e])} is not its gate x silu(1)"


@st.composite
def routed(draw):
    experts = draw(st.integers(1, 5))
    k = draw(st.integers(1, min(2, experts)))
    tokens = draw(st.integers(1, 7))
    ids = [draw(st.permutations(range(experts)))[:k] for _ in range(tokens)]
    return ids, experts, draw(st.sampled_from((0.25, 0.5, 0.75, 1.0, 1.5)))


@example(case=([[0, 1], [0, 1], [1, 0]], 3, 0.75)).via(
    "mutant:queue_token_major mutant:kept_at_capacity mutant:capacity_floor")
@example(case=([[1], [1], [1], [0]], 3, 1.0)).via("mutant:capacity_floor mutant:kept_at_capacity")
@example(case=([[0]] * 8, 2, 1.0)).via(
    "boundary: eight tokens on one of two experts, capacity 4: above the width d = E = 2, below T = 8")
@settings(max_examples=_scaled(8))
@given(case=routed())
def test_dropped_tokens_are_the_rule(impl, case):
    """The (token, expert) pairs that contribute to y are exactly those the capacity rule keeps
    (random routings; every routing of up to 3 tokens over 3 experts in test_exhaustive.py)."""
    check_drops(impl, *case)


def test_defaults(impl, reference):
    """capacity_factor defaults to None (no drops), renormalize to True."""
    kw = MoECase(6, 5, 4, 3, 2, None, True, "float32", 11, "skewed").build()
    y = impl.get("moe_forward")(kw["x"], kw["router_logits"], kw["w_gate"], kw["w_up"], kw["w_down"], 2)
    oracle, _, _ = oracles.moe(**kw)
    assert_close_to_oracle(y, reference.get("moe_forward")(**kw), oracle, name="moe_forward with defaults",
                           floor_from=oracles.moe_magnitude(**kw))


def test_strided_inputs(impl, reference):
    """x a column slice of a wider buffer, weights transposed views, w_gate and w_up of different
    strides: the contiguous result."""
    kw = MoECase(5, 6, 7, 3, 2, 1.0, True, "bfloat16", 12, "skewed").build()
    wide = torch.cat([kw["x"], torch.full_like(kw["x"], float("nan"))], dim=1)[:, : kw["x"].shape[1]]
    kw2 = dict(kw, x=wide, w_gate=kw["w_gate"].transpose(1, 2).contiguous().transpose(1, 2),
               w_up=kw["w_up"].transpose(1, 2).contiguous().transpose(1, 2),
               w_down=kw["w_down"].transpose(1, 2).contiguous().transpose(1, 2))
    y = impl.get("moe_forward")(**kw2)
    oracle, _, _ = oracles.moe(**kw)
    magnitude = oracles.moe_magnitude(**kw)
    assert_close_to_oracle(y, reference.get("moe_forward")(**kw), oracle, name="moe_forward on strided views", inputs=kw2,
                           floor_from=magnitude)
    # w_gate and w_up of different strides (one a transposed view, the other contiguous): a kernel
    # that reads both with one set of strides must copy first
    kw3 = dict(kw, w_up=kw["w_up"].transpose(1, 2).contiguous().transpose(1, 2))
    y3 = impl.get("moe_forward")(**kw3)
    assert_close_to_oracle(y3, reference.get("moe_forward")(**kw), oracle,
                           name="moe_forward with w_gate contiguous and w_up a transposed view", inputs=kw3,
                           floor_from=magnitude)
