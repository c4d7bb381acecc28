"""The draft-model proposer: an early-exit (first n_layers) and/or perturbed copy of the target;
greedy speculative decoding with it emits exactly the target's greedy tokens (property)."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.drafts.strategies import assert_target_greedy, tiny_models


def _scaled(n: int) -> int:
    return max(1, round(n * settings().max_examples / 25))


def _truncated_logits(target, tokens, k):
    """The target's own first k layers, then its final norm and lm_head (the early-exit oracle)."""
    from reference.model import rope_cos_sin
    c = target.config
    pos = torch.arange(tokens.shape[1])
    cos, sin = rope_cos_sin(pos, c.head_dim, c.rope_theta, target.dtype)
    h = target.model.embed_tokens(tokens)
    for i, layer in enumerate(target.model.layers[:k]):
        h = layer(h, cos, sin, None, i, target.attention_fn)
    return target.lm_head(target.model.norm(h))


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_draft_is_the_targets_first_layers(impl, reference, layers):
    """noise 0: draft_model(target, n_layers=k) computes exactly the target's first k layers + its
    final norm and lm_head (k = all: the target itself); the target is unchanged."""
    target = tiny_models(reference, layers=3, seed=4)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    draft = impl.get("draft_model")(target, n_layers=layers)
    assert draft.config.n_layers == layers and draft.config.vocab_size == target.config.vocab_size
    tokens = torch.tensor([[1, 5, 2, 7, 0, 3]])
    with torch.no_grad():
        assert torch.equal(draft(tokens), _truncated_logits(target, tokens, layers)), (
            f"n_layers={layers}: the draft is not the target's first {layers} layers + norm + lm_head")
    for k, v in target.state_dict().items():
        assert torch.equal(v, before[k]), f"draft_model modified the target's {k}"
    assert impl.get("draft_model")(target).config.n_layers == 3, "n_layers defaults to the target's"


def test_noise_perturbs_every_parameter_by_its_scale(impl, reference):
    """noise σ > 0: every parameter moves, by about σ times its own spread (relative RMS change in
    [σ/2, 2σ]); the same seed gives the same draft, another seed another one."""
    target = tiny_models(reference, layers=2, seed=4)
    make = impl.get("draft_model")
    sigma = 0.1
    a, b, c = make(target, noise=sigma, seed=1), make(target, noise=sigma, seed=1), make(target, noise=sigma, seed=2)
    src = target.state_dict()
    for name, w in a.state_dict().items():
        delta = (w - src[name]).float()
        rel = float(delta.pow(2).mean().sqrt() / src[name].float().std(unbiased=False))
        assert sigma / 2 <= rel <= 2 * sigma, f"{name}: relative change {rel:.3g}, expected about {sigma}"
        assert torch.equal(w, b.state_dict()[name]), f"{name}: the same seed gave another draft"
        assert not torch.equal(w, c.state_dict()[name]), f"{name}: another seed gave the same draft"


def test_seed_defaults_to_zero(impl, reference):
    """seed defaults to 0: draft_model(target, noise=σ) is draft_model(target, noise=σ, seed=0)."""
    target = tiny_models(reference, layers=2, seed=4)
    make = impl.get("draft_model")
    a, b = make(target, noise=0.3), make(target, noise=0.3, seed=0)
    for name, w in a.state_dict().items():
        assert torch.equal(w, b.state_dict()[name]), f"{name}: the default seed is not 0"


def test_noise_is_one_stream_in_state_dict_order(impl, reference):
    """The stated recipe: W + noise * std(W) * N(0, 1), the N float32 draws of ONE
    torch.Generator().manual_seed(seed), taken parameter after parameter in state_dict order. Each
    parameter's change is exactly proportional to its own slice of that stream (cosine > 1 - 1e-6),
    with a scale of noise * std(W) (within 5%: biased or unbiased std alike); the target is left
    unchanged."""
    target = tiny_models(reference, layers=2, seed=4)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    sigma, seed = 0.3, 7
    draft = impl.get("draft_model")(target, n_layers=2, noise=sigma, seed=seed)
    g = torch.Generator().manual_seed(seed)
    for name, w in draft.state_dict().items():
        draw = torch.randn(w.shape, generator=g, dtype=torch.float32).flatten().double()
        base = before[name].double()
        delta = (w.double() - base).flatten()
        cos = float(delta @ draw / (delta.norm() * draw.norm()))
        assert cos > 1 - 1e-6, f"{name}: the change is not this parameter's slice of the seed's stream (cos {cos:.6f})"
        scale = float(delta @ draw / (draw @ draw))
        assert scale == pytest.approx(sigma * float(base.std(unbiased=False)), rel=0.05), (name, scale)
    for k, v in target.state_dict().items():
        assert torch.equal(v, before[k]), f"draft_model(noise={sigma}) modified the target's {k}"


