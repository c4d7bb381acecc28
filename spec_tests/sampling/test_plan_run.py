"""Plan once, run many (the optional ``SamplerPlan``, FlashInfer's plan()/run()).

``plan`` reads the logits' metadata (never their values), the params and the seen tokens, and
validates them completely; ``run`` reads values on the device only, so an engine captures it in
a CUDA graph and replays it after writing the next step's logits in place. The properties: plan +
run draws ``sample``'s tokens for the same uniforms and follows ``sampling_probs`` with a
generator; one plan serves runs whose logits change in place (the plan read no logit: it was
made on a buffer of NaN); a re-plan serves its own batch and params (no stale penalty), a run with
logits unlike the plan's is refused naming ``logits``, and bad randomness naming ``uniforms`` /
``generator``; a plan rejects what sample rejects without reading a logit, and a plan that raises
leaves the previous one in force; what only a read of the values could find (NaN logits, uniforms
outside [0, 1)) is the caller's promise: run returns tokens of the right shape and raises nothing;
on a GPU a captured run replays after in-place updates.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.sampling.oracles import sampling_oracle, step_clearance
from spec_tests.sampling.strategies import SamplingCase, sampling_cases
from spec_tests.sampling.test_sampling import (BAD, BAD_RANDOMNESS, CHI_CASES, _assert_in_support,
                                               _support_uniforms, _tiled, _valid, assert_follows_probs)

# sample's bad inputs that only a read of the logits' values finds (after penalties and bias):
# a plan cannot see them; for a run they are the caller's promise.
VALUE_ROWS = ("NaN logits", "NaN logits, top-p only", "+inf logits", "penalty overflow", "bias overflows to +inf",
              "logits row all -inf", "+inf logit banned by a -inf bias, row 1")
UNIFORM_VALUE_ROWS = ("uniforms = 1", "uniforms < 0", "uniforms NaN", "uniforms +inf")


def _plan(impl, logits, params=None, **kw):
    plan = impl.get("SamplerPlan")()
    plan.plan(logits, params, **kw)
    return plan


def _decided(case: SamplingCase, n: int, u: torch.Tensor) -> torch.Tensor:
    """Rows of the case tiled n times whose token the contract decides: the row is clear of
    rounding (oracles' ambiguous_rows) and u is clear of every step of its oracle CDF."""
    oracle = sampling_oracle(case)
    clear = ~torch.tensor(oracle.ambiguous_rows, dtype=torch.bool).repeat(n)
    cdf = oracle.probs.cumsum(dim=1).repeat(n, 1)
    return clear & ((cdf - u[:, None]).abs().min(dim=1).values > step_clearance(case.vocab))


def _assert_same_tokens(got, want, decided, what, case):
    got, want = got.detach().cpu(), want.detach().cpu()
    assert got.dtype == torch.int64 and got.shape == want.shape, (
        f"{what}: run returned {got.dtype} {tuple(got.shape)}, sample {want.dtype} {tuple(want.shape)}")
    bad = (decided & (got != want)).nonzero().flatten().tolist()
    assert not bad, (f"{what}: row {bad[0]} ran to token {int(got[bad[0]])}, sample draws {int(want[bad[0]])} "
                     f"for the same uniform ({len(bad)} rows differ)\n  case: {case!r}")


@example(case=SamplingCase(3, 9, "float32", 5, temperature=(0.0, 0.8, 1.0), top_k=(0, 3, 0), top_p=(1.0, 0.9, 0.7),
                           min_p=(0.0, 0.0, 0.1))).via("boundary: a greedy row beside top-k, top-p and min-p rows")
@example(case=SamplingCase(2, 12, "bfloat16", 6, temperature=(1.2, 0.0), repetition_penalty=(1.5, 1.3),
                           presence_penalty=(0.5, 0.0), frequency_penalty=(0.25, 0.5), prompt=((0, 1), (2,)),
                           output=((3, 3, 4), (5,)), bias=(((6, 1.0),), ((7, -0.5),)), banned=((0, 8),))).via(
    "boundary: every penalty, a logit bias and a banned token, prepared by the plan")
@given(case=sampling_cases(max_batch=4))
def test_plan_then_run_draws_samples_tokens(impl, device, case):
    """plan(logits, params, prompt_tokens=, output_tokens=) then run(logits, uniforms=u) draws the
    tokens sample(..., uniforms=u) draws (greedy rows, top-k/top-p/min-p, penalties, logit bias,
    every dtype; each row tiled 16 times with u = 0, the largest float64 below 1 and a grid),
    on every row the contract decides; every token has positive probability."""
    n = 16
    logits, params, kw = _tiled(case, n, device)
    u = _support_uniforms(n).repeat_interleave(case.batch)
    run = _plan(impl, logits, params, **kw).run(logits, uniforms=u.to(device))
    want = impl.get("sample")(logits, params, None, uniforms=u.to(device), **kw)
    oracle = sampling_oracle(case)
    clear = ~torch.tensor(oracle.ambiguous_rows, dtype=torch.bool)
    greedy = torch.tensor([case.row("temperature", r) == 0 for r in range(case.batch)]).repeat(n)
    _assert_in_support(run, oracle.keep.repeat(n, 1), "plan + run", rows=clear.repeat(n), uniforms=u,
                       greedy=greedy, batch=case.batch, case=case)
    _assert_same_tokens(run, want, _decided(case, n, u), "plan + run vs sample", case)


@pytest.mark.parametrize("name", ["temperature, top-k, top-p", "penalties, bias, min-p"])
def test_run_with_a_generator_follows_sampling_probs(impl, device, name):
    """run(logits, generator=g): 20,000 draws of the case tiled follow sampling_probs (support
    exact, chi-square per row at a false-alarm rate <= 1e-6, fixed seed), as sample's do."""
    case = CHI_CASES[name]
    oracle = sampling_oracle(case)
    n = 20_000 // case.batch
    logits, params, kw = _tiled(case, n, device)
    gen = torch.Generator(device=device).manual_seed(20240601)
    tokens = _plan(impl, logits, params, **kw).run(logits, generator=gen).cpu()
    assert_follows_probs(tokens, case, oracle, n, f"run, {name}")


def test_one_plan_serves_runs_whose_logits_change_in_place(impl, device):
    """An engine's decode loop: the plan is made on the logits buffer while it holds NaN (a plan
    reads no logit value), then each step writes new logits *into the same tensor* and runs:
    every run draws sample's tokens on the values it was given, with the planned penalties and
    bias; a run that used logits (or processed logits) kept from the plan, or from the previous
    run, draws the old tokens."""
    from reference.sampling import SamplingParams
    batch, vocab, n = 3, 40, 8
    params = SamplingParams(temperature=[0.7, 0.0, 1.3], top_k=[5, 0, 0], top_p=[0.9, 1.0, 0.8], min_p=[0.0, 0.0, 0.05],
                            repetition_penalty=1.2, frequency_penalty=0.3, logit_bias=[{1: 2.0}, None, {2: -math.inf}])
    kw = dict(prompt_tokens=[[0, 1], [2], []] * n, output_tokens=[[3, 3], [], [4]] * n)
    tiled = SamplingParams(**{f: getattr(params, f) * n if isinstance(getattr(params, f), list) else getattr(params, f)
                              for f in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                                        "frequency_penalty", "logit_bias")})
    buf = torch.full((batch * n, vocab), math.nan, device=device)
    plan = _plan(impl, buf, tiled, **kw)
    u = _support_uniforms(n).repeat_interleave(batch)
    for step in range(4):
        case = SamplingCase(batch, vocab, "float32", 100 + step, scale=2.0 + step, temperature=(0.7, 0.0, 1.3),
                            top_k=(5, 0, 0), top_p=(0.9, 1.0, 0.8), min_p=(0.0, 0.0, 0.05),
                            repetition_penalty=(1.2,) * 3, frequency_penalty=(0.3,) * 3, prompt=((0, 1), (2,), ()),
                            output=((3, 3), (), (4,)), bias=(((1, 2.0),), (), ()), banned=((2, 2),))
        buf.copy_(case.logits(device).repeat(n, 1))
        got = plan.run(buf, uniforms=u.to(device))
        want = impl.get("sample")(buf, tiled, None, uniforms=u.to(device), **kw)
        _assert_same_tokens(got, want, _decided(case, n, u), f"step {step}", case)


