"""Greedy tree verification (the longest path on the target's argmax chain; equal to verifying
every path separately with speculative's greedy rule and keeping the longest) and Medusa's typical
acceptance (implemented as Medusa does it, and shown NOT to preserve the target distribution).

Law and choice: the unmarked tests hold every implementation (greedy: a deepest path on an argmax
chain, ties and float32 rounding of the maximum either way; typical: a deepest all-typical root
path, float32 rounding of the threshold either way, the final token in the last row's support and
distributed as it); those marked ``@pytest.mark.choice`` pin the reference's own choices (argmax
ties to the smaller id, the first deepest node in node order, the final token by the inverse CDF
of uniforms[0], the generator consumed as one ``torch.rand(N, float64)``), enforced at
token-exact only."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases, set_entry
from conformance.stats import lumped
from spec_tests.tree_spec.oracles import (assert_generator_is_one_uniform_draw, chi2_sf, greedy_violation,
                                         inverse_cdf, outcome_violation, read_path, read_verified,
                                         tree_outcomes, typical_violation)
from spec_tests.tree_spec.strategies import parent_arrays

ALPHA = 1e-6   # false-alarm rate of the chi-square tests
GREEDY_TIES = "greedy: argmax ties go to the smaller token id; among equally deep matching nodes the first in node order"
TYPICAL_EXACT = ("typical: the first deepest all-typical node in node order; the final token is the inverse CDF of "
                 "uniforms[0]; the threshold in float64")
SEEDED = "the generator is consumed as one torch.rand(N, float64)"


@st.composite
def float_trees(draw, max_nodes=9, max_vocab=4, trie=False):
    """A random tree (repeated sibling tokens allowed unless ``trie``) with target rows that are
    often one-hot or tied (small vocabulary, coarse weights), so argmax chains run deep."""
    parents = draw(parent_arrays(max_nodes))
    n = len(parents)
    vocab = draw(st.integers(1, max_vocab))
    tokens = draw(st.lists(st.integers(0, vocab - 1), min_size=n, max_size=n))
    if trie:                       # siblings hold distinct tokens: rank among siblings + an offset
        vocab = max([vocab] + [parents.count(i) for i in range(n)])
        rank = [sum(1 for j in range(1, i) if parents[j] == parents[i]) for i in range(n)]
        tokens = [tokens[0] % vocab] + [(tokens[parents[i]] + rank[i]) % vocab for i in range(1, n)]
    rows = draw(st.lists(st.lists(st.integers(0, 4), min_size=vocab, max_size=vocab).filter(any),
                         min_size=n, max_size=n))
    p = torch.tensor(rows, dtype=torch.float64)
    return tokens, parents, p / p.sum(1, keepdim=True)


def _leaf_paths(parents):
    n = len(parents)
    out = []
    for leaf in (i for i in range(n) if i not in parents):
        path, j = [], leaf
        while j >= 0:
            path.append(j)
            j = parents[j]
        out.append(path[::-1])
    return out


@example(t=([0, 1, 0, 2], [-1, 0, 0, 2], torch.tensor([[1, 0, 0], [1, 0, 0], [0, 0, 1], [1, 0, 0]],
                                                      dtype=torch.float64)), f32=False).via("mutant:greedy_first_child_only")
@given(t=float_trees(), f32=st.booleans())
def test_greedy_obeys_the_law(impl, t, f32):
    """Any tree (siblings may repeat a token), rows in float64 or float32 (coarse weights: many
    tied maxima): the accepted nodes are a root path, each node's token an argmax of its parent's
    row, the final token an argmax of the last node's row (ties, and values within float32
    rounding of the maximum, either way), and no node deeper than the last one follows the argmax
    chain whatever argmax is taken where the result does not show one: a deepest path."""
    tokens, parents, p = t
    if f32:
        p = p.float()
    tree = impl.get("tree_from_parents")(tokens, parents)
    nodes, token = read_path(impl.get("verify_tree_greedy")(tree, p), tokens, parents, p.shape[1], "verify_tree_greedy")
    why = greedy_violation(tokens, parents, p, nodes, token)
    assert why is None, f"verify_tree_greedy (tokens {tokens}, parents {parents}, rows {p.tolist()}): {why}"


@example(t=([0, 1, 0, 2], [-1, 0, 0, 2], torch.tensor([[1, 0, 0], [1, 0, 0], [0, 0, 1], [1, 0, 0]],
                                                      dtype=torch.float64))).via("mutant:greedy_first_child_only")
@given(t=float_trees(trie=True))
@pytest.mark.choice(GREEDY_TIES)
def test_greedy_is_longest_per_path_greedy(impl, reference, t):
    """Greedy tree verification == for every root-to-leaf path, speculative.verify(greedy) on that
    chain; keep the path with the most accepted drafts (in a trie all of them emit the same tokens)."""
    tokens, parents, p = t
    tree = impl.get("tree_from_parents")(tokens, parents)
    got = read_verified(impl.get("verify_tree_greedy")(tree, p), tokens, p.shape[1], "verify_tree_greedy")
    verify = reference.of("speculative").get("verify")
    best = None
    for path in _leaf_paths(parents):
        x = torch.tensor([[tokens[i] for i in path[1:]]], dtype=torch.int64).reshape(1, len(path) - 1)
        out, k = verify(p[path][None], None, x, greedy=True, uniforms=torch.zeros(1, len(path), dtype=torch.float64))
        emitted = tuple(out[0, :int(k[0]) + 1].tolist())
        if best is None or len(emitted) > len(best):
            best = emitted
    assert got == best, f"greedy tree verification emits {list(got)}; the longest per-path greedy result is {list(best)}"


def _greedy_oracle(tokens, parents, p):
    """Brute force: the nodes whose whole root path follows the argmax chain (ties to the smaller
    id); the deepest, the first in node order among the deepest; emit its row's argmax."""
    rows = p.tolist()
    argmax = [min(range(len(r)), key=lambda t: (-r[t], t)) for r in rows]
    n = len(tokens)
    ok, depth = [True] + [False] * (n - 1), [0] * n
    for i in range(1, n):
        depth[i] = depth[parents[i]] + 1
        ok[i] = ok[parents[i]] and tokens[i] == argmax[parents[i]]
    best = min((i for i in range(n) if ok[i]), key=lambda i: (-depth[i], i))
    path, j = [], best
    while j >= 0:
        path.append(j)
        j = parents[j]
    path = path[::-1]
    return tuple(tokens[i] for i in path[1:]) + (argmax[best],), path


