"""Bad-input check of the attention concepts: :func:`conformance.badinput.assert_rejects` plus
whole-word argument names, since the one-letter names q, k, v occur inside other words."""
from __future__ import annotations

import re

from conformance.badinput import Bad, assert_rejects


def names(message: str, name: str) -> bool:
    """``name`` occurs in ``message`` as a word of its own: the q of ``seq_len`` or
    ``cu_seqlens_q`` does not name q; ``q_heads`` and ``q,`` do."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9])", message) is not None


def assert_rejects_naming(fn, valid, bad: Bad) -> BaseException:
    """``assert_rejects(fn, valid, bad)``, and every word of ``bad.words`` is named whole."""
    exc = assert_rejects(fn, valid, bad)
    unnamed = [w for w in bad.words if not names(str(exc), w)]
    assert not unnamed, f"bad input {bad.id!r}: the message should name {unnamed}; it says: {exc}"
    return exc
