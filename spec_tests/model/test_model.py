"""The tiny Llama-style model (course 01.01, 01.04): the properties that define it.

Oracles: a float64 brute force written one token at a time from the formulas
(spec_tests/model/oracles.py), and HF transformers' ``LlamaForCausalLM`` built from the equivalent
``LlamaConfig`` with the same weights (a test extra: skipped with a reason where transformers is
missing). The weights come from the reference's seeded init and are loaded into the
implementation under test by their HF names, so an implementation may initialise as it likes.
Float64 runs must agree to 1e-10; lower precisions follow the tolerance rule, whose rounding
floor is taken at the magnitude each logit is rounded at (sum_j |lm_head[v, j]| |x_j|, see
oracles.llama_brute_force_with_magnitude), not at the logit itself.
"""
from __future__ import annotations

import dataclasses
import importlib

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.tolerance import assert_close_to_oracle, assert_metamorphic
from spec_tests.model.oracles import (hf_in_float64, hf_llama_config, llama_brute_force_with_magnitude,
                                      logit_magnitude, sink_window_attention, sink_window_tokens)
from spec_tests.model.strategies import ModelCase, model_cases


FLOAT64_ATOL = 1e-10   # float64 sums of a few hundred O(1) terms: ~1e-14 apart; 1e-10 is tight


def _reference_weights(reference, case: ModelCase) -> dict:
    cfg = case.config(reference.get("ModelConfig"), "float32")
    return reference.get("Transformer")(cfg, seed=case.seed).state_dict()


def _build(impl, case: ModelCase, weights: dict, dtype, device="cpu"):
    """The implementation's model for ``case`` in ``dtype``, holding ``weights`` (HF names)."""
    model = impl.get("Transformer")(case.config(impl.get("ModelConfig"), dtype), seed=case.seed)
    model.load_state_dict(weights, strict=True)
    return model.to(device)


def _logits(model, tokens, cache=None):
    with torch.no_grad():
        return model(tokens) if cache is None else model(tokens, cache=cache)


def _oracle(reference, case: ModelCase, weights: dict, tokens, positions=None):
    """Float64 brute-force logits of ``tokens`` and the magnitude they are rounded at."""
    cfg = case.config(reference.get("ModelConfig"), "float64")
    return llama_brute_force_with_magnitude(weights, cfg, tokens.cpu(), positions)


def _check_float64(out, oracle, what, case):
    assert out.dtype == torch.float64, f"{what}: dtype {out.dtype}, expected float64"
    torch.testing.assert_close(out.cpu(), oracle, rtol=0, atol=FLOAT64_ATOL,
                               msg=lambda m: f"{what} (float64, {case}):\n{m}")


# --- oracle: brute force -------------------------------------------------------------------------
# GQA 3:1; MQA with a big eps; MHA with a given head_dim; every size at its minimum; norm_eps 0.
# All but the first fill max_seq_len with positions.
@example(case=ModelCase(96, 48, 2, 6, 2, None, None, 500000.0, 1e-5, 24, 2, 20, "float64", 3)).via(
    "mutant:gqa_kv_tiled")
@example(case=ModelCase(64, 32, 1, 2, 1, 16, 40, 100.0, 1e-2, 8, 1, 8, "float32", 0)).via(
    "mutant:rmsnorm_no_eps mutant:max_seq_len_exclusive")
@example(case=ModelCase(80, 64, 2, 4, 4, 8, None, 10000.0, 1e-6, 9, 1, 9, "bfloat16", 7)).via(
    "mutant:rope_width_from_dim mutant:rope_interleaved")
@example(case=ModelCase(1, 2, 1, 1, 1, None, 1, 10000.0, 1e-5, 1, 1, 1, "float64", 0)).via(
    "mutant:max_seq_len_exclusive mutant:rmsnorm_no_eps")
@example(case=ModelCase(64, 32, 2, 4, 2, None, None, 10000.0, 0.0, 8, 2, 8, "float64", 5)).via(
    "mutant:norm_eps_zero_rejected mutant:max_seq_len_exclusive")
@given(case=model_cases(dtypes=("float64", "float32", "bfloat16")))
def test_matches_float64_brute_force(impl, reference, device, case):
    """Logits equal a float64 token-by-token brute force: to 1e-10 in float64, by the tolerance
    rule (2 x the reference's own error + rounding floor at the logits' magnitude) in float32 and
    bfloat16. The legal extremes are pinned: the smallest model (vocabulary of one token, dim 2,
    one head, hidden_dim 1, max_seq_len 1), norm_eps 0, and positions filling max_seq_len."""
    model_cls = impl.get("Transformer")  # noqa: F841  (skip early when not implemented)
    weights = _reference_weights(reference, case)
    tokens = case.tokens(device)
    oracle, magnitude = _oracle(reference, case, weights, tokens)
    out = _logits(_build(impl, case, weights, case.dtype, device), tokens)
    assert out.shape == (case.batch, case.seq_len, case.vocab_size), f"logits shape {tuple(out.shape)}"
    if case.dtype == "float64":
        _check_float64(out, oracle, "logits vs brute force", case)
    else:
        ref = _logits(_build(reference, case, weights, case.dtype, device), tokens)
        assert_close_to_oracle(out, ref, oracle, name="logits vs float64 brute force",
                               inputs=dict(case=case, tokens=tokens), floor_from=magnitude)


