"""Bad input of every contract function: TypeError / ValueError naming the argument."""
from __future__ import annotations

import torch

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.drafts.strategies import tiny_models

NGRAM_VALID = dict(tokens=[1, 2, 1, 2], gamma=2, n=2)
NGRAM_BAD = [
    Bad("tokens a string", dict(tokens="1212"), TypeError, ("tokens",)),
    Bad("tokens float tensor", dict(tokens=torch.tensor([1.0, 2.0])), TypeError, ("tokens",)),
    Bad("tokens 2-D", dict(tokens=torch.tensor([[1, 2]])), ValueError, ("tokens",)),
    Bad("tokens with a float", dict(tokens=[1, 2.0]), TypeError, ("tokens",)),
    Bad("negative gamma", dict(gamma=-1), ValueError, ("gamma",)),
    Bad("float gamma", dict(gamma=2.0), TypeError, ("gamma",)),
    Bad("zero n", dict(n=0), ValueError, ("n",)),
    Bad("bool n", dict(n=True), TypeError, ("n",)),
]


@bad_cases(NGRAM_BAD)
def test_ngram_rejects_bad_input(impl, bad):
    """ngram_propose: tokens a 1-D integer tensor or list of ints, gamma >= 0, n >= 1."""
    assert_rejects(impl.get("ngram_propose"), NGRAM_VALID, bad)


def _loop_valid(reference):
    return dict(target=tiny_models(reference, max_seq_len=8), draft=tiny_models(reference, layers=1, seed=2),
                prompt=torch.tensor([1, 2, 3]), gamma=2, max_new_tokens=3, temperature=0.0, generator=None)


LOOP_BAD = [
    Bad("prompt 2-D", lambda v: {**v, "prompt": v["prompt"][None]}, ValueError, ("prompt",)),
    Bad("prompt float", lambda v: {**v, "prompt": v["prompt"].float()}, TypeError, ("prompt",)),
    Bad("prompt empty", lambda v: {**v, "prompt": v["prompt"][:0]}, ValueError, ("prompt",)),
    Bad("prompt id past vocab", lambda v: {**v, "prompt": torch.tensor([1, 8])}, ValueError, ("prompt",)),
    Bad("negative gamma", dict(gamma=-1), ValueError, ("gamma",)),
    Bad("float gamma", dict(gamma=1.5), TypeError, ("gamma",)),
    Bad("negative max_new_tokens", dict(max_new_tokens=-1), ValueError, ("max_new_tokens",)),
    Bad("past max_seq_len", dict(max_new_tokens=6), ValueError, ("max_seq_len",)),
    Bad("negative temperature", dict(temperature=-0.5), ValueError, ("temperature",)),
    Bad("nan temperature", dict(temperature=float("nan")), ValueError, ("temperature",)),
    Bad("inf temperature", dict(temperature=float("inf")), ValueError, ("temperature",)),
    Bad("sampling without generator", dict(temperature=1.0), ValueError, ("generator",)),
    Bad("generator not a Generator", dict(temperature=1.0, generator=3), TypeError, ("generator",)),
    Bad("draft of another vocab", lambda v: {**v, "draft": tiny_models_vocab(v)}, ValueError, ("draft",)),
    Bad("target not a model", dict(target="model"), TypeError, ("target",)),
    Bad("target callable without config", dict(target=lambda *a, **k: None), TypeError, ("target",)),
    Bad("draft not a model", dict(draft="model"), TypeError, ("draft",)),
    Bad("prompt negative id", lambda v: {**v, "prompt": torch.tensor([-1, 2])}, ValueError, ("prompt",)),
    Bad("generator not a Generator at temperature 0", dict(generator=3), TypeError, ("generator",)),
    Bad("sampling without generator, nothing to emit", dict(temperature=1.0, max_new_tokens=0), ValueError,
        ("generator",)),
]


def tiny_models_vocab(valid):
    """The valid target's model class and config with vocab_size 4 (the target's is 8)."""
    target = valid["target"]
    return type(target)(target.config.replace(vocab_size=4, n_layers=1))


@bad_cases(LOOP_BAD)
def test_loop_rejects_bad_input(impl, reference, bad):
    """speculative_generate: the argument named in the message."""
    assert_rejects(impl.get("speculative_generate"), _loop_valid(reference), bad)


FORM_BAD = [
    Bad("alpha above 1", dict(alpha=1.5), ValueError, ("alpha",)),
    Bad("negative alpha", dict(alpha=-0.1), ValueError, ("alpha",)),
    Bad("nan alpha", dict(alpha=float("nan")), ValueError, ("alpha",)),
    Bad("string alpha", dict(alpha="0.5"), TypeError, ("alpha",)),
    Bad("negative gamma", dict(gamma=-1), ValueError, ("gamma",)),
    Bad("float gamma", dict(gamma=2.0), TypeError, ("gamma",)),
]


@bad_cases(FORM_BAD)
def test_expected_tokens_rejects_bad_input(impl, bad):
    """expected_tokens_per_step: α a real in [0, 1], γ an int >= 0."""
    assert_rejects(impl.get("expected_tokens_per_step"), dict(alpha=0.5, gamma=3), bad)


SPEEDUP_BAD = FORM_BAD + [
    Bad("negative c", dict(c=-0.1), ValueError, ("c",)),
    Bad("inf c", dict(c=float("inf")), ValueError, ("c",)),
    Bad("None c", dict(c=None), TypeError, ("c",)),
]


@bad_cases(SPEEDUP_BAD)
def test_speedup_rejects_bad_input(impl, bad):
    """speedup: α in [0, 1], γ >= 0, c a finite real >= 0."""
    assert_rejects(impl.get("speedup"), dict(alpha=0.5, gamma=3, c=0.1), bad)


@bad_cases([
    Bad("zero gamma", dict(gamma=0), ValueError, ("gamma",)),
    Bad("negative c", dict(c=-1.0), ValueError, ("c",)),
    Bad("c never breaks even", dict(c=1.5), ValueError, ("c",)),
])
def test_break_even_rejects_bad_input(impl, bad):
    """break_even_alpha: γ >= 1; c >= 0 with a break-even point (c <= 1)."""
    assert_rejects(impl.get("break_even_alpha"), dict(gamma=3, c=0.1), bad)
