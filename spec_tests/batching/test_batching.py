"""Batching (course 04.01-04.03): a request's result does not depend on its batch.

forward_batch: the logits of a ragged batch (prefills and decodes of different lengths, each
against its own cache) equal each request run alone through ``model(tokens, cache)``: within the
tolerance rule (oracle: the float64 model, uncached, on the same tokens; reference: the request
alone in the same low precision), and bit for bit under the reference's batch-invariant mode.

Runs: every request's tokens under continuous batching (arriving and finishing at arbitrary
steps) and under static batching (left-padded prompts) equal its tokens run alone. Greedy tokens
follow the generate concept's near-tie rule: every chosen token's float64 logit (teacher-forced on
the implementation's own tokens) is within 2 x the tolerance bound of the float64 maximum, and
where the batched and the alone runs first pick different tokens, the float64 logits of the two
picks lie within 2 x the bound of each other (a genuine near-tie). Under the batch-invariant mode
the tokens (greedy and seeded sampling) and logits are bit-identical to the alone run's.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import event, example, given, settings, strategies as st

from conformance.tolerance import assert_close_to_oracle, rounding_floor
from spec_tests.batching import under_mode
from spec_tests.batching.oracles import spans
from spec_tests.batching.strategies import BatchCase, ModelShape, batch_cases, ragged_cases


def _scaled(n: int) -> int:
    """``n`` examples under the dev profile (25), scaled with the loaded profile (ci, thorough)."""
    return max(1, round(n * settings().max_examples / 25))


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shape, dtype and bits."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    ia = a.contiguous().view(torch.int16 if a.element_size() == 2 else torch.int32 if a.element_size() == 4 else torch.int64)
    ib = b.contiguous().view(ia.dtype)
    return torch.equal(ia, ib)


def _reference_level(oracle: torch.Tensor, *candidates: torch.Tensor) -> torch.Tensor:
    """Of several reference computations of the same logits (the reference's batched call, the
    request alone through the model), the one farthest from the float64 oracle: the tolerance
    rule's "reference error". A batched and an alone float32 computation sum in different orders,
    and on a few dozen logits either may be the lucky one (CI once saw the reference's own batched
    logits at 4.5x its alone error, so the alone error alone made the reference fail its own spec)."""
    errors = [float((c.double() - oracle).abs().nan_to_num(nan=float("inf")).max()) if c.numel() else 0.0
              for c in candidates]
    return candidates[max(range(len(candidates)), key=errors.__getitem__)]


def _oracle_logits(shape, full: torch.Tensor) -> torch.Tensor:
    """The float64 model's logits on ``full`` (1-d), uncached: (len, vocab)."""
    with torch.no_grad():
        return under_mode.model(shape, torch.float64)(full[None])[0]


# --- forward_batch -------------------------------------------------------------------------------
SHAPE = ModelShape(vocab_size=40, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=64, seed=3)


@example(case=(SHAPE, ((3, 1, 7), (0, 4, 8), (5, 2, 9)))).via(
    "mutant:rope_positions_restart mutant:attention_across_requests")
@example(case=(ModelShape(dtype="bfloat16", seed=1), ((0, 5, 1), (2, 1, 2)))).via("mutant:attention_across_requests")
@given(case=ragged_cases(dtypes=("float32", "bfloat16")))
def test_forward_batch_matches_alone(impl, reference, case):
    """Two rounds of forward_batch over a ragged batch (cached prefixes 0..6, 1..6 new tokens, then
    one more each): every request's logits are those of the float64 model on its tokens within the
    tolerance rule (the request alone in the same dtype is the reference), and each cache grew by
    exactly the request's new tokens."""
    shape, rows = case
    got = impl.call_in_process(under_mode.ragged, shape, rows, False)
    want = reference.call_in_process(under_mode.ragged, shape, rows, False)
    for i, (prefix, new, _) in enumerate(rows):
        assert got["lens1"][i] == prefix + new and got["lens2"][i] == prefix + new + 1, (
            f"request {i}: cache seq_len {got['lens1'][i]}, {got['lens2'][i]} after the two rounds, "
            f"expected {prefix + new}, {prefix + new + 1}")
        oracle = _oracle_logits(shape, got["tokens"][i])
        inputs = dict(case=case, request=i)
        for r, o in (("1", oracle[prefix:prefix + new]), ("2", oracle[prefix + new:])):
            ref = _reference_level(o, want["got" + r][i], got["alone" + r][i])
            assert_close_to_oracle(got["got" + r][i], ref, o, name=f"forward_batch round {r}, request {i}",
                                   inputs=inputs)


@example(case=(SHAPE, ((3, 1, 7), (0, 4, 8), (5, 2, 9)))).via(
    "mutant:rope_positions_restart mutant:attention_across_requests")
