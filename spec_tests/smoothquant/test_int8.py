"""W8A8 (05.04-05.05): symmetric INT8 of activations (per tensor / per token) and weights (per tensor /
per output channel), the exact int32 matmul, the rescaled product and its error bound, and the
claim itself: on the stated outlier model, W8A8 after smoothing is more accurate than before.

Bounds (oracles.py, reference/smoothquant.py's module doc). Codes are compared with a float64
oracle exactly, except where ``t / scale`` lies within 8 units of roundoff of a rounding midpoint
(there a code may differ by 1; the product test adds the slack such a flip can cause). The product
error bound per element is ``B = sum_k sx/2 |w| + sw/2 |x| + sx sw / 4``; the test allows
``B (1 + 256 u) + 8 u (|y| + B)`` plus the output dtype's rounding ``u_out (|y| + B)`` (the rounding
of ``t / scale`` near 127 and of the scales and the rescale).

The outlier model (strategies.OutlierCase): x (32, 64), w (32, 64) i.i.d. N(0, 1), 4 channels of
x multiplied by U[10, 100]; alpha 0.5, calibrated on x. Measured over 5,000 seeds
(spec_tests/smoothquant/figures.py --ratios): the ratio error_before / error_after (Frobenius
norms) had minimum 2.59 (per-tensor activations) and 2.14 (per-token), and its logarithm mean /
standard deviation 1.39 / 0.139 and 1.24 / 0.124: ten standard deviations from 0, so a normal fit
puts the false-alarm rate of "after <= before" below 1e-20 per example.
"""
from __future__ import annotations

import torch
from hypothesis import example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.smoothquant import oracles
from spec_tests.smoothquant.oracles import compute_of, unit
from spec_tests.smoothquant.strategies import LinearCase, OutlierCase, linear_cases, outlier_cases


def _check_codes(name, q, scale, t, want_scale_shape, per_row, static=None):
    """q, scale against the float64 oracle (codes exact away from ambiguous midpoints)."""
    assert isinstance(q, torch.Tensor) and q.dtype == torch.int8 and q.shape == t.shape, (
        f"{name} codes: {getattr(q, 'dtype', type(q).__name__)} {tuple(getattr(q, 'shape', ()))}, "
        f"expected int8 {tuple(t.shape)}")
    cdt = compute_of(t.dtype)
    assert isinstance(scale, torch.Tensor) and scale.shape == want_scale_shape and scale.dtype == cdt, (
        f"{name} scale: {getattr(scale, 'dtype', type(scale).__name__)} {tuple(getattr(scale, 'shape', ()))}, "
        f"expected {cdt} {want_scale_shape}")
    want_scale = (torch.tensor(static, dtype=torch.float64) if static is not None
                  else oracles.scale_of(oracles.row_absmax(t, per_row)))
    rel = ((scale.to(torch.float64) - want_scale).abs() / want_scale)
    assert rel.numel() == 0 or float(rel.max()) <= 2 * unit(cdt), (
        f"{name} scale {scale.flatten()[:4].tolist()}... != absmax / 127 = {want_scale.flatten()[:4].tolist()}...")
    want, ambiguous = oracles.quantize(t, want_scale)
    diff = (q.to(torch.int64) - want)
    wrong = (diff != 0) & ~(ambiguous & (diff.abs() == 1))
    if bool(wrong.any()):
        i = tuple(wrong.nonzero()[0].tolist())
        r = float(t.to(torch.float64)[i] / want_scale.expand(t.shape)[i])
        raise AssertionError(f"{name}: code {int(q[i])} at {i}, expected {int(want[i])} "
                             f"(value {float(t[i])!r} / scale = {r!r}, round half to even, clamp to +-127)")


@example(case=LinearCase(3, 5, 1, seed=1, dtype="float32"), per_token=True).via("mutant:scale_over_128")
@example(case=LinearCase(3, 5, 1, seed=1, dtype="float32"), per_token=False).via("mutant:per_tensor_scale_from_max")
@example(case=LinearCase(0, 5, 1, seed=1, dtype="float32"), per_token=True).via("mutant:scale_over_128")
@given(case=linear_cases(dtypes=("float64", "float32", "float16", "bfloat16"), min_tokens=0), per_token=st.booleans())
def test_quantize_activations(impl, case, per_token):
    """x_scale = absmax / 127 per token (shape (tokens, 1)) or per tensor (shape ()), in the compute
    dtype; x_q = round_half_even(x / x_scale) as int8; 0 tokens legal; the input is unchanged."""
    x, _ = case.tensors()
    x0 = x.clone()
    q, scale = impl.get("quantize_activations")(x, per_token=per_token)
    assert torch.equal(x, x0), "quantize_activations modified x"
    _check_codes("x_q", q, scale, x, (case.tokens, 1) if per_token else (), per_token)