def test_replan_for_another_batch(impl, device):
    """One plan object, re-planned: A (3 x 40, penalties and bias), C (A's shape, other params,
    penalties but no token seen yet), B (2 x 17, other params, no seen tokens), then A again: each run draws its own
    plan's sample tokens (A's seen tokens or bias kept into C's plan change C's); a run with A's
    logits after B's plan is refused (another dtype and shape: TypeError or ValueError naming
    logits)."""
    a = SamplingCase(3, 40, "float32", 21, temperature=(0.8, 1.0, 0.0), top_k=(4, 0, 0), repetition_penalty=(2.0,) * 3,
                     presence_penalty=(1.5,) * 3, prompt=((0, 1, 2), (3,), (4,)), output=((5, 5), (6,), (7,)),
                     bias=(((8, 3.0),), ((9, 3.0),), ((10, 3.0),)))
    b = SamplingCase(2, 17, "float16", 22, temperature=(0.5, 1.5), top_p=(0.8, 1.0))
    c = SamplingCase(3, 40, "float32", 21, temperature=(1.0, 1.0, 0.0), top_p=(0.95, 1.0, 1.0),
                     repetition_penalty=(1.5,) * 3, frequency_penalty=(0.5,) * 3)      # no seen token
    plan = impl.get("SamplerPlan")()
    n = 8
    for case in (a, c, b, a):
        logits, params, kw = _tiled(case, n, device)
        u = _support_uniforms(n).repeat_interleave(case.batch)
        plan.plan(logits, params, **kw)
        got = plan.run(logits, uniforms=u.to(device))
        want = impl.get("sample")(logits, params, None, uniforms=u.to(device), **kw)
        _assert_same_tokens(got, want, _decided(case, n, u), f"re-planned for {case!r}", case)
        if case is b:
            with pytest.raises((TypeError, ValueError), match=r"\blogits\b"):
                plan.run(_tiled(a, n, device)[0], uniforms=torch.zeros(a.batch * n, dtype=torch.float64,
                                                                       device=device))


