"""Hypothesis strategies for `cost`: prices, rates and utilisations, and seeded request streams
for the simulation (spec_tests/cost/simulation.py)."""
from __future__ import annotations

from hypothesis import strategies as st

from spec_tests.cost.simulation import Stream

prices = st.floats(0.01, 100.0, allow_nan=False)                  # dollars per GPU-hour
rates = st.floats(0.5, 1e6, allow_nan=False)                      # tokens per second while busy
utilisations = st.floats(0.01, 1.0, allow_nan=False, exclude_min=False)
gpus = st.integers(1, 16)
ratios = st.floats(0.0, 1000.0, allow_nan=False)                  # input tokens per output token


@st.composite
def streams(draw, same_rates: bool = False) -> Stream:
    prefill = draw(st.integers(1, 64))
    decode = prefill if same_rates else draw(st.integers(1, 16))
    return Stream(seed=draw(st.integers(0, 2**16)), n_requests=draw(st.integers(3, 30)),
                  mean_gap_ticks=draw(st.sampled_from([2.0, 10.0, 40.0, 150.0])),
                  max_input=draw(st.integers(1, 300)), max_output=draw(st.integers(1, 120)),
                  prefill_per_tick=prefill, decode_per_tick=decode,
                  dt=draw(st.sampled_from([0.001, 0.01, 0.05, 0.25])), horizon_ticks=draw(st.integers(300, 2500)),
                  gpu_hour_price=draw(st.sampled_from([0.85, 2.0, 2.49, 3.5, 12.3])), num_gpus=draw(st.integers(1, 8)))
