"""Surviving mechanical variants of reference/disagg.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

From a 24-variant sample (.devscratch, not recorded): 18 killed; of the 6 survivors one was a gap,
closed since (pack_kv's check of a non-cache: test_pack_kv_rejects_what_is_not_a_cache), the rest
below.
"""

TRIAGE = {
    ("reference", "STOP = torch.tensor([VERSION, -1, 0, 0, 0, 0, 0, 0, 0], dtype=torch.int64)", "0 -> -1"): (
        "equivalent", "STOP is one constant both workers of an implementation share (sent and compared whole); "
                      "any value that is no valid header ends the loop alike"),
    ("reference", "cache = model.new_cache(1, header.n_tokens + header.max_new_tokens - 1)", "1 -> 0 (#2)"): (
        "equivalent", "a decode cache one position longer than needed: the filled positions and every op on them "
                      "are the same (attention reads only the first seq_len positions)"),
    ("reference", "live.remove(rank)", "drop `live.remove(rank)`"): (
        "equivalent", "a dead rank stays in the live list: later requests try it again, fail at once (closed "
                      "connection) and move on to the next rank -- the same statuses, only more attempts"),
    ("reference", 'object.__setattr__(self, "prompt", tuple(check_int("prompt", t, minimum=0) for t in self.prompt))',
     "check_int(a, b, ...) -> check_int(b, a, ...)"): (
        "outside the contract", "Request is vocabulary: the tests build the reference's Request, never a "
                                "submission's copy of the class"),
    ("reference", "logits = model(torch.tensor([[token]], dtype=torch.long, device=model.device), cache=cache)[0, -1]",
     "1 -> 0"): (
        "equivalent", "a decode step feeds one position, so index -1 and 0 of its logits are the same row"),
}
