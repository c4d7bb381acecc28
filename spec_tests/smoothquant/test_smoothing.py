"""SmoothQuant's smoothing (05.04) and calibration (05.05): the factors of eq. 4, the migration that
leaves the float product unchanged, the alpha edges, the running absmax, and bad input.

Bounds. ``u`` is the unit roundoff of the compute dtype (oracles.unit). The factors are compared
with a float64 evaluation of eq. 4 to ``16 u`` relative (a pow, a division, two conversions).
The migration in float64: each of ``x_k / s_k`` and ``w_k s_k`` is within ``2 u`` of exact (one
rounding, or two for ``x * (1/s)``), so ``|x' w'^T - x w^T|[i, j] <= (4u + 4u^2 + 2 gamma_K)
sum_k |x_ik w_jk|`` with ``gamma_K = K u / (1 - K u)`` for the two float64 matmuls of the check.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.smoothquant.oracles import compute_of, unit
from spec_tests.smoothquant.strategies import LinearCase, linear_cases

alphas = st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0))


def eq4(act_absmax: torch.Tensor, w: torch.Tensor, alpha: float) -> torch.Tensor:
    """Paper eq. 4 in float64 with the module doc's guard (s_j = 1 for a zero column)."""
    mx = act_absmax.to(torch.float64)
    mw = w.to(torch.float64).abs().amax(dim=0)
    s = mx ** alpha / mw ** (1 - alpha)
    return torch.where((mx > 0) & (mw > 0), s, torch.ones_like(s))


def _absmax(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float64).abs().amax(dim=0)


# ---- smoothing factors ---------------------------------------------------------------------------
@example(case=LinearCase(4, 6, 3, seed=1, dtype="float32"), alpha=0.25).via("mutant:alpha_swapped")
@example(case=LinearCase(3, 5, 7, seed=2, dtype="float64", outliers=1), alpha=0.5).via("mutant:weight_absmax_per_output_channel")
@given(case=linear_cases(dtypes=("float64", "float32", "bfloat16")), alpha=alphas)
def test_factors_are_eq4(impl, case, alpha):
    """s_j = max|X_j|^alpha / max|W_j|^(1-alpha) (eq. 4), max|W_j| over the output channels (column j
    of W (out, in)), within 16 u of float64, for every non-zero column; s has shape (in,)."""
    x, w = case.tensors()
    act = _absmax(x).to(compute_of(x.dtype))
    s = impl.get("smoothing_factors")(act, w, alpha)
    assert isinstance(s, torch.Tensor) and s.shape == (case.in_features,), f"s: {type(s).__name__} {getattr(s, 'shape', '')}"
    want = eq4(act, w, alpha)
    live = (act > 0) & (w.abs().amax(dim=0) > 0)
    got = s.to(torch.float64)
    rel = ((got - want).abs() / want)[live]
    tol = 16 * unit(compute_of(w.dtype))
    assert rel.numel() == 0 or float(rel.max()) <= tol, (
        f"s_j differs from eq. 4 by {float(rel.max()):.3e} relative (> {tol:.1e}) at channel "
        f"{int(live.nonzero()[rel.argmax()])}: got {got[live][rel.argmax()]:.6g}, want {want[live][rel.argmax()]:.6g}")


@example(case=LinearCase(4, 6, 3, seed=3, zero_column=1), alpha=0.5).via("mutant:zero_guard_missing")
@example(case=LinearCase(4, 6, 3, seed=3, zero_column=2), alpha=0.0).via("mutant:zero_guard_missing")
@example(case=LinearCase(4, 6, 3, seed=3, zero_column=3), alpha=0.5).via("boundary: a dead activation channel, live weight column")
@given(case=linear_cases(), alpha=alphas)
def test_factors_positive_and_finite(impl, case, alpha):
    """Every s_j is finite and > 0 (any such s keeps the product: the migration needs nothing
    else), zero activation or weight columns included."""
    x, w = case.tensors()
    s = impl.get("smoothing_factors")(_absmax(x).to(compute_of(x.dtype)), w, alpha)
    bad = ~(torch.isfinite(s) & (s > 0))
    assert not bool(bad.any()), f"s must be finite and > 0; at channels {bad.nonzero().flatten().tolist()}: {s[bad].tolist()}"


