"""The verifier's contract beyond losslessness: the pinned rule on hand-made corner cases, greedy
rows, per-row γ and padding, the seeded draw, differential against the reference, metamorphic
relations, bad input. (Losslessness itself: test_lossless.py.)

Law and choice: the unmarked tests hold every verifier (the threshold min(1, p/q) up to float32
rounding, emitted tokens in the allowed support, greedy rows on an argmax, the metamorphic
relations, bad input); those marked ``@pytest.mark.choice`` pin the reference's own choices (the
exact tokens of the inverse-CDF draw, float64 acceptance, ties to the smallest id, the generator
consumed as one ``torch.rand(batch, γ + 1, float64)``) and are enforced at token-exact only."""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, assert_rejects_without_data, bad_cases, set_entry
from conformance.strategies import DTYPES, generator
from reference.speculative import SUM_TOLERANCE
from spec_tests.speculative.strategies import BatchCase, batch_cases
from spec_tests.speculative.oracles import PAD, law_violation, read_result

ONE_MINUS = 1.0 - 2.0 ** -53   # the largest float64 below 1


def _scaled(n: int) -> int:
    """``n`` examples under the dev profile (25), scaled with the profile's max_examples."""
    return max(1, round(n * settings().max_examples / 25))


def _t(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype)


def _call(impl, kw: dict):
    return impl.get("verify")(**kw)


def _same(a, b, kw, vocab, what):
    ea, eb = read_result(a, kw, vocab, what), read_result(b, kw, vocab, "reference")
    bad = [r for r in range(len(ea)) if ea[r] != eb[r]]
    assert not bad, (f"{what}: row {bad[0]} emits {list(ea[bad[0]])}, the reference "
                     f"{list(eb[bad[0]])} ({len(bad)} of {len(ea)} rows differ)")


# ----------------------------------------------------------------------------- pinned corner cases
class Pin(NamedTuple):
    """A hand-made case: the verify arguments (float64, CPU), the pinned result and the planted
    bug of spec_tests/speculative/mutants.py that this case alone catches."""
    kwargs: Callable[[], dict]
    tokens: list
    accepted: list
    mutant: str


def _case(p, q, x, u, **kw):
    return lambda: dict(target_probs=_t(p), draft_probs=None if q is None else _t(q),
                        draft_tokens=_t(x, torch.int64).reshape(len(p), -1), uniforms=_t(u), **kw)


