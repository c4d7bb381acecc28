"""Stopping criteria (course 01.06): EOS, max/min tokens, stop token ids, stop strings that span
token boundaries, and streamed text held back while a stop string may still be forming.

Stopping is a correctness concern: a missed stop string leaks text the client asked never to see,
a stop checked per token misses strings split across tokens, and a stream that shows text before
it is known not to begin a stop string cannot take it back. This module pins one behaviour
(docs/stopping.md compares it with vLLM and Hugging Face).

Contract
--------
``StopParams(max_tokens=None, min_tokens=0, eos_token_id=None, ignore_eos=False,
stop_token_ids=(), stop=(), include_stop_str_in_output=False)`` -- each default is what an
omitted argument means: no length limit, no minimum, no EOS token, no stop token ids, no stop
strings, stop strings excluded from the output. ``StopParams`` is a frozen value: it holds ``stop``
(one string given means a 1-tuple) and ``stop_token_ids`` as tuples, copies of the sequences
given, so a caller changing its list afterwards changes nothing. The checker is
``StopChecker(params, vocab)``, where ``vocab`` maps token id -> ``bytes`` (a mapping, or a
sequence indexed by id). ``checker.append(token_id) -> Step(emitted, finished, reason)``; the
checker exposes ``text``, ``num_tokens``, ``finished``, ``finish_reason`` ("stop", "length" or
None) and ``stop_reason`` (the matched stop string, the stop token id, or None).

``n`` below is the number of tokens appended so far, the current one included.

1. Text. The bytes of the text-bearing tokens (2.) are concatenated and decoded as UTF-8 with
   Python's ``errors="replace"`` (each maximal ill-formed subpart becomes one U+FFFD), except a
   *pending* tail: the longest suffix that is a proper prefix of a well-formed UTF-8 sequence
   (Unicode Table 3-7), i.e. a character whose remaining bytes may still arrive. Pending bytes are
   not in ``text`` and are never emitted; a later token completes them (or breaks them: then they
   decode to U+FFFD). When generation finishes, pending bytes are dropped, never turned into
   U+FFFD. So ``text`` only grows by appending until the final truncation.
2. Stopping tokens. Token ``n`` *stops* generation if ``n > min_tokens`` and it is
   ``eos_token_id`` (unless ``ignore_eos``) or in ``stop_token_ids``. A stopping token adds no
   text: its bytes are not decoded (so no stop string can end on it) and its text is never in
   the output. reason "stop"; ``stop_reason`` is the token id for ``stop_token_ids`` and None for
   EOS (EOS is checked first: a token that is both reports None; with ``ignore_eos`` it still
   stops as a stop token id). A token in ``eos_token_id``/``stop_token_ids`` that does not stop
   (``ignore_eos``, or ``n <= min_tokens``) is an ordinary token: its bytes are text.
3. Stop strings. After an ordinary token ``n > min_tokens``, an occurrence of a stop string in
   ``text`` that *ends inside the characters this token added* stops generation. It may begin
   in earlier tokens (stop strings span token boundaries); an occurrence complete at a token
   ``<= min_tokens`` never counts. Of several, the one that ends first wins; of those ending at
   the same character, the longest. The final text is ``text`` cut at the start of the match
   (default) or at its end (``include_stop_str_in_output``); text after the match, even in the
   same token, is dropped. reason "stop", ``stop_reason`` the string.
4. Length. If token ``n`` did not stop by 2. or 3. and ``n == max_tokens``: reason "length",
   and the token's text is kept. A stop on the same token wins over length. ``max_tokens=1``
   ends on the first token; ``min_tokens == max_tokens`` is legal (nothing stops before the
   limit, so it ends by length).
5. Streaming. Before finishing, ``Step.emitted`` is the new text that is safe to show. With stop
   strings excluded (the default), the longest suffix of ``text`` that is a proper prefix of some
   stop string is held back, whatever ``min_tokens`` is; with ``include_stop_str_in_output``
   nothing is held back (every decoded character lies before the end of any future match). The
   finishing step emits the rest of the final text. So the emitted pieces concatenate to a prefix
   of ``text`` at every step and to the final text at the end, and nothing emitted can still
   become part of a stop string that ends generation.
6. Bad input. ``StopParams`` rejects a negative or zero ``max_tokens``, a negative
   ``min_tokens``, ``min_tokens > max_tokens``, an empty stop string (ValueError naming the
   argument) and wrong types (TypeError naming the argument). ``StopChecker`` rejects ``params``
   that are not a ``StopParams`` (TypeError, ``params``), a vocab that is not a mapping or
   sequence of bytes (TypeError, ``vocab``) and ``eos_token_id``/``stop_token_ids`` not in the
   vocab (ValueError naming them). ``append`` rejects an id not in the vocab (ValueError,
   ``token_id``), a non-int id (TypeError, ``token_id``) and any append after finishing
   (ValueError saying generation ``finished``); the checker's state is then unchanged.

This reference is naive on purpose: every token it re-decodes all generated bytes and rescans
the whole text for every stop string (O(length) per token). ``optimized/stopping.py`` keeps an
incremental decoder and searches only the last ``max_stop_len - 1`` characters plus the new ones.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from reference._checks import check_int, is_int

__all__ = ["StopParams", "StopChecker"]  # the contract: what an implementation must provide
__optional__ = []  # checked when an implementation provides them


@dataclass(frozen=True)
class StopParams:
    """When to stop (module docstring, 2.-5.). ``stop`` may be one string or a sequence of them;
    ``max_tokens=None`` means no limit."""

    max_tokens: int | None = None
    min_tokens: int = 0
    eos_token_id: int | None = None
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = ()
    stop: tuple[str, ...] = ()
    include_stop_str_in_output: bool = False

    def __post_init__(self):
        check_int("max_tokens", self.max_tokens, minimum=1, allow_none=True)
        check_int("min_tokens", self.min_tokens, minimum=0)
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) must be <= max_tokens ({self.max_tokens})")
        check_int("eos_token_id", self.eos_token_id, minimum=0, allow_none=True)
        for name in ("ignore_eos", "include_stop_str_in_output"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop
        if not isinstance(stop, Sequence) or not all(isinstance(s, str) for s in stop):
            raise TypeError(f"stop must be a string or a sequence of strings, got {self.stop!r}")
        if any(s == "" for s in stop):
            raise ValueError("stop: stop strings must be non-empty (an empty string matches everywhere)")
        ids = self.stop_token_ids
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence | set | frozenset):
            raise TypeError(f"stop_token_ids must be a sequence of ints, got {ids!r}")
        for t in ids:
            check_int("stop_token_ids", t, minimum=0)
        object.__setattr__(self, "stop", tuple(stop))
        object.__setattr__(self, "stop_token_ids", tuple(ids))


class Step(NamedTuple):
    """What one ``append`` produced: the text now safe to show, and whether generation ended."""

    emitted: str
    finished: bool
    reason: str | None  # "stop", "length", or None while running


def check_vocab(vocab) -> dict[int, bytes]:
    """``vocab`` as a dict id -> bytes (a sequence is indexed by id); TypeError naming ``vocab``."""
    if isinstance(vocab, Mapping):
        items = list(vocab.items())
    elif isinstance(vocab, Sequence) and not isinstance(vocab, (str, bytes)):
        items = list(enumerate(vocab))
    else:
        raise TypeError(f"vocab must map token id -> bytes, got {type(vocab).__name__}")
    for tid, tok in items:
        if not is_int(tid):
            raise TypeError(f"vocab: token ids must be ints, got {tid!r}")
        if not isinstance(tok, bytes):
            raise TypeError(f"vocab: token {tid} must be bytes, got {type(tok).__name__}")
    return dict(items)


# Unicode Table 3-7: the allowed range of the second byte of a multi-byte sequence, by lead byte.
def _sequence_shape(lead: int) -> tuple[int, int, int] | None:
    """(length, lowest, highest second byte) of a well-formed sequence starting with ``lead``,
    or None if ``lead`` cannot start a multi-byte sequence."""
    if 0xC2 <= lead <= 0xDF:
        return 2, 0x80, 0xBF
    if lead == 0xE0:
        return 3, 0xA0, 0xBF
    if 0xE1 <= lead <= 0xEC or 0xEE <= lead <= 0xEF:
        return 3, 0x80, 0xBF
    if lead == 0xED:
        return 3, 0x80, 0x9F  # no surrogates
    if lead == 0xF0:
        return 4, 0x90, 0xBF
    if 0xF1 <= lead <= 0xF3:
        return 4, 0x80, 0xBF
    if lead == 0xF4:
        return 4, 0x80, 0x8F  # nothing above U+10FFFF
    return None


def pending_length(data: bytes) -> int:
    """Bytes at the end of ``data`` that are a proper prefix of a well-formed UTF-8 sequence
    (a character whose remaining bytes may still arrive); 0 if none."""
    for k in range(1, min(3, len(data)) + 1):
        first = data[-k]
        if 0x80 <= first <= 0xBF:  # a continuation byte: the sequence starts further back
            continue
        shape = _sequence_shape(first)
        if shape is None or k >= shape[0]:
            return 0
        length, lo, hi = shape
        if k >= 2 and not lo <= data[-k + 1] <= hi:
            return 0
        return k
    return 0


def decode(data: bytes) -> str:
    """The pinned text of ``data``: UTF-8 with errors="replace", the pending tail left out."""
    return data[: len(data) - pending_length(data)].decode("utf-8", errors="replace")


def held_back_length(text: str, stop: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a stop string."""
    longest = max((len(s) for s in stop), default=1) - 1  # a proper prefix is shorter than s
    for start in range(max(0, len(text) - longest), len(text)):  # earliest start = longest suffix
        tail = text[start:]
        if any(len(tail) < len(s) and s.startswith(tail) for s in stop):
            return len(text) - start
    return 0


