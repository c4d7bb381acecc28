"""The speculative decoding loop on the reference model: greedy output is exactly the target's
greedy output for ANY draft; a perfect draft takes one target pass per γ + 1 tokens; sampled output
follows the target's distribution (chi-square, fixed seeds, false alarm <= 1e-6)."""
from __future__ import annotations

import itertools

import pytest
import torch
from scipy.stats import chi2

from conformance.strategies import generator
from spec_tests.drafts.strategies import assert_target_greedy, tiny_models

ALPHA = 1e-6
PROMPT = [1, 2, 3, 1, 2, 5]


def _draft(reference, kind):
    """Drafts from perfect to terrible: None is n-gram prompt lookup."""
    if kind == "ngram":
        return None
    if kind == "perfect":
        return tiny_models(reference, layers=2, seed=1)
    if kind == "fewer_layers":
        return tiny_models(reference, layers=1, seed=1)
    return tiny_models(reference, layers=1, seed=99)     # "random": unrelated weights


@pytest.mark.parametrize("kind", ["ngram", "perfect", "fewer_layers", "random"])
@pytest.mark.parametrize("gamma", [0, 1, 3])
def test_greedy_equals_target_greedy(impl, reference, kind, gamma):
    """Temperature 0: the tokens are exactly reference.generate's greedy tokens, whatever the draft
    (up to a genuine float32 near-tie of the target's logits: strategies.assert_target_greedy)."""
    target = tiny_models(reference, layers=2, seed=1)
    prompt = torch.tensor(PROMPT, dtype=torch.int64)
    got = impl.get("speculative_generate")(target, _draft(reference, kind), prompt, gamma,
                                                  max_new_tokens=14, temperature=0)
    assert_target_greedy(got, reference, target, prompt, 14, f"{kind} draft, gamma {gamma}")


