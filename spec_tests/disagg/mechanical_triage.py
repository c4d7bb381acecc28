"""Surviving mechanical variants of reference/disagg.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

From a 24-variant sample (.devscratch, not recorded): 18 killed; of the 6 survivors one was a gap,
closed since (pack_kv's check of a non-cache: test_pack_kv_rejects_what_is_not_a_cache), the rest
below.

The module-4 sweep (112 of the variants, 39 survivors; triage d1) found gaps, closed since (no entry
here): the cache shapes the contract states (prefill's and unpack_kv's cache of len(prompt) +
max_new_tokens - 1 positions: test_pack_unpack_round_trip, which also killed the earlier "one
position longer" entry); bad-input rows of pack_kv (batch 2, no position), prefill (one position past
max_seq_len, not a Request), decode (max_new_tokens 0, first_token -1) and decode_worker (src -1,
timeout <= 0); the default src (test_bitwise_under_the_batch_invariant_mode calls decode_worker
without it); a prefill worker on another rank than 0 (test_the_prefill_worker_need_not_be_rank_0); a
request that cannot be prefilled fails alone (test_a_request_that_cannot_prefill_fails_alone); and,
as choice tests of the reference's protocol: the wire format bit for bit (header layout, codes,
dtype codes, STOP: test_the_wire_format_is_the_references, which also killed the earlier STOP entry),
a malformed header refused (test_a_malformed_header_is_refused: KVHeader.decode's and
__post_init__'s checks, reached through the wire), the Handoff's attempts and a dead rank never
retried (test_failed_handoff_is_retried_on_a_live_worker, which killed the earlier
``live.remove`` entry), a reject not retried (test_rejected_header_is_not_retried).
"""

_REQUEST = ("Request is vocabulary: the tests and runs.py build the reference's Request, and no function of the "
            "module constructs one (prefill and prefill_worker take any object with its fields), so the variant's "
            "own Request.__post_init__ is reached by no contract input")

TRIAGE = {
    ("reference", 'object.__setattr__(self, "prompt", tuple(check_int("prompt", t, minimum=0) for t in self.prompt))',
     "check_int(a, b, ...) -> check_int(b, a, ...)"): (
        "outside the contract", "Request is vocabulary: the tests build the reference's Request, never a "
                                "submission's copy of the class"),
    ("reference", "logits = model(torch.tensor([[token]], dtype=torch.long, device=model.device), cache=cache)[0, -1]",
     "1 -> 0"): (
        "equivalent", "a decode step feeds one position, so index -1 and 0 of its logits are the same row"),
    ("reference", "logits = model(torch.tensor([[token]], dtype=torch.long, device=model.device), cache=cache)[0, -1]",
     "0 -> -1"): (
        "equivalent", "a decode step feeds a batch of one sequence ([[token]]), so batch index -1 and 0 are the same row"),
    # The variant module's own Request class: vocabulary, so the tests (and runs.py) build the reference's
    # Request; no function of the module constructs one (prefill/prefill_worker accept any object with the
    # fields, _is_request), so no contract input reaches the variant's __post_init__.
    ("reference", 'object.__setattr__(self, "prompt", tuple(check_int("prompt", t, minimum=0) for t in self.prompt))',
     'drop `object.__setattr__(self, "prompt", tuple(check_int("prompt",`'): ("outside the contract", _REQUEST),
    ("reference", 'object.__setattr__(self, "prompt", tuple(int(t) for t in self.prompt.reshape(-1)))',
     'drop `object.__setattr__(self, "prompt", tuple(int(t) for t in sel`'): ("outside the contract", _REQUEST),
    ("reference", 'object.__setattr__(self, "prompt", tuple(int(t) for t in self.prompt.reshape(-1)))', "1 -> 2"): (
        "outside the contract", _REQUEST),
    ("reference", 'check_int("request_id", self.request_id, minimum=0)', "check_int(a, b, ...) -> check_int(b, a, ...)"): (
        "outside the contract", _REQUEST),
    ("reference", 'check_int("request_id", self.request_id, minimum=0)', "0 -> 1"): ("outside the contract", _REQUEST),
    ("reference", "if isinstance(self.prompt, torch.Tensor):", "isinstance(a, b, ...) -> isinstance(b, a, ...)"): (
        "outside the contract", _REQUEST),
    ("reference", "if REJECT <= got[1] < REJECT + len(FIELDS) and code == ACCEPT:", "< -> <="): (
        "equivalent", "differs only for a reply code of REJECT + len(FIELDS) = 15 (then an IndexError instead of the "
                      "RuntimeError naming the code): no decode worker of this module sends it, its rejects are "
                      "REJECT + an index of FIELDS (10..14), and both ends of a run are the same implementation"),
    ("reference", "return cache.k[:, 0, :, :n].contiguous(), cache.v[:, 0, :, :n].contiguous()", "0 -> -1"): (
        "equivalent", "pack_kv takes a cache of batch 1 only (a batch-2 cache is a ValueError naming cache, a bad-input "
                      "row), where batch index -1 is index 0"),
}
