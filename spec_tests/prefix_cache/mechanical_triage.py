"""Surviving mechanical variants of reference/prefix_cache.py and optimized/prefix_cache.py that are
not gaps of the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source
line, the change).

Gaps the first sampled run of optimized/prefix_cache.py found, closed since (no entry here): a bool
token the fast validation misses (alone, among larger ids, among many 0s and 1s: the
TOKEN_SHAPE_BAD rows), tokens that are an iterable but no list or tuple (a range, a set, a numpy
array: the same rows), block_table's seq check (TABLE_BAD), a key built from misaligned token bytes
(test_every_bit_of_every_token_keys_its_block) and a pool of one block (test_the_smallest_pool_works).
"""

_SLICES = ("_slices only has to return at least n slices of width 8 * block_size, which max(n, ...) "
           "guarantees whatever the other terms; the rest is how far ahead the cached list grows")
_BOOL_SCAN = ("_has_bool's two branches compute the same exact predicate (some token is a bool: only a "
              "0 or 1 can be one); where the switch to the full type scan happens is speed only")

TRIAGE = {
    ("reference", 'raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")',
     'drop `raise KeyError(f"seq {seq!r} is not allocated (never allocat` (#3)'): (
        "equivalent", "block_table's next line self.tables[seq] raises KeyError(seq), whose message is repr(seq) "
                      "(all the contract asks), and nothing changes state before it"),
    ("optimized", "_MAX_PROBES = 8", "8 -> 9"): ("equivalent", _BOOL_SCAN),
    ("optimized", "_MAX_PROBES = 8", "8 -> 7"): ("equivalent", _BOOL_SCAN),
    ("optimized", "if len(where) > _MAX_PROBES:", "> -> >="): ("equivalent", _BOOL_SCAN),
    ("optimized", "if words.min() > 1:", "1 -> 2"): (
        "equivalent", "a min of 2 then goes on to the probes, which find no token <= 1 and answer False, as the "
                      "early return did"),
    ("optimized", "where = np.flatnonzero(words <= 1)", "1 -> 2"): (
        "equivalent", "a token equal to 2 is an int (a bool is 0 or 1): it fails `is True or is False` and at most "
                      "moves the switch to the full type scan, which answers the same; " + _BOOL_SCAN),
    ("optimized", 'raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")', 'drop `raise KeyError(f"seq {seq!r} is not allocated (never allocat`'): (
        "equivalent", "mark_computed's self.lengths[seq] then raises KeyError(seq), whose message is repr(seq), with "
                      "nothing changed; before it only n_tokens is checked, and the contract orders neither error first"),
    ("optimized", 'raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")', 'drop `raise KeyError(f"seq {seq!r} is not allocated (never allocat` (#2)'): (
        "equivalent", "free's self.tables.pop(seq) that follows raises KeyError(seq), whose message is repr(seq), "
                      "before any state changes"),
    ("optimized", 'raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")', 'drop `raise KeyError(f"seq {seq!r} is not allocated (never allocat` (#3)'): (
        "equivalent", "block_table's next line self.tables[seq] raises KeyError(seq), whose message is repr(seq)"),
    ("optimized", "if got is None or len(got) < n:", "< -> <="): (
        "equivalent", "with len(got) == n the list is rebuilt (bigger) instead of reused; both hold the n slices "
                      "needed, the same slice objects by value"),
    ("optimized", 'got = [slice(i * width, (i + 1) * width) for i in range(max(n, 2 * len(got or ()), 64))]', "max(a, b, ...) -> max(b, a, ...)"): ("equivalent", "max is symmetric; " + _SLICES),
    ("optimized", 'got = [slice(i * width, (i + 1) * width) for i in range(max(n, 2 * len(got or ()), 64))]', "64 -> 65"): ("equivalent", _SLICES),
    ("optimized", 'got = [slice(i * width, (i + 1) * width) for i in range(max(n, 2 * len(got or ()), 64))]', "64 -> 63"): ("equivalent", _SLICES),
    ("optimized", 'got = [slice(i * width, (i + 1) * width) for i in range(max(n, 2 * len(got or ()), 64))]', "2 -> 3"): ("equivalent", _SLICES),
    ("optimized", 'got = [slice(i * width, (i + 1) * width) for i in range(max(n, 2 * len(got or ()), 64))]', "2 -> 1"): ("equivalent", _SLICES),
    ("optimized", 'return accumulate(map(hash, zip(repeat(extra_key), range(n), blocks)), xor)',
     "zip(a, b, ...) -> zip(b, a, ...)"): (
        "equivalent", "every key is then hash((i, extra_key, bytes)) instead of hash((extra_key, i, bytes)), "
                      "consistently in every call (one function makes them): the same fields, as injective up to "
                      "the 2**-64 hash collisions the original accepts"),
    ("optimized", 'data = array("Q", tokens).tobytes()', "array(a, b, ...) -> array(b, a, ...)"): (
        "equivalent", "array(tokens, 'Q') always raises TypeError, which is caught: every call takes the fallback, "
                      "check_tokens (the contract's checks and errors) and _block_repr, whose "
                      "array('Q', block).tobytes() are the very bytes the fast path slices"),
    ('reference', 'raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")', 'drop `raise KeyError(f"seq {seq!r} is not allocated (never allocat`'): (
        "equivalent", "mark_computed's next statement, `tokens, extra_key = self.prompts[seq]`, raises KeyError(seq) "
                      "for the same seq before anything changes"),
    ('reference', 'raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")', 'drop `raise KeyError(f"seq {seq!r} is not allocated (never allocat` (#2)'): (
        "equivalent", "free's next statement, `table = self.tables.pop(seq)`, raises KeyError(seq) before anything "
                      "changes"),
}