def test_run_before_plan_is_refused(impl, device):
    """A run of a plan object that was never planned raises RuntimeError naming ``plan``."""
    with pytest.raises(RuntimeError, match=r"\bplan\b"):
        impl.get("SamplerPlan")().run(torch.zeros(2, 6, device=device), uniforms=torch.zeros(2, device=device))


def _run_valid(device):
    """The valid run after a plan of the valid call (logits (2, 6) float32, default params)."""
    return dict(logits=_valid(device)["logits"], uniforms=torch.tensor([0.25, 0.75], dtype=torch.float64,
                                                                         device=device))


def _logits(make):
    return lambda kw: {**kw, "logits": make(kw["logits"])}


def _no_uniforms(**changes):
    return lambda kw: {**{k: v for k, v in kw.items() if k != "uniforms"}, **changes}


RUN_BAD = [
    Bad("logits batch differs", _logits(lambda x: torch.cat([x, x[:1]])), ValueError, ("logits",)),
    Bad("logits vocab differs", _logits(lambda x: torch.cat([x, x[:, :1]], 1)), ValueError, ("logits",)),
    Bad("logits transposed", _logits(lambda x: x.t().contiguous()[:, :2].reshape(6, 2)), ValueError, ("logits",)),
    Bad("logits float64 for a float32 plan", _logits(lambda x: x.double()), TypeError, ("logits",)),
    Bad("logits bfloat16 for a float32 plan", _logits(lambda x: x.bfloat16()), TypeError, ("logits",)),
    Bad("logits a list", _logits(lambda x: x.tolist()), TypeError, ("logits",)),
    Bad("uniforms shape", lambda kw: {**kw, "uniforms": kw["uniforms"][:1]}, ValueError, ("uniforms",)),
    Bad("uniforms 2-D", lambda kw: {**kw, "uniforms": kw["uniforms"][:, None]}, ValueError, ("uniforms",)),
    Bad("uniforms int", lambda kw: {**kw, "uniforms": torch.zeros(2, dtype=torch.int64,
                                                                   device=kw["logits"].device)}, TypeError, ("uniforms",)),
    Bad("uniforms a list", dict(uniforms=[0.25, 0.75]), TypeError, ("uniforms",)),
    Bad("no generator, no uniforms", _no_uniforms(), ValueError, ("generator",)),
    Bad("generator an int", _no_uniforms(generator=1234), TypeError, ("generator",)),
    Bad("generator a string", _no_uniforms(generator="seed 1"), TypeError, ("generator",)),
]


