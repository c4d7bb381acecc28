"""Cost per million tokens (course 06.11): scaling laws, dimensional identities, hand-computed
numbers, the blended price's limits and bad input."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.cost.strategies import gpus, prices, rates, ratios, utilisations

REL = 1e-12  # a few float roundings


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


@example(price=2.0, rate=1000.0, g=2, u=0.5).via("mutant:per_thousand mutant:per_minute mutant:gpus_ignored "
                                                    "mutant:utilisation_multiplied")
@given(price=prices, rate=rates, g=gpus, u=utilisations)
def test_dimensional_identity(impl, price, rate, g, u):
    """Dollars per million tokens x tokens per busy second x busy fraction x 3600 s/h / 1e6 gives
    back the replica's dollars per hour, price x num_gpus: the units cancel."""
    c = impl.get("cost_per_million_tokens")(price, rate, num_gpus=g, utilisation=u)
    assert isinstance(c, float), f"cost_per_million_tokens must return a float, got {type(c).__name__}"
    back = c * rate * u * 3600 / 1e6
    assert _close(back, price * g), (
        f"cost_per_million_tokens({price!r}, {rate!r}, num_gpus={g}, utilisation={u!r}) = {c!r}; "
        f"x tokens/s x u x 3600 / 1e6 = {back!r} $/h, but the replica costs {price * g!r} $/h")


@example(price=2.0, rate=1000.0, g=2, u=0.5, k=2.0).via("mutant:utilisation_multiplied")
@given(price=prices, rate=rates, g=gpus, u=utilisations, k=st.sampled_from([2.0, 3.0, 0.5, 10.0]))
def test_scaling_laws(impl, price, rate, g, u, k):
    """k times the throughput divides the cost by k; k times the price multiplies it by k;
    utilisation u multiplies the cost at full utilisation by 1/u; k times the GPUs at k times the
    throughput costs the same per token."""
    f = impl.get("cost_per_million_tokens")
    base = f(price, rate, num_gpus=g, utilisation=u)
    assert _close(f(price, rate * k, num_gpus=g, utilisation=u), base / k), f"{k}x the throughput must divide the cost by {k}"
    assert _close(f(price * k, rate, num_gpus=g, utilisation=u), base * k), f"{k}x the price must multiply the cost by {k}"
    full = f(price, rate, num_gpus=g, utilisation=1.0)
    assert _close(base, full / u), (f"utilisation {u!r} must multiply the cost at utilisation 1 ({full!r}) by "
                                    f"1/{u!r}: expected {full / u!r}, got {base!r}")
    if k == int(k):
        assert _close(f(price, rate * k, num_gpus=g * int(k), utilisation=u), base), (
            f"{int(k)}x the GPUs at {int(k)}x the throughput must cost the same per token")


@example(price=2.0, p=5000.0, d=500.0, g=2, u=0.5).via("mutant:io_swapped mutant:gpus_ignored")
@given(price=prices, p=rates, d=rates, g=gpus, u=utilisations)
def test_input_output_prices_are_cost_at_each_rate(impl, price, p, d, g, u):
    """input_output_prices is (cost at the prefill rate, cost at the decode rate), each a float; the
    slower phase has the higher price (decode slower than prefill: output dearer than input)."""
    inp, out = impl.get("input_output_prices")(price, p, d, num_gpus=g, utilisation=u)
    f = impl.get("cost_per_million_tokens")
    assert isinstance(inp, float) and isinstance(out, float)
    assert _close(inp, price * g / 3600 / (p * u) * 1e6), f"input price {inp!r} at prefill {p!r} tok/s"
    assert _close(out, price * g / 3600 / (d * u) * 1e6), f"output price {out!r} at decode {d!r} tok/s"
    assert _close(inp, f(price, p, num_gpus=g, utilisation=u)) and _close(out, f(price, d, num_gpus=g, utilisation=u))
    if d < p:
        assert out > inp, f"decode slower than prefill ({d!r} < {p!r} tok/s) must make output dearer"


