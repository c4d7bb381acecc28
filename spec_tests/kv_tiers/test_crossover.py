"""Reload or recompute (course 07.05): the time to move a prefix's KV cache over a link against the
time to rebuild it by prefill, and the prefix length where the answer flips -- against FLOPs and
bytes counted matrix by matrix (oracles.py) and a scan of every prefix length."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from reference.model import ModelConfig
from spec_tests.kv_tiers import oracles

LLAMA3_8B = ModelConfig(vocab_size=128256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, hidden_dim=14336,
                        rope_theta=500000.0, max_seq_len=8192, dtype=torch.bfloat16)
ULPS = 4 * 2.0 ** -52


@st.composite
def small_configs(draw, max_len: int = 64) -> ModelConfig:
    kv = draw(st.integers(1, 2))
    return ModelConfig(vocab_size=draw(st.integers(1, 50)), dim=draw(st.integers(1, 16)), n_layers=draw(st.integers(1, 3)),
                       n_heads=kv * draw(st.integers(1, 3)), n_kv_heads=kv, head_dim=draw(st.sampled_from([2, 4, 8])),
                       hidden_dim=draw(st.integers(1, 24)), max_seq_len=draw(st.integers(1, max_len)),
                       dtype=draw(st.sampled_from([torch.float32, torch.bfloat16, torch.float16])))


def close(got, want: Fraction) -> bool:
    return isinstance(got, float) and abs(Fraction(got) - want) <= ULPS * abs(want)


@example(c=LLAMA3_8B, n=1000, bw=7e9, lat=1e-3, rate=8e14).via(
    "mutant:kv_bytes_k_only mutant:recompute_linear_only")
@given(c=small_configs(), n=st.integers(0, 64), bw=st.floats(1e3, 1e13), lat=st.one_of(st.just(0.0), st.floats(0, 1.0)),
       rate=st.floats(1e3, 1e16))
def test_times_are_the_closed_forms(impl, c, n, bw, lat, rate):
    """reload_seconds = latency + tokens x 2 L K h e / bandwidth; recompute_seconds = the prefill's
    FLOPs (every weight matrix, the LM head, attention over the n x n square) / flops_rate; both the
    exact value rounded to a float (within 4 ulps)."""
    n = min(n, c.max_seq_len)
    got = impl.get("reload_seconds")(c, n, bandwidth=bw, latency=lat)
    want = oracles.reload(c, n, bw, lat)
    assert close(got, want), f"reload_seconds({c}, {n}, bandwidth={bw!r}, latency={lat!r}) = {got!r}; expected {float(want)!r}"
    got = impl.get("recompute_seconds")(c, n, flops_rate=rate)
    want = oracles.recompute(c, n, rate)
    assert close(got, want), f"recompute_seconds({c}, {n}, flops_rate={rate!r}) = {got!r}; expected {float(want)!r}"


@example(c=LLAMA3_8B, bw=7e9, rate=8.027e14, lat=0.0).via("mutant:crossover_off_by_one mutant:recompute_linear_only")
@example(c=LLAMA3_8B, bw=1e9, rate=8.027e14, lat=0.0).via("boundary: a slow link: recompute wins at every length, None")
@example(c=LLAMA3_8B, bw=5.5e10, rate=8.027e14, lat=1e-3).via("mutant:reload_ignores_latency")
@given(c=st.one_of(small_configs(), st.just(LLAMA3_8B)), bw=st.floats(1e6, 1e13), rate=st.floats(1e9, 1e16),
       lat=st.one_of(st.just(0.0), st.floats(0, 0.1)))
def test_crossover_is_the_first_length_where_reload_wins(impl, c, bw, rate, lat):
    """crossover_tokens is the smallest prefix n >= 1 whose reload is no slower than its recompute
    (exactly), and every longer prefix is too (the flip happens once); None when even max_seq_len
    tokens recompute faster."""
    got = impl.get("crossover_tokens")(c, bandwidth=bw, flops_rate=rate, latency=lat)
    call = f"crossover_tokens({c}, bandwidth={bw!r}, flops_rate={rate!r}, latency={lat!r})"
    wins = lambda n: oracles.reload(c, n, bw, lat) <= oracles.recompute(c, n, rate)  # noqa: E731
    if c.max_seq_len <= 256:
        want = oracles.crossover_scan(c, bw, rate, lat)
        assert got == want, f"{call} = {got!r}; a scan of every length: {want!r}"
        if want is not None:
            assert all(wins(n) for n in range(want, c.max_seq_len + 1)), "test bug: the flip is not once"
        return
    if got is None:
        assert not wins(c.max_seq_len), f"{call} = None, but reloading {c.max_seq_len} tokens is no slower"
        return
    assert isinstance(got, int) and 1 <= got <= c.max_seq_len, f"{call} = {got!r}"
    assert wins(got), f"{call} = {got}: reload is slower there"
    assert got == 1 or not wins(got - 1), f"{call} = {got}: reload already wins at {got - 1}"
    assert all(wins(n) for n in (got + 1, (got + c.max_seq_len) // 2, c.max_seq_len) if n <= c.max_seq_len), (
        f"{call} = {got}: the flip is not once")


@given(c=small_configs(max_len=40), bw=st.floats(1e3, 1e6), rate=st.floats(1e3, 1e8), lat=st.floats(0, 1e-2),
       k=st.sampled_from([2.0, 10.0]))
def test_crossover_moves_the_right_way(impl, c, bw, rate, lat, k):
    """A faster link or a smaller latency never delays the flip; a faster prefill never advances it."""
    f = impl.get("crossover_tokens")
    key = lambda v: math.inf if v is None else v  # noqa: E731
    base = key(f(c, bandwidth=bw, flops_rate=rate, latency=lat))
    assert key(f(c, bandwidth=bw * k, flops_rate=rate, latency=lat)) <= base
    assert key(f(c, bandwidth=bw, flops_rate=rate, latency=lat / k)) <= base
    assert key(f(c, bandwidth=bw, flops_rate=rate * k, latency=lat)) >= base


def test_hand_computed_numbers(impl):
    """docs/kv_tiers.md's numbers for Llama-3-8B (bf16, 131,072 KV bytes per token; the prefill
    counted as concept flops counts it) recomputed at 802.7 TFLOP/s (the H200's best recorded bf16
    matmul rate, docs/results/attention_h200_defaults_n4096.json -- a ceiling, not a prefill's
    rate): over the 4.27 TB/s copy bandwidth (recorded) or an assumed 55 GB/s host link, reloading
    wins from the first token; over an assumed 7 GB/s NVMe from 40 tokens on; at 1 GB/s never (up to
    8,192). With 1 ms of latency on the host link: from 62 tokens."""
    f = impl.get("crossover_tokens")
    rate = 802.7e12
    assert f(LLAMA3_8B, bandwidth=4.27e12, flops_rate=rate) == 1
    assert f(LLAMA3_8B, bandwidth=55e9, flops_rate=rate) == 1
    assert f(LLAMA3_8B, bandwidth=7e9, flops_rate=rate) == 40
    assert f(LLAMA3_8B, bandwidth=1e9, flops_rate=rate) is None
    assert f(LLAMA3_8B, bandwidth=55e9, flops_rate=rate, latency=1e-3) == 62
    assert impl.get("reload_seconds")(LLAMA3_8B, 1000, bandwidth=131072e6) == pytest.approx(1e-3, rel=1e-12)


# --- bad input -------------------------------------------------------------------------------
def _real(name, zero_ok=False):
    rows = [Bad(f"negative {name}", {name: -1.0}, ValueError, (name,)),
            Bad(f"nan {name}", {name: float("nan")}, ValueError, (name,)),
            Bad(f"inf {name}", {name: float("inf")}, ValueError, (name,)),
            Bad(f"str {name}", {name: "1"}, TypeError, (name,)),
            Bad(f"bool {name}", {name: True}, TypeError, (name,))]
    return rows if zero_ok else rows + [Bad(f"zero {name}", {name: 0.0}, ValueError, (name,))]


CONFIG = [Bad("config not a ModelConfig", dict(config="llama"), TypeError, ("config",))]
TOKENS = [Bad("negative tokens", dict(tokens=-1), ValueError, ("tokens",)),
          Bad("tokens past max_seq_len", dict(tokens=8193), ValueError, ("tokens",)),
          Bad("float tokens", dict(tokens=10.0), TypeError, ("tokens",)),
          Bad("bool tokens", dict(tokens=True), TypeError, ("tokens",))]


@bad_cases(CONFIG + TOKENS + _real("bandwidth") + _real("latency", zero_ok=True))
def test_reload_seconds_rejects_bad_input(impl, bad):
    """config a ModelConfig; tokens an int in [0, max_seq_len]; bandwidth > 0; latency >= 0."""
    assert_rejects(impl.get("reload_seconds"), dict(config=LLAMA3_8B, tokens=100, bandwidth=5e10, latency=1e-4), bad)


@bad_cases(CONFIG + TOKENS + _real("flops_rate"))
def test_recompute_seconds_rejects_bad_input(impl, bad):
    """config a ModelConfig; tokens an int in [0, max_seq_len]; flops_rate > 0."""
    assert_rejects(impl.get("recompute_seconds"), dict(config=LLAMA3_8B, tokens=100, flops_rate=8e14), bad)


@bad_cases(CONFIG + _real("bandwidth") + _real("flops_rate") + _real("latency", zero_ok=True))
def test_crossover_tokens_rejects_bad_input(impl, bad):
    """As reload_seconds and recompute_seconds."""
    assert_rejects(impl.get("crossover_tokens"), dict(config=LLAMA3_8B, bandwidth=5e10, flops_rate=8e14, latency=0.0), bad)


def test_zero_tokens_and_the_last_length(impl):
    """0 tokens: recompute 0 s, reload the latency; max_seq_len tokens is a legal prefix."""
    assert impl.get("recompute_seconds")(LLAMA3_8B, 0, flops_rate=1e15) == 0
    assert impl.get("reload_seconds")(LLAMA3_8B, 0, bandwidth=1e9, latency=0.25) == 0.25
    assert impl.get("reload_seconds")(LLAMA3_8B, 8192, bandwidth=131072.0) == 8192.0
    assert impl.get("recompute_seconds")(LLAMA3_8B, 8192, flops_rate=1.0) == oracles.prefill_flops(LLAMA3_8B, 8192)
