"""Plan once, run many (the optional ``VerifyPlan``, FlashInfer's plan()/run()).

``plan`` reads the batch's host-side metadata (the tensors' shapes, dtypes and devices, the values
of ``draft_lens`` and ``greedy``) and validates it; ``run`` reads the probabilities, tokens and
uniforms on the device only, so an engine captures it in a CUDA graph and replays it after
writing the next step's values into the same tensors. The properties: plan + run is ``verify``
(the law on generated batches; token for token the reference's for the same uniforms, the pinned
corner cases, the exact enumeration, the seeded draw); one plan serves every run whose values
change in place (planned on empty buffers; the planned ``draft_lens``/``greedy`` stay in force
whatever the caller's tensors hold since); a re-plan serves another batch; a run with tensors
unlike the plan's, or without usable randomness, is refused naming the argument, and a broken
promise (invalid values) is never an error; a plan rejects every metadata error ``verify``
rejects, and a plan that raises leaves the previous one in force; on a GPU a captured run
replays correctly after in-place updates.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import example, given, settings

from conformance.badinput import Bad, assert_rejects, assert_rejects_without_data, bad_cases
from spec_tests.speculative.oracles import law_violation, read_result
from spec_tests.speculative.strategies import BatchCase, TreeCase, batch_cases, tree_cases
from spec_tests.speculative.test_lossless import _assert_lossless
from spec_tests.speculative.test_verify import (BAD, PINNED, _assert_seeded_draw_pinned, _same, _scaled,
                                                _starts_with_the_name, _uniforms, _valid, _with)

PLAN_ARGS = ("draft_lens", "greedy")
RUN_ARGS = ("uniforms", "generator")


def _planned(impl):
    """verify's signature, computed as one plan and one run of a fresh plan object."""
    def verify(target_probs, draft_probs, draft_tokens, *, draft_lens=None, greedy=None, uniforms=None,
               generator=None):
        plan = impl.get("VerifyPlan")()
        plan.plan(target_probs, draft_probs, draft_tokens, draft_lens=draft_lens, greedy=greedy)
        return plan.run(target_probs, draft_probs, draft_tokens, uniforms=uniforms, generator=generator)
    return verify


def _on_plan_path(impl):
    """``impl`` whose ``verify`` is plan + run (for the oracles that call ``impl.get("verify")``)."""
    return SimpleNamespace(get=lambda name: _planned(impl) if name == "verify" else impl.get(name))


def _split(kw: dict) -> tuple[tuple, dict, dict]:
    """verify's keyword arguments as (the three tensors, plan's keywords, run's keywords)."""
    tensors = (kw["target_probs"], kw["draft_probs"], kw["draft_tokens"])
    return (tensors, {k: kw[k] for k in PLAN_ARGS if k in kw}, {k: kw[k] for k in RUN_ARGS if k in kw})


# ----------------------------------------------------------------------------- plan + run is verify
MIXED = BatchCase(6, 4, 40, "float32", 1, noise=0.0, lens=(4, 0, 2, 4, 1, 3), greedy=(True, False, False, True,
                                                                                         False, False), garbage=True,
                  edges=True)


@example(case=MIXED).via("boundary: padded, empty and greedy rows with NaN padding")
@example(case=BatchCase(5, 3, 7, "bfloat16", 2, noise=0.3, greedy=(True, False, True, False, False), edges=True)).via(
    "boundary: greedy rows interleaved with sampled ones, edge uniforms")
@example(case=BatchCase(4, 5, 1, "float16", 3, no_q=True)).via("boundary: a vocabulary of one, no draft probabilities")
@example(case=BatchCase(3, 2, 9, "float64", 4, greedy=(True, True, True), lens=(2, 0, 1), garbage=True)).via(
    "boundary: every row greedy, per-row draft lengths, float64")
