"""KV-cache bytes (course 01.08, 03.03, 03.05): the formula equals what a real cache allocates."""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases


DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float8_e4m3fn, torch.float64]
configs = st.fixed_dictionaries(dict(
    layers=st.integers(1, 4), kv_heads=st.integers(1, 4), head_dim=st.sampled_from([8, 16, 24]),
    batch=st.integers(1, 3), dtype=st.sampled_from(DTYPES)))
# The formula also takes batch 0 (an empty cache); a KVCache needs at least one sequence.
formula_configs = st.fixed_dictionaries(dict(
    layers=st.integers(1, 4), kv_heads=st.integers(1, 4), head_dim=st.sampled_from([1, 8, 16, 24]),
    batch=st.integers(0, 3), dtype=st.sampled_from(DTYPES)))

# The documented defaults (reference/kv_bytes.py): what omitting an argument must mean.
BYTES_DEFAULTS = dict(batch=1, dtype=torch.float16)
CACHE_DEFAULTS = dict(dtype=torch.float32, device="cpu")


def course_formula(layers, kv_heads, head_dim, seq_len, batch, dtype) -> int:
    return 2 * layers * kv_heads * head_dim * seq_len * batch * torch.empty((), dtype=dtype).element_size()


def _make_cache(impl, reference, **cfg):
    """The implementation's own KVCache if it has one, else the reference's (a missing or stubbed
    class is "not implemented": pytest's skip outcome)."""
    try:
        return impl.get("KVCache")(**cfg)
    except pytest.skip.Exception:
        return reference.get("KVCache")(**cfg)


@given(cfg=configs, max_seq_len=st.integers(1, 64))
def test_formula_equals_allocated_bytes(impl, reference, cfg, max_seq_len):
    """kv_cache_bytes(...) == nbytes of a KVCache sized for max_seq_len tokens (the
    implementation's own cache class if it has one, else the reference's)."""
    cache = _make_cache(impl, reference, max_seq_len=max_seq_len, **cfg)
    expected = impl.get("kv_cache_bytes")(seq_len=max_seq_len, **cfg)
    assert cache.nbytes == expected, (cache.nbytes, expected, cfg)
    # and an independent count of the storage the cache holds
    storage = sum(t.untyped_storage().nbytes() for t in (cache.k, cache.v))
    assert storage == expected


# Boundaries: an empty cache (seq_len 0, batch 0, both), one token of a one-element head, a
# 1-byte (fp8) and an 8-byte element. Mutants: zero_seq_len_rejected, zero_batch_rejected.
@example(cfg=dict(layers=2, kv_heads=2, head_dim=8, batch=1, dtype=torch.float16), seq_len=0).via("mutant:zero_seq_len_rejected")
@example(cfg=dict(layers=2, kv_heads=2, head_dim=8, batch=0, dtype=torch.float16), seq_len=5).via("mutant:zero_batch_rejected")
@example(cfg=dict(layers=1, kv_heads=1, head_dim=1, batch=0, dtype=torch.float32), seq_len=0).via("mutant:zero_seq_len_rejected mutant:zero_batch_rejected")
@example(cfg=dict(layers=1, kv_heads=1, head_dim=1, batch=1, dtype=torch.float8_e4m3fn), seq_len=1).via("mutant:assumes_fp16")
@example(cfg=dict(layers=3, kv_heads=1, head_dim=24, batch=2, dtype=torch.float64), seq_len=7).via("mutant:assumes_fp16")
@given(cfg=formula_configs, seq_len=st.integers(0, 10_000))
def test_matches_course_formula(impl, cfg, seq_len):
    """2 x layers x kv_heads x head_dim x seq_len x batch x element_bytes (03.03), as an int;
    seq_len 0 or batch 0 is an empty cache: 0 bytes."""
    got = impl.get("kv_cache_bytes")(seq_len=seq_len, **cfg)
    assert isinstance(got, int) and not isinstance(got, bool), (
        f"kv_cache_bytes must return an int (a byte count), got {type(got).__name__} {got!r}")
    assert got == course_formula(seq_len=seq_len, **cfg), (got, cfg, seq_len)


