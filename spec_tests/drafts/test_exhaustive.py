"""Bounded-exhaustive checks of `drafts` (issue 22 item 1): prompt lookup on EVERY sequence of a
small domain, and the loop's drafts round by round on every prompt of a small domain.

Prompt lookup: every sequence over a 3-token alphabet up to length 8 (canonical under token
relabelling: 1,645 sequences; `thorough`: length 10, 14,768), n in {1, 2, 3}, gamma in
{0, 1, 2, 3, 9}, each as a list of ints and as a relabelled int64 tensor: 49,350 calls (443,040
under thorough), swept in the implementation's process in one round trip (measured: 0.4 s for the
reference plus 0.2 s to judge; thorough 4.7 s + 2.8 s).

The loop: with a greedy target the verifier's decisions are determined by the output itself, so
every round can be replayed from what the target was given (a recording target) and the tokens
emitted: round r starts after e_r emitted tokens, is given [last token] + drafts, keeps the
longest prefix k of the drafts that agrees with the output, and emits k + 1 tokens. Each round's
drafts must be what the proposer makes of the sequence so far -- prompt lookup (n = 2) on prompt +
emitted, or the draft model's own greedy continuation of it -- and no more than
gamma_r = min(gamma, still to emit - 1). The output alone cannot show a draft that was rolled back
wrongly, fed the wrong tokens, or looked up in the prompt only: every such loop still emits the
target's greedy tokens (speculation is lossless for ANY draft), only slower.
"""
from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import settings

from spec_tests.drafts import exhaustive as X
from spec_tests.drafts.strategies import NEAR_TIE, tiny_models


def _max_len() -> int:
    return 10 if settings.get_current_profile_name() == "thorough" else 8


def _sweep(impl):
    seqs = X.canonical_sequences(_max_len())
    return X.sweep_cases(seqs), impl.call_in_process(X.ngram_sweep, seqs)


_SWEEPS: dict = {}


def _cached_sweep(impl):
    key = (impl.name, _max_len())
    if key not in _SWEEPS:
        _SWEEPS[key] = _sweep(impl)
    return _SWEEPS[key]


def _show(tokens, n, gamma, as_tensor) -> str:
    if as_tensor:
        tokens = [X.RELABEL[t] for t in tokens]
        return f"ngram_propose(torch.tensor({tokens}), {gamma}, n={n})"
    return f"ngram_propose({tokens}, {gamma}, n={n})"


def _label(got, as_tensor):
    return [X.RELABEL[t] if 0 <= t < len(X.RELABEL) else -1 - t for t in got] if as_tensor else got


def test_ngram_every_small_sequence_is_a_lookup(impl):
    """The law on every sequence of the domain: the proposal is what followed SOME earlier
    occurrence of the last n tokens (tokens[j+n : j+n+gamma], shorter only where the sequence ends,
    overlapping the suffix allowed), [] exactly when there is no earlier occurrence (no fallback to
    a shorter n-gram, never the suffix itself), or gamma is 0; the input is not modified."""
    cases, results = _cached_sweep(impl)
    for (tokens, n, gamma, as_tensor), got in zip(cases, results):
        call = _show(tokens, n, gamma, as_tensor)
        if isinstance(got, tuple):
            what = "raised " + got[1] if got[0] == "raised" else f"modified its input to {got[1]}"
            pytest.fail(f"{call} {what}")
        lawful = X.lawful_proposals(tokens, gamma, n)
        if got not in lawful:
            starts = X.earlier_occurrences(tokens, n)
            pytest.fail(f"{call} -> {_label(got, as_tensor)}; the lawful proposals are "
                        f"{[_label(p, as_tensor) for p in lawful]} (earlier occurrences of the last {n} "
                        f"token(s) start at {starts or 'none'})")


