"""Surviving mechanical variants of reference/generate.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""
_CACHE = "cache = model.new_cache(batch, prompt_len + max_new_tokens - 1)   # the last token is never fed"
_STEP = "step_logits = model(token[:, None], cache=cache)[:, -1]"

TRIAGE = {
    ("reference", _CACHE, "- -> +"): (
        "equivalent", "the cache gets two positions more than it is ever filled; nothing reads them"),
    ("reference", _CACHE, "1 -> 0"): (
        "equivalent", "the cache gets one position more than it is ever filled; nothing reads it"),
    ("reference", _STEP, "1 -> 0"): (
        "equivalent", "a decode step feeds one token, so position 0 is position -1"),
}