# Hand-computed (exact fractions): not the course's -- lesson 06.11's text in the repository is an
# outline and states no numbers (docs/cost.md).
WORKED = [
    # price $/GPU-h, GPUs, tokens/s, utilisation, $/M (exact)
    (2, 1, 1000, 1, Fraction(5, 9)),                   # 2/3600 $/s over 1000 tok/s
    (2, 1, 1000, Fraction(1, 2), Fraction(10, 9)),      # half busy: twice the cost
    (Fraction(5, 2), 8, 40000, Fraction(3, 5), Fraction(25, 108)),
    (Fraction(5, 2), 8, 2500, Fraction(3, 5), Fraction(100, 27)),
]


@pytest.mark.parametrize("price,g,rate,u,want", WORKED)
def test_hand_computed_numbers(impl, price, g, rate, u, want):
    """The numbers docs/cost.md works by hand: $2/GPU-hour at 1,000 tok/s is $5/9 ~ $0.5556 per
    million, $10/9 at utilisation 0.5; an 8-GPU replica at $2.50/GPU-hour, utilisation 0.6,
    prefill 40,000 tok/s and decode 2,500 tok/s: input $25/108 ~ $0.2315, output $100/27 ~ $3.7037.
    Mutants: per_thousand, per_minute, gpus_ignored, utilisation_multiplied."""
    assert want == Fraction(price) * g / 3600 / (rate * Fraction(u)) * 10**6, "the table's own arithmetic"
    got = impl.get("cost_per_million_tokens")(float(price), float(rate), num_gpus=g, utilisation=float(u))
    assert _close(got, float(want)), f"${float(price)}/GPU-h x {g} at {rate} tok/s, u={float(u)}: {got!r}, expected {float(want)!r}"


def test_blended_worked_number(impl):
    """At 3 input tokens per output token, input $25/108 and output $100/27 blend to
    (3 x 25/108 + 100/27) / 4 = 475/432 ~ $1.0995 per million. Mutants: blended_ratio_inverted,
    blended_unweighted."""
    got = impl.get("blended_price")(25 / 108, 100 / 27, input_per_output=3.0)
    assert _close(got, 475 / 432), f"blended_price(25/108, 100/27, input_per_output=3) = {got!r}, expected {475 / 432!r}"


@example(inp=0.25, out=4.0, r=3.0).via("mutant:blended_ratio_inverted mutant:blended_unweighted")
@example(inp=1.0, out=2.0, r=0.0).via("boundary: output tokens only")
@given(inp=st.floats(0, 1e3), out=st.floats(0, 1e3), r=ratios)
def test_blended_price_is_the_bill_over_the_tokens(impl, inp, out, r):
    """blended_price(a, b, input_per_output=r) is the bill of r input and 1 output token over r + 1
    tokens; it lies between the two prices, equals the output price at r = 0, and moves toward the
    input price as r grows."""
    f = impl.get("blended_price")
    got = f(inp, out, input_per_output=r)
    want = (r * inp + out) / (r + 1)
    assert math.isclose(got, want, rel_tol=REL, abs_tol=1e-300), f"blended_price({inp!r}, {out!r}, input_per_output={r!r}) = {got!r}; expected {want!r}"
    assert min(inp, out) * (1 - REL) <= got <= max(inp, out) * (1 + REL), f"{got!r} is not between {inp!r} and {out!r}"
    larger = f(inp, out, input_per_output=r + 1.0)
    assert abs(larger - inp) <= abs(got - inp) + REL * max(inp, out), "more input tokens must move the blend toward the input price"


def test_boundaries_are_legal(impl):
    """A free GPU (price 0) costs 0; utilisation exactly 1 and a fractional throughput are legal."""
    f = impl.get("cost_per_million_tokens")
    assert f(0.0, 100.0) == 0.0
    assert _close(f(3.6, 0.5, utilisation=1.0), 2000.0)  # $0.001/s over 0.5 tok/s
    assert impl.get("input_output_prices")(0, 10, 10) == (0.0, 0.0)
    assert impl.get("blended_price")(0, 0, input_per_output=0) == 0.0


def test_defaults(impl):
    """num_gpus defaults to 1 and utilisation to 1."""
    f = impl.get("cost_per_million_tokens")
    assert f(2.0, 1000.0) == f(2.0, 1000.0, num_gpus=1, utilisation=1.0)
    g = impl.get("input_output_prices")
    assert tuple(g(2.0, 5000.0, 500.0)) == tuple(g(2.0, 5000.0, 500.0, num_gpus=1, utilisation=1.0))


