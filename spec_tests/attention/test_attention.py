"""Attention (course 03.02, 03.05, 05.07): the properties that define it.

Oracles: a float64 brute force written one query at a time, and torch's
scaled_dot_product_attention in float64. Every implementation is held to the tolerance rule:
error vs the float64 oracle <= 2 x the reference's own error in the same dtype + rounding floor,
the floor of out taken at the magnitude of the scores times the values and the floor of lse at
the scores' (spec_tests/attention/oracles.py: a correct kernel's error grows with the scores).

Pinned examples name the mutant (spec_tests/attention/mutants.py) each one catches.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, assert_rejects_without_data, bad_cases
from conformance.tolerance import assert_close_to_oracle, assert_metamorphic
from spec_tests.attention.oracles import attention_brute_force, lse_floor_from, out_floor_from
from spec_tests.attention.strategies import AttnCase, attn_cases, seq_lens

# The documented defaults of attention (reference/attention.py): what omitting an argument means.
DEFAULTS = dict(causal=False, window=None, scale=None, return_lse=False)


def _scaled(n: int) -> int:
    """``n`` examples under the dev profile (25), scaled with the loaded profile (ci, thorough)."""
    return max(1, round(n * settings().max_examples / 25))


def _run(fn, q, k, v, case: AttnCase, **extra):
    return fn(q, k, v, causal=case.causal, window=case.window, scale=case.scale, **extra)


def _check_against(oracle_out, oracle_lse, impl, reference, case: AttnCase, device, name="attention"):
    fn = impl.get(name)
    q, k, v = case.tensors(device)
    before = [t.clone() for t in (q, k, v)]
    out, lse = _run(fn, q, k, v, case, return_lse=True)
    for label, t, b in zip("qkv", (q, k, v), before):
        assert torch.equal(t, b), f"{name} modified its input {label} in place"
    ref_out, ref_lse = _run(reference.get("attention"), q, k, v, case, return_lse=True)
    inputs = dict(case=case, q=q, k=k, v=v)
    assert_close_to_oracle(out, ref_out, oracle_out, name=f"{name} out", inputs=inputs,
                           floor_from=out_floor_from(q, k, v, case.scale, oracle_out))
    assert isinstance(lse, torch.Tensor) and lse.shape == ref_lse.shape, (
        f"lse must have shape (batch, q_heads, q_len) = {tuple(ref_lse.shape)}, got "
        f"{tuple(lse.shape) if isinstance(lse, torch.Tensor) else type(lse).__name__}")
    assert lse.dtype == ref_lse.dtype, f"lse dtype {lse.dtype} != {ref_lse.dtype}"
    assert_close_to_oracle(lse, ref_lse, oracle_lse, name=f"{name} lse", inputs=inputs,
                           floor_from=lse_floor_from(q, k, case.scale))


# Pinned examples (each catches the mutant named), then the generated ones (tile-edge lengths and
# windows, scales 0 and negative, head_dim 8 ... 64: spec_tests/attention/strategies.py).
@example(case=AttnCase(1, 2, 1, 5, 3, 16, True, None, "float16", 7)).via("mutant:masked_row_nan")  # q > kv: masked rows
@example(case=AttnCase(1, 2, 2, 3, 17, 32, True, None, "bfloat16", 1)).via("mutant:top_left_causal")  # decode-like, bottom-right
@example(case=AttnCase(2, 4, 1, 33, 33, 16, True, 4, "float32", 3)).via("mutant:window_off_by_one")  # MQA + window 4
@example(case=AttnCase(1, 4, 2, 9, 12, 16, False, 0, "float16", 5)).via("mutant:window_zero_is_none mutant:gqa_wrong_head")  # window 0, GQA 2
@example(case=AttnCase(1, 2, 1, 6, 10, 32, True, None, "float32", 8, 0.0)).via("mutant:scale_zero_is_default")  # scale 0: uniform
@example(case=AttnCase(1, 2, 1, 1, 1, 16, True, None, "float16", 9)).via("mutant:decode_lse_squeezed")  # q_len 1, kv_len 1
@example(case=AttnCase(1, 2, 1, 4, 1, 16, True, None, "bfloat16", 10)).via("mutant:causal_off_by_one")  # kv_len 1 under 4 queries
@given(case=attn_cases(max_len=65, max_work=24))
def test_matches_float64_brute_force(impl, reference, device, case):
    """out and lse agree with a float64 brute force within the tolerance rule; inputs untouched."""
    oracle_out, oracle_lse = attention_brute_force(*case.tensors(device), **case.kwargs)
    _check_against(oracle_out, oracle_lse, impl, reference, case, device)


def _sdpa_oracle(case: AttnCase, device):
    """torch SDPA in float64 with the contract's mask built from positions (not the reference's)."""
    q, k, v = (t.double() for t in case.tensors(device))
    pos = torch.arange(case.q_len, device=device)[:, None] + (case.kv_len - case.q_len)
    j = torch.arange(case.kv_len, device=device)[None, :]
    keep = (j <= pos) | (not case.causal)
    if case.window is not None:
        keep = keep & (j >= pos - case.window)
    oracle = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=case.scale, enable_gqa=True)
    return torch.where(keep.any(-1)[:, None], oracle, 0.0)  # some backends give NaN on fully masked rows


@given(case=attn_cases(dtypes=("float32",), max_len=65))
def test_matches_torch_sdpa(impl, reference, device, case):
    """out agrees with torch's scaled_dot_product_attention (float64, explicit bottom-right mask
    and left window)."""
    oracle = _sdpa_oracle(case, device)
    q, k, v = case.tensors(device)
    out = _run(impl.get("attention"), q, k, v, case)
    ref = _run(reference.get("attention"), q, k, v, case)
    assert_close_to_oracle(out, ref, oracle, name="attention out vs SDPA", inputs=dict(case=case),
                           floor_from=out_floor_from(q, k, v, case.scale, oracle))


@given(case=attn_cases(dtypes=("float64",), max_len=24))
def test_float64_is_exact(impl, device, case):
    """In float64 an implementation is exact to 1e-10 (skipped where float64 is unsupported)."""
    fn = impl.get("attention")
    try:
        out, lse = _run(fn, *case.tensors(device), case, return_lse=True)
    except TypeError as exc:
        if "float64" in str(exc) or "dtype" in str(exc):
            pytest.skip(f"float64 not supported: {exc}")
        raise
    oracle_out, oracle_lse = attention_brute_force(*case.tensors(device), **case.kwargs)
    torch.testing.assert_close(out.cpu(), oracle_out.cpu(), rtol=0, atol=1e-10)
    torch.testing.assert_close(lse.cpu().double(), oracle_lse.cpu(), rtol=0, atol=1e-10)


@st.composite
def _tiled_cases(draw):
    """A case and tile sizes with the lengths on the tiles' edges half the time (a ragged last
    tile of one element, exactly full tiles, one tile)."""
    block_q, block_k = draw(st.integers(1, 20)), draw(st.integers(1, 20))
    case = draw(attn_cases(max_len=40, tiles=(), max_work=None))
    q_len = draw(seq_lens(1, 40, tiles=(block_q,)))
    kv_len = draw(st.one_of(st.just(q_len), seq_lens(1, 40, tiles=(block_k,))))
    return AttnCase(**{**case.__dict__, "q_len": q_len, "kv_len": kv_len}), block_q, block_k


@example(tiled=(AttnCase(1, 2, 1, 24, 25, 16, True, None, "float16", 21), 8, 8)).via("mutant:tiled_drops_ragged_tail")  # ragged tail of 1
@example(tiled=(AttnCase(1, 2, 2, 16, 32, 32, False, None, "float32", 22, 1.0, 3.0), 16, 8)).via("mutant:tiled_no_rescale")  # max rises
@given(tiled=_tiled_cases())
def test_tiled_equals_plain(impl, reference, device, tiled):
    """The online-softmax tiled form computes the same function for any tile sizes."""
    case, block_q, block_k = tiled
    fn = impl.get("attention_tiled")
    q, k, v = case.tensors(device)
    oracle_out, oracle_lse = attention_brute_force(q, k, v, **case.kwargs)
    out, lse = _run(fn, q, k, v, case, return_lse=True, block_q=block_q, block_k=block_k)
    ref_out, ref_lse = _run(reference.get("attention"), q, k, v, case, return_lse=True)
    inputs = dict(case=case, block_q=block_q, block_k=block_k)
    assert_close_to_oracle(out, ref_out, oracle_out, name="attention_tiled out", inputs=inputs,
                           floor_from=out_floor_from(q, k, v, case.scale, oracle_out))
    assert_close_to_oracle(lse, ref_lse, oracle_lse, name="attention_tiled lse", inputs=inputs,
                           floor_from=lse_floor_from(q, k, case.scale))


@settings(max_examples=_scaled(12))
@given(case=attn_cases(groups=(2, 4, 8), max_kv_heads=2, max_len=65, max_work=24))
def test_gqa_equals_mha_with_repeated_kv(impl, reference, device, case):
    """GQA/MQA == MHA on K/V heads repeated group times (query head h reads KV head h // group):
    both calls meet the tolerance rule against one float64 oracle. (Each side against the
    oracle, with the score-scaled floor, rather than side against side: two correct matmul
    shapes may round the scores differently, e.g. cuBLAS in float32 on the H200.)"""
    fn = impl.get("attention")
    q, k, v = case.tensors(device)
    group = case.q_heads // case.kv_heads
    gqa = _run(fn, q, k, v, case)
    mha = _run(fn, q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), case)
    ref = _run(reference.get("attention"), q, k, v, case)
    oracle, _ = attention_brute_force(q, k, v, **case.kwargs)
    floor_from = out_floor_from(q, k, v, case.scale, oracle)
    for name, out in (("GQA", gqa), ("MHA on repeated K/V", mha)):
        assert_close_to_oracle(out, ref, oracle, name=name, inputs=dict(case=case), floor_from=floor_from)


@settings(max_examples=_scaled(12))
@given(case=attn_cases(allow_window=False, max_len=65, max_work=16), data=st.data())
def test_noncausal_invariant_to_key_permutation(impl, reference, device, case, data):
    """Without a mask, permuting keys together with their values leaves the output unchanged."""
    fn = impl.get("attention")
    case = AttnCase(**{**case.__dict__, "causal": False})
    perm = torch.tensor(data.draw(st.permutations(range(case.kv_len)), label="perm"))
    q, k, v = case.tensors(device)
    out = _run(fn, q, k, v, case)
    permuted = _run(fn, q, k[:, :, perm], v[:, :, perm], case)
    ref = _run(reference.get("attention"), q, k, v, case)
    oracle, _ = attention_brute_force(q, k, v, **case.kwargs)
    assert_metamorphic(permuted, out, ref, oracle, name="key-permuted output", inputs=dict(case=case))


@settings(max_examples=_scaled(8))
@given(case=attn_cases(max_len=40, max_work=16), extra=st.integers(1, 8),
       block_q=st.integers(1, 20), block_k=st.integers(1, 20))
def test_tiled_fully_masked_rows_are_zero_with_lse_minus_inf(impl, device, case, extra, block_q, block_k):
    """The tiled form keeps the fully-masked-row rule for any tile sizes: a query that sees no key
    (causal, q_len > kv_len: the first q_len - kv_len queries) outputs exactly 0 with lse = -inf,
    never NaN (its running denominator stays 0: it must not be divided by)."""
    case = AttnCase(**{**case.__dict__, "causal": True, "q_len": case.kv_len + extra})
    out, lse = _run(impl.get("attention_tiled"), *case.tensors(device), case, return_lse=True,
                    block_q=block_q, block_k=block_k)
    assert torch.isfinite(out).all(), f"NaN/inf in the output (tiles {block_q} x {block_k})"
    assert (out[:, :, :extra] == 0).all(), "fully masked rows must be exactly 0"
    assert (lse[:, :, :extra] == -math.inf).all(), "fully masked rows must have lse = -inf"
    assert torch.isfinite(lse[:, :, extra:]).all()


@pytest.mark.choice("attention_tiled's default tiles: block_q = block_k = 16, bit for bit")
@pytest.mark.parametrize("q_len,kv_len", [(33, 40), (20, 37)], ids=["33x40", "20x37"])
def test_tiled_default_tiles_are_16(impl, device, q_len, kv_len):
    """Omitting ``block_q`` / ``block_k`` is passing 16 (the docstring's default), bit for bit:
    the tile sizes fix the order of the online softmax's float operations, so other defaults
    give other roundings (lengths past one tile in both directions, ragged last tiles)."""
    fn = impl.get("attention_tiled")
    case = AttnCase(1, 2, 1, q_len, kv_len, 16, True, None, "float32", 41)
    q, k, v = case.tensors(device)
    got = fn(q, k, v, causal=True, return_lse=True)
    for omit in ("block_q", "block_k"):
        given_args = {"block_q": 16, "block_k": 16}
        del given_args[omit]
        want = fn(q, k, v, causal=True, return_lse=True, block_q=16, block_k=16)
        part = fn(q, k, v, causal=True, return_lse=True, **given_args)
        for a, b, c in zip(got, want, part):
            assert torch.equal(a, b) and torch.equal(c, b), f"omitting {omit} must mean {omit}=16"

@settings(max_examples=_scaled(12))
@given(case=attn_cases(max_len=40, max_work=16), extra=st.integers(1, 8))
def test_fully_masked_rows_are_zero_with_lse_minus_inf(impl, device, case, extra):
    """Causal with q_len > kv_len: the first q_len - kv_len queries see no key -> out 0, lse -inf."""
    case = AttnCase(**{**case.__dict__, "causal": True, "q_len": case.kv_len + extra})
    out, lse = _run(impl.get("attention"), *case.tensors(device), case, return_lse=True)
    assert torch.isfinite(out).all(), "NaN/inf in the output"
    assert (out[:, :, :extra] == 0).all(), "fully masked rows must be exactly 0"
    assert (lse[:, :, :extra] == -math.inf).all(), "fully masked rows must have lse = -inf"
    assert torch.isfinite(lse[:, :, extra:]).all()


# ------------------------------------------------------------------ defaults and boundaries
@example(case=AttnCase(1, 2, 1, 6, 9, 16, True, None, "float16", 31), omit=frozenset({"causal"})).via("mutant:default_causal_true")
@example(case=AttnCase(1, 2, 1, 6, 9, 64, False, 2, "float32", 32), omit=frozenset({"scale", "return_lse"})).via("mutant:default_returns_lse")
@settings(max_examples=_scaled(10))
@given(case=attn_cases(max_len=24, head_dims=(16, 64), max_work=8),
       omit=st.frozensets(st.sampled_from(sorted(DEFAULTS)), min_size=1))
def test_omitted_arguments_mean_the_defaults(impl, device, case, omit):
    """Omitting ``causal`` / ``window`` / ``scale`` / ``return_lse`` gives, bit for bit, what
    passing the documented default gives (causal=False, window=None, scale=None, return_lse=False;
    the others as drawn), and ``scale=None`` is exactly ``1/sqrt(head_dim)`` (head_dim 16 or 64:
    exactly representable). Mutants: default_causal_true, default_returns_lse."""
    fn = impl.get("attention")
    q, k, v = case.tensors(device)
    drawn = dict(case.kwargs, return_lse=case.seed % 2 == 1)
    given_args = {n: x for n, x in drawn.items() if n not in omit}
    explicit = {**given_args, **{n: DEFAULTS[n] for n in omit}}
    got, want = fn(q, k, v, **given_args), fn(q, k, v, **explicit)
    if not explicit["return_lse"]:
        assert isinstance(got, torch.Tensor), f"return_lse omitted must return out alone, got {type(got).__name__}"
    for a, b in zip(*((x,) if isinstance(x, torch.Tensor) else x for x in (got, want))):
        assert torch.equal(a, b), f"omitting {sorted(omit)} must mean {({n: DEFAULTS[n] for n in omit})}\n  case: {case!r}"
    if explicit["scale"] is None:
        inv_sqrt = fn(q, k, v, **{**explicit, "scale": 1.0 / math.sqrt(case.head_dim)})
        for a, b in zip(*((x,) if isinstance(x, torch.Tensor) else x for x in (want, inv_sqrt))):
            assert torch.equal(a, b), f"scale=None must mean scale = 1/sqrt({case.head_dim})\n  case: {case!r}"


EMPTY = [  # (q shape, k/v shape, causal): every output empty, or every row fully masked
    ((1, 2, 0, 16), (1, 1, 5, 16), True),    # no queries
    ((1, 2, 3, 16), (1, 1, 0, 16), False),   # no keys: every row sees nothing
    ((0, 2, 3, 16), (0, 1, 3, 16), True),    # no sequences
    ((1, 0, 3, 16), (1, 1, 3, 16), False),   # no query heads
]


@pytest.mark.parametrize("q_shape,kv_shape,causal", EMPTY, ids=["q_len 0", "kv_len 0", "batch 0", "q_heads 0"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_empty_inputs(impl, device, q_shape, kv_shape, causal, dtype):
    """Empty is legal: out has q's shape (zeros), lse (batch, q_heads, q_len) with -inf where a
    query sees no key (kv_len 0). Mutant: empty_keys_crash."""
    q = torch.randn(q_shape, dtype=dtype, device=device)
    k, v = (torch.randn(kv_shape, dtype=dtype, device=device) for _ in range(2))
    out, lse = impl.get("attention")(q, k, v, causal=causal, return_lse=True)
    assert out.shape == q.shape and out.dtype == dtype, f"out {tuple(out.shape)} {out.dtype}"
    assert lse.shape == q.shape[:3], f"lse shape {tuple(lse.shape)} != {tuple(q.shape[:3])}"
    assert (out == 0).all() and (lse == -math.inf).all()


def test_fresh_result_for_each_call(impl, reference, device):
    """Two calls with equal shapes but different values give their own answers (no stale cache)."""
    fn = impl.get("attention")
    for seed in (11, 12):
        case = AttnCase(1, 2, 1, 9, 9, 32, True, None, "float16", seed)
        q, k, v = case.tensors(device)
        oracle, _ = attention_brute_force(q, k, v, causal=True)
        out = _run(fn, q, k, v, case)
        ref = _run(reference.get("attention"), q, k, v, case)
        assert_close_to_oracle(out, ref, oracle, name=f"call with seed {seed}",
                               floor_from=out_floor_from(q, k, v, None, oracle))


# ------------------------------------------------------------------------------- bad input
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
    Bad("k not a tensor", _with(k=lambda kw: kw["k"].cpu().numpy()), TypeError, ("k",)),
    Bad("v not a tensor", _with(v=lambda kw: kw["v"].tolist()), TypeError, ("v",)),
    Bad("integer q", _with(q=lambda kw: kw["q"].long(), k=lambda kw: kw["k"].long(),
                           v=lambda kw: kw["v"].long()), TypeError, ("q",)),
    Bad("k dtype differs", _with(k=lambda kw: kw["k"].half(), v=lambda kw: kw["v"].half()), TypeError, ("k",)),
    Bad("v dtype differs", _with(v=lambda kw: kw["v"].double()), TypeError, ("v",)),
    Bad("heads not a multiple", _with(q=lambda kw: kw["q"][:, :3]), ValueError, ("q",)),
    Bad("zero k heads", _with(k=lambda kw: kw["k"][:, :0], v=lambda kw: kw["v"][:, :0]), ValueError, ("k",)),
    Bad("head_dim differs", _with(k=lambda kw: kw["k"][..., :8], v=lambda kw: kw["v"][..., :8]),
        ValueError, ("k",)),
    Bad("head_dim 0", _with(q=lambda kw: kw["q"][..., :0], k=lambda kw: kw["k"][..., :0],
                            v=lambda kw: kw["v"][..., :0]), ValueError, ("head_dim",)),
    Bad("k/v shapes differ", _with(v=lambda kw: kw["v"][:, :, :4]), ValueError, ("v",)),
    Bad("batch differs", _with(k=lambda kw: torch.cat([kw["k"]] * 2), v=lambda kw: torch.cat([kw["v"]] * 2)),
        ValueError, ("k",)),
    Bad("negative window", dict(window=-1), ValueError, ("window",)),
    Bad("float window", dict(window=2.5), TypeError, ("window",)),
    Bad("bool window", dict(window=True), TypeError, ("window",)),
    Bad("nan scale", dict(scale=math.nan), ValueError, ("scale",)),
    Bad("inf scale", dict(scale=-math.inf), ValueError, ("scale",)),
    Bad("string scale", dict(scale="0.25"), TypeError, ("scale",)),
    Bad("bool scale", dict(scale=True), TypeError, ("scale",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, device, bad):
    """Malformed input raises TypeError (wrong kind of value) or ValueError (illegal value) whose
    message names the argument; the rejected call leaves its tensors unchanged."""
    assert_rejects(impl.get("attention"), lambda: _valid(device), bad)


TILED_BAD = [
    Bad("zero block_q", dict(block_q=0), ValueError, ("block_q",)),
    Bad("negative block_k", dict(block_k=-4), ValueError, ("block_k",)),
    Bad("zero block_k", dict(block_k=0), ValueError, ("block_k",)),
    Bad("float block_k", dict(block_k=4.0), TypeError, ("block_k",)),
    Bad("bool block_q", dict(block_q=True), TypeError, ("block_q",)),
    Bad("q rank 3 (tiled)", _with(q=lambda kw: kw["q"][0]), ValueError, ("q",)),
    Bad("negative window (tiled)", dict(window=-2), ValueError, ("window",)),
    Bad("nan scale (tiled)", dict(scale=math.nan), ValueError, ("scale",)),
]


@bad_cases(TILED_BAD)
def test_tiled_rejects_bad_input(impl, device, bad):
    """attention_tiled checks its inputs like attention, and block sizes are ints >= 1."""
    assert_rejects(impl.get("attention_tiled"), lambda: _valid(device), bad)


# Another device, reachable on a CPU-only machine: "meta" tensors (shapes, no data); not in the
# BAD tables, whose no-change check reads every tensor's data (as in spec_tests/paged_attention).
ANOTHER_DEVICE = [
    Bad("k and v on another device", _with(k=lambda kw: kw["k"].to("meta"), v=lambda kw: kw["v"].to("meta")),
        ValueError, ("k",)),
    Bad("v on another device", _with(v=lambda kw: kw["v"].to("meta")), ValueError, ("v",)),
    Bad("q on another device", _with(q=lambda kw: kw["q"].to("meta")), ValueError, ("q",)),
]


@pytest.mark.parametrize("fn_name", ["attention", "attention_tiled"])
@pytest.mark.parametrize("moved", ANOTHER_DEVICE, ids=[b.id for b in ANOTHER_DEVICE])
def test_rejects_tensors_on_another_device(impl, device, fn_name, moved):
    """q, k and v must be on one device: any on another raises ValueError naming it, before
    anything is computed (the other device here is "meta", whose tensors hold no data, so an
    implementation that does not check fails in a matmul or returns a meta tensor)."""
    assert_rejects_without_data(impl.get(fn_name), moved.apply(_valid(device)), moved)
