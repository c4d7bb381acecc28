"""Attention (course 03.02, 03.05, 05.07): the properties that define it.

Oracles: a float64 brute force written one query at a time, and torch's
scaled_dot_product_attention in float64. Every implementation is held to the tolerance rule:
error vs the float64 oracle <= 2 x the reference's own error in the same dtype + rounding floor.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.tolerance import assert_close_to_oracle, assert_metamorphic
from spec_tests.attention.oracles import attention_brute_force
from spec_tests.attention.strategies import AttnCase, attn_cases


def _run(fn, q, k, v, case: AttnCase, **extra):
    return fn(q, k, v, causal=case.causal, window=case.window, scale=case.scale, **extra)


def _score_magnitude(case: AttnCase) -> torch.Tensor:
    """max_ij scale * sum_d |q_id k_jd|: the magnitude at which a score (and so lse) is rounded.

    lse is float32 and may be exact for the reference by luck (a single visible key: lse equals
    one score), so its rounding floor is taken at the scale of the dot products that produce the
    scores, not at the (possibly cancelled) value of lse itself."""
    q, k, _ = (t.double() for t in case.tensors())
    scale = case.scale if case.scale is not None else 1.0 / math.sqrt(case.head_dim)
    group = case.q_heads // case.kv_heads
    mags = q.abs() @ k.abs().repeat_interleave(group, 1).transpose(-1, -2)
    return (mags.max() * scale).reshape(1)


def _check_against(oracle_out, oracle_lse, impl, reference, case: AttnCase, device, name="attention.attention"):
    fn = impl.get(name)
    q, k, v = case.tensors(device)
    before = [t.clone() for t in (q, k, v)]
    out, lse = _run(fn, q, k, v, case, return_lse=True)
    for label, t, b in zip("qkv", (q, k, v), before):
        assert torch.equal(t, b), f"{name} modified its input {label} in place"
    ref_out, ref_lse = _run(reference.get("attention.attention"), q, k, v, case, return_lse=True)
    inputs = dict(case=case, q=q, k=k, v=v)
    assert_close_to_oracle(out, ref_out, oracle_out, name=f"{name} out", inputs=inputs)
    assert lse.dtype == ref_lse.dtype, f"lse dtype {lse.dtype} != {ref_lse.dtype}"
    assert_close_to_oracle(lse, ref_lse, oracle_lse, name=f"{name} lse", inputs=inputs,
                           floor_from=_score_magnitude(case))


# Pinned regressions and the shapes FlashAttention's own tests single out.
@example(case=AttnCase(1, 2, 1, 5, 3, 16, True, None, "float16", 7))     # q_len > kv_len: masked rows
@example(case=AttnCase(1, 2, 2, 3, 17, 32, True, None, "bfloat16", 1))   # decode-like, bottom-right
@example(case=AttnCase(2, 4, 1, 33, 33, 16, True, 4, "float32", 3))      # MQA + sliding window
@given(case=attn_cases())
def test_matches_float64_brute_force(impl, reference, device, case):
    """out and lse agree with a float64 brute force within the tolerance rule; inputs untouched."""
    oracle_out, oracle_lse = attention_brute_force(*case.tensors(), **case.kwargs)
    _check_against(oracle_out, oracle_lse, impl, reference, case, device)


@given(case=attn_cases(dtypes=("float32",), allow_window=False))
def test_matches_torch_sdpa(impl, reference, device, case):
    """out agrees with torch's scaled_dot_product_attention (float64, explicit bottom-right mask)."""
    from reference.attention import visible_mask
    q, k, v = (t.double() for t in case.tensors())
    mask = visible_mask(case.q_len, case.kv_len, causal=case.causal, window=None)
    oracle = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=case.scale, enable_gqa=True)
    oracle = torch.where(mask.any(-1)[:, None], oracle, 0.0)  # SDPA gives NaN on fully masked rows
    out = _run(impl.get("attention.attention"), *case.tensors(device), case)
    ref = _run(reference.get("attention.attention"), *case.tensors(device), case)
    assert_close_to_oracle(out, ref, oracle, name="attention out vs SDPA", inputs=dict(case=case))