@bad_cases(RUN_BAD)
def test_run_refuses_inputs_unlike_the_plan(impl, device, bad):
    """run checks what the host knows without a sync: logits whose shape or dtype differ from the
    planned ones (ValueError / TypeError naming logits), uniforms of the wrong kind or shape, no
    randomness or a generator that is not one; nothing is modified and no random number is drawn.
    (Values -- NaN logits, uniforms outside [0, 1) -- are the caller's promise, unchecked.)"""
    plan = _plan(impl, **_valid(device))
    assert_rejects(plan.run, _run_valid(device), bad)


PLAN_BAD = [b for b in BAD if b.id not in VALUE_ROWS]


@bad_cases(PLAN_BAD)
def test_plan_rejects_what_sample_rejects(impl, device, bad):
    """plan validates completely: every bad input of sample that needs no logit value (the same
    table: params, logit_bias -- a row it bans entirely included --, the seen tokens, the logits'
    kind, rank and vocab) raises the same kind of error naming the same argument, at plan time."""
    assert_rejects(lambda **kw: impl.get("SamplerPlan")().plan(**kw), _valid(device), bad)


# the rows of sample's tables that run accepts (looked up by id: they are not rejections here)
PROMISE = {b.id: b for b in BAD + BAD_RANDOMNESS if b.id in VALUE_ROWS + UNIFORM_VALUE_ROWS}


@pytest.mark.parametrize("row", list(PROMISE))
def test_what_only_values_show_is_the_callers_promise(impl, device, row):
    """sample rejects these by reading values (NaN or +inf logits, a row all -inf, an overflow,
    uniforms outside [0, 1)); plan cannot see them (it reads no logit) and run does not look:
    the plan is accepted and the run returns an int64 tensor of shape (batch,) -- unspecified
    values, never an error."""
    bad = PROMISE[row]
    kw = bad.apply({**_valid(device), "uniforms": torch.tensor([0.25, 0.75], dtype=torch.float64, device=device)})
    uniforms = kw.pop("uniforms")
    if isinstance(uniforms, torch.Tensor):
        uniforms = uniforms.to(torch.float64)
    plan = _plan(impl, **kw)
    tokens = plan.run(kw["logits"], uniforms=uniforms)
    assert isinstance(tokens, torch.Tensor) and tokens.dtype == torch.int64 and tokens.shape == (2,), (
        f"{bad.id}: run returned {type(tokens).__name__} {getattr(tokens, 'dtype', '')} {tuple(getattr(tokens, 'shape', ()))}")


def test_a_failed_plan_leaves_the_previous_plan(impl, device):
    """A plan that raises changes nothing: after failed plans (top_p = 0; another shape with a bad
    output token; a bias banning a whole row) the previous plan still runs its own batch with its
    own params, penalties and bias."""
    from reference.sampling import SamplingParams
    case = SamplingCase(2, 30, "float32", 31, temperature=(0.6, 0.0), top_k=(3, 0), repetition_penalty=(1.5, 1.5),
                        prompt=((0, 1), (2,)), output=((3,), (4,)), bias=(((5, 2.0),), ((6, 1.0),)))
    n = 8
    logits, params, kw = _tiled(case, n, device)
    u = _support_uniforms(n).repeat_interleave(case.batch)
    plan = _plan(impl, logits, params, **kw)
    with pytest.raises(ValueError):
        plan.plan(logits, SamplingParams(top_p=0.0))
    with pytest.raises(ValueError):
        plan.plan(logits[:3, :7].contiguous(), None, output_tokens=[[1], [7], [0]])
    with pytest.raises(ValueError):
        plan.plan(logits, SamplingParams(logit_bias={t: -math.inf for t in range(case.vocab)}))
    got = plan.run(logits, uniforms=u.to(device))
    want = impl.get("sample")(logits, params, None, uniforms=u.to(device), **kw)
    _assert_same_tokens(got, want, _decided(case, n, u), "after failed plans", case)


