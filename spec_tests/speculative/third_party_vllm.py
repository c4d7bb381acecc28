"""A third-party submission for `speculative`: vLLM v1's rejection sampler
(``vllm/v1/sample/rejection_sampler.py`` of vllm-project/vllm at the commit in ``UPSTREAM``).

The upstream file is fetched, never copied here: it is loaded from
``.upstream/vllm-project+vllm@7f6fc1c5ce8d/vllm/v1/sample/rejection_sampler.py`` (git-ignored;
``conformance.upstream.locate``), and ``conformance.upstream.Unavailable`` is raised at import
when it is absent. Its logic runs unmodified: ``rejection_sample`` (the greedy kernel, the
recovered-token kernel and the random rejection kernel, Triton, under ``TRITON_INTERPRET=1`` on
the CPU, which the plugin sets).

What this adapter supplies, and why:

- **stub modules** for the imports the file makes from the rest of vLLM (installed into
  ``sys.modules`` before the file is loaded): ``vllm.logger.init_logger`` (a ``logging`` logger),
  ``vllm.triton_utils`` (the real ``triton`` and ``triton.language``), ``vllm.v1.sample.metadata
  .SamplingMetadata`` (a dataclass with the fields ``rejection_sample`` reads: ``all_greedy``,
  ``all_random``, ``temperature``, ``generators``), and empty placeholders for names only the
  ``RejectionSampler`` module (not used here) needs: outputs, bad words, penalties, top-k/top-p,
  ``Sampler``, ``SpecDecodeMetadata``.
- **validation**: vLLM's sampler assumes validated inputs; the contract's checks and messages are
  ``reference.speculative``'s (``check_inputs``, ``report_bad_distributions``,
  ``report_bad_tokens``), as the other third-party adapters do.
- **the uniforms**: vLLM draws its acceptance uniforms in ``generate_uniform_probs`` (float64,
  per-request generators). The contract passes them in (``uniforms[r, i]`` decides draft i), so
  the module's ``generate_uniform_probs`` is replaced by one returning the flattened
  ``uniforms[r, :γ_r]``; with a ``generator`` the adapter first draws the contract's
  ``torch.rand(batch, γ + 1, float64)``.
- **the recovered token's randomness**: vLLM draws one Exp(1) vector per request
  (``q[i].exponential_(generator=generators[i])``) and takes ``argmax(residual / q)`` (an
  exponential race). Each row gets its own ``torch.Generator`` seeded with the bits of its last
  uniform, ``int(uniforms[r, γ] * 2**53)``: a fresh uniform gives a fresh race. vLLM's
  unseeded ``q.exponential_()`` over the whole batch (then overwritten row by row) would consume
  the global RNG, which the contract forbids: it runs inside ``torch.random.fork_rng``.
- **the bonus token**: vLLM samples it outside the rejection sampler (its ``Sampler``: an
  exponential race ``argmax(p / Exp(1))`` for random rows, ``argmax`` for greedy ones) and passes
  it in; the adapter does the same with the row's generator (drawn before the recovered-token
  vector, as vLLM samples the bonus first).
- **dtypes and devices**: probabilities are cast to float32, as vLLM's ``RejectionSampler.forward``
  does; everything runs on the probabilities' device (the kernels natively on CUDA).

Where it differs from the reference, legitimately (the choices of docs/speculative.md, checked only
at token-exact): the recovered and bonus tokens are exponential races, not the inverse CDF of the
last uniform; the acceptance ratio ``target_prob / draft_prob`` is float32; ``generate_uniform_probs``
is not how the generator is consumed by vLLM itself (here it is, through the adapter's draw).

Measured on the CPU (Triton interpreter, ~10 ms a row; a CUDA run was not possible in the session
that wrote this): test_verify.py 95 passed, the 2 u = 0 failures below, 9 choice tests
token-exact ✗ (test_pinned_rule: the four cases whose emitted token is drawn; test_matches_reference;
test_large_vocab_matches_reference x 4); test_lossless_law (quick profile), the every-mode sweep and
the three chi-square tests passed; test_lossless_by_exact_enumeration / _exact_every_mode are
choice tests (exponential races are not constant on the inverse CDF's cells).

A real bug against the law, kept in the spec and deselected here (``SPEC_DESELECT``): vLLM accepts
iff ``target_prob / draft_prob >= uniform``, so a uniform of exactly 0 accepts a draft of target
probability 0 (``0 >= 0``) and emits a token the target never emits. vLLM draws float64 uniforms,
so the event has probability 2^-53 per draft, but given ``uniforms`` with a 0 the output is not
lossless. The tests that pass a uniform of exactly 0 to such a draft:
``test_pinned_rule_law[q > 0 where p = 0: rejected even with u = 0]`` and the generated batches
whose ``edges`` put uniforms of exactly 0 (``test_generated_batches_obey_the_law``,
``test_one_hot_targets_verify_like_greedy``).
"""
from __future__ import annotations

import importlib.util
import logging
import sys
import types
from dataclasses import dataclass, field

import torch

from conformance.upstream import locate
from reference.speculative import (  # noqa: F401  (Verified, PAD: the contract's vocabulary)
    PAD, Verified, check_inputs, report_bad_distributions, report_bad_tokens)

__all__ = ["verify"]

UPSTREAM = ("vllm-project/vllm", "7f6fc1c5ce8d02f473b1b923debbfef3fa0b7a6a",
            ("vllm/v1/sample/rejection_sampler.py",))

SPEC_DESELECT = ("rejected", "test_generated_batches_obey_the_law", "test_one_hot_targets_verify_like_greedy")


