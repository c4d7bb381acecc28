"""Sampling (course 01.05): the properties that define it.

``sampling.sampling_probs`` is the distribution and ``sampling.sample`` must draw from it. Oracles:
a float64 brute force written from the definition, one row at a time and sort-free
(spec_tests/sampling/oracles.py), and transformers' logits processors/warpers where their
semantics agree with the pinned order (docs/sampling.md says where they differ). Samplers are
checked by the law first: whatever uniforms are given, every token drawn has positive probability
under the distribution (a greedy row: its argmax, ties to the smallest id), the same uniforms give
the same tokens, and generator draws follow the distribution statistically (chi-square, fixed
seeds, false-alarm rate <= 1e-6 per test). Cases whose decisions float32 rounding could flip are
skipped (the contract leaves them open).

Law and choice (reference/sampling.py, "Choices the law leaves open"): the unmarked tests hold
every sampler; those marked ``@pytest.mark.choice`` pin the reference's own draw -- the token for
a uniform u is the inverse CDF in token-id order, and the generator supplies those uniforms as one
``torch.rand(batch, dtype=float64)`` per call -- and are enforced at token-exact only. An
exponential race (vLLM, SGLang), ``torch.multinomial``, rejection sampling (FlashInfer) or float32
uniforms pass the law and are told "token-exact ✗".
"""
from __future__ import annotations

import math
from typing import NamedTuple

import pytest
import torch
from hypothesis import assume, example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.stats import lumped
from conformance.strategies import randn
from conformance.tolerance import ToleranceError, rounding_floor
from spec_tests.sampling.oracles import SamplingOracle, sampling_oracle, step_clearance
from spec_tests.sampling.strategies import PARAM_FIELDS, SamplingCase, sampling_cases, structure_cases


ALPHA = 1e-6        # per-test false-alarm rate of the chi-square tests

# The reference's choices where the law leaves the draw open (reference/sampling.py, "Choices the
# law leaves open"): the words a token-exact ✗ verdict names.
INVERSE_CDF = "the token for a uniform u is the inverse CDF in token-id order"
TORCH_RAND = "the generator is consumed as one torch.rand(batch, float64) per call, used as the uniforms"
ONE_MINUS = 1.0 - 2.0 ** -53   # the largest float64 below 1


def _scaled(n: int) -> int:
    """``n`` examples under the dev profile (25), scaled with the profile's max_examples."""
    return max(1, round(n * settings().max_examples / 25))


def _probs(impl, case: SamplingCase, device, **changes):
    fn = impl.get("sampling_probs")
    return fn(case.logits(device), case.params(), **case.kwargs(), **changes)


def _z_floor(oracle_probs: torch.Tensor, z_tol, dtype: torch.dtype) -> float:
    """The part of the rounding floor that comes from the logits, not the output: z = (x - max x)
    / T is known to within the oracle's budget tol_z per row (float32 rounding at the logits'
    magnitude over T; rescaled to float64's epsilon for float64), which moves p_t by at most
    p_t (exp(2 tol_z) - 1). It matters for large logits over small temperatures, and for
    implementations that divide first (softmax(x / T): transformers, vLLM), whose z error grows
    with |x| / T; a floor from the probabilities alone would call those false alarms."""
    if z_tol is None or oracle_probs.numel() == 0:
        return 0.0
    tol = torch.as_tensor(z_tol, dtype=torch.float64).reshape(-1)
    if dtype == torch.float64:
        tol = tol * 2.0 ** -29                 # float64's epsilon over float32's
    pmax = oracle_probs.reshape(tol.numel(), -1).amax(dim=1)
    return float((pmax * torch.expm1(2 * tol.clamp(max=30.0))).clamp(max=1.0).max())


def _within_rule(a, b, ref, oracle_probs, factor, name, case, z_tol=None):
    """DESIGN's tolerance rule on probabilities: max|a - b| <= factor x the reference's own error
    + the rounding floor: two ulps at the values' magnitude (tolerance.rounding_floor) or, if
    larger, what the logits' rounding allows (:func:`_z_floor`, from the oracle's z budget per
    row). float64 results are held to 1e-12 (as attention's float64 test) or the float64 z floor."""
    a64, b64, o64 = (t.detach().to("cpu", torch.float64) for t in (a, b, oracle_probs))
    err = float((a64 - b64).abs().max()) if a64.numel() else 0.0
    if a.dtype == torch.float64:
        bound = max(1e-12, _z_floor(o64, z_tol, a.dtype))
    else:
        err_ref = float((ref.detach().to("cpu", torch.float64) - o64).abs().max()) if o64.numel() else 0.0
        floor = max(rounding_floor(o64, a.dtype), _z_floor(o64, z_tol, a.dtype))
        bound = factor * err_ref + floor
    if err > bound:
        idx = tuple(int(i) for i in torch.unravel_index((a64 - b64).abs().argmax(), a64.shape))
        raise ToleranceError(f"{name}: max abs difference {err:.3e} > bound {bound:.3e} at {idx}: "
                             f"{float(a64[idx]):.8g} vs {float(b64[idx]):.8g}\n  case: {case!r}")


def _assert_probs(actual, ref, oracle, case, name="probs"):
    """Support exactly the oracle's kept set; values within the tolerance rule (float64: 1e-12)."""
    p = actual.detach().to("cpu", torch.float64)
    assert p.shape == oracle.probs.shape, f"{name}: shape {tuple(p.shape)} != {tuple(oracle.probs.shape)}"
    outside = (~oracle.keep) & (p != 0)
    if outside.any():
        r, t = outside.nonzero()[0].tolist()
        raise AssertionError(f"{name}: token {t} of row {r} has probability {float(p[r, t]):.3g} but the "
                             f"pinned filters drop it (kept set {oracle.keep[r].nonzero().flatten().tolist()})"
                             f"\n  case: {case!r}")
    tiny = 1e-300 if case.dtype == "float64" else 1e-30
    missing = oracle.keep & (oracle.probs > tiny) & (p <= 0)
    if missing.any():
        r, t = missing.nonzero()[0].tolist()
        raise AssertionError(f"{name}: token {t} of row {r} is kept by the pinned filters (oracle "
                             f"probability {float(oracle.probs[r, t]):.3g}) but got 0\n  case: {case!r}")
    assert actual.dtype == ref.dtype, f"{name}: dtype {actual.dtype} != reference's {ref.dtype}"
    _within_rule(actual, oracle.probs, ref, oracle.probs, 2.0, name, case, oracle.z_tol)


def _replicated(case: SamplingCase, n: int, device):
    """Row 0 of a batch-1 case repeated n times (scalar params) -> (logits, params, kwargs)."""
    from reference.sampling import SamplingParams
    assert case.batch == 1
    logits = case.logits(device).expand(n, case.vocab).contiguous()
    bias = case.bias_dicts()
    params = SamplingParams(**{f: case.row(f, 0) for f in PARAM_FIELDS},
                            logit_bias=None if bias is None else bias[0])
    kw = {k: (None if v is None else torch.tensor(v * n, dtype=torch.int64).reshape(n, -1))
          for k, v in case.kwargs().items()}
    return logits, params, kw


def _tiled(case: SamplingCase, n: int, device):
    """The case's batch repeated n times (row i * batch + r is row r), per-row params and seen
    tokens with it -> (logits, params, kwargs). Batch 1: :func:`_replicated` (scalar params, one
    bias dict, as fast as it gets)."""
    from reference.sampling import SamplingParams
    if case.batch == 1:
        return _replicated(case, n, device)
    logits = case.logits(device).repeat(n, 1)
    bias = case.bias_dicts()
    params = SamplingParams(**{f: [case.row(f, r) for r in range(case.batch)] * n for f in PARAM_FIELDS},
                            logit_bias=None if bias is None else bias * n)
    kw = {}
    for k, v in case.kwargs().items():       # a 2-D tensor where the rows are of one length (faster)
        kw[k] = (None if v is None else torch.tensor(v * n, dtype=torch.int64).reshape(n * case.batch, -1)
                 if len({len(t) for t in v}) == 1 else v * n)
    return logits, params, kw