@example(layers=1, noise=0.0, seed=0, gamma=3, prompt=[1, 2, 3, 1, 2, 5]).via("mutant:draft_last_layers")
@settings(max_examples=_scaled(8))
@given(layers=st.integers(1, 2), noise=st.sampled_from([0.0, 0.05, 0.5, 2.0]), seed=st.integers(0, 50),
       gamma=st.integers(1, 4), prompt=st.lists(st.integers(0, 7), min_size=1, max_size=6))
def test_greedy_with_draft_model_is_target_greedy(impl, reference, layers, noise, seed, gamma, prompt):
    """Property: with ANY draft_model(target, n_layers, noise, seed) as the draft, greedy
    speculative decoding emits exactly reference.generate's greedy tokens of the target (up to a
    genuine float32 near-tie: strategies.assert_target_greedy). The
    pinned example also checks that a 1-layer noiseless draft agrees with the target's early exit."""
    target = tiny_models(reference, layers=2, seed=1)
    draft = impl.get("draft_model")(target, n_layers=layers, noise=noise, seed=seed)
    if noise == 0.0:
        tokens = torch.tensor([prompt])
        with torch.no_grad():
            assert torch.equal(draft(tokens), _truncated_logits(target, tokens, layers)), "not the early exit"
    p = torch.tensor(prompt, dtype=torch.int64)
    got = impl.get("speculative_generate")(target, draft, p, gamma, max_new_tokens=10, temperature=0)
    assert_target_greedy(got, reference, target, p, 10, f"layers={layers} noise={noise} seed={seed} gamma={gamma}")


class _SameInterface:
    """The reference Transformer's interface (config, state_dict, attention_fn, device) on another
    class: what a target looks like from a submission's process, or a student's own model."""

    def __init__(self, model):
        self.config, self.attention_fn, self.device, self._model = model.config, model.attention_fn, model.device, model

    def state_dict(self):
        return self._model.state_dict()


class _ConfigAsDict(_SameInterface):
    """The interface, except that ``config`` is a dict instead of a ModelConfig."""

    def __init__(self, model):
        super().__init__(model)
        self.config = dataclasses.asdict(model.config)


def test_draft_model_takes_any_target_with_the_interface(impl, reference):
    """The target is checked by its interface, not its class: a target that only has the
    reference Transformer's config / state_dict / attention_fn / device gives the same draft."""
    target = tiny_models(reference, layers=2, seed=4)
    make = impl.get("draft_model")
    a, b = make(target, n_layers=1, noise=0.1, seed=3), make(_SameInterface(target), n_layers=1, noise=0.1, seed=3)
    tokens = torch.tensor([[1, 5, 2, 7]])
    with torch.no_grad():
        assert torch.equal(a(tokens), b(tokens)), "another class with the same interface gave another draft"


def _valid(reference):
    return dict(target=tiny_models(reference, layers=2, seed=1), n_layers=1, noise=0.1, seed=0)


BAD = [
    Bad("target not a model", dict(target="llama"), TypeError, ("target",)),
    Bad("target config a dict", lambda v: {**v, "target": _ConfigAsDict(v["target"])}, TypeError, ("target",)),
    Bad("n_layers zero", dict(n_layers=0), ValueError, ("n_layers",)),
    Bad("n_layers past the target's", dict(n_layers=3), ValueError, ("n_layers",)),
    Bad("n_layers float", dict(n_layers=1.0), TypeError, ("n_layers",)),
    Bad("noise negative", dict(noise=-0.1), ValueError, ("noise",)),
    Bad("noise inf", dict(noise=float("inf")), ValueError, ("noise",)),
    Bad("noise a string", dict(noise="0.1"), TypeError, ("noise",)),
    Bad("seed float", dict(seed=1.5), TypeError, ("seed",)),
]


@bad_cases(BAD)
def test_draft_model_rejects_bad_input(impl, reference, bad):
    """draft_model: a target with the reference Transformer's interface (a ModelConfig config, a
    state_dict), 1 <= n_layers <= its layers, noise a finite real >= 0, seed an int; the target is
    left unchanged."""
    assert_rejects(impl.get("draft_model"), _valid(reference), bad)
