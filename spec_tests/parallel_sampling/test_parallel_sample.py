"""parallel_sample: n branches of one prompt are n independent runs, for less KV (course 08.06).

Law (reference/parallel_sampling.py's docstring):
- every branch's tokens are those of ``reference.generate`` run alone with the same sampler and
  ``torch.Generator().manual_seed(seed)`` -- n independent runs -- up to a genuine near-tie (the
  rule of spec_tests/parallel_sampling/oracles.py), and its logits are the float64 model's on its
  own tokens within the tolerance rule (the reference level: the run alone in the same dtype, or
  the reference's own branch, whichever is farther from float64);
- ``sample_fn`` is called max_tokens times per branch, with that branch's logits (those reported)
  and one generator per branch seeded with its seed (told apart by the uniforms it yields);
- memory, measured through the run's own pool: ``blocks_in_use[t]`` is the closed form of
  oracles.py for n branches that wrote t tokens each; the tables share exactly the prompt's full
  blocks, everything else is a branch's own; copy-on-write happens exactly at the prompt's
  partial last block, once for every branch but the last holder; a pool of the closed form's
  size is enough and one block fewer is refused ("out of blocks", naming num_blocks).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import HealthCheck, event, example, given, settings

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.strategies import DTYPES
from conformance.tolerance import assert_close_to_oracle
from spec_tests.parallel_sampling.oracles import Sampler, bound, closed_forms, near_tie, teacher_forced, uniforms
from spec_tests.parallel_sampling.strategies import Case, cases

SETTINGS = dict(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture], deadline=None)

# Pinned: a prompt ending inside a block (5 tokens, blocks of 2), three sampled branches; a prompt
# on a block boundary (4 tokens, blocks of 2), four greedy branches; one branch.
PARTIAL = Case(prompt=(1, 2, 3, 4, 5), n=3, max_tokens=5, block_size=2, temperature=1.0, seeds=(11, 12, 13))
ALIGNED = Case(prompt=(7, 3, 9, 1), n=4, max_tokens=4, block_size=2, temperature=0.0)
ONE = Case(prompt=(4, 4, 4), n=1, max_tokens=3, block_size=4, temperature=0.8, seeds=(5,), dtype="bfloat16")


_MODELS: dict = {}


def _model(case: Case, dtype: str | None = None):
    """The case's reference model, built once per process (and per dtype)."""
    key = (case.vocab_size, case.dim, case.n_layers, case.n_heads, case.n_kv_heads, case.max_seq_len, case.seed,
           dtype or case.dtype)
    if key not in _MODELS:
        _MODELS[key] = case.model(dtype)
    return _MODELS[key]


def sample_where_it_runs(impl, case: Case, extra: dict) -> dict:
    """``parallel_sample`` of ``case`` with the tests' Sampler, run where the implementation runs
    (``impl.call_in_process``: the model's layers are not called across a process boundary). Returns
    plain data: the result's fields and the sampler's calls, each (generator id, u, logits, token)."""
    sampler = Sampler(case.temperature)
    extra = dict(extra)
    omit = extra.pop("omit", ())
    kwargs = {k: v for k, v in {**case.kwargs(), **extra}.items() if k not in omit}
    out = impl.get("parallel_sample")(_model(case), list(case.prompt), case.n, case.max_tokens, sampler, **kwargs)
    return dict(tokens=[[int(t) for t in ts] for ts in out.tokens], logits=list(out.logits),
                block_tables=[list(t) for t in out.block_tables], blocks_in_use=list(out.blocks_in_use),
                copies=[tuple(c) for c in out.copies],
                calls=[(id(g), u, logits, token) for g, u, logits, token in sampler.calls])


def run(impl, case: Case, **extra) -> SimpleNamespace:
    return SimpleNamespace(**impl.call_in_process(sample_where_it_runs, case, extra))


def _farthest(oracle: torch.Tensor, *candidates: torch.Tensor) -> torch.Tensor:
    """The candidate farthest from the float64 oracle: the tolerance rule's reference level."""
    errors = [float((c.double() - oracle).abs().max()) for c in candidates]
    return candidates[max(range(len(candidates)), key=errors.__getitem__)]


