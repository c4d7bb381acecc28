"""The roofline's closed forms (course 02.04, 02.05, 02.12): against exact rational oracles, the
ridge point as the intensity where the two ceilings meet (exactly), monotonicity, the time bound,
and bad input. Exact numbers (ints, Fractions) must give exact results; floats the exact value
rounded (within 4 units in the last place: an implementation may round each operation)."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.roofline import oracles
from spec_tests.roofline.strategies import exact_numbers, exact_positive, float_positive, numbers, positive

ULPS = 4 * 2.0 ** -52


def _is_exact(*xs) -> bool:
    return all(isinstance(x, (int, Fraction)) for x in xs)


def check(got, want: Fraction, given_: tuple, call: str) -> None:
    """``got`` is ``want`` exactly (every number given exact) or ``want`` rounded (a float given)."""
    if _is_exact(*given_):
        assert isinstance(got, (int, Fraction)) and Fraction(got) == want, (
            f"{call} = {got!r}; exact inputs give the exact value {want!r} (a Fraction)")
    else:
        assert isinstance(got, float), f"{call} = {got!r}: a float was given, the result is a float"
        assert abs(Fraction(got) - want) <= ULPS * abs(want), (
            f"{call} = {got!r}; the exact value is {float(want)!r} ({want})")


def show(*xs) -> str:
    return ", ".join(repr(x) for x in xs)


@example(f=Fraction(1, 3), m=7, p=10, b=3).via("mutant:ridge_inverted mutant:attainable_max mutant:fraction_of_peak")
@example(f=0, m=5, p=1, b=1).via("boundary: zero FLOPs: intensity 0, attainable 0, memory-bound")
@example(f=6.0, m=3.0, p=1e15, b=3e12).via("boundary: floats: the exact value rounded")
@given(f=numbers, m=positive, p=positive, b=positive)
def test_closed_forms(impl, f, m, p, b):
    """flops_per_byte = f / m; ridge_point = P / B; attainable_flops = min(P, I B); regime =
    "memory" iff I B < P (exactly); roofline_fraction(a, I) = a / attainable."""
    i = impl.get("flops_per_byte")(f, m)
    check(i, oracles.exact(f) / oracles.exact(m), (f, m), f"flops_per_byte({show(f, m)})")
    check(impl.get("ridge_point")(p, b), oracles.exact(p) / oracles.exact(b), (p, b), f"ridge_point({show(p, b)})")
    want = oracles.attainable(i, p, b)
    check(impl.get("attainable_flops")(i, p, b), want, (i, p, b), f"attainable_flops({show(i, p, b)})")
    got = impl.get("regime")(i, p, b)
    assert got == oracles.regime(i, p, b), (
        f"regime({show(i, p, b)}) = {got!r}; I x B = {float(oracles.exact(i) * oracles.exact(b))!r} vs P = {float(p)!r}: "
        f"{oracles.regime(i, p, b)!r}")
    if i > 0:
        a = want * Fraction(3, 4) if _is_exact(i, p, b) else float(want) * 0.75
        check(impl.get("roofline_fraction")(a, i, p, b), oracles.exact(a) / want, (a, i, p, b),
              f"roofline_fraction({show(a, i, p, b)})")


@example(p=Fraction(1000), b=Fraction(3)).via("mutant:ridge_counts_as_memory mutant:ridge_inverted")
@given(p=exact_positive, b=exact_positive)
def test_ridge_is_where_the_ceilings_meet_exactly(impl, p, b):
    """At I* = ridge_point(P, B): I* x B == P == attainable_flops(I*) exactly and the regime is
    "compute" (the kernel reaches the peak); an intensity any amount below it is memory-bound with
    attainable I x B < P; above it, compute-bound at P."""
    ridge = impl.get("ridge_point")(p, b)
    assert Fraction(ridge) * b == p, f"ridge_point({show(p, b)}) = {ridge!r}: ridge x B = {Fraction(ridge) * b} != P = {p}"
    at = impl.get("attainable_flops")
    assert at(ridge, p, b) == p, f"attainable_flops(ridge={ridge!r}, {show(p, b)}) = {at(ridge, p, b)!r}, expected P = {p!r}"
    assert impl.get("regime")(ridge, p, b) == "compute", f"regime at the ridge {ridge!r} ({show(p, b)}): the peak is reached"
    for eps in (Fraction(1, 10**12), Fraction(ridge) / 7):
        below, above = Fraction(ridge) - eps, Fraction(ridge) + eps
        if below >= 0:
            assert impl.get("regime")(below, p, b) == "memory", f"regime({below!r}, {show(p, b)}): below the ridge"
            assert at(below, p, b) == below * b < p, f"attainable_flops({below!r}, {show(p, b)}) = {at(below, p, b)!r}"
        assert impl.get("regime")(above, p, b) == "compute", f"regime({above!r}, {show(p, b)}): above the ridge"
        assert at(above, p, b) == p, f"attainable_flops({above!r}, {show(p, b)}) = {at(above, p, b)!r}, expected P"


@example(p=1e15, b=3e12, steps=1).via("boundary: the float nearest the ridge and its neighbours")
@given(p=float_positive, b=float_positive, steps=st.integers(-3, 3))
def test_regime_is_exact_next_to_a_float_ridge(impl, p, b, steps):
    """Floats around fl(P / B): the regime is the exact comparison I x B < P of the floats' binary
    values, whatever a float product would round to."""
    i = float(Fraction(p) / Fraction(b))
    for _ in range(abs(steps)):
        i = math.nextafter(i, math.inf if steps > 0 else 0.0)
    got = impl.get("regime")(i, p, b)
    assert got == oracles.regime(i, p, b), (f"regime({show(i, p, b)}) = {got!r}; exactly I x B - P = "
                                            f"{Fraction(i) * Fraction(b) - Fraction(p)}: {oracles.regime(i, p, b)!r}")


@example(i=Fraction(2), p=Fraction(10), b=Fraction(3), k=Fraction(2)).via("mutant:attainable_max mutant:ridge_inverted")
@given(i=exact_numbers, p=exact_positive, b=exact_positive, k=st.fractions(1, 10, max_denominator=8))
def test_monotone(impl, i, p, b, k):
    """attainable_flops never falls when I, P or B grows and never exceeds P or I x B; the regime
    turns from memory to compute once as I grows; the ridge grows with P and falls with B."""
    at, reg, ridge = impl.get("attainable_flops"), impl.get("regime"), impl.get("ridge_point")
    base = at(i, p, b)
    assert base <= p and base <= i * b, f"attainable_flops({show(i, p, b)}) = {base!r} above a ceiling"
    for bigger in (at(i * k, p, b), at(i, p * k, b), at(i, p, b * k)):
        assert bigger >= base, f"attainable_flops grew an argument by {k} and fell: {base!r} -> {bigger!r}"
    if reg(i, p, b) == "compute":
        assert reg(i * k, p, b) == "compute", f"regime({show(i, p, b)}) compute but regime({i * k!r}, ...) memory"
    assert ridge(p * k, b) >= ridge(p, b) and ridge(p, b * k) <= ridge(p, b)


@example(f=Fraction(10), m=Fraction(5), p=Fraction(4), b=Fraction(1)).via("mutant:time_adds")
@example(f=Fraction(0), m=Fraction(0), p=Fraction(4), b=Fraction(1)).via("boundary: nothing to do takes no time")
@given(f=exact_numbers, m=exact_numbers, p=exact_positive, b=exact_positive)
def test_roofline_time(impl, f, m, p, b):
    """roofline_time = max(f / P, m / B) exactly: at least each resource's time, equal to one; for
    f, m > 0 it is f / attainable_flops(f / m) (the kernel at its roofline)."""
    t = impl.get("roofline_time")(f, m, p, b)
    want = max(Fraction(f) / p, Fraction(m) / b)
    check(t, want, (f, m, p, b), f"roofline_time({show(f, m, p, b)})")
    if f > 0 and m > 0:
        i = Fraction(f) / m
        assert t == Fraction(f) / impl.get("attainable_flops")(i, p, b), "roofline_time != flops / attainable_flops"


@given(f=float_positive, m=float_positive, p=float_positive, b=float_positive)
def test_roofline_time_floats(impl, f, m, p, b):
    """With floats: the exact max(f / P, m / B), rounded."""
    want = max(Fraction(f) / Fraction(p), Fraction(m) / Fraction(b))
    check(impl.get("roofline_time")(f, m, p, b), want, (f, m, p, b), f"roofline_time({show(f, m, p, b)})")


@example(i=Fraction(1, 2), p=Fraction(100), b=Fraction(4)).via("mutant:fraction_of_peak")
@given(i=exact_positive, p=exact_positive, b=exact_positive)
def test_fraction_of_the_roofline(impl, i, p, b):
    """A kernel on its roof scores 1; a memory-bound kernel's fraction is its bandwidth over B
    (achieved / I / B); a compute-bound one's is achieved / P; 0 achieved scores 0."""
    frac, at = impl.get("roofline_fraction"), impl.get("attainable_flops")
    assert frac(at(i, p, b), i, p, b) == 1, f"roofline_fraction(attainable, {show(i, p, b)}) = {frac(at(i, p, b), i, p, b)!r}"
    achieved = Fraction(p) / 3
    want = achieved / (i * b) if i * b < p else achieved / p
    assert frac(achieved, i, p, b) == want, f"roofline_fraction({show(achieved, i, p, b)}) = {frac(achieved, i, p, b)!r}, expected {want}"
    assert frac(0, i, p, b) == 0