@given(case=batch_cases())
def test_plan_then_run_obeys_the_law(impl, device, case):
    """Generated batches (every dtype, per-row γ with NaN garbage in the padding, greedy rows,
    drafts without probabilities, q == p, uniforms of 0 and 1 - 2^-53) through plan + run: every
    row's acceptance count is the threshold rule's, its emitted token in the allowed support."""
    kw = case.tensors(device)
    got = read_result(_planned(impl)(**kw), kw, case.vocab, "plan + run")
    why = law_violation(kw, got)
    assert why is None, f"{why}\n  case: {case!r}"


@example(case=MIXED).via("boundary: padded, empty and greedy rows with NaN padding")
@example(case=BatchCase(5, 3, 7, "bfloat16", 2, noise=0.3, greedy=(True, False, True, False, False), edges=True)).via(
    "boundary: greedy rows interleaved with sampled ones, edge uniforms")
@example(case=BatchCase(4, 5, 1, "float16", 3, no_q=True)).via("boundary: a vocabulary of one, no draft probabilities")
@example(case=BatchCase(3, 2, 9, "float64", 4, greedy=(True, True, True), lens=(2, 0, 1), garbage=True)).via(
    "boundary: every row greedy, per-row draft lengths, float64")
@example(case=BatchCase(4, 3, 12, "float32", 5, noise=0.0, edges=True, no_q=True, lens=(3, 1, 0, 2),
                        garbage=True)).via("boundary: no draft probabilities with padded rows and edge uniforms")
@given(case=batch_cases())
@pytest.mark.choice("the same tokens as the reference for the same uniforms (inverse CDF, float64)")
def test_plan_then_run_matches_verify(impl, reference, device, case):
    """The same generated batches: plan + run emits the reference verify's tokens and counts for
    the same uniforms, token for token (padded rows, greedy rows, draft_probs None included)."""
    kw = case.tensors(device)
    _same(_planned(impl)(**kw), reference.get("verify")(**kw), kw, case.vocab, "plan + run")


@pytest.mark.parametrize("name", list(PINNED))
@pytest.mark.choice("the emitted token is the inverse CDF of the last uniform; acceptance is float64 u * q < p")
def test_pinned_rule_on_the_plan_path(impl, device, name):
    """The hand-made corner cases of test_verify.py (p == q, q > 0 where p = 0, an empty residual,
    per-row γ, greedy ties, a residual of one subnormal, the CDF summed in token order) through
    plan + run: the pinned results. The last two are where a faster summation order or the
    skipped redraw of an uncertified row shows."""
    pin = PINNED[name]
    kw = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in pin.kwargs().items()}
    got = read_result(_planned(impl)(**kw), kw, kw["target_probs"].shape[2], name)
    want = [tuple(t for t in row if t != -1) for row in pin.tokens]
    assert got == want, f"{name}: plan + run emitted {[list(g) for g in got]}, pinned {[list(w) for w in want]}"


@example(case=TreeCase(vocab=3, gamma=2, den=4, p_table=((1, 2, 1), (0, 3, 1)), q_mode="equal", p_key=1)).via(
    "boundary: q == p, every draft accepted")
@example(case=TreeCase(vocab=4, gamma=3, den=8, p_table=((1, 3, 4, 0), (0, 0, 2, 6), (8, 0, 0, 0)), q_mode="none",
                       drafts=(2, 3), pad=1)).via("boundary: no draft probabilities, a padded row")
@settings(max_examples=_scaled(6))
@given(case=tree_cases())
@pytest.mark.choice("the emitted token is the inverse CDF of the last uniform; acceptance is float64 u * q < p")
def test_plan_then_run_lossless_by_exact_enumeration(impl, device, case):
    """The exact enumeration of test_lossless.py on the plan path: the distribution plan + run
    induces over the cells of the uniforms' cube is lossless as an identity. (The law's
    statistical version, test_lossless.py's thousands of rows per call, is left to verify: on
    the plan path the law is test_plan_then_run_obeys_the_law's.)"""
    _assert_lossless(_on_plan_path(impl), case, device)