def _tiny_row(vocab: int = 1024, tiny: float = 2.0 ** -55) -> tuple[list, float]:
    """0.5, then vocab - 2 entries of ``tiny``, then the rest of 1; and the uniform v whose
    target v * C_last is 0.5 + (vocab / 4) tiny, C_last the sequential float64 total."""
    row = [0.5] + [tiny] * (vocab - 2) + [0.5 - (vocab - 2) * tiny]
    total = 0.0
    for w in row:
        total += w
    return row, (0.5 + vocab // 4 * tiny) / total


_TINY_ROW, _TINY_V = _tiny_row()

PINNED = {
    # p == q: acceptance is certain (u q < q = p for every u < 1), the bonus comes from p
    "p == q accepts every draft, even with u just below 1": Pin(
        _case([[[.25, .5, .25], [.25, .5, .25], [.125, .125, .75]]], [[[.25, .5, .25], [.25, .5, .25]]],
              [[1, 2]], [[ONE_MINUS, ONE_MINUS, 0.3]]), [[1, 2, 2]], [2], "bonus_from_q"),
    # q > 0 where p = 0: rejected even by u = 0 (u q < p is strict); the residual is max(p - q, 0)
    "q > 0 where p = 0: rejected even with u = 0": Pin(
        _case([[[.5, .5, 0], [1, 0, 0]]], [[[0, .25, .75]]], [[2]], [[0.0, 0.6]]), [[0, PAD]], [0],
        "zero_uniform_accepts"),
    # disjoint supports: every first draft is rejected, and the residual is p itself
    "disjoint supports: the token comes from p, via this position's residual": Pin(
        _case([[[.5, .5, 0, 0], [.25, .25, .25, .25], [1, 0, 0, 0]]], [[[0, 0, .5, .5], [0, .5, .5, 0]]],
              [[3, 1]], [[0.3, 0.0, 0.75]]), [[1, PAD, PAD]], [0], "residual_next_q"),
    "the residual is max(p - q, 0), not p": Pin(
        _case([[[.25, .5, .25], [1, 0, 0]]], None, [[1]], [[0.6, 0.5]]), [[2, PAD]], [0], "recovered_from_p"),
    "the residual is max(p - q, 0), not q": Pin(
        _case([[[.5, .5, 0], [1, 0, 0]]], [[[0, .25, .75]]], [[2]], [[0.5, 0.6]]), [[0, PAD]], [0],
        "recovered_from_q"),
    # q(x) = 0 for the drafted x (a draft its own distribution cannot propose): rejected
    "q(x) = 0 rejects, even when p(x) > 0": Pin(
        _case([[[.5, .5], [1, 0]]], [[[1, 0]]], [[1]], [[0.0, 0.1]]), [[1, PAD]], [0], "q_zero_accepts"),
    # rounding leaves p <= q everywhere with p != q: the residual is empty -> drawn from p
    "an all-zero residual (only through rounding) draws from p, never a zero-probability token": Pin(
        _case([[[.5, .5 - 1e-9, 0], [1, 0, 0]]], [[[.5, .5, 0]]], [[1]], [[ONE_MINUS, 0.2]]), [[0, PAD]], [0],
        "empty_residual_unhandled"),
    "accept with probability min(1, p/q), not iff p >= q": Pin(
        _case([[[.3, .7], [.5, .5]]], [[[.6, .4]]], [[0]], [[0.25, 0.5]]), [[0, 1]], [1], "accept_p_ge_q"),
    "each position has its own acceptance uniform": Pin(
        _case([[[.5, .5], [.5, .5], [1, 0]]], [[[1, 0], [1, 0]]], [[0, 0]], [[0.1, 0.9, 0.5]]), [[0, 1, PAD]], [1],
        "one_uniform_all_positions"),
    "a rejection ends the run: later accepts do not count": Pin(
        _case([[[.5, .5], [.5, .5], [1, 0]]], [[[1, 0], [1, 0]]], [[0, 0]], [[0.9, 0.1, 0.5]]), [[1, PAD, PAD]], [0],
        "accepts_counted_not_run"),
    "each row has its own uniforms": Pin(
        _case([[[.5, .5], [1, 0]]] * 2, [[[1, 0]]] * 2, [[0], [0]], [[0.1, 0.5], [0.9, 0.5]]),
        [[0, 0], [1, PAD]], [1, 0], "uniforms_shared_across_rows"),
    "every accepted run ends with a bonus token": Pin(
        _case([[[0, 1], [.5, .5]]], None, [[1]], [[0.5, 0.75]]), [[1, 1]], [1], "bonus_skipped"),
    # per-row γ: row 0 has γ_0 = 1 of the padded 2; its bonus comes from position 1
    "per-row γ: the bonus comes from position γ_r, padding is never read": Pin(
        _case([[[0, 1], [.5, .5], [1, 0]]], [[[0, 1], [1, 0]]], [[1, 0]], [[0.5, 0.25, 0.75]], draft_lens=[1]),
        [[1, 1, PAD]], [1], "draft_lens_ignored"),
    # greedy: accept while the draft is the argmax (ties to the smallest id), then emit the argmax
    "greedy: argmax with ties to the smallest id, uniforms unused": Pin(
        _case([[[.2, .4, .4], [.5, .1, .4], [0, 0, 1]]], [[[1 / 3] * 3] * 2], [[1, 2]], [[0.9, 0.05, 0.99]],
              greedy=[True]), [[1, 0, PAD]], [1], "greedy_sampled_match"),
    "γ = 0: one token from p_0": Pin(
        _case([[[.25, .25, .5]]], None, [[]], [[0.3]]), [[1]], [0], "bonus_skipped"),
    # a residual whose total is the smallest subnormal: v * C_last rounds up to C_last, so no
    # C_t exceeds it; the token is still the residual's one support token (not past it, nor the
    # last id). p sums to 1 - 8e-7 (within float64's tolerance), and u is far above p/q.
    "a residual of one subnormal draws its support token, wherever it stands": Pin(
        _case([[[.5 - 8e-7, 5e-324, .5], [1, 0, 0]]], [[[.5, 0, .5]]], [[0]], [[0.9999999, 0.75]]),
        [[1, PAD]], [0], "(mechanical: optimized _inverse_cdf's fallback to the last positive weight)"),
    # C is the float64 cumsum in token order, one addition after another: each tiny entry (2^-55,
    # a quarter of 0.5's ulp) vanishes when added to 0.5, so C stays 0.5 up to the last token and
    # a target just above 0.5 (v * C_last = 0.5 + 256 tiny = 0.5 + 2^-47) is first exceeded there.
    # A blocked or tree sum (a GPU scan, pairwise sums) adds tiny entries together first and carries
    # C past the target well before the last token (blocks of 8 to 128: token 773): another token
    # of the same support (the law allows it), not the choice.
    "the CDF is summed in token order: tiny entries after a large one never move the draw": Pin(
        _case([[_TINY_ROW]], None, [[]], [[_TINY_V]]), [[len(_TINY_ROW) - 1]], [0],
        "(mechanical: optimized's draw by torch ops on CUDA, whose cumsum is a parallel scan)"),
}


# A residual whose total is one float64 subnormal is all zero in float32: a float32 verifier (vLLM)
# legitimately falls back to p's support there, so that case pins the reference's float64 choice only.
LAW_PINNED = [n for n in PINNED if "subnormal" not in n]


@pytest.mark.parametrize("name", LAW_PINNED)
def test_pinned_rule_law(impl, device, name):
    """The same hand-made cases, judged by the law: the acceptance count the threshold min(1, p/q)
    gives (a uniform within float32 rounding of a threshold may go either way; a draft of target
    or draft probability 0 is never accepted, even by u = 0), the emitted token in the support of
    the residual / bonus p / argmax (an all-zero residual: p's support)."""
    pin = PINNED[name]
    kw = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in pin.kwargs().items()}
    vocab = kw["target_probs"].shape[2]
    got = read_result(_call(impl, kw), kw, vocab, name)
    why = law_violation(kw, got)
    assert why is None, f"{name}: {why}"


