"""Bad input of `lora`: lora_forward and merge_lora reject a malformed call with TypeError /
ValueError naming the argument, before any work, and modify nothing."""
from __future__ import annotations

import pytest
import torch

from conformance.badinput import Bad, assert_rejects, assert_rejects_without_data, bad_cases, set_entry
from spec_tests.lora.strategies import LoraCase


def _valid() -> dict:
    return LoraCase(4, 6, 5, 2, 3, 8.0, "float32", 61, "distinct").build()


def _alpha() -> list[Bad]:
    return [Bad("nan alpha", dict(alpha=float("nan")), ValueError, ("alpha",)),
            Bad("inf alpha", dict(alpha=float("inf")), ValueError, ("alpha",)),
            Bad("str alpha", dict(alpha="8"), TypeError, ("alpha",)),
            Bad("bool alpha", dict(alpha=True), TypeError, ("alpha",)),
            Bad("None alpha", dict(alpha=None), TypeError, ("alpha",)),
            Bad("tensor alpha", dict(alpha=torch.tensor(8.0)), TypeError, ("alpha",))]


def _with(name, fn):
    return lambda kw: {**kw, name: fn(kw[name])}


FORWARD_BAD = [
    Bad("numpy x", _with("x", lambda t: t.numpy()), TypeError, ("x",)),
    Bad("int x", _with("x", lambda t: t.to(torch.int32)), TypeError, ("x",)),
    Bad("rank-1 x", _with("x", lambda t: t[0]), ValueError, ("x",)),
    Bad("rank-3 x", _with("x", lambda t: t[None]), ValueError, ("x",)),
    Bad("list base_weight", _with("base_weight", lambda t: t.tolist()), TypeError, ("base_weight",)),
    Bad("rank-3 base_weight", _with("base_weight", lambda t: t[None]), ValueError, ("base_weight",)),
    Bad("base_weight of another d_in", _with("base_weight", lambda t: t[:, :-1]), ValueError, ("base_weight",)),
    Bad("base_weight float64", _with("base_weight", lambda t: t.double()), TypeError, ("base_weight",)),
    Bad("rank-2 lora_a", _with("lora_a", lambda t: t[0]), ValueError, ("lora_a",)),
    Bad("lora_a of another d_in", _with("lora_a", lambda t: t[:, :, :-1]), ValueError, ("lora_a",)),
    Bad("lora_a of rank 0", lambda kw: {**kw, "lora_a": kw["lora_a"][:, :0], "lora_b": kw["lora_b"][:, :, :0]},
        ValueError, ("lora_a",)),
    Bad("lora_a bfloat16", _with("lora_a", lambda t: t.bfloat16()), TypeError, ("lora_a",)),
    Bad("rank-2 lora_b", _with("lora_b", lambda t: t[0]), ValueError, ("lora_b",)),
    Bad("lora_b of another rank", _with("lora_b", lambda t: t[:, :, :-1]), ValueError, ("lora_b",)),
    Bad("lora_b of another d_out", _with("lora_b", lambda t: t[:, :-1]), ValueError, ("lora_b",)),
    Bad("lora_b for fewer adapters", _with("lora_b", lambda t: t[:1]), ValueError, ("lora_b",)),
    Bad("lora_b float16", _with("lora_b", lambda t: t.half()), TypeError, ("lora_b",)),
    Bad("list adapter_ids", _with("adapter_ids", lambda t: t.tolist()), TypeError, ("adapter_ids",)),
    Bad("float adapter_ids", _with("adapter_ids", lambda t: t.float()), TypeError, ("adapter_ids",)),
    Bad("bool adapter_ids", _with("adapter_ids", lambda t: t >= 0), TypeError, ("adapter_ids",)),
    Bad("rank-2 adapter_ids", _with("adapter_ids", lambda t: t[None]), ValueError, ("adapter_ids",)),
    Bad("an id per row missing", _with("adapter_ids", lambda t: t[:-1]), ValueError, ("adapter_ids",)),
    Bad("id = N", set_entry("adapter_ids", 2, 2), ValueError, ("adapter_ids",)),
    Bad("id -2", set_entry("adapter_ids", 0, -2), ValueError, ("adapter_ids",)),
] + _alpha()


