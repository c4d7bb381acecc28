"""The generation loop (course 01.02, 01.03, 03.01, 03.02): the properties that define it.

The model is always the reference Transformer (the model concept checks models); what is under
test is the loop. Tolerance rule for logits: oracle = the reference's uncached loop in float64,
reference = the reference's uncached loop in the same low precision, both *teacher-forced* on
the tokens the implementation chose (their ``sample_fn`` replays them), so every step compares
the logits of the same prefix even where a low-precision run would have picked another token.

Greedy tokens: cached and uncached loops must pick identical tokens, except at a genuine near-tie:
where they first differ, the float64 logits of the two tokens must lie within the tolerance bound
of each other (each run may be off by that bound). Every greedy token must be an argmax of the
float64 logits up to that bound.
"""
from __future__ import annotations

import torch
from hypothesis import event, example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.tolerance import assert_close_to_oracle, rounding_floor
from spec_tests.generate.strategies import GenCase, gen_cases
from spec_tests.model.strategies import ModelCase


FLOAT64_ATOL = 1e-10


def _model(reference, case: GenCase, dtype, device="cpu"):
    """The reference model of ``case`` in ``dtype``: same float32-drawn weights in every dtype."""
    cfg = case.model.config(reference.of("model").get("ModelConfig"), dtype)
    return reference.of("model").get("Transformer")(cfg, seed=case.model.seed).to(device)


def _replay(tokens: torch.Tensor):
    """A sample_fn that returns ``tokens[:, t]`` at step t (teacher forcing)."""
    step = iter(range(tokens.shape[1]))
    return lambda logits, generator: tokens[:, next(step)].to(logits.device)


def _run(source, name: str, model, case: GenCase, prompt, **kwargs):
    """Call ``name`` of ``source`` (impl or reference) on ``case``; only the cached loop takes the
    case's prefill_chunk_size."""
    if case.prefill_chunk_size is not None and name == "generate":
        kwargs.setdefault("prefill_chunk_size", case.prefill_chunk_size)
    return source.get(name)(model, prompt, case.max_new_tokens, **kwargs)


def _bound(ref_lp: torch.Tensor, oracle: torch.Tensor) -> float:
    """The tolerance rule's bound: 2 x the reference's own error + the rounding floor."""
    err_ref = float((ref_lp.double().cpu() - oracle).abs().max())
    return 2.0 * err_ref + rounding_floor(oracle, ref_lp.dtype)


def _check_greedy(tokens, oracle, bound, what):
    """Each chosen token's float64 logit is within 2 x bound of the float64 max."""
    chosen = oracle.gather(-1, tokens.cpu()[..., None])[..., 0]
    gap = oracle.max(dim=-1).values - chosen
    worst = float(gap.max()) if gap.numel() else 0.0
    assert worst <= 2 * bound, (
        f"{what}: a greedy token is not an argmax: its float64 logit is {worst:.3e} below the max "
        f"(allowed {2 * bound:.3e}) at (row, step) {tuple(int(i) for i in divmod(int(gap.argmax()), gap.shape[1]))}")


def _first_divergence(a: torch.Tensor, b: torch.Tensor) -> int | None:
    differ = (a != b).any(dim=0).nonzero()
    return int(differ[0]) if differ.numel() else None


# --- cached == uncached ------------------------------------------------------------------------
# Each ends exactly at max_seq_len: a GQA prompt in chunks of 4 with a ragged tail; a 1-token
# prompt in bfloat16; a single new token after a chunked prefill; a chunk longer than the prompt.
@example(case=GenCase(ModelCase(96, 48, 2, 6, 2, None, None, 10000.0, 1e-5, 16, 2, 6, "float32", 3), 10, 4)).via(
    "mutant:chunk_fresh_cache mutant:drops_ragged_last_chunk mutant:full_context_rejected")
@example(case=GenCase(ModelCase(64, 32, 2, 4, 1, None, None, 500000.0, 1e-5, 11, 1, 1, "bfloat16", 0), 10, None)).via(
    "mutant:decode_feeds_stale_token mutant:full_context_rejected")