@pytest.mark.choice("the generator is consumed as one torch.rand(batch, γ + 1, float64)")
def test_run_consumes_the_generator_like_verify(impl, device):
    """run(generator=g) == run(uniforms=torch.rand(batch, γ + 1, dtype=float64, generator=<same
    seed>)), and g ends in the state that one draw leaves."""
    case = BatchCase(16, 3, 9, "float32", 22, lens=tuple([3, 1, 0, 2] * 4), greedy=tuple([False, True] * 8))
    _assert_seeded_draw_pinned(_on_plan_path(impl), case.tensors(device), case.vocab, case.seed, device)


# ----------------------------------------------------------------------------- one plan, many runs
def _fill(dst: dict, src: dict) -> None:
    """Write ``src``'s tensor values into ``dst``'s tensors (same shapes), in place."""
    for k in ("target_probs", "draft_probs", "draft_tokens", "uniforms"):
        if dst.get(k) is not None:
            dst[k].copy_(src[k])


@pytest.mark.parametrize("as_tensors", [False, True], ids=["lists", "device tensors"])
def test_one_plan_serves_runs_whose_values_change(impl, reference, device, as_tensors):
    """An engine's loop: plan once on empty buffers (NaN probabilities, token -7: their values are
    not the plan's business), with draft_lens and greedy given as lists or as device tensors;
    then per step write new probabilities, drafts and uniforms into the same tensors and run.
    Every run equals the reference verify of that step's values with the PLANNED draft_lens and
    greedy -- also after the caller rewrote its draft_lens/greedy tensors (the plan read them);
    and a later run does not change an earlier run's result."""
    lens, greedy = (4, 0, 2, 4, 1, 3, 4, 2), (True, False, False, True, False, False, True, False)
    steps = [BatchCase(8, 4, 30, "float32", seed, noise=noise, lens=lens, greedy=greedy, garbage=True, edges=True)
             for seed, noise in ((31, 1.0), (32, 0.0), (33, 3.0))]
    first = steps[0].tensors(device)
    buf = {k: (torch.full_like(v, math.nan) if v.is_floating_point() else torch.full_like(v, -7))
           for k, v in first.items() if isinstance(v, torch.Tensor)}
    plan_lens = torch.tensor(lens, device=device) if as_tensors else list(lens)
    plan_greedy = torch.tensor(greedy, device=device) if as_tensors else list(greedy)
    plan = impl.get("VerifyPlan")()
    plan.plan(buf["target_probs"], buf["draft_probs"], buf["draft_tokens"], draft_lens=plan_lens, greedy=plan_greedy)
    if as_tensors:   # the next step's flags, written before this step's runs: the plan has read the old ones
        plan_greedy.copy_(~plan_greedy)
        plan_lens.copy_(torch.tensor((0, 4, 4, 1, 3, 2, 0, 4), device=device))
    results = []
    for case in steps:
        kw = case.tensors(device)
        _fill(buf, kw)
        got = plan.run(buf["target_probs"], buf["draft_probs"], buf["draft_tokens"], uniforms=buf["uniforms"])
        _same(got, reference.get("verify")(**kw), kw, case.vocab, f"run of step {case.seed - 30}")
        results.append((got, kw, case))
    for i, (got, kw, case) in enumerate(results):
        _same(got, reference.get("verify")(**kw), kw, case.vocab, f"the result of step {i + 1}, read after the last run")


