"""Lossless tree verification (recursive rejection sampling over siblings) keeps the target
distribution, with the reference's exact rule; a chain is speculative.verify; pinned corner
cases, each naming its mutant. (The law for any tree verifier: test_law.py.)

The reference's choice (``@pytest.mark.choice``, checked at token-exact only): the final token is
the inverse CDF of uniforms[0] and acceptance is float64 ``u * q < p``; then every cell of the
uniforms' cube (oracles.py) has one output, and the distribution the implementation induces is
known exactly (Fractions) and must be lossless as an identity. The unmarked tests here judge the
same chains and pinned trees by the law (speculative's law_violation; oracles.tree_outcomes).
"""
from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings, strategies as st

from spec_tests.speculative.oracles import law_violation, lossless_violation
from spec_tests.speculative.strategies import batch_cases
from spec_tests.tree_spec.oracles import (POINTS, assert_generator_is_one_uniform_draw, outcome_violation, read_path,
                                         read_verified, rule_distribution, tree_cells, tree_outcomes, verify_kwargs)
from spec_tests.tree_spec.strategies import CASES, ROOT, TREE_MODES, SpecTree, spec_trees, sweep_trees

ONE_MINUS = 1.0 - 2.0 ** -53
EXACT = "the final token is the inverse CDF of uniforms[0]; acceptance is float64 u * q < p"


def _tree(impl, st_: SpecTree, toks):
    return impl.get("tree_from_parents")([ROOT, *toks], st_.parents())


def _assert_lossless(impl, st_: SpecTree):
    verify = impl.get("verify_tree")
    rule = rule_distribution(st_)
    assert lossless_violation(st_.case, rule) is None, "the oracle's own rule is not lossless (an oracle bug)"
    induced: dict[tuple, Fraction] = {}
    trees, kws = {}, {}
    for cell in tree_cells(st_):
        if cell.tokens not in trees:
            trees[cell.tokens] = _tree(impl, st_, cell.tokens)
            kws[cell.tokens] = verify_kwargs(st_, cell.tokens)
        with_root = [ROOT, *cell.tokens]
        got = {where: read_verified(verify(trees[cell.tokens], **kws[cell.tokens],
                                           uniforms=torch.tensor(cell.uniforms[where], dtype=torch.float64)),
                                    with_root, st_.case.vocab)
               for where in POINTS}
        want = cell.emitted(with_root)
        assert got["mid"] == got["low"] == got["high"] == want, (
            f"candidates {list(cell.tokens)} (parents {st_.parents()}): the rule accepts nodes {list(cell.path)} "
            f"and emits {list(want)}; the implementation emits {list(got['low'])} / {list(got['mid'])} / "
            f"{list(got['high'])} near the low corner / at the middle / near the high corner of that cell "
            f"(uniforms {cell.uniforms['mid']})\n  case: {st_!r}")
        induced[got["mid"]] = induced.get(got["mid"], Fraction(0)) + cell.weight
    why = lossless_violation(st_.case, induced)
    assert why is None, f"not lossless: {why}\n  case: {st_!r}"


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.choice(EXACT)
def test_lossless_fixed_cases(impl, name):
    """Named corner cases (i.i.d. siblings, q == p, disjoint supports, fixed candidates with a
    repeated token): exact enumeration, the rule's cells and losslessness."""
    _assert_lossless(impl, CASES[name])


@given(st_=spec_trees())
@pytest.mark.choice(EXACT)
def test_lossless_by_exact_enumeration(impl, st_):
    """Depth <= 2, branching <= 2, vocab <= 5, Hypothesis p and q (q == p, disjoint supports, q > 0
    where p = 0, mixtures, fixed candidates): for every candidate tree and every cell of the
    uniforms the implementation emits the rule's tokens (middle and corners), and the induced
    distribution is exactly the target's."""
    _assert_lossless(impl, st_)