@example(case=PARTIAL).via("mutant:shared_generator mutant:cow_skips_data mutant:first_token_shared "
                           "mutant:cow_copies_one_layer")
@example(case=ALIGNED).via("mutant:view_drops_new_token")
@example(case=ONE).via("boundary: one branch, bfloat16: parallel sampling of n = 1 is generate")
@example(case=Case(prompt=(1, 2, 3), n=2, max_tokens=3, block_size=2, temperature=1.0, dim=8, n_layers=3)).via(
    "boundary: three layers of head_dim 2 (fewer dims than layers)")
@example(case=Case(prompt=(1, 2, 3), n=2, max_tokens=3, block_size=2, temperature=1.0, n_layers=1)).via(
    "boundary: one layer")
@given(case=cases())
@settings(**SETTINGS)
def test_branches_equal_independent_runs(impl, reference, case):
    """Each branch's tokens equal reference.generate's alone with its seed (up to a genuine
    near-tie) and its logits are the float64 model's on its own tokens (tolerance rule)."""
    model = _model(case)
    got = run(impl, case)
    want_run = run(reference, case)
    generate = reference.of("generate").get("generate")
    model64 = _model(case, "float64")
    assert len(got.tokens) == case.n and len(got.logits) == case.n, (
        f"{len(got.tokens)} token lists and {len(got.logits)} logits for n = {case.n} branches\n  case: {case!r}")
    for i, seed in enumerate(case.branch_seeds):
        tokens = [int(t) for t in got.tokens[i]]
        assert len(tokens) == case.max_tokens, f"branch {i}: {len(tokens)} tokens, max_tokens = {case.max_tokens}"
        alone, alone_logits = generate(model, torch.tensor([case.prompt]), case.max_tokens,
                                       sample_fn=Sampler(case.temperature), generator=torch.Generator().manual_seed(seed))
        alone = alone[0].tolist()
        oracle = teacher_forced(generate, model64, list(case.prompt), tokens)
        low = teacher_forced(generate, model, list(case.prompt), tokens)
        candidates = [low] + ([want_run.logits[i]] if list(want_run.tokens[i]) == tokens else [])
        assert_close_to_oracle(got.logits[i], _farthest(oracle, *candidates), oracle,
                               name=f"branch {i}'s logits (seed {seed})", inputs=dict(case=case, tokens=tokens))
        if tokens != alone:
            d = next(j for j, (x, y) in enumerate(zip(tokens, alone)) if x != y)
            u = uniforms(seed, d + 1)[d]
            ok, why = near_tie(oracle[d], tokens[d], alone[d], case.temperature, u,
                               bound(low[d], oracle[d], DTYPES[case.dtype]))
            assert ok, (f"branch {i} (seed {seed}): tokens {tokens}; run alone with its seed: {alone}. They differ at "
                        f"token {d}, where the {why}: not a near-tie\n  case: {case!r}")
            event("genuine near-tie")


@example(case=PARTIAL).via("mutant:fork_copies_prompt mutant:in_use_counts_per_branch mutant:shared_generator "
                           "mutant:seed_by_branch_index")
@example(case=ALIGNED).via("mutant:in_use_counts_per_branch")
@example(case=Case(prompt=(1, 2, 3, 4, 5), n=2, max_tokens=3, block_size=2, temperature=1.0, seeds=(0, 2**63 - 1),
                   max_seq_len=8)).via("boundary: prompt + max_tokens = max_seq_len, and the largest seed, are legal")
