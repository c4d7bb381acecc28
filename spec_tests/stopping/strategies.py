"""Hypothesis strategies for stopping (course 01.06): byte-level vocabularies, token streams, stop
strings that hit the stream, and stop parameters.

Vocabularies are made the way byte-level BPE vocabularies look: text over a small alphabet of
1- to 4-byte UTF-8 characters is cut at random *byte* offsets (so a multi-byte character is split
across tokens), some tokens' prefixes are tokens too, and a few ill-formed byte strings are mixed
in. Stop strings are drawn mostly from substrings of the decoded stream, so they do occur, often
across token boundaries.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

ALPHABET = ("a", "b", "\u00e9", "\u20ac", "\U0001F600")  # 1, 1, 2, 3 and 4 bytes in UTF-8
ILL_FORMED = (b"\xff", b"\x80", b"\xed\xa0", b"\xe4")


@dataclass(frozen=True)
class StopCase:
    """One generation to feed a StopChecker: ``vocab[i]`` is token i's bytes, ``tokens`` the ids
    the model produced (feeding stops when the checker finishes). The repr is valid Python."""

    vocab: tuple[bytes, ...]
    tokens: tuple[int, ...]
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    eos_token_id: int | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    max_tokens: int | None = None
    include_stop_str_in_output: bool = False

    def params(self, cls):
        """The case's StopParams, built with the implementation's ``cls``."""
        return cls(max_tokens=self.max_tokens, min_tokens=self.min_tokens,
                   eos_token_id=self.eos_token_id, ignore_eos=self.ignore_eos,
                   stop_token_ids=self.stop_token_ids, stop=self.stop,
                   include_stop_str_in_output=self.include_stop_str_in_output)


@st.composite
def vocabularies(draw, max_size: int = 10) -> tuple[bytes, ...]:
    text = draw(st.text(alphabet=ALPHABET, min_size=1, max_size=8))
    stream = text.encode()
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(stream) - 1)), max_size=len(stream))))
    pieces = [stream[a:b] for a, b in zip([0] + cuts, cuts + [len(stream)]) if a < b]
    vocab = list(dict.fromkeys(pieces))
    for tok in list(vocab):  # tokens that are prefixes of each other
        if len(tok) > 1 and draw(st.booleans()):
            vocab.append(tok[: draw(st.integers(1, len(tok) - 1))])
    vocab += draw(st.lists(st.sampled_from(ILL_FORMED), max_size=1))
    vocab = list(dict.fromkeys(vocab))[:max_size]
    return tuple(draw(st.permutations(vocab)))


def _decode_lossy(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@st.composite
def stop_cases(draw, max_tokens_len: int = 24, special: bool = True) -> StopCase:
    """A vocabulary, a token stream and stop parameters. ``special=False`` leaves out EOS, stop
    token ids and min/max tokens (only stop strings decide)."""
    vocab = draw(vocabularies())
    ids = st.integers(0, len(vocab) - 1)
    tokens = tuple(draw(st.lists(ids, min_size=1, max_size=max_tokens_len)))
    text = _decode_lossy(b"".join(vocab[t] for t in tokens))
    stop = []
    for _ in range(draw(st.integers(0, 3))):
        if text and draw(st.integers(0, 3)):
            i = draw(st.integers(0, len(text) - 1))
            stop.append(text[i: i + draw(st.integers(1, 4))])
        else:
            stop.append(draw(st.text(alphabet=ALPHABET + ("\ufffd",), min_size=1, max_size=3)))
    kw = dict(include_stop_str_in_output=draw(st.booleans()))
    if special:
        eos = draw(st.one_of(st.none(), ids, ids))
        min_tokens = draw(st.integers(0, 5))
        kw.update(eos_token_id=eos, ignore_eos=draw(st.booleans()) if eos is not None else False,
                  stop_token_ids=tuple(draw(st.one_of(st.just([]), st.lists(ids, max_size=2)))),
                  min_tokens=min_tokens,
                  max_tokens=draw(st.one_of(st.none(), st.integers(max(1, min_tokens), max_tokens_len + 2))))
    return StopCase(vocab=vocab, tokens=tokens, stop=tuple(stop), **kw)
