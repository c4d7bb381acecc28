"""Bad input of `moe`: every contract function rejects a malformed call with TypeError /
ValueError naming the argument, before any work, and modifies nothing (ep_moe_forward's table is
in test_ep.py: it runs in a process group)."""
from __future__ import annotations

import pytest
import torch

from conformance.badinput import Bad, assert_rejects, assert_rejects_without_data, bad_cases, set_entry
from spec_tests.moe.strategies import MoECase


def _logits() -> dict:
    return dict(router_logits=torch.tensor([[0.5, 1.0, -1.0], [2.0, 0.0, 1.0]]), k=2)


LOGITS_BAD = [
    Bad("list logits", dict(router_logits=[[0.5, 1.0]]), TypeError, ("router_logits",)),
    Bad("int logits", dict(router_logits=torch.tensor([[1, 2, 3]])), TypeError, ("router_logits",)),
    Bad("rank-1 logits", lambda kw: {**kw, "router_logits": kw["router_logits"][0]}, ValueError, ("router_logits",)),
    Bad("rank-3 logits", lambda kw: {**kw, "router_logits": kw["router_logits"][None]}, ValueError, ("router_logits",)),
    Bad("no expert column", dict(router_logits=torch.zeros(2, 0)), ValueError, ("router_logits",)),
    Bad("nan logit", set_entry("router_logits", (1, 2), float("nan")), ValueError, ("router_logits",)),
    Bad("inf logit", set_entry("router_logits", (0, 0), float("inf")), ValueError, ("router_logits",)),
    Bad("-inf logit", set_entry("router_logits", (0, 1), float("-inf")), ValueError, ("router_logits",)),
    Bad("zero k", dict(k=0), ValueError, ("k",)),
    Bad("k above E", dict(k=4), ValueError, ("k",)),
    Bad("float k", dict(k=2.0), TypeError, ("k",)),
    Bad("bool k", dict(k=True), TypeError, ("k",)),
    Bad("None k", dict(k=None), TypeError, ("k",)),
]


@bad_cases(LOGITS_BAD + [Bad("int renormalize", dict(renormalize=1), TypeError, ("renormalize",)),
                         Bad("None renormalize", dict(renormalize=None), TypeError, ("renormalize",))])
def test_route_topk_rejects_bad_input(impl, bad):
    """router_logits a finite float tensor (T, E >= 1); k an int in [1, E]; renormalize a bool."""
    assert_rejects(impl.get("route_topk"), dict(_logits(), renormalize=True), bad)


@bad_cases(LOGITS_BAD + [Bad("no token", dict(router_logits=torch.zeros(0, 3)), ValueError, ("router_logits",))])
def test_load_balance_loss_rejects_bad_input(impl, bad):
    """As route_topk; no token (the statistic averages over tokens) -> ValueError."""
    assert_rejects(impl.get("load_balance_loss"), _logits(), bad)


def _count(name: str, minimum: int) -> list[Bad]:
    return [Bad(f"{name} below {minimum}", {name: minimum - 1}, ValueError, (name,)),
            Bad(f"float {name}", {name: 2.0}, TypeError, (name,)),
            Bad(f"bool {name}", {name: True}, TypeError, (name,)),
            Bad(f"None {name}", {name: None}, TypeError, (name,))]


@bad_cases(_count("num_tokens", 0) + _count("num_experts", 1) + [
    Bad("zero k", dict(k=0), ValueError, ("k",)),
    Bad("k above num_experts", dict(k=5), ValueError, ("k",)),
    Bad("bool k", dict(k=True), TypeError, ("k",)),
    Bad("zero capacity_factor", dict(capacity_factor=0.0), ValueError, ("capacity_factor",)),
    Bad("negative capacity_factor", dict(capacity_factor=-1.0), ValueError, ("capacity_factor",)),
    Bad("nan capacity_factor", dict(capacity_factor=float("nan")), ValueError, ("capacity_factor",)),
    Bad("inf capacity_factor", dict(capacity_factor=float("inf")), ValueError, ("capacity_factor",)),
    Bad("str capacity_factor", dict(capacity_factor="1.25"), TypeError, ("capacity_factor",)),
    Bad("bool capacity_factor", dict(capacity_factor=True), TypeError, ("capacity_factor",)),
])
def test_expert_capacity_rejects_bad_input(impl, bad):
    """num_tokens an int >= 0, num_experts an int >= 1, k an int in [1, num_experts],
    capacity_factor None or a finite real > 0."""
    assert_rejects(impl.get("expert_capacity"), dict(num_tokens=8, num_experts=4, k=2, capacity_factor=1.25), bad)