def _assert_in_support(tokens, keep, what, rows=None, uniforms=None, greedy=None, batch=None, case=None):
    """Every token is an int64 id in [0, vocab) that the law's distribution gives positive
    probability (``keep``: the brute-force kept set; a greedy row's is its argmax, ties to the
    smallest id), for each row in ``rows`` (default all). ``batch``: rows are tiles of a batch
    that size (named by their row in it)."""
    tokens = tokens.detach().cpu()
    n, vocab = keep.shape
    assert tokens.dtype == torch.int64 and tokens.shape == (n,), (
        f"{what}: tokens must be int64 of shape ({n},), got {tokens.dtype} {tuple(tokens.shape)}")
    inside = (tokens >= 0) & (tokens < vocab)
    ok = inside.clone()
    ok[inside] = keep[inside.nonzero().flatten(), tokens[inside]]
    bad = ~ok if rows is None else (~ok & rows)
    if bad.any():
        i = int(bad.nonzero()[0])
        r = i % batch if batch else i
        t = int(tokens[i])
        at = f" for u = {float(uniforms[i])!r}" if uniforms is not None else ""
        kept = keep[i].nonzero().flatten().tolist()
        if not 0 <= t < vocab:
            why = f"is not a token id (vocab {vocab})"
        elif greedy is not None and bool(greedy[i]):
            why = (f"has probability 0: a greedy row (temperature 0) must return the argmax after penalties "
                   f"and bias, ties to the smallest id, here token {kept[0]}")
        else:
            why = (f"has probability 0 under sampling_probs: the pinned filters keep only "
                   f"{kept if len(kept) <= 12 else kept[:12] + ['...']}")
        raise AssertionError(f"{what}: row {r} drew token {t}{at}, which {why} "
                             f"({int(bad.sum())} of {n} draws outside the support)"
                             + (f"\n  case: {case!r}" if case is not None else ""))


# --------------------------------------------------------------------------- oracle + differential
@given(case=sampling_cases(kinds=("normal",), dtypes=("float32", "float64")))
def test_probs_match_brute_force(impl, reference, device, case):
    """Tie-free logits (float32/float64 normals): support == the brute-force kept set exactly;
    probabilities within the tolerance rule."""
    oracle = sampling_oracle(case)
    assume(oracle.ambiguous is None)
    ref = _probs(reference, case, device)
    _assert_probs(_probs(impl, case, device), ref, oracle, case)


@given(case=st.one_of(sampling_cases(kinds=("integer",)),
                      sampling_cases(kinds=("normal",), dtypes=("float16", "bfloat16"))))
def test_probs_match_brute_force_with_ties(impl, reference, device, case):
    """Logits with exact ties (small integers; float16/bfloat16 normals): the tie rules of top-k,
    top-p, min-p and greedy on generated cases; same checks as the tie-free test."""
    oracle = sampling_oracle(case)
    assume(oracle.ambiguous is None)
    ref = _probs(reference, case, device)
    _assert_probs(_probs(impl, case, device), ref, oracle, case)


def _explicit(values, **kw):
    return SamplingCase(1, len(values), kw.pop("dtype", "float32"), 0, kind="explicit",
                        values=tuple(float(v) for v in values), **kw)


L = math.log


class Pin(NamedTuple):
    """A hand-made case of one pinned rule: the tokens it gives positive probability, and the
    planted bug of spec_tests/sampling/mutants.py that the case alone catches (the proof that
    it tests its rule)."""
    case: SamplingCase
    expected: set
    mutant: str


PINNED = {
    # top-k
    "ties at the k-th value are kept": Pin(_explicit([3, 2, 2, 1, 0], top_k=(2,)), {0, 1, 2}, "top_k_breaks_ties"),
    "top_k = 1 keeps every tied maximum": Pin(_explicit([1, 3, 3, 0], top_k=(1,)), {1, 2}, "top_k_breaks_ties"),
    "top_k = vocab keeps everything": Pin(_explicit([1, 0, -1], top_k=(3,)), {0, 1, 2}, "top_k_clamped_below_vocab"),
    "top_k > vocab disables": Pin(_explicit([1, 0, -1], top_k=(7,)), {0, 1, 2}, "top_k_clamped_below_vocab"),
    # top-p
    "the token that crosses p is kept": Pin(_explicit([L(5), L(3), L(2)], top_p=(0.7,)), {0, 1},
                                            "top_p_drops_crossing_token"),
    "top-p on the top-k survivors, renormalised": Pin(
        _explicit([L(4), L(3), L(2), L(1)], top_k=(2,), top_p=(0.5,)), {0}, "top_p_full_vocab"),
    "top-p keeps a tie group whole": Pin(_explicit([1, 1, 1, 0], top_p=(0.2,)), {0, 1, 2}, "top_p_splits_ties"),
    "top_p just above 0 keeps the whole top tie group": Pin(_explicit([2, 2, 1], top_p=(1e-9,)), {0, 1},
                                                            "top_p_splits_ties"),
    "disabled stages keep everything, down to masses below float32 rounding of 1": Pin(
        _explicit([0, -20, -25, -30], top_k=(0,), top_p=(1.0,), min_p=(0.0,)), {0, 1, 2, 3},
        "top_p_one_not_disabled"),
    # min-p
    "min-p is relative to the max after temperature": Pin(
        _explicit([0, -1, -3], temperature=(0.5,), min_p=(0.2,)), {0}, "min_p_untempered"),
    "min_p = 1 keeps the maxima": Pin(_explicit([2, 1, 2, 0], min_p=(1.0,)), {0, 2}, "min_p_strict"),
    # penalties and bias
    "penalties come before temperature": Pin(
        _explicit([0, 0, 0], temperature=(0.5,), presence_penalty=(1.0,), top_p=(0.95,), output=((1,),)),
        {0, 1, 2}, "penalties_after_temperature"),
    "repetition penalty divides positive, multiplies negative logits": Pin(   # [1, 1, -2, -1.5]
        _explicit([2, 1, -1, -1.5], repetition_penalty=(2.0,), top_k=(3,), prompt=((0, 2),)), {0, 1, 3},
        "repetition_penalty_divides_all"),
    "a huge repetition penalty sends a seen negative logit to probability 0": Pin(
        _explicit([2, -1, 0.5], repetition_penalty=(1e30,), prompt=((0, 1),)), {0, 2},
        "repetition_penalty_divides_all"),
    "presence and frequency penalties count output tokens only": Pin(   # [1, -1.5, 0]
        _explicit([1, 0.5, 0], presence_penalty=(1.0,), frequency_penalty=(0.5,), top_k=(2,),
                  prompt=((0,),), output=((1, 1),)), {0, 2}, "presence_penalty_sees_prompt"),
    "logit bias comes after the penalties": Pin(   # x/r + b = [-0.5, 1, 0]; (x + b)/r = [0.25, 1, 0]
        _explicit([2, 1, 0], repetition_penalty=(2.0,), bias=(((0, -1.5),),), top_k=(2,), prompt=((0,),)),
        {1, 2}, "bias_before_penalties"),
    "logit bias -inf bans a token at any temperature": Pin(
        _explicit([5, 1, 0], banned=((0, 0),), temperature=(10.0,)), {1, 2}, "logit_bias_clamped_100"),
    # temperature
    "temperature 0 is greedy, ties to the smallest id": Pin(
        _explicit([1, 3, 3, 2], temperature=(0.0,)), {1}, "greedy_as_tiny_temperature"),
    "a temperature just above 0 samples: a tie at the max is kept": Pin(
        _explicit([2, 5, 5, 1], temperature=(1e-6,)), {1, 2}, "tiny_temperature_is_greedy"),
    "a temperature just above 0 does not overflow": Pin(   # 8 / 2e-38 overflows float32
        _explicit([8, 8, 1], temperature=(2e-38,)), {0, 1}, "temperature_divides_raw_logits"),
    "a huge temperature flattens the kept set": Pin(
        _explicit([3, 0, -3], temperature=(1e30,)), {0, 1, 2}, "temperature_clamped_to_2"),
    # one element
    "vocab 1 with every stage on": Pin(
        _explicit([0.3], temperature=(0.5,), top_k=(2,), top_p=(0.1,), min_p=(1.0,), repetition_penalty=(2.0,),
                  presence_penalty=(1.0,), prompt=((0,),), output=((0,),)), {0}, "top_k_clamped_below_vocab"),
}


