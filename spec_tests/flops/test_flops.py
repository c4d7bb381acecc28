"""FLOPs and bytes of a forward pass (course 02.02): the analytic counts equal what
``FlopCounterMode`` counts and what the tensors hold when the reference model really runs the pass.

Every property runs ``reference.model.Transformer`` on a drawn tiny config (oracles.measure):
prefill without a cache, prefill into an empty cache, decode and chunks against a real KV cache,
GQA/MQA, odd dims, explicit head_dim and hidden_dim, every float dtype.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from reference.model import ModelConfig, Transformer
from spec_tests.flops.oracles import course_flops, measure
from spec_tests.flops.strategies import Pass, decode, passes

FLOPS_KEYS = ("attention_projections", "attention_scores", "attention_values", "mlp", "lm_head")
BYTES_KEYS = ("weights", "kv_read", "kv_write")
ALL_DTYPES = ("float16", "bfloat16", "float32", "float64")
PASS_FUNCTIONS = ("forward_flops", "flops_breakdown", "forward_bytes", "bytes_breakdown", "arithmetic_intensity")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _breakdown(got, keys, what: str) -> dict:
    assert isinstance(got, dict) or hasattr(got, "keys"), f"{what} must return a dict, got {type(got).__name__}"
    got = dict(got)
    assert sorted(got) == sorted(keys), f"{what} keys {sorted(got)}, expected exactly {sorted(keys)}"
    for k, v in got.items():
        assert _is_int(v), f"{what}[{k!r}] must be an int, got {type(v).__name__} {v!r}"
    return got


def _call(case: Pass) -> str:
    return (f"(config={case.config()!r}, batch={case.batch}, new_tokens={case.new_tokens}, "
            f"context={case.context})")


# Pinned passes. GQA 3 query heads per KV head, odd dim 7 with head_dim 4, odd hidden_dim, a
# decode against a cache of 5, filling the model exactly (slack 0).
GQA_DECODE = Pass(vocab_size=11, dim=7, n_layers=2, n_heads=6, n_kv_heads=2, head_dim=4, hidden_dim=9,
                  batch=2, new_tokens=1, context=5)
GQA_PREFILL = Pass(vocab_size=11, dim=7, n_layers=2, n_heads=6, n_kv_heads=2, head_dim=4, hidden_dim=9,
                   batch=2, new_tokens=4, context=0)
DEFAULT_DIMS = Pass(vocab_size=5, dim=8, n_layers=1, n_heads=4, n_kv_heads=4, head_dim=None, hidden_dim=None,
                    batch=1, new_tokens=3, context=2, slack=1)
WIDE_HEADS = Pass(vocab_size=3, dim=4, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=6, hidden_dim=3,
                  batch=3, new_tokens=2, context=3, slack=0)


@example(case=GQA_DECODE, cache=True).via("mutant:no_factor_two mutant:gqa_kv_with_q_heads "
                                            "mutant:decode_full_square mutant:keys_exclude_new")
@example(case=GQA_PREFILL, cache=False).via("mutant:no_lm_head mutant:causal_half_scores mutant:mlp_two_matrices")
@example(case=WIDE_HEADS, cache=True).via("mutant:head_dim_from_dim")
@example(case=DEFAULT_DIMS, cache=True).via("boundary: head_dim and hidden_dim left to their defaults, MHA")
@given(case=passes(dtypes=ALL_DTYPES), cache=st.booleans())
def test_flops_equal_flop_counter(impl, case, cache):
    """flops_breakdown(config, batch=B, new_tokens=T, context=N) equals, component by component,
    what FlopCounterMode counts when Transformer(config) runs (B, T) tokens against a cache of N
    (the q/k/v/o_proj modules, the two attention matmuls, the mlp modules, lm_head), and
    forward_flops is FlopCounterMode's total: exact ints, for prefill with and without a cache,
    decode and chunks."""
    config = case.config()
    measured = measure(case, cache=cache)
    assert course_flops(config, **case.args()) == measured["components"], "oracle disagreement (the suite's bug)"
    got = _breakdown(impl.get("flops_breakdown")(config, **case.args()), FLOPS_KEYS, "flops_breakdown")
    for key in FLOPS_KEYS:
        assert got[key] == measured["components"][key], (
            f"flops_breakdown{_call(case)}[{key!r}] = {got[key]}; FlopCounterMode counts "
            f"{measured['components'][key]} (all: {measured['components']})")
    total = impl.get("forward_flops")(config, **case.args())
    assert _is_int(total) and total == measured["total"], (
        f"forward_flops{_call(case)} = {total!r}; FlopCounterMode's total is {measured['total']}")


@example(case=decode(GQA_DECODE)).via("mutant:keys_exclude_new")
@given(case=passes(max_context=12).map(decode))
def test_decode_step_equals_flop_counter(impl, case):
    """A decode step (one new token per sequence against a real cache of N tokens): forward_flops
    equals FlopCounterMode's total; the attention is 1 query row against N + 1 keys, not a square."""
    measured = measure(case)
    total = impl.get("forward_flops")(case.config(), **case.args())
    assert total == measured["total"], (
        f"forward_flops{_call(case)} = {total}; FlopCounterMode counts {measured['total']} "
        f"({measured['components']})")


