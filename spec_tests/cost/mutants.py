"""Planted bugs of `cost` (each must make a cost test fail): the unit-economics slips of 06.11."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("per_thousand", "Quotes dollars per thousand tokens under the per-million name (1e3 for 1e6).",
          "TOKENS_PER_MILLION = 1_000_000\n", "TOKENS_PER_MILLION = 1_000\n"),
    Patch("per_minute", "Reads the GPU-hour price as per minute: divides by 60, not 3600 (60x the cost).",
          "SECONDS_PER_HOUR = 3600\n", "SECONDS_PER_HOUR = 60\n"),
    Patch("utilisation_multiplied",
          "Multiplies the cost by the utilisation instead of dividing: an idle GPU looks cheaper.",
          "    tokens_per_paid_second = rate * u\n", "    tokens_per_paid_second = rate / u\n"),
    Patch("io_swapped", "Input and output prices swapped: input priced at the decode rate, output at prefill's.",
          "    return (_per_million(price, gpus, prefill, u), _per_million(price, gpus, decode, u))\n",
          "    return (_per_million(price, gpus, decode, u), _per_million(price, gpus, prefill, u))\n"),
    Patch("gpus_ignored", "Bills one GPU for a replica of num_gpus (throughput of all, price of one).",
          "    dollars_per_second = price * num_gpus / SECONDS_PER_HOUR\n",
          "    dollars_per_second = price / SECONDS_PER_HOUR\n"),
    Patch("blended_ratio_inverted", "Blends with the ratio read as output:input (r weights the output price).",
          "    return (r * inp + out) / (r + 1)\n", "    return (inp + r * out) / (r + 1)\n"),
    Patch("blended_unweighted", "Blends as the plain mean of the two prices, whatever the token ratio.",
          "    return (r * inp + out) / (r + 1)\n", "    return (inp + out) / 2\n"),
]