def test_replan_for_another_batch(impl, reference, device):
    """One plan object, re-planned: a plan for batch A, a run of A; a plan for batch B (other
    batch size, γ, vocab, dtype, no draft probabilities, other lens and greedy rows), a run of B;
    a run with A's tensors after B's plan is refused (TypeError naming target_probs: its dtype
    differs from the plan's), and a plan for A again serves A again."""
    a = BatchCase(5, 3, 20, "float32", 41, lens=(3, 1, 0, 3, 2), greedy=(False, True, False, False, True),
                  garbage=True)
    b = BatchCase(3, 5, 33, "bfloat16", 42, no_q=True, greedy=(True, False, False), edges=True)
    plan = impl.get("VerifyPlan")()
    for case in (a, b, a):
        kw = case.tensors(device)
        tensors, plan_kw, run_kw = _split(kw)
        plan.plan(*tensors, **plan_kw)
        _same(plan.run(*tensors, **run_kw), reference.get("verify")(**kw), kw, case.vocab, f"seed {case.seed}")
        if case is b:
            ka = a.tensors(device)
            with pytest.raises(TypeError, match=r"^target_probs\b"):
                plan.run(ka["target_probs"], ka["draft_probs"], ka["draft_tokens"], uniforms=ka["uniforms"])


def test_run_before_plan_is_refused(impl, device):
    """A run of a plan object that was never planned raises RuntimeError naming ``plan``."""
    kw = _valid(device)
    with pytest.raises(RuntimeError, match=r"\bplan\b"):
        impl.get("VerifyPlan")().run(**kw, uniforms=torch.full((2, 3), 0.5, dtype=torch.float64, device=device))


def test_a_failed_plan_leaves_the_previous_plan(impl, reference, device):
    """A plan that raises changes nothing: the previous plan still runs with its own shapes,
    draft_lens and greedy rows. The failed plans are for another batch whose tensors pass every
    check but the last (greedy of the wrong kind, draft_lens past γ)."""
    a = BatchCase(4, 3, 16, "float32", 51, lens=(3, 0, 2, 1), greedy=(False, True, False, False), garbage=True)
    kw = a.tensors(device)
    tensors, plan_kw, run_kw = _split(kw)
    plan = impl.get("VerifyPlan")()
    plan.plan(*tensors, **plan_kw)
    other = BatchCase(2, 2, 8, "float64", 52).tensors(device)
    with pytest.raises(TypeError, match=r"\bgreedy\b"):
        plan.plan(other["target_probs"], other["draft_probs"], other["draft_tokens"], greedy=["yes", "no"])
    with pytest.raises(ValueError, match=r"\bdraft_lens\b"):
        plan.plan(other["target_probs"], other["draft_probs"], other["draft_tokens"], draft_lens=[1, 3],
                  greedy=[True, True])
    _same(plan.run(*tensors, **run_kw), reference.get("verify")(**kw), kw, a.vocab, "the previous plan's run")


def test_run_never_raises_on_a_broken_promise(impl, device):
    """What run does not check (a sync would) is the caller's promise; breaking it gives an
    unspecified result of the right form, never an error: NaN and negative probabilities at
    active positions, draft tokens -3 and vocab, uniforms 1, -0.5 and NaN."""
    kw = BatchCase(4, 3, 10, "float32", 61, lens=(3, 2, 3, 0), greedy=(False, False, True, False)).tensors(device)
    tensors, plan_kw, _ = _split(kw)
    plan = impl.get("VerifyPlan")()
    plan.plan(*tensors, **plan_kw)
    p, q, x = (t.clone() for t in tensors)
    p[0, 1] = math.nan
    q[1, 0, :] = -0.5
    x[0, 0], x[1, 1], x[2, 2] = -3, 10, 10
    u = torch.tensor([[1.0, 0.5, 0.2, -0.5], [math.nan, 0.1, 0.9, 1.0], [0.3] * 4, [0.0] * 4],
                     dtype=torch.float64, device=device)
    tokens, accepted = plan.run(p, q, x, uniforms=u)
    assert tokens.shape == (4, 4) and tokens.dtype == torch.int64 and tokens.device == p.device, tokens
    assert accepted.shape == (4,) and accepted.dtype == torch.int64 and accepted.device == p.device, accepted


# ----------------------------------------------------------------------------- bad input
def _run_valid(device):
    """A plan's valid run: _valid's tensors (2 rows, γ 2, vocab 5, float32) and uniforms."""
    return {**_valid(device), "uniforms": torch.full((2, 3), 0.5, dtype=torch.float64, device=device)}


