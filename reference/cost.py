"""Cost per million tokens (course 06.11): the unit economics of serving, from a GPU-hour price,
measured tokens per second and realistic utilisation, with separate input and output prices the way
every provider quotes them.

The course's claim: a GPU is paid for by the hour whether or not it is busy, so the cost of a token
is the price of the GPU time it took, divided by the fraction of the paid time the GPU is doing
work. Prefill (input tokens, compute bound, thousands of tokens/s) and decode (output tokens,
memory bound, far fewer tokens/s per GPU) run at very different rates, so a provider quotes two
prices, and a blended price follows from the workload's input:output token ratio.

Notation: price = ``gpu_hour_price`` (dollars per GPU-hour), g = ``num_gpus`` (the GPUs of one
serving replica, all paid), R = tokens per second of the replica *while it is busy* (measured, all
g GPUs together), u = ``utilisation`` in (0, 1] (the fraction of paid time the replica is busy).

    dollars per paid second      = price x g / 3600
    tokens per paid second       = R x u
    cost per million tokens      = (price x g / 3600) / (R x u) x 1e6

Separate prices: a busy second spent on prefill is charged to input tokens, one spent on decode to
output tokens, and idle time is spread over busy time in proportion (the 1/u factor on both):

    input price  = cost per million at R = P (prefill tokens/s)
    output price = cost per million at R = D (decode tokens/s)

Blended price at r input tokens per output token (a workload of r x n input and n output tokens):

    blended = (r x input price + output price) / (r + 1)

which is the total bill divided by the total tokens, per million. Consequences: doubling R halves
every price; utilisation u multiplies it by 1/u; g GPUs at g times the throughput cost the same per
token as one.

Choices the law leaves open: none beyond the definitions above (they are the contract); results are
floats in dollars per million tokens.
"""
from __future__ import annotations

from reference._checks import check_int, check_real

__all__ = ["cost_per_million_tokens", "input_output_prices", "blended_price"]  # the contract
__optional__ = []  # checked when an implementation provides them

SECONDS_PER_HOUR = 3600
TOKENS_PER_MILLION = 1_000_000


def _positive(name: str, value) -> float:
    """A finite real > 0 (TypeError / ValueError naming ``name``)."""
    value = check_real(name, value, minimum=0.0)
    if value == 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def _utilisation(utilisation) -> float:
    """A real in (0, 1] (TypeError / ValueError naming ``utilisation``)."""
    u = check_real("utilisation", utilisation, minimum=0.0, maximum=1.0)
    if u == 0:
        raise ValueError(f"utilisation must be in (0, 1], got {u}: a GPU that never works serves no tokens")
    return u


def _per_million(price: float, num_gpus: int, rate: float, u: float) -> float:
    dollars_per_second = price * num_gpus / SECONDS_PER_HOUR
    tokens_per_paid_second = rate * u
    return dollars_per_second / tokens_per_paid_second * TOKENS_PER_MILLION


def cost_per_million_tokens(gpu_hour_price: float, tokens_per_second: float, *, num_gpus: int = 1,
                            utilisation: float = 1.0) -> float:
    """Dollars per million tokens of a replica of ``num_gpus`` GPUs, each paid ``gpu_hour_price``
    dollars per hour, that serves ``tokens_per_second`` tokens per second (all its GPUs together)
    while busy and is busy a fraction ``utilisation`` of the paid time:
    ``gpu_hour_price * num_gpus / 3600 / (tokens_per_second * utilisation) * 1e6`` (a float).

    Edge cases: a price of 0 gives 0; ``utilisation=1`` (always busy) is the floor of the cost.

    Bad input: ``gpu_hour_price`` not a real number (a bool is not one) -> TypeError naming it;
    negative or not finite -> ValueError naming it. ``tokens_per_second`` not a real -> TypeError;
    <= 0 or not finite -> ValueError naming it. ``num_gpus`` not an int (a bool is not one) ->
    TypeError; < 1 -> ValueError naming it. ``utilisation`` not a real -> TypeError; outside
    (0, 1] -> ValueError naming it."""
    price = check_real("gpu_hour_price", gpu_hour_price, minimum=0.0)
    rate = _positive("tokens_per_second", tokens_per_second)
    gpus = check_int("num_gpus", num_gpus, minimum=1)
    u = _utilisation(utilisation)
    return _per_million(price, gpus, rate, u)


def input_output_prices(gpu_hour_price: float, prefill_tokens_per_second: float, decode_tokens_per_second: float,
                        *, num_gpus: int = 1, utilisation: float = 1.0) -> tuple[float, float]:
    """``(input price, output price)``, dollars per million input (prompt) and output (generated)
    tokens: :func:`cost_per_million_tokens` at the replica's prefill rate
    ``prefill_tokens_per_second`` and at its decode rate ``decode_tokens_per_second`` (each
    measured while that phase runs, all GPUs together), same price, GPUs and utilisation. A busy
    second is charged to the tokens of the phase that ran in it; idle time is spread by 1/u.

    Bad input: as :func:`cost_per_million_tokens`, the rates named ``prefill_tokens_per_second``
    and ``decode_tokens_per_second``."""
    price = check_real("gpu_hour_price", gpu_hour_price, minimum=0.0)
    prefill = _positive("prefill_tokens_per_second", prefill_tokens_per_second)
    decode = _positive("decode_tokens_per_second", decode_tokens_per_second)
    gpus = check_int("num_gpus", num_gpus, minimum=1)
    u = _utilisation(utilisation)
    return (_per_million(price, gpus, prefill, u), _per_million(price, gpus, decode, u))


def blended_price(input_price: float, output_price: float, *, input_per_output: float) -> float:
    """The blended price per million tokens of a workload with ``input_per_output`` input tokens
    per output token (r; 3.0 is the common 3:1 convention):
    ``(r * input_price + output_price) / (r + 1)``, the workload's total bill over its total tokens.
    ``r = 0`` (output only) gives ``output_price``; a large r tends to ``input_price``.

    Bad input: ``input_price``, ``output_price``, ``input_per_output`` not real numbers (a bool is
    not one) -> TypeError naming it; negative or not finite -> ValueError naming it."""
    inp = check_real("input_price", input_price, minimum=0.0)
    out = check_real("output_price", output_price, minimum=0.0)
    r = check_real("input_per_output", input_per_output, minimum=0.0)
    return (r * inp + out) / (r + 1)