@pytest.mark.parametrize("name", list(PINNED))
def test_pinned_semantics(impl, reference, device, name):
    """Hand-made cases of every pinned rule and legal boundary value: exactly the tokens with
    positive probability, values within the tolerance rule. Each names the mutant it catches."""
    case, expected, _ = PINNED[name]
    oracle = sampling_oracle(case)
    assert oracle.ambiguous is None, oracle.ambiguous
    assert set((oracle.probs[0] > 0).nonzero().flatten().tolist()) == expected   # the oracle agrees
    probs = _probs(impl, case, device)
    got = set((probs[0] > 0).nonzero().flatten().tolist())
    assert got == expected, f"{name}: positive probability on {sorted(got)}, pinned {sorted(expected)}"
    _assert_probs(probs, _probs(reference, case, device), oracle, case, name=name)


@given(case=sampling_cases(dtypes=("float64",), kinds=("normal",), greedy=False, openai_penalties=False))
def test_matches_transformers_warpers(impl, device, case):
    """transformers' RepetitionPenalty -> SequenceBias -> Temperature -> TopK -> TopP -> MinP chain
    (float64) gives the same distribution where the two agree: no ties (HF's top-p splits tie
    groups by sort order), no presence/frequency penalties (HF has none)."""
    pytest.importorskip("transformers", reason="transformers is a test extra (pip install .[test])")
    from transformers.generation import logits_process as lp
    oracle = sampling_oracle(case)
    assume(oracle.ambiguous is None)
    logits = case.logits()
    expected = torch.zeros_like(logits)
    biases = case.bias_dicts()
    for r in range(case.batch):
        scores = logits[r:r + 1].clone()
        seen = (list(case.prompt[r]) if case.prompt else []) + (list(case.output[r]) if case.output else [])
        ids = torch.tensor([seen], dtype=torch.long).reshape(1, -1)
        chain = []
        if case.row("repetition_penalty", r) != 1 and seen:
            chain.append(lp.RepetitionPenaltyLogitsProcessor(float(case.row("repetition_penalty", r))))
        if biases and biases[r]:
            chain.append(lp.SequenceBiasLogitsProcessor({(t,): float(b) for t, b in biases[r].items()}))
        t = case.row("temperature", r)
        if t != 1:
            chain.append(lp.TemperatureLogitsWarper(float(t)))
        if case.row("top_k", r) > 0:
            chain.append(lp.TopKLogitsWarper(int(case.row("top_k", r))))
        if case.row("top_p", r) < 1:
            chain.append(lp.TopPLogitsWarper(float(case.row("top_p", r))))
        if case.row("min_p", r) > 0:
            chain.append(lp.MinPLogitsWarper(float(case.row("min_p", r))))
        for proc in chain:
            scores = proc(ids, scores)
        expected[r] = torch.softmax(scores, dim=-1)[0]
    probs = _probs(impl, case, device).cpu()
    assert torch.equal(probs > 0, expected > 0), (
        f"support differs from transformers': ours {(probs > 0).int().tolist()}, "
        f"HF {(expected > 0).int().tolist()}\n  case: {case!r}")
    torch.testing.assert_close(probs, expected, rtol=0, atol=1e-12)


def _assert_draws(tokens, oracle_probs, u, rows=None, what="inverse CDF"):
    """tokens[r] is the first t with C_t > u_r (C the oracle's CDF), for every row r in ``rows``
    whose u is clear of the steps (oracles.step_clearance); returns how many rows were decided."""
    tokens = tokens.detach().cpu()
    cdf = oracle_probs.cumsum(dim=1)
    expected = (cdf <= u[:, None]).sum(dim=1).clamp(max=cdf.shape[1] - 1)
    clear = (cdf - u[:, None]).abs().min(dim=1).values > step_clearance(cdf.shape[1])
    if rows is not None:
        clear &= rows
    bad = (clear & (tokens != expected)).nonzero().flatten().tolist()
    assert not bad, (f"{what}: row {bad[0]} drew token {int(tokens[bad[0]])}, the oracle CDF gives "
                     f"{int(expected[bad[0]])} for u = {float(u[bad[0]])!r}")
    return int(clear.sum())


# (vocab, kind, seed, temperature of the top-p-only row): at 128,256 tokens a top-p 0.9 cut at
# T = 1 falls among thousands of tokens of mass ~1e-5 each, within float32 summation error of p
# (a decision the contract leaves open), so that row runs cooler there.
LARGE = [(2000, "normal", 1, 1.0), (2000, "integer", 2, 1.0), (2000, "normal", 3, 1.0), (128256, "normal", 4, 0.5)]


def _large(vocab, kind, seed, t1) -> SamplingCase:
    return SamplingCase(4, vocab, "float32", seed, kind=kind, scale=3.0 if kind == "normal" else 1.0,
                        temperature=(0.7, t1, 1.3, 0.9), top_k=(50, 0, 1200, 0),
                        top_p=(0.9, 0.9, 0.95, 1.0), min_p=(0.0, 0.0, 0.02, 0.05))


def _large_uniforms(case: SamplingCase) -> torch.Tensor:
    return torch.rand(case.batch, generator=torch.Generator().manual_seed(case.seed), dtype=torch.float64)


@pytest.mark.parametrize("vocab,kind,seed,t1", LARGE)
def test_large_vocab_matches_brute_force(impl, reference, device, vocab, kind, seed, t1):
    """Realistic vocabularies, where buckets crowd and ties are many, up to Llama 3's 128,256
    (the largest size in the suite): typical engine settings, top_k above the fast-path limit,
    top-p alone, min-p; support exact, values by the rule; the token drawn for a random u has
    positive probability."""
    case = _large(vocab, kind, seed, t1)
    oracle = sampling_oracle(case)
    assert oracle.ambiguous is None, oracle.ambiguous
    _assert_probs(_probs(impl, case, device), _probs(reference, case, device), oracle, case)
    u = _large_uniforms(case)
    tokens = impl.get("sample")(case.logits(device), case.params(), None, uniforms=u.to(device))
    _assert_in_support(tokens, oracle.keep, f"vocab {vocab}", uniforms=u)


@pytest.mark.parametrize("vocab,kind,seed,t1", LARGE)
@pytest.mark.choice(INVERSE_CDF)
def test_large_vocab_draw_is_the_inverse_cdf(impl, device, vocab, kind, seed, t1):
    """The same realistic vocabularies: the token drawn for a random u is the oracle CDF's (in
    token-id order) unless u is near a step."""
    case = _large(vocab, kind, seed, t1)
    oracle = sampling_oracle(case)
    u = _large_uniforms(case)
    tokens = impl.get("sample")(case.logits(device), case.params(), None, uniforms=u.to(device))
    _assert_draws(tokens, oracle.probs, u)


def _rows_of(oracle: SamplingOracle, rows: torch.Tensor) -> SamplingOracle:
    return SamplingOracle(oracle.probs[rows], oracle.keep[rows], None,
                          z_tol=tuple(t for t, r in zip(oracle.z_tol, rows.tolist()) if r))


@settings(max_examples=_scaled(10))
@given(case=structure_cases())
def test_structure_matches_brute_force(impl, reference, device, case):
    """Generated cases shaped like the optimized sampler's seams: vocabularies around multiples
    of 256 (two-level inverse CDF, ragged ends), top_k around 16, 128 and 256 (fused-tail blocks,
    its limit, the fast-path limit) next to top-p-only and greedy rows, batches around 64 (row
    blocks). Every row whose decisions are clear of float32 rounding: support exact, values by
    the rule, and the token drawn for a random u has positive probability (a greedy row's: its
    argmax)."""
    oracle = sampling_oracle(case)
    clear = ~torch.tensor(oracle.ambiguous_rows, dtype=torch.bool)
    assume(bool(clear.any()))
    probs = _probs(impl, case, device)
    ref = _probs(reference, case, device)
    _assert_probs(probs[clear.to(probs.device)], ref[clear.to(ref.device)], _rows_of(oracle, clear), case)
    u = torch.rand(case.batch, generator=torch.Generator().manual_seed(case.seed), dtype=torch.float64)
    tokens = impl.get("sample")(case.logits(device), case.params(), None, uniforms=u.to(device))
    greedy = torch.tensor([case.row("temperature", r) == 0 for r in range(case.batch)])
    _assert_in_support(tokens, oracle.keep, "sample with uniforms", rows=clear, uniforms=u, greedy=greedy, case=case)


