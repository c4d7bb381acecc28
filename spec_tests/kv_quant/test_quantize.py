"""quantize_kv / dequantize_kv (course 05.06): per-token-head scales, the format's step as the error,
exact round trips, ties to even, every row independent of every other, the byte count.

Bounded-exhaustive where the domain is small: every finite E4M3 value and every int8 code round-trip
exactly; every midpoint between two neighbouring E4M3 values, and every k + 1/2 in INT8, rounds to
the even neighbour."""
from __future__ import annotations

import itertools
import re

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.strategies import generator, seeds
from spec_tests.kv_quant.oracles import CODE, QMAX, SCALE_MIN, contract_scale, dequantized, element_bound

FMTS = ("fp8", "int8")
X_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
            "float64": torch.float64}


def _scaled(n: int) -> int:
    return max(1, round(n * settings().max_examples / 25))


def e4m3_values() -> torch.Tensor:
    """Every finite float8_e4m3fn value (all 256 bit patterns but the two NaNs), as float32."""
    v = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()
    return v[~v.isnan()]


def _rows(shape, profile: str, seed: int, dtype: torch.dtype) -> torch.Tensor:
    g = generator(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if profile == "outliers":
        x[..., 0, :] *= 1000.0
    elif profile == "mixed":
        lo, hi = (-12, 10) if dtype == torch.float16 else (-40, 40)     # float16 tops out at 65504
        x *= 2.0 ** torch.randint(lo, hi + 1, (*shape[:-1], 1), generator=g).double()
    elif profile == "zero_rows":
        x[torch.rand(shape[:-1], generator=g) < 0.3] = 0.0
    elif profile == "tiny":   # bf16/float32 keep float32's exponent range: rows far below 2^-126 * QMAX
        x *= 2.0 ** -130 if dtype in (torch.bfloat16, torch.float32) else 2.0 ** -20
    elif profile == "huge":
        x *= 2.0 ** 120 if dtype in (torch.bfloat16, torch.float32) else 2.0 ** 10
    elif profile == "one_element":   # a single non-zero value per row: y = +-QMAX exactly there
        x = torch.zeros(shape, dtype=torch.float64)
        x[..., -1] = torch.randn(shape[:-1], generator=g, dtype=torch.float64)
    return x.to(dtype)


PROFILES = ("normal", "outliers", "mixed", "zero_rows", "tiny", "huge", "one_element")


def _check_quantized(impl, x: torch.Tensor, fmt: str):
    """The law of one quantize_kv call: kinds and shapes, the scale, the element bound, and that
    dequantize_kv in float64 is codes x scale."""
    before = x.clone()
    codes, scale = impl.get("quantize_kv")(x, CODE[fmt])
    assert torch.equal(x, before), "quantize_kv modified its input x"
    assert isinstance(codes, torch.Tensor) and codes.dtype == CODE[fmt] and codes.shape == x.shape, (
        f"codes must be {CODE[fmt]} of x's shape {tuple(x.shape)}, got "
        f"{getattr(codes, 'dtype', type(codes))} {tuple(getattr(codes, 'shape', ()))}")
    assert isinstance(scale, torch.Tensor) and scale.dtype == torch.float32 and scale.shape == x.shape[:-1], (
        f"scale must be float32 of shape x.shape[:-1] = {tuple(x.shape[:-1])}, got "
        f"{getattr(scale, 'dtype', type(scale))} {tuple(getattr(scale, 'shape', ()))}")
    want = contract_scale(x, fmt)
    rel = ((scale.double() - want).abs() / want).max() if want.numel() else 0.0
    assert rel <= 2.0 ** -23, (
        f"scale must be max(absmax / {QMAX[fmt]:g}, 2^-126) per token-head (to float32 rounding): "
        f"off by a relative {float(rel):.3g}")
    if fmt == "int8":
        assert bool((codes != -128).all()), "INT8 codes are -127..127 (symmetric); -128 appeared"
    else:
        assert not bool(codes.float().isnan().any()), "an E4M3 code is NaN: a value saturated past 448"
    xhat = dequantized(codes, scale)
    err = (xhat - x.double()).abs()
    bound = element_bound(x, fmt)
    if (err > bound).any():
        flat = int((err - bound).argmax())
        idx = tuple(int(j) for j in torch.unravel_index(torch.tensor(flat), err.shape))
        raise AssertionError(
            f"{fmt}: |codes * scale - x| = {float(err[idx]):.4g} > the format's half step {float(bound[idx]):.4g} "
            f"at {idx}: x = {float(x[idx]):.6g}, code {float(codes[idx].float()):g}, scale {float(scale[idx[:-1]]):.6g} "
            f"(bound: INT8 scale/2, E4M3 max(2^-4 |x|, 2^-10 scale), + 2^-20 (|x| + scale))")
    return codes, scale


@example(fmt="int8", profile="zero_rows", dtype="bfloat16", seed=1).via("mutant:no_scale_floor mutant:int8_qmax_128")
@example(fmt="fp8", profile="outliers", dtype="float16", seed=2).via("mutant:scale_from_max")
@example(fmt="int8", profile="tiny", dtype="bfloat16", seed=3).via(
    "boundary: rows of ~1e-40 (bf16 keeps float32's range): absmax / 127 is subnormal, the floor 2^-126 applies")
@settings(max_examples=_scaled(30))
@given(fmt=st.sampled_from(FMTS), profile=st.sampled_from(PROFILES), dtype=st.sampled_from(tuple(X_DTYPES)),
       seed=seeds)
def test_error_within_the_formats_half_step(impl, fmt, profile, dtype, seed):
    """Every element of (tokens, kv_heads, head_dim) dequantises within the format's half step of
    itself: INT8 scale/2, E4M3 max(2^-4 |x|, 2^-10 scale) (3 mantissa bits; the subnormal floor),
    with scale = max(absmax / QMAX, 2^-126) per token-head (float32 rounding aside); codes never
    saturate (no NaN E4M3 code, no -128); outlier tokens, rows of mixed magnitudes 2^-40..2^40,
    zero rows, rows near float32's smallest and largest numbers."""
    _check_quantized(impl, _rows((5, 3, 32), profile, seed, X_DTYPES[dtype]), fmt)


@pytest.mark.parametrize("fmt", FMTS)
def test_zero_rows_are_exact_zeros(impl, fmt):
    """A token-head that is all zero (padding, a zeroed head) quantises to codes 0 and a finite,
    positive scale, and dequantises to exactly 0: no 0/0. Mutant: no_scale_floor."""
    x = torch.zeros(4, 2, 16, dtype=torch.bfloat16)
    x[1, 0] = torch.linspace(-3, 3, 16)
    codes, scale = impl.get("quantize_kv")(x, CODE[fmt])
    zero = torch.ones(4, 2, dtype=torch.bool)
    zero[1, 0] = False
    assert bool((codes[zero].float() == 0).all()), f"codes of a zero row must be 0, got {codes[zero].float()}"
    assert bool(torch.isfinite(scale).all() & (scale > 0).all()), f"scales must be finite and > 0, got {scale}"
    back = impl.get("dequantize_kv")(codes, scale, torch.float32)
    assert bool((back[zero] == 0).all()), "a zero row must dequantise to exactly 0"


def _grid(values: torch.Tensor, top: float, s: float) -> torch.Tensor:
    """One row holding every value of ``values`` (and +-top, so absmax / QMAX = s exactly), times s."""
    row = torch.cat([values, torch.tensor([top, -top])])
    return row * s


@pytest.mark.parametrize("fmt,dtype", list(itertools.product(FMTS, ("float32", "bfloat16", "float16"))))
def test_representable_values_round_trip_exactly(impl, fmt, dtype):
    """Exhaustive: a row holding every finite E4M3 value (every int8 code -127..127), with +-QMAX
    present and times a power of two s, has scale exactly s, codes exactly those values, and
    dequantises to itself bit for bit (in float32, and in x's dtype) -- for s from 2^-15 to 2^7
    (float16's range) or 2^-100 to 2^100 (float32/bfloat16)."""
    values = e4m3_values() if fmt == "fp8" else torch.arange(-127, 128, dtype=torch.float32)
    exps = range(-15, 8, 2) if dtype == "float16" else range(-100, 101, 20)
    dt = X_DTYPES[dtype]
    x = torch.stack([_grid(values, QMAX[fmt], 2.0 ** e) for e in exps]).to(dt)[:, None]   # (tokens, 1 head, d)
    codes, scale = impl.get("quantize_kv")(x, CODE[fmt])
    want_s = torch.tensor([2.0 ** e for e in exps])[:, None]
    assert torch.equal(scale, want_s), f"scale must be exactly absmax / {QMAX[fmt]:g} = s here, got {scale.flatten()}"
    assert torch.equal(codes.float(), (x.double() / want_s[..., None].double()).float()), (
        "codes of representable values must be exactly those values")
    for target in (torch.float32, dt):
        back = impl.get("dequantize_kv")(codes, scale, target)
        assert back.dtype == target and torch.equal(back, x.to(target)), (
            f"dequantize_kv(quantize_kv(x)) must give back representable x exactly ({target})")


def test_ties_round_to_even(impl):
    """Exhaustive: every midpoint between two neighbouring finite E4M3 values (252 of them) and
    every k + 1/2 for int8 (-127 < k + 1/2 < 127), scaled so that y = x / s is that midpoint
    exactly, rounds to the neighbour with the even last bit (round half to even, both formats).
    Mutant: round_half_away."""
    pos = e4m3_values()
    pos = torch.unique(pos[pos >= 0])                                  # 0 .. 448, ascending
    mids = (pos[:-1] + pos[1:]) / 2
    low_bits = pos.to(torch.float8_e4m3fn).view(torch.uint8)
    even = torch.where(low_bits[:-1] % 2 == 0, pos[:-1], pos[1:])
    x = torch.cat([mids, -mids, torch.tensor([448.0])])[None, None]   # absmax 448: s = 1
    codes, scale = impl.get("quantize_kv")(x, torch.float8_e4m3fn)
    assert float(scale) == 1.0
    got = codes.float()[0, 0, :-1]
    want = torch.cat([even, -even])
    bad = (got != want).nonzero()
    assert bad.numel() == 0, (f"E4M3 midpoint {float(x[0, 0, bad[0, 0]])} rounded to {float(got[bad[0, 0]])}, "
                              f"round half to even gives {float(want[bad[0, 0]])}")
    half = torch.arange(-127, 127, dtype=torch.float32) + 0.5
    x = torch.cat([half, torch.tensor([127.0])])[None, None]          # absmax 127: s = 1
    codes, scale = impl.get("quantize_kv")(x, torch.int8)
    want = torch.round(half)                                          # torch.round: half to even
    got = codes.float()[0, 0, :-1]
    bad = (got != want).nonzero()
    assert bad.numel() == 0, (f"INT8: y = {float(half[bad[0, 0]])} rounded to {float(got[bad[0, 0]])}, "
                              f"round half to even gives {float(want[bad[0, 0]])}")


@settings(max_examples=_scaled(10))
@given(fmt=st.sampled_from(FMTS), seed=seeds, token=st.integers(0, 5), head=st.integers(0, 1),
       magnitude=st.sampled_from([0.0, 1e-30, 1.0, 1e4, 1e30]))
def test_one_token_head_does_not_change_another(impl, fmt, seed, token, head, magnitude):
    """Per-token-head scales: replacing one token-head's values (by zeros, an outlier 1e30, ...)
    changes the codes and scale of that token-head only; and a token quantised alone gets the
    codes and scale it gets inside the whole cache (the paged layout: appending a token never
    rewrites another). Mutant: per_tensor_scale."""
    g = generator(seed)
    x = torch.randn(6, 2, 16, generator=g).to(torch.bfloat16)
    y = x.clone()
    y[token, head] = (torch.randn(16, generator=g) * magnitude).to(torch.bfloat16)
    fn = impl.get("quantize_kv")
    cx, sx = fn(x, CODE[fmt])
    cy, sy = fn(y, CODE[fmt])
    other = torch.ones(6, 2, dtype=torch.bool)
    other[token, head] = False
    same = lambda a, b: torch.equal(a.view(torch.uint8), b.view(torch.uint8))  # noqa: E731
    assert same(cx[other], cy[other]) and torch.equal(sx[other], sy[other]), (
        f"changing token {token} head {head} changed another token-head's codes or scale")
    ct, st_ = fn(x[token:token + 1], CODE[fmt])
    assert same(ct, cx[token:token + 1]) and torch.equal(st_, sx[token:token + 1]), (
        "a token quantised alone must get the codes and scales it gets inside the cache")


@pytest.mark.choice("the reference's float32 arithmetic: s = max(fl(absmax / QMAX), 2^-126), code = RN(fl(x / s))")
@pytest.mark.parametrize("fmt", FMTS)
def test_codes_bit_for_bit(impl, fmt):
    """The reference's own arithmetic, exactly: the scale fl32(absmax / QMAX) floored at 2^-126,
    the code RN(fl32(x / s)) by torch's float8 cast / torch.round. (A law-abiding implementation
    that multiplies by 1/s, or keeps the scale in another precision, may differ by one code.)"""
    x = _rows((8, 2, 32), "mixed", 11, torch.float32)
    codes, scale = impl.get("quantize_kv")(x, CODE[fmt])
    s = torch.clamp(x.abs().amax(-1) / QMAX[fmt], min=SCALE_MIN)
    y = x / s[..., None]
    want = y.to(CODE[fmt]) if fmt == "fp8" else torch.round(y).to(torch.int8)
    assert torch.equal(scale, s), "scale differs from fl32(absmax / QMAX)"
    assert torch.equal(codes.view(torch.uint8), want.view(torch.uint8)), "codes differ from RN(fl32(x / s))"


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("target", ("float16", "bfloat16", "float32", "float64"))
def test_dequantize_is_codes_times_scale(impl, fmt, target):
    """dequantize_kv(codes, scale, dtype) is codes x scale rounded once to ``dtype`` (within one
    ulp of the exact product; float64: exact), for every code and scales from 2^-126 to 2^60
    (2^-14..2^5 for float16); a NaN scale (a slot never written) gives NaN."""
    codes = (torch.arange(256, dtype=torch.int32).to(torch.uint8).view(CODE[fmt]))
    if fmt == "fp8":
        codes = codes[~codes.float().isnan()]
    dt = X_DTYPES[target]
    exps = range(-14, 6) if target == "float16" else range(-126, 61, 11)
    scale = torch.tensor([2.0 ** e * 1.3 for e in exps], dtype=torch.float32)
    c = codes[None].expand(len(scale), -1)
    out = impl.get("dequantize_kv")(c, scale, dt)
    assert out.dtype == dt and out.shape == c.shape
    exact = dequantized(c, scale)
    if dt == torch.float64:
        assert torch.equal(out, exact), "dequantize_kv to float64 must be the exact product"
    else:
        ulp = torch.finfo(dt).eps * 2.0 ** torch.floor(torch.log2(exact.abs().clamp(min=torch.finfo(dt).tiny)))
        err = (out.double() - exact).abs()
        assert bool((err <= ulp).all()), f"dequantize_kv off by {float((err / ulp).max()):.3g} ulp of {target}"
    nan = impl.get("dequantize_kv")(c[:1], torch.tensor([float("nan")]), torch.float32)
    assert bool(nan.isnan().all()), "a NaN scale must dequantise to NaN (an unwritten slot must not look valid)"


# ------------------------------------------------------------------------------ bytes
@pytest.mark.parametrize("fmt", FMTS)
def test_bytes_equal_what_quantize_allocates(impl, fmt):
    """Exhaustive over small shapes: quantized_kv_bytes equals the bytes of the codes and scales
    that quantize_kv returns for the K and V of every layer of that cache; for a float dtype, the
    bytes of the cache itself (no scales). And the closed form 2 L H N B (D + 4) for a code dtype."""
    fn, q = impl.get("quantized_kv_bytes"), impl.get("quantize_kv")
    for layers, kv_heads, head_dim, seq_len, batch in itertools.product((1, 2), (1, 3), (1, 8), (0, 1, 5), (0, 2)):
        x = torch.zeros(batch, seq_len, kv_heads, head_dim)
        codes, scale = q(x, CODE[fmt])
        real = 2 * layers * (codes.untyped_storage().nbytes() + scale.untyped_storage().nbytes())
        got = fn(layers=layers, kv_heads=kv_heads, head_dim=head_dim, seq_len=seq_len, batch=batch, dtype=CODE[fmt])
        assert got == real == 2 * layers * kv_heads * seq_len * batch * (head_dim + 4), (
            f"quantized_kv_bytes(layers={layers}, kv_heads={kv_heads}, head_dim={head_dim}, seq_len={seq_len}, "
            f"batch={batch}, {fmt}) = {got}; the codes + scales quantize_kv allocates hold {real}")
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        x = torch.zeros(2, 5, 3, 8, dtype=dt)
        assert fn(layers=4, kv_heads=3, head_dim=8, seq_len=5, batch=2, dtype=dt) == 2 * 4 * x.untyped_storage().nbytes()


def test_bytes_defaults_and_a_model(impl):
    """The default dtype is float8_e4m3fn and batch 1; a Llama-3-8B-shaped cache (32 layers, 8 KV
    heads, head_dim 128) at 8k tokens: FP8 + scales 2 x 32 x 8 x 8192 x 132 = 553,648,128 bytes,
    bf16 1,073,741,824 (1.94x); an exact int at 2^62 bytes."""
    fn = impl.get("quantized_kv_bytes")
    shape = dict(layers=32, kv_heads=8, head_dim=128, seq_len=8192)
    assert fn(**shape) == fn(**shape, batch=1, dtype=torch.float8_e4m3fn) == 553_648_128
    assert fn(**shape, dtype=torch.int8) == 553_648_128
    assert fn(**shape, dtype=torch.bfloat16) == 1_073_741_824
    big = fn(layers=1, kv_heads=1, head_dim=2 ** 20 - 4, seq_len=2 ** 40, batch=2)
    assert isinstance(big, int) and big == 2 ** 62


# ------------------------------------------------------------------------------ bad input
def _valid_q():
    return dict(x=torch.randn(3, 2, 8, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16),
                dtype=torch.float8_e4m3fn)   # seeded: the docs page renders rows built from it


BAD_QUANTIZE = [
    Bad("x not a tensor", lambda kw: {**kw, "x": kw["x"].tolist()}, TypeError, ("x",)),
    Bad("integer x", lambda kw: {**kw, "x": kw["x"].long()}, TypeError, ("x",)),
    Bad("x rank 0", lambda kw: {**kw, "x": kw["x"][0, 0, 0]}, ValueError, ("x",)),
    Bad("head_dim 0", lambda kw: {**kw, "x": kw["x"][..., :0]}, ValueError, ("x",)),
    Bad("NaN in x", lambda kw: {**kw, "x": kw["x"].index_fill(0, torch.tensor([1]), float("nan"))},
        ValueError, ("x",)),
    Bad("inf in x", lambda kw: {**kw, "x": kw["x"].index_fill(2, torch.tensor([3]), float("inf"))},
        ValueError, ("x",)),
    Bad("dtype float16", dict(dtype=torch.float16), TypeError, ("dtype",)),
    Bad("dtype e5m2", dict(dtype=torch.float8_e5m2), TypeError, ("dtype",)),
    Bad("dtype uint8", dict(dtype=torch.uint8), TypeError, ("dtype",)),
    Bad("dtype a string", dict(dtype="fp8"), TypeError, ("dtype",)),
]


@bad_cases(BAD_QUANTIZE)
def test_quantize_rejects_bad_input(impl, bad):
    """quantize_kv: a non-floating or non-tensor x -> TypeError, a scalar, an empty head_dim or a
    non-finite value -> ValueError, each naming x; a storage dtype other than float8_e4m3fn/int8
    -> TypeError naming dtype; x unchanged."""
    assert_rejects(impl.get("quantize_kv"), _valid_q, bad)


def _valid_dq():
    codes, scale = torch.zeros(3, 2, 8, dtype=torch.int8), torch.ones(3, 2)
    return dict(codes=codes, scale=scale, dtype=torch.bfloat16)


BAD_DEQUANTIZE = [
    Bad("codes float16", lambda kw: {**kw, "codes": kw["codes"].half()}, TypeError, ("codes",)),
    Bad("codes not a tensor", lambda kw: {**kw, "codes": kw["codes"].tolist()}, TypeError, ("codes",)),
    Bad("scale float16", lambda kw: {**kw, "scale": kw["scale"].half()}, TypeError, ("scale",)),
    Bad("scale with head_dim", lambda kw: {**kw, "scale": torch.ones(3, 2, 8)}, ValueError, ("scale",)),
    Bad("scale one token short", lambda kw: {**kw, "scale": kw["scale"][:2]}, ValueError, ("scale",)),
    Bad("target int8", dict(dtype=torch.int8), TypeError, ("dtype",)),
    Bad("codes rank 0", lambda kw: {**kw, "codes": kw["codes"][0, 0, 0], "scale": kw["scale"][0, 0]}, ValueError,
        ("codes",)),
]


@bad_cases(BAD_DEQUANTIZE)
def test_dequantize_rejects_bad_input(impl, bad):
    """dequantize_kv: codes not float8_e4m3fn/int8, a scale not float32 or not of codes' shape
    without head_dim, a target that is not a float dtype: TypeError/ValueError naming it."""
    assert_rejects(impl.get("dequantize_kv"), _valid_dq, bad)


def test_dequantize_rejects_a_scale_on_another_device(impl):
    """A scale on another device than the codes raises ValueError naming scale (here "meta": a
    tensor without data, so the no-change check cannot run)."""
    kw = _valid_dq()
    try:
        impl.get("dequantize_kv")(kw["codes"], kw["scale"].to("meta"), kw["dtype"])
    except ValueError as exc:
        assert re.search(r"(?<!\w)scale(?!\w)", str(exc)), f"the ValueError should name scale; it says: {exc}"
    except Exception as exc:
        raise AssertionError(f"a scale on another device: expected ValueError, got {type(exc).__name__}: {exc}")
    else:
        raise AssertionError("a scale on another device than the codes was accepted; expected ValueError")


BYTES = dict(layers=2, kv_heads=2, head_dim=8, seq_len=4, batch=1, dtype=torch.int8)
BAD_BYTES = [
    Bad("zero layers", dict(layers=0), ValueError, ("layers",)),
    Bad("float head_dim", dict(head_dim=8.0), TypeError, ("head_dim",)),
    Bad("negative seq_len", dict(seq_len=-1), ValueError, ("seq_len",)),
    Bad("bool batch", dict(batch=True), TypeError, ("batch",)),
    Bad("zero kv_heads", dict(kv_heads=0), ValueError, ("kv_heads",)),
    Bad("dtype uint8", dict(dtype=torch.uint8), TypeError, ("dtype",)),
    Bad("dtype a string", dict(dtype="int8"), TypeError, ("dtype",)),
]


@bad_cases(BAD_BYTES)
def test_bytes_rejects_bad_input(impl, bad):
    """quantized_kv_bytes: kv_bytes' size checks (naming the argument) and a dtype that is neither a
    code dtype nor a float dtype -> TypeError naming dtype."""
    assert_rejects(impl.get("quantized_kv_bytes"), BYTES, bad)
