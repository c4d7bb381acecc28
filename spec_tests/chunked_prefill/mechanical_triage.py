"""Surviving mechanical variants of reference/chunked_prefill.py that are not gaps of the spec (read
by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Samples run: 40 variants at sample seeds 0 and 1 (36/40 killed each; the survivors are below or
closed). Gaps the first sample found, closed since (no entry here): the
``workload`` type check of simulate (bad-input rows ``workload None`` and ``workload a generator``:
without the check ``len`` raises a TypeError that does not name the argument).
"""

_BREAK = ("the loop's remaining iterations run with budget == 0 and change nothing (a decode needs "
          "budget > 0 to be added; a prefill gets min(..., 0) = 0 and is left out): the same plan, a "
          "few iterations slower")

TRIAGE = {
    ("reference", 'check_int("token_budget", token_budget, minimum=1)',
     'drop `check_int("token_budget", token_budget, minimum=1)` (#2)'): (
        "equivalent", "simulate's own check of token_budget; without it the first plan_step call raises the same "
                      "TypeError/ValueError naming token_budget, before any step runs (simulate has no state)"),
    ("reference", "break", "break -> continue"): ("equivalent", _BREAK),
    ("reference", "break", "break -> continue (#2)"): ("equivalent", _BREAK),
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