def test_hand_computed_numbers(impl):
    """docs/roofline.md's worked numbers (illustrative device of 800 TFLOP/s and 4 TB/s, exact):
    ridge 200 FLOPs/byte; a decode-like kernel of intensity 1 attains 4 TFLOP/s (0.5 % of the
    peak), memory-bound; a prefill-like 2,048 attains the peak. 1 GFLOP over 1 GB takes 250 us
    (the bytes' time), 1 TFLOP over 1 GB 1.25 ms (the FLOPs'). Mutants: ridge_inverted,
    attainable_max, time_adds."""
    p, b = 800 * 10**12, 4 * 10**12
    assert impl.get("ridge_point")(p, b) == 200
    assert impl.get("attainable_flops")(1, p, b) == 4 * 10**12
    assert impl.get("regime")(1, p, b) == "memory" and impl.get("regime")(2048, p, b) == "compute"
    assert impl.get("attainable_flops")(2048, p, b) == p
    assert impl.get("roofline_time")(10**9, 10**9, p, b) == Fraction(1, 4000)
    assert impl.get("roofline_time")(10**12, 10**9, p, b) == Fraction(1, 800)
    assert impl.get("flops_per_byte")(10**12, 10**9) == 1000
    assert impl.get("ridge_point")(1e15, 4e12) == 250.0