@bad_cases(_count("num_experts", 1) + [
    Bad("negative capacity", dict(capacity=-1), ValueError, ("capacity",)),
    Bad("float capacity", dict(capacity=1.0), TypeError, ("capacity",)),
    Bad("bool capacity", dict(capacity=False), TypeError, ("capacity",)),
    Bad("list expert_ids", dict(expert_ids=[[0, 1]]), TypeError, ("expert_ids",)),
    Bad("float expert_ids", dict(expert_ids=torch.tensor([[0.0, 1.0]])), TypeError, ("expert_ids",)),
    Bad("bool expert_ids", dict(expert_ids=torch.tensor([[True, False]])), TypeError, ("expert_ids",)),
    Bad("rank-1 expert_ids", dict(expert_ids=torch.tensor([0, 1])), ValueError, ("expert_ids",)),
    Bad("no column", dict(expert_ids=torch.zeros((2, 0), dtype=torch.int64)), ValueError, ("expert_ids",)),
    Bad("id = num_experts", set_entry("expert_ids", (1, 0), 3), ValueError, ("expert_ids",)),
    Bad("negative id", set_entry("expert_ids", (0, 1), -1), ValueError, ("expert_ids",)),
])
def test_dispatch_positions_rejects_bad_input(impl, bad):
    """expert_ids an int32/int64 tensor (T, k >= 1) with values in [0, num_experts); num_experts
    an int >= 1; capacity an int >= 0."""
    assert_rejects(impl.get("dispatch_positions"),
                   dict(expert_ids=torch.tensor([[0, 1], [2, 0]]), num_experts=3, capacity=1), bad)


def _layer() -> dict:
    return MoECase(3, 4, 5, 3, 2, 1.0, True, "float32", 61).build()


LAYER_BAD = [
    Bad("numpy x", lambda kw: {**kw, "x": kw["x"].numpy()}, TypeError, ("x",)),
    Bad("int x", lambda kw: {**kw, "x": kw["x"].to(torch.int32)}, TypeError, ("x",)),
    Bad("rank-1 x", lambda kw: {**kw, "x": kw["x"][0]}, ValueError, ("x",)),
    Bad("rank-3 x", lambda kw: {**kw, "x": kw["x"][None]}, ValueError, ("x",)),
    Bad("logits for another token count", lambda kw: {**kw, "router_logits": kw["router_logits"][:2]}, ValueError,
        ("router_logits",)),
    Bad("nan logit", set_entry("router_logits", (2, 1), float("nan")), ValueError, ("router_logits",)),
    Bad("logits for more experts", lambda kw: {**kw, "router_logits": torch.cat([kw["router_logits"]] * 2, dim=1)},
        ValueError, ("w_gate",)),
    Bad("rank-2 w_gate", lambda kw: {**kw, "w_gate": kw["w_gate"][0]}, ValueError, ("w_gate",)),
    Bad("w_gate of another d", lambda kw: {**kw, "w_gate": kw["w_gate"][:, :, :-1]}, ValueError, ("w_gate",)),
    Bad("w_up of another F", lambda kw: {**kw, "w_up": kw["w_up"][:, :-1]}, ValueError, ("w_up",)),
    Bad("w_down of another d", lambda kw: {**kw, "w_down": kw["w_down"][:, :-1]}, ValueError, ("w_down",)),
    Bad("w_down of another F", lambda kw: {**kw, "w_down": kw["w_down"][:, :, :-1]}, ValueError, ("w_down",)),
    Bad("w_down for fewer experts", lambda kw: {**kw, "w_down": kw["w_down"][:2]}, ValueError, ("w_down",)),
    Bad("w_gate float64", lambda kw: {**kw, "w_gate": kw["w_gate"].double()}, TypeError, ("w_gate",)),
    Bad("w_up bfloat16", lambda kw: {**kw, "w_up": kw["w_up"].bfloat16()}, TypeError, ("w_up",)),
    Bad("w_down float16", lambda kw: {**kw, "w_down": kw["w_down"].half()}, TypeError, ("w_down",)),
    Bad("list w_up", lambda kw: {**kw, "w_up": kw["w_up"].tolist()}, TypeError, ("w_up",)),
    Bad("zero k", dict(k=0), ValueError, ("k",)),
    Bad("k above E", dict(k=4), ValueError, ("k",)),
    Bad("float k", dict(k=1.0), TypeError, ("k",)),
    Bad("zero capacity_factor", dict(capacity_factor=0.0), ValueError, ("capacity_factor",)),
    Bad("str capacity_factor", dict(capacity_factor="1"), TypeError, ("capacity_factor",)),
    Bad("int renormalize", dict(renormalize=0), TypeError, ("renormalize",)),
]


@bad_cases(LAYER_BAD)
def test_moe_forward_rejects_bad_input(impl, bad):
    """x a float tensor (T, d); router_logits finite (T, E); w_gate, w_up (E, F, d) and w_down
    (E, d, F) of x's dtype and device; k, capacity_factor, renormalize as route_topk and
    expert_capacity."""
    assert_rejects(impl.get("moe_forward"), _layer(), bad)


# Another device, reachable on a CPU-only machine: "meta" tensors (shapes, no data); not in the
# tables above, whose no-change check reads every tensor's data.
@pytest.mark.parametrize("name", ("w_gate", "w_up", "w_down"))
def test_moe_forward_rejects_weights_on_another_device(impl, name):
    """A weight on another device than x raises ValueError naming it, before anything is computed
    (the other device is "meta", whose tensors hold no data: an implementation that does not check
    fails in a matmul or returns a meta tensor)."""
    kw = _layer()
    kw[name] = kw[name].to("meta")
    assert_rejects_without_data(impl.get("moe_forward"), kw, Bad(f"{name} on meta", {}, ValueError, (name,)))
