"""Surviving mechanical variants of reference/hit_rate.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

From a sample of 20 of the 189 variants (``--sample 20 --sample-seed 0``: 19 killed, this one
survived); the full run is still to be made."""

TRIAGE = {
    ("reference", 'L = check_int("prompt_tokens", prompt_tokens, minimum=1)', "1 -> 0"): (
        "equivalent", "time_saved(0, h) then fails `h > L - 1` (every h >= 0 exceeds -1): still a ValueError, "
                      "whose message names prompt_tokens ('hit_tokens must be <= prompt_tokens - 1 = -1')"),
}