@given(case=cases(dtypes=("float32",)))
@settings(**SETTINGS)
def test_memory_tables_and_copies(impl, reference, case):
    """blocks_in_use follows the closed form step by step; the tables share exactly the prompt's
    full blocks; the copies are made at the prompt's partial block, one per branch but the last
    holder; sample_fn sees each branch's logits with that branch's own seeded generator."""
    out = run(impl, case)
    p, b, n, t_max = len(case.prompt), case.block_size, case.n, case.max_tokens
    full = p // b if t_max > 1 else math.ceil(p / b)    # nothing written: the partial block is shared too
    want_in_use = [closed_forms(p, [t] * n, b)[0] for t in range(t_max)]
    assert list(out.blocks_in_use) == want_in_use, (
        f"blocks_in_use {list(out.blocks_in_use)}; n = {n} branches of a {p}-token prompt in blocks of {b}, each "
        f"holding prompt + t tokens at token t, hold {want_in_use} (shared prompt blocks counted once)\n  case: {case!r}")
    if n >= 2 and full >= 1:
        independent = closed_forms(p, [t_max - 1] * n, b)[1]
        assert out.blocks_in_use[-1] < independent, f"no saving over {independent} blocks of independent copies"
    tables = [list(t) for t in out.block_tables]
    pool = closed_forms(p, [t_max - 1] * n, b)[0]
    length = math.ceil((p + t_max - 1) / b)
    owned = {}
    for i, table in enumerate(tables):
        assert len(table) == length and all(isinstance(x, int) and 0 <= x < pool for x in table), (
            f"branch {i}'s block table {table}: expected {length} block ids in [0, {pool}) for {p} + {t_max - 1} "
            f"tokens\n  case: {case!r}")
        assert table[:full] == tables[0][:full], (
            f"branch {i}'s table {table} does not share the prompt's {full} blocks {tables[0][:full]}: "
            f"forks share them\n  case: {case!r}")
        for x in table[full:]:
            assert x not in tables[0][:full] and owned.setdefault(x, i) == i, (
                f"block {x} of branch {i}'s table {table} is also in branch {owned.get(x)}'s {tables[owned.get(x, 0)]}: "
                f"only the prompt's full blocks are shared once every branch has written\n  case: {case!r}")
    assert len(set(owned) | set(tables[0][:full])) == out.blocks_in_use[-1], (
        f"the tables hold {len(set(owned) | set(tables[0][:full]))} distinct blocks, blocks_in_use says "
        f"{out.blocks_in_use[-1]}\n  case: {case!r}")
    copies = [tuple(c) for c in out.copies]
    want = closed_forms(p, [t_max - 1] * n, b)[2]
    assert len(copies) == want, (f"{len(copies)} copies on write {copies}; expected {want} (the prompt's partial "
                                 f"block, once for each branch but the last that holds it)\n  case: {case!r}")
    if copies:
        srcs = {c[1] for c in copies}
        writers = [c[0] for c in copies]
        assert len(srcs) == 1 and len(set(writers)) == len(writers), (
            f"copies {copies}: every copy is of the one partial prompt block, by a different branch\n  case: {case!r}")
        for branch, _, dst in copies:
            assert tables[branch][full] == dst, f"copy {(branch, _, dst)}: branch {branch}'s table {tables[branch]}"
        keeper = [i for i in range(n) if i not in writers]
        assert len(keeper) == 1 and tables[keeper[0]][full] == srcs.pop(), (
            f"copies {copies}: the branch that made no copy holds the original partial block\n  case: {case!r}")
    first = out.logits[0][0]
    assert all(torch.equal(out.logits[i][0], first) for i in range(n)), "row 0 (the prompt's logits) differs between branches"
    groups: dict = {}
    for g, u, logits, token in out.calls:
        groups.setdefault(g, []).append((u, logits, token))
    assert sorted(len(v) for v in groups.values()) == [t_max] * n, (
        f"sample_fn calls per generator: {sorted(len(v) for v in groups.values())}; expected {t_max} for each of the "
        f"{n} branches' own generators\n  case: {case!r}")
    seeds = case.branch_seeds
    draws = {tuple(uniforms(s, t_max)): i for i, s in enumerate(seeds)}
    for calls in groups.values():
        i = draws.pop(tuple(u for u, _, _ in calls), None)
        assert i is not None, (f"a generator given to sample_fn yields {[u for u, _, _ in calls]}: not the draws of "
                               f"torch.Generator().manual_seed(s) for a branch's seed s in {seeds}\n  case: {case!r}")
        assert [tok for _, _, tok in calls] == list(out.tokens[i]), (
            f"branch {i} (seed {seeds[i]}) returned {list(out.tokens[i])}; its sample_fn picked "
            f"{[tok for _, _, tok in calls]}\n  case: {case!r}")
        for t, (_, logits, _) in enumerate(calls):
            assert tuple(logits.shape) == (1, case.vocab_size) and torch.equal(logits[0], out.logits[i][t]), (
                f"branch {i}, token {t}: sample_fn got logits of shape {tuple(logits.shape)}, not the row reported")


