"""Surviving mechanical variants of reference/chunked_prefill.py that are not gaps of the spec (read
by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Samples run: 40 variants at sample seeds 0 and 1 (36/40 killed each; the survivors are below or
closed). Gaps the first sample found, closed since (no entry here): the
``workload`` type check of simulate_serving (bad-input rows ``workload None`` and ``workload a generator``:
without the check ``len`` raises a TypeError that does not name the argument).

The module-4 sweep (113 variants, 14 survivors), triaged b1: four equivalent (below); six were
hangs of ``simulate_serving`` (a request never leaves the queue or never finishes: killed by the per-test
deadline when re-run alone, controls passing); four gaps closed (no entry): bad-input rows
``complex tokens`` (without the dtype check ``tokens.min()`` raises NotImplementedError) and
``prompt overflows the model, not the cache`` (a cache from ``new_cache(1, max_seq_len)`` with room
past the model's max_seq_len: without the up-front check the model rejects only the last chunk,
after the earlier ones were appended).
"""

_BREAK = ("the loop's remaining iterations run with budget == 0 and change nothing (a decode needs "
          "budget > 0 to be added; a prefill gets min(..., 0) = 0 and is left out): the same plan, a "
          "few iterations slower")

_SIM_CHUNK = ("simulate_serving's own check of chunk_size (#2: the one in simulate_serving); without it (or with minimum 0) a bad "
              "chunk_size reaches the first plan_step call, whose identical check_int raises the same "
              "TypeError/ValueError naming chunk_size before any step runs (the workload is non-empty, so "
              "plan_step always runs; simulate_serving has no state; only a call whose cost is bad too names cost first, and "
              "with two bad arguments either name is right)")

TRIAGE = {
    ("reference", 'check_int("token_budget", token_budget, minimum=1)',
     'drop `check_int("token_budget", token_budget, minimum=1)` (#2)'): (
        "equivalent", "simulate_serving's own check of token_budget; without it the first plan_step call raises the same "
                      "TypeError/ValueError naming token_budget, before any step runs (simulate_serving has no state)"),
    ("reference", "break", "break -> continue"): ("equivalent", _BREAK),
    ("reference", "break", "break -> continue (#2)"): ("equivalent", _BREAK),
    ("reference", 'check_int("chunk_size", chunk_size, minimum=1, allow_none=True)',
     'drop `check_int("chunk_size", chunk_size, minimum=1, allow_none=Tr` (#2)'): ("equivalent", _SIM_CHUNK),
    ("reference", 'check_int("chunk_size", chunk_size, minimum=1, allow_none=True)', "1 -> 0 (#2)"): (
        "equivalent", _SIM_CHUNK),
    ("reference", "if budget == 0:", "0 -> -1 (#2)"): (
        "equivalent", "the prefill loop's break never fires (budget >= 0 always); " + _BREAK),
    ("reference", "n = min(n, chunk_size)", "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", "min of two ints is symmetric"),
    ("reference", "n = min(remaining, budget)", "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", "min of two ints is symmetric"),
    ("reference", "return cost.overhead + max(cost.weights, cost.per_token * tokens)", "max(a, b, ...) -> max(b, a, ...)"): (
        "equivalent", "max of two floats is symmetric (neither is NaN: check_cost rejects non-finite fields)"),
    ("reference", "start = 0", "0 -> -1"): (
        "equivalent", "only without a cache: a prompt one past max_seq_len then passes the up-front check, but the "
                      "model rejects the chunk that overflows the new cache (a ValueError naming tokens and "
                      "max_seq_len) before it appends; the cache was made inside the call, so the caller sees the "
                      "same error and no state changed -- only the work of the earlier chunks is wasted"),
}