def test_exact_at_the_largest_size(impl):
    """Byte counts are exact ints up to the largest a tensor can have (2**63 - 1): 4.7e18 bytes
    of odd factors, which a float product (53-bit mantissa) cannot hold. Mutant: bits_over_eight."""
    f = impl.get("kv_cache_bytes")
    cfg = dict(layers=127, kv_heads=9, head_dim=255, seq_len=10**9 + 1, batch=1001, dtype=torch.float64)
    got = f(**cfg)
    assert isinstance(got, int) and not isinstance(got, bool), f"got {type(got).__name__} {got!r}"
    assert got == 2 * 127 * 9 * 255 * (10**9 + 1) * 1001 * 8 == course_formula(**cfg) == 4_668_103_444_668_103_440


@example(cfg=dict(layers=2, kv_heads=2, head_dim=8, batch=3, dtype=torch.float32), seq_len=5, omit={"dtype"}).via("mutant:default_dtype_fp32")
@example(cfg=dict(layers=2, kv_heads=2, head_dim=8, batch=3, dtype=torch.float16), seq_len=5, omit={"batch"}).via("mutant:default_batch_zero")
@given(cfg=formula_configs, seq_len=st.integers(0, 4096), omit=st.sets(st.sampled_from(sorted(BYTES_DEFAULTS)), min_size=1))
def test_omitted_arguments_mean_the_defaults(impl, cfg, seq_len, omit):
    """Omitting ``batch`` / ``dtype`` equals passing the documented default (batch=1,
    dtype=torch.float16). Mutants: default_dtype_fp32, default_batch_zero. A default is a value, not a hidden
    parameter: with batch/dtype omitted the count is the formula's at batch 1 in fp16."""
    f = impl.get("kv_cache_bytes")
    given_args = {k: v for k, v in cfg.items() if k not in omit}
    explicit = {**cfg, **{k: BYTES_DEFAULTS[k] for k in omit}}
    got = f(seq_len=seq_len, **given_args)
    assert got == course_formula(seq_len=seq_len, **explicit) == f(seq_len=seq_len, **explicit), (
        f"omitting {sorted(omit)} must mean {({k: BYTES_DEFAULTS[k] for k in omit})}; got {got}, "
        f"expected {course_formula(seq_len=seq_len, **explicit)}")


def test_cache_omitted_arguments_mean_the_defaults(impl):
    """KVCache without ``dtype`` / ``device`` allocates float32 tensors on the CPU, exactly as
    with the documented defaults passed. Mutant: cache_default_fp16."""
    C = impl.get("KVCache")
    cfg = dict(layers=2, batch=1, kv_heads=2, head_dim=4, max_seq_len=3)
    for omit in (("dtype",), ("device",), ("dtype", "device")):
        kept = {k: v for k, v in CACHE_DEFAULTS.items() if k not in omit}
        a, b = C(**cfg, **kept), C(**cfg, **CACHE_DEFAULTS)
        for t in (a.k, a.v):
            assert t.dtype == torch.float32 and t.device.type == "cpu", (
                f"KVCache without {list(omit)}: {t.dtype} on {t.device}, expected float32 on cpu")
        assert a.nbytes == b.nbytes == 2 * 2 * 1 * 2 * 4 * 3 * 4 and a.seq_len == 0


def test_cache_allocates_on_the_given_device(impl):
    """KVCache(device=...) allocates k and v there ("meta": no memory, yet the sizes and nbytes
    are the formula's). Mutant: cache_device_ignored."""
    C = impl.get("KVCache")
    cfg = dict(layers=2, batch=1, kv_heads=2, head_dim=4, max_seq_len=3, dtype=torch.float16)
    cache = C(**cfg, device="meta")
    for t in (cache.k, cache.v):
        assert t.device.type == "meta", f"KVCache(device='meta') allocated on {t.device}"
    assert cache.nbytes == 2 * 2 * 1 * 2 * 4 * 3 * 2


def test_seq_len_is_layer_zero_mid_pass(impl):
    """Mid forward pass (layer 0 appended, later layers not yet) seq_len is layer 0's count, and
    each layer keeps its own length. Mutant: seq_len_last_layer."""
    cache = impl.get("KVCache")(layers=3, batch=1, kv_heads=1, head_dim=2, max_seq_len=5)
    k = torch.ones(1, 1, 2, 2)
    cache.append(0, k, k)
    assert cache.seq_len == 2, f"after appending 2 tokens to layer 0 only, seq_len is {cache.seq_len}"
    cache.append(1, k, k)
    cache.append(0, k[:, :, :1], k[:, :, :1])
    assert cache.seq_len == 3 and list(cache.lengths) == [3, 2, 0], (cache.seq_len, list(cache.lengths))