# ----------------------------------------------------------------------------- every shape, exhaustively
@pytest.mark.parametrize("mode", TREE_MODES)
@pytest.mark.choice(EXACT)
def test_lossless_every_shape(impl, mode):
    """Bounded-exhaustive: every tree shape up to depth 2 and branching 2 (and three siblings at
    the root) x each mode (:func:`sweep_trees`): every candidate tree, every cell of the uniforms,
    the rule's tokens at the middle and corners, the induced distribution exactly the target's."""
    for st_ in sweep_trees(mode):
        _assert_lossless(impl, st_)


# ----------------------------------------------------------------------------- a chain is speculative.verify
def _chain(impl, case, no_q):
    """A one-row speculative case as a chain root -> x_1 -> ... -> x_γ verified with uniforms
    (v, u_1 .. u_γ): (speculative's keyword arguments, verify_tree's emitted tokens)."""
    case = case.with_(lens=(), garbage=False, no_q=no_q)
    kw = case.tensors()
    gamma = case.gamma
    x = kw["draft_tokens"][0].tolist()
    tree = impl.get("build_tree")(ROOT, [x] if x else [])
    p = kw["target_probs"][0]
    q = None
    if kw["draft_probs"] is not None:
        q = torch.cat([kw["draft_probs"][0], p[gamma:]], 0)     # the leaf's row is never read
    u = kw["uniforms"][0]
    got = read_verified(impl.get("verify_tree")(tree, p, q, uniforms=torch.cat([u[gamma:], u[:gamma]])),
                        [ROOT, *x], case.vocab, "verify_tree on a chain")
    return case, kw, got


@settings(max_examples=max(1, settings().max_examples))
@given(case=batch_cases(max_batch=1, max_gamma=4, max_vocab=12, greedy=False), no_q=st.booleans())
def test_chain_obeys_speculative_law(impl, case, no_q):
    """Branching 1, every dtype: the chain verified with uniforms (v, u_1 .. u_γ) is judged by
    speculative's law with acceptance uniforms (u_1 .. u_γ): the threshold rule's acceptance count
    (float32 rounding admitted within 2^-21 of a threshold), the emitted token in the residual's /
    bonus p's support."""
    case, kw, got = _chain(impl, case, no_q)
    why = law_violation(kw, [got])
    assert why is None, f"chain: {why}\n  case: {case!r}"


@settings(max_examples=max(1, settings().max_examples))
@given(case=batch_cases(max_batch=1, max_gamma=4, max_vocab=12, greedy=False), no_q=st.booleans())
@pytest.mark.choice("a chain emits speculative.verify's tokens for the same uniforms (inverse CDF, float64)")
def test_chain_is_speculative_verify(impl, reference, case, no_q):
    """Branching 1: the chain root -> x_1 -> ... -> x_γ verified with uniforms (v, u_1 .. u_γ)
    emits exactly what speculative.verify emits with uniforms (u_1 .. u_γ, v), every dtype."""
    case, kw, got = _chain(impl, case, no_q)
    tokens, k = reference.of("speculative").get("verify")(**kw)
    want = tuple(tokens[0, :int(k[0]) + 1].tolist())
    assert got == want, f"chain: verify_tree emits {list(got)}, speculative.verify {list(want)}\n  case: {case!r}"


# ----------------------------------------------------------------------------- pinned
def _pin(tokens, parents, p, q=None, u=None):
    return dict(tokens=tokens, parents=parents, p=p, q=q, u=u)


