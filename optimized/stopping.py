"""Stopping criteria with an incremental matcher: same names, signatures and behaviour as
``reference/stopping.py`` (whose docstring is the contract), without rescanning the whole text.

Per token it decodes only the new bytes (plus at most 3 pending ones), and searches only a window
of the last ``max_stop_len - 1`` characters of the old text plus the new characters: an occurrence
that ends inside the new characters starts at most ``len(s) - 1`` characters before them. The
held-back suffix is found with a set of all proper prefixes of the stop strings, tried only at the
window positions holding a character that begins a stop string (found by a compiled regex). Cost per token:
O(#stop x (max_stop_len + new characters)), independent of how long the generation already is.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from reference._checks import is_int
from reference.stopping import Step, StopParams, check_checker_inputs, pending_length

__all__ = ["StopParams", "StopChecker"]  # StopParams re-exported: the same names as reference/stopping.py


class StopChecker:
    """See ``reference.stopping.StopChecker``."""

    def __init__(self, params: StopParams, vocab: Mapping[int, bytes] | Sequence[bytes]):
        self.params = params
        self._vocab = check_checker_inputs(params, vocab)
        self._stop = tuple(dict.fromkeys(params.stop))
        self._keep = max((len(s) for s in self._stop), default=1) - 1  # window of old text to keep
        self._prefixes = {s[:k] for s in self._stop for k in range(1, len(s))}
        self._starts = re.compile("|".join(sorted({re.escape(s[0]) for s in self._stop})) or "(?!)")
        self._hold = not params.include_stop_str_in_output and bool(self._prefixes)
        self._stop_ids = frozenset(params.stop_token_ids)
        self._parts: list[str] = []   # decoded pieces; their concatenation is the text
        self._length = 0              # len(text)
        self._tail = ""               # the last <= self._keep characters of text
        self._pending = b""           # undecoded bytes of an incomplete character
        self._shown = 0               # characters emitted so far
        self._final: str | None = None
        self.num_tokens = 0
        self.finished = False
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None

    @property
    def text(self) -> str:
        if self._final is not None:
            return self._final
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def append(self, token_id: int) -> Step:
        if not is_int(token_id):
            raise TypeError(f"token_id must be an int, got {token_id!r}")
        token = self._vocab.get(token_id)
        if token is None:
            raise ValueError(f"token_id {token_id} is not in the vocab")
        if self.finished:
            raise ValueError(f"token_id {token_id}: generation already finished ({self.finish_reason})")
        p = self.params
        n = self.num_tokens + 1
        may_stop = n > p.min_tokens
        if may_stop and token_id == p.eos_token_id and not p.ignore_eos:
            return self._finish(n, self.text, "stop", None)
        if may_stop and token_id in self._stop_ids:
            return self._finish(n, self.text, "stop", token_id)

        data = self._pending + token
        k = pending_length(data)
        new = data[: len(data) - k].decode("utf-8", errors="replace")
        window = self._tail + new
        base = len(self._tail)
        if may_stop and new and self._stop:
            match = self._match(window, base)
            if match is not None:
                start, s = match
                cut = start + len(s) if p.include_stop_str_in_output else start
                old = self.text  # window[i] is character len(old) - base + i of the text
                return self._finish(n, (old + new)[: len(old) - base + cut], "stop", s)
        if n == p.max_tokens:
            return self._finish(n, self.text + new, "length", None)

        self._pending, self.num_tokens = data[len(data) - k:], n
        if new:
            self._parts.append(new)
            self._length += len(new)
            self._tail = window[max(0, len(window) - self._keep):] if self._keep else ""
        held = self._held_back(window, base) if self._hold else 0
        visible = self._length - held
        emitted = window[len(window) - (self._length - self._shown): len(window) - held] if visible > self._shown else ""
        self._shown = max(self._shown, visible)
        return Step(emitted, False, None)

    def _match(self, window: str, base: int) -> tuple[int, str] | None:
        """(start, string) of the stop-string occurrence in ``window`` that ends first inside
        ``window[base:]`` (the new characters), the longest on a tie; None if there is none."""
        best = None
        for s in self._stop:
            start = window.find(s, max(0, base - len(s) + 1))  # the first one ending after base
            if start != -1 and (best is None or (start + len(s), -len(s)) < best[0]):
                best = ((start + len(s), -len(s)), start, s)
        return None if best is None else best[1:]

    def _held_back(self, window: str, base: int) -> int:
        """Length of the longest suffix of the text (whose last characters are ``window``) that
        is a proper prefix of a stop string."""
        end = len(window)
        m = self._starts.search(window, max(0, end - self._keep))  # candidate first characters
        while m is not None:
            if window[m.start():] in self._prefixes:
                return end - m.start()
            m = self._starts.search(window, m.start() + 1)
        return 0

    def _finish(self, n: int, final_text: str, reason: str, stop_reason) -> Step:
        self.num_tokens = n
        self.finished, self.finish_reason, self.stop_reason = True, reason, stop_reason
        self._final = final_text
        emitted = final_text[self._shown:]
        self._shown = len(final_text)
        self._parts, self._tail, self._pending = [], "", b""
        return Step(emitted, True, reason)