@given(case=attn_cases(dtypes=("float64",), max_len=24))
def test_float64_is_exact(impl, device, case):
    """In float64 an implementation is exact to 1e-10 (skipped where float64 is unsupported)."""
    fn = impl.get("attention.attention")
    try:
        out, lse = _run(fn, *case.tensors(device), case, return_lse=True)
    except TypeError as exc:
        if "float64" in str(exc) or "dtype" in str(exc):
            pytest.skip(f"float64 not supported: {exc}")
        raise
    oracle_out, oracle_lse = attention_brute_force(*case.tensors(), **case.kwargs)
    torch.testing.assert_close(out.cpu(), oracle_out, rtol=0, atol=1e-10)
    torch.testing.assert_close(lse.cpu().double(), oracle_lse, rtol=0, atol=1e-10)


@given(case=attn_cases(), block_q=st.integers(1, 20), block_k=st.integers(1, 20))
def test_tiled_equals_plain(impl, reference, device, case, block_q, block_k):
    """The online-softmax tiled form computes the same function for any tile sizes."""
    fn = impl.get("attention.attention_tiled")
    oracle_out, oracle_lse = attention_brute_force(*case.tensors(), **case.kwargs)
    q, k, v = case.tensors(device)
    out, lse = _run(fn, q, k, v, case, return_lse=True, block_q=block_q, block_k=block_k)
    ref_out, ref_lse = _run(reference.get("attention.attention"), q, k, v, case, return_lse=True)
    assert_close_to_oracle(out, ref_out, oracle_out, name="attention_tiled out", inputs=dict(case=case))
    assert_close_to_oracle(lse, ref_lse, oracle_lse, name="attention_tiled lse", inputs=dict(case=case),
                           floor_from=_score_magnitude(case))


@given(case=attn_cases(groups=(2, 4, 8), max_kv_heads=2))
def test_gqa_equals_mha_with_repeated_kv(impl, reference, device, case):
    """GQA/MQA == MHA on K/V heads repeated group times (query head h reads KV head h // group)."""
    fn = impl.get("attention.attention")
    q, k, v = case.tensors(device)
    group = case.q_heads // case.kv_heads
    gqa = _run(fn, q, k, v, case)
    mha = _run(fn, q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), case)
    ref = _run(reference.get("attention.attention"), q, k, v, case)
    oracle, _ = attention_brute_force(q, k, v, **case.kwargs)
    assert_metamorphic(gqa, mha, ref, oracle, name="GQA vs repeated-KV MHA", inputs=dict(case=case))


@given(case=attn_cases(allow_window=False), data=st.data())
def test_noncausal_invariant_to_key_permutation(impl, reference, device, case, data):
    """Without a mask, permuting keys together with their values leaves the output unchanged."""
    fn = impl.get("attention.attention")
    case = AttnCase(**{**case.__dict__, "causal": False})
    perm = torch.tensor(data.draw(st.permutations(range(case.kv_len)), label="perm"))
    q, k, v = case.tensors(device)
    out = _run(fn, q, k, v, case)
    permuted = _run(fn, q, k[:, :, perm], v[:, :, perm], case)
    ref = _run(reference.get("attention.attention"), q, k, v, case)
    oracle, _ = attention_brute_force(q, k, v, **case.kwargs)
    assert_metamorphic(permuted, out, ref, oracle, name="key-permuted output", inputs=dict(case=case))


@given(case=attn_cases(), extra=st.integers(1, 8))
def test_fully_masked_rows_are_zero_with_lse_minus_inf(impl, device, case, extra):
    """Causal with q_len > kv_len: the first q_len - kv_len queries see no key -> out 0, lse -inf."""
    case = AttnCase(**{**case.__dict__, "causal": True, "q_len": case.kv_len + extra})
    out, lse = _run(impl.get("attention.attention"), *case.tensors(device), case, return_lse=True)
    assert torch.isfinite(out).all(), "NaN/inf in the output"
    assert (out[:, :, :extra] == 0).all(), "fully masked rows must be exactly 0"
    assert (lse[:, :, :extra] == -math.inf).all(), "fully masked rows must have lse = -inf"
    assert torch.isfinite(lse[:, :, extra:]).all()