@example(case=GenCase(ModelCase(80, 32, 1, 2, 2, 16, 40, 100.0, 1e-2, 9, 2, 8, "float32", 11), 1, 3)).via(
    "mutant:drops_last_prefill_token mutant:chunk_fresh_cache mutant:drops_ragged_last_chunk")
@example(case=GenCase(ModelCase(64, 32, 1, 4, 2, None, None, 10000.0, 1e-5, 5, 1, 3, "float32", 2), 2, 5)).via(
    "mutant:drops_ragged_last_chunk")
@given(case=gen_cases(dtypes=("float32", "bfloat16")))
def test_cached_logits_and_tokens_match_uncached(impl, reference, device, case):
    """generate (prefill, chunked or not, then cached decode) gives at every step the logits of the
    float64 uncached loop within the tolerance rule, and the same greedy tokens as the
    implementation's own uncached loop (except at genuine near-ties); the prompt is untouched."""
    impl.get("generate"), impl.get("generate_uncached")
    model = _model(reference, case, case.model.dtype, device)
    prompt = case.model.tokens(device)
    keep = prompt.clone()
    tokens, logits = _run(impl, "generate", model, case, prompt)
    assert torch.equal(prompt, keep), "generate modified prompt_tokens"
    n, vocab = case.max_new_tokens, case.model.vocab_size
    assert tokens.shape == (case.model.batch, n) and tokens.dtype == torch.long, (tokens.shape, tokens.dtype)
    assert logits.shape == (case.model.batch, n, vocab), f"logits shape {tuple(logits.shape)}"
    model64 = _model(reference, case, torch.float64)
    _, oracle = _run(reference, "generate_uncached", model64, case, prompt.cpu(), sample_fn=_replay(tokens))
    _, ref_lp = _run(reference, "generate_uncached", model, case, prompt, sample_fn=_replay(tokens))
    inputs = dict(case=case, tokens=tokens)
    assert_close_to_oracle(logits, ref_lp, oracle, name="cached logits vs float64 uncached loop", inputs=inputs)
    bound = _bound(ref_lp, oracle)
    _check_greedy(tokens, oracle, bound, "generate")

    u_tokens, u_logits = _run(impl, "generate_uncached", model, case, prompt)
    assert torch.equal(prompt, keep), "generate_uncached modified prompt_tokens"
    step = _first_divergence(tokens, u_tokens)
    upto = n if step is None else step + 1          # the steps where both loops saw the same prefix
    assert_close_to_oracle(u_logits[:, :upto], ref_lp[:, :upto], oracle[:, :upto],
                           name="uncached logits vs float64 uncached loop", inputs=inputs)
    if step is not None:
        rows = (tokens[:, step] != u_tokens[:, step]).nonzero()[:, 0].cpu()
        o = oracle[rows, step]
        gap = (o.gather(-1, tokens[rows, step, None].cpu()) - o.gather(-1, u_tokens[rows, step, None].cpu())).abs()
        assert float(gap.max()) <= 2 * bound, (
            f"cached and uncached greedy tokens differ at step {step} ({tokens[:, step].tolist()} vs "
            f"{u_tokens[:, step].tolist()}) where the float64 logits differ by {float(gap.max()):.3e} "
            f"> 2 x bound {2 * bound:.3e}: not a near-tie\n  case: {case!r}")
        event("genuine near-tie: cached and uncached greedy tokens differ")


@example(case=GenCase(ModelCase(96, 48, 2, 6, 2, None, None, 10000.0, 1e-5, 16, 2, 7, "float64", 5), 6, 3)).via(
    "mutant:chunk_fresh_cache mutant:drops_ragged_last_chunk")