@settings(max_examples=_scaled(5))
@given(case=structure_cases())
@pytest.mark.choice(INVERSE_CDF)
def test_structure_draw_is_the_inverse_cdf(impl, device, case):
    """The same generated cases: on every row clear of float32 rounding, the token drawn for a
    random u is the oracle CDF's (in token-id order) unless u is near a step."""
    oracle = sampling_oracle(case)
    clear = ~torch.tensor(oracle.ambiguous_rows, dtype=torch.bool)
    assume(bool(clear.any()))
    u = torch.rand(case.batch, generator=torch.Generator().manual_seed(case.seed), dtype=torch.float64)
    tokens = impl.get("sample")(case.logits(device), case.params(), None, uniforms=u.to(device))
    assert tokens.dtype == torch.int64 and tokens.shape == (case.batch,)
    _assert_draws(tokens, oracle.probs, u, rows=clear)


# --------------------------------------------------------------------------- metamorphic
@given(case=sampling_cases(max_batch=4))
def test_row_independent_of_batch(impl, reference, device, case):
    """A row's distribution does not depend on the other rows or on its per-row neighbours' params."""
    assume(case.batch > 1)
    oracle = sampling_oracle(case)
    assume(oracle.ambiguous is None)
    batched = _probs(impl, case, device)
    ref = _probs(reference, case, device)
    for r in range(case.batch):
        alone = _probs(impl, case.select_row(r), device)
        assert torch.equal(alone[0] > 0, batched[r] > 0), f"row {r}: support changes with the batch"
        _within_rule(alone[0], batched[r], ref[r], oracle.probs[r], 4.0, f"row {r} alone vs batched", case,
                     oracle.z_tol[r])


@given(case=sampling_cases(greedy=False), data=st.data())
def test_vocab_permutation_permutes_probs(impl, reference, device, case, data):
    """Renaming tokens (logits columns, bias keys, seen tokens) renames the distribution."""
    oracle = sampling_oracle(case)
    assume(oracle.ambiguous is None)
    perm = data.draw(st.permutations(range(case.vocab)), label="perm")   # new column j = old perm[j]
    inv = {old: new for new, old in enumerate(perm)}
    values = case.logits(dtype=torch.float64)[:, perm].flatten().tolist()
    moved = case.with_(kind="explicit", values=tuple(values),
                       bias=tuple(tuple((inv[t], b) for t, b in row) for row in case.bias),
                       banned=tuple((r, inv[t]) for r, t in case.banned),
                       prompt=tuple(tuple(inv[t] for t in row) for row in case.prompt),
                       output=tuple(tuple(inv[t] for t in row) for row in case.output))
    a = _probs(impl, moved, device)
    b = _probs(impl, case, device)[:, perm]
    assert torch.equal(a > 0, b > 0), "support is not permutation-equivariant"
    _within_rule(a, b, _probs(reference, case, device)[:, perm], oracle.probs[:, perm], 4.0,
                 "permuted vocab", case, oracle.z_tol)


def test_params_as_tensors_lists_and_scalars_agree(impl, device):
    """Per-row params may be scalars, lists or tensors; logit_bias a dict, dicts or a dense tensor."""
    from reference.sampling import SamplingParams
    fn = impl.get("sampling_probs")
    x = SamplingCase(2, 9, "float32", 5).logits(device)
    bias = {1: 0.5, 4: -math.inf}
    dense = torch.zeros(9, device=device)
    dense[1], dense[4] = 0.5, -math.inf
    forms = [
        SamplingParams(temperature=0.8, top_k=5, top_p=0.9, logit_bias=bias),
        SamplingParams(temperature=[0.8, 0.8], top_k=[5, 5], top_p=[0.9, 0.9], logit_bias=[bias, bias]),
        SamplingParams(temperature=torch.tensor([0.8, 0.8]), top_k=torch.tensor([5, 5]),
                       top_p=torch.tensor(0.9), logit_bias=dense),
        SamplingParams(temperature=0.8, top_k=5, top_p=0.9, logit_bias=dense.expand(2, 9).clone()),
    ]
    results = [fn(x, p) for p in forms]
    for r in results[1:]:
        torch.testing.assert_close(r, results[0], rtol=0, atol=0)


# --------------------------------------------------------------------------- distributional
# The law of the draw: any uniforms give tokens of positive probability (deterministically), and
# generator draws follow the distribution. Which token a given u gives is the reference's choice.
def _support_uniforms(n: int) -> torch.Tensor:
    """n uniforms: the two ends of [0, 1) (0 and the largest float64 below 1) and a grid between."""
    grid = (torch.arange(n - 2, dtype=torch.float64) + 0.5) / (n - 2)
    return torch.cat([torch.tensor([0.0, ONE_MINUS], dtype=torch.float64), grid])


@given(case=sampling_cases(max_batch=4))
def test_sample_with_uniforms_draws_inside_the_support(impl, device, case):
    """Whatever the uniforms (0, the largest float64 below 1 and a grid between, each row tiled 32
    times): every token drawn is an int64 id that the distribution gives positive probability (the
    brute-force kept set; a greedy row's is its argmax, ties to the smallest id); the same uniforms
    give the same tokens; the global RNG is untouched. (Which token a given u gives is the
    reference's choice, next tests.)"""
    oracle = sampling_oracle(case)
    clear = ~torch.tensor(oracle.ambiguous_rows, dtype=torch.bool)
    assume(bool(clear.any()))
    n = 32
    logits, params, kw = _tiled(case, n, device)
    u = _support_uniforms(n).repeat_interleave(case.batch)     # row i * batch + r gets the i-th
    sample = impl.get("sample")
    before = torch.random.get_rng_state()
    tokens = sample(logits, params, None, uniforms=u.to(device), **kw)
    greedy = torch.tensor([case.row("temperature", r) == 0 for r in range(case.batch)]).repeat(n)
    _assert_in_support(tokens, oracle.keep.repeat(n, 1), "sample with uniforms", rows=clear.repeat(n),
                       uniforms=u, greedy=greedy, batch=case.batch, case=case)
    again = sample(logits, params, None, uniforms=u.to(device), **kw)
    assert torch.equal(tokens.cpu(), again.cpu()), (
        f"sample with the same uniforms gave other tokens (rows {(tokens != again).nonzero().flatten().tolist()[:8]}): "
        f"uniforms must make the draw a deterministic function of the inputs\n  case: {case!r}")
    assert torch.equal(torch.random.get_rng_state(), before), "sample with uniforms used the global RNG"


@given(case=sampling_cases(max_batch=1, max_vocab=24))
@pytest.mark.choice(INVERSE_CDF)
def test_sample_with_uniforms_induces_probs_exactly(impl, device, case):
    """Exact: u on a grid of N points, (j + 1/2)/N, lands on each token N*q +- 2 times (inverse CDF)."""
    oracle = sampling_oracle(case)
    assume(oracle.ambiguous is None)
    n = 1024
    logits, params, kw = _replicated(case, n, device)
    u = (torch.arange(n, dtype=torch.float64, device=device) + 0.5) / n
    tokens = impl.get("sample")(logits, params, None, uniforms=u, **kw)
    assert tokens.dtype == torch.int64 and tokens.shape == (n,)
    counts = torch.bincount(tokens.cpu(), minlength=case.vocab).double()
    expected = oracle.probs[0] * n
    worst = float((counts - expected).abs().max())
    assert worst <= 2.0, (f"grid of {n} uniforms: counts {counts.int().tolist()} vs N*q "
                          f"{[round(v, 1) for v in expected.tolist()]} (off by {worst:.1f})\n  case: {case!r}")


def _ends(device, dtype, vocab):
    """Row 0: token 0 banned; row 1: every token after 2 banned (its float32 cumulative sum ends
    at 1 - 2^-23, below 1 - 2^-40 rounded to float32)."""
    from reference.sampling import SamplingParams
    x = torch.zeros(2, vocab, dtype=dtype, device=device)
    x[:, 0], x[:, 2] = 2.0, 1.0
    bias = torch.zeros(2, vocab, dtype=dtype, device=device)
    bias[0, 0], bias[1, 3:] = -math.inf, -math.inf
    return x, SamplingParams(logit_bias=bias)