@given(case=ragged_cases(dtypes=("float32", "bfloat16")))
@settings(max_examples=_scaled(12))
def test_forward_batch_bitwise_under_invariant_mode(impl, case):
    """Under the batch-invariant mode, forward_batch's logits of every request have the bits of
    ``model(tokens, cache)`` of that request alone, in both rounds."""
    shape, rows = case
    got = impl.call_in_process(under_mode.ragged, shape, rows, True)
    for i in range(len(rows)):
        for r in ("1", "2"):
            assert _bits_equal(got["got" + r][i], got["alone" + r][i]), (
                f"request {i}, round {r}: batched logits differ from alone under invariant_mode() by up to "
                f"{float((got['got' + r][i].double() - got['alone' + r][i].double()).abs().max()):.3e}\n  case: {case!r}")


@example(case=(ModelShape(vocab_size=24, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=32, max_seq_len=24,
                          dtype="float32", seed=2_147_483_649), ((5, 1, 128), (6, 4, 109544)))).via(
    "boundary: a CI regression, the reference's own batched logits 4.5x farther from float64 than its alone logits")
@given(case=ragged_cases())
@settings(max_examples=_scaled(8))
def test_forward_batch_takes_any_cache_object(impl, reference, case):
    """forward_batch works with any cache of KVCache's interface (append + seq_len), not only a
    KVCache: its logits equal those it gives with KVCaches within the tolerance rule."""
    shape, rows = case
    got = impl.call_in_process(under_mode.ragged_list_cache, shape, rows)
    want = reference.call_in_process(under_mode.ragged, shape, rows, False)
    for i, (prefix, new, _) in enumerate(rows):
        assert got["lens"][i] == prefix + new + 1
        oracle = _oracle_logits(shape, want["tokens"][i])
        for r, o in (("1", oracle[prefix:prefix + new]), ("2", oracle[prefix + new:])):
            ref = _reference_level(o, want["got" + r][i], want["alone" + r][i])
            assert_close_to_oracle(got["got" + r][i], ref, o, name=f"forward_batch with a list cache, round {r}, "
                                   f"request {i}", inputs=dict(case=case))


def test_forward_batch_of_nothing_is_empty(impl):
    """An empty batch returns an empty list."""
    assert list(impl.get("forward_batch")(SHAPE.model(), [], [])) == []


# --- runs: tolerance rule -------------------------------------------------------------------------
def _check_run_tokens(case, got, what, want=None):
    """The tolerance rule and the near-tie rule for every (greedy) request of a run. The reference
    level is the model's one-shot prefill of the request's tokens, or the reference's own run
    (``want``: its tokens and logits) where that run chose the same tokens, whichever is worse."""
    m = under_mode.model(case.model)
    for i, (prompt, n, *_rest) in enumerate(case.requests):
        toks = got["tokens"][i]
        assert len(toks) == n, f"{what}: request {i} produced {len(toks)} tokens, expected {n}"
        full = torch.tensor(list(prompt) + toks[:-1])
        oracle = _oracle_logits(case.model, full)[len(prompt) - 1:]
        with torch.no_grad():
            ref = m(full[None])[0][len(prompt) - 1:]
        if want is not None and list(want["tokens"][i]) == list(toks):
            ref = _reference_level(oracle, ref, want["logits"][i])
        inputs = dict(case=case, request=i, tokens=toks)
        assert_close_to_oracle(got["logits"][i], ref, oracle, name=f"{what} logits, request {i}", inputs=inputs)
        bound = 2.0 * float((ref.double() - oracle).abs().max()) + rounding_floor(oracle, ref.dtype)
        chosen = oracle.gather(-1, torch.tensor(toks)[:, None])[:, 0]
        gap = oracle.max(dim=-1).values - chosen
        assert float(gap.max()) <= 2 * bound, (
            f"{what}: request {i}'s token at step {int(gap.argmax())} is not an argmax: its float64 logit is "
            f"{float(gap.max()):.3e} below the max (allowed {2 * bound:.3e})\n  case: {case!r}")
        alone = got["alone_tokens"][i]
        diff = [t for t, (a, b) in enumerate(zip(toks, alone)) if a != b]
        if diff:
            t = diff[0]
            o = oracle[t]
            assert abs(float(o[toks[t]] - o[alone[t]])) <= 2 * bound, (
                f"{what}: request {i} picks {toks[t]} at step {t} batched but {alone[t]} alone, where the "
                f"float64 logits differ by {abs(float(o[toks[t]] - o[alone[t]])):.3e} > {2 * bound:.3e}: "
                f"not a near-tie\n  case: {case!r}")
            event("genuine near-tie: batched and alone greedy tokens differ")


RAGGED_RUN = BatchCase(SHAPE, (((1, 2, 3), 4, 0, 0.0, 0), ((5,), 2, 1, 0.0, 0), ((7, 8, 9, 10, 11), 5, 1, 0.0, 0),
                               ((3, 3), 3, 2, 0.0, 0)), 2)