def test_run_with_a_generator_is_sample_with_a_generator(impl, device):
    """With a generator, run draws what sample draws from a generator in the same state (both
    consume it as the contract's draw), and leaves the generator where sample leaves it; batch 0
    draws nothing and returns (0,) int64."""
    from reference.sampling import SamplingParams
    case = SamplingCase(4, 25, "float32", 41, temperature=(0.9, 0.0, 1.1, 0.7), top_p=(0.9, 1.0, 1.0, 0.8))
    logits, params, kw = _tiled(case, 4, device)
    g1, g2 = (torch.Generator(device=device).manual_seed(7) for _ in range(2))
    got = _plan(impl, logits, params).run(logits, generator=g1)
    want = impl.get("sample")(logits, params, g2)
    u = torch.rand(logits.shape[0], generator=torch.Generator(device=device).manual_seed(7), dtype=torch.float64,
                   device=device).cpu()
    _assert_same_tokens(got, want, _decided(case, 4, u), "run vs sample, generator", case)
    assert torch.equal(g1.get_state(), g2.get_state()), "run left the generator in another state than sample"
    empty = torch.zeros(0, 25, device=device)
    state = g1.get_state()
    tokens = _plan(impl, empty, SamplingParams(temperature=0.5)).run(empty, generator=g1)
    assert tokens.dtype == torch.int64 and tokens.shape == (0,) and torch.equal(g1.get_state(), state)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,config", [("float32", "chain"), ("bfloat16", "top-p"), ("float32", "greedy")])
def test_a_captured_run_replays_after_in_place_updates_gpu(impl, device, dtype, config):
    """What an engine does: plan once on the logits buffer, run once eagerly (it compiles the
    kernels), capture ``run`` in a CUDA graph, then per step write new logits and uniforms into
    the captured tensors and replay. Capture fails if run syncs with the host; every replay draws
    sample's tokens for that step's values (the same implementation, the same uniforms)."""
    from reference.sampling import SamplingParams
    if device != "cuda":
        pytest.skip("CUDA graphs need a CUDA device")
    batch, vocab = 64, 32000
    params = {"chain": SamplingParams(temperature=0.7, top_k=50, top_p=0.9, min_p=0.02, repetition_penalty=1.1),
              "top-p": SamplingParams(top_p=0.9, logit_bias={5: -math.inf}),
              "greedy": SamplingParams(temperature=0.0)}[config]
    kw = dict(output_tokens=[[r % vocab, (7 * r) % vocab] for r in range(batch)])
    g = torch.Generator().manual_seed(3)
    buf = torch.empty(batch, vocab, dtype=getattr(torch, dtype), device=device)
    u = torch.zeros(batch, dtype=torch.float64, device=device)
    plan = _plan(impl, buf, params, **kw)
    buf.copy_(torch.randn(batch, vocab, generator=g))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan.run(buf, uniforms=u)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = plan.run(buf, uniforms=u)
    for step in range(3):
        buf.copy_((torch.randn(batch, vocab, generator=g) * (1 + 2 * step)).to(buf.dtype))
        u.copy_(torch.rand(batch, generator=g, dtype=torch.float64))
        graph.replay()
        torch.cuda.synchronize()
        want = impl.get("sample")(buf, params, None, uniforms=u, **kw)
        assert torch.equal(out.cpu(), want.cpu()), (
            f"step {step}: the replayed run drew other tokens than sample in "
            f"{int((out != want).sum())} of {batch} rows")