def test_course_7b_example(impl):
    """A Llama-2-7B-shaped model in fp16: 0.5 MiB per token, 1 GiB at 2K, 16 GiB at 32K context."""
    f = impl.get("kv_cache_bytes")
    cfg = dict(layers=32, kv_heads=32, head_dim=128, dtype=torch.float16)
    assert f(seq_len=1, **cfg) == 512 * 1024
    assert f(seq_len=2048, **cfg) == 1 << 30
    assert f(seq_len=32768, **cfg) == 16 << 30
    # GQA (Llama-3-8B: 8 KV heads) shrinks it 4x: the point of lesson 03.05.
    assert f(seq_len=32768, **{**cfg, "kv_heads": 8}) == 4 << 30


@given(cfg=configs, chunks=st.lists(st.integers(0, 5), min_size=1, max_size=6),
       slack=st.sampled_from([0, 0, 1, 2]), seed=st.integers(0, 2**31))
def test_cache_returns_everything_appended(impl, cfg, chunks, slack, seed):
    """append() returns exactly the concatenation of all chunks appended to that layer so far;
    empty chunks are legal and filling the cache exactly (slack 0) is legal. Mutants:
    append_overwrites, full_cache_rejected."""
    g = torch.Generator().manual_seed(seed)
    dtype = cfg["dtype"] if cfg["dtype"] != torch.float8_e4m3fn else torch.float32
    cache = impl.get("KVCache")(max_seq_len=max(1, sum(chunks) + slack), **{**cfg, "dtype": dtype})
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


def _cache_state(cache) -> tuple:
    return (cache.k.tolist(), cache.v.tolist(), tuple(cache.lengths), cache.seq_len)


def test_overflow_raises_and_leaves_cache_unchanged(impl):
    """Appending past max_seq_len: ValueError naming max_seq_len, nothing written. Mutant:
    overflow_unchecked."""
    cache = impl.get("KVCache")(layers=1, batch=1, kv_heads=1, head_dim=4, max_seq_len=3)
    k = torch.ones(1, 1, 2, 4)
    cache.append(0, k, k)
    bad = Bad("one past max_seq_len", dict(layer=0, k=2 * k, v=2 * k), ValueError, ("max_seq_len",))
    assert_rejects(cache.append, dict(layer=0, k=k, v=k), bad, state=lambda: _cache_state(cache))