@example(case=GQA_DECODE).via("mutant:kv_bytes_with_q_heads mutant:whole_embedding_read mutant:kv_read_includes_new")
@example(case=Pass(**{**GQA_PREFILL.__dict__, "dtype": "float64"})).via("mutant:bytes_assume_fp16")
@given(case=passes(dtypes=ALL_DTYPES))
def test_bytes_equal_model_tensors(impl, case):
    """bytes_breakdown: weights = the bytes of every parameter of Transformer(config) except the
    embedding table, plus the embedding rows the pass looks up; kv_read = the bytes of the K/V the
    cache held before the pass; kv_write = those the pass added (measured on the model's real
    cache, in its dtype); forward_bytes is their sum."""
    config = case.config()
    measured = measure(case)["bytes"]
    got = _breakdown(impl.get("bytes_breakdown")(config, **case.args()), BYTES_KEYS, "bytes_breakdown")
    assert got == measured, f"bytes_breakdown{_call(case)} = {got}; the model's tensors hold {measured}"
    total = impl.get("forward_bytes")(config, **case.args())
    assert _is_int(total) and total == sum(measured.values()), (
        f"forward_bytes{_call(case)} = {total!r}; expected {sum(measured.values())} ({measured})")


@example(case=GQA_DECODE).via("mutant:intensity_floor_division")
@given(case=passes(dtypes=ALL_DTYPES))
def test_intensity_is_flops_per_byte(impl, case):
    """arithmetic_intensity = FlopCounterMode's FLOPs / the bytes the tensors hold, a float."""
    measured = measure(case)
    want = measured["total"] / sum(measured["bytes"].values())
    got = impl.get("arithmetic_intensity")(case.config(), **case.args())
    assert isinstance(got, float) and math.isclose(got, want, rel_tol=1e-12), (
        f"arithmetic_intensity{_call(case)} = {got!r}; FLOPs / bytes = {measured['total']} / "
        f"{sum(measured['bytes'].values())} = {want}")


@example(case=GQA_DECODE).via("mutant:param_count_no_norms mutant:tied_embeddings")
@given(case=passes())
def test_parameter_count_equals_the_model(impl, case):
    """parameter_count(config) is the number of parameters Transformer(config) holds."""
    want = sum(p.numel() for p in Transformer(case.config()).parameters())
    got = impl.get("parameter_count")(case.config())
    assert _is_int(got) and got == want, f"parameter_count({case.config()!r}) = {got!r}; the model holds {want}"


@example(case=GQA_PREFILL).via("boundary: a GQA prefill with odd dims")
@given(case=passes(max_context=0, dtypes=ALL_DTYPES))
def test_omitted_context_is_a_prefill(impl, case):
    """context defaults to 0: every pass function called without it equals the call with
    context=0 (a prefill)."""
    for name in PASS_FUNCTIONS:
        f = impl.get(name)
        omitted = f(case.config(), batch=case.batch, new_tokens=case.new_tokens)
        explicit = f(case.config(), batch=case.batch, new_tokens=case.new_tokens, context=0)
        assert omitted == explicit, f"{name} without context = {omitted}; with context=0: {explicit}"