@pytest.mark.choice("s_j = 1 for a zero activation or weight column (the paper leaves it open)")
@example(case=LinearCase(4, 6, 3, seed=3, zero_column=2), alpha=1.0).via("mutant:zero_guard_missing")
@given(case=linear_cases(), alpha=alphas)
def test_zero_column_factor_is_one(impl, case, alpha):
    """Where max|X_j| = 0 or max|W_j| = 0 the reference sets s_j = 1 (no migration)."""
    x, w = case.tensors()
    act = _absmax(x).to(compute_of(x.dtype))
    s = impl.get("smoothing_factors")(act, w, alpha)
    dead = (act == 0) | (w.abs().amax(dim=0) == 0)
    assert bool((s[dead] == 1).all()), f"zero columns {dead.nonzero().flatten().tolist()} have s = {s[dead].tolist()}"


@example(case=LinearCase(5, 7, 4, seed=4, outliers=2), alpha=0.0).via("mutant:alpha_swapped")
@example(case=LinearCase(5, 7, 4, seed=4, outliers=2), alpha=1.0).via("mutant:alpha_swapped")
@given(case=linear_cases(dtypes=("float64",)), alpha=alphas)
def test_smoothed_ranges(impl, case, alpha):
    """After smoothing with s from the absmax of x itself: max|X'_j| = (max|X_j| max|W_j|)^(1-alpha)
    and max|W'_j| = (max|X_j| max|W_j|)^alpha for every non-zero channel; so alpha = 1 gives every
    activation channel absmax 1, alpha = 0 every weight column absmax 1, alpha = 0.5 equal ranges."""
    x, w = case.tensors()
    s = impl.get("smoothing_factors")(_absmax(x), w, alpha)
    xs, ws = impl.get("smooth")(x, w, s)
    mx, mw = _absmax(x), w.abs().amax(dim=0)
    live = (mx > 0) & (mw > 0)
    prod = mx * mw
    for name, got, want in (("max|X'_j|", _absmax(xs), prod ** (1 - alpha)), ("max|W'_j|", ws.abs().amax(dim=0), prod ** alpha)):
        rel = ((got - want).abs() / want)[live]
        assert rel.numel() == 0 or float(rel.max()) <= 64 * unit(torch.float64), (
            f"alpha={alpha}: {name} = {got[live].tolist()}, expected {want[live].tolist()}")