@pytest.mark.parametrize("vocab", [5, 1024])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sample_uniforms_at_the_ends_stay_in_the_support(impl, device, dtype, vocab):
    """The two ends of [0, 1), u = 0 and u = 1 - 2^-40 (1.0 in float32, above a float32 cumulative
    sum that ends at 1 - 2^-23), in both rows: the token is an id of positive probability (row 0:
    any but the banned token 0; row 1: 0, 1 or 2), never a banned token nor an index past the
    vocab."""
    x, params = _ends(device, dtype, vocab)
    support = torch.ones(2, vocab, dtype=torch.bool)
    support[0, 0], support[1, 3:] = False, False
    for ends in ([0.0, 1.0 - 2.0 ** -40], [1.0 - 2.0 ** -40, 0.0]):
        u = torch.tensor(ends, dtype=torch.float64)
        tokens = impl.get("sample")(x, params, None, uniforms=u.to(device))
        _assert_in_support(tokens, support, f"uniforms {ends} (vocab {vocab}, {dtype})", uniforms=u)


@pytest.mark.parametrize("vocab", [5, 1024])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.choice(INVERSE_CDF)
def test_sample_uniforms_at_the_ends(impl, device, dtype, vocab):
    """The two ends of [0, 1): u = 0 is a legal uniform and draws the FIRST token with positive
    probability (token 0 is banned in row 0), and u = 1 - 2^-40 draws the LAST one (every token
    after 2 is banned in row 1; 1 - 2^-40 rounds to 1.0 in float32 and the float32 cumulative sum
    of that row's probabilities ends at 1 - 2^-23, below it, so a search that finds no crossing
    must still return the last positive token, never a token of probability 0 nor an index past
    the vocab). Both rows: the smallest t with C_t > u * C_total in exact arithmetic. Vocab 1024
    also takes the optimized sampler's two-level search (chunks of 256, three of them empty)."""
    x, params = _ends(device, dtype, vocab)
    u = torch.tensor([0.0, 1.0 - 2.0 ** -40], dtype=torch.float64, device=device)
    tokens = impl.get("sample")(x, params, None, uniforms=u).cpu()
    assert tokens.dtype == torch.int64 and tokens.shape == (2,), f"tokens {tokens.dtype} {tuple(tokens.shape)}"
    assert tokens.tolist() == [1, 2], (
        f"u = 0 must draw the first token with positive probability (1) and u = 1 - 2^-40 the last (2); "
        f"got {tokens.tolist()} (probabilities of the first tokens "
        f"{[[round(v, 4) for v in r[:6]] for r in impl.get('sampling_probs')(x, params).tolist()]})")


CHI_CASES = {
    "temperature, top-k, top-p": SamplingCase(1, 14, "float32", 11, scale=1.5, temperature=(0.8,),
                                              top_k=(9,), top_p=(0.9,)),
    "penalties, bias, min-p": SamplingCase(
        1, 12, "float32", 12, scale=1.0, temperature=(1.3,), min_p=(0.05,), repetition_penalty=(1.3,),
        presence_penalty=(0.5,), frequency_penalty=(0.25,), prompt=((0, 1, 2),), output=((3, 3, 4),),
        bias=(((5, 1.0), (6, -0.5)),)),
    "top-p over tie groups": SamplingCase(1, 16, "bfloat16", 13, kind="integer", scale=0.5, top_p=(0.8,),
                                          temperature=(0.6,)),
    # the same logits under two settings in one batch, rows interleaved: each row's own parameters
    # (4,000 draws per row: per-row parameter lists of 20,000 rows cost the reference ~2 s)
    "per-row settings": SamplingCase(
        2, 10, "float32", 0, kind="explicit",
        values=(1.2, 0.3, -0.5, 2.0, 0.9, -1.1, 0.0, 1.6, -0.2, 0.5) * 2,
        temperature=(0.5, 1.5), top_k=(4, 0), top_p=(1.0, 0.85), min_p=(0.0, 0.1)),
}
CHI_DRAWS = {"per-row settings": 8_000}    # total draws where not 20,000


@pytest.mark.parametrize("name", list(CHI_CASES))
def test_sample_frequencies_chi_square(impl, device, name):
    """Statistical: 20,000 draws from a seeded torch.Generator (8,000 for the two-row case; the
    case's rows tiled); no draw outside the support (exact), then a chi-square goodness-of-fit
    test of each row on the support (cells lumped to expect >= 5). Fails iff a p-value < 1e-6 /
    rows: false-alarm rate <= 1e-6 per test (one fixed seed, so for one implementation it either
    always passes or always fails). Tiling also tests that rows are independent draws (shared
    randomness collapses the counts). Power: the mutant sample_ignores_temperature of
    spec_tests/sampling/mutants.py (same support, wrong weights) fails it with p-value ~ 0."""
    case = CHI_CASES[name]
    oracle = sampling_oracle(case)
    assert oracle.ambiguous is None
    n = CHI_DRAWS.get(name, 20_000) // case.batch
    logits, params, kw = _tiled(case, n, device)
    gen = torch.Generator(device=device).manual_seed(20240601)
    tokens = impl.get("sample")(logits, params, gen, **kw).cpu()
    assert_follows_probs(tokens, case, oracle, n, name)


def assert_follows_probs(tokens: torch.Tensor, case: SamplingCase, oracle: SamplingOracle, n: int, name: str):
    """``tokens``: n tiles of the case's batch drawn with a generator. No draw outside the support
    (exact), then per row a chi-square test on the support (cells lumped to expect >= 5) at the
    false-alarm rate ALPHA / rows."""
    from scipy import stats
    _assert_in_support(tokens, oracle.keep.repeat(n, 1), f"{name}: {n * case.batch} generator draws",
                       batch=case.batch)
    alpha = ALPHA / case.batch
    for r in range(case.batch):
        counts = torch.bincount(tokens[r::case.batch], minlength=case.vocab).double()
        q = oracle.probs[r]
        support = q > 0
        obs, exp = lumped(counts[support].tolist(), (q[support] * n).tolist())
        if len(exp) < 2:
            continue  # one cell: every draw is the one token, already checked exactly
        pvalue = stats.chisquare(obs, exp).pvalue
        if pvalue < alpha:
            resid = ((counts - q * n) / (q * n).clamp(min=1.0).sqrt()).abs()
            t = int(resid.argmax())
            raise AssertionError(
                f"{name}, row {r}: the draws do not follow sampling_probs (chi-square p-value {pvalue:.3g} < "
                f"{alpha:g}); token {t} was drawn {int(counts[t])} times in {n}, its probability "
                f"{float(q[t]):.4g} expects {float(q[t] * n):.0f}; observed {counts.int().tolist()} vs expected "
                f"{[round(v) for v in (q * n).tolist()]}")


def test_sample_reproducible_and_in_support(impl, reference, device):
    """The generator is the only randomness: the same seed gives the same tokens, the global RNG is
    untouched, and a second call with the same generator draws afresh (its state moves on, and
    all 64 rows repeating has probability < 1e-6 under the law); every draw has positive
    probability; greedy rows return the first argmax (ties to the smallest id) whatever the
    generator."""
    sample = impl.get("sample")
    from reference.sampling import SamplingParams
    x = SamplingCase(64, 50, "float32", 3, kind="integer").logits(device)
    params = SamplingParams(temperature=[0.0, 0.7, 1.0, 1.5] * 16, top_k=[0, 1, 20, 0] * 16,
                            top_p=[1.0, 1.0, 0.8, 0.6] * 16, min_p=[0.0, 0.0, 0.0, 0.1] * 16)
    probs = impl.get("sampling_probs")(x, params)
    before = torch.random.get_rng_state()
    runs = []
    for seed in (1, 1, 2):
        gen = torch.Generator(device=device).manual_seed(seed)
        runs.append(sample(x, params, gen))
    assert torch.equal(runs[0], runs[1]), "same generator seed, different tokens"
    state = gen.get_state()
    runs.append(sample(x, params, gen))
    assert torch.equal(torch.random.get_rng_state(), before), "sample with a generator used the global RNG"
    ref = reference.get("sampling_probs")(x, params).double().cpu()
    repeat = float((ref ** 2).sum(dim=1).prod())           # P(a fresh draw repeats every row)
    assert repeat < ALPHA, repeat
    assert not torch.equal(runs[3], runs[2]), (
        "two calls with the same generator drew the same 64 tokens (probability "
        f"{repeat:.1e} for independent draws): sample must draw afresh from the generator's current state "
        "(a decode loop would repeat itself)")
    assert not torch.equal(gen.get_state(), state), "sample did not advance the generator it drew from"
    greedy = torch.arange(64) % 4 == 0
    for tokens in runs:        # the support of the implementation's own sampling_probs (exact elsewhere)
        _assert_in_support(tokens, probs.cpu() > 0, "sample with a generator", greedy=greedy)
    first_max = x.argmax(dim=1).cpu()
    assert torch.equal(runs[2].cpu()[greedy], first_max[greedy]), (
        "temperature 0 must return the argmax, ties to the smallest id: got "
        f"{runs[2].cpu()[greedy].tolist()[:8]}..., argmax {first_max[greedy].tolist()[:8]}...")


