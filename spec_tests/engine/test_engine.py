"""The serving engine (course 04.01-04.05): the properties that define it.

Law, for any engine of the contract (reference/engine.py's docstring):
- every request's tokens equal the request run alone: a greedy request's the greedy tokens of
  ``reference.generate`` (cut at its first stop token), a sampled request's the same engine's with
  only that request -- for any arrival steps, token budget (chunked prefill), pool size
  (preemption by recompute) and prefix caching; within the tolerance rule (oracles.py);
- the engine runs the scheduler concept's policy: its per-step schedule, and what it streams at
  each step, equal the reference engine's (up to a genuine near-tie, after which runs differ);
- streaming: every step's outputs concatenate to the final outputs, nothing is streamed after a
  request's finished output, every request finishes with the reason its tokens call for;
- a step schedules at most ``max_num_batched_tokens`` tokens of at most ``max_num_seqs`` requests;
- bad input is rejected naming the argument, and leaves the engine as it was.
Choice (token-exact): a sampled request draws the sampling concept's reference draw from its own
``torch.Generator().manual_seed(seed)``, so its tokens equal ``reference.generate``'s with that
generator and sampler.
"""
from __future__ import annotations

import math
import re

import pytest
import torch
from hypothesis import HealthCheck, event, example, given, settings

from conformance.badinput import Bad, assert_rejects, bad_cases
from reference.sampling import SamplingParams
from spec_tests.engine.oracles import (alone_greedy, assert_same_tokens, drive, model, request_kwargs,
                                       stop_ids_of, truncate)
from spec_tests.engine.strategies import EngineCase, Req, engine_cases

