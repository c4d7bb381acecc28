"""The law of lossless tree verification, for ANY tree verifier (whatever its final draw and
float precision; spec_tests/tree_spec/oracles.py, "the law"; the reference's exact rule:
test_lossless.py).

For every candidate tree and every accepted path of positive probability (depth <= 2, branching
<= 3, vocab <= 5, dyadic p and q) the implementation is called near both ends of the path's
acceptance cell (and at its middle), every acceptance uniform kept 2^-20 from its threshold so
float32 arithmetic cannot flip a decision, with a fresh uniforms[0] each time. It must accept
exactly that path (children tried in node order, uniforms[c] against min(1, p/q), p the normalised
residual after rejected siblings) and emit a final token in the support of the distribution left
at its end; and the final tokens must follow that distribution (a pooled chi-square over the
distinct final distributions, fixed seeds, false-alarm rate 1e-6 per chi-square: one per sweep
mode or named case, one per Hypothesis example). With the acceptance probabilities exact and the
final tokens so distributed, the output is lossless (the induction of docs/tree_spec.md). The
generator path is checked as a black box (chi-square of the emitted sequences).
"""
from __future__ import annotations

import math
import zlib
from collections import Counter

import pytest
import torch
from hypothesis import given

from conformance.stats import lumped
from spec_tests.speculative.oracles import support
from spec_tests.speculative.strategies import TreeCase
from spec_tests.tree_spec.oracles import (candidate_trees, chi2_sf, outcome_violation, read_path, read_verified,
                                         rule_distribution, tree_groups, verify_kwargs)
from spec_tests.tree_spec.strategies import CASES, ROOT, TREE_MODES, SpecTree, spec_trees, sweep_trees

ALPHA = 1e-6          # false-alarm rate of each chi-square
DIST_DRAWS = 30       # final tokens drawn per distinct final distribution of a test (at least 2 per group ...
MAX_DRAWS = 30        # ... and at most this many)
LAW_POINTS = ("low", "high", "mid")   # the order a group's rows take its law points: both ends of its cell first


def _dist_text(dist) -> str:
    return "(" + ", ".join(str(w) for w in dist) + ")"


def assert_tree_law(impl, cases: list[SpecTree]) -> None:
    """The law for these cases (module doc), one pooled chi-square for all of them: each
    (candidate tree, accepted path) group is verified at its law points in turn (near the low end
    of its cell, near the high end, the middle, ...), 2 rows if its final token is certain, else
    enough rows that each distinct final distribution gets about DIST_DRAWS draws (at least 2, at
    most MAX_DRAWS a group); uniforms[0] fresh from a seed of the case. Every row: exactly the
    group's path, a final token in its distribution's support."""
    verify = impl.get("verify_tree")
    plan = [(st_, g) for st_ in cases for g in tree_groups(st_)]
    share = Counter(g.dist for _, g in plan if len(support(g.dist)) > 1)
    counts: dict[tuple, list] = {}
    trees: dict = {}
    for st_ in cases:
        gen = torch.Generator().manual_seed(zlib.crc32(repr(st_).encode()))
        parents = st_.parents()
        for g in tree_groups(st_):
            key = (st_, g.tokens)
            if key not in trees:
                trees[key] = (impl.get("tree_from_parents")([ROOT, *g.tokens], parents), verify_kwargs(st_, g.tokens))
            tree, kw = trees[key]
            random = len(support(g.dist)) > 1
            rows = min(MAX_DRAWS, max(2, math.ceil(DIST_DRAWS / share[g.dist]))) if random else 2
            v = torch.rand(rows, generator=gen, dtype=torch.float64).tolist()
            allowed = {g.path: support(g.dist)}
            for j in range(rows):
                u = list(g.points[LAW_POINTS[j % 3]])
                u[0] = v[j]
                nodes, token = read_path(verify(tree, **kw, uniforms=torch.tensor(u, dtype=torch.float64)),
                                         [ROOT, *g.tokens], parents, st_.case.vocab)
                why = outcome_violation(allowed, nodes, token)
                assert why is None, (f"not the law: candidates {list(g.tokens)} (parents {parents}), uniforms {u}: {why}"
                                     f"\n  case: {st_!r}")
                if random:
                    c = counts.setdefault(g.dist, [[0] * len(g.dist), st_, g])[0]
                    c[token] += 1
    stat, dof, worst = 0.0, 0, None
    for dist, (c, st_, g) in counts.items():
        n = sum(c)
        obs, exp = lumped(c, [float(w) * n for w in dist])
        if len(exp) < 2:
            continue
        part = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
        stat, dof = stat + part, dof + len(exp) - 1
        if worst is None or part / (len(exp) - 1) > worst[0]:
            worst = (part / (len(exp) - 1), dist, c, n, st_, g)
    if not dof:
        return
    pvalue = chi2_sf(stat, dof)
    if pvalue < ALPHA:
        _, dist, c, n, st_, g = worst
        raise AssertionError(
            f"the final tokens do not follow the distribution left at the end of the accepted path (the target row, "
            f"or the normalised residual after rejected children): pooled chi-square {stat:.1f} on {dof} degrees of "
            f"freedom over {len(counts)} distinct distributions, p-value {pvalue:.3g} < {ALPHA:g}; worst: "
            f"distribution {_dist_text(dist)} (e.g. candidates {list(g.tokens)}, accepted nodes {list(g.path)}), final "
            f"tokens counted {c} in {n} draws, expected {[round(float(w) * n, 1) for w in dist]}\n  case: {st_!r}")


