"""Planted bugs of `metrics` (each must make a metrics test fail)."""
from conformance.mutants import Patch

MUTANTS = [
    Patch("tpot_counts_first_token",
          "TPOT computed as end-to-end latency over all output tokens, (t[n-1] - arrival) / n: the "
          "first token's wait (TTFT, the prefill) leaks into the per-token decode time.",
          "reference/metrics.py",
          "    tpot = (last - first) / (n - 1) if n > 1 else None\n",
          "    tpot = (last - arrival) / n if n > 1 else None\n"),
    Patch("goodput_either_slo",
          "Goodput counts a request meeting EITHER SLO (TTFT or TPOT) instead of both.",
          "reference/metrics.py",
          "    return ttft_ok and tpot_ok\n",
          "    return ttft_ok or tpot_ok\n"),
    Patch("percentile_off_by_one",
          "Percentile rank computed as n * q / 100 instead of (n - 1) * q / 100 (an off-by-one "
          "between 1-based ranks and 0-based indices): p50 of [1, 2, 3, 4] is 3 instead of 2.5.",
          "reference/metrics.py",
          "    h = (len(v) - 1) * q / 100.0\n",
          "    h = len(v) * q / 100.0\n"),
]