@bad_cases(FORWARD_BAD)
def test_lora_forward_rejects_bad_input(impl, bad):
    """x a float tensor (B, d_in); base_weight (d_out, d_in), lora_a (N, r >= 1, d_in), lora_b
    (N, d_out, r) of x's dtype; adapter_ids int32/int64 (B,) in [-1, N); alpha a finite real."""
    assert_rejects(impl.get("lora_forward"), _valid(), bad)


def _merge_valid() -> dict:
    kw = _valid()
    return dict(base_weight=kw["base_weight"], lora_a=kw["lora_a"][0], lora_b=kw["lora_b"][0], alpha=8.0)


MERGE_BAD = [
    Bad("numpy base_weight", _with("base_weight", lambda t: t.numpy()), TypeError, ("base_weight",)),
    Bad("int base_weight", _with("base_weight", lambda t: t.to(torch.int64)), TypeError, ("base_weight",)),
    Bad("rank-3 base_weight", _with("base_weight", lambda t: t[None]), ValueError, ("base_weight",)),
    Bad("list lora_a", _with("lora_a", lambda t: t.tolist()), TypeError, ("lora_a",)),
    Bad("rank-3 lora_a", _with("lora_a", lambda t: t[None]), ValueError, ("lora_a",)),
    Bad("lora_a of another d_in", _with("lora_a", lambda t: t[:, :-1]), ValueError, ("lora_a",)),
    Bad("lora_a of rank 0", lambda kw: {**kw, "lora_a": kw["lora_a"][:0], "lora_b": kw["lora_b"][:, :0]},
        ValueError, ("lora_a",)),
    Bad("lora_a float64", _with("lora_a", lambda t: t.double()), TypeError, ("lora_a",)),
    Bad("list lora_b", _with("lora_b", lambda t: t.tolist()), TypeError, ("lora_b",)),
    Bad("rank-1 lora_b", _with("lora_b", lambda t: t[0]), ValueError, ("lora_b",)),
    Bad("lora_b of another d_out", _with("lora_b", lambda t: t[:-1]), ValueError, ("lora_b",)),
    Bad("lora_b of another rank", _with("lora_b", lambda t: t[:, :-1]), ValueError, ("lora_b",)),
    Bad("lora_b bfloat16", _with("lora_b", lambda t: t.bfloat16()), TypeError, ("lora_b",)),
] + _alpha()


@bad_cases(MERGE_BAD)
def test_merge_lora_rejects_bad_input(impl, bad):
    """base_weight a float tensor (d_out, d_in); lora_a (r >= 1, d_in), lora_b (d_out, r) of its
    dtype; alpha a finite real."""
    assert_rejects(impl.get("merge_lora"), _merge_valid(), bad)


# Another device, reachable on a CPU-only machine: "meta" tensors (shapes, no data); not in the
# tables above, whose no-change check reads every tensor's data.
@pytest.mark.parametrize("name", ("base_weight", "lora_a", "lora_b", "adapter_ids"))
def test_lora_forward_rejects_another_device(impl, name):
    """A weight or the ids on another device than x raises ValueError naming it, before anything
    is computed ("meta" tensors hold no data: an implementation that does not check fails in a
    matmul, in reading the ids, or returns a meta tensor)."""
    kw = _valid()
    kw[name] = kw[name].to("meta")
    assert_rejects_without_data(impl.get("lora_forward"), kw, Bad(f"{name} on meta", {}, ValueError, (name,)))


@pytest.mark.parametrize("name", ("lora_a", "lora_b"))
def test_merge_lora_rejects_another_device(impl, name):
    """lora_a or lora_b on another device than base_weight: ValueError naming it."""
    kw = _merge_valid()
    kw[name] = kw[name].to("meta")
    assert_rejects_without_data(impl.get("merge_lora"), kw, Bad(f"{name} on meta", {}, ValueError, (name,)))