# ---- the migration -------------------------------------------------------------------------------
def _positive_factors(n: int, seed: int, spread: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.exp((torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1) * spread)


@example(case=LinearCase(3, 5, 4, seed=5), spread=3.0).via("mutant:smooth_multiplies_x")
@example(case=LinearCase(3, 5, 4, seed=5), spread=3.0).via("mutant:smooth_divides_weight_rows")
@given(case=linear_cases(dtypes=("float64",)), spread=st.sampled_from([0.0, 1.0, 3.0, 20.0]))
def test_migration_keeps_the_product(impl, case, spread):
    """float64: X' W'^T equals X W^T within (4u + 4u^2 + 2 gamma_K) sum_k |x_ik w_jk| (module doc of
    this file), for any positive factors (spread: log s uniform in [-spread, spread])."""
    x, w = case.tensors()
    s = _positive_factors(case.in_features, case.seed, spread)
    xs, ws = impl.get("smooth")(x, w, s)
    assert xs.shape == x.shape and ws.shape == w.shape, f"shapes {tuple(xs.shape)}, {tuple(ws.shape)}"
    u, k = unit(torch.float64), case.in_features
    gamma = k * u / (1 - k * u)
    bound = (4 * u + 4 * u * u + 2 * gamma) * (x.abs() @ w.abs().T)
    diff = (xs.to(torch.float64) @ ws.to(torch.float64).T - x @ w.T).abs()
    worst = float((diff - bound).max())
    assert worst <= 0, (f"X' W'^T - X W^T exceeds the rounding bound by {worst:.3e} "
                        f"(max diff {float(diff.max()):.3e}, max bound {float(bound.max()):.3e})")


@example(case=LinearCase(3, 5, 4, seed=6, dtype="bfloat16")).via("mutant:smooth_multiplies_x")
@given(case=linear_cases(dtypes=("float64", "float32", "float16", "bfloat16")))
def test_migration_elementwise(impl, case):
    """X'_ij = X_ij / s_j and W'_ij = W_ij s_j, each within 2 u of its dtype (relative; two roundings
    allowed: computed, then stored), in the input's dtype and shape; the inputs are unchanged."""
    x, w = case.tensors()
    s = _positive_factors(case.in_features, case.seed, 2.0).to(compute_of(x.dtype))
    x0, w0 = x.clone(), w.clone()
    xs, ws = impl.get("smooth")(x, w, s)
    assert torch.equal(x, x0) and torch.equal(w, w0), "smooth modified its inputs"
    for name, got, want, like in (("X'", xs, x.double() / s.double(), x), ("W'", ws, w.double() * s.double(), w)):
        assert isinstance(got, torch.Tensor) and got.dtype == like.dtype and got.shape == like.shape, (
            f"{name}: {getattr(got, 'dtype', type(got).__name__)} {tuple(getattr(got, 'shape', ()))}, expected "
            f"{like.dtype} {tuple(like.shape)}")
        tiny = torch.finfo(like.dtype).tiny
        err = (got.double() - want).abs() - 2.01 * torch.finfo(like.dtype).eps * want.abs() - tiny
        assert float(err.max()) <= 0, f"{name} off by {float(err.max()):.3e} beyond 2 ulps ({like.dtype})"


# ---- calibration ---------------------------------------------------------------------------------
@st.composite
def calibration_sets(draw):
    dtype = draw(st.sampled_from(["float64", "float32", "bfloat16"]))
    n_in = draw(st.integers(1, 12))
    sizes = draw(st.lists(st.integers(0, 6), min_size=1, max_size=5))
    seed = draw(st.integers(0, 2**32 - 1))
    return dtype, n_in, tuple(sizes), seed


def _batches(dtype, n_in, sizes, seed):
    g = torch.Generator().manual_seed(seed)
    from conformance.strategies import DTYPES
    out = []
    for i, n in enumerate(sizes):
        x = torch.randn(n, n_in, generator=g, dtype=torch.float64) * (10.0 ** (i % 3 - 1))
        if n and i == 1:
            x[:, 0] *= 50  # an outlier channel seen in one batch only
        out.append(x.to(DTYPES[dtype]))
    return out


@example(spec=("float32", 3, (2, 4, 1), 7)).via("mutant:calibration_keeps_last_batch")
@example(spec=("float32", 3, (2, 4, 1), 7)).via("mutant:calibration_max_not_absmax")
@given(spec=calibration_sets())
def test_calibration_is_absmax_of_the_batches(impl, spec):
    """calibrate_absmax(batches) == |concat(batches)|.max(dim=0) exactly (max is exact), in the
    compute dtype (float64 for float64 batches, else float32); 0 for a channel never seen; a
    0-token batch contributes nothing; the order of the batches does not matter."""
    batches = _batches(*spec)
    f = impl.get("calibrate_absmax")
    got = f(batches)
    want = torch.cat([b.to(torch.float64) for b in batches]).abs()
    want = want.amax(dim=0) if want.shape[0] else torch.zeros(spec[1], dtype=torch.float64)
    dtype = compute_of(batches[0].dtype)
    assert isinstance(got, torch.Tensor) and got.dtype == dtype and got.shape == (spec[1],), (
        f"got {getattr(got, 'dtype', type(got).__name__)} {tuple(getattr(got, 'shape', ()))}, expected {dtype} ({spec[1]},)")
    assert torch.equal(got.to(torch.float64), want), f"calibrate_absmax = {got.tolist()}, absmax = {want.tolist()}"
    assert torch.equal(f(batches[::-1]), got), "the order of the calibration batches changed the absmax"


def test_calibration_is_running(impl):
    """Calibrating on the batches one after another (running max of the partial results) equals
    calibrating on all of them at once."""
    f = impl.get("calibrate_absmax")
    batches = _batches("float32", 5, (3, 2, 4), 11)
    partial = [f([b]) for b in batches]
    assert torch.equal(torch.stack(partial).amax(dim=0), f(batches))


# ---- bad input -----------------------------------------------------------------------------------
_W = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
_X = torch.randn(2, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float32)
_ACT = _X.abs().amax(dim=0)
_S = torch.full((4,), 2.0)


def _with(name, where, value):
    def change(kw):
        t = kw[name].clone()
        t[where] = value
        return {**kw, name: t}
    return change


FACTORS_VALID = dict(act_absmax=_ACT, weight=_W, alpha=0.5)
FACTORS_BAD = [
    Bad("alpha above 1", dict(alpha=1.5), ValueError, ("alpha",)),
    Bad("alpha below 0", dict(alpha=-0.1), ValueError, ("alpha",)),
    Bad("alpha nan", dict(alpha=float("nan")), ValueError, ("alpha",)),
    Bad("alpha bool", dict(alpha=True), TypeError, ("alpha",)),
    Bad("alpha string", dict(alpha="0.5"), TypeError, ("alpha",)),
    Bad("act_absmax too short", lambda kw: {**kw, "act_absmax": kw["act_absmax"][:3]}, ValueError, ("act_absmax",)),
    Bad("act_absmax 2-D", lambda kw: {**kw, "act_absmax": kw["act_absmax"][None]}, ValueError, ("act_absmax",)),
    Bad("act_absmax negative", _with("act_absmax", 1, -1.0), ValueError, ("act_absmax",)),
    Bad("act_absmax inf", _with("act_absmax", 2, float("inf")), ValueError, ("act_absmax",)),
    Bad("act_absmax nan", _with("act_absmax", 0, float("nan")), ValueError, ("act_absmax",)),
    Bad("act_absmax int", lambda kw: {**kw, "act_absmax": torch.ones(4, dtype=torch.int32)}, TypeError, ("act_absmax",)),
    Bad("act_absmax list", dict(act_absmax=[1.0, 1.0, 1.0, 1.0]), TypeError, ("act_absmax",)),
    Bad("weight 1-D", lambda kw: {**kw, "weight": kw["weight"][0]}, ValueError, ("weight",)),
    Bad("weight nan", _with("weight", (0, 1), float("nan")), ValueError, ("weight",)),
    Bad("weight int8", lambda kw: {**kw, "weight": torch.ones(3, 4, dtype=torch.int8)}, TypeError, ("weight",)),
    Bad("weight no rows", lambda kw: {**kw, "weight": kw["weight"][:0]}, ValueError, ("weight",)),
]


@bad_cases(FACTORS_BAD)
def test_factors_reject_bad_input(impl, bad):
    assert_rejects(impl.get("smoothing_factors"), FACTORS_VALID, bad)


SMOOTH_VALID = dict(x=_X, weight=_W, s=_S)
SMOOTH_BAD = [
    Bad("s zero", _with("s", 1, 0.0), ValueError, ("s",)),
    Bad("s negative", _with("s", 3, -2.0), ValueError, ("s",)),
    Bad("s inf", _with("s", 0, float("inf")), ValueError, ("s",)),
    Bad("s nan", _with("s", 0, float("nan")), ValueError, ("s",)),
    Bad("s too long", lambda kw: {**kw, "s": torch.ones(5)}, ValueError, ("s",)),
    Bad("s int", lambda kw: {**kw, "s": torch.ones(4, dtype=torch.int64)}, TypeError, ("s",)),
    Bad("x wrong in", lambda kw: {**kw, "x": kw["x"][:, :3]}, ValueError, ("x",)),
    Bad("x 3-D", lambda kw: {**kw, "x": kw["x"][None]}, ValueError, ("x",)),
    Bad("x inf", _with("x", (1, 1), float("inf")), ValueError, ("x",)),
    Bad("x not a tensor", dict(x=[[1.0] * 4]), TypeError, ("x",)),
    Bad("weight 3-D", lambda kw: {**kw, "weight": kw["weight"][None]}, ValueError, ("weight",)),
    Bad("weight nan", _with("weight", (2, 3), float("nan")), ValueError, ("weight",)),
]


@bad_cases(SMOOTH_BAD)
def test_smooth_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("smooth"), SMOOTH_VALID, bad)