# --------------------------------------------------------------------------- the seeded draw
# The reference's choice: how the generator is consumed (a float32 draw, torch.multinomial or an
# exponential race consume it otherwise and are told "token-exact ✗").
SEEDED = {
    # 256 rows over a broad distribution (a draw that differs from the contract's differs in most
    # rows), a few greedy rows (they consume their uniform too) and a filtered row setting.
    "broad": (SamplingCase(256, 50, "float32", 21, scale=1.0,
                           temperature=(1.0, 1.0, 0.0, 1.3) * 64, top_k=(0, 20, 0, 0) * 64,
                           top_p=(1.0, 0.9, 1.0, 0.95) * 64), 20240601),
    "penalties and bias": (SamplingCase(
        3, 12, "bfloat16", 22, temperature=(0.8, 1.2, 1e-4), min_p=(0.05, 0.0, 0.0), repetition_penalty=(1.3,) * 3,
        presence_penalty=(0.5,) * 3, frequency_penalty=(0.25,) * 3, prompt=((0, 1), (2,), ()),
        output=((3, 3), (), (4,)), bias=(((5, 1.0),), (), ((6, -0.5),))), 7),
}


def _contract_draw(case: SamplingCase, seed: int, device):
    """The contract's consumption of a generator seeded with ``seed``: one float64 U[0, 1) per
    row, ``torch.rand(batch, generator=g, dtype=torch.float64, device=device)``
    (reference.sampling.draw_uniforms). Returns (uniforms, the generator's state afterwards)."""
    from reference.sampling import draw_uniforms
    g = torch.Generator(device=device).manual_seed(seed)
    u = draw_uniforms(g, case.batch, device)
    return u, g.get_state()


def _assert_seeded_draw_pinned(impl, case: SamplingCase, seed: int, device):
    sample = impl.get("sample")
    gen = torch.Generator(device=device).manual_seed(seed)
    tokens = sample(case.logits(device), case.params(), gen, **case.kwargs())
    u, state = _contract_draw(case, seed, device)
    expected = sample(case.logits(device), case.params(), None, uniforms=u, **case.kwargs())
    assert torch.equal(tokens.cpu(), expected.cpu()), (
        f"sample(generator=g) drew {tokens.tolist()[:16]}..., but sample(uniforms=<the contract's draw "
        f"from the same seed>) gives {expected.tolist()[:16]}...: the generator must be consumed as "
        f"torch.rand(batch, dtype=float64) and the token found by inverse CDF\n  case: {case!r}")
    assert torch.equal(gen.get_state(), state), (
        "sample(generator=g) left g in another state than one torch.rand(batch, dtype=float64) "
        "does (it drew more, less or differently)")


@pytest.mark.parametrize("name", list(SEEDED))
@pytest.mark.choice(TORCH_RAND)
def test_seeded_draw_is_the_contracts_draw(impl, device, name):
    """sample(generator=g) == sample(uniforms=<the contract's draw from g's seed>), and g ends in
    the state that draw leaves: float32 uniforms, torch.multinomial, or a draw that skips greedy
    rows all differ."""
    case, seed = SEEDED[name]
    _assert_seeded_draw_pinned(impl, case, seed, device)


@settings(max_examples=_scaled(10))
@given(case=sampling_cases(max_batch=4))
@pytest.mark.choice(TORCH_RAND)
def test_seeded_draw_is_the_contracts_draw_generated(impl, device, case):
    """The same pin on generated cases (every parameter, dtype and tie structure)."""
    _assert_seeded_draw_pinned(impl, case, case.seed, device)


# --------------------------------------------------------------------------- omitted arguments
DEFAULTS = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0, presence_penalty=0.0,
                frequency_penalty=0.0, logit_bias=None)     # the documented defaults (SamplingParams)


@st.composite
def _default_cases(draw):
    """Plain logits with vocabularies past the common default-k values (40, 50, 100)."""
    return SamplingCase(batch=draw(st.integers(1, 3)), vocab=draw(st.integers(1, 300)),
                        dtype=draw(st.sampled_from(("float32", "float16", "bfloat16", "float64"))),
                        seed=draw(st.integers(0, 2**32 - 1)), kind=draw(st.sampled_from(("normal", "integer"))),
                        scale=draw(st.sampled_from((0.5, 2.0, 4.0))))


@settings(max_examples=_scaled(10))
@example(case=SamplingCase(2, 120, "float32", 5)).via("mutant:default_top_k_50")  # vocab 120 > 50
@given(case=_default_cases())
def test_omitted_arguments_are_the_documented_defaults(impl, reference, device, case):
    """Omitting an optional argument equals passing its documented default: ``params`` omitted =
    None = SamplingParams() = every field at its documented value = plain softmax (every stage
    disabled); ``prompt_tokens`` / ``output_tokens`` omitted = None = no token seen (penalties
    then change nothing); ``sample``'s omitted ``params`` likewise, with uniforms or a generator."""
    from reference.sampling import SamplingParams
    fn, sample = impl.get("sampling_probs"), impl.get("sample")
    x = case.logits(device)
    oracle = sampling_oracle(case)            # the case has every field at its default
    ref = reference.get("sampling_probs")(x, SamplingParams())
    forms = {
        "sampling_probs(logits)": fn(x),
        "sampling_probs(logits, None)": fn(x, None),
        "sampling_probs(logits, SamplingParams())": fn(x, SamplingParams()),
        "every documented default given": fn(x, SamplingParams(**DEFAULTS), prompt_tokens=None, output_tokens=None),
    }
    for name, probs in forms.items():
        _assert_probs(probs, ref, oracle, case, name=name)
    penalties = SamplingParams(repetition_penalty=1.7, presence_penalty=0.5, frequency_penalty=-0.3)
    for name, probs in {"penalties, tokens omitted": fn(x, penalties),
                        "penalties, tokens None": fn(x, penalties, prompt_tokens=None, output_tokens=None),
                        "penalties, no tokens": fn(x, penalties, prompt_tokens=[[]] * case.batch,
                                                   output_tokens=[[]] * case.batch)}.items():
        _assert_probs(probs, ref, oracle, case, name=name)
    u = torch.rand(case.batch, generator=torch.Generator().manual_seed(case.seed), dtype=torch.float64).to(device)
    given_ = sample(x, SamplingParams(**DEFAULTS), None, prompt_tokens=None, output_tokens=None, uniforms=u)
    for name, tokens in {"sample(logits, uniforms=u)": sample(x, uniforms=u),
                         "sample(logits, None, uniforms=u)": sample(x, None, uniforms=u)}.items():
        assert torch.equal(tokens.cpu(), given_.cpu()), f"{name} != with every default given\n  case: {case!r}"
    seeded = sample(x, generator=torch.Generator(device=device).manual_seed(case.seed))
    explicit = sample(x, SamplingParams(), torch.Generator(device=device).manual_seed(case.seed))
    assert torch.equal(seeded.cpu(), explicit.cpu()), f"sample(logits, generator=g) != with SamplingParams()\n  case: {case!r}"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_empty_batch(impl, device, dtype):
    """batch 0 is legal: sampling_probs gives (0, vocab) in the compute dtype, sample (0,) int64
    (with a generator, which draws nothing, or with uniforms of shape (0,))."""
    from conformance.strategies import DTYPES
    from reference.sampling import SamplingParams
    x = torch.zeros(0, 7, dtype=DTYPES[dtype], device=device)
    params = SamplingParams(temperature=0.7, top_k=3, top_p=0.9, min_p=0.1)
    probs = impl.get("sampling_probs")(x, params)
    want = torch.float64 if dtype == "float64" else torch.float32
    assert probs.shape == (0, 7) and probs.dtype == want, f"probs {tuple(probs.shape)} {probs.dtype}"
    gen = torch.Generator(device=device).manual_seed(3)
    before = gen.get_state()
    for tokens in (impl.get("sample")(x, params, gen),
                   impl.get("sample")(x, params, uniforms=torch.zeros(0, dtype=torch.float64, device=device))):
        assert tokens.shape == (0,) and tokens.dtype == torch.int64, f"tokens {tuple(tokens.shape)} {tokens.dtype}"
    assert torch.equal(gen.get_state(), before), "an empty batch drew random numbers"