@pytest.mark.parametrize("name", list(PINNED))
@pytest.mark.choice("the emitted token is the inverse CDF of the last uniform; acceptance is float64 u * q < p")
def test_pinned_rule(impl, device, name):
    """Hand-made cases of every pinned rule and corner case, each with its exact result and the
    mutant it catches (spec_tests/speculative/mutants.py)."""
    pin = PINNED[name]
    kw = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in pin.kwargs().items()}
    vocab = kw["target_probs"].shape[2]
    got = read_result(_call(impl, kw), kw, vocab, name)
    want = [tuple(t for t in row if t != PAD) for row in pin.tokens]
    assert got == want, f"{name}: emitted {[list(g) for g in got]}, pinned {[list(w) for w in want]}"


# ----------------------------------------------------------------------------- differential
@example(case=BatchCase(6, 4, 40, "float32", 1, noise=0.0, lens=(4, 0, 2, 4, 1, 3), garbage=True)).via("mutant:uniforms_shared_across_rows")
@example(case=BatchCase(5, 3, 7, "bfloat16", 2, noise=0.3, greedy=(True, False, True, False, False), edges=True)).via("mutant:greedy_sampled_match")
@example(case=BatchCase(4, 5, 1, "float16", 3, no_q=True)).via("mutant:bonus_skipped")
@given(case=batch_cases())
def test_generated_batches_obey_the_law(impl, device, case):
    """Generated float batches (every dtype, per-row γ with NaN garbage in the padding, greedy
    rows, drafts without probabilities, q == p, uniforms of exactly 0 and 1 - 2^-53): every row's
    acceptance count is the threshold rule's (float32 rounding admitted within 2^-21 of a
    threshold), its emitted token in the residual's / bonus p's / argmax's support."""
    kw = case.tensors(device)
    got = read_result(_call(impl, kw), kw, case.vocab, "verify")
    why = law_violation(kw, got)
    assert why is None, f"{why}\n  case: {case!r}"


@example(case=BatchCase(6, 4, 40, "float32", 1, noise=0.0, lens=(4, 0, 2, 4, 1, 3), garbage=True)).via("mutant:uniforms_shared_across_rows")
@example(case=BatchCase(5, 3, 7, "bfloat16", 2, noise=0.3, greedy=(True, False, True, False, False), edges=True)).via("mutant:greedy_sampled_match")
@example(case=BatchCase(4, 5, 1, "float16", 3, no_q=True)).via("mutant:bonus_skipped")
@given(case=batch_cases())
@pytest.mark.choice("the same tokens as the reference for the same uniforms (inverse CDF, float64)")
def test_matches_reference(impl, reference, device, case):
    """Generated float batches (every dtype, per-row γ with garbage in the padding, greedy rows,
    drafts without probabilities, q == p, uniforms of exactly 0 and just below 1): the same
    tokens and counts as the reference for the same uniforms."""
    kw = case.tensors(device)
    _same(_call(impl, kw), _call(reference, kw), kw, case.vocab, "implementation")


LARGE = [("float32", 0.0), ("float32", 0.5), ("bfloat16", 1.0), ("float64", 3.0)]


def _large(dtype, noise):
    return BatchCase(12, 4, 32000, dtype, 11, scale=4.0, noise=noise, lens=(4, 4, 3, 0, 4, 2, 4, 1, 4, 4, 3, 4),
                     greedy=(False,) * 10 + (True, True), edges=True)


@pytest.mark.parametrize("dtype,noise", LARGE)
def test_large_vocab_obeys_the_law(impl, device, dtype, noise):
    """A realistic vocabulary (32,000) and γ = 4, 12 rows with per-row γ and two greedy rows:
    acceptance counts and emitted tokens the law allows."""
    case = _large(dtype, noise)
    kw = case.tensors(device)
    got = read_result(_call(impl, kw), kw, case.vocab, f"vocab 32000 {dtype}")
    why = law_violation(kw, got)
    assert why is None, f"vocab 32000 {dtype}: {why}"


@pytest.mark.parametrize("dtype,noise", LARGE)
@pytest.mark.choice("the same tokens as the reference for the same uniforms (inverse CDF, float64)")
def test_large_vocab_matches_reference(impl, reference, device, dtype, noise):
    """A realistic vocabulary (32,000) and γ = 4, 12 rows with per-row γ and two greedy rows:
    the same tokens as the reference."""
    case = _large(dtype, noise)
    kw = case.tensors(device)
    _same(_call(impl, kw), _call(reference, kw), kw, case.vocab, f"vocab 32000 {dtype}")


# ----------------------------------------------------------------------------- greedy
def _greedy_expected(kw) -> list[tuple]:
    p = kw["target_probs"].cpu().to(torch.float64)
    x = kw["draft_tokens"].cpu()
    lens = kw["draft_lens"] or [x.shape[1]] * x.shape[0]
    out = []
    for r in range(x.shape[0]):
        k = 0
        while k < lens[r] and int(x[r, k]) == int(p[r, k].argmax()):
            k += 1
        out.append(tuple(x[r, :k].tolist()) + (int(p[r, k].argmax()),))
    return out


