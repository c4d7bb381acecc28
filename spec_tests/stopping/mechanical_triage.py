"""Surviving mechanical variants of reference/stopping.py and optimized/stopping.py that are not
gaps of the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source line,
the change; "(#n)": the n-th same change of that line). Each reason says why no input of the
contract can tell the variant from the original."""

TRIAGE = {
    ('reference', 'longest = max((len(s) for s in stop), default=1) - 1  # a proper prefix is shorter than s', '- -> +'): (
        "equivalent", 'window two characters longer: a suffix of >= max_len characters is never a proper prefix; no stop strings: nothing to hold'),
    ('reference', 'if 0xF1 <= lead <= 0xF3:', '241 -> 240'): (
        "equivalent", '0xF0 returns in the branch above (lead == 0xF0) before this test'),
    ('reference', 'for start in range(max(0, len(text) - longest), len(text)):  # earliest start = longest suffix', 'max(a, b, ...) -> max(b, a, ...)'): (
        "equivalent", 'max is symmetric'),
    ('reference', 'return 2, 0x80, 0xBF', '128 -> 129'): (
        "equivalent", "a 2-byte shape's second-byte range is never read: it is checked at k >= 2, where k >= length 2 has returned"),
    ('reference', 'return 2, 0x80, 0xBF', '128 -> 127'): (
        "equivalent", "a 2-byte shape's second-byte range is never read: it is checked at k >= 2, where k >= length 2 has returned"),
    ('reference', 'return 2, 0x80, 0xBF', '191 -> 192'): (
        "equivalent", "a 2-byte shape's second-byte range is never read: it is checked at k >= 2, where k >= length 2 has returned"),
    ('reference', 'return 2, 0x80, 0xBF', '191 -> 190'): (
        "equivalent", "a 2-byte shape's second-byte range is never read: it is checked at k >= 2, where k >= length 2 has returned"),
    ('reference', 'return 3, 0xA0, 0xBF', '191 -> 192'): (
        "equivalent", 'the byte checked against hi has just passed the loop as a continuation byte (<= 0xBF)'),
    ('reference', 'if 0xE1 <= lead <= 0xEC or 0xEE <= lead <= 0xEF:', '225 -> 224'): (
        "equivalent", '0xE0 returns in the branch above (lead == 0xE0) before this test'),
    ('reference', 'return 3, 0x80, 0xBF', '128 -> 127'): (
        "equivalent", 'the byte checked against lo has just passed the loop as a continuation byte (>= 0x80)'),
    ('reference', 'return 3, 0x80, 0xBF', '191 -> 192'): (
        "equivalent", 'the byte checked against hi has just passed the loop as a continuation byte (<= 0xBF)'),
    ('reference', 'return 3, 0x80, 0x9F  # no surrogates', '128 -> 127'): (
        "equivalent", 'the byte checked against lo has just passed the loop as a continuation byte (>= 0x80)'),
    ('reference', 'return 4, 0x90, 0xBF', '4 -> 5'): (
        "equivalent", 'k <= 3, so k >= 4 and k >= 5 are both false: a 4-byte prefix is pending either way'),
    ('reference', 'return 4, 0x90, 0xBF', '191 -> 192'): (
        "equivalent", 'the byte checked against hi has just passed the loop as a continuation byte (<= 0xBF)'),
    ('reference', 'return 4, 0x80, 0xBF', '4 -> 5'): (
        "equivalent", 'k <= 3, so k >= 4 and k >= 5 are both false: a 4-byte prefix is pending either way'),
    ('reference', 'return 4, 0x80, 0xBF', '128 -> 127'): (
        "equivalent", 'the byte checked against lo has just passed the loop as a continuation byte (>= 0x80)'),
    ('reference', 'return 4, 0x80, 0xBF', '191 -> 192'): (
        "equivalent", 'the byte checked against hi has just passed the loop as a continuation byte (<= 0xBF)'),
    ('reference', 'return 4, 0x80, 0x8F  # nothing above U+10FFFF', '4 -> 5'): (
        "equivalent", 'k <= 3, so k >= 4 and k >= 5 are both false: a 4-byte prefix is pending either way'),
    ('reference', 'return 4, 0x80, 0x8F  # nothing above U+10FFFF', '128 -> 127'): (
        "equivalent", 'the byte checked against lo has just passed the loop as a continuation byte (>= 0x80)'),
    ('reference', 'for k in range(1, min(3, len(data)) + 1):', 'min(a, b, ...) -> min(b, a, ...)'): (
        "equivalent", 'min is symmetric'),
    ('reference', 'for k in range(1, min(3, len(data)) + 1):', '3 -> 4'): (
        "equivalent", 'at k = 4 every path returns 0 (continuation: the loop ends; a lead byte: k >= its length; else None), as after k = 3'),
    ('optimized', 'self._keep = max((len(s) for s in self._stop), default=1) - 1  # window of old text to keep', '- -> +'): (
        "equivalent", 'a longer tail: matches are searched from base - len(s) + 1 and cut relative to base; a suffix of >= max_len characters is never a proper prefix'),
    ('optimized', 'if len(self._parts) > 1:', '> -> >='): (
        "equivalent", 'joining a single part gives the same string'),
    ('optimized', 'if len(self._parts) > 1:', '1 -> 0'): (
        "equivalent", 'joining a single part gives the same string'),
    ('optimized', 'return self._parts[0] if self._parts else ""', '0 -> -1'): (
        "equivalent", 'after the join there is at most one part: [-1] is [0]'),
    ('optimized', 'self._shown = max(self._shown, visible)', 'max(a, b, ...) -> max(b, a, ...)'): (
        "equivalent", 'max is symmetric'),
    ('optimized', 'm = self._starts.search(window, max(0, end - self._keep))  # candidate first characters', 'max(a, b, ...) -> max(b, a, ...)'): (
        "equivalent", 'max is symmetric'),
    ('optimized', 'start = window.find(s, max(0, base - len(s) + 1))  # the first one ending after base', 'max(a, b, ...) -> max(b, a, ...)'): (
        "equivalent", 'max is symmetric'),
    ('optimized', 'self._tail = window[max(0, len(window) - self._keep):] if self._keep else ""', 'max(a, b, ...) -> max(b, a, ...)'): (
        "equivalent", 'max is symmetric'),
    ('optimized', 'emitted = window[len(window) - (self._length - self._shown): len(window) - held] if visible > self._shown else ""', '> -> >='): (
        "equivalent", "at visible == shown the slice is window[len - held:len - held] == '', the other branch's value"),
    ('optimized', 'm = self._starts.search(window, max(0, end - self._keep))  # candidate first characters', 'max -> min'): (
        "equivalent", 'searching from 0 only adds candidates whose suffix is longer than max_len - 1, never a proper prefix (re treats pos < 0 as 0)'),
    ('optimized', 'm = self._starts.search(window, max(0, end - self._keep))  # candidate first characters', '0 -> -1'): (
        "equivalent", 're treats a negative pos as 0, and a start before end - keep has a suffix too long to be a proper prefix'),
    ('optimized', 'self._prefixes = {s[:k] for s in self._stop for k in range(1, len(s))}', '1 -> 0'): (
        "equivalent", "adds '' to the prefixes: a looked-up suffix is never empty; all-length-1 stop strings then run _held_back, which finds nothing (keep = 0)"),
    ('optimized', 'if start != -1 and (best is None or (start + len(s), -len(s)) < best[0]):', '< -> <='): (
        "equivalent", 'equal keys (end, -len) mean the same string at the same place (stop strings are deduplicated): the same pick'),
    ('reference', 'longest = max((len(s) for s in stop), default=1) - 1  # a proper prefix is shorter than s', '1 -> 0'): (
        "equivalent", 'window one character longer: a suffix of max_len characters is never a proper prefix'),
    ('reference', 'longest = max((len(s) for s in stop), default=1) - 1  # a proper prefix is shorter than s', '1 -> 0 (#2)'): (
        "equivalent", 'default=0 is used only with no stop string, where no suffix is held either way (range empty)'),
    ('reference', 'longest = max((len(s) for s in stop), default=1) - 1  # a proper prefix is shorter than s', '1 -> 2 (#2)'): (
        "equivalent", 'default=2 is used only with no stop string, where no suffix is held either way (any() of nothing)'),
    ('reference', 'return 0', '0 -> -1'): (
        "equivalent", 'pending_length -1 instead of 0: data[:len(data) + 1] is data, the same decoded text'),
    ('reference', 'return 0', '0 -> -1 (#3)'): (
        "equivalent", 'pending_length -1 instead of 0: data[:len(data) + 1] is data, the same decoded text'),
    ('reference', 'return 0', '0 -> -1 (#4)'): (
        "equivalent", 'pending_length -1 instead of 0: data[:len(data) + 1] is data, the same decoded text'),
    ('optimized', 'self._keep = max((len(s) for s in self._stop), default=1) - 1  # window of old text to keep', '1 -> 0'): (
        "equivalent", 'keep one character longer: matches are cut relative to base; a suffix of max_len characters is never a proper prefix'),
    ('optimized', 'self._keep = max((len(s) for s in self._stop), default=1) - 1  # window of old text to keep', '1 -> 2 (#2)'): (
        "equivalent", 'default=2 is used only with no stop string: the kept tail is never read (no match, no hold)'),
    ('optimized', 'self._keep = max((len(s) for s in self._stop), default=1) - 1  # window of old text to keep', '1 -> 0 (#2)'): (
        "equivalent", "default=0 (keep -1) only with no stop string: the tail becomes '' and is never read"),
}