@given(case=gen_cases(dtypes=("float64",)))
def test_chunked_prefill_equals_one_prefill(impl, reference, device, case):
    """A prompt prefilled in chunks (two or more prefills) gives the tokens and logits of one
    prefill (float64: tokens equal, logits to 1e-10)."""
    generate = impl.get("generate")
    p = case.model.seq_len
    chunk = min(case.prefill_chunk_size or (p + 1) // 2, max(p - 1, 1))    # >= 2 prefills if p > 1
    model, prompt = _model(reference, case, torch.float64, device), case.model.tokens(device)
    t1, l1 = generate(model, prompt, case.max_new_tokens)
    tc, lc = generate(model, prompt, case.max_new_tokens, prefill_chunk_size=chunk)
    assert torch.equal(tc, t1), f"chunk {chunk}: tokens {tc.tolist()} != one prefill {t1.tolist()}"
    torch.testing.assert_close(lc, l1, rtol=0, atol=FLOAT64_ATOL)


@given(case=gen_cases(dtypes=("float64",), max_batch=3))
def test_batch_rows_are_independent(impl, reference, device, case):
    """Each row of a batched generation equals that prompt generated alone (float64)."""
    impl.get("generate")
    model, prompt = _model(reference, case, torch.float64, device), case.model.tokens(device)
    tokens, logits = _run(impl, "generate", model, case, prompt)
    for row in range(case.model.batch):
        t, l = _run(impl, "generate", model, case, prompt[row:row + 1])
        assert torch.equal(t, tokens[row:row + 1]), f"row {row}: alone {t.tolist()} vs batched {tokens[row].tolist()}"
        torch.testing.assert_close(l, logits[row:row + 1], rtol=0, atol=FLOAT64_ATOL)


# --- the loop itself: oracle, sampling hook ----------------------------------------------------
@given(case=gen_cases(dtypes=("float64",)))
def test_uncached_is_the_nanogpt_loop(impl, reference, device, case):
    """generate_uncached == the plain loop written here (run the model on the whole sequence,
    argmax of the last position, append), float64; and generate == it too."""
    impl.get("generate"), impl.get("generate_uncached")
    model, prompt = _model(reference, case, torch.float64, device), case.model.tokens(device)
    sequence, want_tokens, want_logits = prompt, [], []
    with torch.no_grad():
        for _ in range(case.max_new_tokens):
            last = model(sequence)[:, -1]
            want_logits.append(last)
            want_tokens.append(last.argmax(-1))
            sequence = torch.cat([sequence, want_tokens[-1][:, None]], dim=1)
    want_tokens, want_logits = torch.stack(want_tokens, 1), torch.stack(want_logits, 1)
    for name in ("generate_uncached", "generate"):
        tokens, logits = _run(impl, name, model, case, prompt)
        assert torch.equal(tokens, want_tokens), f"{name}: {tokens.tolist()} != {want_tokens.tolist()}"
        torch.testing.assert_close(logits, want_logits, rtol=0, atol=FLOAT64_ATOL)


@given(case=gen_cases(dtypes=("float64",)), seed=st.integers(0, 2**32 - 1))
def test_sample_fn_gets_each_steps_logits_and_the_generator(impl, reference, device, case, seed):
    """sample_fn is called once per step with that step's logits row batch (batch, vocab) -- the
    row returned in ``logits`` -- and the caller's generator; with a seeded multinomial sampler
    the cached and uncached loops draw the same tokens (float64 logits, equal seeds)."""
    impl.get("generate"), impl.get("generate_uncached")
    model, prompt = _model(reference, case, torch.float64, device), case.model.tokens(device)
    results = {}
    for name in ("generate", "generate_uncached"):
        calls, gen = [], torch.Generator(device=prompt.device).manual_seed(seed)

        def sampler(logits, generator, calls=calls, gen=gen):
            assert generator is gen, "sample_fn did not receive the caller's generator"
            calls.append(logits.clone())
            return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]

        tokens, logits = _run(impl, name, model, case, prompt, sample_fn=sampler, generator=gen)
        assert len(calls) == case.max_new_tokens, f"{name}: sample_fn called {len(calls)} times"
        assert torch.equal(torch.stack(calls, 1), logits), f"{name}: returned logits != those sampled from"
        results[name] = tokens
    assert torch.equal(results["generate"], results["generate_uncached"]), results


def _argmax(logits, generator):
    return logits.argmax(dim=-1)


