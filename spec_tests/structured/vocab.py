"""The vocabularies the spec runs on (token id -> bytes, None for a special token).

- ``tiny_vocab()``: every token of 1 to 3 bytes over the alphabet {a, b, 0xC3, 0xA9} (``é`` is C3 A9:
  tokens may hold half a character), then a special token (None), an empty token (b"") and EOS:
  84 + 3 = 87 ids, EOS last.
- ``byte_vocab()``: the 256 single bytes, then EOS (id 256): a walk through it reads any text.
- ``tekken()``: the 131,072-token Tekken tokenizer (a tiktoken-style byte-level BPE) that the
  ``mistral-common`` package ships in its wheel (``mistral_common/data/tekken_240911.json``,
  Apache-2.0; nothing is downloaded): ids 0-999 are control tokens (None; ``</s>`` = 2 is EOS),
  every other id is its byte piece. None when mistral-common is not installed (the tests that need
  it skip with that reason).
"""
from __future__ import annotations

import functools
import itertools

TINY_ALPHABET = (b"a", b"b", b"\xc3", b"\xa9")


@functools.lru_cache(maxsize=None)
def tiny_vocab() -> tuple[tuple, int]:
    tokens = [b"".join(p) for n in (1, 2, 3) for p in itertools.product(TINY_ALPHABET, repeat=n)]
    vocab = tokens + [None, b"", None]
    return tuple(vocab), len(vocab) - 1


@functools.lru_cache(maxsize=None)
def byte_vocab() -> tuple[tuple, int]:
    return tuple(bytes([b]) for b in range(256)) + (None,), 256


@functools.lru_cache(maxsize=None)
def tekken() -> tuple[tuple, int] | None:
    try:
        import mistral_common
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    except ImportError:
        return None
    tk = Tekkenizer.from_file(f"{mistral_common.__path__[0]}/data/tekken_240911.json")
    vocab = tuple(None if tk.is_special(i) else tk.id_to_byte_piece(i) for i in range(tk.n_words))
    return vocab, tk.eos_id


TEKKEN_MISSING = "the Tekken vocabulary needs the mistral-common package (pip install mistral-common)"


@functools.lru_cache(maxsize=None)
def tekken_slice(n: int = 16384) -> tuple[tuple, int] | None:
    """The first ``n`` ids of Tekken (its 1,000 control ids, the 256 byte tokens, then merges in
    rank order): a real vocabulary small enough for the default run."""
    big = tekken()
    return None if big is None else (big[0][:n], big[1])