@example(t=([0, 1, 1], [-1, 0, 0], torch.tensor([[0, 1], [1, 0], [0, 1]], dtype=torch.float64))).via(
    "mutant:deepest_ties_to_last")
@given(t=float_trees())
@pytest.mark.choice(GREEDY_TIES)
def test_greedy_keeps_first_deepest_node(impl, t):
    """Any tree (siblings may repeat a token, so several nodes may match the argmax chain): the
    accepted nodes are the root path of the deepest matching node, the FIRST in node order among
    the deepest (its K/V are the ones kept), and the final token is that node's argmax."""
    tokens, parents, p = t
    tree = impl.get("tree_from_parents")(tokens, parents)
    res = impl.get("verify_tree_greedy")(tree, p)
    got = read_verified(res, tokens, p.shape[1], "verify_tree_greedy")
    want, nodes = _greedy_oracle(tokens, parents, p)
    assert (got, res.nodes.tolist()) == (want, nodes), (
        f"verify_tree_greedy keeps nodes {res.nodes.tolist()} and emits {list(got)}; the first deepest "
        f"argmax path is {nodes}, emitting {list(want)}")


@pytest.mark.choice(GREEDY_TIES)
def test_greedy_ties_to_smaller_id(impl):
    """argmax ties go to the smaller token id (torch.argmax's rule): p = (.5, .5) follows child 0."""
    tree = impl.get("build_tree")(0, [[1, 1], [0, 1]])
    p = torch.tensor([[.5, .5]] + [[0., 1.]] * 4, dtype=torch.float64)
    got = impl.get("verify_tree_greedy")(tree, p)
    assert got.tokens.tolist() == [0, 1, 1], got