RUN_BAD = [
    Bad("target_probs batch differs", _with("target_probs", lambda t: t[:1].clone()), ValueError, ("target_probs",)),
    Bad("target_probs vocab differs", _with("target_probs", lambda t: torch.cat([t, t[:, :, :1]], 2)), ValueError,
        ("target_probs",)),
    Bad("target_probs float64 for a float32 plan", _with("target_probs", lambda t: t.double()), TypeError,
        ("target_probs",)),
    Bad("target_probs a list", _with("target_probs", lambda t: t.tolist()), TypeError, ("target_probs",)),
    Bad("draft_probs None for a planned tensor", dict(draft_probs=None), TypeError, ("draft_probs",)),
    Bad("draft_probs γ differs", _with("draft_probs", lambda t: t[:, :1].clone()), ValueError, ("draft_probs",)),
    Bad("draft_probs bfloat16 for a float32 plan", _with("draft_probs", lambda t: t.bfloat16()), TypeError,
        ("draft_probs",)),
    Bad("draft_tokens int32 for an int64 plan", _with("draft_tokens", lambda t: t.int()), TypeError, ("draft_tokens",)),
    Bad("draft_tokens a column more", _with("draft_tokens", lambda t: torch.cat([t, t[:, :1]], 1)), ValueError,
        ("draft_tokens",)),
    Bad("uniforms without the draw column", _uniforms([[0.1, 0.2], [0.1, 0.2]]), ValueError, ("uniforms",)),
    Bad("uniforms one per row", _uniforms([0.1, 0.2]), ValueError, ("uniforms",)),
    Bad("uniforms int", _uniforms([[0, 0, 0], [0, 0, 0]]), TypeError, ("uniforms",)),
    Bad("uniforms a list", dict(uniforms=[[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]]), TypeError, ("uniforms",)),
    Bad("no generator, no uniforms", dict(uniforms=None), ValueError, ("generator",)),
    Bad("generator an int", dict(uniforms=None, generator=1234), TypeError, ("generator",)),
]


@bad_cases(RUN_BAD)
def test_run_refuses_arguments_unlike_the_plan(impl, device, bad):
    """run checks what the host knows without a sync: a tensor whose shape, dtype or device
    differs from the planned one (draft_probs None against a planned tensor), uniforms of the
    wrong kind or shape, no usable randomness -- TypeError for a kind or a dtype, ValueError for
    a shape or a missing generator, naming the argument at the start of the message; nothing is
    modified. (Values -- NaN probabilities, tokens out of range, uniforms outside [0, 1) -- are
    the caller's promise: test_run_never_raises_on_a_broken_promise.)"""
    plan = impl.get("VerifyPlan")()
    plan.plan(**_valid(device))
    _starts_with_the_name(assert_rejects(plan.run, lambda: _run_valid(device), bad), bad)


def test_run_refuses_draft_probs_for_a_plan_without(impl, device):
    """A plan made with draft_probs=None refuses a run with draft probabilities (TypeError naming
    draft_probs): the plan decided the drafts have no probabilities."""
    kw = _run_valid(device)
    plan = impl.get("VerifyPlan")()
    plan.plan(kw["target_probs"], None, kw["draft_tokens"])
    with pytest.raises(TypeError, match=r"^draft_probs\b"):
        plan.run(**kw)


ANOTHER_DEVICE = [
    Bad("uniforms on another device", _with("uniforms", lambda t: t.to("meta")), ValueError, ("uniforms",)),
    Bad("draft_tokens on another device", _with("draft_tokens", lambda t: t.to("meta")), ValueError, ("draft_tokens",)),
]


