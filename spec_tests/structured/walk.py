"""Driving an implementation's TokenMatcher: the texts it accepts, its masks along token paths."""
from __future__ import annotations

import torch

from spec_tests.structured import oracles as O
from spec_tests.structured.vocab import byte_vocab


def mask_list(matcher) -> list[bool]:
    mask = matcher.allowed_mask()
    assert isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and mask.dim() == 1, (
        f"allowed_mask() must return a 1-D bool tensor, got {mask!r}")
    return mask.tolist()


def accepts(matcher, data: bytes) -> bool:
    """Whether the byte-vocabulary matcher takes ``data`` byte by byte and is then accepted (a
    disallowed byte is refused with ValueError; the matcher is reset first)."""
    matcher.reset()
    for b in data:
        try:
            matcher.advance(b)
        except ValueError:
            return False
    return bool(matcher.is_accepted())


def byte_matcher(impl, grammar):
    vocab, eos = byte_vocab()
    return impl.get("TokenMatcher")(grammar, list(vocab), eos)


def check_masks_bfs(impl, tree, vocab, eos, *, depth: int = 3, cap: int = 40, label: str = "") -> int:
    """Every text reachable in at most ``depth`` tokens (breadth first, distinct texts, at most
    ``cap`` of them): the implementation's mask there (reached by advancing the token path from
    a reset) equals the oracle's token-by-token check. Returns the number of texts checked."""
    pattern = O.render(tree)
    matcher = impl.get("TokenMatcher")(impl.get("compile_regex")(pattern), list(vocab), eos)
    frontier, seen, checked = [(b"", [])], {b""}, 0
    for _ in range(depth + 1):
        nxt = []
        for text, path in frontier:
            if checked >= cap:
                return checked
            matcher.reset()
            for tok in path:
                matcher.advance(tok)
            got = mask_list(matcher)
            want = O.brute_force_mask(tree, text, vocab, eos)
            wrong = [t for t in range(len(vocab)) if got[t] != want[t]]
            assert not wrong, (
                f"{label}pattern {pattern!r}, after the text {text!r} (tokens {path}): the mask differs from the "
                f"brute-force check of every token at {len(wrong)} ids, e.g. "
                + ", ".join(f"{t} {vocab[t]!r}: allowed_mask says {got[t]}, the grammar says {want[t]}" for t in wrong[:4]))
            checked += 1
            for t in range(len(vocab)):
                if want[t] and t != eos and text + vocab[t] not in seen:
                    seen.add(text + vocab[t])
                    nxt.append((text + vocab[t], path + [t]))
        frontier = nxt
    return checked
