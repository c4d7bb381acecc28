"""Chunked prefill at the model level (course 04.05): a prompt prefilled in chunks gives the K/V and
the logits of one whole prefill.

The model is always the reference Transformer (the model concept checks models); what is under test
is the chunking. Tolerance rule (conformance/tolerance.py), as in spec_tests/generate: the oracle
is the whole prefill of the float64 model (same float32-drawn weights), the reference run is the
whole prefill of the same low-precision model, so an implementation's chunked result may be at
most 2 x the low-precision whole prefill's error away from the float64 truth, plus the dtype's
rounding floor. In float64 the chunked and whole results agree to 1e-10.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.tolerance import assert_close_to_oracle
from spec_tests.chunked_prefill.strategies import PrefillCase, prefill_cases
from spec_tests.model.strategies import ModelCase

FLOAT64_ATOL = 1e-10


def _model(reference, mc: ModelCase, dtype):
    cfg = mc.config(reference.of("model").get("ModelConfig"), dtype)
    return reference.of("model").get("Transformer")(cfg, seed=mc.seed)


@torch.no_grad()
def _whole(model, tokens, prefix: int):
    """One whole prefill after the prefix: (logits of the prompt positions, the cache)."""
    cache = model.new_cache(tokens.shape[0])
    if prefix:
        model(tokens[:, :prefix], cache=cache)
    return model(tokens[:, prefix:], cache=cache), cache


@torch.no_grad()
def _chunked(impl, model, tokens, case: PrefillCase):
    """impl.chunked_prefill of the prompt, after the prefix was cached by one whole forward."""
    cache = None
    if case.prefix:
        cache = model.new_cache(tokens.shape[0])
        model(tokens[:, :case.prefix], cache=cache)
    return impl.get("chunked_prefill")(model, tokens[:, case.prefix:], case.chunk_size, cache)


def _check_shapes(case: PrefillCase, logits, cache, vocab, dtype):
    n, total = case.model.seq_len - case.prefix, case.model.seq_len
    assert tuple(logits.shape) == (case.model.batch, n, vocab), (
        f"logits shape {tuple(logits.shape)}, expected (batch, prompt positions, vocab) = {(case.model.batch, n, vocab)}")
    assert logits.dtype == dtype, f"logits dtype {logits.dtype}, expected the model's {dtype}"
    assert list(cache.lengths) == [total] * case.model.n_layers, (
        f"cache lengths {list(cache.lengths)} after {case.prefix} cached + {n} prefilled tokens, expected {total} per layer")


def _kv(cache, total: int):
    return cache.k[:, :, :, :total], cache.v[:, :, :, :total]


# A GQA prompt of 10 in chunks of 4 (ragged tail of 2) after no prefix; chunks of 3 after a prefix
# of 4 (positions must start at the cache length); a 1-token prompt; chunk > prompt.
_EXAMPLES = [
    PrefillCase(ModelCase(96, 48, 2, 6, 2, None, None, 10000.0, 1e-5, 16, 2, 10, "float32", 3), 4, 0),
    PrefillCase(ModelCase(80, 32, 2, 4, 2, 16, 40, 100.0, 1e-2, 12, 1, 11, "bfloat16", 11), 3, 4),
    PrefillCase(ModelCase(64, 32, 1, 4, 1, None, None, 500000.0, 1e-5, 4, 2, 1, "float16", 0), 1, 0),
    PrefillCase(ModelCase(64, 32, 1, 4, 2, None, None, 10000.0, 1e-5, 9, 1, 5, "float32", 2), 7, 0),
]


@example(case=_EXAMPLES[0]).via("mutant:drops_ragged_last_chunk mutant:chunk_positions_restart_at_zero")
@example(case=_EXAMPLES[1]).via("mutant:chunk_positions_restart_at_zero")
@example(case=_EXAMPLES[2]).via("boundary: a 1-token prompt (one chunk of 1)")
@example(case=_EXAMPLES[3]).via("boundary: a chunk longer than the prompt (one whole chunk)")
@given(case=prefill_cases(dtypes=("float32", "bfloat16", "float16")))
def test_chunked_equals_whole_prefill(impl, reference, case):
    """The logits of every prompt position and the K/V the chunked prefill writes equal one whole
    prefill's within the tolerance rule (oracle: the float64 whole prefill), for any chunk size,
    after any cached prefix; the cache then holds prefix + prompt positions in every layer."""
    dtype = getattr(torch, case.model.dtype)
    model = _model(reference, case.model, dtype)
    tokens = case.model.tokens()
    keep = tokens.clone()
    logits, cache = _chunked(impl, model, tokens, case)
    assert torch.equal(tokens, keep), "chunked_prefill modified tokens"
    _check_shapes(case, logits, cache, case.model.vocab_size, dtype)
    ref_logits, ref_cache = _whole(model, tokens, case.prefix)
    oracle_logits, oracle_cache = _whole(_model(reference, case.model, torch.float64), tokens, case.prefix)
    inputs = dict(case=case)
    assert_close_to_oracle(logits, ref_logits, oracle_logits, name="chunked logits vs float64 whole prefill", inputs=inputs)
    total = case.model.seq_len
    for name, got, ref, oracle in zip("KV", _kv(cache, total), _kv(ref_cache, total), _kv(oracle_cache, total)):
        assert_close_to_oracle(got, ref, oracle, name=f"chunked {name} cache vs float64 whole prefill", inputs=inputs)


@example(case=PrefillCase(ModelCase(96, 48, 2, 6, 2, None, None, 10000.0, 1e-5, 16, 2, 9, "float64", 5), 2, 3)).via(
    "mutant:chunk_positions_restart_at_zero")
@given(case=prefill_cases(dtypes=("float64",)))
def test_chunked_equals_whole_prefill_float64(impl, reference, case):
    """float64: the chunked logits and K/V equal the whole prefill's to 1e-10."""
    model = _model(reference, case.model, torch.float64)
    tokens = case.model.tokens()
    logits, cache = _chunked(impl, model, tokens, case)
    _check_shapes(case, logits, cache, case.model.vocab_size, torch.float64)
    want_logits, want_cache = _whole(model, tokens, case.prefix)
    torch.testing.assert_close(logits, want_logits, rtol=0, atol=FLOAT64_ATOL)
    for got, want in zip(_kv(cache, case.model.seq_len), _kv(want_cache, case.model.seq_len)):
        torch.testing.assert_close(got, want, rtol=0, atol=FLOAT64_ATOL)