@example(case=LinearCase(1, 5, 3, seed=2, dtype="float64"), per_channel=True).via("mutant:weight_scale_per_input_channel")
@example(case=LinearCase(1, 5, 3, seed=2, dtype="float64"), per_channel=False).via("boundary: one per-tensor weight scale")
@given(case=linear_cases(dtypes=("float64", "float32", "float16", "bfloat16")), per_channel=st.booleans())
def test_quantize_weights(impl, case, per_channel):
    """w_scale = absmax / 127 per output channel (row of W (out, in), shape (out, 1)) or per tensor
    (shape ()); w_q = round_half_even(w / w_scale) as int8."""
    _, w = case.tensors()
    q, scale = impl.get("quantize_weights")(w, per_channel=per_channel)
    _check_codes("w_q", q, scale, w, (case.out_features, 1) if per_channel else (), per_channel)


def test_quantize_defaults(impl):
    """Omitted granularity means per token (activations) and per output channel (weights)."""
    x, w = LinearCase(4, 6, 5, seed=3, dtype="float32", outliers=1).tensors()
    qa, sa = impl.get("quantize_activations")(x)
    qw, sw = impl.get("quantize_weights")(w)
    assert tuple(sa.shape) == (4, 1), f"quantize_activations(x) scale shape {tuple(sa.shape)}: per token by default"
    assert tuple(sw.shape) == (5, 1), f"quantize_weights(w) scale shape {tuple(sw.shape)}: per channel by default"
    y = impl.get("w8a8_linear")(x, w)
    y_pt = impl.get("w8a8_linear")(x, w, per_token=True, per_channel=True)
    assert torch.equal(y, y_pt), "w8a8_linear(x, w) must mean per_token=True, per_channel=True"


@example(scale=1.0, dtype="float64").via("mutant:no_saturation")
@given(scale=st.sampled_from([1.0, 0.37, 2.0**-6, 1e3]), dtype=st.sampled_from(["float64", "float32"]))
def test_static_scale_saturates(impl, scale, dtype):
    """A static (calibrated) per-tensor scale: every value k/2 * scale for |k| <= 600 quantises to
    clamp(round_half_even(k/2), -127, 127): beyond 127 * scale the code saturates, never wraps."""
    from conformance.strategies import DTYPES
    k = torch.arange(-600, 601, dtype=torch.float64)
    x = (k / 2 * scale).reshape(-1, 1).to(DTYPES[dtype])
    q, s = impl.get("quantize_activations")(x, per_token=False, scale=scale)
    _check_codes("x_q (static)", q, s, x, (), False, static=scale)


# ---- the int32 matmul ------------------------------------------------------------------------------
@st.composite
def int8_pairs(draw):
    t, k, n = draw(st.integers(1, 6)), draw(st.sampled_from([1, 3, 64, 1000, 4096])), draw(st.integers(1, 6))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    extreme = draw(st.booleans())
    lo, hi = (-128, -127) if extreme else (-128, 128)
    a = torch.randint(lo, hi, (t, k), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int8)
    return a, b


@given(pair=int8_pairs())
def test_int8_matmul_exact(impl, pair):
    """x_q @ w_q.T in int32 equals the int64 product exactly (any code -128..127, in up to 4096)."""
    a, b = pair
    got = impl.get("int8_matmul")(a, b)
    want = a.to(torch.int64) @ b.to(torch.int64).T
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int32 and got.shape == want.shape, (
        f"int8_matmul: {getattr(got, 'dtype', type(got).__name__)} {tuple(getattr(got, 'shape', ()))}, "
        f"expected int32 {tuple(want.shape)}")
    assert torch.equal(got.to(torch.int64), want), f"int8_matmul differs from the exact product at {(got.to(torch.int64) != want).nonzero()[0].tolist()}"