# --- long-range numerics -------------------------------------------------------------------------
# One layer, a long context: 4,092 tokens prefilled into a KV cache in one forward, then four
# one-token decodes up to position 4,095. The attention is a sink + window callable (the first 4
# tokens and the last 4: oracles.sink_window_attention), so the run costs milliseconds and the
# float64 oracle of position p is the brute force over the 8 tokens p sees, at their positions.
LONG_CASE = ModelCase(64, 32, 1, 2, 1, 16, 32, 10000.0, 1e-5, 4096, 1, 4096, "bfloat16", 11)
LONG_SINKS, LONG_WINDOW, LONG_DECODES = 4, 4, 4
LONG_POSITIONS = (0, 3, 7, 255, 256, 257, 1023, 2047, 2048, 2049, 2051, 3001, 4091, 4092, 4093, 4094, 4095)


def _long_run(model, tokens, decodes: int):
    """Logits of every position: a prefill of all but ``decodes`` tokens, then one-token decodes."""
    n = tokens.shape[1] - decodes
    cache = model.new_cache(tokens.shape[0], tokens.shape[1])
    pieces = [_logits(model, tokens[:, :n], cache)]
    pieces += [_logits(model, tokens[:, t:t + 1], cache) for t in range(n, tokens.shape[1])]
    return torch.cat(pieces, dim=1)


def _check_long_range(impl, reference, device, case: ModelCase, positions, sinks: int, window: int, decodes: int):
    """The implementation's logits at ``positions`` (prefill + ``decodes`` one-token decodes, the
    sink + window attention) vs the float64 brute force of the tokens each position sees."""
    weights = _reference_weights(reference, case)
    tokens = case.tokens(device)
    attention = sink_window_attention(sinks, window)
    at = torch.tensor(positions, device=device)
    runs = []
    for source in (impl, reference):
        model = source.get("Transformer")(case.config(source.get("ModelConfig")),
                                                seed=case.seed, attention=attention)
        model.load_state_dict(weights, strict=True)
        runs.append(_long_run(model.to(device), tokens, decodes)[:, at])
    oracle, magnitude = [], []
    for p in positions:
        seen = sink_window_tokens(p, sinks, window)
        o, m = _oracle(reference, case, weights, tokens[:, seen], seen)
        oracle.append(o[:, -1])
        magnitude.append(m[:, -1])
    assert_close_to_oracle(runs[0], runs[1], torch.stack(oracle, 1), floor_from=torch.stack(magnitude, 1),
                           name=f"{case.dtype} logits at positions {tuple(positions)} vs float64",
                           inputs=dict(case=case, sinks=sinks, window=window, decodes=decodes))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_long_range_positions_in_low_precision(impl, reference, device, dtype):
    """At positions up to 4,095, through a prefilled KV cache and one-token decodes, bfloat16 and
    float16 logits are within the tolerance rule of float64. An error that grows with the position
    (a RoPE table whose positions, frequencies or angles are rounded to the model's dtype) is far
    below the tolerance at the ~30 positions of the other tests and large here: the contract
    computes the table in float32 for every dtype below float64."""
    impl.get("Transformer")
    _check_long_range(impl, reference, device, dataclasses.replace(LONG_CASE, dtype=dtype), LONG_POSITIONS,
                      LONG_SINKS, LONG_WINDOW, LONG_DECODES)


@pytest.mark.slow
@settings(max_examples=60)
@given(base=model_cases(dtypes=("bfloat16", "float16"), max_layers=1, max_batch=2), data=st.data())
def test_long_range_drawn(impl, reference, device, base, data):
    """The long-range check on drawn one-layer shapes, lengths 2,049..4,096, 1..6 sinks, windows
    of 1..8 and 0..3 decodes, at drawn positions (always the last): slow, for the thorough run."""
    impl.get("Transformer")
    n = data.draw(st.integers(2049, 4096), label="length")
    case = dataclasses.replace(base, seq_len=n, max_seq_len=n)
    positions = sorted(set(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=12), label="positions"))
                       | {n - 1})
    _check_long_range(impl, reference, device, case, positions, data.draw(st.integers(1, 6), label="sinks"),
                      data.draw(st.integers(1, 8), label="window"), data.draw(st.integers(0, 3), label="decodes"))


# --- oracle: HF transformers -------------------------------------------------------------------
@example(case=ModelCase(96, 48, 2, 6, 2, None, None, 500000.0, 1e-5, 24, 2, 20, "float32", 3)).via(
    "mutant:gqa_kv_tiled mutant:rope_interleaved")
@given(case=model_cases(hf_compatible=True))
def test_matches_hf_llama(impl, reference, case):
    """Same weights, same logits as transformers' LlamaForCausalLM: the state_dict loads into HF
    strictly (HF parameter names), float64 logits agree to 1e-10 (HF patched to stay float64,
    see oracles.hf_in_float64) and float32 logits are within the tolerance rule of the float64 truth,
    where the rule's "reference error" is the larger float32 error of the two references (HF's
    and the spec's): two correct float32 implementations differ in op order, and on models this
    small the ratio of their errors alone can exceed 2."""
    impl.get("Transformer")
    pytest.importorskip("transformers", reason="transformers (a test extra) is not installed")
    from transformers import LlamaForCausalLM

    weights = _reference_weights(reference, case)
    model32 = _build(impl, case, weights, torch.float32)
    cfg = case.config(reference.get("ModelConfig"))
    hf32 = LlamaForCausalLM(hf_llama_config(cfg)).eval()
    hf32.load_state_dict(model32.state_dict(), strict=True)
    hf64 = LlamaForCausalLM(hf_llama_config(cfg)).eval()
    hf64.load_state_dict(weights, strict=True)
    hf64 = hf_in_float64(hf64)
    tokens = case.tokens()
    with torch.no_grad():
        hidden = hf64.model(tokens).last_hidden_state
        oracle, hf_out = hf64.lm_head(hidden), hf32(tokens).logits
    _check_float64(_logits(_build(impl, case, weights, torch.float64), tokens), oracle, "logits vs HF", case)
    ours = _logits(_build(reference, case, weights, torch.float32), tokens)
    worse = max((hf_out, ours), key=lambda r: float((r.double() - oracle).abs().max()))
    assert_close_to_oracle(_logits(model32, tokens), worse, oracle, name="float32 logits vs HF",
                           inputs=dict(case=case, tokens=tokens),
                           floor_from=logit_magnitude(hidden, weights["lm_head.weight"]))