# --- bad input -------------------------------------------------------------------------------
def _common(rate: str) -> list[Bad]:
    return [
        Bad("negative price", dict(gpu_hour_price=-0.5), ValueError, ("gpu_hour_price",)),
        Bad("nan price", dict(gpu_hour_price=float("nan")), ValueError, ("gpu_hour_price",)),
        Bad("inf price", dict(gpu_hour_price=float("inf")), ValueError, ("gpu_hour_price",)),
        Bad("str price", dict(gpu_hour_price="2.0"), TypeError, ("gpu_hour_price",)),
        Bad("bool price", dict(gpu_hour_price=True), TypeError, ("gpu_hour_price",)),
        Bad("None price", dict(gpu_hour_price=None), TypeError, ("gpu_hour_price",)),
        Bad(f"zero {rate}", {rate: 0.0}, ValueError, (rate,)),
        Bad(f"negative {rate}", {rate: -100.0}, ValueError, (rate,)),
        Bad(f"inf {rate}", {rate: float("inf")}, ValueError, (rate,)),
        Bad(f"str {rate}", {rate: "1000"}, TypeError, (rate,)),
        Bad(f"bool {rate}", {rate: True}, TypeError, (rate,)),
        Bad("zero num_gpus", dict(num_gpus=0), ValueError, ("num_gpus",)),
        Bad("negative num_gpus", dict(num_gpus=-2), ValueError, ("num_gpus",)),
        Bad("float num_gpus", dict(num_gpus=2.0), TypeError, ("num_gpus",)),
        Bad("bool num_gpus", dict(num_gpus=True), TypeError, ("num_gpus",)),
        Bad("zero utilisation", dict(utilisation=0.0), ValueError, ("utilisation",)),
        Bad("negative utilisation", dict(utilisation=-0.5), ValueError, ("utilisation",)),
        Bad("utilisation above one", dict(utilisation=1.0000001), ValueError, ("utilisation",)),
        Bad("utilisation a percentage", dict(utilisation=60), ValueError, ("utilisation",)),
        Bad("nan utilisation", dict(utilisation=float("nan")), ValueError, ("utilisation",)),
        Bad("str utilisation", dict(utilisation="0.6"), TypeError, ("utilisation",)),
        Bad("bool utilisation", dict(utilisation=True), TypeError, ("utilisation",)),
    ]


BAD = _common("tokens_per_second")
VALID = dict(gpu_hour_price=2.0, tokens_per_second=1000.0, num_gpus=2, utilisation=0.6)


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """gpu_hour_price a finite real >= 0, tokens_per_second a finite real > 0, num_gpus an int >= 1,
    utilisation a real in (0, 1] (a bool is none of them): else TypeError/ValueError naming it."""
    assert_rejects(impl.get("cost_per_million_tokens"), VALID, bad)


IO_BAD = _common("prefill_tokens_per_second") + [
    b for b in _common("decode_tokens_per_second") if "decode_tokens_per_second" in b.words]
IO_VALID = dict(gpu_hour_price=2.0, prefill_tokens_per_second=5000.0, decode_tokens_per_second=500.0, num_gpus=2,
                utilisation=0.6)


@bad_cases(IO_BAD)
def test_input_output_prices_rejects_bad_input(impl, bad):
    """As cost_per_million_tokens, each rate named prefill_tokens_per_second or decode_tokens_per_second."""
    assert_rejects(impl.get("input_output_prices"), IO_VALID, bad)


BLEND_BAD = [Bad(f"{kind} {name}", {name: value}, error, (name,))
             for name in ("input_price", "output_price", "input_per_output")
             for kind, value, error in (("negative", -1.0, ValueError), ("nan", float("nan"), ValueError),
                                        ("inf", float("inf"), ValueError), ("str", "1", TypeError),
                                        ("bool", True, TypeError), ("None", None, TypeError))]
BLEND_VALID = dict(input_price=0.25, output_price=4.0, input_per_output=3.0)


@bad_cases(BLEND_BAD)
def test_blended_price_rejects_bad_input(impl, bad):
    """input_price, output_price, input_per_output finite reals >= 0 (a bool is not one): else
    TypeError/ValueError naming it."""
    assert_rejects(impl.get("blended_price"), BLEND_VALID, bad)