# ----------------------------------------------------------------------------- typical acceptance
def _entropy(row):
    return -sum(x * math.log(x) for x in row if x > 0)


def _typical_oracle(tokens, parents, p, eps, delta, u0):
    """Brute force: every root path whose nodes are all typical; the deepest (first in node order)."""
    rows = p.tolist()
    n = len(tokens)
    ok = [True] + [False] * (n - 1)
    depth = [0] * n
    for i in range(1, n):
        par = parents[i]
        depth[i] = depth[par] + 1
        ok[i] = ok[par] and rows[par][tokens[i]] > min(eps, delta * math.exp(-_entropy(rows[par])))
    best = min((i for i in range(n) if ok[i]), key=lambda i: (-depth[i], i))
    path, j = [], best
    while j >= 0:
        path.append(j)
        j = parents[j]
    return tuple(tokens[i] for i in path[::-1][1:]) + (inverse_cdf(rows[best], u0),), path[::-1]


@example(t=([0, 1, 0], [-1, 0, 1], torch.tensor([[.6, .4], [.95, .05], [.5, .5]], dtype=torch.float64)),
         eps=0.09, delta=0.3, u0=0.5).via("mutant:typical_own_row")
@example(t=([0, 1], [-1, 0], torch.tensor([[.9, .1], [.5, .5]], dtype=torch.float64)),
         eps=0.5, delta=0.3, u0=0.5).via("mutant:typical_no_exp")
@example(t=([0, 1], [-1, 0], torch.tensor([[.82, .18], [.5, .5]], dtype=torch.float64)),
         eps=0.3, delta=0.3, u0=0.5).via("mutant:typical_entropy_log2")
@given(t=float_trees(), eps=st.sampled_from([0.09, 0.3, 1.0]), delta=st.sampled_from([0.0, 0.3, 0.55]),
       u0=st.floats(0, 1, exclude_max=True))
def test_typical_accept_obeys_the_law(impl, t, eps, delta, u0):
    """Candidate c (parent cur) is typical iff p_cur(x_c) > min(ε, δ exp(-H(p_cur))), H in nats
    (within 2^-21 of the threshold either way): the accepted nodes are a root path of typical
    nodes, no node deeper than the last one has a root path of typical nodes (a deepest path; which
    of equally deep ones is not the law's), the final token in the last row's support."""
    tokens, parents, p = t
    tree = impl.get("tree_from_parents")(tokens, parents)
    u = torch.full((len(tokens),), 0.5, dtype=torch.float64)
    u[0] = u0
    res = impl.get("typical_accept")(tree, p, epsilon=eps, delta=delta, uniforms=u)
    nodes, token = read_path(res, tokens, parents, p.shape[1], "typical_accept")
    why = typical_violation(tokens, parents, p, eps, delta, nodes, token)
    assert why is None, f"typical_accept(ε={eps}, δ={delta}) (tokens {tokens}, parents {parents}, rows {p.tolist()}): {why}"