def first_stop_match(text: str, stop: Sequence[str], after: int) -> tuple[int, str] | None:
    """(start, stop string) of the occurrence in ``text`` ending first among those ending after
    character ``after`` (the longest on a tie), or None. Scans the whole text: naive."""
    found = []
    for s in stop:
        start = text.find(s)
        while start != -1:
            end = start + len(s)
            if end > after:
                found.append((end, -len(s), start, s))
            start = text.find(s, start + 1)
    if not found:
        return None
    _, _, start, s = min(found)
    return start, s


def check_checker_inputs(params: StopParams, vocab) -> dict[int, bytes]:
    """Validate a StopChecker's arguments (shared by every implementation); returns the vocab as
    a dict. Raises TypeError/ValueError naming the argument."""
    if not isinstance(params, StopParams):
        raise TypeError(f"params must be a StopParams, got {type(params).__name__}")
    checked = check_vocab(vocab)
    if params.eos_token_id is not None and params.eos_token_id not in checked:
        raise ValueError(f"eos_token_id {params.eos_token_id} is not in the vocab")
    unknown = [t for t in params.stop_token_ids if t not in checked]
    if unknown:
        raise ValueError(f"stop_token_ids {unknown} are not in the vocab")
    return checked


class StopChecker:
    """Decides, token by token, when generation ends and which text is safe to stream
    (module docstring, 1.-6.)."""

    def __init__(self, params: StopParams, vocab: Mapping[int, bytes] | Sequence[bytes]):
        self.params = params
        self._vocab = check_checker_inputs(params, vocab)
        self._data = b""          # bytes of the text-bearing tokens so far
        self._shown = 0           # characters of text emitted so far
        self._final: str | None = None
        self.num_tokens = 0
        self.finished = False
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None

    @property
    def text(self) -> str:
        """The decoded text so far (held-back text included); the final text once finished."""
        return self._final if self._final is not None else decode(self._data)

    def append(self, token_id: int) -> Step:
        """Add the next generated token; return what may be streamed now and whether it ended."""
        if not is_int(token_id):
            raise TypeError(f"token_id must be an int, got {token_id!r}")
        if token_id not in self._vocab:
            raise ValueError(f"token_id {token_id} is not in the vocab")
        if self.finished:
            raise ValueError(f"token_id {token_id}: generation already finished ({self.finish_reason})")
        p = self.params
        n = self.num_tokens + 1
        previous = self.text
        may_stop = n > p.min_tokens
        if may_stop and token_id == p.eos_token_id and not p.ignore_eos:
            return self._finish(n, previous, "stop", None)
        if may_stop and token_id in p.stop_token_ids:
            return self._finish(n, previous, "stop", token_id)
        data = self._data + self._vocab[token_id]
        text = decode(data)
        if may_stop:
            match = first_stop_match(text, p.stop, after=len(previous))
            if match is not None:
                start, s = match
                cut = start + len(s) if p.include_stop_str_in_output else start
                return self._finish(n, text[:cut], "stop", s)
        if n == p.max_tokens:
            return self._finish(n, text, "length", None)
        self._data, self.num_tokens = data, n
        held = 0 if p.include_stop_str_in_output else held_back_length(text, p.stop)
        emitted = text[self._shown: len(text) - held]
        self._shown = len(text) - held
        return Step(emitted, False, None)

    def _finish(self, n: int, final_text: str, reason: str, stop_reason) -> Step:
        self.num_tokens = n
        self.finished, self.finish_reason, self.stop_reason = True, reason, stop_reason
        self._final = final_text
        emitted = final_text[self._shown:]
        self._shown = len(final_text)
        return Step(emitted, True, reason)
