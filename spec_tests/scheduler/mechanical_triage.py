"""Surviving mechanical variants of reference/scheduler.py and optimized/scheduler.py that are not
gaps of the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source line
stripped, the change).

From the sample of 60 of both modules (``--mechanical both --sample 60 --profile mutants``, a
``--deadline`` sweep), after the modules changed (optimized/scheduler.py now subclasses the
reference's classes). Every survivor below is equivalent; the reason is one line each.
"""

_UNREACHABLE = ("the running loop can only meet a budget of 0 with running requests left if the requests "
                "before them need the whole budget; they cannot: every running request took >= 1 token in "
                "the step that admitted it (so there are at most budget of them), each needs 1 token a "
                "step once its prompt is done, and a request still in its chunked prefill is the newest "
                "running one (its chunk took the budget that was left, so nobody was admitted after it)")

_SYMMETRIC = ("equivalent", "min of two ints is symmetric")
_SET_AT_ADMISSION = ("equivalent", "a waiting request's count is not read: admission sets num_computed_tokens = "
                                   "hit_tokens before anything reads it (its n is num_tokens - hit_tokens), and the "
                                   "outputs report it only for scheduled requests")
_NEVER_READ_REFS = ("equivalent", "a block's count is read only after take() has set it to 1 (hits are cached "
                                  "blocks, and a block is cached only once taken): the starting value of a never-taken "
                                  "block is never read")
_STEP_DEFAULT = ("equivalent", "the dataclass field's default: schedule() always passes step= "
                               "(test_steps_are_numbered_from_one)")
_NO_SENTINEL = ("equivalent", "unreachable: every waiting request has a live entry in the need heap (pushed at "
                              "add_request and again at preemption; a skipped request's stays valid), so while "
                              "_waiting is non-empty the heap is too and _min_need never returns the sentinel")

TRIAGE = {
    ("reference", "n = min(req.num_tokens - req.num_computed_tokens, budget)", "min(a, b, ...) -> min(b, a, ...)"): _SYMMETRIC,
    ("reference", "n = min(n, budget)", "min(a, b, ...) -> min(b, a, ...)"): _SYMMETRIC,
    ("optimized", "n = min(req.num_tokens - req.num_computed_tokens, budget)", "min(a, b, ...) -> min(b, a, ...)"): _SYMMETRIC,
    **{("reference", "self.num_computed_tokens = 0", c): _SET_AT_ADMISSION for c in ("0 -> -1", "0 -> 1")},
    ("reference", "req.num_computed_tokens = 0", "0 -> -1"): _SET_AT_ADMISSION,
    ("reference", "self.refs = [0] * num_blocks", "0 -> 1"): _NEVER_READ_REFS,
    ("reference", "step: int = 0                                             # 1 for the first schedule()", "0 -> 1"): _STEP_DEFAULT,
    ("reference", "while i < len(self._running) and budget > 0:", "> -> >="): ("equivalent", _UNREACHABLE),
    ("optimized", "break  # req preempted itself", "break -> continue"): (
        "equivalent", "after _allocate_or_preempt returns False the request preempted itself, the last of "
                      "_running (the newest go first), so i == len(_running) and the loop ends either way"),
    **{("optimized", "return 1 << 62", c): _NO_SENTINEL for c in ("1 -> 0", "1 -> 2", "62 -> 61", "62 -> 63")},
    **{("optimized", "self._pushed = 0", c): ("equivalent", "the serials' starting value: they stay distinct")
       for c in ("0 -> -1", "0 -> 1")},
    ("optimized", "self._pushed += 1  # a tie-breaker: ids of different types do not compare", "1 -> 2"): (
        "equivalent", "serials counted by 2 stay distinct and increasing"),
    ("optimized", "n = min(n, budget)", "min(a, b, ...) -> min(b, a, ...)"): _SYMMETRIC,
    ("reference", "while i < len(self._running) and budget > 0:", "0 -> -1"): ("equivalent", _UNREACHABLE),
    ("reference", "step: int = 0                                             # 1 for the first schedule()", "0 -> -1"): (
        "equivalent", "the dataclass field's default: schedule() always passes step= (test_steps_are_numbered_from_one)"),
    ("reference", "break  # req preempted itself", "break -> continue"): (
        "equivalent", "after _allocate_or_preempt returns False the request preempted itself, the last of "
                      "_running (the newest go first), so i == len(_running) and the loop ends either way"),
    ("optimized", "while i < len(self._running) and budget > 0:", "0 -> -1"): ("equivalent", _UNREACHABLE),
    ("optimized", "while i < len(self._running) and budget > 0:", "> -> >="): ("equivalent", _UNREACHABLE),
    ("reference", "req.num_computed_tokens = 0", "0 -> 1"): (
        "equivalent", "a preempted request waits; the reference's admission sets num_computed_tokens = hit_tokens "
                      "before anything reads it (its n is num_tokens - hit_tokens), so the 1 is never seen"),
    ("reference", "self.refs = [0] * num_blocks", "0 -> -1"): (
        "equivalent", "a block's count is read only after take() has set it to 1 (hits are cached blocks, and a block "
                      "is cached only once taken): the starting value of a never-taken block is never read"),
    ("optimized", "self._pushed += 1  # a tie-breaker: ids of different types do not compare", "+= -> -="): (
        "equivalent", "the serial only breaks ties between heap entries of equal token counts; _min_need returns "
                      "the count, which is the same whichever of the tied entries is on top"),
    ("optimized", "if not self.enable_chunked_prefill and not self.enable_prefix_caching:", "and -> or"): (
        "equivalent", "needs are then also pushed with chunked prefill or prefix caching on, where _min_need is "
                      "never read (schedule() consults it only with both off): memory, not results"),
}
