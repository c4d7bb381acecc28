"""Stopping (course 01.06): a generation fed to the StopChecker token by token, 4 stop strings.

The reference re-decodes and rescans the whole text every token (O(length) per token, O(n^2) per
generation); the optimized checker decodes only the new bytes and searches a window of
max_stop_len - 1 old characters plus the new ones (O(1) in the length). The stop strings share
prefixes with the text ("\\n\\nUser" forms; ":" never comes), so the hold-back logic runs, but no
stop string completes: every token is checked. Timed alternately, best of 3 (docs/stopping.md).
"""
from __future__ import annotations

import random

from bench.runner import Case, P
from optimized import stopping as fast
from reference import stopping as ref

N_TOKENS = 4096
STOP = ("\n\nUser:", "</answer>", "###END", "Observation:")


def workload(n_tokens: int = N_TOKENS):
    """A seeded vocabulary of word pieces (no ':' or '>' and no 'END', so no stop string can
    complete), multi-byte characters split across tokens, and an ``n_tokens``-token stream."""
    rng = random.Random(1234)
    words = ["the", " model", " token", "ation", " User", "User", "Observ", "answer", " ##", "#",
             "\n", "\n\n", "<", "</", " ", ".", ",", "caf", "\u00e9", "\u20ac"]
    letters = "abcdefghijklmnopqrstuvwxyz"
    words += ["".join(rng.choice(letters) for _ in range(rng.randint(1, 6))) for _ in range(200)]
    vocab = [w.encode() for w in words] + [b"\xe2\x82", b"\xac", b"\xc3", b"\xa9"]
    tokens = [rng.randrange(len(vocab)) for _ in range(n_tokens)]
    return vocab, tokens


def run(module, vocab, tokens) -> str:
    """Feed ``tokens`` one by one; the text shown to the user."""
    checker = module.StopChecker(module.StopParams(max_tokens=len(tokens), stop=STOP), vocab)
    shown = []
    for t in tokens:
        shown.append(checker.append(t).emitted)
    assert checker.finish_reason == "length" and checker.num_tokens == len(tokens)
    return "".join(shown)


BEST_OF_3 = dict(rounds=3, repeats=1, min_warmup=0, warmup_ms=0, budget_ms=None)
CASES = [
    Case(f"append {n} tokens, 4 stop strings", dict(tokens=n, stop=list(STOP)),
         (P("optimized"), P("reference")), metric="ms", devices=("cpu",), tags=tags, timing=BEST_OF_3)
    for n, tags in ((N_TOKENS, ()), (256, ("smoke",)))
]


def setup(case, device):
    return workload(case.params["tokens"])


def check(problem, case, device) -> dict:
    return dict(ok=run(fast, *problem) == run(ref, *problem), what="same text shown as the reference")


BUILDERS = {
    "optimized": lambda problem, case, device: lambda: run(fast, *problem),
    "reference": lambda problem, case, device: lambda: run(ref, *problem),
}