def test_every_chunk_size_gives_the_same_prefill(impl, reference):
    """One prompt of 7 tokens (float64) in chunks of 1, 2, ..., 8: every chunk size gives the
    logits and K/V of the whole prefill (divisors, ragged tails, one chunk, a chunk past the end)."""
    mc = ModelCase(64, 32, 2, 4, 2, None, None, 10000.0, 1e-5, 12, 1, 7, "float64", 5)
    model = _model(reference, mc, torch.float64)
    tokens = mc.tokens()
    want_logits, want_cache = _whole(model, tokens, 0)
    for chunk in range(1, 9):
        logits, cache = impl.get("chunked_prefill")(model, tokens, chunk)
        torch.testing.assert_close(logits, want_logits, rtol=0, atol=FLOAT64_ATOL, msg=lambda m: f"chunk {chunk}: {m}")
        assert list(cache.lengths) == [7, 7], f"chunk {chunk}: cache lengths {list(cache.lengths)}"
        for got, want in zip(_kv(cache, 7), _kv(want_cache, 7)):
            torch.testing.assert_close(got, want, rtol=0, atol=FLOAT64_ATOL, msg=lambda m: f"chunk {chunk}: {m}")


@pytest.mark.choice("with no cache, chunked_prefill makes one of the model's max_seq_len")
def test_new_cache_has_the_models_length(impl, reference):
    """Without a cache, the returned cache is a new one of the model's max_seq_len."""
    mc = ModelCase(64, 32, 1, 4, 2, None, None, 10000.0, 1e-5, 10, 2, 3, "float32", 1)
    _, cache = impl.get("chunked_prefill")(_model(reference, mc, torch.float32), mc.tokens(), 2)
    assert cache.max_seq_len == 10, f"a new cache of max_seq_len {cache.max_seq_len}, expected the model's 10"


@given(chunk=st.integers(1, 6))
def test_prefill_then_decode_continues_the_sequence(impl, reference, chunk):
    """After a chunked prefill, a decode step on the returned cache gives the logits that the whole
    sequence (prompt + the token) gives at its last position (float64): the cache is usable as is."""
    mc = ModelCase(64, 32, 2, 4, 2, None, None, 10000.0, 1e-5, 12, 2, 5, "float64", 8)
    model, tokens = _model(reference, mc, torch.float64), mc.tokens()
    logits, cache = impl.get("chunked_prefill")(model, tokens, chunk)
    nxt = logits[:, -1].argmax(-1, keepdim=True)
    with torch.no_grad():
        step = model(nxt, cache=cache)[:, -1]
        want = model(torch.cat([tokens, nxt], dim=1))[:, -1]
    torch.testing.assert_close(step, want, rtol=0, atol=FLOAT64_ATOL)


# --- bad input ---------------------------------------------------------------------------------
_BAD_MODEL = ModelCase(64, 32, 1, 4, 2, None, None, 10000.0, 1e-5, 8, 1, 3, "float32", 0)