def test_loads_hf_checkpoint_and_hf_loads_ours(impl, reference, tmp_path):
    """A safetensors checkpoint written by HF's save_pretrained loads with load_weights and gives
    the logits of the same weights loaded directly (test_matches_hf_llama then ties those to HF's);
    a file written by save_weights loads into HF with every name matched and HF's own logits."""
    impl.get("load_weights"), impl.get("save_weights")
    pytest.importorskip("transformers", reason="transformers (a test extra) is not installed")
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM

    case = ModelCase(80, 32, 2, 4, 2, None, 64, 10000.0, 1e-5, 16, 2, 12, "float32", 5)
    weights = _reference_weights(reference, case)
    hf_config = hf_llama_config(case.config(reference.get("ModelConfig")))
    hf = LlamaForCausalLM(hf_config).eval()
    hf.load_state_dict(weights, strict=True)
    hf.save_pretrained(tmp_path / "hf", safe_serialization=True)
    model = impl.get("Transformer")(case.config(impl.get("ModelConfig")), seed=case.seed + 1)
    impl.get("load_weights")(model, tmp_path / "hf" / "model.safetensors")
    tokens = case.tokens()
    expected = _logits(_build(impl, case, weights, torch.float32), tokens)
    assert torch.equal(_logits(model, tokens), expected), "logits after loading HF's checkpoint differ"
    impl.get("save_weights")(model, tmp_path / "ours.safetensors")
    hf2 = LlamaForCausalLM(hf_config).eval()
    hf2.load_state_dict(load_file(str(tmp_path / "ours.safetensors")), strict=True)
    with torch.no_grad():
        assert torch.equal(hf2(tokens).logits, hf(tokens).logits), "HF gives other logits from our file"


# --- metamorphic -------------------------------------------------------------------------------
# prefills then a one-token decode that fills the cache exactly
@example(case=ModelCase(64, 32, 2, 4, 2, None, None, 10000.0, 1e-5, 12, 1, 12, "float32", 1), cuts=[1, 11]).via(
    "mutant:cache_full_rejected mutant:decode_position_off_by_one")
@given(case=model_cases(dtypes=("float32", "float64"), max_seq=20), cuts=st.lists(st.integers(1, 19), max_size=4))
def test_cached_chunks_equal_whole_forward(impl, reference, device, case, cuts):
    """Running the tokens through a KV cache in pieces (a prefill, then further prefills or
    one-token decodes) gives the logits of one forward over the whole sequence: the RoPE positions
    of each piece start at the cache's length and every piece sees all earlier K/V. A cache of
    max_seq_len tokens takes exactly max_seq_len tokens (the pinned case fills it)."""
    impl.get("Transformer")
    weights = _reference_weights(reference, case)
    tokens = case.tokens(device)
    bounds = sorted({c for c in cuts if c < case.seq_len} | {0, case.seq_len})
    model = _build(impl, case, weights, case.dtype, device)
    cache = model.new_cache(case.batch, case.max_seq_len)
    pieces = [_logits(model, tokens[:, a:b], cache) for a, b in zip(bounds, bounds[1:])]
    chunked, whole = torch.cat(pieces, dim=1), _logits(model, tokens)
    if case.dtype == "float64":
        torch.testing.assert_close(chunked, whole, rtol=0, atol=FLOAT64_ATOL)
        return
    oracle = _logits(_build(reference, case, weights, torch.float64, device), tokens)
    ref = _logits(_build(reference, case, weights, case.dtype, device), tokens)
    assert_metamorphic(chunked, whole, ref, oracle, name=f"cached pieces {bounds} vs whole forward",
                       inputs=dict(case=case, bounds=bounds))


@given(case=model_cases(dtypes=("float64",), max_seq=12, max_batch=3), data=st.data())
def test_batch_rows_are_independent(impl, reference, device, case, data):
    """Each row's logits equal that row run alone, and permuting the batch permutes the logits
    (float64, to 1e-10: any mixing of rows shows far above rounding)."""
    impl.get("Transformer")
    model = _build(impl, case, _reference_weights(reference, case), torch.float64, device)
    tokens = case.tokens(device)
    perm = torch.tensor(data.draw(st.permutations(range(case.batch)), label="perm"))
    batched = _logits(model, tokens).cpu()
    alone = torch.cat([_logits(model, tokens[i:i + 1]) for i in range(case.batch)]).cpu()
    torch.testing.assert_close(alone, batched, rtol=0, atol=FLOAT64_ATOL, msg=lambda m: f"rows alone vs batched:\n{m}")
    torch.testing.assert_close(_logits(model, tokens[perm]).cpu(), batched[perm], rtol=0, atol=FLOAT64_ATOL,
                               msg=lambda m: f"permuted batch {perm.tolist()}:\n{m}")


