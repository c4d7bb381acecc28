"""Bad input, one helper for every concept: a table of cases, each a change to a valid call, the
error type it must raise and words its message must contain (the argument's name).

    BAD = [
        Bad("negative layers", dict(layers=-1), ValueError, ("layers",)),
        Bad("float head_dim", dict(head_dim=8.0), TypeError, ("head_dim",)),
    ]

    @bad_cases(BAD)
    def test_rejects_bad_input(impl, bad):
        assert_rejects(impl.get("kv_cache_bytes"), VALID, bad)   # in spec_tests/kv_bytes/

``assert_rejects`` also checks that a rejected call changed nothing: the tensors it was given
(compared bit for bit) and, when a ``state`` function is passed, the state of the object it was
called on (e.g. an allocator's snapshot before and after).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import pytest
import torch


@dataclass(frozen=True)
class Bad:
    """One bad-input case: ``change`` is merged into the valid keyword arguments (a callable gets
    the valid arguments and returns the bad ones, for cases built from them, e.g. a tensor of
    the wrong rank made from a valid one)."""
    id: str
    change: Mapping[str, Any] | Callable[[dict], dict]
    error: type[BaseException] | tuple[type[BaseException], ...]
    words: tuple[str, ...] = ()

    def apply(self, valid: dict) -> dict:
        if callable(self.change):
            return self.change(dict(valid))
        return {**valid, **self.change}


def set_entry(name: str, where, value) -> Callable[[dict], dict]:
    """A ``Bad.change`` that copies the tensor argument ``name`` and sets ``[where]`` to
    ``value`` (e.g. one NaN probability, one out-of-range token), leaving the valid one intact."""
    def change(kw: dict) -> dict:
        t = kw[name].clone()
        t[where] = value
        return {**kw, name: t}
    return change


def bad_cases(table: list[Bad]):
    """``@pytest.mark.parametrize("bad", table)`` with the cases' ids."""
    ids = [b.id for b in table]
    if len(set(ids)) != len(ids):
        raise ValueError(f"bad-input case ids must be unique: {ids}")
    return pytest.mark.parametrize("bad", table, ids=ids)


def _snapshot(kwargs: dict) -> dict:
    return {k: v.detach().clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor)}


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shape, dtype and bits (NaN == NaN, -0.0 != 0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    as_bytes = lambda t: t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)  # noqa: E731
    return torch.equal(as_bytes(a), as_bytes(b))


def _names(message: str, word: str) -> bool:
    """``word`` occurs in ``message`` as a whole word (case-insensitive): ``q`` is not found in
    "sequence", ``stop`` is not found in "stop_token_ids"."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", message, re.IGNORECASE) is not None


def _expected(error) -> str:
    return " or ".join(e.__name__ for e in (error if isinstance(error, tuple) else (error,)))


def assert_rejects(fn: Callable[..., Any], valid: dict | Callable[[], dict], bad: Bad, *,
                   state: Callable[[], Any] | None = None) -> BaseException:
    """``fn(**bad.apply(valid))`` raises ``bad.error`` whose message contains every word of
    ``bad.words`` (case-insensitive); the tensor arguments and ``state()`` are unchanged."""
    kwargs = bad.apply(valid() if callable(valid) else dict(valid))
    before_tensors = _snapshot(kwargs)
    before_state = state() if state is not None else None
    try:
        fn(**kwargs)
    except bad.error as exc:
        caught = exc
    except Exception as exc:  # the wrong kind of error: say which was expected
        raise AssertionError(f"bad input {bad.id!r}: expected {_expected(bad.error)}, got "
                             f"{type(exc).__name__}: {exc}") from exc
    else:
        raise AssertionError(f"bad input {bad.id!r} was accepted; expected {_expected(bad.error)}")
    message = str(caught)
    missing = [w for w in bad.words if not _names(message, w)]
    assert not missing, (f"bad input {bad.id!r}: the {type(caught).__name__} message should name "
                         f"{missing}; it says: {caught}")
    for name, t in before_tensors.items():
        assert _same_bits(kwargs[name], t), f"bad input {bad.id!r}: the rejected call modified its argument {name!r}"
    if state is not None:
        after_state = state()
        assert after_state == before_state, (f"bad input {bad.id!r}: the rejected call changed the "
                                             f"state:\n  before {before_state!r}\n  after  {after_state!r}")
    return caught


def assert_rejects_without_data(fn: Callable[..., Any], kwargs: dict, bad: Bad, *, skip_is_failure: bool = False) -> None:
    """``fn(**kwargs)`` raises ``bad.error`` whose message names each of ``bad.words`` as a whole
    word (case-sensitive): for arguments on the "meta" device, whose tensors hold no data, so the
    no-change check of :func:`assert_rejects` cannot run. With ``skip_is_failure`` (the caller has
    already made a valid call, so a stub has skipped there), the harness's not-implemented skip --
    here the NotImplementedError of reading a meta tensor's data -- fails the test."""
    try:
        fn(**kwargs)
    except bad.error as exc:
        assert all(re.search(rf"(?<![A-Za-z0-9_]){w}(?![A-Za-z0-9_])", str(exc)) for w in bad.words), (
            f"input {bad.id!r}: the {bad.error.__name__} should name {bad.words}; it says: {exc}")
    except pytest.skip.Exception as exc:
        if not skip_is_failure:
            raise
        raise AssertionError(f"input {bad.id!r}: expected {bad.error.__name__}, the call read the meta tensors' "
                             f"data (NotImplementedError: {exc.__cause__})") from exc
    except Exception as exc:
        raise AssertionError(f"input {bad.id!r}: expected {bad.error.__name__}, got {type(exc).__name__}: {exc}") from exc
    else:
        raise AssertionError(f"input {bad.id!r} was accepted; expected {bad.error.__name__}")
