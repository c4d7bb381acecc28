"""The textbook claims of 02.02, 02.04 and 02.06, reproduced with numbers on real model shapes.

The shapes are the published ones (config.json of each checkpoint); the counts of a shape too large
to run are the course's formula (oracles.course_flops), which every small pass checks equal to
FlopCounterMode (test_flops.py). The numbers quoted here are the ones docs/flops.md prints.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from reference.model import ModelConfig
from spec_tests.flops.oracles import course_flops
from spec_tests.flops.strategies import passes

LLAMA3_8B = ModelConfig(vocab_size=128256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, hidden_dim=14336,
                        rope_theta=500000.0, max_seq_len=8192, dtype=torch.bfloat16)
LLAMA2_7B = ModelConfig(vocab_size=32000, dim=4096, n_layers=32, n_heads=32, n_kv_heads=32, hidden_dim=11008,
                        max_seq_len=4096, dtype=torch.float16)
MISTRAL_7B = ModelConfig(vocab_size=32000, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, hidden_dim=14336,
                         max_seq_len=32768, dtype=torch.bfloat16)
REAL = {"Llama-3-8B": LLAMA3_8B, "Llama-2-7B": LLAMA2_7B, "Mistral-7B": MISTRAL_7B}
# H100 SXM: 989 dense bf16 TFLOP/s over 3.35 TB/s of HBM3 -- the ridge point, in FLOPs per byte.
H100_RIDGE = 989e12 / 3.35e12


def _non_embedding(c: ModelConfig, params: int) -> int:
    """The parameters that multiply: all but the embedding table and the RMSNorm weights."""
    return params - c.vocab_size * c.dim - (2 * c.n_layers + 1) * c.dim


def test_published_parameter_counts(impl):
    """parameter_count gives the published sizes: Llama-3-8B 8,030,261,248; Llama-2-7B 6,738,415,616;
    Mistral-7B 7,241,732,096. Mutants: param_count_no_norms, tied_embeddings."""
    f = impl.get("parameter_count")
    assert f(LLAMA3_8B) == 8_030_261_248
    assert f(LLAMA2_7B) == 6_738_415_616
    assert f(MISTRAL_7B) == 7_241_732_096


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_shapes_equal_the_course_formula(impl, name):
    """At real shapes (too large to run here) flops_breakdown equals the course's per-matrix count,
    for a prefill of 512 tokens, a decode at 4K context and a batch-16 chunk of 64 after 1K."""
    c = REAL[name]
    for args in (dict(batch=1, new_tokens=512, context=0), dict(batch=1, new_tokens=1, context=4095),
                 dict(batch=16, new_tokens=64, context=1024)):
        got, want = dict(impl.get("flops_breakdown")(c, **args)), course_flops(c, **args)
        for key in want:
            assert got.get(key) == want[key], (
                f"flops_breakdown({name}, {args})[{key!r}] = {got.get(key)}; the course's per-matrix count "
                f"(equal to FlopCounterMode on every small pass) is {want[key]}")


@pytest.mark.parametrize("name", sorted(REAL))
def test_two_flops_per_parameter_per_token(impl, name):
    """Decode of one token at a short context costs 2 FLOPs per parameter that multiplies
    (all but the embedding table and the norms) plus 4 x L x H x h per key: exactly
    2 P' + 4 L H h (N + 1), within 0.01 % of 2 P' at N = 0. Counting the embedding table as
    multiplied is 6.5 % too high for Llama-3-8B (its 128K vocabulary): the 2 x params rule is
    about the matrices."""
    c = REAL[name]
    params = impl.get("parameter_count")(c)
    dense = _non_embedding(c, params)
    f = impl.get("forward_flops")
    for n in (0, 1, 100, 1000):
        assert f(c, batch=1, new_tokens=1, context=n) == 2 * dense + 4 * c.n_layers * c.n_heads * c.head_dim * (n + 1)
    assert abs(f(c, batch=1, new_tokens=1) / (2 * dense) - 1) < 1e-4
    if name == "Llama-3-8B":
        assert f(c, batch=1, new_tokens=1) == 15_009_841_152
        assert 0.93 < f(c, batch=1, new_tokens=1) / (2 * params) < 0.94


@given(case=passes(max_context=40, max_new=8), batch=st.integers(1, 4))
def test_attention_grows_with_context(impl, case, batch):
    """Decode: each extra cached token adds exactly 4 x B x L x H x h FLOPs (linear in the context);
    prefill: the attention is 4 x B x L x H x h x T^2 (quadratic in the prompt) while every other
    component is linear in T; and every count is B times a sequence's. Mutants: decode_full_square,
    keys_exclude_new, causal_half_scores."""
    c = case.config().replace(max_seq_len=64)
    f, parts = impl.get("forward_flops"), impl.get("flops_breakdown")
    per_key = 4 * batch * c.n_layers * c.n_heads * c.head_dim
    n = case.context
    step = f(c, batch=batch, new_tokens=1, context=n + 1) - f(c, batch=batch, new_tokens=1, context=n)
    assert step == per_key, (
        f"decode at context {n + 1} minus decode at {n} (batch {batch}) = {step} FLOPs; one more key costs "
        f"4 x B x L x H x h = {per_key}")
    t = case.new_tokens
    prefill, one = dict(parts(c, batch=batch, new_tokens=t)), dict(parts(c, batch=batch, new_tokens=1))
    attention = prefill["attention_scores"] + prefill["attention_values"]
    assert attention == per_key * t * t, (
        f"prefill of {t} tokens (batch {batch}): attention {attention} FLOPs; the full T x T rectangle is "
        f"4 x B x L x H x h x T^2 = {per_key * t * t}")
    for key in ("attention_projections", "mlp", "lm_head"):
        assert prefill[key] == t * one[key], f"{key}: {prefill[key]} for {t} tokens, {one[key]} for one: not linear in T"
    whole, single = f(c, batch=batch, new_tokens=t, context=n), f(c, batch=1, new_tokens=t, context=n)
    assert whole == batch * single, f"forward_flops at batch {batch} = {whole}, {batch} x batch 1 = {batch * single}"


def test_decode_is_memory_bound(impl):
    """02.06 with numbers (Llama-3-8B, bf16): a decode step does ~1 FLOP per byte at batch 1
    (0.99999 at context 0) -- ~300x below an H100's ridge point (989 TFLOP/s / 3.35 TB/s = 295) --
    and batching raises it almost linearly while the weights dominate the bytes; a long context
    at a large batch makes the KV cache the larger read (02.07), capping the gain. A prefill of
    2048 tokens is far above the ridge (compute bound). Mutants: intensity_floor_division,
    bytes_assume_fp16, whole_embedding_read."""
    c = LLAMA3_8B
    ai, nbytes = impl.get("arithmetic_intensity"), impl.get("bytes_breakdown")
    one = ai(c, batch=1, new_tokens=1)
    assert 0.999 < one < 1.001
    assert ai(c, batch=1, new_tokens=1, context=8191) < 1.21
    assert 15 < ai(c, batch=16, new_tokens=1, context=0) < 16.01
    assert ai(c, batch=1, new_tokens=2048) > 2000 > H100_RIDGE
    for batch in (1, 8, 64):
        assert ai(c, batch=batch, new_tokens=1, context=1024) < H100_RIDGE
    short, long = dict(nbytes(c, batch=1, new_tokens=1, context=1024)), dict(nbytes(c, batch=64, new_tokens=1, context=8191))
    assert short["weights"] > 100 * short["kv_read"]
    assert long["kv_read"] > 4 * long["weights"]
    # a bf16 weight is 2 bytes: the weights of a decode step are 2 x (P - V d + d) bytes
    params = impl.get("parameter_count")(c)
    assert short["weights"] == 2 * (params - c.vocab_size * c.dim + c.dim) == 15_009_857_536
    assert short["kv_read"] == 2 * 32 * 8 * 128 * 1024 * 2 == 128 << 20