# --- bad input -------------------------------------------------------------------------------
VALID = dict(layers=2, kv_heads=2, head_dim=8, seq_len=4, batch=1, dtype=torch.float16)
BAD = [
    Bad("zero layers", dict(layers=0), ValueError, ("layers",)),
    Bad("negative layers", dict(layers=-1), ValueError, ("layers",)),
    Bad("bool layers", dict(layers=True), TypeError, ("layers",)),
    Bad("float layers", dict(layers=2.0), TypeError, ("layers",)),
    Bad("zero kv_heads", dict(kv_heads=0), ValueError, ("kv_heads",)),
    Bad("negative kv_heads", dict(kv_heads=-2), ValueError, ("kv_heads",)),
    Bad("str kv_heads", dict(kv_heads="2"), TypeError, ("kv_heads",)),
    Bad("zero head_dim", dict(head_dim=0), ValueError, ("head_dim",)),
    Bad("float head_dim", dict(head_dim=1.5), TypeError, ("head_dim",)),
    Bad("negative seq_len", dict(seq_len=-1), ValueError, ("seq_len",)),
    Bad("float seq_len", dict(seq_len=4.0), TypeError, ("seq_len",)),
    Bad("None seq_len", dict(seq_len=None), TypeError, ("seq_len",)),
    Bad("negative batch", dict(batch=-1), ValueError, ("batch",)),
    Bad("bool batch", dict(batch=False), TypeError, ("batch",)),
    Bad("None batch", dict(batch=None), TypeError, ("batch",)),
    Bad("string dtype", dict(dtype="fp16"), TypeError, ("dtype",)),
    Bad("None dtype", dict(dtype=None), TypeError, ("dtype",)),
    Bad("python type dtype", dict(dtype=float), TypeError, ("dtype",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """Sizes must be ints (TypeError), layers/heads/head_dim > 0 and seq_len/batch >= 0
    (ValueError), dtype a torch.dtype (TypeError); the message names the argument."""
    assert_rejects(impl.get("kv_cache_bytes"), VALID, bad)


CACHE_VALID = dict(layers=2, batch=1, kv_heads=2, head_dim=4, max_seq_len=3)
CACHE_BAD = [
    Bad("zero layers", dict(layers=0), ValueError, ("layers",)),
    Bad("zero batch", dict(batch=0), ValueError, ("batch",)),
    Bad("negative kv_heads", dict(kv_heads=-1), ValueError, ("kv_heads",)),
    Bad("zero head_dim", dict(head_dim=0), ValueError, ("head_dim",)),
    Bad("zero max_seq_len", dict(max_seq_len=0), ValueError, ("max_seq_len",)),
    Bad("float max_seq_len", dict(max_seq_len=3.0), TypeError, ("max_seq_len",)),
    Bad("bool batch", dict(batch=True), TypeError, ("batch",)),
    Bad("string dtype", dict(dtype="float32"), TypeError, ("dtype",)),
]


@bad_cases(CACHE_BAD)
def test_cache_rejects_bad_input(impl, bad):
    """KVCache(...): sizes are ints >= 1, dtype a torch.dtype; the message names the argument."""
    assert_rejects(impl.get("KVCache"), CACHE_VALID, bad)


def _chunk(n: int = 1, batch: int = 1, heads: int = 2, dim: int = 4) -> torch.Tensor:
    return torch.arange(batch * heads * n * dim, dtype=torch.float32).reshape(batch, heads, n, dim) + 1


APPEND_VALID = dict(layer=1, k=_chunk(), v=_chunk())
APPEND_BAD = [
    Bad("negative layer", dict(layer=-1), ValueError, ("layer",)),
    Bad("layer past the last", dict(layer=2), ValueError, ("layer",)),
    Bad("str layer", dict(layer="1"), TypeError, ("layer",)),
    Bad("float layer", dict(layer=1.0), TypeError, ("layer",)),
    Bad("k not a tensor", dict(k=[[1.0]]), TypeError, ("k",)),
    Bad("v None", dict(v=None), TypeError, ("v",)),
    Bad("k of rank 3", dict(k=_chunk()[0]), ValueError, ("k",)),
    Bad("k with the wrong batch", dict(k=_chunk(batch=2)), ValueError, ("k",)),
    Bad("v with the wrong kv_heads", dict(v=_chunk(heads=1)), ValueError, ("v",)),
    Bad("v with the wrong head_dim", dict(v=_chunk(dim=8)), ValueError, ("v",)),
    Bad("k and v of different lengths", dict(k=_chunk(n=2)), ValueError, ("k", "v")),
    # both wrong the same way: only the shape check can see it (k.shape == v.shape)
    Bad("k and v with the wrong batch", dict(k=_chunk(batch=2), v=_chunk(batch=2)), ValueError, ("k",)),
    Bad("k and v with the wrong head_dim", dict(k=_chunk(dim=8), v=_chunk(dim=8)), ValueError, ("k",)),
    Bad("past max_seq_len", dict(k=_chunk(n=2), v=_chunk(n=2)), ValueError, ("max_seq_len",)),
]


@bad_cases(APPEND_BAD)
def test_append_rejects_bad_input(impl, bad):
    """append(layer, k, v) on a cache holding 2 of 3 positions: a bad layer or tensor, or a
    chunk that does not fit, raises naming the argument and writes nothing; the cache then
    still takes the valid chunk."""
    cache = impl.get("KVCache")(**CACHE_VALID)
    cache.append(1, _chunk(n=2), _chunk(n=2))
    assert_rejects(cache.append, APPEND_VALID, bad, state=lambda: _cache_state(cache))
    k, v = cache.append(**APPEND_VALID)
    assert torch.equal(k, torch.cat([_chunk(n=2), _chunk()], dim=2)) and torch.equal(v, k)