def test_int8_matmul_past_float32(impl):
    """Sums past 2**24 that are odd (no float32 holds them) and the largest legal in (131071) with
    every code -128 (2**31 - 2**14, the int32 headroom) are exact. Mutant: float32_accumulation."""
    f = impl.get("int8_matmul")
    a = torch.tensor([[127] * 1100 + [1], [-128] * 1100 + [3]], dtype=torch.int8)
    b = torch.tensor([[127] * 1100 + [1], [127] * 1100 + [-1]], dtype=torch.int8)
    want = [[sum(p * q for p, q in zip(r, c)) for c in b.tolist()] for r in a.tolist()]  # Python ints
    assert want[0][0] == 1100 * 16129 + 1 > 2**24 and all(v % 2 for row in want for v in row)
    got = f(a, b).tolist()
    assert got == want, f"int8_matmul = {got}, exact {want} (odd sums past 2**24: a float32 sum cannot hold them)"
    k = 131071
    big = torch.full((1, k), -128, dtype=torch.int8)
    mixed = torch.cat([big, torch.full((1, k), 127, dtype=torch.int8)])
    got = f(mixed, big).tolist()
    assert got == [[k * 16384], [-k * 127 * 128]], f"in = {k}: {got}, exact {[[k * 16384], [-k * 127 * 128]]}"


# ---- the W8A8 product ------------------------------------------------------------------------------
def _w8a8_call(impl, x, w, per_token, per_channel, act_scale=None):
    kw = dict(per_token=per_token, per_channel=per_channel)
    if act_scale is not None:
        kw["act_scale"] = act_scale
    return impl.get("w8a8_linear")(x, w, **kw)


@example(case=LinearCase(3, 9, 4, seed=5, dtype="float32", outliers=1), per_token=True, per_channel=True).via("mutant:rescale_transposed")
@example(case=LinearCase(4, 9, 4, seed=5, dtype="float32", outliers=1), per_token=True, per_channel=True).via("mutant:rescale_transposed")
@given(case=linear_cases(dtypes=("float64", "float32", "bfloat16"), min_tokens=0), per_token=st.booleans(),
       per_channel=st.booleans())
def test_w8a8_matches_oracle(impl, case, per_token, per_channel):
    """w8a8_linear(x, w) == sum_k q_x[i,k] q_w[j,k] * sx[i] * sw[j] (the float64 oracle), up to the
    rescale's rounding (8 u |y| + the output dtype's u |y|) and a code flip at ambiguous midpoints;
    (tokens, out) in x's dtype."""
    x, w = case.tensors()
    got = _w8a8_call(impl, x, w, per_token, per_channel)
    y, slack, _, _ = oracles.w8a8(x, w, per_token=per_token, per_channel=per_channel)
    assert isinstance(got, torch.Tensor) and got.dtype == x.dtype and got.shape == y.shape, (
        f"w8a8_linear: {getattr(got, 'dtype', type(got).__name__)} {tuple(getattr(got, 'shape', ()))}, "
        f"expected {x.dtype} {tuple(y.shape)}")
    u, u_out = unit(compute_of(x.dtype)), unit(x.dtype)
    tol = slack + (8 * u + u_out) * y.abs() + torch.finfo(x.dtype).tiny
    excess = (got.to(torch.float64) - y).abs() - tol
    if excess.numel() and float(excess.max()) > 0:
        i = tuple(int(v) for v in torch.unravel_index(excess.argmax(), excess.shape))
        raise AssertionError(f"w8a8_linear{i} = {float(got[i])!r}, the int8 oracle gives {float(y[i])!r} "
                             f"(allowed {float(tol[i]):.3e}); per_token={per_token}, per_channel={per_channel}")


@example(case=LinearCase(6, 30, 5, seed=7, dtype="float64", outliers=3), per_token=False, per_channel=True).via(
    "boundary: three outlier channels, per-tensor activations, per-channel weights")
