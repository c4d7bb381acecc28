"""Prompt lookup: an EARLIER occurrence of the last n tokens, and what followed it (the law); the
most recent one (the reference's choice). The whole small domain: test_exhaustive.py."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from spec_tests.drafts.exhaustive import lawful_proposals
from spec_tests.drafts.strategies import ngram_oracle, token_lists

EXAMPLES = [
    # tokens, gamma, n, proposal
    ([1, 2, 3, 1, 2], 2, 2, [3, 1]),
    ([1, 2, 3, 1, 2], 5, 2, [3, 1, 2]),          # runs into the suffix: shorter than gamma
    ([1, 1, 1], 3, 2, [1]),                      # overlapping occurrence
    ([4, 5, 6, 7], 3, 2, []),                    # no earlier occurrence
    ([1, 2], 3, 2, []),                          # only the suffix itself
    ([1, 2, 1, 2], 0, 2, []),                    # gamma 0
    ([], 2, 1, []),
]


TIES = [
    ([1, 2, 5, 1, 2, 6, 1, 2], 1, 2, [6]),       # two matches: the most recent wins
    ([1, 2, 5, 1, 2, 6, 1, 2], 3, 1, [6, 1, 2]), # n = 1
]


@pytest.mark.parametrize("tokens, gamma, n, expected", EXAMPLES)
def test_examples(impl, tokens, gamma, n, expected):
    """Worked cases with at most one earlier occurrence: the suffix never matches itself, the
    proposal may run into the suffix, and stops where the sequence ends."""
    propose = impl.get("ngram_propose")
    assert list(propose(tokens, gamma, n=n)) == expected
    assert list(propose(torch.tensor(tokens, dtype=torch.int64), gamma, n=n)) == expected


@pytest.mark.choice("prompt lookup follows the most recent earlier occurrence of the n-gram")
@pytest.mark.parametrize("tokens, gamma, n, expected", TIES)
def test_tie_examples(impl, tokens, gamma, n, expected):
    """Worked cases with two earlier occurrences: the most recent one is followed."""
    propose = impl.get("ngram_propose")
    assert list(propose(tokens, gamma, n=n)) == expected
    assert list(propose(torch.tensor(tokens, dtype=torch.int64), gamma, n=n)) == expected


@given(tokens=token_lists(), gamma=st.integers(0, 4), n=st.integers(1, 3))
def test_is_a_lookup(impl, tokens, gamma, n):
    """Sequences up to length 12 (longer than the exhaustive sweep): the proposal continues SOME
    earlier occurrence of the last n tokens, [] exactly when there is none (list or tensor input)."""
    propose = impl.get("ngram_propose")
    lawful = lawful_proposals(tokens, gamma, n)
    assert [int(t) for t in propose(tokens, gamma, n=n)] in lawful
    assert [int(t) for t in propose(torch.tensor(tokens, dtype=torch.int64), gamma, n=n)] in lawful


@pytest.mark.choice("prompt lookup follows the most recent earlier occurrence of the n-gram")
@given(tokens=token_lists(), gamma=st.integers(0, 4), n=st.integers(1, 3))
def test_matches_brute_force(impl, tokens, gamma, n):
    """Equal to the brute-force search over every earlier occurrence, the most recent one
    winning (list or tensor input)."""
    propose = impl.get("ngram_propose")
    want = ngram_oracle(tokens, gamma, n)
    assert [int(t) for t in propose(tokens, gamma, n=n)] == want
    assert [int(t) for t in propose(torch.tensor(tokens, dtype=torch.int64), gamma, n=n)] == want


def test_default_n_is_two(impl):
    """n defaults to 2: [7, 1, 9, 2, 1] has an earlier 1 (n = 1 would propose 9) but no earlier (2, 1)."""
    assert list(impl.get("ngram_propose")([7, 1, 9, 2, 1], 2)) == []