def test_omitted_arguments_are_the_defaults(impl, reference):
    """Omitting sample_fn, generator or prefill_chunk_size equals passing the documented default:
    greedy argmax, None (what sample_fn then receives) and None (one prefill), for both loops
    (float64: tokens equal, logits to 1e-10)."""
    case = GenCase(ModelCase(64, 32, 2, 4, 2, None, None, 10000.0, 1e-5, 12, 2, 5, "float64", 6), 6)
    model, prompt = _model(reference, case, torch.float64), case.model.tokens()
    for name in ("generate", "generate_uncached"):
        fn = impl.get(name)
        tokens, logits = fn(model, prompt, case.max_new_tokens)
        explicit = fn(model, prompt, case.max_new_tokens, sample_fn=_argmax, generator=None, prefill_chunk_size=None)
        assert torch.equal(tokens, explicit[0]), f"{name}: default sample_fn {tokens.tolist()} != argmax {explicit[0].tolist()}"
        torch.testing.assert_close(logits, explicit[1], rtol=0, atol=FLOAT64_ATOL)
        seen = []
        fn(model, prompt, case.max_new_tokens, sample_fn=lambda logits, g: seen.append(g) or logits.argmax(-1))
        assert seen == [None] * case.max_new_tokens, f"{name}: without a generator sample_fn got {seen}"


def test_greedy_ties_go_to_the_lowest_id(impl, reference):
    """The default greedy sampler breaks exact ties toward the lowest token id (torch.argmax's
    rule): with lm_head zeroed every logit is exactly 0, so every step picks token 0."""
    case = GenCase(ModelCase(64, 32, 1, 4, 2, None, None, 10000.0, 1e-5, 8, 2, 3, "float32", 4), 4)
    model, prompt = _model(reference, case, torch.float32), case.model.tokens()
    with torch.no_grad():
        model.lm_head.weight.zero_()
    for name in ("generate", "generate_uncached"):
        tokens, logits = impl.get(name)(model, prompt, case.max_new_tokens)
        assert bool((logits == 0).all()), f"{name}: logits of a zero lm_head are not all 0"
        assert torch.equal(tokens, torch.zeros_like(tokens)), f"{name}: ties broken to {tokens.tolist()}, not to id 0"


def test_zero_and_one_new_tokens(impl, reference):
    """max_new_tokens=0 returns empty (batch, 0) tokens and (batch, 0, vocab) logits; one new
    token is the argmax of the prefill's last position."""
    case = GenCase(ModelCase(64, 32, 1, 4, 2, None, None, 10000.0, 1e-5, 8, 2, 5, "float32", 1), 0)
    model, prompt = _model(reference, case, torch.float32), case.model.tokens()
    with torch.no_grad():
        last = model(prompt)[:, -1]
    for name in ("generate", "generate_uncached"):
        fn = impl.get(name)
        tokens, logits = fn(model, prompt, 0)
        assert tokens.shape == (2, 0) and logits.shape == (2, 0, 64), (name, tokens.shape, logits.shape)
        assert logits.dtype == torch.float32 and tokens.dtype == torch.long, (name, tokens.dtype, logits.dtype)
        tokens, logits = fn(model, prompt, 1)
        assert torch.equal(tokens[:, 0], last.argmax(-1)), name
        torch.testing.assert_close(logits[:, 0], last, rtol=0, atol=1e-6)