@pytest.mark.choice("prompt lookup follows the most recent earlier occurrence of the n-gram")
def test_ngram_every_small_sequence_most_recent(impl):
    """The reference's choice on every sequence of the domain: among the earlier occurrences, the
    MOST RECENT one (the largest start j) is followed."""
    cases, results = _cached_sweep(impl)
    for (tokens, n, gamma, as_tensor), got in zip(cases, results):
        want = X.most_recent_proposal(tokens, gamma, n)
        if got != want:
            pytest.fail(f"{_show(tokens, n, gamma, as_tensor)} -> {_label(got, as_tensor)}, expected "
                        f"{_label(want, as_tensor)} (the most recent of the earlier occurrences "
                        f"{X.earlier_occurrences(tokens, n)})")


# --- the loop, round by round ------------------------------------------------------------------
class Recording:
    """A target that records the tokens it is given per forward pass (the loop's model interface,
    forwarded)."""

    def __init__(self, model):
        self.model, self.config, self.inputs = model, model.config, []

    def new_cache(self, *args, **kwargs):
        return self.model.new_cache(*args, **kwargs)

    def __call__(self, tokens, *args, **kwargs):
        self.inputs.append([int(t) for t in torch.as_tensor(tokens).reshape(-1).tolist()])
        return self.model(tokens, *args, **kwargs)


def _draft_greedy(draft, context: list[int], g: int, got: list[int]) -> str | None:
    """None if ``got`` is the draft model's greedy continuation of ``context`` (from scratch, no
    cache), up to a genuine float32 near-tie (NEAR_TIE) where the rest is not compared; else why."""
    ctx = list(context)
    if len(got) != g:
        return f"{len(got)} drafts, expected gamma_r = {g}"
    with torch.no_grad():
        for i, x in enumerate(got):
            lg = draft(torch.tensor([ctx]))[0, -1].double()
            if x != int(lg.argmax()):
                if float(lg.max() - lg[x]) <= NEAR_TIE * (1 + float(lg.abs().max())):
                    return None                  # a near-tie: either token is the draft's argmax
                return (f"draft {i} is {x}, the draft model's greedy token after {ctx} is {int(lg.argmax())} "
                        f"(logit gap {float(lg.max() - lg[x]):.3g})")
            ctx.append(x)
    return None


def _replay(target: Recording, prompt: list[int], out: list[int], gamma: int, check) -> None:
    """Replay the rounds of a greedy run from the target's inputs and the output; ``check(context,
    gamma_r, drafts)`` returns None or what is wrong with a round's drafts."""
    new = len(out)
    calls = list(target.inputs)
    where = f"prompt {prompt}, gamma {gamma}, {new} new tokens -> {out}; the target was given {calls}"
    if len(prompt) > 1:
        assert calls and calls[0] == prompt[:-1], f"the prefill is not prompt[:-1] ({where})"
        calls = calls[1:]
    e, rounds = 0, 0
    full = prompt + out
    while e < new:
        assert rounds < len(calls), f"{new - e} tokens emitted without a target pass ({where})"
        given = calls[rounds]
        context = full[:len(prompt) + e]
        assert given[:1] == context[-1:], f"round {rounds}: the target was not given the last token first ({where})"
        drafts, g = given[1:], min(gamma, new - e - 1)
        assert len(drafts) <= g, f"round {rounds}: {len(drafts)} drafts, at most gamma_r = {g} ({where})"
        wrong = check(context, g, drafts)
        assert wrong is None, f"round {rounds} (after {e} emitted tokens): {wrong} ({where})"
        k = 0
        while k < len(drafts) and drafts[k] == out[e + k]:
            k += 1
        e, rounds = e + k + 1, rounds + 1
    assert rounds == len(calls), f"{len(calls) - rounds} target passes more than the rounds ({where})"


def _prompts(alphabet: int, max_len: int):
    return [list(p) for n in range(1, max_len + 1) for p in itertools.product(range(alphabet), repeat=n)]


_LOOP_RUNS: dict = {}


