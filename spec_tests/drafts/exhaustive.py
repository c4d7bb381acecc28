"""Bounded-exhaustive domains of the `drafts` tests, and the calls that sweep them where the
implementation runs (``impl.call_in_process``: one round trip for tens of thousands of calls).

Prompt lookup's domain is small and discrete: every sequence over a 3-token alphabet up to a
length, every n and every gamma that can matter. Token relabelling is a symmetry of the contract
(the rule compares tokens only for equality), so a sequence is enumerated in its canonical form
(tokens numbered 0, 1, 2 in order of first occurrence) and checked in two labellings (the canonical
one, and a non-monotone one with large ids, so that a bug that treats a token VALUE specially --
0 as padding, ids below the alphabet size -- is seen too).
"""
from __future__ import annotations

import torch

GAMMAS = (0, 1, 2, 3, 9)           # 9 > any continuation: the proposal runs to the end of the sequence
NS = (1, 2, 3)
RELABEL = (7, 0, 31)                # canonical token i -> RELABEL[i] (not monotone, not 0-based)


def canonical_sequences(max_len: int, alphabet: int = 3):
    """Every sequence of length 0..max_len over ``alphabet`` tokens in canonical form (each new
    token is the next unused id): one representative per relabelling class. Counts for alphabet
    3: 1, 1, 2, 5, 14, 41, 122, 365, 1094, 3281, 9842 for lengths 0..10."""
    out, level = [[]], [[]]
    for _ in range(max_len):
        nxt = []
        for s in level:
            top = max(s) + 1 if s else 0
            nxt += [s + [t] for t in range(min(top + 1, alphabet))]
        out += nxt
        level = nxt
    return out


def earlier_occurrences(tokens: list[int], n: int) -> list[int]:
    """The contract's matches, by brute force: every start j with tokens[j:j+n] equal to the last n
    tokens and j + n < len(tokens) (something follows it; the suffix itself never counts)."""
    L = len(tokens)
    if L <= n:
        return []
    return [j for j in range(0, L - n) if tokens[j:j + n] == tokens[L - n:]]


def lawful_proposals(tokens: list[int], gamma: int, n: int) -> list[list[int]]:
    """What the law allows: the continuation tokens[j+n : j+n+gamma] of SOME earlier occurrence j
    (fewer than gamma tokens where the sequence ends first); [] only when there is none (or gamma
    is 0). Which occurrence is the reference's choice (most_recent_proposal)."""
    starts = earlier_occurrences(tokens, n)
    if gamma == 0 or not starts:
        return [[]]
    return [tokens[j + n:j + n + gamma] for j in starts]


def most_recent_proposal(tokens: list[int], gamma: int, n: int) -> list[int]:
    """The reference's choice among the lawful proposals: the most recent occurrence (largest j)."""
    starts = earlier_occurrences(tokens, n)
    if gamma == 0 or not starts:
        return []
    return tokens[max(starts) + n:max(starts) + n + gamma]


def ngram_sweep(impl, seqs, gammas=GAMMAS, ns=NS):
    """``ngram_propose`` on every (sequence, n, gamma), each sequence as a list of ints in its
    canonical labelling and as an int64 tensor in the RELABEL labelling. Returns, per call in that
    order, the proposal (a list of ints, canonical labels) or ``("raised", repr)`` or
    ``("mutated", input after)`` when the call changed its input."""
    propose = impl.get("ngram_propose")
    back = {v: i for i, v in enumerate(RELABEL)}
    out = []
    for s in seqs:
        relabelled = [RELABEL[t] for t in s]
        for n in ns:
            for g in gammas:
                for as_tensor in (False, True):
                    arg = torch.tensor(relabelled, dtype=torch.int64) if as_tensor else list(s)
                    try:
                        got = [int(t) for t in propose(arg, g, n=n)]
                    except NotImplementedError:
                        raise                             # a stub: "not implemented", not a failure
                    except Exception as exc:          # reported with its input by the test
                        out.append(("raised", f"{type(exc).__name__}: {exc}"))
                        continue
                    after = arg.tolist() if as_tensor else arg
                    if after != (relabelled if as_tensor else s):
                        out.append(("mutated", after))
                    elif as_tensor:
                        out.append([back.get(t, -1 - t) for t in got])   # an id not in the input stays visible
                    else:
                        out.append(got)
    return out


def sweep_cases(seqs, gammas=GAMMAS, ns=NS):
    """The (tokens, n, gamma, as_tensor) of each result of :func:`ngram_sweep`, in its order."""
    return [(s, n, g, t) for s in seqs for n in ns for g in gammas for t in (False, True)]