_BAD_CASE = GenCase(ModelCase(64, 32, 1, 4, 2, None, None, 10000.0, 1e-5, 8, 1, 3, "float32", 0), 1)
_VALID = dict(prompt_tokens=torch.zeros(1, 3, dtype=torch.long), max_new_tokens=2)
# Both loops: the model's vocab_size is 64 and max_seq_len 8.
BAD = [
    Bad("float prompt", dict(prompt_tokens=torch.zeros(1, 3)), TypeError, ("prompt_tokens",)),
    Bad("list prompt", dict(prompt_tokens=[[0, 1, 2]]), TypeError, ("prompt_tokens",)),
    Bad("rank 1", dict(prompt_tokens=torch.zeros(3, dtype=torch.long)), ValueError, ("prompt_tokens",)),
    Bad("empty prompt", dict(prompt_tokens=torch.zeros(1, 0, dtype=torch.long)), ValueError, ("prompt_tokens",)),
    Bad("id == vocab", dict(prompt_tokens=torch.tensor([[0, 64]])), ValueError, ("prompt_tokens",)),
    Bad("negative id", dict(prompt_tokens=torch.tensor([[0, -1]])), ValueError, ("prompt_tokens",)),
    Bad("negative max_new_tokens", dict(max_new_tokens=-1), ValueError, ("max_new_tokens",)),
    Bad("float max_new_tokens", dict(max_new_tokens=2.0), TypeError, ("max_new_tokens",)),
    Bad("past max_seq_len", dict(prompt_tokens=torch.zeros(1, 5, dtype=torch.long), max_new_tokens=4), ValueError,
        ("max_new_tokens",)),
    Bad("sample_fn not callable", dict(sample_fn=3), TypeError, ("sample_fn",)),
    Bad("sample_fn shape", dict(prompt_tokens=torch.zeros(2, 3, dtype=torch.long), sample_fn=lambda logits, g: logits.argmax()),
        ValueError, ("sample_fn",)),
    Bad("sample_fn ids outside vocab", dict(sample_fn=lambda logits, g: torch.full(logits.shape[:1], 64)), ValueError,
        ("sample_fn",)),
    # one row out of range, the others valid: a check of only the smallest (or largest) id misses it
    Bad("sample_fn one id negative", dict(prompt_tokens=torch.zeros(2, 3, dtype=torch.long),
                                          sample_fn=lambda logits, g: torch.arange(logits.shape[0]) - 1),
        ValueError, ("sample_fn",)),
    Bad("sample_fn one id == vocab", dict(prompt_tokens=torch.zeros(2, 3, dtype=torch.long),
                                          sample_fn=lambda logits, g: torch.arange(logits.shape[0]) + logits.shape[-1] - 1),
        ValueError, ("sample_fn",)),
    Bad("sample_fn float ids", dict(sample_fn=lambda logits, g: logits.argmax(-1).double()), ValueError, ("sample_fn",)),
    Bad("bool prompt", dict(prompt_tokens=torch.zeros(1, 3, dtype=torch.bool)), TypeError, ("prompt_tokens",)),
    Bad("rank 3", dict(prompt_tokens=torch.zeros(1, 1, 3, dtype=torch.long)), ValueError, ("prompt_tokens",)),
    Bad("no rows", dict(prompt_tokens=torch.zeros(0, 3, dtype=torch.long)), ValueError, ("prompt_tokens",)),
    Bad("bool max_new_tokens", dict(max_new_tokens=True), TypeError, ("max_new_tokens",)),
    Bad("None max_new_tokens", dict(max_new_tokens=None), TypeError, ("max_new_tokens",)),
]
# prefill_chunk_size: generate_uncached validates it too (it has no effect there, but the two
# loops take the same arguments; reference/generate.py).
CHUNK_BAD = [
    Bad("prefill_chunk_size 0", dict(prefill_chunk_size=0), ValueError, ("prefill_chunk_size",)),
    Bad("float prefill_chunk_size", dict(prefill_chunk_size=2.0), TypeError, ("prefill_chunk_size",)),
    Bad("negative prefill_chunk_size", dict(prefill_chunk_size=-1), ValueError, ("prefill_chunk_size",)),
    Bad("bool prefill_chunk_size", dict(prefill_chunk_size=True), TypeError, ("prefill_chunk_size",)),
]


@bad_cases(BAD + CHUNK_BAD)
def test_generate_rejects_bad_input(impl, reference, bad):
    """Malformed input to generate raises TypeError/ValueError naming the argument; the prompt is
    not modified."""
    model = _model(reference, _BAD_CASE, torch.float32)
    assert_rejects(impl.get("generate"), {**_VALID, "model": model}, bad)


@bad_cases(BAD + CHUNK_BAD)
def test_generate_uncached_rejects_bad_input(impl, reference, bad):
    """Malformed input to generate_uncached raises TypeError/ValueError naming the argument,
    ``prefill_chunk_size`` included (validated although it has no effect). Mutant:
    uncached_ignores_chunk_size."""
    model = _model(reference, _BAD_CASE, torch.float32)
    assert_rejects(impl.get("generate_uncached"), {**_VALID, "model": model}, bad)