@pytest.mark.parametrize("moved", ANOTHER_DEVICE, ids=[b.id for b in ANOTHER_DEVICE])
def test_run_refuses_arguments_on_another_device(impl, device, moved):
    """Uniforms or a tensor on another device than the plan's raise ValueError naming it (a run
    copies nothing between devices: unlike verify, which moves uniforms to the probabilities'
    device). The other device is "meta", whose tensors hold no data."""
    plan = impl.get("VerifyPlan")()
    plan.plan(**_valid(device))
    assert_rejects_without_data(plan.run, moved.apply(_run_valid(device)), moved)


# verify's rows that need the values of the probabilities or the tokens: plan does not read them
VALUE_ROWS = {b.id for b in BAD if b.id.startswith(("target_probs negative", "target_probs float64, a tiny",
                                                     "draft_probs negative", "draft_probs float64, a tiny"))} | {
    "target_probs NaN", "target_probs +inf", "target_probs sums to 1/2", "target_probs are logits",
    "target_probs bonus position sums to 2", "draft_probs NaN", "draft_probs sums to 2", "draft_tokens = vocab",
    "draft_tokens negative"}
PLAN_BAD = [b for b in BAD if b.id not in VALUE_ROWS]


@bad_cases(PLAN_BAD)
def test_plan_rejects_what_verify_rejects(impl, device, bad):
    """plan validates the metadata completely: every row of verify's bad-input table that does not
    need the values of the probabilities or tokens (kinds, ranks, shapes, vocab 0 positions,
    draft_lens, greedy) raises the same kind of error, naming the same argument at the start of
    the message, at plan time; nothing is modified."""
    _starts_with_the_name(assert_rejects(lambda **kw: impl.get("VerifyPlan")().plan(**kw), lambda: _valid(device),
                                         bad), bad)


def test_plan_does_not_read_the_values(impl, device):
    """The rows of verify's table that need values are not plan's business: a plan accepts them
    (the buffers a graph fills later may hold anything at plan time)."""
    plan = impl.get("VerifyPlan")()
    for bad in BAD:
        if bad.id in VALUE_ROWS:
            kw = bad.apply(_valid(device))
            plan.plan(**kw)


# ----------------------------------------------------------------------------- CUDA graphs
@pytest.mark.gpu
@pytest.mark.parametrize("no_q", [False, True], ids=["draft probs", "no draft probs"])
def test_a_captured_run_replays_after_in_place_updates_gpu(impl, reference, device, no_q):
    """What an engine does: plan once, capture ``run`` in a CUDA graph, then per step write new
    probabilities, drafts and uniforms into the captured tensors and replay. Capture fails if run
    syncs with the host; every replay equals the reference verify of that step's values (three
    steps: a good draft, q == p, a poor draft; per-row γ, greedy rows, NaN padding)."""
    if device != "cuda":
        pytest.skip("CUDA graphs need a CUDA device")
    lens, greedy = (4, 0, 2, 4, 1, 3, 4, 2) * 2, (True, False, False, True, False, False, False, False) * 2
    steps = [BatchCase(16, 4, 1000, "float32", seed, noise=noise, lens=lens, greedy=greedy, garbage=True,
                       edges=True, no_q=no_q) for seed, noise in ((71, 1.0), (72, 0.0), (73, 4.0))]
    buf = {k: v.clone() for k, v in steps[0].tensors(device).items() if isinstance(v, torch.Tensor)}
    buf.setdefault("draft_probs", None)
    args = (buf["target_probs"], buf["draft_probs"], buf["draft_tokens"])
    plan = impl.get("VerifyPlan")()
    plan.plan(*args, draft_lens=list(lens), greedy=list(greedy))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan.run(*args, uniforms=buf["uniforms"])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = plan.run(*args, uniforms=buf["uniforms"])
    for case in steps:
        kw = case.tensors(device)
        _fill(buf, kw)
        graph.replay()
        torch.cuda.synchronize()
        got = (out[0].clone(), out[1].clone())
        _same(got, reference.get("verify")(**kw), kw, case.vocab, f"replay of seed {case.seed}")