# --------------------------------------------------------------------------- bad input
def _with_logits(make):
    """A Bad change that replaces the logits by ``make(valid logits)`` (a new tensor)."""
    return lambda kw: {**kw, "logits": make(kw["logits"])}


def _set(x, where, value):
    x = x.clone()
    x[where] = value
    return x


def _params(**fields):
    from reference.sampling import SamplingParams
    return {"params": SamplingParams(**fields)}


# Valid call: logits (2, 6) float32, default params (and a seeded generator for sample).
BAD = [
    Bad("top_p = 0", _params(top_p=0.0), ValueError, ("top_p",)),
    Bad("top_p > 1", _params(top_p=1.5), ValueError, ("top_p",)),
    Bad("top_p NaN", _params(top_p=math.nan), ValueError, ("top_p",)),
    Bad("top_k < 0", _params(top_k=-1), ValueError, ("top_k",)),
    Bad("top_k float", _params(top_k=1.5), TypeError, ("top_k",)),
    Bad("top_k bool", _params(top_k=True), TypeError, ("top_k",)),
    Bad("temperature < 0", _params(temperature=-0.5), ValueError, ("temperature",)),
    Bad("temperature NaN", _params(temperature=math.nan), ValueError, ("temperature",)),
    Bad("temperature string", _params(temperature="0.7"), TypeError, ("temperature",)),
    Bad("min_p > 1", _params(min_p=1.5), ValueError, ("min_p",)),
    Bad("min_p < 0", _params(min_p=-0.1), ValueError, ("min_p",)),
    Bad("repetition_penalty 0", _params(repetition_penalty=0.0), ValueError, ("repetition_penalty",)),
    Bad("presence_penalty inf", _params(presence_penalty=math.inf), ValueError, ("presence_penalty",)),
    Bad("frequency_penalty NaN", _params(frequency_penalty=math.nan), ValueError, ("frequency_penalty",)),
    Bad("per-row length", _params(top_p=[0.9, 0.8, 0.7]), ValueError, ("top_p",)),
    Bad("params not SamplingParams", dict(params=42), TypeError, ("params",)),
    Bad("logits rank 1", _with_logits(lambda x: x[0].clone()), ValueError, ("logits",)),
    Bad("logits int", _with_logits(lambda x: x.long()), TypeError, ("logits",)),
    Bad("logits list", _with_logits(lambda x: x.tolist()), TypeError, ("logits",)),
    Bad("logits empty vocab", _with_logits(lambda x: x[:, :0].clone()), ValueError, ("logits", "vocab")),
    Bad("NaN logits", lambda kw: {**_with_logits(lambda x: _set(x, (1, 2), math.nan))(kw),
                                  **_params(top_k=3, top_p=0.9)}, ValueError, ("logits", "NaN", "row 1")),
    Bad("NaN logits, top-p only", lambda kw: {**_with_logits(lambda x: _set(x, (1, 2), math.nan))(kw),
                                              **_params(top_p=0.9)}, ValueError, ("logits", "NaN", "row 1")),
    Bad("+inf logits", lambda kw: {**_with_logits(lambda x: _set(x, (0, 3), math.inf))(kw), **_params(top_k=2)},
        ValueError, ("logits row 0", "+inf")),
    Bad("row fully masked", _params(logit_bias=[None, {t: -math.inf for t in range(6)}]), ValueError,
        ("row 1", "masked")),
    Bad("bias shape", _params(logit_bias=torch.zeros(5)), ValueError, ("logit_bias",)),
    Bad("bias token", _params(logit_bias={6: 1.0}), ValueError, ("logit_bias",)),
    Bad("bias token -1", _params(logit_bias={-1: 1.0}), ValueError, ("logit_bias",)),   # not "the last token"
    Bad("bias NaN", _params(logit_bias={0: math.nan}), ValueError, ("logit_bias",)),
    Bad("bias +inf", _params(logit_bias={0: math.inf}), ValueError, ("logit_bias",)),
    Bad("bias rows", _params(logit_bias=[{0: 1.0}]), ValueError, ("logit_bias",)),
    Bad("prompt token", dict(prompt_tokens=[[6], []]), ValueError, ("prompt_tokens[0]",)),
    Bad("prompt float tensor", dict(prompt_tokens=[torch.tensor([0.5]), torch.tensor([1.0])]), TypeError,
        ("prompt_tokens[0]",)),
    Bad("output rows", dict(output_tokens=[[1]]), ValueError, ("output_tokens",)),
    Bad("output negative id", dict(output_tokens=[[1], [-1]]), ValueError, ("output_tokens[1]",)),
    Bad("penalty overflow", lambda kw: {**kw, "logits": kw["logits"].abs().clamp(max=1.0) * 1e38 + 1e37,
                                        **_params(repetition_penalty=1e-3),
                                        "prompt_tokens": [[0, 1, 2, 3, 4, 5]] * 2},
        ValueError, ("logits row 0", "+inf")),
    # every other validated field and form (a bad value for every validated argument)
    Bad("temperature inf", _params(temperature=math.inf), ValueError, ("temperature",)),
    Bad("temperature NaN in row 1", _params(temperature=[0.5, math.nan]), ValueError, ("temperature", "row 1")),
    Bad("temperature tensor of bools", _params(temperature=torch.tensor([True, False])), TypeError, ("temperature",)),
    Bad("top_k float tensor", _params(top_k=torch.tensor([1.0, 2.0])), TypeError, ("top_k",)),
    Bad("top_k negative in row 1", _params(top_k=[3, -2]), ValueError, ("top_k", "row 1")),
    Bad("top_p 2-D tensor", _params(top_p=torch.full((2, 1), 0.5)), ValueError, ("top_p",)),
    Bad("top_p 0 in a tensor", _params(top_p=torch.tensor([0.5, 0.0])), ValueError, ("top_p",)),
    Bad("min_p NaN", _params(min_p=math.nan), ValueError, ("min_p",)),
    Bad("min_p string", _params(min_p="0.1"), TypeError, ("min_p",)),
    Bad("repetition_penalty < 0", _params(repetition_penalty=-1.5), ValueError, ("repetition_penalty",)),
    Bad("repetition_penalty inf", _params(repetition_penalty=math.inf), ValueError, ("repetition_penalty",)),
    Bad("repetition_penalty NaN", _params(repetition_penalty=math.nan), ValueError, ("repetition_penalty",)),
    Bad("presence_penalty NaN", _params(presence_penalty=math.nan), ValueError, ("presence_penalty",)),
    Bad("presence_penalty None", _params(presence_penalty=None), TypeError, ("presence_penalty",)),
    Bad("frequency_penalty inf", _params(frequency_penalty=-math.inf), ValueError, ("frequency_penalty",)),
    Bad("bias a string", _params(logit_bias="0:1"), TypeError, ("logit_bias",)),
    Bad("bias int tensor", _params(logit_bias=torch.zeros(6, dtype=torch.int64)), TypeError, ("logit_bias",)),
    Bad("bias row not a dict", _params(logit_bias=[{0: 1.0}, 5]), TypeError, ("logit_bias[1]",)),
    Bad("bias dense NaN", _params(logit_bias=torch.full((2, 6), math.nan)), ValueError, ("logit_bias",)),
    Bad("bias dense +inf", _params(logit_bias=torch.full((6,), math.inf)), ValueError, ("logit_bias",)),
    Bad("bias overflows to +inf", lambda kw: {**kw, "logits": kw["logits"].abs().clamp(max=1.0) * 3e38,
                                              **_params(logit_bias={0: 3e38})},
        ValueError, ("logits row 0", "+inf")),
    Bad("logits rank 3", _with_logits(lambda x: x[None].clone()), ValueError, ("logits",)),
    Bad("logits bool", _with_logits(lambda x: x > 0), TypeError, ("logits",)),
    Bad("logits row all -inf", _with_logits(lambda x: _set(x, 1, -math.inf)), ValueError, ("row 1", "masked")),
    # a +inf logit banned by a -inf bias is NaN after the bias (raw logits hold no NaN): still an
    # error naming ITS row (row 1, at token 3: a check over the wrong axis names "row 3")
    Bad("+inf logit banned by a -inf bias, row 1", lambda kw: {**_with_logits(lambda x: _set(x, (1, 3), math.inf))(kw),
                                                               **_params(logit_bias=[None, {3: -math.inf}])},
        ValueError, ("logits", "row 1")),
    Bad("prompt an int", dict(prompt_tokens=5), TypeError, ("prompt_tokens",)),
    Bad("prompt a string", dict(prompt_tokens="ab"), TypeError, ("prompt_tokens",)),
    Bad("prompt rows", dict(prompt_tokens=[[1], [2], [3]]), ValueError, ("prompt_tokens",)),
    Bad("prompt 2-D tensor rows", dict(prompt_tokens=torch.zeros(3, 2, dtype=torch.int64)), ValueError,
        ("prompt_tokens",)),
    Bad("prompt 2-D tensor token", dict(prompt_tokens=torch.full((2, 2), 6)), ValueError, ("prompt_tokens",)),
    Bad("output float row", dict(output_tokens=[[0.5], [1]]), TypeError, ("output_tokens[0]",)),
    Bad("output bool tensor", dict(output_tokens=[torch.tensor([True]), torch.tensor([False])]), TypeError,
        ("output_tokens[0]",)),
    Bad("output token = vocab", dict(output_tokens=[[], [6]]), ValueError, ("output_tokens[1]",)),
    # one bad id among valid ones (a check of only the min or only the max passes these), in both
    # forms of the seen tokens; the message names the first row holding a bad id
    Bad("output negative id among valid ones", dict(output_tokens=[[1], [2, -1]]), ValueError, ("output_tokens[1]",)),
    Bad("output id = vocab among valid ones", dict(output_tokens=[[1], [6, 0]]), ValueError, ("output_tokens[1]",)),
    Bad("prompt 2-D tensor negative id among valid ones", dict(prompt_tokens=torch.tensor([[0, 1], [2, -1]])),
        ValueError, ("prompt_tokens[1]",)),
    Bad("prompt 2-D tensor id = vocab among valid ones", dict(prompt_tokens=torch.tensor([[0, 1], [6, 2]])),
        ValueError, ("prompt_tokens[1]",)),
    Bad("prompt 2-D tensor, bad ids in both rows", dict(prompt_tokens=torch.tensor([[6, 0], [-1, 2]])),
        ValueError, ("prompt_tokens[0]",)),
    # only a 2-D INTEGER tensor is a batch of token rows
    Bad("prompt 2-D float tensor", dict(prompt_tokens=torch.zeros(2, 1)), TypeError, ("prompt_tokens",)),
    Bad("prompt 2-D bool tensor", dict(prompt_tokens=torch.zeros(2, 1, dtype=torch.bool)), TypeError,
        ("prompt_tokens",)),
    Bad("prompt 3-D tensor", dict(prompt_tokens=torch.zeros(2, 1, 1, dtype=torch.int64)), TypeError,
        ("prompt_tokens",)),
    # a 1-D integer tensor of length batch is batch ids, not batch token-id sequences
    Bad("prompt 1-D int tensor of length batch", dict(prompt_tokens=torch.tensor([0, 1])), (TypeError, ValueError),
        ("prompt_tokens",)),
    # the integer check of a per-row tensor holds with no value to look at (batch 0)
    Bad("top_k empty float tensor, batch 0", lambda kw: {**kw, "logits": kw["logits"][:0].clone(),
                                                         **_params(top_k=torch.zeros(0))}, TypeError, ("top_k",)),
    # ... and so does the real-number check (a bool tensor holds no real numbers, whatever its length)
    Bad("temperature empty bool tensor, batch 0", lambda kw: {**kw, "logits": kw["logits"][:0].clone(),
                                                              **_params(temperature=torch.zeros(0, dtype=torch.bool))},
        TypeError, ("temperature",)),
]