SETTINGS = dict(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Pinned: preemption by recompute (a pool of 4 one-token blocks, three requests), with a sampled
# request among them; prefix hits on a shared 6-token prefix, chunks of 3 tokens; a budget of 1
# token (every prompt fed one token per step) with two sampled requests sharing steps.
PREEMPT = EngineCase(requests=(Req((1, 2, 3), 2), Req((4, 5), 3, temperature=1.0, seed=1), Req((6,), 4)),
                     arrivals=(0, 0, 1), num_blocks=4, block_size=1, max_num_batched_tokens=8, max_num_seqs=3)
PREFIX = EngineCase(requests=(Req((9, 8, 7, 6, 5, 4, 1), 3), Req((9, 8, 7, 6, 5, 4, 2, 3), 4),
                              Req((9, 8, 7, 6, 5, 4, 1), 2, stop_at=1)),
                    arrivals=(0, 3, 3), num_blocks=12, block_size=2, max_num_batched_tokens=3, max_num_seqs=2,
                    enable_prefix_caching=True)
SAMPLED = EngineCase(requests=(Req((3, 1, 4), 4, temperature=1.0, seed=2), Req((1, 5, 9, 2), 4, temperature=0.7,
                                                                                 top_k=5, seed=3)),
                     arrivals=(0, 0), num_blocks=8, block_size=4, max_num_batched_tokens=1, max_num_seqs=2)

# A request preempted while the others keep growing into its old blocks, then resumed (found by
# the search against mutant:stale_table_after_preemption).
STALE = EngineCase(requests=(Req((0,), 3, temperature=0.7), Req((0,), 1, temperature=0.7), Req((0,), 2, temperature=0.7),
                             Req((0,), 2)),
                   arrivals=(0, 1, 0, 0), num_blocks=3, block_size=1, max_num_batched_tokens=4, max_num_seqs=3,
                   enable_chunked_prefill=False, n_kv_heads=1)


def _engine(impl, m, case):
    return impl.get("Engine")(m, **case.engine_kwargs())


def _check_stream_and_reasons(case, run, stop_ids):
    for i, r in enumerate(case.requests):
        out = run.outputs.get(i)
        assert out == run.streams[i], (f"request {i}: the streamed tokens {run.streams[i]} do not concatenate "
                                       f"to its final output {out}\n  case: {case!r}")
        assert i in run.reasons, f"request {i} never streamed a finished output\n  case: {case!r}"
        stops = stop_ids.get(i, ())
        assert 1 <= len(out) <= r.max_tokens and all(t not in stops for t in out[:-1]), (
            f"request {i}: {out} runs past a stop token {stops} or max_tokens={r.max_tokens}\n  case: {case!r}")
        want = "stop" if out[-1] in stops else "length"
        assert want == "stop" or len(out) == r.max_tokens, (
            f"request {i} finished after {len(out)} < max_tokens={r.max_tokens} tokens without a stop token: "
            f"{out}\n  case: {case!r}")
        assert run.reasons[i] == want, (f"request {i}: finish_reason {run.reasons[i]!r}, expected {want!r} "
                                        f"(tokens {out}, stop ids {stops})\n  case: {case!r}")


def _check_budgets(case, run):
    for s, sched in enumerate(run.schedules):
        assert sum(sched.values()) <= case.max_num_batched_tokens and len(sched) <= case.max_num_seqs, (
            f"step {s} scheduled {sched}: over max_num_batched_tokens={case.max_num_batched_tokens} or "
            f"max_num_seqs={case.max_num_seqs}\n  case: {case!r}")


@example(case=PREEMPT).via("mutant:decode_misses_its_own_key")
@example(case=STALE).via("mutant:stale_table_after_preemption")
@example(case=PREFIX).via("mutant:prefill_ignores_computed_offset mutant:prefix_hit_context_dropped "
                          "mutant:stream_repeats_after_prefill")
@given(case=engine_cases())
def test_every_request_equals_its_run_alone(impl, reference, case):
    """Each greedy request's tokens equal reference.generate's greedy tokens of it alone (cut at its
    stop token), each sampled request's equal the same engine running it alone, whatever the
    arrivals, budget, pool and caching; the stream concatenates to the outputs and ends with the
    right finish reason; no step exceeds the token or sequence budget."""
    m = model(reference, case)
    stop_ids = stop_ids_of(reference, m, case)
    run = drive(_engine(impl, m, case), case, stop_ids)
    _check_stream_and_reasons(case, run, stop_ids)
    _check_budgets(case, run)
    for i, r in enumerate(case.requests):
        if r.temperature == 0:
            want = truncate(alone_greedy(reference, m, r), stop_ids.get(i, ()))
            what = "engine vs reference.generate alone"
        else:
            want = drive(_engine(impl, m, case), case, stop_ids, only=[i]).outputs[i]
            what = "engine vs the same engine with this request alone"
        if not assert_same_tokens(reference, case, i, run.outputs[i], want, what):
            event("genuine near-tie")


@example(case=STALE).via("mutant:stale_table_after_preemption")
@example(case=SAMPLED).via("mutant:shared_generator mutant:one_uniform_for_the_batch")
@example(case=PREFIX).via("mutant:stream_repeats_after_prefill")
@given(case=engine_cases())
def test_steps_equal_the_reference_engine(impl, reference, case):
    """Step by step, the implementation schedules what the reference engine schedules and streams
    what it streams (request, tokens, finished, reason), until a genuine near-tie makes the two
    runs differ (tolerance rule); the requests' final tokens are equal up to that near-tie."""
    m = model(reference, case)
    stop_ids = stop_ids_of(reference, m, case)
    got = drive(_engine(impl, m, case), case, stop_ids)
    want = drive(_engine(reference, m, case), case, stop_ids)
    same = all(assert_same_tokens(reference, case, i, got.outputs[i], want.outputs[i],
                                  "implementation engine vs reference engine")
               if r.temperature == 0 else True for i, r in enumerate(case.requests))
    if not same:
        event("genuine near-tie")
        return
    for s, (a, b) in enumerate(zip(got.steps, want.steps)):
        assert got.schedules[s] == want.schedules[s], (
            f"step {s}: scheduled {got.schedules[s]}, the reference engine {want.schedules[s]}\n  case: {case!r}")
        assert a == b, f"step {s}: streamed {a}, the reference engine {b}\n  case: {case!r}"
    assert len(got.steps) == len(want.steps), (
        f"{len(got.steps)} steps, the reference engine {len(want.steps)}\n  case: {case!r}")


@pytest.mark.choice("a sampled request draws the reference sampler's float64 uniform from its own "
                    "torch.Generator().manual_seed(seed), token after token")
@example(case=SAMPLED).via("mutant:shared_generator")
@given(case=engine_cases(max_requests=3))
def test_sampled_tokens_equal_reference_generate_with_the_seed(impl, reference, case):
    """A sampled request's tokens equal reference.generate's with the reference sampler and
    ``generator=torch.Generator().manual_seed(seed)`` (its run alone), in any batch."""
    m = model(reference, case)
    run = drive(_engine(impl, m, case), case, {})
    sample = reference.of("sampling").get("sample")
    for i, r in enumerate(case.requests):
        if r.temperature == 0:
            continue
        params = SamplingParams(temperature=r.temperature, top_k=r.top_k, top_p=r.top_p)
        want, _ = reference.of("generate").get("generate")(
            m, torch.tensor([r.prompt]), r.max_tokens, sample_fn=lambda lg, g: sample(lg, params, g),
            generator=torch.Generator().manual_seed(r.seed))
        assert run.outputs[i] == want[0].tolist(), (
            f"request {i}: {run.outputs[i]}, reference.generate with its seed {want[0].tolist()}\n  case: {case!r}")


def test_pinned_cases_reach_what_they_pin(reference):
    """The pinned cases exercise what they are named for, on the reference engine: PREEMPT
    preempts, PREFIX hits the prefix cache, SAMPLED and PREFIX compute prompts in chunks."""
    engine_cls = reference.get("Engine")
    for case, check in ((PREEMPT, lambda plans: any(p.preempted for p in plans)),
                        (PREFIX, lambda plans: any(p.num_computed_tokens[r] > 0 and p.num_scheduled_tokens[r] > 1
                                                   for p in plans for r in p.num_scheduled_tokens
                                                   if r in (1, 2) and not p.block_tables.get(r) is None)),
                        (SAMPLED, lambda plans: any(n > 0 and p.num_computed_tokens[r] + n < 3
                                                    for p in plans for r, n in p.num_scheduled_tokens.items()))):
        m = model(reference, case)
        engine = engine_cls(m, **case.engine_kwargs())
        plans, schedule = [], engine.scheduler.schedule

        def spy():
            plans.append(schedule())
            return plans[-1]
        engine.scheduler.schedule = spy
        drive(engine, case, stop_ids_of(reference, m, case))
        assert check(plans), case


# --- stop conditions --------------------------------------------------------------------------
def test_stop_token_ends_the_request_and_is_returned(impl, reference):
    """A request whose greedy run generates a stop token ends at its first occurrence, with that
    token as its last output and finish_reason "stop"; without it, max_tokens ends it ("length")."""
    case = EngineCase(requests=(Req((5, 6, 7), 6),), arrivals=(0,), num_blocks=8, block_size=2,
                      max_num_batched_tokens=8, max_num_seqs=2)
    m = model(reference, case)
    alone = alone_greedy(reference, m, case.requests[0])
    for k in (0, 2, 5):
        stop = (alone[k], 63 if alone[k] != 63 else 62)
        run = drive(_engine(impl, m, case), case, {0: stop})
        assert run.outputs[0] == truncate(alone, stop) and run.reasons[0] == "stop", (k, run.outputs, alone)
    run = drive(_engine(impl, m, case), case, {})
    assert run.outputs[0] == alone and run.reasons[0] == "length", (run.outputs, run.reasons)


def _bounded(engine, limit: int = 200):
    """Make ``engine.step`` fail after ``limit`` calls, so a generate whose arrival clock never reaches
    an arrival fails instead of hanging (an implementation whose generate does not call step is unbounded)."""
    step, calls = engine.step, [0]

    def bounded():
        calls[0] += 1
        assert calls[0] <= limit, f"generate made {limit} steps without returning: its arrivals never came?"
        return step()
    engine.step = bounded
    return engine


def test_generate_helper_runs_arrivals_to_completion(impl, reference):
    """``generate(requests, arrivals)`` returns every request's full tokens, the same as driving
    add_request/step by hand with those arrival steps."""
    case = PREEMPT
    m = model(reference, case)
    requests = [request_kwargs(i, r, ()) for i, r in enumerate(case.requests)]
    out = _bounded(_engine(impl, m, case)).generate(requests, list(case.arrivals))
    run = drive(_engine(impl, m, case), case, {})
    assert {k: list(v) for k, v in dict(out).items()} == run.outputs


# request 0 (3 prompt tokens, 6 to generate) runs one step per token: its outputs count the steps it ran.
GEN_CASE = EngineCase(requests=(Req((1, 2, 3), 6), Req((4, 5), 2)), arrivals=(0, 0), num_blocks=12, block_size=2,
                      max_num_batched_tokens=8, max_num_seqs=2)


def test_generate_adds_each_request_just_before_its_step_number(impl, reference):
    """generate's ``arrivals`` count the engine's steps since construction -- idle steps, steps made by
    hand and by an earlier generate included: request i is added just before step number arrivals[i]
    runs (at once when that step has passed), so a bad request raises when it arrives, after exactly the
    steps before it, which the running request's token count shows; without ``arrivals`` every request
    is added before the first step; generate returns once every request finished."""
    m = model(reference, GEN_CASE)
    first, other = (request_kwargs(i, r, ()) for i, r in enumerate(GEN_CASE.requests))
    bad = {**other, "request_id": 9, "prompt": []}
    alone = alone_greedy(reference, m, GEN_CASE.requests[0])

    def tokens_when_bad_arrives(engine, arrivals):
        with pytest.raises(ValueError, match=r"(?i)\bprompt\b"):
            engine.generate([first, bad], arrivals)
        return dict(engine.outputs)[0]

    engine = _bounded(_engine(impl, m, GEN_CASE))
    assert tokens_when_bad_arrives(engine, [0, 3]) == alone[:3], "arrivals [0, 3] on a new engine: 3 steps first"
    engine = _bounded(_engine(impl, m, GEN_CASE))
    assert engine.step() == [] and engine.step() == []
    assert tokens_when_bad_arrives(engine, [1, 4]) == alone[:2], (
        "after 2 idle steps by hand, arrivals [1, 4]: request 0 at once (step 1 has passed), 2 steps before step 4")
    engine = _bounded(_engine(impl, m, GEN_CASE))
    done = engine.generate([other])                                   # no arrivals: all before the first step
    assert {k: list(v) for k, v in dict(done).items()} == {1: alone_greedy(reference, m, GEN_CASE.requests[1])}
    assert not engine.has_unfinished_requests()
    assert tokens_when_bad_arrives(engine, [2, 4]) == alone[:2], (
        "after a generate of 2 steps, arrivals [2, 4]: request 0 at once, 2 steps before step 4")
    engine = _bounded(_engine(impl, m, GEN_CASE))
    with pytest.raises(ValueError, match=r"(?i)\bprompt\b"):
        engine.generate([first, bad])
    assert dict(engine.outputs).get(0, []) == [], "without arrivals the bad request arrives before the first step"


def test_generate_rejects_bad_requests_and_arrivals(impl, reference):
    """generate raises before adding anything, naming the argument: ``requests`` not a sequence of dicts
    (a str, a dict, a generator): TypeError; ``arrivals`` not of ``requests``' length: ValueError; an
    arrival not an int (a float, a bool): TypeError, negative: ValueError."""
    m = model(reference, GEN_CASE)
    requests = [request_kwargs(i, r, ()) for i, r in enumerate(GEN_CASE.requests)]
    rows = [(dict(requests="ab"), TypeError, "requests"), (dict(requests=requests[0]), TypeError, "requests"),
            (dict(requests=(r for r in requests)), TypeError, "requests"),
            (dict(arrivals=[0, 1, 2]), ValueError, "arrivals"), (dict(arrivals=[0]), ValueError, "arrivals"),
            (dict(arrivals=[0, -1]), ValueError, "arrivals"), (dict(arrivals=[0, 1.5]), TypeError, "arrivals"),
            (dict(arrivals=[0, True]), TypeError, "arrivals")]
    for change, error, word in rows:
        engine = _bounded(_engine(impl, m, GEN_CASE))
        kwargs = {"requests": requests, "arrivals": [0, 1], **change}
        with pytest.raises(Exception) as info:
            engine.generate(**kwargs)
        assert isinstance(info.value, error) and re.search(rf"(?i)(?<![a-z0-9_]){word}(?![a-z0-9_])", str(info.value)), (
            f"generate({change}): expected {error.__name__} naming {word}, got {type(info.value).__name__}: {info.value}")
        assert dict(engine.outputs) == {} and not engine.has_unfinished_requests(), f"generate({change}) added requests"


def test_request_ids_are_never_reused(impl, reference):
    """The id of a finished request stays taken: adding it again raises ValueError naming request_id,
    and the finished request's tokens stay as they were."""
    m = model(reference, GEN_CASE)
    engine = _engine(impl, m, GEN_CASE)
    engine.add_request(0, [4, 5], max_tokens=2)
    while engine.has_unfinished_requests():
        engine.step()
    before = dict(engine.outputs)
    with pytest.raises(ValueError, match=r"(?i)\brequest_id\b"):
        engine.add_request(0, [1, 2, 3], max_tokens=2)
    assert dict(engine.outputs) == before and not engine.has_unfinished_requests()


def test_a_1d_integer_tensor_prompt_is_its_list_of_ids(impl, reference):
    """A prompt given as a 1-d integer tensor (int64, int32) generates what the list of its ids does."""
    m = model(reference, GEN_CASE)
    want = alone_greedy(reference, m, Req((1, 2, 3), 3))
    for dtype in (torch.int64, torch.int32):
        engine = _engine(impl, m, GEN_CASE)
        engine.add_request(0, torch.tensor([1, 2, 3], dtype=dtype), max_tokens=3)
        while engine.has_unfinished_requests():
            engine.step()
        assert dict(engine.outputs)[0] == want, (dtype, dict(engine.outputs), want)


# --- bad input --------------------------------------------------------------------------------
BAD_REQUEST = [
    Bad("duplicate request_id", dict(request_id=0), ValueError, ("request_id",)),
    Bad("float request_id", dict(request_id=1.5), TypeError, ("request_id",)),
    Bad("None request_id", dict(request_id=None), TypeError, ("request_id",)),
    Bad("empty prompt", dict(prompt=[]), ValueError, ("prompt",)),
    Bad("str prompt", dict(prompt="abc"), TypeError, ("prompt",)),
    Bad("bytes prompt", dict(prompt=b"\x01\x02"), TypeError, ("prompt",)),
    Bad("int prompt", dict(prompt=5), TypeError, ("prompt",)),
    Bad("float token", dict(prompt=[1, 2.0]), TypeError, ("prompt",)),
    Bad("bool token", dict(prompt=[True]), TypeError, ("prompt",)),
    Bad("negative token", dict(prompt=[3, -1]), ValueError, ("prompt",)),
    Bad("token = vocab", dict(prompt=[64]), ValueError, ("prompt",)),
    Bad("2-d tensor prompt", dict(prompt=torch.tensor([[1, 2]])), ValueError, ("prompt",)),
    Bad("float tensor prompt", dict(prompt=torch.tensor([1.0, 2.0])), TypeError, ("prompt",)),
    Bad("max_tokens 0", dict(max_tokens=0), ValueError, ("max_tokens",)),
    Bad("float max_tokens", dict(max_tokens=2.0), TypeError, ("max_tokens",)),
    Bad("bool max_tokens", dict(max_tokens=True), TypeError, ("max_tokens",)),
    Bad("past max_seq_len", dict(max_tokens=38), ValueError, ("max_tokens",)),
    Bad("more blocks than the pool", dict(max_tokens=30), ValueError, ("prompt",)),
    Bad("one block more than the pool", dict(max_tokens=23), ValueError, ("prompt",)),
    Bad("negative temperature", dict(temperature=-0.5), ValueError, ("temperature",)),
    Bad("NaN temperature", dict(temperature=math.nan), ValueError, ("temperature",)),
    Bad("str temperature", dict(temperature="hot"), TypeError, ("temperature",)),
    Bad("negative top_k", dict(top_k=-1), ValueError, ("top_k",)),
    Bad("float top_k", dict(top_k=2.5), TypeError, ("top_k",)),
    Bad("top_p 0", dict(top_p=0.0), ValueError, ("top_p",)),
    Bad("top_p above 1", dict(top_p=1.5), ValueError, ("top_p",)),
    Bad("float seed", dict(seed=1.0), TypeError, ("seed",)),
    Bad("stop id = vocab", dict(stop_token_ids=[64]), ValueError, ("stop_token_ids",)),
    Bad("negative stop id", dict(stop_token_ids=[-1]), ValueError, ("stop_token_ids",)),
    Bad("str stop ids", dict(stop_token_ids="ab"), TypeError, ("stop_token_ids",)),
    Bad("bytes stop ids", dict(stop_token_ids=b"\x05"), TypeError, ("stop_token_ids",)),
    Bad("int stop ids", dict(stop_token_ids=5), TypeError, ("stop_token_ids",)),
    Bad("float stop id", dict(stop_token_ids=[1.0]), TypeError, ("stop_token_ids",)),
]
# num_blocks 12 of 2 slots (24 tokens): a 3-token prompt + 30 tokens needs 16 blocks, + 23 tokens 13; max_seq_len 40.
BAD_CASE = EngineCase(requests=(Req((1, 2, 3), 3), Req((4, 5, 6), 2, temperature=1.0, seed=4)), arrivals=(0, 0),
                      num_blocks=12, block_size=2, max_num_batched_tokens=4, max_num_seqs=2)
VALID_REQUEST = dict(request_id=7, prompt=[3, 1, 2], max_tokens=2, temperature=0.5, top_k=3, top_p=0.9, seed=1,
                     stop_token_ids=[5])


@bad_cases(BAD_REQUEST)
def test_add_request_rejects_bad_input(impl, reference, bad):
    """add_request raises TypeError/ValueError naming the argument, and leaves the engine as it
    was: what it reports, and everything it then generates, equal an engine that never saw the call."""
    m = model(reference, BAD_CASE)
    engine = _engine(impl, m, BAD_CASE)
    for i, r in enumerate(BAD_CASE.requests):
        engine.add_request(**request_kwargs(i, r, ()))
    engine.step()
    assert_rejects(engine.add_request, VALID_REQUEST, bad,
                   state=lambda: (engine.has_unfinished_requests(), dict(engine.outputs)))
    clean = _engine(impl, m, BAD_CASE)
    for i, r in enumerate(BAD_CASE.requests):
        clean.add_request(**request_kwargs(i, r, ()))
    clean.step()
    for e in (engine, clean):
        e.add_request(**{**VALID_REQUEST, "request_id": 9})
        while e.has_unfinished_requests():
            e.step()
    assert dict(engine.outputs) == dict(clean.outputs), "a rejected add_request changed what the engine generates"


BAD_ENGINE = [
    Bad("num_blocks 0", dict(num_blocks=0), ValueError, ("num_blocks",)),
    Bad("float block_size", dict(block_size=2.0), TypeError, ("block_size",)),
    Bad("block_size 0", dict(block_size=0), ValueError, ("block_size",)),
    Bad("budget 0", dict(max_num_batched_tokens=0), ValueError, ("max_num_batched_tokens",)),
    Bad("str max_num_seqs", dict(max_num_seqs="2"), TypeError, ("max_num_seqs",)),
    Bad("max_num_seqs 0", dict(max_num_seqs=0), ValueError, ("max_num_seqs",)),
    Bad("int chunked flag", dict(enable_chunked_prefill=1), TypeError, ("enable_chunked_prefill",)),
    Bad("None caching flag", dict(enable_prefix_caching=None), TypeError, ("enable_prefix_caching",)),
    Bad("model None", dict(model=None), TypeError, ("model",)),
]


@bad_cases(BAD_ENGINE)
def test_engine_rejects_bad_configuration(impl, reference, bad):
    """The constructor raises TypeError/ValueError naming the argument."""
    valid = dict(model=model(reference, BAD_CASE), **BAD_CASE.engine_kwargs())
    assert_rejects(lambda model, **kw: impl.get("Engine")(model, **kw), valid, bad)


# --- low precision: the kernels' dtypes -------------------------------------------------------
LOW = [EngineCase(requests=(Req((9, 8, 7, 6, 5, 4, 1), 3), Req((9, 8, 7, 6, 5, 4, 2, 3), 3), Req((1, 2), 4)),
                  arrivals=(0, 1, 1), num_blocks=9, block_size=2, max_num_batched_tokens=5, max_num_seqs=3,
                  enable_prefix_caching=True, n_layers=1, dtype="bfloat16", seed=3),
       EngineCase(requests=(Req((1, 2, 3), 2), Req((4, 5), 3), Req((6,), 4)), arrivals=(0, 0, 1), num_blocks=4,
                  block_size=1, max_num_batched_tokens=8, max_num_seqs=3, n_layers=1, dtype="float16", seed=5)]


@pytest.mark.parametrize("case", LOW, ids=["bf16-prefix-chunks", "fp16-preempt"])
def test_low_precision_tokens_follow_the_tolerance_rule(impl, reference, case):
    """In bfloat16/float16 (where the optimized engine runs its Triton kernels), every greedy
    request's tokens equal its run alone and the reference engine's, except at a genuine near-tie
    of the float64 logits (tolerance rule)."""
    m = model(reference, case)
    run = drive(_engine(impl, m, case), case, {})
    ref = drive(_engine(reference, m, case), case, {})
    _check_stream_and_reasons(case, run, {})
    for i, r in enumerate(case.requests):
        assert_same_tokens(reference, case, i, run.outputs[i], alone_greedy(reference, m, r), "engine vs alone")
        assert_same_tokens(reference, case, i, run.outputs[i], ref.outputs[i], "engine vs reference engine")


# --- defaults and boundaries ------------------------------------------------------------------
def test_omitted_sampling_arguments_are_their_defaults(impl, reference):
    """add_request's omitted top_k, top_p, seed and stop_token_ids are 0 (off), 1.0 (off), 0 and ()
    (a request passing those values explicitly gets the same tokens), and temperature is 0 (greedy)."""
    case = SAMPLED
    m = model(reference, case)
    explicit, omitted, greedy = (_engine(impl, m, case) for _ in range(3))
    for i, r in enumerate(case.requests):
        explicit.add_request(i, list(r.prompt), max_tokens=6, temperature=1.0, top_k=0, top_p=1.0, seed=0,
                             stop_token_ids=())
        omitted.add_request(i, list(r.prompt), max_tokens=6, temperature=1.0)
        greedy.add_request(i, list(r.prompt), max_tokens=6)
    for e in (explicit, omitted, greedy):
        while e.has_unfinished_requests():
            e.step()
    assert dict(omitted.outputs) == dict(explicit.outputs), (dict(omitted.outputs), dict(explicit.outputs))
    for i, r in enumerate(case.requests):
        assert dict(greedy.outputs)[i] == alone_greedy(reference, m, Req(r.prompt, 6)), "temperature's default"


def test_a_request_filling_the_context_exactly_is_accepted(impl, reference):
    """len(prompt) + max_tokens == max_seq_len is legal (the last token is never fed), and so is a
    request needing exactly num_blocks blocks; one more token is rejected naming max_tokens."""
    case = EngineCase(requests=(), arrivals=(), num_blocks=20, block_size=2, max_num_batched_tokens=8,
                      max_num_seqs=2)
    m = model(reference, case)
    engine = _engine(impl, m, case)
    engine.add_request(0, [1, 2, 3], max_tokens=37)       # 3 + 37 = max_seq_len 40; KV of 39 tokens: 20 blocks
    while engine.has_unfinished_requests():
        engine.step()
    assert dict(engine.outputs)[0] == alone_greedy(reference, m, Req((1, 2, 3), 37))
    with pytest.raises(ValueError, match="max_tokens"):
        _engine(impl, m, case).add_request(1, [1, 2, 3, 4], max_tokens=37)