CALIB_VALID = dict(batches=[_X, 2 * _X])
CALIB_BAD = [
    Bad("no batches", dict(batches=[]), ValueError, ("batches",)),
    Bad("a tensor, not a list", dict(batches=_X), TypeError, ("batches",)),
    Bad("a batch is a list", dict(batches=[_X, [[1.0] * 4]]), TypeError, ("batches",)),
    Bad("an int batch", dict(batches=[_X, torch.ones(2, 4, dtype=torch.int32)]), TypeError, ("batches",)),
    Bad("channels differ", dict(batches=[_X, _X[:, :3]]), ValueError, ("batches",)),
    Bad("a 1-D batch", dict(batches=[_X[0], _X]), ValueError, ("batches",)),
    Bad("a 3-D batch", dict(batches=[_X, _X[None]]), ValueError, ("batches",)),
    Bad("dtypes differ", dict(batches=[_X, _X.double()]), TypeError, ("batches",)),
    Bad("a nan", dict(batches=[_X, torch.full((1, 4), float("nan"))]), ValueError, ("batches",)),
    Bad("an inf", dict(batches=[torch.full((1, 4), float("-inf")), _X]), ValueError, ("batches",)),
    Bad("no channels", dict(batches=[torch.ones(2, 0)]), ValueError, ("batches",)),
]


@bad_cases(CALIB_BAD)
def test_calibration_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("calibrate_absmax"), CALIB_VALID, bad)