PINNED = {
    # p = (.5, .5, 0), candidates 0 and 1 (fixed): u_1 = 0.7 rejects 0; the normalised residual is
    # one-hot on 1, so candidate 1 is accepted whatever u_2; node 2 is a leaf: emit from p[2]
    "a rejected sibling passes the residual to the next sibling": (
        _pin([0, 0, 1], [-1, 0, 0], [[.5, .5, 0], [1, 0, 0], [0, 0, 1]], u=[0.3, 0.7, 0.9]),
        [1, 2], "sibling_stop"),
    "the residual is renormalised before the next sibling's test": (
        _pin([0, 0, 1], [-1, 0, 0], [[.5, .5, 0], [1, 0, 0], [0, 0, 1]], u=[0.3, 0.7, 0.9]),
        [1, 2], "residual_unnormalised"),
    # i.i.d. siblings from q = (.5, .5, 0) both token 0, p = (.25, .25, .5): the first 0 is rejected
    # (u = .6 >= p/q = .5), the residual (0, 0, 1) rejects the second 0 even at u = 0, draw 2
    "the residual replaces p: a repeated sibling of a rejected token is rejected": (
        _pin([0, 0, 0], [-1, 0, 0], [[.25, .25, .5], [0, 1, 0], [0, 1, 0]], q=[[.5, .5, 0]] * 3, u=[0.1, 0.6, 0.0]),
        [2], "residual_not_updated"),
    # the final draw at v = 0 is the first token of positive probability, never a zero-weight one
    "the final draw at v = 0 skips a token of probability 0": (
        _pin([1], [-1], [[0, .5, .5]], u=[0.0]), [1], "inverse_cdf_strict"),
    # p[0] sums to 1 - 1e-9 (within tolerance) and its mass sits on the one candidate (token 1,
    # q one-hot): u_1 = 1 - 1e-10 >= p(1) rejects it, the residual max(p - q, 0) is all zero, so p
    # is kept (the contract's rule) and the draw at .3 gives 1; dividing by the zero sum would fail
    "a residual with no positive entry keeps p": (
        _pin([0, 1], [-1, 0], [[0, 1 - 1e-9], [.5, .5]], u=[0.3, 1 - 1e-10]),
        [1], "boundary: a zero residual (a row summing to 1 - 1e-9)"),
    "one node: a token from p[0]": (
        _pin([3], [-1], [[.25, .25, .25, .25]], u=[0.6]), [2], "boundary: a tree of one node"),
    "depth 2: the accepted child's children are tried": (
        _pin([0, 1, 2, 1], [-1, 0, 1, 1], [[0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]], u=[0.5, 0.2, 0.2, 0.2]),
        [1, 2, 0], "child_p_not_switched"),
}


def _pinned_call(impl, pin):
    tree = impl.get("tree_from_parents")(pin["tokens"], pin["parents"])
    p = torch.tensor(pin["p"], dtype=torch.float64)
    q = None if pin["q"] is None else torch.tensor(pin["q"], dtype=torch.float64)
    u = torch.tensor(pin["u"], dtype=torch.float64)
    return impl.get("verify_tree")(tree, p, q, uniforms=u), p, q, u


@pytest.mark.parametrize("name", list(PINNED))
def test_pinned_law(impl, name):
    """The same hand-made trees, judged by the law (oracles.tree_outcomes): the accepted nodes
    the recursive threshold rule gives for these uniforms (float32 rounding admitted within 2^-21
    of a threshold, a candidate of probability 0 never accepted, the residual after a rejected
    sibling normalised and used for the next one) and a final token in the support of the
    distribution left."""
    pin = PINNED[name][0]
    result, p, q, u = _pinned_call(impl, pin)
    nodes, token = read_path(result, pin["tokens"], pin["parents"], len(pin["p"][0]), name)
    why = outcome_violation(tree_outcomes(pin["tokens"], pin["parents"], p, q, u), nodes, token)
    assert why is None, f"{name}: {why}"


@pytest.mark.parametrize("name", list(PINNED))
@pytest.mark.choice(EXACT)
def test_pinned(impl, name):
    """Hand-made trees with their exact result and the mutant each catches."""
    pin, want, _mutant = PINNED[name]
    got = read_verified(_pinned_call(impl, pin)[0], pin["tokens"], len(pin["p"][0]), name)
    assert list(got) == want, f"{name}: emitted {list(got)}, pinned {want}"


# ----------------------------------------------------------------------------- the generator path
@pytest.mark.choice("the generator is consumed as one torch.rand(N, float64)")
def test_generator_draws_n_uniforms(impl):
    """verify_tree(generator=g) == verify_tree(uniforms=torch.rand(N, dtype=float64) from the same
    seed), and g ends in that draw's state."""
    assert_generator_is_one_uniform_draw(impl, "verify_tree", seeds=20)