def _valid(reference):
    model = _model(reference, _BAD_MODEL, torch.float32)
    cache = model.new_cache(1)
    with torch.no_grad():
        model(torch.tensor([[5, 6]]), cache=cache)          # a prefix of 2 already cached
    return dict(model=model, tokens=torch.tensor([[1, 2, 3]]), chunk_size=2, cache=cache)


def _other_cache(**kw):
    def change(valid):
        cfg = valid["model"].config
        from reference.kv_bytes import KVCache
        shape = dict(layers=cfg.n_layers, batch=1, kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim,
                     max_seq_len=cfg.max_seq_len, dtype=torch.float32)
        return {**valid, "cache": KVCache(**{**shape, **kw})}
    return change


def _roomier_cache(valid):
    """The valid call with a cache that has room past the model's max_seq_len (``new_cache(batch,
    max_seq_len)`` allows it), holding the same prefix of 2, and a prompt of 7: 2 + 7 > the model's
    8, found only in the last chunk, so the check against the model must be made up front."""
    model = valid["model"]
    cache = model.new_cache(1, model.config.max_seq_len + 8)
    with torch.no_grad():
        model(torch.tensor([[5, 6]]), cache=cache)
    return {**valid, "cache": cache, "tokens": torch.ones(1, 7, dtype=torch.long)}


BAD = [
    Bad("chunk_size 0", dict(chunk_size=0), ValueError, ("chunk_size",)),
    Bad("chunk_size -1", dict(chunk_size=-1), ValueError, ("chunk_size",)),
    Bad("float chunk_size", dict(chunk_size=2.0), TypeError, ("chunk_size",)),
    Bad("bool chunk_size", dict(chunk_size=True), TypeError, ("chunk_size",)),
    Bad("None chunk_size", dict(chunk_size=None), TypeError, ("chunk_size",)),
    Bad("float tokens", dict(tokens=torch.zeros(1, 3)), TypeError, ("tokens",)),
    Bad("bool tokens", dict(tokens=torch.zeros(1, 3, dtype=torch.bool)), TypeError, ("tokens",)),
    Bad("complex tokens", dict(tokens=torch.zeros(1, 3, dtype=torch.complex64)), TypeError, ("tokens",)),
    Bad("list tokens", dict(tokens=[[1, 2, 3]]), TypeError, ("tokens",)),
    Bad("rank 1 tokens", dict(tokens=torch.tensor([1, 2, 3])), ValueError, ("tokens",)),
    Bad("empty prompt", dict(tokens=torch.zeros(1, 0, dtype=torch.long)), ValueError, ("tokens",)),
    Bad("no rows", dict(tokens=torch.zeros(0, 3, dtype=torch.long), cache=None), ValueError, ("tokens",)),
    # a bad id in the last chunk: a check chunk by chunk has appended the first chunk by then
    Bad("id == vocab in the last chunk", dict(tokens=torch.tensor([[1, 2, 64]])), ValueError, ("tokens",)),
    Bad("id -1 in the last chunk", dict(tokens=torch.tensor([[1, 2, -1]])), ValueError, ("tokens",)),
    # 2 cached + 7 > max_seq_len 8, only the last chunk overflows
    Bad("prompt overflows the cache", dict(tokens=torch.ones(1, 7, dtype=torch.long)), ValueError, ("cache",)),
    Bad("prompt overflows max_seq_len", dict(tokens=torch.ones(1, 9, dtype=torch.long), cache=None), ValueError,
        ("tokens", "max_seq_len")),
    Bad("prompt overflows the model, not the cache", _roomier_cache, ValueError, ("tokens", "max_seq_len")),
    Bad("cache not a KVCache", dict(cache="cache"), TypeError, ("cache",)),
    Bad("cache of another batch", _other_cache(batch=2), ValueError, ("cache",)),
    Bad("cache of another dtype", _other_cache(dtype=torch.float64), ValueError, ("cache",)),
]


def _cache_state(kwargs):
    cache = kwargs["cache"]
    if not hasattr(cache, "lengths"):
        return lambda: None
    return lambda: (list(cache.lengths), cache.k.numpy().tobytes(), cache.v.numpy().tobytes())


@bad_cases(BAD)
def test_rejects_bad_input(impl, reference, bad):
    """Malformed input raises TypeError/ValueError naming the argument, before any chunk runs: the
    cache it was given (holding a prefix) and the tokens are unchanged."""
    kwargs = bad.apply(_valid(reference))
    assert_rejects(impl.get("chunked_prefill"), kwargs, Bad(bad.id, {}, bad.error, bad.words),
                   state=_cache_state(kwargs))