# --- the pluggable attention -------------------------------------------------------------------
@given(case=model_cases(max_seq=12))
def test_attention_is_pluggable_and_gets_unrepeated_kv(impl, reference, case):
    """Every layer calls the ``attention`` callable once per forward with q (batch, n_heads, seq,
    head_dim) and K/V un-repeated (batch, n_kv_heads, cached+seq, head_dim), causal=True, no
    window, and its output is used as is (a recording wrapper around the reference attention gives
    the logits of the reference attention passed directly)."""
    impl.get("Transformer")
    ref_attention = reference.of("attention").get("attention")
    calls = []

    def recording(q, k, v, *, causal, window, scale):
        calls.append((tuple(q.shape), tuple(k.shape), tuple(v.shape), causal, window, scale))
        return ref_attention(q, k, v, causal=causal, window=window, scale=scale)

    weights = _reference_weights(reference, case)
    cfg = case.config(impl.get("ModelConfig"))
    make = impl.get("Transformer")
    plain = make(cfg, seed=case.seed, attention=ref_attention)
    plain.load_state_dict(weights)
    recorded = make(cfg, seed=case.seed, attention=recording)
    recorded.load_state_dict(weights)
    assert set(recorded.state_dict()) == set(weights), "the attention callable leaked into state_dict"
    tokens = case.tokens()
    cache = recorded.new_cache(case.batch, case.max_seq_len)
    first = tokens[:, :-1] if case.seq_len > 1 else tokens
    _logits(recorded, first, cache)
    d, n = cfg.head_dim, first.shape[1]

    def check_calls(q_len, kv_len):
        kv = (case.batch, case.n_kv_heads, kv_len, d)
        want = [((case.batch, case.n_heads, q_len, d), kv, kv, True, None)] * case.n_layers
        got = [c[:5] for c in calls]
        assert got == want, f"attention calls (q, k, v shapes, causal, window) {got}, expected {want}"
        assert all(c[5] is None or abs(c[5] - d ** -0.5) < 1e-12 for c in calls), f"scale {calls[0][5]}"
        calls.clear()

    check_calls(n, n)
    if case.seq_len > 1:
        _logits(recorded, tokens[:, -1:], cache)
        check_calls(1, case.seq_len)
    assert torch.equal(_logits(recorded, tokens), _logits(plain, tokens)), "the callable's output is not used as is"


def test_other_attention_implementations_are_drop_ins(impl, reference):
    """The reference's tiled (online-softmax) attention and both bundled FlashAttention nn.Modules
    (reference/flash_attention.py, optimized/flash_attention.py: the bundled modules themselves,
    whatever implementation is under test) plug in as ``attention=`` and give the reference
    attention's logits within the tolerance rule."""
    impl.get("Transformer")
    tiled = reference.of("attention").get("attention_tiled")
    drop_ins = {
        "reference attention_tiled": lambda q, k, v, *, causal, window, scale: tiled(
            q, k, v, causal=causal, window=window, scale=scale, block_q=4, block_k=5),
        "reference FlashAttention": reference.of("flash_attention").get("FlashAttention")(),
        "optimized FlashAttention": importlib.import_module("optimized.flash_attention").FlashAttention(),
    }
    case = ModelCase(64, 32, 2, 4, 2, None, None, 10000.0, 1e-5, 16, 2, 10, "float32", 2)
    weights = _reference_weights(reference, case)
    cfg = case.config(impl.get("ModelConfig"))
    tokens = case.tokens()
    oracle, magnitude = _oracle(reference, case, weights, tokens)
    ref = _logits(_build(reference, case, weights, torch.float32), tokens)
    for label, attention in drop_ins.items():
        model = impl.get("Transformer")(cfg, seed=0, attention=attention)
        model.load_state_dict(weights, strict=True)
        assert_close_to_oracle(_logits(model, tokens), ref, oracle, name=f"logits with {label}",
                               floor_from=magnitude)


# --- weights, init, bookkeeping ----------------------------------------------------------------
def _hf_names(c) -> dict[str, tuple[int, ...]]:
    names = {"model.embed_tokens.weight": (c.vocab_size, c.dim), "model.norm.weight": (c.dim,),
             "lm_head.weight": (c.vocab_size, c.dim)}
    for i in range(c.n_layers):
        p = f"model.layers.{i}."
        names.update({
            p + "self_attn.q_proj.weight": (c.n_heads * c.head_dim, c.dim),
            p + "self_attn.k_proj.weight": (c.n_kv_heads * c.head_dim, c.dim),
            p + "self_attn.v_proj.weight": (c.n_kv_heads * c.head_dim, c.dim),
            p + "self_attn.o_proj.weight": (c.dim, c.n_heads * c.head_dim),
            p + "mlp.gate_proj.weight": (c.hidden_dim, c.dim),
            p + "mlp.up_proj.weight": (c.hidden_dim, c.dim),
            p + "mlp.down_proj.weight": (c.dim, c.hidden_dim),
            p + "input_layernorm.weight": (c.dim,), p + "post_attention_layernorm.weight": (c.dim,)})
    return names