@given(case=batch_cases(max_vocab=6, dtypes=("float32", "bfloat16")), seed=st.integers(0, 2**32 - 1))
def test_greedy_rows_follow_an_argmax(impl, device, case, seed):
    """Greedy rows accept while the draft is an argmax of p_i and then emit an argmax, whatever
    the uniforms (two draws); with tied maxima (bfloat16, small vocabularies) either choice is
    the law's (which one is the reference's choice, next test)."""
    kw = case.tensors(device)
    kw["greedy"] = True
    for u in (kw["uniforms"], torch.rand(kw["uniforms"].shape, generator=torch.Generator().manual_seed(seed),
                                         dtype=torch.float64).to(device)):
        one = {**kw, "uniforms": u}
        got = read_result(_call(impl, one), one, case.vocab, "greedy")
        why = law_violation(one, got)
        assert why is None, f"{why}\n  case: {case!r}"


@given(case=batch_cases(max_vocab=6, dtypes=("float32", "bfloat16")), seed=st.integers(0, 2**32 - 1))
@pytest.mark.choice("greedy ties go to the smallest token id (torch.argmax)")
def test_greedy_rows_follow_the_target_argmax(impl, device, case, seed):
    """Greedy rows accept while the draft is argmax p_i (ties to the smallest id: bfloat16 and
    small vocabularies make ties), then emit the argmax -- whatever the uniforms (two draws)."""
    kw = case.tensors(device)
    kw["greedy"] = True
    want = _greedy_expected(kw)
    for u in (kw["uniforms"], torch.rand(kw["uniforms"].shape, generator=torch.Generator().manual_seed(seed),
                                         dtype=torch.float64).to(device)):
        got = read_result(_call(impl, {**kw, "uniforms": u}), kw, case.vocab, "greedy")
        bad = [r for r in range(len(got)) if got[r] != want[r]]
        assert not bad, (f"greedy row {bad[0]} emits {list(got[bad[0]])}; the target's argmax path gives "
                         f"{list(want[bad[0]])}\n  case: {case!r}")


@given(case=batch_cases(max_vocab=12, greedy=False))
def test_one_hot_targets_verify_like_greedy(impl, device, case):
    """Sampled verification of one-hot targets (temperature 0: sampling_probs is one-hot at the
    argmax) emits exactly what greedy verification emits."""
    kw = case.tensors(device)
    p = kw["target_probs"]
    hot = torch.nn.functional.one_hot(p.float().nan_to_num(-1.0).argmax(2), case.vocab).to(p.dtype)
    sampled = read_result(_call(impl, {**kw, "target_probs": hot}), kw, case.vocab, "one-hot targets")
    greedy = read_result(_call(impl, {**kw, "target_probs": hot, "greedy": True}), kw, case.vocab, "greedy")
    assert sampled == greedy, f"one-hot targets: sampled {sampled} != greedy {greedy}\n  case: {case!r}"


# ----------------------------------------------------------------------------- metamorphic
def _row(kw: dict, r: int) -> dict:
    out = {}
    for k, v in kw.items():
        if isinstance(v, torch.Tensor):
            out[k] = v[r:r + 1]
        elif isinstance(v, list):
            out[k] = v[r:r + 1]
        else:
            out[k] = v
    return out


@given(case=batch_cases(max_batch=4))
def test_row_independent_of_batch(impl, device, case):
    """A row's result is the same verified alone (with its own uniforms row) as in the batch."""
    kw = case.tensors(device)
    batched = read_result(_call(impl, kw), kw, case.vocab, "batched")
    for r in range(case.batch):
        one = _row(kw, r)
        alone = read_result(_call(impl, one), one, case.vocab, f"row {r} alone")
        assert alone[0] == batched[r], f"row {r}: alone {list(alone[0])}, in the batch {list(batched[r])}\n  case: {case!r}"


@given(case=batch_cases(greedy=False), extra=st.integers(1, 3))
def test_padding_width_does_not_matter(impl, device, case, extra):
    """Padding every row with ``extra`` more positions (NaN probabilities, token -1; the draw
    uniform stays in the last column) changes nothing."""
    kw = case.tensors(device)
    b, g = kw["draft_tokens"].shape
    wide = dict(kw)
    nan = float("nan")
    tp = kw["target_probs"]
    wide["target_probs"] = torch.cat([tp, torch.full((b, extra, case.vocab), nan, dtype=tp.dtype, device=device)], 1)
    if kw["draft_probs"] is not None:
        dp = kw["draft_probs"]
        wide["draft_probs"] = torch.cat([dp, torch.full((b, extra, case.vocab), nan, dtype=dp.dtype, device=device)], 1)
    wide["draft_tokens"] = torch.cat([kw["draft_tokens"], torch.full((b, extra), -1, dtype=torch.int64, device=device)], 1)
    u = kw["uniforms"]
    wide["uniforms"] = torch.cat([u[:, :g], torch.full((b, extra), 0.5, dtype=u.dtype, device=device), u[:, g:]], 1)
    wide["draft_lens"] = kw["draft_lens"] or [g] * b
    got = read_result(_call(impl, wide), wide, case.vocab, "padded wider")
    want = read_result(_call(impl, kw), kw, case.vocab, "as given")
    assert got == want, f"padding by {extra}: {got} != {want}\n  case: {case!r}"