@given(case=linear_cases(dtypes=("float64", "float32", "bfloat16")), per_token=st.booleans(), per_channel=st.booleans())
def test_w8a8_error_bound(impl, case, per_token, per_channel):
    """|w8a8_linear(x, w) - x w^T| <= B = sum_k sx/2 |w_jk| + sw/2 |x_ik| + sx sw / 4 per element
    (scales absmax / 127), with the rounding allowance of this file's docstring."""
    x, w = case.tensors()
    got = _w8a8_call(impl, x, w, per_token, per_channel).to(torch.float64)
    sx = oracles.scale_of(oracles.row_absmax(x, per_token))
    sw = oracles.scale_of(oracles.row_absmax(w, per_channel))
    bound = oracles.error_bound(x, w, sx, sw)
    exact = x.to(torch.float64) @ w.to(torch.float64).T
    u, u_out = unit(compute_of(x.dtype)), unit(x.dtype)
    allowed = bound * (1 + 256 * u) + (8 * u + u_out) * (exact.abs() + bound)
    excess = (got - exact).abs() - allowed
    assert float(excess.max()) <= 0, (
        f"W8A8 error {float((got - exact).abs().max()):.3e} exceeds the scale bound (worst excess "
        f"{float(excess.max()):.3e}); per_token={per_token}, per_channel={per_channel}")


@example(case=LinearCase(4, 8, 3, seed=8, dtype="float32"), shrink=0.5).via("mutant:no_saturation")
@given(case=linear_cases(dtypes=("float64", "float32")), shrink=st.sampled_from([0.5, 1.0, 2.0]))
def test_w8a8_static_activation_scale(impl, case, shrink):
    """With act_scale (static, per tensor: e.g. a calibrated absmax / 127 times ``shrink``), the
    product is the oracle's with that scale, activations beyond 127 * act_scale saturated."""
    x, w = case.tensors()
    act_scale = float(max(x.abs().max(), 1e-30)) / 127 * shrink
    got = _w8a8_call(impl, x, w, False, True, act_scale)
    y, slack, _, _ = oracles.w8a8(x, w, per_token=False, per_channel=True, act_scale=act_scale)
    u = unit(compute_of(x.dtype))
    excess = (got.to(torch.float64) - y).abs() - slack - 8 * u * y.abs() - torch.finfo(x.dtype).tiny
    assert float(excess.max()) <= 0, f"static act_scale={act_scale:.4g}: off by {float(excess.max()):.3e} from the oracle"


# ---- the claim: smoothing makes W8A8 more accurate on the outlier model ------------------------------
def _w8a8_error(impl, x, w, per_token, alpha=None):
    """||W8A8 of (x, w) -- smoothed first with ``alpha`` -- minus the ORIGINAL float product||_F: a
    migration that changes the product (a wrong axis) shows as error, not hidden by comparing the
    smoothed pair with itself."""
    exact = x.to(torch.float64) @ w.to(torch.float64).T
    if alpha is not None:
        s = impl.get("smoothing_factors")(impl.get("calibrate_absmax")([x]), w, alpha)
        x, w = impl.get("smooth")(x, w, s)
    return float((impl.get("w8a8_linear")(x, w, per_token=per_token).to(torch.float64) - exact).norm())


@example(case=OutlierCase(seed=0), per_token=False).via("mutant:smooth_divides_weight_rows")
@settings(max_examples=10)
@given(case=outlier_cases, per_token=st.booleans())
def test_smoothing_reduces_w8a8_error(impl, case, per_token):
    """On the outlier model (module doc), ||W8A8(X', W') - X W^T||_F <= ||W8A8(X, W) - X W^T||_F
    with alpha = 0.5 (false-alarm rate < 1e-20 per example, module doc)."""
    x, w = case.tensors()
    before = _w8a8_error(impl, x, w, per_token)
    after = _w8a8_error(impl, x, w, per_token, alpha=0.5)
    assert after <= before, (f"smoothing (alpha 0.5) raised the W8A8 error from {before:.4g} to {after:.4g} "
                             f"(per_token={per_token}); typical ratio before/after is 2-6")


# ---- bad input -------------------------------------------------------------------------------------
_G = torch.Generator().manual_seed(0)
_X = torch.randn(3, 5, generator=_G)
_W = torch.randn(4, 5, generator=_G)
_QX = torch.randint(-128, 128, (3, 5), generator=_G, dtype=torch.int8)
_QW = torch.randint(-128, 128, (4, 5), generator=_G, dtype=torch.int8)


def _nan_at(name, where):
    def change(kw):
        t = kw[name].clone()
        t[where] = float("nan")
        return {**kw, name: t}
    return change