class Counting:
    """A target that counts its forward passes (the loop's model interface, forwarded)."""

    def __init__(self, model):
        self.model, self.config, self.calls = model, model.config, 0

    def new_cache(self, *args, **kwargs):
        return self.model.new_cache(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.model(*args, **kwargs)


@pytest.mark.parametrize("gamma, new, rounds", [(3, 9, 3), (3, 8, 2), (1, 5, 3), (0, 4, 4)])
def test_perfect_draft_takes_one_pass_per_gamma_plus_one(impl, reference, gamma, new, rounds):
    """A draft identical to the target is always accepted: each round emits γ_r + 1 tokens (the
    accepted drafts and the bonus token), so the target runs 1 prefill + ceil(new / (γ + 1)) passes."""
    target = Counting(tiny_models(reference, layers=2, seed=1))
    prompt = torch.tensor(PROMPT, dtype=torch.int64)
    got = impl.get("speculative_generate")(target, tiny_models(reference, layers=2, seed=1),
                                                  prompt, gamma, max_new_tokens=new, temperature=0)
    assert len(got) == new
    assert target.calls == 1 + rounds


class Recording(Counting):
    """A target that records, per forward pass, how many tokens it was given."""

    def __init__(self, model):
        super().__init__(model)
        self.lengths = []

    def __call__(self, tokens, *args, **kwargs):
        self.lengths.append(int(tokens.shape[-1]))
        return super().__call__(tokens, *args, **kwargs)


@pytest.mark.parametrize("kind, prompt, gamma, new, lengths", [
    ("perfect", PROMPT, 3, 9, [5, 4, 4, 1]),     # rounds draft 3, 3, then min(3, 1 - 1) = 0
    ("perfect", PROMPT, 3, 8, [5, 4, 4]),        # the second round: min(3, 4 - 1) = 3
    ("perfect", PROMPT, 4, 3, [5, 3]),           # min(4, 3 - 1) = 2 drafts, 3 tokens
    ("perfect", [3], 2, 3, [3]),                 # a one-token prompt: no prefill
    ("ngram", [1, 2, 3, 1, 2], 3, 1, [4, 1]),    # n-gram has [3, 1, 2] to propose; gamma_r = 0
    ("ngram", [1, 2, 3, 1, 2], 3, 2, [4, 2]),    # gamma_r = 1: one draft
])
def test_round_drafts_at_most_still_to_emit_minus_one(impl, reference, kind, prompt, gamma, new, lengths):
    """What the target is given: the prefill prompt[:-1] (none for a one-token prompt), then per
    round [last token] + gamma_r drafts with gamma_r = min(gamma, still to emit - 1) -- also when
    the proposer (a perfect draft, or prompt lookup with a long match) could give more."""
    target = Recording(tiny_models(reference, layers=2, seed=1))
    draft = None if kind == "ngram" else tiny_models(reference, layers=2, seed=1)
    got = impl.get("speculative_generate")(target, draft, torch.tensor(prompt, dtype=torch.int64), gamma,
                                                  max_new_tokens=new, temperature=0)
    assert len(got) == new
    assert target.lengths[:len(lengths)] == lengths, (
        f"target inputs of lengths {target.lengths}, expected {lengths} (prefill, then 1 + gamma_r per round)")
    if kind == "perfect":
        assert target.lengths == lengths


def _target_joint(target, prompt, vocab, temperature=1.0):
    """Exact P(t1, t2 | prompt) of the target at ``temperature`` (two forward passes per t1)."""
    with torch.no_grad():
        p1 = torch.softmax(target(prompt[None])[0, -1].double() / temperature, -1)
        joint = torch.zeros(vocab, vocab, dtype=torch.float64)
        for t1 in range(vocab):
            seq = torch.cat([prompt, torch.tensor([t1])])
            joint[t1] = p1[t1] * torch.softmax(target(seq[None])[0, -1].double() / temperature, -1)
    return joint


@pytest.mark.parametrize("kind, gamma, temperature", [("random", 1, 1.0), ("random", 1, 0.25), ("ngram", 1, 1.0)])
def test_sampled_follows_target_distribution(impl, reference, kind, gamma, temperature):
    """Vocab 3, temperature 1 and 0.25 (softmax(logits / T): at T = 0.25 the target's joint is
    sharper, so a loop that drops the temperature from p, or hands the verifier a q of another
    temperature than the one it sampled the drafts from, is far off): the first two emitted tokens
    (one round may emit both: an accepted draft and the bonus token) are distributed as the
    target's joint; chi-square over the 9 cells (cells with expected count < 5 merged), fixed
    seed, false alarm <= 1e-6 per case. Prompt lookup too (prompt 0 1 2 0 1: its last bigram
    occurred before, so the first round drafts 2 with a one-hot q, draft_probs None): a loop that
    verifies prompt-lookup drafts greedily, or as if the target had proposed them, is far off."""
    vocab, trials = 3, 300
    target = tiny_models(reference, vocab=vocab, layers=1, seed=5)
    draft = None if kind == "ngram" else tiny_models(reference, vocab=vocab, layers=1, seed=6)
    prompt = torch.tensor([0, 1, 2, 0, 1] if kind == "ngram" else [0, 1, 2, 0], dtype=torch.int64)
    joint = _target_joint(target, prompt, vocab, temperature).reshape(-1)
    spec = impl.get("speculative_generate")
    g = generator(1234)
    counts = torch.zeros(vocab * vocab, dtype=torch.float64)
    for _ in range(trials):
        out = spec(target, draft, prompt, gamma, max_new_tokens=2, temperature=temperature, generator=g)
        counts[int(out[0]) * vocab + int(out[1])] += 1
    expected = joint * trials
    order = torch.argsort(expected)
    obs, exp, acc_o, acc_e = [], [], 0.0, 0.0
    for i in order.tolist():                                  # merge the small cells
        acc_o, acc_e = acc_o + float(counts[i]), acc_e + float(expected[i])
        if acc_e >= 5:
            obs.append(acc_o), exp.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0:
        obs[-1] += acc_o
        exp[-1] += acc_e
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
    assert len(obs) >= 2
    assert stat < chi2.isf(ALPHA, len(obs) - 1), (stat, counts.tolist(), expected.tolist())


def test_randomness_is_only_the_generator(impl, reference):
    """Temperature 0 ignores a given generator (same tokens, its state untouched); temperature 1
    draws only from the generator: the global RNG's state is unchanged and the same seed gives
    the same tokens."""
    spec = impl.get("speculative_generate")
    target = tiny_models(reference, layers=2, seed=1)
    draft = tiny_models(reference, layers=1, seed=2)
    prompt = torch.tensor(PROMPT, dtype=torch.int64)
    g = generator(5)
    before = g.get_state()
    greedy = spec(target, draft, prompt, 2, max_new_tokens=6, temperature=0, generator=g)
    assert torch.equal(g.get_state(), before), "temperature 0 drew from the generator"
    assert torch.equal(torch.as_tensor(greedy), torch.as_tensor(spec(target, draft, prompt, 2, max_new_tokens=6,
                                                                       temperature=0)))
    global_before = torch.get_rng_state()
    a = spec(target, draft, prompt, 2, max_new_tokens=6, temperature=1.0, generator=generator(9))
    assert torch.equal(torch.get_rng_state(), global_before), "sampling touched the global RNG"
    b = spec(target, draft, prompt, 2, max_new_tokens=6, temperature=1.0, generator=generator(9))
    assert torch.equal(torch.as_tensor(a), torch.as_tensor(b)), "the same seed gave other tokens"


@pytest.mark.parametrize("kind", ["ngram", "fewer_layers"])
def test_exactly_fills_max_seq_len(impl, reference, kind):
    """prompt + max_new_tokens == max_seq_len is legal: no round drafts past the last position
    (γ_r = min(γ, still to emit - 1)), and the output is still the target's greedy output."""
    target = tiny_models(reference, layers=2, seed=1, max_seq_len=12)
    prompt = torch.tensor(PROMPT, dtype=torch.int64)
    draft = None if kind == "ngram" else tiny_models(reference, layers=1, seed=1, max_seq_len=12)
    got = impl.get("speculative_generate")(target, draft, prompt, 4, max_new_tokens=6, temperature=0)
    assert_target_greedy(got, reference, target, prompt, 6, f"{kind} draft filling max_seq_len")


@pytest.mark.parametrize("kind", ["ngram", "fewer_layers"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_zero_new_tokens_is_an_empty_int64_tensor(impl, reference, kind, temperature):
    """max_new_tokens = 0 (legal: an int >= 0) returns an empty int64 tensor of shape (0,)."""
    target = tiny_models(reference, layers=2, seed=1, max_seq_len=12)
    draft = None if kind == "ngram" else tiny_models(reference, layers=1, seed=1, max_seq_len=12)
    got = impl.get("speculative_generate")(target, draft, torch.tensor(PROMPT, dtype=torch.int64), 3,
                                           max_new_tokens=0, temperature=temperature, generator=generator(1))
    got = torch.as_tensor(got)
    assert got.shape == (0,) and got.dtype == torch.int64, (got.shape, got.dtype)