@given(case=batch_cases(greedy=False))
def test_no_draft_probs_means_one_hot(impl, device, case):
    """draft_probs=None is q one-hot on the draft tokens: the same result as passing that one-hot."""
    kw = case.tensors(device)
    x = kw["draft_tokens"].clamp(min=0)
    hot = torch.nn.functional.one_hot(x, case.vocab).to(kw["target_probs"].dtype)
    a = read_result(_call(impl, {**kw, "draft_probs": None}), kw, case.vocab, "draft_probs=None")
    b = read_result(_call(impl, {**kw, "draft_probs": hot}), kw, case.vocab, "one-hot draft_probs")
    assert a == b, f"draft_probs=None gives {a}, one-hot draft_probs {b}\n  case: {case!r}"


# ----------------------------------------------------------------------------- the seeded draw
SEEDED = {
    "mixed rows": BatchCase(64, 4, 50, "float32", 21, noise=0.3, lens=tuple([4, 2, 0, 3] * 16),
                            greedy=tuple([False, False, True, False] * 4 + [False] * 48)),
    "no draft probs": BatchCase(16, 3, 9, "bfloat16", 22, no_q=True),
}


def _assert_seeded_draw_pinned(impl, kw, vocab, seed, device):
    verify = impl.get("verify")
    b, g = kw["draft_tokens"].shape
    base = {k: v for k, v in kw.items() if k != "uniforms"}
    gen = torch.Generator(device=device).manual_seed(seed)
    got = read_result(verify(**base, generator=gen), kw, vocab, "verify(generator=g)")
    g2 = torch.Generator(device=device).manual_seed(seed)
    u = torch.rand(b, g + 1, generator=g2, dtype=torch.float64, device=device)
    want = read_result(verify(**base, uniforms=u), kw, vocab, "verify(uniforms=...)")
    assert got == want, (
        f"verify(generator=g) emitted {got[:6]}..., verify(uniforms=<the contract's draw from the same seed>) "
        f"{want[:6]}...: the generator must be consumed as torch.rand(batch, γ + 1, dtype=float64)")
    assert torch.equal(gen.get_state(), g2.get_state()), (
        "verify(generator=g) left g in another state than one torch.rand(batch, γ + 1, dtype=float64) does")


@pytest.mark.parametrize("name", list(SEEDED))
@pytest.mark.choice("the generator is consumed as one torch.rand(batch, γ + 1, float64)")
def test_seeded_draw_is_the_contracts_draw(impl, device, name):
    """verify(generator=g) == verify(uniforms=torch.rand(batch, γ + 1, dtype=float64, generator=<same
    seed>)), and g ends in the state that draw leaves (float32 uniforms, another layout, or a
    draw that skips greedy rows all differ)."""
    case = SEEDED[name]
    _assert_seeded_draw_pinned(impl, case.tensors(device), case.vocab, case.seed, device)


@settings(max_examples=_scaled(10))
@given(case=batch_cases())
@pytest.mark.choice("the generator is consumed as one torch.rand(batch, γ + 1, float64)")
def test_seeded_draw_is_the_contracts_draw_generated(impl, device, case):
    """The same pin on generated batches."""
    _assert_seeded_draw_pinned(impl, case.tensors(device), case.vocab, case.seed, device)


def test_uniforms_win_and_no_other_randomness_is_used(impl, device):
    """With both ``uniforms`` and ``generator``, the uniforms are used and the generator is left
    untouched; with a generator, only it is consumed: the global RNG (torch.manual_seed's stream,
    on the CPU and on the probabilities' device) is never touched."""
    case = SEEDED["mixed rows"]
    kw = case.tensors(device)
    verify = impl.get("verify")
    base = {k: v for k, v in kw.items() if k not in ("uniforms", "generator")}
    u = torch.rand(*kw["draft_tokens"].shape[:1], kw["draft_tokens"].shape[1] + 1,
                   generator=generator(3), dtype=torch.float64).to(device)
    gen = torch.Generator(device=device).manual_seed(11)
    before = gen.get_state().clone()
    both = read_result(verify(**base, uniforms=u, generator=gen), kw, case.vocab, "verify(uniforms, generator)")
    assert torch.equal(gen.get_state(), before), "verify(uniforms=u, generator=g) drew from g"
    assert both == read_result(verify(**base, uniforms=u), kw, case.vocab, "verify(uniforms)"), (
        "verify(uniforms=u, generator=g) did not emit what verify(uniforms=u) emits")
    cpu_state = torch.get_rng_state()
    cuda_state = torch.cuda.get_rng_state() if device != "cpu" else None
    verify(**base, generator=torch.Generator(device=device).manual_seed(12))
    assert torch.equal(torch.get_rng_state(), cpu_state), "verify(generator=g) consumed the global CPU RNG"
    if cuda_state is not None:
        assert torch.equal(torch.cuda.get_rng_state(), cuda_state), "verify consumed the global CUDA RNG"