@given(case=model_cases(dtypes=("float32", "bfloat16", "float64")))
def test_seeded_init_hf_names_and_global_rng(impl, case):
    """Same seed -> identical weights, another seed -> different ones, the global RNG untouched;
    the state_dict holds exactly HF's names and shapes, in the config's dtype; head_dim defaults
    to dim // n_heads."""
    make, cfg = impl.get("Transformer"), case.config(impl.get("ModelConfig"))
    assert cfg.head_dim == (case.head_dim or case.dim // case.n_heads)
    rng_before = torch.random.get_rng_state()
    a = make(cfg, seed=case.seed).state_dict()
    b = make(cfg, seed=case.seed).state_dict()
    c = make(cfg, seed=case.seed + 1).state_dict()
    assert torch.equal(torch.random.get_rng_state(), rng_before), "init touched the global RNG"
    assert {n: tuple(t.shape) for n, t in a.items()} == _hf_names(cfg)
    assert all(t.dtype == cfg.dtype for t in a.values())
    assert all(torch.equal(a[n], b[n]) for n in a), "same seed, different weights"
    assert all(not torch.equal(a[n], c[n]) for n in a), "a parameter did not change with the seed"


@pytest.mark.choice("the weights of a seed: reference.model.seeded_weights' draws and scales")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_seeded_weights_are_the_references(impl, reference, dtype):
    """``Transformer(config, seed)`` holds the reference's weights of that seed (module doc: one
    ``torch.Generator(seed)``, float32 draws in ``state_dict`` order; norm weights 1 + 0.1 N(0, 1),
    the embedding N(0, 1), each projection N(0, 1) / sqrt(fan_in), then cast), to one unit in the
    last place of ``dtype``. The other tests load the reference's weights by name, so they pass
    whatever an implementation draws: only this one sees another scale (fan_out for fan_in, a
    scaled embedding), another order or another generator. A GQA model with hidden_dim != dim, so
    that fan_in != fan_out for every projection but q_proj."""
    case = ModelCase(96, 32, 2, 4, 2, None, 48, 10000.0, 1e-5, 8, 1, 4, dtype, 0)
    for seed in (0, 7):
        ours = impl.get("Transformer")(case.config(impl.get("ModelConfig")), seed=seed).state_dict()
        want = reference.get("Transformer")(case.config(reference.get("ModelConfig")), seed=seed).state_dict()
        assert set(ours) == set(want), f"parameter names {sorted(set(ours) ^ set(want))}"
        for name, t in want.items():
            torch.testing.assert_close(ours[name].float(), t.float(), rtol=torch.finfo(t.dtype).eps, atol=0,
                                       msg=lambda m: f"seed {seed}, {name} ({dtype}) is not the reference's:\n{m}")


def test_save_load_roundtrip(impl, tmp_path):
    """save_weights then load_weights into a model of another seed reproduces weights and logits
    exactly; the file holds exactly HF's names."""
    make, save, load = impl.get("Transformer"), impl.get("save_weights"), impl.get("load_weights")
    case = ModelCase(64, 32, 2, 4, 2, None, None, 10000.0, 1e-5, 16, 1, 8, "float32", 9)
    cfg = case.config(impl.get("ModelConfig"))
    src, dst = make(cfg, seed=1), make(cfg, seed=2)
    save(src, tmp_path / "w.safetensors")
    assert load(dst, tmp_path / "w.safetensors") is dst, "load_weights must return the model"
    assert all(torch.equal(t, src.state_dict()[n]) for n, t in dst.state_dict().items())
    tokens = case.tokens()
    assert torch.equal(_logits(dst, tokens), _logits(src, tokens))
    from safetensors.torch import load_file
    assert set(load_file(str(tmp_path / "w.safetensors"))) == set(_hf_names(cfg))


# --- omitted arguments == their documented defaults ---------------------------------------------
CONFIG_DEFAULTS = dict(vocab_size=128, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=None,
                       hidden_dim=None, rope_theta=10000.0, norm_eps=1e-5, max_seq_len=128, dtype=torch.float32)


def test_config_defaults(impl):
    """Every ModelConfig field has the documented default: omitting it (alone, or all of them)
    equals passing the default; the derived ones are head_dim = dim // n_heads = 16 and
    hidden_dim = 176 for the default dim 64."""
    cls = impl.get("ModelConfig")
    assert cls() == cls(**CONFIG_DEFAULTS), f"ModelConfig() = {cls()}"
    given_ = dict(vocab_size=64, dim=32, n_layers=1, n_heads=4, n_kv_heads=2, head_dim=8, hidden_dim=40,
                  rope_theta=100.0, norm_eps=1e-2, max_seq_len=16, dtype=torch.float64)
    for field, default in CONFIG_DEFAULTS.items():
        rest = {k: v for k, v in given_.items() if k != field}
        assert cls(**rest) == cls(**rest, **{field: default}), f"omitting {field} != passing {field}={default!r}"
    assert (cls().head_dim, cls().hidden_dim) == (16, 176), (cls().head_dim, cls().hidden_dim)


@given(dim=st.integers(1, 8192))
def test_hidden_dim_default_is_llamas_rule(impl, dim):
    """The default SwiGLU width is 8/3 x dim rounded up to a multiple of 16 (exact integer rule)."""
    cfg = impl.get("ModelConfig")(dim=dim, n_heads=1, n_kv_heads=1, head_dim=2)
    assert cfg.hidden_dim == 16 * -(-8 * dim // 48), f"dim {dim}: hidden_dim {cfg.hidden_dim}"


def test_transformer_and_forward_defaults(impl, reference):
    """Omitted arguments equal their documented defaults: ``Transformer(config)`` holds the weights
    of ``seed=0``; without ``attention`` the model computes the reference attention's logits
    (float64, 1e-10); ``forward(tokens)`` is ``forward(tokens, cache=None)``; ``new_cache(batch)``
    holds the config's max_seq_len tokens (160 here, not the dataclass default 128)."""
    make, config = impl.get("Transformer"), impl.get("ModelConfig")
    case = ModelCase(64, 32, 1, 4, 2, None, None, 10000.0, 1e-5, 160, 1, 160, "float64", 0)
    cfg = case.config(config)
    default = make(cfg)
    explicit = make(cfg, seed=0, attention=reference.of("attention").get("attention"))
    sd = explicit.state_dict()
    assert all(torch.equal(t, sd[n]) for n, t in default.state_dict().items()), "Transformer(config) != seed=0"
    tokens = case.tokens()
    whole = _logits(default, tokens)
    assert torch.equal(default(tokens, cache=None).detach(), whole), "forward(tokens) != forward(tokens, cache=None)"
    _check_float64(whole, _logits(explicit, tokens).cpu(), "no attention= vs the reference attention", case)
    cache = default.new_cache(case.batch)
    assert cache.seq_len == 0, f"a new cache holds {cache.seq_len} tokens"
    assert getattr(cache, "max_seq_len", cfg.max_seq_len) == cfg.max_seq_len, f"cache max_seq_len {cache.max_seq_len}"
    pieces = [_logits(default, tokens[:, :-1], cache), _logits(default, tokens[:, -1:], cache)]
    assert cache.seq_len == cfg.max_seq_len, f"cache holds {cache.seq_len} after {cfg.max_seq_len} tokens"
    _check_float64(torch.cat(pieces, dim=1), whole.cpu(), "through new_cache(batch) vs whole forward", case)


def test_fresh_result_per_call_and_tokens_not_mutated(impl):
    """Two calls with different tokens give their own logits; the tokens are not modified."""
    case = ModelCase(64, 32, 1, 4, 2, None, None, 10000.0, 1e-5, 16, 2, 6, "float32", 4)
    model = impl.get("Transformer")(case.config(impl.get("ModelConfig")), seed=4)
    t1, t2 = case.tokens(seed_offset=1), case.tokens(seed_offset=2)
    keep = t1.clone()
    a, b = _logits(model, t1), _logits(model, t2)
    assert torch.equal(t1, keep), "forward modified its tokens"
    assert not torch.equal(a, b)
    assert torch.equal(_logits(model, t1), a), "forward is not deterministic"
    assert a.dtype == torch.float32 and a.shape == (2, 6, 64)


# --- bad input -----------------------------------------------------------------------------------
def _bits(t) -> bytes:
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _weights_state(model) -> dict:
    return {n: _bits(t) for n, t in model.state_dict().items()}


def _cache_state(cache) -> tuple:
    """What a rejected call must not change: the length and the stored K/V (when the cache exposes
    them as ``k``/``v`` tensors, as reference.kv_bytes.KVCache does)."""
    kv = tuple(_bits(t) for t in (getattr(cache, "k", None), getattr(cache, "v", None)) if isinstance(t, torch.Tensor))
    return cache.seq_len, kv


def _ids(*rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long)


_BAD_CASE = ModelCase(64, 32, 1, 4, 2, None, None, 10000.0, 1e-5, 16, 1, 2, "float32", 0)
# The caches of the forward table, by name: (max_seq_len, tokens already in it, model dtype,
# model layers). The model's max_seq_len is 16 and it has one layer, so "15 of 32" has room in
# the cache but not in the model, and "2 layers" comes from another model.
CACHES = {"1 of 8": (8, 1, "float32", 1), "2 of 4": (4, 2, "float32", 1), "15 of 32": (32, 15, "float32", 1),
          "float64 1 of 8": (8, 1, "float64", 1), "2 layers 1 of 8": (8, 1, "float32", 2)}
FORWARD_VALID = dict(tokens=_ids([1, 2]), cache="1 of 8")
FORWARD_BAD = [
    Bad("float tokens", dict(tokens=torch.zeros(1, 4)), TypeError, ("tokens",)),
    Bad("bool tokens", dict(tokens=torch.ones(1, 4, dtype=torch.bool)), TypeError, ("tokens",)),
    Bad("list tokens", dict(tokens=[[1, 2]]), TypeError, ("tokens",)),
    Bad("rank 1", dict(tokens=torch.zeros(4, dtype=torch.long)), ValueError, ("tokens",)),
    Bad("rank 3", dict(tokens=torch.zeros(1, 2, 4, dtype=torch.long)), ValueError, ("tokens",)),
    Bad("empty tokens", dict(tokens=torch.zeros(1, 0, dtype=torch.long)), ValueError, ("tokens",)),
    Bad("id == vocab", dict(tokens=_ids([1, 64])), ValueError, ("tokens",)),
    Bad("id < 0", dict(tokens=_ids([-1, 3])), ValueError, ("tokens",)),
    Bad("past max_seq_len", dict(tokens=torch.zeros(1, 17, dtype=torch.long), cache=None), ValueError,
        ("tokens", "max_seq_len")),
    Bad("past max_seq_len after cache", dict(tokens=_ids([1, 2]), cache="15 of 32"), ValueError,
        ("tokens", "max_seq_len")),
    Bad("cache full", dict(tokens=_ids([1, 2, 3]), cache="2 of 4"), ValueError, ("cache",)),
    Bad("cache batch", dict(tokens=_ids([1], [2])), ValueError, ("cache",)),
    Bad("cache dtype", dict(cache="float64 1 of 8"), ValueError, ("cache",)),
    Bad("cache of another model", dict(cache="2 layers 1 of 8"), ValueError, ("cache",)),
    Bad("cache not from new_cache", dict(cache=[1, 2]), TypeError, ("cache",)),
]


@bad_cases(FORWARD_BAD)
def test_rejects_bad_input(impl, bad):
    """Bad tokens (not an integer (batch, seq) tensor, empty, ids outside the vocabulary, positions
    past max_seq_len) or a bad cache (another batch or dtype, too full for the tokens) raise
    TypeError/ValueError naming the argument; no cache changes (every cache of the table is
    compared before and after)."""
    make, config = impl.get("Transformer"), impl.get("ModelConfig")
    model = make(_BAD_CASE.config(config), seed=0)
    caches = {}
    for name, (size, fill, dtype, layers) in CACHES.items():
        same = dtype == _BAD_CASE.dtype and layers == _BAD_CASE.n_layers
        owner = model if same else make(dataclasses.replace(_BAD_CASE, n_layers=layers).config(config, dtype), seed=0)
        caches[name] = owner.new_cache(1, size)
        _logits(owner, torch.ones(1, fill, dtype=torch.long), caches[name])

    def forward(tokens, cache):
        return model(tokens, cache=caches[cache] if isinstance(cache, str) else cache)

    assert_rejects(forward, FORWARD_VALID, bad,
                   state=lambda: {name: _cache_state(c) for name, c in caches.items()})


def test_rejects_a_cache_too_full_in_any_layer(impl):
    """A cache is too full for ``tokens`` when any of its layers lacks room for them, not only layer
    0 (whose count is ``seq_len``): a reference ``KVCache``'s layers can be filled one at a time
    through its own ``append``. forward then raises ValueError naming ``cache`` and changes no
    layer (neither the stored K/V nor any layer's length). Skipped for a cache without that
    per-layer ``append``/``lengths`` interface (there every forward fills all layers alike)."""
    make, config = impl.get("Transformer"), impl.get("ModelConfig")
    case = dataclasses.replace(_BAD_CASE, n_layers=2)
    model = make(case.config(config), seed=0)
    cache = model.new_cache(1, 4)
    if not (callable(getattr(cache, "append", None)) and isinstance(getattr(cache, "lengths", None), list)):
        pytest.skip("the cache has no per-layer append/lengths")
    _logits(model, _ids([1]), cache)                      # every layer holds 1 of 4
    kv = torch.ones(1, case.n_kv_heads, 2, case.head_dim or case.dim // case.n_heads, dtype=torch.float32)
    cache.append(1, kv, kv)                               # the last layer holds 3 of 4: no room for 2
    before = (_cache_state(cache), list(cache.lengths))
    with pytest.raises(ValueError, match="cache"):
        _logits(model, _ids([1, 2]), cache)
    assert (_cache_state(cache), list(cache.lengths)) == before, "a rejected forward changed the cache"


CONFIG_VALID = dict(vocab_size=64, dim=32, n_layers=1, n_heads=4, n_kv_heads=2, max_seq_len=16)
CONFIG_BAD = [
    Bad("n_kv_heads not dividing n_heads", dict(n_heads=4, n_kv_heads=3), ValueError, ("n_kv_heads",)),
    Bad("dim not a multiple of n_heads", dict(dim=30, n_heads=4), ValueError, ("head_dim",)),
    # 34 // 4 = 8 is even: only the divisibility rule rejects it (30 // 4 = 7 is odd anyway)
    Bad("dim not a multiple of n_heads, even quotient", dict(dim=34, n_heads=4), ValueError, ("head_dim",)),
    Bad("odd head_dim", dict(head_dim=7), ValueError, ("head_dim",)),
    Bad("zero vocab_size", dict(vocab_size=0), ValueError, ("vocab_size",)),
    Bad("negative max_seq_len", dict(max_seq_len=-1), ValueError, ("max_seq_len",)),
    Bad("float n_layers", dict(n_layers=1.5), TypeError, ("n_layers",)),
    Bad("bool n_heads", dict(n_heads=True), TypeError, ("n_heads",)),
    Bad("zero hidden_dim", dict(hidden_dim=0), ValueError, ("hidden_dim",)),
    Bad("negative norm_eps", dict(norm_eps=-1e-5), ValueError, ("norm_eps",)),
    Bad("string rope_theta", dict(rope_theta="10000"), TypeError, ("rope_theta",)),
    Bad("integer dtype", dict(dtype=torch.int32), TypeError, ("dtype",)),
    # every other validated field, and the boundaries of the legal ranges
    Bad("float vocab_size", dict(vocab_size=64.0), TypeError, ("vocab_size",)),
    Bad("zero dim", dict(dim=0), ValueError, ("dim",)),
    Bad("zero n_layers", dict(n_layers=0), ValueError, ("n_layers",)),
    Bad("zero n_heads", dict(n_heads=0), ValueError, ("n_heads",)),
    Bad("zero n_kv_heads", dict(n_kv_heads=0), ValueError, ("n_kv_heads",)),
    Bad("zero head_dim", dict(head_dim=0), ValueError, ("head_dim",)),
    Bad("float head_dim", dict(head_dim=8.0), TypeError, ("head_dim",)),
    Bad("float hidden_dim", dict(hidden_dim=64.0), TypeError, ("hidden_dim",)),
    Bad("zero max_seq_len", dict(max_seq_len=0), ValueError, ("max_seq_len",)),
    Bad("rope_theta 1", dict(rope_theta=1.0), ValueError, ("rope_theta",)),
    Bad("rope_theta below 1", dict(rope_theta=0.5), ValueError, ("rope_theta",)),
    Bad("nan rope_theta", dict(rope_theta=float("nan")), ValueError, ("rope_theta",)),
    Bad("infinite norm_eps", dict(norm_eps=float("inf")), ValueError, ("norm_eps",)),
    Bad("string norm_eps", dict(norm_eps="1e-5"), TypeError, ("norm_eps",)),
    Bad("string dtype", dict(dtype="float32"), TypeError, ("dtype",)),
]


@bad_cases(CONFIG_BAD)
def test_config_rejects_bad_fields(impl, bad):
    """ModelConfig rejects inconsistent or ill-typed fields, naming the field."""
    assert_rejects(impl.get("ModelConfig"), CONFIG_VALID, bad)


CONFIG_EDGES = [dict(rope_theta=1.0 + 1e-9), dict(rope_theta=1.5), dict(rope_theta=2), dict(rope_theta=2.5),
                dict(norm_eps=0.0), dict(norm_eps=0), dict(vocab_size=1), dict(n_layers=1), dict(max_seq_len=1),
                dict(hidden_dim=1), dict(head_dim=2), dict(dim=30, n_heads=4, head_dim=8), dict(dim=1, head_dim=2),
                dict(n_kv_heads=4), dict(n_kv_heads=1), dict(n_heads=1, n_kv_heads=1)]


def test_config_accepts_the_edges_of_its_legal_ranges(impl):
    """Every value just inside a legal range is accepted and kept as given: rope_theta is any
    finite real > 1 (1 + 1e-9, 1.5, the int 2), norm_eps >= 0 (0 is legal), sizes >= 1, an even
    head_dim >= 2, n_kv_heads anything dividing n_heads (n_heads itself, 1), and a dim that is not a
    multiple of n_heads when head_dim is given."""
    cls = impl.get("ModelConfig")
    for change in CONFIG_EDGES:
        cfg = cls(**{**CONFIG_VALID, **change})
        for field, value in change.items():
            assert getattr(cfg, field) == value, f"ModelConfig({change}).{field} = {getattr(cfg, field)!r}"


TRANSFORMER_BAD = [
    Bad("config not a ModelConfig", dict(config=dict(CONFIG_VALID)), TypeError, ("config",)),
    Bad("float seed", dict(seed=1.5), TypeError, ("seed",)),
    Bad("bool seed", dict(seed=True), TypeError, ("seed",)),
    Bad("attention not callable", dict(attention=3), TypeError, ("attention",)),
]


@bad_cases(TRANSFORMER_BAD)
def test_transformer_rejects_bad_arguments(impl, bad):
    """Transformer rejects a config that is not a ModelConfig, a non-int seed and a non-callable
    attention with TypeError naming the argument."""
    cfg = impl.get("ModelConfig")(**CONFIG_VALID)
    assert_rejects(impl.get("Transformer"), dict(config=cfg, seed=0, attention=None), bad)


NEW_CACHE_BAD = [
    Bad("zero batch", dict(batch=0), ValueError, ("batch",)),
    Bad("float batch", dict(batch=1.0), TypeError, ("batch",)),
    Bad("zero max_seq_len", dict(max_seq_len=0), ValueError, ("max_seq_len",)),
    Bad("float max_seq_len", dict(max_seq_len=8.0), TypeError, ("max_seq_len",)),
]


@bad_cases(NEW_CACHE_BAD)
def test_new_cache_rejects_bad_arguments(impl, bad):
    """new_cache rejects a batch or max_seq_len that is not a positive int, naming it."""
    model = impl.get("Transformer")(_BAD_CASE.config(impl.get("ModelConfig")), seed=0)
    assert_rejects(model.new_cache, dict(batch=1, max_seq_len=8), bad)


def _broken_file(which: str):
    """A change that points ``path`` at a broken copy of the valid file (written by the test)."""
    return lambda kw: {**kw, "path": kw["path"].with_name(f"{which}.safetensors")}


LOAD_BAD = [
    Bad("missing name", _broken_file("missing"), ValueError, ("path",)),
    Bad("unexpected name", _broken_file("unexpected"), ValueError, ("path",)),
    Bad("wrong shape", _broken_file("shape"), ValueError, ("path",)),
]


@bad_cases(LOAD_BAD)
def test_load_weights_rejects_bad_files(impl, tmp_path, bad):
    """A file with a missing or unexpected name or a wrong shape is rejected with ValueError naming
    ``path``; the model keeps its weights."""
    make, save, load = impl.get("Transformer"), impl.get("save_weights"), impl.get("load_weights")
    from safetensors.torch import load_file, save_file
    cfg = _BAD_CASE.config(impl.get("ModelConfig"))
    save(make(cfg, seed=1), tmp_path / "w.safetensors")
    tensors = load_file(str(tmp_path / "w.safetensors"))
    save_file({n: t for n, t in tensors.items() if n != "model.norm.weight"}, str(tmp_path / "missing.safetensors"))
    save_file({**tensors, "model.extra.weight": torch.zeros(2)}, str(tmp_path / "unexpected.safetensors"))
    save_file({**tensors, "lm_head.weight": tensors["lm_head.weight"][:-1].contiguous()},
              str(tmp_path / "shape.safetensors"))
    model = make(cfg, seed=3)
    assert_rejects(load, dict(model=model, path=tmp_path / "w.safetensors"), bad,
                   state=lambda: _weights_state(model))