# --- bad input -------------------------------------------------------------------------------
def _real(name: str, zero_ok: bool) -> list[Bad]:
    rows = [Bad(f"negative {name}", {name: -1}, ValueError, (name,)),
            Bad(f"nan {name}", {name: float("nan")}, ValueError, (name,)),
            Bad(f"inf {name}", {name: float("inf")}, ValueError, (name,)),
            Bad(f"str {name}", {name: "1"}, TypeError, (name,)),
            Bad(f"bool {name}", {name: True}, TypeError, (name,)),
            Bad(f"None {name}", {name: None}, TypeError, (name,))]
    if not zero_ok:
        rows.append(Bad(f"zero {name}", {name: 0}, ValueError, (name,)))
    return rows


DEVICE = _real("peak_flops", False) + _real("bandwidth", False)


@bad_cases(_real("flops", True) + _real("bytes_moved", False))
def test_flops_per_byte_rejects_bad_input(impl, bad):
    """flops a finite real >= 0; bytes_moved a finite real > 0 (a bool is not a number)."""
    assert_rejects(impl.get("flops_per_byte"), dict(flops=10.0, bytes_moved=5.0), bad)


@bad_cases(DEVICE)
def test_ridge_point_rejects_bad_input(impl, bad):
    """peak_flops and bandwidth finite reals > 0."""
    assert_rejects(impl.get("ridge_point"), dict(peak_flops=1e15, bandwidth=4e12), bad)


@bad_cases(_real("intensity", True) + DEVICE)
def test_attainable_flops_rejects_bad_input(impl, bad):
    """intensity a finite real >= 0; the device as ridge_point."""
    assert_rejects(impl.get("attainable_flops"), dict(intensity=2.0, peak_flops=1e15, bandwidth=4e12), bad)


@bad_cases(_real("intensity", True) + DEVICE)
def test_regime_rejects_bad_input(impl, bad):
    """As attainable_flops."""
    assert_rejects(impl.get("regime"), dict(intensity=2.0, peak_flops=1e15, bandwidth=4e12), bad)


@bad_cases(_real("flops", True) + _real("bytes_moved", True) + DEVICE)
def test_roofline_time_rejects_bad_input(impl, bad):
    """flops and bytes_moved finite reals >= 0 (0 is legal for both); the device as ridge_point."""
    assert_rejects(impl.get("roofline_time"), dict(flops=1e9, bytes_moved=1e9, peak_flops=1e15, bandwidth=4e12), bad)


@bad_cases(_real("achieved_flops", True) + _real("intensity", False) + DEVICE)
def test_roofline_fraction_rejects_bad_input(impl, bad):
    """achieved_flops >= 0; intensity > 0 (at 0 nothing is attainable); the device as ridge_point."""
    assert_rejects(impl.get("roofline_fraction"),
                   dict(achieved_flops=1e12, intensity=2.0, peak_flops=1e15, bandwidth=4e12), bad)


@pytest.mark.parametrize("call", ["flops_per_byte(0, 1)", "attainable_flops(0, 1, 1)", "regime(0, 1, 1)",
                                  "roofline_time(0, 0, 1, 1)", "roofline_time(1, 0, 1, 1)",
                                  "roofline_fraction(0, 1, 1, 1)"])
def test_zeros_are_legal(impl, call):
    """The zeros the contract allows are accepted: no FLOPs, zero intensity, nothing moved, nothing achieved."""
    name, args = call.split("(", 1)
    values = [int(a) for a in args.rstrip(")").split(", ")]
    got = impl.get(name)(*values)
    want = {"flops_per_byte": 0, "attainable_flops": 0, "regime": "memory", "roofline_fraction": 0}.get(name)
    if name == "roofline_time":
        want = values[0]
    assert got == want, f"{call} = {got!r}, expected {want!r}"