def test_greedy_rows_still_validate_draft_probs(impl, device):
    """Greedy rows do not use draft_probs, but they are validated like any row's (ValueError naming
    ``draft_probs``): a NaN in an active draft position of a greedy row is rejected."""
    kw = _valid(device)
    bad = Bad("draft_probs NaN on a greedy row", set_entry("draft_probs", (0, 1, 3), math.nan), ValueError,
              ("draft_probs",))
    assert_rejects(impl.get("verify"), {**kw, "greedy": True, "uniforms": torch.full(
        (2, 3), 0.5, dtype=torch.float64, device=device)}, bad)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_sum_tolerance_edge(impl, device, dtype):
    """The documented SUM_TOLERANCE[dtype] is the edge: a target position whose total is off 1 by
    half the tolerance is accepted, one off by twice the tolerance is rejected (ValueError naming
    ``target_probs`` and its [row, position])."""
    d = DTYPES[dtype]
    tol = SUM_TOLERANCE[d]
    verify = impl.get("verify")
    u = torch.full((1, 2), 0.5, dtype=torch.float64, device=device)

    def call(excess: float):
        # 64 equal entries (exact in every dtype here) plus the excess on entry 0
        p = torch.full((1, 2, 64), 1 / 64, dtype=torch.float64)
        p[0, 1, 0] += excess
        p = p.to(d)
        got = float(p[0, 1].double().sum()) - 1
        return got, lambda: verify(p.to(device), None, torch.tensor([[3]], device=device), uniforms=u)

    off, run = call(tol / 2)
    assert abs(off) <= tol, f"test setup: total off by {off}"
    run()  # accepted
    off, run = call(2 * tol)
    assert abs(off) > tol, f"test setup: total off by only {off}"
    with pytest.raises(ValueError, match=r"\btarget_probs\b"):
        run()


def test_rejects_vocab_zero(impl, device):
    """A vocabulary of 0 tokens has no distribution (ValueError naming ``target_probs``)."""
    kw = dict(target_probs=torch.empty(1, 2, 0, device=device), draft_probs=torch.empty(1, 1, 0, device=device),
              draft_tokens=torch.zeros(1, 1, dtype=torch.int64, device=device),
              uniforms=torch.full((1, 2), 0.5, dtype=torch.float64, device=device))
    with pytest.raises(ValueError, match=r"\btarget_probs\b|\bvocab"):
        impl.get("verify")(**kw)


# ----------------------------------------------------------------------------- empty, state
@pytest.mark.parametrize("gamma", [0, 3])
def test_empty_batch(impl, device, gamma):
    """batch 0 is legal: tokens (0, γ + 1), num_accepted (0,), both int64; nothing is drawn."""
    verify = impl.get("verify")
    gen = torch.Generator(device=device).manual_seed(3)
    before = gen.get_state()
    kw = dict(target_probs=torch.zeros(0, gamma + 1, 5, device=device), draft_probs=torch.zeros(0, gamma, 5, device=device),
              draft_tokens=torch.zeros(0, gamma, dtype=torch.int64, device=device))
    for extra in (dict(generator=gen), dict(uniforms=torch.zeros(0, gamma + 1, dtype=torch.float64, device=device))):
        tokens, accepted = verify(**kw, **extra)
        assert tokens.shape == (0, gamma + 1) and tokens.dtype == torch.int64, f"tokens {tuple(tokens.shape)} {tokens.dtype}"
        assert accepted.shape == (0,) and accepted.dtype == torch.int64, f"num_accepted {tuple(accepted.shape)} {accepted.dtype}"
    assert torch.equal(gen.get_state(), before), "an empty batch drew random numbers"