def _valid(device, generator=None):
    kw = dict(logits=randn((2, 6), seed=7, device=device), **_params())
    if generator is not None:
        kw["generator"] = generator
    return kw


@bad_cases(BAD)
@pytest.mark.parametrize("fn_name", ["sampling_probs", "sample"])
def test_rejects_bad_input(impl, device, fn_name, bad):
    """A clear ValueError/TypeError naming the argument (or the row); the logits and the
    generator's state are left unchanged (no random number is drawn by a rejected call)."""
    if fn_name == "sample":
        gen = torch.Generator(device=device).manual_seed(7)
        assert_rejects(impl.get("sample"), _valid(device, gen), bad,
                       state=lambda: gen.get_state().tolist())
    else:
        assert_rejects(impl.get("sampling_probs"), _valid(device), bad)


def _uniforms(values):
    """A Bad change that passes ``uniforms=tensor(values)`` on the logits' device."""
    return lambda kw: {**kw, "uniforms": torch.tensor(values, device=kw["logits"].device)}


# Valid call for sample without a generator: logits (2, 6), default params.
BAD_RANDOMNESS = [
    Bad("no generator, no uniforms", {}, ValueError, ("generator",)),
    Bad("generator an int", dict(generator=1234), TypeError, ("generator",)),
    Bad("uniforms = 1", _uniforms([0.1, 1.0]), ValueError, ("uniforms",)),
    Bad("uniforms < 0", _uniforms([-0.1, 0.5]), ValueError, ("uniforms",)),
    Bad("uniforms NaN", _uniforms([math.nan, 0.5]), ValueError, ("uniforms",)),
    Bad("uniforms shape", _uniforms([0.1, 0.5, 0.2]), ValueError, ("uniforms",)),
    Bad("uniforms list", dict(uniforms=[0.1, 0.5]), TypeError, ("uniforms",)),
    Bad("uniforms int", _uniforms([0, 0]), TypeError, ("uniforms",)),
    Bad("uniforms 2-D", lambda kw: {**kw, "uniforms": torch.full((2, 1), 0.5, device=kw["logits"].device)},
        ValueError, ("uniforms",)),
    Bad("uniforms +inf", _uniforms([math.inf, 0.5]), ValueError, ("uniforms",)),
    Bad("generator a string", dict(generator="seed 1"), TypeError, ("generator",)),
]


@bad_cases(BAD_RANDOMNESS)
def test_sample_rejects_bad_randomness(impl, device, bad):
    """sample needs a torch.Generator on the logits' device or uniforms of shape (batch,) in
    [0, 1) (TypeError for the wrong kind, ValueError for a wrong value, naming the argument)."""
    assert_rejects(impl.get("sample"), _valid(device), bad)


@pytest.mark.gpu
def test_sample_rejects_generator_on_another_device(impl, device):
    """A CPU generator for CUDA logits is rejected (ValueError naming ``generator``), state unchanged."""
    gen = torch.Generator(device="cpu").manual_seed(1)
    bad = Bad("generator on the CPU", dict(generator=gen), ValueError, ("generator",))
    assert_rejects(impl.get("sample"), _valid(device), bad, state=lambda: gen.get_state().tolist())


@given(case=sampling_cases(max_batch=2))
def test_inputs_not_mutated_and_fresh_results(impl, reference, device, case):
    """logits, a dense bias tensor and token tensors are never modified; a second call with other
    logits of the same shape gets its own answer (no stale cache)."""
    from reference.sampling import SamplingParams
    x = case.logits(device)
    bias = torch.zeros(case.vocab, device=device)
    bias[0] = 0.25
    tokens = [torch.tensor(list(t) or [0]) for t in (case.output or ((0,),) * case.batch)]
    copies = (x.clone(), bias.clone(), [t.clone() for t in tokens])
    params = SamplingParams(temperature=[max(case.row("temperature", r), 0.1) for r in range(case.batch)],
                            top_k=list(case.top_k), top_p=list(case.top_p), min_p=list(case.min_p),
                            frequency_penalty=0.5, logit_bias=bias)
    gen = torch.Generator(device=device).manual_seed(case.seed)
    p1 = impl.get("sampling_probs")(x, params, output_tokens=tokens)
    impl.get("sample")(x, params, gen, output_tokens=tokens)
    assert torch.equal(x, copies[0]) and torch.equal(bias, copies[1]), "an input tensor was modified"
    assert all(torch.equal(a, b) for a, b in zip(tokens, copies[2])), "output_tokens was modified"
    y = torch.flip(x, dims=[1])
    p2 = impl.get("sampling_probs")(y, params, output_tokens=tokens)
    ref2 = reference.get("sampling_probs")(y, params, output_tokens=tokens)
    assert torch.equal(p2 > 0, ref2 > 0) or not torch.equal(p1, p2), "stale result for new logits"
