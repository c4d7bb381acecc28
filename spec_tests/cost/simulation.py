"""A time-stepped simulation of one serving replica, the oracle of `cost`: it never uses the closed
forms, it runs a clock and sends a bill.

The replica is paid ``gpu_hour_price`` per GPU-hour for each of its ``num_gpus`` GPUs for every
tick of the horizon, busy or not. Requests (input tokens, output tokens) arrive at seeded times
(exponential gaps) and are served one at a time, first come first served: the prompt's tokens at
``prefill_per_tick`` tokens a tick, then the output's at ``decode_per_tick`` a tick (integers:
exact arithmetic). A phase that finishes inside a tick wastes the rest of that tick (the next
phase starts at the next tick): the simulation's only discreteness. The bill is split between
input and output tokens by the busy ticks each phase used; idle ticks are spread over busy ticks
in proportion (what the closed form's 1/u does).

What the simulation reports is measured from the clock: the bill, the tokens processed in each
phase, the busy ticks of each phase, the number of phases started (each may end with a partial
tick) and the utilisation (busy ticks / all ticks).

Tolerance, derived and not tuned: each tick of prefill processes at most ``prefill_per_tick``
tokens, and only the last tick of a phase may process fewer (at least one), so with I input tokens
over t_p prefill ticks and m_p prefill phases,
    t_p x prefill_per_tick - m_p x (prefill_per_tick - 1) <= I <= t_p x prefill_per_tick.
The simulated input price over the closed form's (at the rate prefill_per_tick / dt and the
measured utilisation) is t_p x prefill_per_tick / I: in [1, 1 + m_p x prefill_per_tick / I]. The
same for output; the blended price's ratio lies between the two.
"""
from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

SECONDS_PER_HOUR = 3600


@dataclass(frozen=True)
class Stream:
    """A seeded request stream and the replica serving it (``repr`` is valid Python)."""
    seed: int
    n_requests: int
    mean_gap_ticks: float          # mean inter-arrival time, in ticks
    max_input: int                 # input tokens per request in [1, max_input]
    max_output: int                # output tokens per request in [1, max_output]
    prefill_per_tick: int
    decode_per_tick: int
    dt: float                      # seconds per tick
    horizon_ticks: int             # paid ticks
    gpu_hour_price: float
    num_gpus: int = 1

    @property
    def prefill_tokens_per_second(self) -> float:
        return self.prefill_per_tick / self.dt

    @property
    def decode_tokens_per_second(self) -> float:
        return self.decode_per_tick / self.dt


@dataclass(frozen=True)
class Bill:
    dollars: float
    input_tokens: int
    output_tokens: int
    prefill_ticks: int
    decode_ticks: int
    prefill_phases: int
    decode_phases: int
    ticks: int

    @property
    def busy_ticks(self) -> int:
        return self.prefill_ticks + self.decode_ticks

    @property
    def utilisation(self) -> float:
        return self.busy_ticks / self.ticks

    def input_price(self) -> float:
        """Dollars per million input tokens: the bill's share of prefill ticks over input tokens."""
        return self.dollars * self.prefill_ticks / self.busy_ticks / self.input_tokens * 1e6

    def output_price(self) -> float:
        return self.dollars * self.decode_ticks / self.busy_ticks / self.output_tokens * 1e6

    def blended(self) -> float:
        """The whole bill over every token processed, per million."""
        return self.dollars / (self.input_tokens + self.output_tokens) * 1e6

    def input_slack(self, per_tick: int) -> float:
        return self.prefill_phases * per_tick / self.input_tokens

    def output_slack(self, per_tick: int) -> float:
        return self.decode_phases * per_tick / self.output_tokens


def simulate(s: Stream) -> Bill:
    rng = random.Random(s.seed)
    arrivals = deque()
    t = 0.0
    for _ in range(s.n_requests):
        t += rng.expovariate(1.0 / s.mean_gap_ticks)
        arrivals.append((t, rng.randint(1, s.max_input), rng.randint(1, s.max_output)))
    queue: deque = deque()
    current = None  # [phase, remaining]
    tokens = {"prefill": 0, "decode": 0}
    ticks = {"prefill": 0, "decode": 0}
    phases = {"prefill": 0, "decode": 0}
    per_tick = {"prefill": s.prefill_per_tick, "decode": s.decode_per_tick}
    for tick in range(s.horizon_ticks):
        while arrivals and arrivals[0][0] <= tick:
            queue.append(arrivals.popleft())
        if current is None and queue:
            _, n_in, n_out = queue.popleft()
            current = ["prefill", n_in, n_out]
            phases["prefill"] += 1
        if current is None:
            continue  # idle, still paid
        phase, remaining = current[0], current[1]
        done = min(remaining, per_tick[phase])
        tokens[phase] += done
        ticks[phase] += 1
        current[1] = remaining - done
        if current[1] == 0:
            if phase == "prefill":
                current = ["decode", current[2], 0]
                phases["decode"] += 1
            else:
                current = None
    dollars = s.gpu_hour_price * s.num_gpus * s.horizon_ticks * s.dt / SECONDS_PER_HOUR
    return Bill(dollars=dollars, input_tokens=tokens["prefill"], output_tokens=tokens["decode"],
                prefill_ticks=ticks["prefill"], decode_ticks=ticks["decode"], prefill_phases=phases["prefill"],
                decode_phases=phases["decode"], ticks=s.horizon_ticks)