def _ngram_runs(impl, reference):
    """Every prompt over {0, 1} of length 1..5 (62 prompts) x gamma 1, 3: greedy speculative
    decoding of 8 tokens by a vocab-3 target with prompt lookup (draft None). 124 runs."""
    key = impl.name
    if key not in _LOOP_RUNS:
        spec = impl.get("speculative_generate")
        model = tiny_models(reference, vocab=3, layers=1, seed=5, max_seq_len=16)
        runs = []
        for prompt, gamma in itertools.product(_prompts(2, 5), (1, 3)):
            target = Recording(model)
            out = spec(target, None, torch.tensor(prompt, dtype=torch.int64), gamma, max_new_tokens=8, temperature=0)
            assert isinstance(out, torch.Tensor) and out.dtype == torch.int64 and out.shape == (8,), (
                f"speculative_generate must return an int64 tensor of shape (8,), got {out!r}")
            runs.append((target, prompt, [int(t) for t in out.tolist()], gamma))
        _LOOP_RUNS[key] = runs
    return _LOOP_RUNS[key]


def test_loop_ngram_drafts_are_lookups_of_the_sequence_so_far(impl, reference):
    """Prompt lookup in the loop (draft None), every prompt over {0, 1} up to length 5, gamma 1 and
    3, a vocab-3 target (repeats are frequent: drafts get accepted and rejected): each round's
    drafts are a lawful n = 2 lookup (exhaustive.lawful_proposals) in prompt + the tokens emitted
    so far, cut to gamma_r = min(gamma, still to emit - 1) -- [] exactly when the sequence so far
    has no earlier occurrence of its last 2 tokens."""
    for target, prompt, out, gamma in _ngram_runs(impl, reference):
        def check(context, g, drafts):
            lawful = X.lawful_proposals(context, g, 2)
            return None if drafts in lawful else (
                f"drafts {drafts}, but the lawful n=2 lookups in {context} with gamma_r {g} are {lawful}")
        _replay(target, prompt, out, gamma, check)


@pytest.mark.choice("prompt lookup follows the most recent earlier occurrence of the n-gram")
def test_loop_ngram_drafts_most_recent(impl, reference):
    """The same runs: each round's drafts are exactly the most recent occurrence's continuation."""
    for target, prompt, out, gamma in _ngram_runs(impl, reference):
        def check(context, g, drafts):
            want = X.most_recent_proposal(context, g, 2)
            return None if drafts == want else f"drafts {drafts}, the most recent lookup in {context} is {want}"
        _replay(target, prompt, out, gamma, check)


@pytest.mark.parametrize("kind", ["perfect", "fewer_layers", "random"])
def test_loop_model_drafts_are_its_greedy_continuation(impl, reference, kind):
    """A draft model in the greedy loop (the target itself: every round fully accepted; a 1-layer
    draft of the target's seed, or unrelated weights: drafts both accepted and rejected), the prompts 0..7 and four longer ones, gamma 2
    and 4: each round's gamma_r drafts are the draft model's own greedy
    continuation of prompt + the tokens emitted so far (computed here from scratch, without a
    cache). A draft KV cache not rolled back after a rejection, or not fed the round's last
    emitted tokens, proposes from another context."""
    spec = impl.get("speculative_generate")
    model = tiny_models(reference, layers=2, seed=1, max_seq_len=24)
    draft = tiny_models(reference, layers=2 if kind == "perfect" else 1, seed=99 if kind == "random" else 1,
                        max_seq_len=24)
    prompts = _prompts(8, 1) + [[1, 2, 3, 1, 2, 5], [7, 7, 7], [0, 5, 0, 5, 0], [4, 1, 6, 2]]
    for prompt, gamma in itertools.product(prompts, (2, 4)):
        target = Recording(model)
        out = spec(target, draft, torch.tensor(prompt, dtype=torch.int64), gamma, max_new_tokens=10, temperature=0)
        _replay(target, prompt, [int(t) for t in torch.as_tensor(out).tolist()], gamma,
                lambda context, g, drafts: _draft_greedy(draft, context, g, drafts))