QA_VALID = dict(x=_X, per_token=True)
QA_BAD = [
    Bad("x int", dict(x=torch.ones(3, 5, dtype=torch.int32)), TypeError, ("x",)),
    Bad("x 1-D", dict(x=_X[0]), ValueError, ("x",)),
    Bad("x no columns", dict(x=_X[:, :0]), ValueError, ("x",)),
    Bad("x nan", _nan_at("x", (1, 2)), ValueError, ("x",)),
    Bad("per_token int", dict(per_token=1), TypeError, ("per_token",)),
    Bad("per_token None", dict(per_token=None), TypeError, ("per_token",)),
    Bad("scale zero", dict(per_token=False, scale=0.0), ValueError, ("scale",)),
    Bad("scale negative", dict(per_token=False, scale=-0.5), ValueError, ("scale",)),
    Bad("scale inf", dict(per_token=False, scale=float("inf")), ValueError, ("scale",)),
    Bad("scale string", dict(per_token=False, scale="0.1"), TypeError, ("scale",)),
    Bad("scale bool", dict(per_token=False, scale=True), TypeError, ("scale",)),
    Bad("static scale per token", dict(per_token=True, scale=0.1), ValueError, ("scale",)),
]


@bad_cases(QA_BAD)
def test_quantize_activations_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("quantize_activations"), QA_VALID, bad)


QW_VALID = dict(weight=_W, per_channel=True)
QW_BAD = [
    Bad("weight int8", dict(weight=_QW), TypeError, ("weight",)),
    Bad("weight 3-D", dict(weight=_W[None]), ValueError, ("weight",)),
    Bad("weight no rows", dict(weight=_W[:0]), ValueError, ("weight",)),
    Bad("weight inf", lambda kw: {**kw, "weight": kw["weight"] * float("inf")}, ValueError, ("weight",)),
    Bad("per_channel string", dict(per_channel="yes"), TypeError, ("per_channel",)),
]


@bad_cases(QW_BAD)
def test_quantize_weights_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("quantize_weights"), QW_VALID, bad)


MM_VALID = dict(x_q=_QX, w_q=_QW)
MM_BAD = [
    Bad("x_q float", dict(x_q=_X), TypeError, ("x_q",)),
    Bad("x_q int32", dict(x_q=_QX.to(torch.int32)), TypeError, ("x_q",)),
    Bad("w_q uint8", dict(w_q=_QW.to(torch.uint8)), TypeError, ("w_q",)),
    Bad("x_q 1-D", dict(x_q=_QX[0]), ValueError, ("x_q",)),
    Bad("w_q 3-D", dict(w_q=_QW[None]), ValueError, ("w_q",)),
    Bad("in differs", dict(w_q=_QW[:, :4]), ValueError, ("w_q",)),
    Bad("in past the int32 headroom", dict(x_q=torch.ones(1, 131072, dtype=torch.int8),
                                           w_q=torch.ones(1, 131072, dtype=torch.int8)), ValueError, ("x_q",)),
]


@bad_cases(MM_BAD)
def test_int8_matmul_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("int8_matmul"), MM_VALID, bad)


LIN_VALID = dict(x=_X, weight=_W)
LIN_BAD = [
    Bad("weight dtype differs", dict(weight=_W.double()), TypeError, ("weight",)),
    Bad("weight in differs", dict(weight=_W[:, :4]), ValueError, ("weight",)),
    Bad("weight 1-D", dict(weight=_W[0]), ValueError, ("weight",)),
    Bad("x 3-D", dict(x=_X[None]), ValueError, ("x",)),
    Bad("x not a tensor", dict(x=_X.tolist()), TypeError, ("x",)),
    Bad("x nan", _nan_at("x", (0, 0)), ValueError, ("x",)),
    Bad("per_token int", dict(per_token=0), TypeError, ("per_token",)),
    Bad("per_channel None", dict(per_channel=None), TypeError, ("per_channel",)),
    Bad("act_scale negative", dict(per_token=False, act_scale=-1.0), ValueError, ("act_scale",)),
    Bad("act_scale zero", dict(per_token=False, act_scale=0.0), ValueError, ("act_scale",)),
    Bad("act_scale with per_token", dict(per_token=True, act_scale=0.1), ValueError, ("act_scale",)),
    Bad("act_scale string", dict(per_token=False, act_scale="1"), TypeError, ("act_scale",)),
]


@bad_cases(LIN_BAD)
def test_w8a8_linear_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("w8a8_linear"), LIN_VALID, bad)
