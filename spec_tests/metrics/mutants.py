"""Planted bugs of `metrics` (each must make a metrics test fail)."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("tpot_counts_first_token",
          "TPOT computed as end-to-end latency over all output tokens, (t[n-1] - arrival) / n: the "
          "first token's wait (TTFT, the prefill) leaks into the per-token decode time.",
          "    tpot = (last - first) / (n - 1) if n > 1 else None\n",
          "    tpot = (last - arrival) / n if n > 1 else None\n"),
    Patch("goodput_either_slo",
          "Goodput counts a request meeting EITHER SLO (TTFT or TPOT) instead of both.",
          "    return ttft_ok and tpot_ok\n",
          "    return ttft_ok or tpot_ok\n"),
    Patch("percentile_off_by_one",
          "Percentile rank computed as n * q / 100 instead of (n - 1) * q / 100 (an off-by-one "
          "between 1-based ranks and 0-based indices): p50 of [1, 2, 3, 4] is 3 instead of 2.5.",
          "    h = (len(v) - 1) * q / 100.0\n",
          "    h = len(v) * q / 100.0\n"),
]

MUTANTS += [
    # Boundaries and defaults.
    Patch("zero_ttft_slo_ignored",
          "The TTFT SLO is tested for truthiness (`not ttft_slo or ...`): an SLO of 0 is treated "
          "as no limit, so every request meets it.",
          "    ttft_ok = ttft_slo is None or m.ttft <= ttft_slo\n",
          "    ttft_ok = not ttft_slo or m.ttft <= ttft_slo\n"),
    Patch("zero_tpot_slo_ignored",
          "The TPOT SLO is tested for truthiness (`not tpot_slo or ...`): an SLO of 0 is treated "
          "as no limit.",
          "    tpot_ok = tpot_slo is None or m.tpot is None or m.tpot <= tpot_slo\n",
          "    tpot_ok = not tpot_slo or m.tpot is None or m.tpot <= tpot_slo\n"),
    Patch("slo_exclusive",
          "A request meets the TTFT SLO only if TTFT < ttft_slo (strict) instead of <=.",
          "    ttft_ok = ttft_slo is None or m.ttft <= ttft_slo\n",
          "    ttft_ok = ttft_slo is None or m.ttft < ttft_slo\n"),
    Patch("one_token_fails_tpot_slo",
          "A one-token request (no TPOT) fails any TPOT SLO instead of meeting it.",
          "    tpot_ok = tpot_slo is None or m.tpot is None or m.tpot <= tpot_slo\n",
          "    tpot_ok = tpot_slo is None or (m.tpot is not None and m.tpot <= tpot_slo)\n"),
    Patch("one_token_tpot_zero",
          "TPOT of a one-token request is 0.0 (vLLM's benchmark convention) instead of None: it "
          "pulls TPOT means and percentiles down.",
          "    tpot = (last - first) / (n - 1) if n > 1 else None\n",
          "    tpot = (last - first) / (n - 1) if n > 1 else 0.0\n"),
    Patch("p100_out_of_range",
          "No guard for the last rank: q = 100 (or a single value) reads v[n], an IndexError.",
          "    if lo + 1 >= len(v):\n        return v[-1]\n",
          ""),
    Patch("percentile_unsorted",
          "Interpolates between ranks of the values in the order given, without sorting them.",
          '    v = sorted(check_real("values", x) for x in values)\n',
          '    v = [check_real("values", x) for x in values]\n'),
    Patch("default_percentiles_without_p95",
          "summarize's default percentiles are (50, 90, 99): p95, documented as a default, is "
          "missing when percentiles is omitted.",
          "DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)",
          "DEFAULT_PERCENTILES = (50.0, 90.0, 99.0)"),
    Patch("empty_percentiles_become_default",
          "`percentiles or DEFAULT_PERCENTILES`: an explicit empty tuple of percentiles is replaced "
          "by the default instead of giving empty percentile dicts.",
          '    percentiles = tuple(check_real("percentiles", q, minimum=0.0, maximum=100.0) for q in percentiles)\n',
          '    percentiles = tuple(check_real("percentiles", q, minimum=0.0, maximum=100.0)\n'
          '                        for q in (percentiles or DEFAULT_PERCENTILES))\n'),
    Patch("nan_slo_accepted",
          "SLOs are checked with `slo < 0` only: NaN (and inf) pass the check, and a NaN SLO "
          "silently fails every request.",
          '    check_real("ttft_slo", ttft_slo, minimum=0.0, allow_none=True)\n'
          '    check_real("tpot_slo", tpot_slo, minimum=0.0, allow_none=True)\n',
          '    for name, slo in (("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo)):\n'
          '        if slo is not None and slo < 0:\n'
          '            raise ValueError(f"{name} must be >= 0, got {slo}")\n'),
]
MUTANTS += [
    Patch("zero_gap_tpot_none",
          "TPOT is None whenever the decode took no time (`if last > first`, a division-by-zero "
          "guard in the wrong place): tokens emitted in one step (speculative decoding) have TPOT "
          "0, not an undefined TPOT.",
          "    tpot = (last - first) / (n - 1) if n > 1 else None\n",
          "    tpot = (last - first) / (n - 1) if last > first else None\n"),
    Patch("no_slo_meets_nothing",
          "A TTFT SLO of None is read as 'no request can meet it' (`ttft_slo is not None and ...`) "
          "instead of 'no limit': without SLOs goodput is 0.",
          "    ttft_ok = ttft_slo is None or m.ttft <= ttft_slo\n",
          "    ttft_ok = ttft_slo is not None and m.ttft <= ttft_slo\n"),
    Patch("float32_timestamps",
          "Timestamps held as float32 (torch.tensor(token_times)'s default dtype, or a np.float32 "
          "array): at epoch-scale times (1.7e9 s) one float32 ulp is 128 s, so TTFT, ITL and TPOT "
          "of real timestamps are garbage while small test times look fine.",
          '    t = tuple(check_real("token_times", x) for x in token_times)\n',
          '    t = tuple(__import__("array").array("f", [check_real("token_times", x) for x in token_times]))\n'
          '    a = __import__("array").array("f", [a])[0]\n'),
]
MUTANTS += [
    # Probes for gaps (run window, distribution formulas, validation boundaries, input mutation).
    Patch("duration_from_first_token",
          "The run window starts at the first token instead of the first arrival.",
          "    start = min(a for a, _ in checked)\n",
          "    start = min(t[0] for _, t in checked)\n"),
    Patch("duration_ends_at_last_request",
          "The run window ends at the last token of the last request in list order, not the "
          "latest token of any request.",
          "    end = max(t[-1] for _, t in checked)\n",
          "    end = checked[-1][1][-1]\n"),
    Patch("mean_is_median",
          "Distribution.mean is the (upper) median instead of the arithmetic mean.",
          "mean=math.fsum(values) / len(values),",
          "mean=sorted(values)[len(values) // 2],"),
    Patch("one_token_tpot_in_distribution",
          "One-token requests enter the TPOT distribution as 0.0 instead of being left out.",
          "    tpots = [m.tpot for m in per_request if m.tpot is not None]\n",
          "    tpots = [0.0 if m.tpot is None else m.tpot for m in per_request]\n"),
    Patch("goodput_as_fraction",
          "Goodput is good requests / all requests (a fraction) instead of good requests per second.",
          "good_requests=good, goodput=good / duration,",
          "good_requests=good, goodput=good / len(per_request),"),
    Patch("itl_per_request_means",
          "The ITL distribution pools each request's mean gap (its TPOT) instead of every gap.",
          "    gaps = [g for m in per_request for g in m.itl]\n",
          "    gaps = [m.tpot for m in per_request if m.tpot is not None]\n"),
    Patch("token_at_arrival_rejected",
          "A first token at the arrival instant (TTFT 0) is rejected as before arrival (<= for <).",
          "    if t[0] < a:\n",
          "    if t[0] <= a:\n"),
    Patch("percentile_sorts_input",
          "percentile sorts the caller's list in place (values.sort()) before reading it.",
          '    v = sorted(check_real("values", x) for x in values)\n',
          '    if isinstance(values, list) and all(isinstance(x, float) for x in values):\n'
          '        values.sort()\n'
          '    v = sorted(check_real("values", x) for x in values)\n'),
]
MUTANTS += [
    Patch("request_longer_than_pair_accepted",
          "A request is checked for at least two fields (len(req) < 2) instead of exactly two: a "
          "triple reaches check_request and fails with a TypeError not naming requests.",
          "        if not isinstance(req, Sequence) or len(req) != 2:\n",
          "        if not isinstance(req, Sequence) or len(req) < 2:\n"),
    Patch("tpot_slo_on_worst_gap",
          "The TPOT SLO is checked against the request's largest inter-token gap instead of its TPOT.",
          "    tpot_ok = tpot_slo is None or m.tpot is None or m.tpot <= tpot_slo\n",
          "    tpot_ok = tpot_slo is None or m.tpot is None or max(m.itl) <= tpot_slo\n"),
]
