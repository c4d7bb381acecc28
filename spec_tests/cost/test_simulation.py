"""The closed forms of `cost` (course 06.11) against a time-stepped simulation of a replica serving
a seeded request stream: the simulation runs a clock, sends a bill for every paid tick and splits
it by the ticks each phase used; the closed forms, given the stream's rates and the utilisation the
clock measured, must agree within the simulation's discreteness, a bound derived in
spec_tests/cost/simulation.py (each phase may end inside a tick), not a tuned tolerance.
"""
from __future__ import annotations

from hypothesis import assume, example, given

from spec_tests.cost.simulation import Stream, simulate
from spec_tests.cost.strategies import streams

EPS = 1e-9  # float rounding of a handful of products and quotients

# A busy replica (gap 2 ticks: a queue forms, u ~ 1, 8 GPUs, rates 4:1), a quiet one (u ~ 0.17), equal rates.
BUSY = Stream(seed=1, n_requests=200, mean_gap_ticks=2.0, max_input=400, max_output=100, prefill_per_tick=8,
              decode_per_tick=2, dt=0.01, horizon_ticks=1500, gpu_hour_price=2.49, num_gpus=8)
QUIET = Stream(seed=7, n_requests=12, mean_gap_ticks=150.0, max_input=300, max_output=100, prefill_per_tick=10,
               decode_per_tick=2, dt=0.05, horizon_ticks=2500, gpu_hour_price=2.0, num_gpus=1)
SAME = Stream(seed=3, n_requests=20, mean_gap_ticks=40.0, max_input=100, max_output=100, prefill_per_tick=7,
              decode_per_tick=7, dt=0.25, horizon_ticks=1500, gpu_hour_price=3.5, num_gpus=2)


def _within(what: str, simulated: float, closed: float, slack: float, s: Stream) -> None:
    ratio = simulated / closed
    assert 1 - EPS <= ratio <= 1 + slack + EPS, (
        f"{what}: the simulation's bill gives {simulated!r} per million, the closed form {closed!r} "
        f"(ratio {ratio!r}; the discreteness allows [1, {1 + slack!r}]) for {s!r}")


@example(s=BUSY).via("mutant:io_swapped mutant:per_thousand mutant:gpus_ignored")
@example(s=QUIET).via("mutant:utilisation_multiplied mutant:per_minute")
@given(s=streams())
def test_input_output_prices_match_the_bill(impl, s):
    """input_output_prices(price, P, D, num_gpus=g, utilisation=u), P and D the replica's prefill and
    decode rates and u the busy fraction the clock measured, equals the simulated bill's share of
    prefill (decode) ticks per million input (output) tokens, within the discreteness bound."""
    bill = simulate(s)
    assume(bill.input_tokens > 0 and bill.output_tokens > 0)
    got = impl.get("input_output_prices")(s.gpu_hour_price, s.prefill_tokens_per_second, s.decode_tokens_per_second,
                                          num_gpus=s.num_gpus, utilisation=bill.utilisation)
    got = tuple(got)
    assert len(got) == 2, f"input_output_prices must return (input price, output price), got {got!r}"
    _within("input price", bill.input_price(), got[0], bill.input_slack(s.prefill_per_tick), s)
    _within("output price", bill.output_price(), got[1], bill.output_slack(s.decode_per_tick), s)


@example(s=BUSY).via("mutant:blended_ratio_inverted mutant:blended_unweighted")
@example(s=QUIET).via("boundary: a quiet replica, utilisation about 0.1")
@given(s=streams())
def test_blended_price_is_the_bill_over_all_tokens(impl, s):
    """blended_price(input price, output price, input_per_output=I/O), at the workload's measured
    input:output token ratio, is the simulated bill over every token processed, per million."""
    bill = simulate(s)
    assume(bill.input_tokens > 0 and bill.output_tokens > 0)
    inp, out = impl.get("input_output_prices")(s.gpu_hour_price, s.prefill_tokens_per_second,
                                               s.decode_tokens_per_second, num_gpus=s.num_gpus,
                                               utilisation=bill.utilisation)
    got = impl.get("blended_price")(inp, out, input_per_output=bill.input_tokens / bill.output_tokens)
    slack = max(bill.input_slack(s.prefill_per_tick), bill.output_slack(s.decode_per_tick))
    _within("blended price", bill.blended(), got, slack, s)


@example(s=SAME).via("mutant:utilisation_multiplied mutant:per_thousand mutant:per_minute mutant:gpus_ignored")
@given(s=streams(same_rates=True))
def test_cost_per_million_matches_the_bill(impl, s):
    """A replica whose prefill and decode run at one rate R: cost_per_million_tokens(price, R,
    num_gpus=g, utilisation=u) is the simulated bill over every token processed, per million."""
    bill = simulate(s)
    assume(bill.input_tokens > 0 and bill.output_tokens > 0)
    got = impl.get("cost_per_million_tokens")(s.gpu_hour_price, s.prefill_tokens_per_second, num_gpus=s.num_gpus,
                                              utilisation=bill.utilisation)
    slack = (bill.prefill_phases + bill.decode_phases) * s.prefill_per_tick / (bill.input_tokens + bill.output_tokens)
    _within("cost per million tokens", bill.blended(), got, slack, s)


def test_the_simulation_is_busy_and_idle():
    """The pinned streams exercise what the properties claim: BUSY queues (utilisation > 0.9), QUIET
    idles (utilisation < 0.3), and the discreteness bounds are small (< 10 %). (The oracle's own check.)"""
    busy, quiet = simulate(BUSY), simulate(QUIET)
    assert busy.utilisation > 0.9 and quiet.utilisation < 0.3, (busy, quiet)
    for s, b in ((BUSY, busy), (QUIET, quiet)):
        assert b.input_slack(s.prefill_per_tick) < 0.1 and b.output_slack(s.decode_per_tick) < 0.1, b