@pytest.mark.parametrize("name", list(CASES))
def test_lossless_law_fixed_cases(impl, name):
    """Named corner cases (i.i.d. siblings, q == p, disjoint supports, fixed candidates with a
    repeated token), judged by the law: every candidate tree and accepted path at its law
    points, the final tokens' support and distribution (chi-square, fixed seed, p >= 1e-6)."""
    assert_tree_law(impl, [CASES[name]])


@given(st_=spec_trees())
def test_lossless_law(impl, st_):
    """Any tree verifier (module doc): depth <= 2, branching <= 2, vocab <= 5, Hypothesis p and q
    (q == p, disjoint supports, q > 0 where p = 0, mixtures, fixed candidates): every candidate
    tree and accepted path verified at its law points, exactly that path accepted (float32
    rounding admitted within 2^-21 of a threshold, never reached here), the final token in the
    support of the distribution left, and distributed as it (pooled chi-square, p >= 1e-6, fixed
    seeds)."""
    assert_tree_law(impl, [st_])


# ----------------------------------------------------------------------------- every shape, exhaustively
@pytest.mark.parametrize("mode", TREE_MODES)
def test_lossless_law_every_shape(impl, mode):
    """Bounded-exhaustive, judged by the law: every tree shape up to depth 2 and branching 2 (and
    three siblings at the root) x each mode (:func:`sweep_trees`): every candidate tree and
    accepted path at its law points, one pooled chi-square of the final tokens for the
    whole sweep (each distinct final distribution at least about 30 draws)."""
    assert_tree_law(impl, sweep_trees(mode))


@pytest.mark.parametrize("u1", [0.0, 0.5])
def test_candidate_of_draft_probability_zero_is_never_accepted(impl, u1):
    """The law: a candidate x_c with q_c(x_c) = 0 is never accepted, not even by u_c = 0 (its
    threshold min(1, p/q) is not defined; the contract's test is q_c(x_c) > 0 and u_c q_c(x_c) <
    p(x_c)). Here p = (1/2, 1/2), q = (1, 0) and the one candidate is token 1: it is rejected, the
    residual max(p - q, 0) normalised is (0, 1), so the output is exactly the token 1 at the root."""
    from reference.tree_spec import build_tree
    tree = build_tree(0, [[1]])
    p = torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=torch.float64)
    q = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
    for u0 in (0.0, 0.3, 0.999):
        out = impl.get("verify_tree")(tree, p, q, uniforms=torch.tensor([u0, u1], dtype=torch.float64))
        assert int(out.num_accepted) == 0 and list(out.nodes.tolist()) == [0], (
            f"candidate token 1 has draft probability 0 and must be rejected (u = {u1}); got nodes {out.nodes.tolist()}")
        assert list(out.tokens.tolist()) == [1], (
            f"after the rejection the residual is (0, 1): the token must be 1, got {out.tokens.tolist()}")


# ----------------------------------------------------------------------------- the generator path
GENERATOR_CASE = SpecTree(
    TreeCase(vocab=3, gamma=2, den=8, p_table=((4, 2, 2), (1, 6, 1), (0, 4, 4)), q_mode="table",
             q_table=((2, 2, 4), (4, 4, 0)), p_key=1, q_key=2), (2, 1, 1))
GENERATOR_ROWS = 300


def test_generator_draws_law(impl):
    """The generator path as a black box: candidate trees drawn from q (depth 2, two i.i.d.
    children per node, vocab 3; a seeded draw of the enumeration's trees), 300 calls of
    verify_tree(generator=g) with one seeded torch.Generator; no emitted sequence of probability 0
    (exact), then a chi-square of the emitted sequences against their exact distribution (the
    law's: its acceptance probabilities and final distributions are the rule's), cells lumped to
    expect >= 5. Fails iff p-value < 1e-6 (fixed seeds: it always passes or always fails)."""
    st_ = GENERATOR_CASE
    trees = list(candidate_trees(st_))
    weights = torch.tensor([float(w) for _, w in trees], dtype=torch.float64)
    pick = (weights.cumsum(0)[None, :] <= torch.rand(GENERATOR_ROWS, 1, generator=torch.Generator().manual_seed(20240601),
                                                     dtype=torch.float64)).sum(1).clamp(max=len(trees) - 1).tolist()
    built = {}
    gen = torch.Generator().manual_seed(7)
    counts: Counter = Counter()
    for i in pick:
        toks = trees[i][0]
        if toks not in built:
            built[toks] = (impl.get("tree_from_parents")([ROOT, *toks], st_.parents()), verify_kwargs(st_, toks))
        tree, kw = built[toks]
        counts[read_verified(impl.get("verify_tree")(tree, **kw, generator=gen), [ROOT, *toks], st_.case.vocab)] += 1
    rule = rule_distribution(st_)
    impossible = sorted(e for e in counts if e not in rule)
    assert not impossible, (f"emitted {[list(e) for e in impossible[:5]]} ({sum(counts[e] for e in impossible)} of "
                            f"{GENERATOR_ROWS} calls), which has probability 0")
    keys = sorted(rule)
    obs, exp = lumped([counts.get(k, 0) for k in keys], [float(rule[k]) * GENERATOR_ROWS for k in keys])
    pvalue = chi2_sf(sum((o - e) ** 2 / e for o, e in zip(obs, exp)), len(exp) - 1)
    worst = max(keys, key=lambda k: abs(counts.get(k, 0) - float(rule[k]) * GENERATOR_ROWS) / max(1.0, float(rule[k]) * GENERATOR_ROWS) ** 0.5)
    assert pvalue >= ALPHA, (f"chi-square p-value {pvalue:.3g} < {ALPHA:g}; e.g. {list(worst)} emitted "
                             f"{counts.get(worst, 0)} times, expected {float(rule[worst]) * GENERATOR_ROWS:.1f}")