# --- bad input -------------------------------------------------------------------------------
SMALL = ModelConfig(vocab_size=16, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, max_seq_len=16)
VALID = dict(config=SMALL, batch=2, new_tokens=3, context=4)
BAD = [
    Bad("config None", dict(config=None), TypeError, ("config",)),
    Bad("config a dict", dict(config=dict(vocab_size=16, dim=8)), TypeError, ("config",)),
    Bad("config a string", dict(config="llama-3-8b"), TypeError, ("config",)),
    Bad("zero batch", dict(batch=0), ValueError, ("batch",)),
    Bad("negative batch", dict(batch=-1), ValueError, ("batch",)),
    Bad("bool batch", dict(batch=True), TypeError, ("batch",)),
    Bad("float batch", dict(batch=2.0), TypeError, ("batch",)),
    Bad("None batch", dict(batch=None), TypeError, ("batch",)),
    Bad("zero new_tokens", dict(new_tokens=0), ValueError, ("new_tokens",)),
    Bad("negative new_tokens", dict(new_tokens=-3), ValueError, ("new_tokens",)),
    Bad("str new_tokens", dict(new_tokens="3"), TypeError, ("new_tokens",)),
    Bad("bool new_tokens", dict(new_tokens=True), TypeError, ("new_tokens",)),
    Bad("negative context", dict(context=-1), ValueError, ("context",)),
    Bad("float context", dict(context=4.0), TypeError, ("context",)),
    Bad("bool context", dict(context=False), TypeError, ("context",)),
    Bad("None context", dict(context=None), TypeError, ("context",)),
    Bad("context past max_seq_len", dict(context=14), ValueError, ("context", "max_seq_len")),
    Bad("new_tokens past max_seq_len", dict(context=0, new_tokens=17), ValueError, ("new_tokens", "max_seq_len")),
    Bad("one past max_seq_len", dict(context=13, new_tokens=4), ValueError, ("context", "new_tokens", "max_seq_len")),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """config must be a ModelConfig (TypeError); batch, new_tokens, context ints (TypeError; a
    bool is not one), batch and new_tokens >= 1, context >= 0 (ValueError); a pass past the model's
    max_seq_len is one the model refuses (ValueError naming context, new_tokens and max_seq_len).
    Each function of a pass, the message naming the argument."""
    assert_rejects(impl.get("forward_flops"), VALID, bad)
    assert_rejects(impl.get("flops_breakdown"), VALID, bad)
    assert_rejects(impl.get("forward_bytes"), VALID, bad)
    assert_rejects(impl.get("bytes_breakdown"), VALID, bad)
    assert_rejects(impl.get("arithmetic_intensity"), VALID, bad)


PARAM_BAD = [
    Bad("config None", dict(config=None), TypeError, ("config",)),
    Bad("config a dict", dict(config=dict(vocab_size=16, dim=8)), TypeError, ("config",)),
    Bad("config an int", dict(config=8), TypeError, ("config",)),
]


@bad_cases(PARAM_BAD)
def test_parameter_count_rejects_bad_input(impl, bad):
    """parameter_count(config): config must be a ModelConfig (TypeError naming config)."""
    assert_rejects(impl.get("parameter_count"), dict(config=SMALL), bad)


def test_a_pass_that_fills_the_model_is_legal(impl):
    """context + new_tokens == max_seq_len is a pass the model runs (its last position is
    max_seq_len - 1): counted, not rejected. Mutant: full_model_rejected."""
    case = Pass(vocab_size=4, dim=4, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=None, hidden_dim=None,
                batch=1, new_tokens=2, context=3, slack=0)
    measured = measure(case)
    for name in PASS_FUNCTIONS:
        impl.get(name)(case.config(), **case.args())
    got = impl.get("forward_flops")(case.config(), **case.args())
    assert got == measured["total"], f"forward_flops{_call(case)} = {got}; FlopCounterMode counts {measured['total']}"
