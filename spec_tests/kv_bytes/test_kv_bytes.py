"""KV-cache bytes (course 01.08, 03.03, 03.05): the formula equals what a real cache allocates."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.loader import NotImplementedInImpl


DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float8_e4m3fn, torch.float64]
configs = st.fixed_dictionaries(dict(
    layers=st.integers(1, 4), kv_heads=st.integers(1, 4), head_dim=st.sampled_from([8, 16, 24]),
    batch=st.integers(1, 3), dtype=st.sampled_from(DTYPES)))


@given(cfg=configs, max_seq_len=st.integers(1, 64))
def test_formula_equals_allocated_bytes(impl, reference, cfg, max_seq_len):
    """kv_cache_bytes(...) == nbytes of a KVCache sized for max_seq_len tokens (the
    implementation's own cache class if it has one, else the reference's)."""
    try:
        cache = impl.get("kv_bytes.KVCache")(max_seq_len=max_seq_len, **cfg)
    except NotImplementedInImpl:
        cache = reference.get("kv_bytes.KVCache")(max_seq_len=max_seq_len, **cfg)
    expected = impl.get("kv_bytes.kv_cache_bytes")(seq_len=max_seq_len, **cfg)
    assert cache.nbytes == expected, (cache.nbytes, expected, cfg)
    # and an independent count of the storage the cache holds
    storage = sum(t.untyped_storage().nbytes() for t in (cache.k, cache.v))
    assert storage == expected


@given(cfg=configs, seq_len=st.integers(0, 10_000))
def test_matches_course_formula(impl, cfg, seq_len):
    """2 x layers x kv_heads x head_dim x seq_len x batch x element_bytes (03.03)."""
    got = impl.get("kv_bytes.kv_cache_bytes")(seq_len=seq_len, **cfg)
    elem = torch.empty((), dtype=cfg["dtype"]).element_size()
    assert got == 2 * cfg["layers"] * cfg["kv_heads"] * cfg["head_dim"] * seq_len * cfg["batch"] * elem


def test_course_7b_example(impl):
    """A Llama-2-7B-shaped model in fp16: 0.5 MiB per token, 1 GiB at 2K, 16 GiB at 32K context."""
    f = impl.get("kv_bytes.kv_cache_bytes")
    cfg = dict(layers=32, kv_heads=32, head_dim=128, dtype=torch.float16)
    assert f(seq_len=1, **cfg) == 512 * 1024
    assert f(seq_len=2048, **cfg) == 1 << 30
    assert f(seq_len=32768, **cfg) == 16 << 30
    # GQA (Llama-3-8B: 8 KV heads) shrinks it 4x: the point of lesson 03.05.
    assert f(seq_len=32768, **{**cfg, "kv_heads": 8}) == 4 << 30


@given(cfg=configs, chunks=st.lists(st.integers(1, 5), min_size=1, max_size=6), seed=st.integers(0, 2**31))
def test_cache_returns_everything_appended(impl, cfg, chunks, seed):
    """append() returns exactly the concatenation of all chunks appended to that layer so far."""
    cache = impl.get("kv_bytes.KVCache")(max_seq_len=sum(chunks), **cfg)
    g = torch.Generator().manual_seed(seed)
    dtype = cfg["dtype"] if cfg["dtype"] != torch.float8_e4m3fn else torch.float32
    cache = impl.get("kv_bytes.KVCache")(max_seq_len=sum(chunks), **{**cfg, "dtype": dtype})
    for layer in range(cfg["layers"]):
        seen_k, seen_v = [], []
        for n in chunks:
            shape = (cfg["batch"], cfg["kv_heads"], n, cfg["head_dim"])
            k = torch.randn(shape, generator=g).to(dtype)
            v = torch.randn(shape, generator=g).to(dtype)
            seen_k.append(k)
            seen_v.append(v)
            kk, vv = cache.append(layer, k, v)
            assert torch.equal(kk, torch.cat(seen_k, dim=2))
            assert torch.equal(vv, torch.cat(seen_v, dim=2))
    assert cache.seq_len == sum(chunks)


def test_overflow_raises_and_leaves_cache_unchanged(impl):
    cache = impl.get("kv_bytes.KVCache")(layers=1, batch=1, kv_heads=1, head_dim=4, max_seq_len=3)
    k = torch.ones(1, 1, 2, 4)
    cache.append(0, k, k)
    before = (cache.k.clone(), cache.v.clone(), cache.seq_len)
    with pytest.raises(ValueError, match="max_seq_len"):
        cache.append(0, 2 * k, 2 * k)
    assert torch.equal(cache.k, before[0]) and torch.equal(cache.v, before[1]) and cache.seq_len == before[2]


VALID = dict(layers=2, kv_heads=2, head_dim=8, seq_len=4, batch=1, dtype=torch.float16)
BAD = [
    Bad("zero layers", dict(layers=0), ValueError, ("layers",)),
    Bad("negative kv_heads", dict(kv_heads=-2), ValueError, ("kv_heads",)),
    Bad("float head_dim", dict(head_dim=1.5), TypeError, ("head_dim",)),
    Bad("bool layers", dict(layers=True), TypeError, ("layers",)),
    Bad("negative seq_len", dict(seq_len=-1), ValueError, ("seq_len",)),
    Bad("negative batch", dict(batch=-1), ValueError, ("batch",)),
    Bad("string dtype", dict(dtype="fp16"), TypeError, ("dtype",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """Sizes must be ints (TypeError), layers/heads/head_dim > 0 and seq_len/batch >= 0
    (ValueError), dtype a torch.dtype (TypeError); the message names the argument."""
    assert_rejects(impl.get("kv_bytes.kv_cache_bytes"), VALID, bad)