@example(case=RAGGED_RUN).via("mutant:rope_positions_restart mutant:attention_across_requests")
@given(case=batch_cases(dtypes=("float32", "bfloat16")))
@settings(max_examples=_scaled(15))
def test_continuous_batching_matches_alone(impl, reference, case):
    """run_continuous: every request's logits are the float64 model's on its prompt and its own
    tokens (tolerance rule), its greedy tokens are argmaxes and equal its tokens run alone except at
    a genuine near-tie; run_alone's too."""
    got = impl.call_in_process(under_mode.runs, case, "continuous", False)
    want = reference.call_in_process(under_mode.runs, case, "continuous", False)
    _check_run_tokens(case, got, "run_continuous", want)
    alone = dict(tokens=got["alone_tokens"], logits=got["alone_logits"], alone_tokens=got["alone_tokens"])
    _check_run_tokens(case, alone, "run_alone", dict(tokens=want["alone_tokens"], logits=want["alone_logits"]))


STATIC_RUN = BatchCase(SHAPE, (((1, 2, 3), 4, 0, 0.0, 0), ((5,), 2, 0, 0.0, 0), ((7, 8, 9, 10, 11), 1, 0, 0.0, 0)), 3)


@example(case=STATIC_RUN).via("mutant:padding_attended")
@given(case=batch_cases(dtypes=("float32", "bfloat16")))
@settings(max_examples=_scaled(15))
def test_static_batching_matches_alone(impl, reference, case):
    """run_static (left-padded prompts, finished requests holding their slots): every request's
    logits and greedy tokens follow the same rules; padding never leaks into a real token."""
    got = impl.call_in_process(under_mode.runs, case, "static", False)
    _check_run_tokens(case, got, "run_static", reference.call_in_process(under_mode.runs, case, "static", False))


# --- runs: bit for bit under the batch-invariant mode ---------------------------------------------
@example(case=BatchCase(SHAPE, RAGGED_RUN.requests[:2] + (((7, 8, 9, 10, 11), 5, 1, 1.5, 4), ((3, 3), 3, 2, 0.7, 5)),
                        2)).via("mutant:rope_positions_restart mutant:attention_across_requests")
@example(case=BatchCase(SHAPE, STATIC_RUN.requests, 3)).via("mutant:padding_attended mutant:padded_rope_positions")
@given(case=batch_cases(sampled=True))
@settings(max_examples=_scaled(6))
def test_batched_runs_bitwise_under_invariant_mode(impl, case):
    """Under the batch-invariant mode, every request's tokens (greedy and seeded sampling) and
    logits under continuous and static batching have the bits of its run alone."""
    for kind in ("continuous", "static"):
        got = impl.call_in_process(under_mode.runs, case, kind, True)
        for i in range(len(case.requests)):
            assert got["tokens"][i] == got["alone_tokens"][i], (
                f"{kind}: request {i} tokens {got['tokens'][i]} batched, {got['alone_tokens'][i]} alone, under "
                f"invariant_mode()\n  case: {case!r}")
            assert _bits_equal(got["logits"][i], got["alone_logits"][i]), (
                f"{kind}: request {i}'s logits differ from alone under invariant_mode()\n  case: {case!r}")


# --- runs: the timeline --------------------------------------------------------------------------
@given(case=batch_cases(max_new=3))
@settings(max_examples=_scaled(10))
def test_run_timeline_is_the_schedule(impl, case):
    """A run's timeline holds, step for step, the requests of its schedule (schedule_continuous /
    schedule_static of the arrivals and lengths); start[i] and finish[i] are request i's first step
    and the step after its last."""
    arrivals = [r[2] for r in case.requests]
    lengths = [r[1] for r in case.requests]
    for kind, sched in (("continuous", "schedule_continuous"), ("static", "schedule_static")):
        got = impl.call_in_process(under_mode.runs, case, kind, False)
        want = impl.get(sched)(arrivals, lengths, case.limit)
        assert [sorted(s) for s in got["timeline"]] == [sorted(s) for s in want], (
            f"{kind}: the run's timeline {got['timeline']} is not its schedule {list(want)}")
        steps = spans(got["timeline"], len(case.requests))
        assert got["start"] == [s[0] for s in steps], f"{kind}: start {got['start']} vs timeline {got['timeline']}"
        assert got["finish"] == [s[-1] + 1 for s in steps], f"{kind}: finish {got['finish']} vs timeline {got['timeline']}"


@pytest.mark.choice("FCFS ties by list index; timeline steps in admission order; seeded sampling by "
                    "torch.multinomial over float64 softmax(logits / T), one generator per request")
@given(case=batch_cases(sampled=True, max_new=3))
@settings(max_examples=_scaled(5))
def test_timeline_and_draws_are_the_references(impl, reference, case):
    """The timeline (order within a step included) and, under the mode, every token (sampled ones
    included) are the reference's."""
    for kind in ("continuous", "static"):
        got = impl.call_in_process(under_mode.runs, case, kind, True)
        ref = under_mode.runs(reference, case, kind, True)
        assert got["timeline"] == ref["timeline"], f"{kind}: timeline {got['timeline']} vs reference {ref['timeline']}"
        assert got["tokens"] == ref["tokens"], f"{kind}: tokens {got['tokens']} vs reference {ref['tokens']}"