@dataclass
class SamplingMetadata:
    """The fields of vLLM's ``SamplingMetadata`` that ``rejection_sample`` reads."""
    temperature: torch.Tensor | None
    all_greedy: bool
    all_random: bool
    generators: dict = field(default_factory=dict)


def _stub_modules() -> None:
    import triton
    import triton.language as tl

    def module(name: str, **attrs):
        m = sys.modules.get(name) or types.ModuleType(name)
        for k, v in attrs.items():
            setattr(m, k, v)
        sys.modules[name] = m
        return m

    class _Unused:
        def __init__(self, *a, **k):
            raise NotImplementedError("not part of the rejection sampler's function this adapter runs")

    for pkg in ("vllm", "vllm.v1", "vllm.v1.sample", "vllm.v1.sample.ops", "vllm.v1.spec_decode"):
        module(pkg).__path__ = []
    module("vllm.logger", init_logger=logging.getLogger)
    module("vllm.triton_utils", tl=tl, triton=triton)
    module("vllm.v1.outputs", LogprobsTensors=_Unused, SamplerOutput=_Unused)
    module("vllm.v1.sample.metadata", SamplingMetadata=SamplingMetadata)
    module("vllm.v1.sample.ops.bad_words", apply_bad_words_with_drafts=_Unused)
    module("vllm.v1.sample.ops.penalties", apply_all_penalties=_Unused)
    module("vllm.v1.sample.ops.topk_topp_sampler", apply_top_k_top_p=_Unused)
    module("vllm.v1.sample.sampler", Sampler=_Unused)
    module("vllm.v1.spec_decode.metadata", SpecDecodeMetadata=_Unused)


def _load():
    root = locate(*UPSTREAM)
    _stub_modules()
    name = "vllm.v1.sample.rejection_sampler"
    spec = importlib.util.spec_from_file_location(name, root / UPSTREAM[2][0])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_rs = _load()
_FLAT_UNIFORMS: list = []     # what generate_uniform_probs returns during one call


def _given_uniforms(num_tokens, num_draft_tokens, generators, device):
    u = _FLAT_UNIFORMS[-1]
    assert u.shape == (num_tokens,)
    return u


_rs.generate_uniform_probs = _given_uniforms


def _race(p: torch.Tensor, g: torch.Generator) -> int:
    """vLLM's Sampler for a random row: argmax(p / Exp(1))."""
    e = torch.empty_like(p).exponential_(generator=g)
    return int((p / e).argmax())


def verify(target_probs, draft_probs, draft_tokens, *, draft_lens=None, greedy=None, uniforms=None,
           generator=None):
    a = check_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy, uniforms, generator)
    p64 = target_probs.detach().to("cpu", torch.float64)
    q64 = None if draft_probs is None else draft_probs.detach().to("cpu", torch.float64)
    report_bad_distributions("target_probs", p64.sum(dim=2), p64.amin(dim=2), a.active_p.cpu(), target_probs.dtype)
    if q64 is not None:
        report_bad_distributions("draft_probs", q64.sum(dim=2), q64.amin(dim=2), a.active_q.cpu(), draft_probs.dtype)
    report_bad_tokens(draft_tokens, a.active_q, a.vocab)
    device = target_probs.device
    b, g = a.batch, a.gamma
    u = a.uniforms if a.uniforms is not None else torch.rand(b, g + 1, generator=generator, dtype=torch.float64,
                                                             device=device)
    tokens = torch.full((b, g + 1), PAD, dtype=torch.int64)
    if b == 0:
        return Verified(tokens.to(device), torch.zeros(0, dtype=torch.int64, device=device))
    lens = a.lens.cpu().tolist()
    greedy_rows = a.greedy.cpu().tolist()
    p = target_probs.detach().to(torch.float32)
    q = None if draft_probs is None else draft_probs.detach().to(torch.float32)
    x = draft_tokens.detach().to(torch.int64)
    v = u[:, g].cpu().tolist()
    gens = {r: torch.Generator(device=device).manual_seed(int(v[r] * 2 ** 53)) for r in range(b)}
    bonus = torch.tensor([int(p[r, lens[r]].argmax()) if greedy_rows[r] else _race(p[r, lens[r]], gens[r])
                          for r in range(b)], dtype=torch.int64, device=device)
    if sum(lens) == 0:
        tokens = tokens.to(device)
        tokens[:, 0] = bonus
        return Verified(tokens, torch.zeros(b, dtype=torch.int64, device=device))
    rows = torch.tensor([r for r in range(b) for _ in range(lens[r])], device=device)
    pos = torch.tensor([i for r in range(b) for i in range(lens[r])], device=device)
    flat_x = x[rows, pos].contiguous()
    flat_p = p[rows, pos].contiguous()
    flat_q = None if q is None else q[rows, pos].contiguous()
    meta = SamplingMetadata(
        temperature=torch.tensor([0.0 if gr else 1.0 for gr in greedy_rows], dtype=torch.float32, device=device),
        all_greedy=all(greedy_rows), all_random=not any(greedy_rows), generators=gens)
    cu = torch.tensor(lens, dtype=torch.int64).cumsum(0).to(torch.int32).to(device)
    _FLAT_UNIFORMS.append(u.to(device)[rows, pos].contiguous())
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            out = _rs.rejection_sample(flat_x, lens, g, cu, flat_q, flat_p, bonus.reshape(b, 1).contiguous(), meta)
    finally:
        _FLAT_UNIFORMS.pop()
    out = out.to(torch.int64)
    kept = (out != _rs.PLACEHOLDER_TOKEN_ID).sum(1)
    return Verified(out.masked_fill(out == _rs.PLACEHOLDER_TOKEN_ID, PAD), kept - 1)