@given(case=batch_cases(max_batch=3))
def test_inputs_not_mutated_and_fresh_results(impl, device, case):
    """No input tensor is modified; a second call on other inputs gets its own answer."""
    kw = case.tensors(device)
    copies = {k: v.clone() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    first = read_result(_call(impl, kw), kw, case.vocab, "first call")
    for k, v in copies.items():
        assert torch.equal(v.nan_to_num(7.0), kw[k].nan_to_num(7.0)), f"verify modified its argument {k}"
    other = case.with_(seed=case.seed + 1).tensors(device)
    second = read_result(_call(impl, other), other, case.vocab, "second call")
    again = read_result(_call(impl, kw), kw, case.vocab, "first call again")
    assert again == first, "the same inputs gave another result after a call on other inputs"
    assert second == read_result(_call(impl, other), other, case.vocab, "second call again")


# ----------------------------------------------------------------------------- bad input
def _valid(device, generator=None):
    """target (2, 3, 5), draft (2, 2, 5), drafts (2, 2), float32."""
    g = torch.Generator().manual_seed(5)
    p = torch.softmax(torch.randn(2, 3, 5, generator=g), dim=2)
    q = torch.softmax(torch.randn(2, 2, 5, generator=g), dim=2)
    kw = dict(target_probs=p.to(device), draft_probs=q.to(device),
              draft_tokens=torch.tensor([[1, 4], [0, 2]], device=device))
    if generator is not None:
        kw["generator"] = generator
    return kw


def _with(name, make):
    return lambda kw: {**kw, name: make(kw[name])}


def _set(t, where, values):
    t[where] = torch.tensor(values, dtype=t.dtype)
    return t


def _uniforms(values):
    return lambda kw: {**kw, "uniforms": torch.tensor(values, device=kw["target_probs"].device)}


BAD = [
    Bad("target_probs a list", _with("target_probs", lambda t: t.tolist()), TypeError, ("target_probs",)),
    Bad("target_probs rank 2", _with("target_probs", lambda t: t[:, 0].clone()), ValueError, ("target_probs",)),
    Bad("target_probs int", _with("target_probs", lambda t: t.long()), TypeError, ("target_probs",)),
    Bad("target_probs no positions", lambda kw: {**kw, "target_probs": kw["target_probs"][:, :0].clone()},
        ValueError, ("target_probs",)),
    Bad("target_probs negative", set_entry("target_probs", (1, 2, 3), -0.25), ValueError, ("target_probs", "negative")),
    # a negative entry is rejected however the rest compensates it (the sum still 1) and however
    # small it is (a float64 -1e-300, which float32 would round to -0.0)
    Bad("target_probs negative, summing to 1", set_entry("target_probs", (1, 2), torch.tensor([-.25, 1.25, 0, 0, 0])),
        ValueError, ("target_probs", "negative")),
    Bad("target_probs float64, a tiny negative entry",
        _with("target_probs", lambda t: _set(t.double(), (1, 2), [.5, .5, 0, -1e-300, 0])), ValueError,
        ("target_probs", "negative")),
    Bad("target_probs NaN", set_entry("target_probs", (0, 1, 0), math.nan), ValueError, ("target_probs", "NaN")),
    Bad("target_probs +inf", set_entry("target_probs", (0, 0, 0), math.inf), ValueError, ("target_probs",)),
    Bad("target_probs sums to 1/2", _with("target_probs", lambda t: t / 2), ValueError, ("target_probs", "sums")),
    Bad("target_probs are logits", _with("target_probs", lambda t: torch.log(t)), ValueError, ("target_probs",)),
    Bad("target_probs bonus position sums to 2", set_entry("target_probs", (1, 2), 0.4), ValueError, ("target_probs",)),
    Bad("draft_probs negative", set_entry("draft_probs", (0, 1, 2), -0.5), ValueError, ("draft_probs", "negative")),
    Bad("draft_probs negative, summing to 1", set_entry("draft_probs", (0, 1), torch.tensor([.5, -.5, 1, 0, 0])),
        ValueError, ("draft_probs", "negative")),
    Bad("draft_probs float64, a tiny negative entry",
        _with("draft_probs", lambda t: _set(t.double(), (0, 0), [0, 1, -1e-300, 0, 0])), ValueError,
        ("draft_probs", "negative")),
    Bad("draft_probs NaN", set_entry("draft_probs", (1, 0, 4), math.nan), ValueError, ("draft_probs",)),
    Bad("draft_probs sums to 2", _with("draft_probs", lambda t: t * 2), ValueError, ("draft_probs", "sums")),
    Bad("draft_probs γ mismatch", _with("draft_probs", lambda t: torch.cat([t, t[:, :1]], 1)), ValueError, ("draft_probs",)),
    Bad("draft_probs vocab mismatch", _with("draft_probs", lambda t: t[:, :, :4].clone()), ValueError, ("draft_probs",)),
    Bad("draft_probs int", _with("draft_probs", lambda t: t.long()), TypeError, ("draft_probs",)),
    Bad("draft_probs rank 2", _with("draft_probs", lambda t: t[:, 0].clone()), ValueError, ("draft_probs",)),
    Bad("draft_probs a list", _with("draft_probs", lambda t: t.tolist()), TypeError, ("draft_probs",)),
    Bad("draft_tokens float", _with("draft_tokens", lambda t: t.float()), TypeError, ("draft_tokens",)),
    Bad("draft_tokens bool", _with("draft_tokens", lambda t: t > 0), TypeError, ("draft_tokens",)),
    Bad("draft_tokens a list", _with("draft_tokens", lambda t: t.tolist()), TypeError, ("draft_tokens",)),
    Bad("draft_tokens γ mismatch", _with("draft_tokens", lambda t: torch.cat([t, t[:, :1]], 1)), ValueError,
        ("draft_tokens",)),
    Bad("draft_tokens batch mismatch", _with("draft_tokens", lambda t: t[:1].clone()), ValueError, ("draft_tokens",)),
    Bad("draft_tokens = vocab", set_entry("draft_tokens", (1, 1), 5), ValueError, ("draft_tokens",)),
    Bad("draft_tokens negative", set_entry("draft_tokens", (0, 0), -1), ValueError, ("draft_tokens",)),
    Bad("draft_lens > γ", dict(draft_lens=[2, 3]), ValueError, ("draft_lens", "row 1")),
    Bad("draft_lens > γ after a row of 0", dict(draft_lens=[0, 3]), ValueError, ("draft_lens", "row 1")),
    Bad("draft_lens negative", dict(draft_lens=[-1, 2]), ValueError, ("draft_lens",)),
    Bad("draft_lens one per row", dict(draft_lens=[2]), ValueError, ("draft_lens",)),
    Bad("draft_lens float", dict(draft_lens=[2.0, 1.0]), TypeError, ("draft_lens",)),
    Bad("draft_lens bool", dict(draft_lens=[True, 1]), TypeError, ("draft_lens",)),
    Bad("draft_lens float tensor", dict(draft_lens=torch.tensor([2.0, 1.0])), TypeError, ("draft_lens",)),
    Bad("draft_lens an int", dict(draft_lens=2), TypeError, ("draft_lens",)),
    Bad("draft_lens tensor > γ", dict(draft_lens=torch.tensor([2, 3])), ValueError, ("draft_lens",)),
    Bad("draft_lens (batch, 1) tensor", dict(draft_lens=torch.tensor([[2], [1]])), ValueError, ("draft_lens",)),
    Bad("greedy (batch, 1) tensor", dict(greedy=torch.tensor([[True], [False]])), ValueError, ("greedy",)),
    Bad("greedy an int", dict(greedy=1), TypeError, ("greedy",)),
    Bad("greedy one per row", dict(greedy=[True, False, True]), ValueError, ("greedy",)),
    Bad("greedy int tensor", dict(greedy=torch.tensor([1, 0])), TypeError, ("greedy",)),
    Bad("greedy strings", dict(greedy=["yes", "no"]), TypeError, ("greedy",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, device, bad):
    """A clear ValueError/TypeError naming the argument (and the [row, position] for values); the
    inputs and the generator's state are unchanged (nothing is drawn by a rejected call)."""
    gen = torch.Generator(device=device).manual_seed(7)
    exc = assert_rejects(impl.get("verify"), _valid(device, gen), bad, state=lambda: gen.get_state().tolist())
    _starts_with_the_name(exc, bad)


def _starts_with_the_name(exc, bad):
    """The module doc: a message STARTS with the argument's name (a message about another argument
    that merely mentions this one, e.g. "draft_tokens must have shape ... to match target_probs",
    blames the wrong argument)."""
    assert str(exc).startswith(bad.words[0]), (
        f"bad input {bad.id!r}: the message should start with {bad.words[0]!r}; it says: {exc}")


BAD_RANDOMNESS = [
    Bad("no generator, no uniforms", {}, ValueError, ("generator",)),
    Bad("generator an int", dict(generator=1234), TypeError, ("generator",)),
    Bad("generator a string", dict(generator="seed 1"), TypeError, ("generator",)),
    Bad("uniforms = 1", _uniforms([[0.1, 0.2, 1.0], [0.1, 0.2, 0.3]]), ValueError, ("uniforms",)),
    Bad("uniforms < 0", _uniforms([[0.1, -0.2, 0.5], [0.1, 0.2, 0.3]]), ValueError, ("uniforms",)),
    Bad("uniforms NaN", _uniforms([[0.1, 0.2, 0.5], [math.nan, 0.2, 0.3]]), ValueError, ("uniforms",)),
    Bad("uniforms +inf", _uniforms([[0.1, 0.2, math.inf], [0.1, 0.2, 0.3]]), ValueError, ("uniforms",)),
    Bad("uniforms without the draw column", _uniforms([[0.1, 0.2], [0.1, 0.2]]), ValueError, ("uniforms",)),
    Bad("uniforms one per row", _uniforms([0.1, 0.2]), ValueError, ("uniforms",)),
    Bad("uniforms int", _uniforms([[0, 0, 0], [0, 0, 0]]), TypeError, ("uniforms",)),
    Bad("uniforms a list", dict(uniforms=[[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]]), TypeError, ("uniforms",)),
]


# Another device, reachable on a CPU-only machine: "meta" tensors (shapes, no data). Not in the
# BAD table: its no-change check reads every argument's data, which a meta tensor has none of
# (as in spec_tests/paged_attention: the rows are "moved", not "bad").
ANOTHER_DEVICE = [
    Bad("draft_tokens on another device", _with("draft_tokens", lambda t: t.to("meta")), ValueError,
        ("draft_tokens",)),
    Bad("draft_probs on another device", _with("draft_probs", lambda t: t.to("meta")), ValueError,
        ("draft_probs",)),
    # every tensor moved, the generator left behind: it is on another device than target_probs
    Bad("generator on another device", lambda kw: {**kw, **{k: kw[k].to("meta") for k in
                                                            ("target_probs", "draft_probs", "draft_tokens")}},
        ValueError, ("generator",)),
]


@pytest.mark.parametrize("moved", ANOTHER_DEVICE, ids=[b.id for b in ANOTHER_DEVICE])
def test_rejects_arguments_on_another_device(impl, device, moved):
    """draft_tokens or draft_probs on another device than target_probs, or a generator on another
    device than target_probs (every tensor moved), raises ValueError naming it (the module doc),
    before anything is read: the other device is "meta", whose tensors hold no data, so an
    implementation that does not check fails otherwise (or reads nothing)."""
    impl.get("verify")(**_valid(device, torch.Generator(device=device).manual_seed(7)))  # a stub skips here
    kwargs = moved.apply(_valid(device, torch.Generator(device=device).manual_seed(7)))
    assert_rejects_without_data(impl.get("verify"), kwargs, moved, skip_is_failure=True)


@bad_cases(BAD_RANDOMNESS)
def test_rejects_bad_randomness(impl, device, bad):
    """verify needs a torch.Generator on the probabilities' device or uniforms of shape
    (batch, γ + 1) in [0, 1) (TypeError for the wrong kind, ValueError for a wrong value)."""
    _starts_with_the_name(assert_rejects(impl.get("verify"), _valid(device), bad), bad)


@pytest.mark.gpu
def test_rejects_generator_on_another_device(impl, device):
    """A CPU generator for CUDA probabilities is rejected (ValueError naming ``generator``)."""
    gen = torch.Generator(device="cpu").manual_seed(1)
    bad = Bad("generator on the CPU", dict(generator=gen), ValueError, ("generator",))
    assert_rejects(impl.get("verify"), _valid(device), bad, state=lambda: gen.get_state().tolist())
