"""Sampling (course 01.05): the properties that define it.

``sampling.sampling_probs`` is the distribution and ``sampling.sample`` must draw from it. Oracles:
a float64 brute force written from the definition, one row at a time and sort-free
(spec_tests/sampling/oracles.py), and transformers' logits processors/warpers where their
semantics agree with the pinned order (docs/sampling.md says where they differ). Samplers are
checked exactly first (explicit uniforms on a grid induce the distribution to within one grid
cell per token), then statistically (chi-square, fixed seeds, false-alarm rate <= 1e-6 per test).
Cases whose decisions float32 rounding could flip are skipped (the contract leaves them open).
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.strategies import randn
from conformance.tolerance import ToleranceError, rounding_floor
from spec_tests.sampling.oracles import sampling_oracle
from spec_tests.sampling.strategies import PARAM_FIELDS, SamplingCase, sampling_cases


ALPHA = 1e-6        # per-test false-alarm rate of the chi-square tests


def _probs(impl, case: SamplingCase, device, **changes):
    fn = impl.get("sampling.sampling_probs")
    return fn(case.logits(device), case.params(), **case.kwargs(), **changes)


def _within_rule(a, b, ref, oracle_probs, factor, name, case):
    """DESIGN's tolerance rule on probabilities: max|a - b| <= factor x the reference's own error
    + the rounding floor (two ulps at the values' magnitude, tolerance.rounding_floor).
    float64 results are held to 1e-12 (as attention's float64 test)."""
    a64, b64, o64 = (t.detach().to("cpu", torch.float64) for t in (a, b, oracle_probs))
    err = float((a64 - b64).abs().max()) if a64.numel() else 0.0
    if a.dtype == torch.float64:
        bound = 1e-12
    else:
        err_ref = float((ref.detach().to("cpu", torch.float64) - o64).abs().max()) if o64.numel() else 0.0
        floor = rounding_floor(o64, a.dtype)
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
    _within_rule(actual, oracle.probs, ref, oracle.probs, 2.0, name, case)


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


# --------------------------------------------------------------------------- oracle + differential
@given(case=sampling_cases())
def test_probs_match_brute_force(impl, reference, device, case):
    """Support == the brute-force kept set exactly; probabilities within the tolerance rule."""
    oracle = sampling_oracle(case)
    assume(oracle.ambiguous is None)
    ref = _probs(reference, case, device)
    _assert_probs(_probs(impl, case, device), ref, oracle, case)


def _explicit(values, **kw):
    return SamplingCase(1, len(values), kw.pop("dtype", "float32"), 0, kind="explicit",
                        values=tuple(float(v) for v in values), **kw)


L = math.log
PINNED = {
    # name: (case, expected kept set)
    "ties at the k-th value are kept": (_explicit([3, 2, 2, 1, 0], top_k=(2,)), {0, 1, 2}),
    "the token that crosses p is kept": (_explicit([L(5), L(3), L(2)], top_p=(0.7,)), {0, 1}),
    "top-p on the top-k survivors, renormalised": (
        _explicit([L(4), L(3), L(2), L(1)], top_k=(2,), top_p=(0.5,)), {0}),
    "top-p keeps a tie group whole": (_explicit([1, 1, 1, 0], top_p=(0.2,)), {0, 1, 2}),
    "min-p is relative to the max after temperature": (
        _explicit([0, -1, -3], temperature=(0.5,), min_p=(0.2,)), {0}),
    "min_p = 1 keeps the maxima": (_explicit([2, 1, 2, 0], min_p=(1.0,)), {0, 2}),
    "penalties come before temperature": (
        _explicit([0, 0, 0], temperature=(0.5,), presence_penalty=(1.0,), top_p=(0.95,), output=((1,),)),
        {0, 1, 2}),
    "repetition penalty divides positive, multiplies negative logits": (
        _explicit([2, 1, -1, -1.5], repetition_penalty=(2.0,), top_k=(2,), prompt=((0, 2),)), {0, 1}),
    "logit bias -inf bans a token": (_explicit([5, 1, 0], banned=((0, 0),)), {1, 2}),
    "temperature 0 is greedy, ties to the smallest id": (_explicit([1, 3, 3, 2], temperature=(0.0,)), {1}),
    "disabled stages keep everything": (
        _explicit([1, 0, -1, -2], top_k=(0,), top_p=(1.0,), min_p=(0.0,)), {0, 1, 2, 3}),
    "top_k >= vocab disables": (_explicit([1, 0, -1], top_k=(7,)), {0, 1, 2}),
}


@pytest.mark.parametrize("name", list(PINNED))
def test_pinned_semantics(impl, reference, device, name):
    """Hand-made cases of every pinned rule: the exact kept set, values within the tolerance rule."""
    case, expected = PINNED[name]
    oracle = sampling_oracle(case)
    assert oracle.ambiguous is None, oracle.ambiguous
    assert set(oracle.keep[0].nonzero().flatten().tolist()) == expected   # the oracle agrees
    probs = _probs(impl, case, device)
    got = set((probs[0] > 0).nonzero().flatten().tolist())
    assert got == expected, f"{name}: kept {sorted(got)}, pinned {sorted(expected)}"
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


LARGE = [(2000, "normal", 1), (2000, "integer", 2), (2000, "normal", 3)]


@pytest.mark.parametrize("vocab,kind,seed", LARGE)
def test_large_vocab_matches_brute_force(impl, reference, device, vocab, kind, seed):
    """Realistic vocabularies, where buckets crowd and ties are many: typical engine settings,
    top_k above the fast-path limit, top-p alone, min-p; support exact, values by the rule."""
    case = SamplingCase(4, vocab, "float32", seed, kind=kind, scale=3.0 if kind == "normal" else 1.0,
                        temperature=(0.7, 1.0, 1.3, 0.9), top_k=(50, 0, 1200, 0),
                        top_p=(0.9, 0.9, 0.95, 1.0), min_p=(0.0, 0.0, 0.02, 0.05))
    oracle = sampling_oracle(case)
    assert oracle.ambiguous is None, oracle.ambiguous
    _assert_probs(_probs(impl, case, device), _probs(reference, case, device), oracle, case)
    # the draw: u -> the first token whose oracle CDF exceeds u (unless u is within 1e-6 of a step)
    u = torch.rand(case.batch, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    tokens = impl.get("sampling.sample")(case.logits(device), case.params(), None, uniforms=u.to(device)).cpu()
    cdf = oracle.probs.cumsum(dim=1)
    expected = (cdf <= u[:, None]).sum(dim=1)
    clear = (cdf - u[:, None]).abs().min(dim=1).values > 1e-6
    assert torch.equal(tokens[clear], expected[clear]), f"inverse CDF: {tokens.tolist()} vs {expected.tolist()}"


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
        _within_rule(alone[0], batched[r], ref[r], oracle.probs[r], 4.0, f"row {r} alone vs batched", case)


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
                 "permuted vocab", case)


def test_params_as_tensors_lists_and_scalars_agree(impl, device):
    """Per-row params may be scalars, lists or tensors; logit_bias a dict, dicts or a dense tensor."""
    from reference.sampling import SamplingParams
    fn = impl.get("sampling.sampling_probs")
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
@given(case=sampling_cases(max_batch=1, max_vocab=24))
def test_sample_with_uniforms_induces_probs_exactly(impl, device, case):
    """Exact: u on a grid of N points, (j + 1/2)/N, lands on each token N*q +- 2 times (inverse CDF)."""
    oracle = sampling_oracle(case)
    assume(oracle.ambiguous is None)
    n = 1024
    logits, params, kw = _replicated(case, n, device)
    u = (torch.arange(n, dtype=torch.float64, device=device) + 0.5) / n
    tokens = impl.get("sampling.sample")(logits, params, None, uniforms=u, **kw)
    assert tokens.dtype == torch.int64 and tokens.shape == (n,)
    counts = torch.bincount(tokens.cpu(), minlength=case.vocab).double()
    expected = oracle.probs[0] * n
    worst = float((counts - expected).abs().max())
    assert worst <= 2.0, (f"grid of {n} uniforms: counts {counts.int().tolist()} vs N*q "
                          f"{[round(v, 1) for v in expected.tolist()]} (off by {worst:.1f})\n  case: {case!r}")
    again = impl.get("sampling.sample")(logits, params, None, uniforms=u, **kw)
    assert torch.equal(tokens, again), "sample with the same uniforms is not deterministic"


CHI_CASES = {
    "temperature, top-k, top-p": SamplingCase(1, 14, "float32", 11, scale=1.5, temperature=(0.8,),
                                              top_k=(9,), top_p=(0.9,)),
    "penalties, bias, min-p": SamplingCase(
        1, 12, "float32", 12, scale=1.0, temperature=(1.3,), min_p=(0.05,), repetition_penalty=(1.3,),
        presence_penalty=(0.5,), frequency_penalty=(0.25,), prompt=((0, 1, 2),), output=((3, 3, 4),),
        bias=(((5, 1.0), (6, -0.5)),)),
    "top-p over tie groups": SamplingCase(1, 16, "bfloat16", 13, kind="integer", scale=0.5, top_p=(0.8,),
                                          temperature=(0.6,)),
}


def _lumped(observed, expected, min_expected=5.0):
    """Merge the cells expecting < 5 (smallest first) until every cell expects >= 5."""
    cells = sorted(zip(expected, observed))
    out_e, out_o, acc_e, acc_o = [], [], 0.0, 0.0
    for e, o in cells:
        acc_e, acc_o = acc_e + e, acc_o + o
        if acc_e >= min_expected:
            out_e.append(acc_e)
            out_o.append(acc_o)
            acc_e = acc_o = 0.0
    if acc_e > 0 and out_e:
        out_e[-1] += acc_e
        out_o[-1] += acc_o
    return out_o, out_e


@pytest.mark.parametrize("name", list(CHI_CASES))
def test_sample_frequencies_chi_square(impl, device, name):
    """Statistical: 20,000 draws from a seeded torch.Generator; no draw outside the support
    (exact), then a chi-square goodness-of-fit test on the support (cells lumped to expect >= 5).
    Fails iff p-value < 1e-6: false-alarm rate <= 1e-6 per test (one fixed seed, so it either
    always passes or always fails). Power: the mutant sample_ignores_temperature of
    spec_tests/sampling/mutants.py (same support, wrong weights) fails it with p-value ~ 0."""
    from scipy import stats
    case = CHI_CASES[name]
    oracle = sampling_oracle(case)
    assert oracle.ambiguous is None
    n = 20_000
    logits, params, kw = _replicated(case, n, device)
    gen = torch.Generator(device=device).manual_seed(20240601)
    tokens = impl.get("sampling.sample")(logits, params, gen, **kw).cpu()
    counts = torch.bincount(tokens, minlength=case.vocab).double()
    q = oracle.probs[0]
    outside = (counts > 0) & (q == 0)
    assert not outside.any(), (f"{name}: sampled tokens {outside.nonzero().flatten().tolist()} that have "
                               f"probability 0 (support {q.nonzero().flatten().tolist()})")
    support = q > 0
    obs, exp = _lumped(counts[support].tolist(), (q[support] * n).tolist())
    if len(exp) < 2:
        return  # one cell: every draw is the one token, already checked exactly
    pvalue = stats.chisquare(obs, exp).pvalue
    assert pvalue >= ALPHA, (f"{name}: chi-square p-value {pvalue:.3g} < {ALPHA:g}: observed {counts.int().tolist()}"
                             f" vs expected {[round(v) for v in (q * n).tolist()]}")


def test_sample_reproducible_and_in_support(impl, device):
    """Same generator seed -> same tokens; every draw has positive probability; greedy rows and
    top_k = 1 rows return the first argmax whatever the generator."""
    sample = impl.get("sampling.sample")
    from reference.sampling import SamplingParams
    x = SamplingCase(64, 50, "float32", 3, kind="integer").logits(device)
    params = SamplingParams(temperature=[0.0, 0.7, 1.0, 1.5] * 16, top_k=[0, 1, 20, 0] * 16,
                            top_p=[1.0, 1.0, 0.8, 0.6] * 16, min_p=[0.0, 0.0, 0.0, 0.1] * 16)
    probs = impl.get("sampling.sampling_probs")(x, params)
    runs = []
    for seed in (1, 1, 2):
        gen = torch.Generator(device=device).manual_seed(seed)
        runs.append(sample(x, params, gen))
    assert torch.equal(runs[0], runs[1]), "same generator seed, different tokens"
    for tokens in runs:
        assert bool((probs.gather(1, tokens[:, None]) > 0).all()), "a draw outside the support"
    first_max = x.argmax(dim=1)
    greedy = torch.arange(64, device=device) % 4 == 0
    assert torch.equal(runs[2][greedy], first_max[greedy]), "temperature 0 must return the first argmax"


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
    Bad("per-row length", _params(top_p=[0.9, 0.8, 0.7]), ValueError, ("top_p", "2")),
    Bad("params not SamplingParams", dict(params=42), TypeError, ("params",)),
    Bad("logits rank 1", _with_logits(lambda x: x[0].clone()), ValueError, ("logits", "rank")),
    Bad("logits int", _with_logits(lambda x: x.long()), TypeError, ("logits",)),
    Bad("logits list", _with_logits(lambda x: x.tolist()), TypeError, ("logits",)),
    Bad("logits empty vocab", _with_logits(lambda x: x[:, :0].clone()), ValueError, ("logits",)),
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
        assert_rejects(impl.get("sampling.sample"), _valid(device, gen), bad,
                       state=lambda: gen.get_state().tolist())
    else:
        assert_rejects(impl.get("sampling.sampling_probs"), _valid(device), bad)


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
]


@bad_cases(BAD_RANDOMNESS)
def test_sample_rejects_bad_randomness(impl, device, bad):
    """sample needs a torch.Generator on the logits' device or uniforms of shape (batch,) in
    [0, 1) (TypeError for the wrong kind, ValueError for a wrong value, naming the argument)."""
    assert_rejects(impl.get("sampling.sample"), _valid(device), bad)


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
    p1 = impl.get("sampling.sampling_probs")(x, params, output_tokens=tokens)
    impl.get("sampling.sample")(x, params, gen, output_tokens=tokens)
    assert torch.equal(x, copies[0]) and torch.equal(bias, copies[1]), "an input tensor was modified"
    assert all(torch.equal(a, b) for a, b in zip(tokens, copies[2])), "output_tokens was modified"
    y = torch.flip(x, dims=[1])
    p2 = impl.get("sampling.sampling_probs")(y, params, output_tokens=tokens)
    ref2 = reference.get("sampling.sampling_probs")(y, params, output_tokens=tokens)
    assert torch.equal(p2 > 0, ref2 > 0) or not torch.equal(p1, p2), "stale result for new logits"