@example(case=PARTIAL).via("mutant:pool_check_off_by_one")
@example(case=ALIGNED).via("mutant:pool_check_off_by_one")
@given(case=cases(dtypes=("float32",), max_tokens=4))
@settings(max_examples=10, **SETTINGS)
def test_pool_of_the_closed_form_is_enough(impl, reference, case):
    """A pool of exactly the closed form's blocks runs the whole sampling (and gives the default's
    tokens); one block fewer is refused before anything runs (ValueError naming num_blocks)."""
    p, n, t_max = len(case.prompt), case.n, case.max_tokens
    need = closed_forms(p, [t_max - 1] * n, case.block_size)[0]
    default = run(impl, case)
    exact = run(impl, case, num_blocks=need)
    assert [list(t) for t in exact.tokens] == [list(t) for t in default.tokens], (
        f"num_blocks={need} (the closed form) gives {exact.tokens}, the default pool {default.tokens}\n  case: {case!r}")
    if need > 1:
        with pytest.raises(ValueError, match=r"num_blocks") as info:
            run(impl, case, num_blocks=need - 1)
        assert "out of blocks" in str(info.value), f"the error should say 'out of blocks': {info.value}"


def test_defaults(impl):
    """Omitted arguments are the documented defaults: blocks of 16, seeds 0..n-1, the pool the run
    needs. A 20-token prompt (one full block of 16 and 4 tokens), 2 branches of 3 tokens: 2 blocks
    after the prefill; at the first decode step one branch copies the partial block and the other
    writes in place: 3 blocks, 1 copy. A 16-token prompt fills its block: 1, then 3 blocks, no copy."""
    case = Case(prompt=tuple(range(20)), n=2, max_tokens=3, block_size=16, temperature=1.0, seeds=(0, 1))
    explicit = run(impl, case)
    default = run(impl, case, omit=("block_size", "seeds", "num_blocks"))
    assert default.blocks_in_use == [2, 3, 3], (
        f"parallel_sample without block_size: blocks_in_use {default.blocks_in_use}; with the default blocks of 16 "
        "a 20-token prompt forked into 2 branches holds [2, 3, 3]")
    assert len(default.copies) == 1, f"one copy on write of the partial block, got {default.copies}"
    aligned = run(impl, Case(prompt=tuple(range(16)), n=2, max_tokens=3, block_size=16), omit=("block_size",))
    assert aligned.blocks_in_use == [1, 3, 3] and aligned.copies == [], (
        f"a 16-token prompt in the default blocks of 16 fills one block: blocks_in_use [1, 3, 3] and no copy, got "
        f"{aligned.blocks_in_use} and copies {aligned.copies}")
    assert default.tokens == explicit.tokens, (f"without seeds the branches draw {default.tokens}; with seeds=[0, 1] "
                                               f"{explicit.tokens}: the default seeds are 0..n-1")


def test_hand_computed_example(impl, reference):
    """PARTIAL by hand: P = 5, B = 2, n = 3, 5 tokens each. After the prefill 3 blocks (two full +
    the partial); token 1 each branch writes position 5: branches 0 and 1 copy the partial block,
    branch 2 writes in place: 2 + 3 = 5 blocks; token 2 (position 6) opens a block each: 8; token 3
    (position 7) fits: 8; token 4: 11. Independent copies would hold 3 x 5 = 15."""
    out = run(impl, PARTIAL)
    assert list(out.blocks_in_use) == [3, 5, 8, 8, 11], list(out.blocks_in_use)
    assert len(out.copies) == 2
    assert closed_forms(5, [4, 4, 4], 2) == (11, 15, 2)


# --- bad input ---------------------------------------------------------------------------------
def _valid():
    return dict(model=PARTIAL.model(), prompt=[1, 2, 3], n=2, max_tokens=3, sample_fn=Sampler(0.0),
                seeds=None, block_size=2, num_blocks=None)


def not_a_model(tokens, cache=None):
    return tokens


