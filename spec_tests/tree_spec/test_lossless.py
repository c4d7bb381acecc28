"""Lossless tree verification (recursive rejection sampling over siblings) keeps the target
distribution: proven by exact enumeration over the candidate trees and the uniforms' cells
(oracles.py); a chain is exactly speculative.verify; pinned corner cases, each naming its mutant."""
from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from spec_tests.speculative.oracles import lossless_violation
from spec_tests.speculative.strategies import TreeCase, batch_cases
from spec_tests.tree_spec.oracles import (POINTS, assert_generator_is_one_uniform_draw, read_verified,
                                         rule_distribution, tree_cells, verify_kwargs)
from spec_tests.tree_spec.strategies import ROOT, SpecTree, spec_trees

ONE_MINUS = 1.0 - 2.0 ** -53


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


CASES = {
    # two i.i.d. children from q, q > 0 where p = 0: the second sibling is tried with the residual
    "iid siblings, q > 0 where p = 0": SpecTree(
        TreeCase(vocab=3, gamma=1, den=4, p_table=((2, 2, 0), (1, 1, 2)), q_mode="table", q_table=((1, 1, 2),),
                 p_key=1), (2, 0, 0)),
    # q == p at depth 2: every first child is accepted
    "q == p, depth 2": SpecTree(
        TreeCase(vocab=2, gamma=2, den=4, p_table=((1, 3), (2, 2)), q_mode="equal", p_key=2), (2, 1, 1)),
    # disjoint supports: every candidate is rejected, the token comes from p
    "disjoint supports": SpecTree(
        TreeCase(vocab=3, gamma=1, den=4, p_table=((4, 0, 0),), q_mode="disjoint", q_table=((0, 2, 2),)), (2, 0, 0)),
    # deterministic candidates (target-only tree sampling), a repeated sibling token
    "fixed candidates with a repeat": SpecTree(
        TreeCase(vocab=3, gamma=2, den=8, p_table=((4, 2, 2), (1, 6, 1), (0, 4, 4)), q_mode="equal", p_key=5),
        (2, 2, 1), tokens=(0, 1, 1, 1, 2)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lossless_fixed_cases(impl, name):
    """Named corner cases (i.i.d. siblings, q == p, disjoint supports, fixed candidates with a
    repeated token): exact enumeration, the rule's cells and losslessness."""
    _assert_lossless(impl, CASES[name])


@given(st_=spec_trees())
def test_lossless_by_exact_enumeration(impl, st_):
    """Depth <= 2, branching <= 2, vocab <= 5, Hypothesis p and q (q == p, disjoint supports, q > 0
    where p = 0, mixtures, fixed candidates): for every candidate tree and every cell of the
    uniforms the implementation emits the rule's tokens (middle and corners), and the induced
    distribution is exactly the target's."""
    _assert_lossless(impl, st_)


# ----------------------------------------------------------------------------- every shape, exhaustively
def all_shapes(max_branch: int = 2) -> list[tuple]:
    """Every tree shape of depth <= 2 and branching <= ``max_branch`` (13 for 2), then the root
    with 3 children (none or one of them with a child): three siblings, two rejected in a row."""
    import itertools
    out = [(0,)]
    for b0 in range(1, max_branch + 1):
        out += [(b0, *deeper) for deeper in itertools.product(range(max_branch + 1), repeat=b0)]
    return out + [(3, 0, 0, 0), (3, 1, 0, 0)]


SWEEP_TABLES = {2: dict(p=((1, 3), (3, 1), (4, 0)), q=((2, 2), (3, 1)), sup=((4, 0),), dis=((0, 4),)),
                3: dict(p=((2, 1, 1), (0, 3, 1), (1, 0, 3)), q=((1, 1, 2), (2, 2, 0)), sup=((3, 1, 0),), dis=((0, 0, 4),))}


def sweep_trees(mode: str) -> list[SpecTree]:
    """The bounded-exhaustive sweep of one mode: every shape of :func:`all_shapes`, vocabulary 2
    (and 3 where it has at most 4 candidates), fixed prefix-dependent tables with zeros (den 4).
    Modes: ``iid`` (children drawn i.i.d. from q, every draw enumerated), ``equal`` (q == p),
    ``disjoint`` (supports), ``fixed`` (draft_probs None: EVERY assignment of candidate tokens,
    repeats included, is its own case)."""
    import itertools
    out = []
    for shape in all_shapes():
        depth = 0 if shape[0] == 0 else (2 if any(shape[1:]) else 1)
        n_cand = shape[0] + sum(shape[1:])
        for vocab, t in SWEEP_TABLES.items():
            if vocab > 2 and n_cand > 4:
                continue
            common = dict(vocab=vocab, gamma=depth, den=4, p_key=1, q_key=2)
            if mode == "iid":
                out.append(SpecTree(TreeCase(p_table=t["p"], q_mode="table", q_table=t["q"], **common), shape))
            elif mode == "equal":
                out.append(SpecTree(TreeCase(p_table=t["p"], q_mode="equal", **common), shape))
            elif mode == "disjoint":
                out.append(SpecTree(TreeCase(p_table=t["sup"], q_mode="disjoint", q_table=t["dis"], **common), shape))
            elif vocab == 2 or n_cand <= 2:
                case = TreeCase(p_table=t["p"], q_mode="equal", **common)
                out += [SpecTree(case, shape, toks) for toks in itertools.product(range(vocab), repeat=n_cand)]
    return out


TREE_MODES = ("iid", "equal", "disjoint", "fixed")


@pytest.mark.parametrize("mode", TREE_MODES)
def test_lossless_every_shape(impl, mode):
    """Bounded-exhaustive: every tree shape up to depth 2 and branching 2 (and three siblings at
    the root) x each mode (:func:`sweep_trees`): every candidate tree, every cell of the uniforms,
    the rule's tokens at the middle and corners, the induced distribution exactly the target's."""
    for st_ in sweep_trees(mode):
        _assert_lossless(impl, st_)


# ----------------------------------------------------------------------------- a chain is speculative.verify
@settings(max_examples=max(1, settings().max_examples))
@given(case=batch_cases(max_batch=1, max_gamma=4, max_vocab=12, greedy=False), no_q=st.booleans())
def test_chain_is_speculative_verify(impl, reference, case, no_q):
    """Branching 1: the chain root -> x_1 -> ... -> x_γ verified with uniforms (v, u_1 .. u_γ)
    emits exactly what speculative.verify emits with uniforms (u_1 .. u_γ, v), every dtype."""
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


@pytest.mark.parametrize("name", list(PINNED))
def test_pinned(impl, name):
    """Hand-made trees with their exact result and the mutant each catches."""
    pin, want, _mutant = PINNED[name]
    tree = impl.get("tree_from_parents")(pin["tokens"], pin["parents"])
    q = None if pin["q"] is None else torch.tensor(pin["q"], dtype=torch.float64)
    got = read_verified(impl.get("verify_tree")(tree, torch.tensor(pin["p"], dtype=torch.float64), q,
                                                          uniforms=torch.tensor(pin["u"], dtype=torch.float64)),
                        pin["tokens"], len(pin["p"][0]), name)
    assert list(got) == want, f"{name}: emitted {list(got)}, pinned {want}"


def test_generator_draws_n_uniforms(impl):
    """verify_tree(generator=g) == verify_tree(uniforms=torch.rand(N, dtype=float64) from the same
    seed), and g ends in that draw's state."""
    assert_generator_is_one_uniform_draw(impl, "verify_tree", seeds=20)