def test_typical_final_draw_law(impl):
    """The final token is drawn from the target row at the end of the accepted path: a tree whose
    path is certain (node 1, p = .3 > 0.09, typical; its child node 2, p = .05 < 0.09, not), 100
    calls with fresh seeded uniforms: every final token in the support of node 1's row
    (.5, .45, .05), their counts a chi-square fit to it (fixed seed, p >= 1e-6)."""
    tree = impl.get("tree_from_parents")([0, 1, 2], [-1, 0, 1])
    p = torch.tensor([[.6, .3, .1], [.5, .45, .05], [.2, .3, .5]], dtype=torch.float64)
    n, counts = 100, [0, 0, 0]
    u = torch.rand(n, 3, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    for r in range(n):
        nodes, token = read_path(impl.get("typical_accept")(tree, p, uniforms=u[r]), [0, 1, 2], [-1, 0, 1], 3,
                                 "typical_accept")
        why = typical_violation([0, 1, 2], [-1, 0, 1], p, 0.09, 0.3, nodes, token)
        assert why is None, f"typical_accept (uniforms {u[r].tolist()}): {why}"
        assert nodes == (0, 1), f"typical_accept kept nodes {list(nodes)}; node 1 is typical and node 2 is not"
        counts[token] += 1
    obs, exp = lumped(counts, [x * n for x in p[1].tolist()])
    pvalue = chi2_sf(sum((o - e) ** 2 / e for o, e in zip(obs, exp)), len(exp) - 1)
    assert pvalue >= ALPHA, (f"the final tokens {counts} in {n} draws do not follow the last row {p[1].tolist()}: "
                             f"chi-square p-value {pvalue:.3g} < {ALPHA:g}")


@example(t=([0, 1, 0], [-1, 0, 1], torch.tensor([[.6, .4], [.95, .05], [.5, .5]], dtype=torch.float64)),
         eps=0.09, delta=0.3, u0=0.5).via("mutant:typical_own_row")
@example(t=([0, 1], [-1, 0], torch.tensor([[.9, .1], [.5, .5]], dtype=torch.float64)),
         eps=0.5, delta=0.3, u0=0.5).via("mutant:typical_no_exp")
@example(t=([0, 1], [-1, 0], torch.tensor([[.82, .18], [.5, .5]], dtype=torch.float64)),
         eps=0.3, delta=0.3, u0=0.5).via("mutant:typical_entropy_log2")
@given(t=float_trees(), eps=st.sampled_from([0.09, 0.3, 1.0]), delta=st.sampled_from([0.0, 0.3, 0.55]),
       u0=st.floats(0, 1, exclude_max=True))
@pytest.mark.choice(TYPICAL_EXACT)
def test_typical_accept_matches_medusa_rule(impl, t, eps, delta, u0):
    """Candidate c (parent cur) is typical iff p_cur(x_c) > min(ε, δ exp(-H(p_cur))), H in nats
    (the pinned (.82, .18) row: threshold 0.3 e^-0.471 = 0.187 > 0.18, rejected; in bits it would be
    0.152, accepted); the deepest all-typical root path (first in node order) is kept, its nodes
    returned; the final token is inverse_cdf(p_last, u_0)."""
    tokens, parents, p = t
    tree = impl.get("tree_from_parents")(tokens, parents)
    u = torch.full((len(tokens),), 0.5, dtype=torch.float64)
    u[0] = u0
    res = impl.get("typical_accept")(tree, p, epsilon=eps, delta=delta, uniforms=u)
    got = read_verified(res, tokens, p.shape[1], "typical_accept")
    want, nodes = _typical_oracle(tokens, parents, p, eps, delta, u0)
    assert got == want, f"typical_accept(ε={eps}, δ={delta}) emits {list(got)}, Medusa's rule {list(want)}"
    assert res.nodes.tolist() == nodes, f"typical_accept keeps nodes {res.nodes.tolist()}, Medusa's rule {nodes}"


@pytest.mark.choice(SEEDED)
def test_typical_generator_draws_n_uniforms(impl):
    """typical_accept(generator=g) uses only uniforms[0] but still draws N: it equals
    typical_accept(uniforms=torch.rand(N, dtype=float64)) from the same seed, and g ends in that
    draw's state."""
    assert_generator_is_one_uniform_draw(impl, "typical_accept", seeds=10)


def test_typical_defaults_are_medusas(impl):
    """ε = 0.09, δ = 0.3 (Medusa's posterior_threshold / posterior_alpha): p(x) = 0.095 > min(.09, ...)
    is accepted by default, p(x) = 0.085 is not."""
    accept = impl.get("typical_accept")
    tree = impl.get("build_tree")(0, [[1]])
    u = torch.zeros(2, dtype=torch.float64)
    for px, k in ((0.095, 1), (0.085, 0)):
        p = torch.tensor([[1 - px, px], [1.0, 0.0]], dtype=torch.float64)
        assert accept(tree, p, uniforms=u).num_accepted == k, (px, k)


def _first_token_tv(impl, tree, p, **kw):
    """Exact distribution of the FIRST emitted token under typical acceptance (the final draw's
    uniform enumerated over the cells of p's CDF; acceptance is deterministic) vs the target p[0]."""
    accept = impl.get("typical_accept")
    n = len(tree.tokens)
    dist = [0.0] * p.shape[1]
    # acceptance does not depend on the uniform; the final draw cuts [0, 1) at p's cumsum
    edges = [0.0] + torch.cumsum(p[0], 0).tolist()
    mids = [(a + b) / 2 for a, b in zip(edges, edges[1:]) if b > a]
    widths = [b - a for a, b in zip(edges, edges[1:]) if b > a]
    res = accept(tree, p, uniforms=torch.zeros(n, dtype=torch.float64), **kw)
    if res.num_accepted:           # the first token is the accepted candidate, whatever the draw
        dist[int(res.tokens[0])] = 1.0
    else:
        for m, w in zip(mids, widths):
            u = torch.zeros(n, dtype=torch.float64)
            u[0] = m
            dist[int(accept(tree, p, uniforms=u, **kw).tokens[0])] += w
    return 0.5 * sum(abs(a - b) for a, b in zip(dist, p[0].tolist())), dist


STATED_TREE = ([2, 0], [-1, 0])      # root 2, one candidate: token 0
STATED_P = [[.35, .35, .30], [.2, .3, .5]]


def test_typical_is_not_distribution_preserving(impl):
    """The stated case: vocab 3, target p(. | prefix) = (0.35, 0.35, 0.30) (entropy 1.097: the
    threshold is min(0.09, 0.3 e^-1.097) = 0.09), one candidate token 0. Typical acceptance accepts
    it every time, so the first token is 0 with probability 1, where the target says 0.35: total
    variation 0.65 (asserted > 0.5). Lossless verify_tree on the same tree, by the law: the
    candidate is accepted iff u_1 < p(0) = .35 (checked at u_1 = .1 and .6), and after its
    rejection the first token follows the residual (0, .35, .30) / .65 (support exact, 100 draws
    of uniforms[0], chi-square p >= 1e-6): the first token is distributed as .35 δ_0 + .65 x the
    residual = p[0], TV 0 (the exact identity for the inverse CDF: the next test)."""
    tree = impl.get("tree_from_parents")(*STATED_TREE)
    p = torch.tensor(STATED_P, dtype=torch.float64)
    tv, dist = _first_token_tv(impl, tree, p)
    print(f"\ntypical acceptance (eps 0.09, delta 0.3), p = (0.35, 0.35, 0.30), candidate 0: first-token "
          f"distribution {dist}, total variation from the target {tv:.4f}")
    assert tv > 0.5, f"total variation {tv:.4f}: typical acceptance was expected to move the distribution"
    verify = impl.get("verify_tree")
    tokens, parents = STATED_TREE
    n, counts = 101, [0, 0, 0]
    v = torch.rand(n, generator=torch.Generator().manual_seed(5), dtype=torch.float64).tolist()
    for r in range(n):
        u1 = 0.1 if r == 0 else 0.6            # accepted once, then rejected: the residual's draws
        u = torch.tensor([v[r], u1], dtype=torch.float64)
        nodes, token = read_path(verify(tree, p, uniforms=u), tokens, parents, 3)
        why = outcome_violation(tree_outcomes(tokens, parents, p, None, u), nodes, token)
        assert why is None, f"verify_tree on the stated tree (uniforms {u.tolist()}): {why}"
        if r:
            counts[token] += 1
    residual = [0, .35 / .65, .30 / .65]
    obs, exp = lumped(counts, [w * (n - 1) for w in residual])
    pvalue = chi2_sf(sum((o - e) ** 2 / e for o, e in zip(obs, exp)), len(exp) - 1)
    assert pvalue >= ALPHA, (f"verify_tree on the stated tree, candidate rejected: first tokens {counts} in {n - 1} "
                             f"draws, the residual (0, .35, .30) / .65 expects {[round(w * (n - 1), 1) for w in residual]}: "
                             f"chi-square p-value {pvalue:.3g} < {ALPHA:g}")


@pytest.mark.choice("the final token is the inverse CDF of uniforms[0]; acceptance is float64 u * q < p")
def test_typical_case_verify_tree_exact(impl):
    """The stated case's lossless control as an exact identity: verify_tree evaluated at the middle
    of every cell of (u_1, uniforms[0]) (accept iff u_1 < .35; then the inverse CDF of the residual
    (0, .35, .30) / .65) gives the first token's distribution p[0] exactly (within 1e-12)."""
    tree = impl.get("tree_from_parents")(*STATED_TREE)
    p = torch.tensor(STATED_P, dtype=torch.float64)
    verify = impl.get("verify_tree")
    exact = [0.0, 0.0, 0.0]
    for a_lo, a_hi in ((0.0, 0.35), (0.35, 1.0)):           # accept / reject node 1 (threshold p(0) = .35)
        u1 = (a_lo + a_hi) / 2
        if a_lo == 0.0:
            exact[0] += a_hi - a_lo
            continue
        # residual (0, .35, .30) / .65: cells at .35/.65
        for v_lo, v_hi in ((0.0, .35 / .65), (.35 / .65, 1.0)):
            t = verify(tree, p, uniforms=torch.tensor([(v_lo + v_hi) / 2, u1], dtype=torch.float64)).tokens[0]
            exact[int(t)] += (a_hi - a_lo) * (v_hi - v_lo)
    assert max(abs(a - b) for a, b in zip(exact, p[0].tolist())) < 1e-12, exact


@given(px=st.floats(0.1, 0.99), rest=st.integers(1, 4))
def test_typical_biases_toward_candidates(impl, px, rest):
    """Property: a single candidate x with p(x) above Medusa's threshold (> 0.09) is always accepted,
    so the first token's distribution puts 1 on x: TV = 1 - p(x) > 0 for every p(x) < 1."""
    vocab = rest + 1
    row = [px] + [(1 - px) / rest] * rest
    p = torch.tensor([row, [1.0] + [0.0] * rest], dtype=torch.float64)
    tree = impl.get("build_tree")(1 % vocab, [[0]])
    tv, _ = _first_token_tv(impl, tree, p)
    assert tv == pytest.approx(1 - px, abs=1e-9), (tv, px)


# ----------------------------------------------------------------------------- bad input
def _valid():
    from reference.tree_spec import build_tree
    tree = build_tree(0, [[1, 2], [2]])
    p = torch.tensor([[.5, .25, .25]] * 4, dtype=torch.float32)
    return dict(tree=tree, target_probs=p)


VERIFY_BAD = [
    Bad("tree a list", dict(tree=[[1, 2], [2]]), TypeError, ("tree",)),
    Bad("target_probs rank 3", lambda kw: {**kw, "target_probs": kw["target_probs"][None]}, ValueError, ("target_probs",)),
    Bad("target_probs one row short", lambda kw: {**kw, "target_probs": kw["target_probs"][:3]}, ValueError,
        ("target_probs",)),
    Bad("target_probs int", lambda kw: {**kw, "target_probs": kw["target_probs"].long()}, TypeError, ("target_probs",)),
    Bad("target_probs NaN", set_entry("target_probs", (2, 1), float("nan")), ValueError, ("target_probs", "NaN")),
    Bad("target_probs negative", set_entry("target_probs", (3, 0), -0.5), ValueError, ("target_probs", "negative")),
    Bad("target_probs sums to 1/2", lambda kw: {**kw, "target_probs": kw["target_probs"] / 2}, ValueError,
        ("target_probs", "sums")),
    Bad("tree token past vocab", lambda kw: {**kw, "tree": kw["tree"]._replace(tokens=torch.tensor([0, 1, 3, 2]))},
        ValueError, ("tree",)),
    Bad("tree token -1", lambda kw: {**kw, "tree": kw["tree"]._replace(tokens=torch.tensor([0, 1, -1, 2]))},
        ValueError, ("tree",)),
    Bad("uniforms wrong length", dict(uniforms=torch.zeros(3, dtype=torch.float64)), ValueError, ("uniforms",)),
    Bad("uniforms = 1", dict(uniforms=torch.tensor([0.1, 0.2, 1.0, 0.3], dtype=torch.float64)), ValueError, ("uniforms",)),
    Bad("uniforms negative", dict(uniforms=torch.tensor([0.1, -0.2, 0.5, 0.3], dtype=torch.float64)), ValueError,
        ("uniforms",)),
    Bad("uniforms int", dict(uniforms=torch.zeros(4, dtype=torch.int64)), TypeError, ("uniforms",)),
    Bad("uniforms a list", dict(uniforms=[0.1] * 4), TypeError, ("uniforms",)),
    Bad("generator an int", dict(generator=7), TypeError, ("generator",)),
]

SAMPLED_BAD = VERIFY_BAD + [
    Bad("no generator, no uniforms", dict(generator=None), ValueError, ("generator",)),
    Bad("draft_probs shape", dict(draft_probs=torch.full((4, 2), 0.5)), ValueError, ("draft_probs",)),
    Bad("draft_probs sums to 2", dict(draft_probs=torch.full((4, 3), 2 / 3)), ValueError, ("draft_probs", "sums")),
    Bad("draft_probs a list", dict(draft_probs=[[1 / 3] * 3] * 4), TypeError, ("draft_probs",)),
]


@bad_cases(SAMPLED_BAD)
def test_verify_tree_rejects_bad_input(impl, bad):
    """verify_tree: a Tree, (N, vocab) distributions, tokens in the vocabulary, (N,) uniforms in
    [0, 1) or a torch.Generator; nothing drawn by a rejected call."""
    gen = torch.Generator().manual_seed(1)
    assert_rejects(impl.get("verify_tree"), {**_valid(), "generator": gen}, bad,
                   state=lambda: gen.get_state().tolist())


@bad_cases([b for b in VERIFY_BAD if b.id.startswith(("tree", "target"))])
def test_verify_tree_greedy_rejects_bad_input(impl, bad):
    """verify_tree_greedy: a Tree and (N, vocab) distributions, tokens in the vocabulary."""
    assert_rejects(impl.get("verify_tree_greedy"), _valid(), bad)


@bad_cases(VERIFY_BAD + [
    Bad("epsilon 0", dict(epsilon=0.0), ValueError, ("epsilon",)),
    Bad("epsilon above 1", dict(epsilon=1.5), ValueError, ("epsilon",)),
    Bad("epsilon a string", dict(epsilon="0.09"), TypeError, ("epsilon",)),
    Bad("delta negative", dict(delta=-0.1), ValueError, ("delta",)),
    Bad("delta nan", dict(delta=float("nan")), ValueError, ("delta",)),
])
def test_typical_accept_rejects_bad_input(impl, bad):
    """typical_accept: as verify_tree, and ε in (0, 1], δ a finite real >= 0."""
    gen = torch.Generator().manual_seed(1)
    assert_rejects(impl.get("typical_accept"), {**_valid(), "generator": gen}, bad,
                   state=lambda: gen.get_state().tolist())