def config_but_not_callable(kw: dict) -> dict:
    return {**kw, "model": SimpleNamespace(config=kw["model"].config)}


def returns_an_int(logits, generator):
    return 3


def returns_floats(logits, generator):
    return torch.tensor([1.0])


def returns_two_ids(logits, generator):
    return torch.tensor([1, 2])


def returns_an_id_past_the_vocab(logits, generator):
    return torch.tensor([48])


def returns_a_negative_id(logits, generator):
    return torch.tensor([-1])


def returns_a_bool(logits, generator):
    return torch.tensor([True])


BAD = [
    Bad("model without a config", dict(model=object()), TypeError, ("model",)),
    Bad("model a function without a config", dict(model=not_a_model), TypeError, ("model",)),
    Bad("model a config that is not callable", config_but_not_callable, TypeError, ("model",)),
    Bad("prompt a tensor", dict(prompt=torch.tensor([1, 2])), TypeError, ("prompt",)),
    Bad("empty prompt", dict(prompt=[]), ValueError, ("prompt",)),
    Bad("prompt of floats", dict(prompt=[1.0, 2.0]), TypeError, ("prompt",)),
    Bad("prompt of bools", dict(prompt=[True]), TypeError, ("prompt",)),
    Bad("prompt id past the vocab", dict(prompt=[1, 48]), ValueError, ("prompt",)),
    Bad("negative prompt id", dict(prompt=[-1]), ValueError, ("prompt",)),
    Bad("zero n", dict(n=0), ValueError, ("n",)),
    Bad("float n", dict(n=2.0), TypeError, ("n",)),
    Bad("bool n", dict(n=True), TypeError, ("n",)),
    Bad("zero max_tokens", dict(max_tokens=0), ValueError, ("max_tokens",)),
    Bad("max_tokens past max_seq_len", dict(max_tokens=22), ValueError, ("max_tokens",)),
    Bad("None max_tokens", dict(max_tokens=None), TypeError, ("max_tokens",)),
    Bad("sample_fn not callable", dict(sample_fn=3), TypeError, ("sample_fn",)),
    Bad("sample_fn returns an int", dict(sample_fn=returns_an_int), ValueError, ("sample_fn",)),
    Bad("sample_fn returns floats", dict(sample_fn=returns_floats), ValueError, ("sample_fn",)),
    Bad("sample_fn returns two ids", dict(sample_fn=returns_two_ids), ValueError, ("sample_fn",)),
    Bad("sample_fn returns an id past the vocab", dict(sample_fn=returns_an_id_past_the_vocab), ValueError,
        ("sample_fn",)),
    Bad("sample_fn returns a negative id", dict(sample_fn=returns_a_negative_id), ValueError, ("sample_fn",)),
    Bad("sample_fn returns a bool", dict(sample_fn=returns_a_bool), ValueError, ("sample_fn",)),
    Bad("seeds too few", dict(seeds=[1]), ValueError, ("seeds",)),
    Bad("seeds a generator", dict(seeds=torch.Generator()), TypeError, ("seeds",)),
    Bad("seeds of floats", dict(seeds=[1.0, 2.0]), TypeError, ("seeds",)),
    Bad("negative seed", dict(seeds=[1, -1]), ValueError, ("seeds",)),
    Bad("seed past 2**63", dict(seeds=[1, 2**63]), ValueError, ("seeds",)),
    Bad("zero block_size", dict(block_size=0), ValueError, ("block_size",)),
    Bad("float block_size", dict(block_size=2.0), TypeError, ("block_size",)),
    Bad("zero num_blocks", dict(num_blocks=0), ValueError, ("num_blocks",)),
    Bad("float num_blocks", dict(num_blocks=8.0), TypeError, ("num_blocks",)),
    Bad("num_blocks one short", dict(num_blocks=4), ValueError, ("num_blocks", "out of blocks")),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """Every argument is checked (a bool is not an int); a pool smaller than the run needs is
    refused with "out of blocks" naming num_blocks; a sample_fn that returns anything but one
    integer id in the vocabulary is a ValueError naming sample_fn."""
    assert_rejects(impl.get("parallel_sample"), _valid, bad)