def test_fresh_result_for_each_call(impl, reference, device):
    """Two calls with equal shapes but different values give their own answers (no stale cache)."""
    fn = impl.get("attention.attention")
    for seed in (11, 12):
        case = AttnCase(1, 2, 1, 9, 9, 32, True, None, "float16", seed)
        oracle, _ = attention_brute_force(*case.tensors(), causal=True)
        out = _run(fn, *case.tensors(device), case)
        ref = _run(reference.get("attention.attention"), *case.tensors(device), case)
        assert_close_to_oracle(out, ref, oracle, name=f"call with seed {seed}")


def _valid(device) -> dict:
    """A valid call: 4 query heads over 2 KV heads (GQA), 8 positions, head_dim 16."""
    return dict(q=torch.randn(1, 4, 8, 16, device=device), k=torch.randn(1, 2, 8, 16, device=device),
                v=torch.randn(1, 2, 8, 16, device=device))


def _with(**changes):
    """A Bad change computed from the valid arguments: ``name=lambda valid_kwargs: new_value``."""
    return lambda kw: {**kw, **{name: f(kw) for name, f in changes.items()}}


BAD = [
    Bad("q rank 3", _with(q=lambda kw: kw["q"][0]), ValueError, ("q",)),
    Bad("k rank 3", _with(k=lambda kw: kw["k"][0]), ValueError, ("k",)),
    Bad("v rank 5", _with(v=lambda kw: kw["v"][None]), ValueError, ("v",)),
    Bad("q not a tensor", _with(q=lambda kw: kw["q"].tolist()), TypeError, ("q",)),
    Bad("v not a tensor", _with(v=lambda kw: kw["v"].tolist()), TypeError, ("v",)),
    Bad("integer q", _with(q=lambda kw: kw["q"].long(), k=lambda kw: kw["k"].long(),
                           v=lambda kw: kw["v"].long()), TypeError, ("q",)),
    Bad("k dtype differs", _with(k=lambda kw: kw["k"].half(), v=lambda kw: kw["v"].half()), TypeError, ("k",)),
    Bad("heads not a multiple", _with(q=lambda kw: kw["q"][:, :3]), ValueError, ("q",)),
    Bad("head_dim differs", _with(k=lambda kw: kw["k"][..., :8], v=lambda kw: kw["v"][..., :8]),
        ValueError, ("k",)),
    Bad("k/v shapes differ", _with(v=lambda kw: kw["v"][:, :, :4]), ValueError, ("v",)),
    Bad("batch differs", _with(k=lambda kw: torch.cat([kw["k"]] * 2), v=lambda kw: torch.cat([kw["v"]] * 2)),
        ValueError, ("k",)),
    Bad("negative window", dict(window=-1), ValueError, ("window",)),
    Bad("float window", dict(window=2.5), TypeError, ("window",)),
    Bad("bool window", dict(window=True), TypeError, ("window",)),
    Bad("nan scale", dict(scale=math.nan), ValueError, ("scale",)),
    Bad("string scale", dict(scale="0.25"), TypeError, ("scale",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, device, bad):
    """Malformed input raises TypeError (wrong kind of value) or ValueError (illegal value) whose
    message names the argument; the rejected call leaves its tensors unchanged."""
    assert_rejects(impl.get("attention.attention"), lambda: _valid(device), bad)


TILED_BAD = [
    Bad("zero block_q", dict(block_q=0), ValueError, ("block_q",)),
    Bad("float block_k", dict(block_k=4.0), TypeError, ("block_k",)),
    Bad("q rank 3 (tiled)", _with(q=lambda kw: kw["q"][0]), ValueError, ("q",)),
]


@bad_cases(TILED_BAD)
def test_tiled_rejects_bad_input(impl, device, bad):
    """attention_tiled checks its inputs like attention, and block sizes are ints >= 1."""
    assert_rejects(impl.get("attention.attention_tiled"), lambda: _valid(device), bad)
