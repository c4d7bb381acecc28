"""Oracles of tree speculation, written from the definitions (not from reference/tree_spec.py).

Structure: a node's PATH is the tuple of tokens from the root's child down to it; in a trie a node
j is an ancestor of i iff path(j) is a prefix of path(i).

Exact enumeration of lossless tree verification (the tree analogue of
spec_tests/speculative/oracles.py). The randomness is (a) the candidate tokens, each node's
children drawn i.i.d. from q(. | path) (enumerated: every assignment of positive probability), and
(b) the uniforms, one per node (its acceptance test) and uniforms[0] (the final draw). The
recursive rejection rule is a threshold on each visited node's uniform and an inverse CDF of
uniforms[0], so the uniforms' cube splits into cells -- "accept these nodes, reject those, emit
token t" -- of exactly known probability; the verifier is evaluated at the middle of each cell and
near two opposite corners, and the distribution it induces (Fractions) must be lossless: the same
statement as speculative's, via spec_tests.speculative.oracles.lossless_violation. That holds the
reference's choices (the inverse CDF of uniforms[0], float64 acceptance): test_lossless.py, marked
``@pytest.mark.choice``.

The law ("the law" below; test_law.py and the unmarked tests): the same recursive rejection walk
(:func:`_stops`) gives, for every candidate tree and accepted path, the acceptance cell of the
path and the exact distribution of the final token; :func:`tree_groups` puts law points in each
cell (2^-20 from every threshold), :func:`tree_outcomes` is the law for any uniforms (both
branches where float32 rounding may decide either way), :func:`greedy_violation` and
:func:`typical_violation` are the law of the other two verifiers. The acceptance rule, argmax
sets and float32 slack are speculative's (``accept_decisions``, ``argmax_set``, ``support``,
``F32_SLACK``, ``law_point``), imported, not copied.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import torch

from spec_tests.speculative.oracles import (F32_SLACK, ONE_MINUS, accept_decisions, accept_prob, cdf_cells,
                                            argmax_set, law_point, support)
from spec_tests.tree_spec.strategies import ROOT, SpecTree

POINTS = ("mid", "low", "high")


def normalised_residual(p: tuple, q: tuple) -> tuple:
    """max(p - q, 0) / its sum; p itself when that has no positive entry."""
    r = tuple(max(a - b, Fraction(0)) for a, b in zip(p, q))
    s = sum(r)
    return tuple(x / s for x in r) if s else p


def one_hot(t: int, vocab: int) -> tuple:
    return tuple(Fraction(int(i == t)) for i in range(vocab))


@dataclass(frozen=True)
class TreeCell:
    tokens: tuple       # candidate tokens (node order, root excluded)
    path: tuple         # accepted nodes, root first
    token: int          # the final emitted token
    weight: Fraction
    uniforms: dict      # point name -> N floats

    def emitted(self, tokens_with_root) -> tuple:
        return tuple(tokens_with_root[i] for i in self.path[1:]) + (self.token,)


def _inside(lo: Fraction, hi: Fraction, where: str) -> float:
    w = hi - lo
    x = {"mid": lo + w / 2, "low": lo + w / 2 ** 20, "high": hi - w / 2 ** 20}[where]
    return min(float(x), ONE_MINUS)


def node_paths(tokens: tuple, parents: list[int]) -> list[tuple]:
    """path(i): the candidate tokens from the root's child to i (root: ())."""
    paths = [()]
    for i in range(1, len(parents)):
        paths.append(paths[parents[i]] + (tokens[i - 1],))
    return paths


def candidate_trees(st: SpecTree):
    """(tokens, probability) for every candidate assignment of positive probability."""
    if st.tokens is not None:
        yield st.tokens, Fraction(1)
        return
    parents = st.parents()
    n = len(parents)
    for toks in itertools.product(range(st.case.vocab), repeat=n - 1):
        paths = node_paths(toks, parents)
        w = Fraction(1)
        for i in range(1, n):
            w *= st.case.q(paths[parents[i]])[toks[i - 1]]
            if w == 0:
                break
        if w:
            yield toks, w


def _stops(st: SpecTree):
    """The recursive rejection walk over every candidate tree: (candidates, accepted path, its
    probability, node -> ("acc" | "rej", acceptance probability a) of every node tried, the
    distribution the final token is drawn from) for every path of positive probability. One
    generator serves the exact cells (:func:`tree_cells`) and the law's groups
    (:func:`tree_groups`)."""
    case, parents = st.case, st.parents()
    n = len(parents)
    children = [[] for _ in range(n)]
    for i in range(1, n):
        children[parents[i]].append(i)
    for toks, wt in candidate_trees(st):
        paths = node_paths(toks, parents)
        found = []

        def q_of(cur, c):
            return one_hot(toks[c - 1], case.vocab) if st.tokens is not None else case.q(paths[cur])

        def walk(cur, j, p, weight, path, ints):
            if j < len(children[cur]):
                c = children[cur][j]
                x, q = toks[c - 1], q_of(cur, c)
                a = accept_prob(p[x], q[x])
                if a > 0:
                    walk(c, 0, case.p(paths[c]), weight * a, path + (c,), {**ints, c: ("acc", a)})
                if a < 1:
                    walk(cur, j + 1, normalised_residual(p, q), weight * (1 - a), path, {**ints, c: ("rej", a)})
                return
            found.append((toks, path, weight, ints, p))

        walk(0, 0, case.p(()), wt, (0,), {})
        yield from found


@functools.lru_cache(maxsize=32)
def tree_cells(st: SpecTree) -> tuple[TreeCell, ...]:
    """Every cell of positive probability of the recursive rejection rule (module doc)."""
    n = len(st.parents())
    out = []
    for toks, path, weight, ints, p in _stops(st):
        for t, share, v_lo, v_hi in cdf_cells(p):
            points = {}
            for where in POINTS:
                u = [0.5] * n
                for node, (kind, a) in ints.items():
                    if kind == "acc":
                        u[node] = 0.0 if where == "low" else _inside(Fraction(0), a, where)
                    elif a == 0 and where == "low":
                        u[node] = 0.0    # a zero-probability candidate is rejected even by u = 0
                    else:
                        u[node] = ONE_MINUS if where == "high" else _inside(a, Fraction(1), where)
                u[0] = _inside(v_lo, v_hi, where)
                points[where] = u
            out.append(TreeCell(toks, path, t, weight * share, points))
    return tuple(out)


def rule_distribution(st: SpecTree) -> dict[tuple, Fraction]:
    dist: dict[tuple, Fraction] = {}
    for c in tree_cells(st):
        e = c.emitted((ROOT,) + c.tokens)
        dist[e] = dist.get(e, Fraction(0)) + c.weight
    return dist


def verify_kwargs(st: SpecTree, toks: tuple, dtype=torch.float64) -> dict:
    """target_probs (and draft_probs unless the tokens are fixed) of the tree with these candidates."""
    parents = st.parents()
    paths = node_paths(toks, parents)
    p = torch.tensor([[float(f) for f in st.case.p(s)] for s in paths], dtype=dtype)
    kw = dict(target_probs=p, draft_probs=None)
    if st.tokens is None:
        kw["draft_probs"] = torch.tensor([[float(f) for f in st.case.q(s)] for s in paths], dtype=dtype)
    return kw


def read_verified(result, tokens_with_root: list[int], vocab: int, what: str = "verify_tree") -> tuple:
    """Check a TreeVerified's form and consistency; return the emitted tokens."""
    tokens, k, nodes = result
    assert isinstance(tokens, torch.Tensor) and tokens.dtype == torch.int64 and tokens.dim() == 1, (
        f"{what}: tokens must be a 1-D int64 tensor, got {tokens!r}")
    assert isinstance(nodes, torch.Tensor) and nodes.dtype == torch.int64 and nodes.dim() == 1, (
        f"{what}: nodes must be a 1-D int64 tensor, got {nodes!r}")
    k = int(k)
    tokens, nodes = tokens.tolist(), nodes.tolist()
    assert len(tokens) == k + 1 and len(nodes) == k + 1, (
        f"{what}: num_accepted {k} but {len(tokens)} tokens and {len(nodes)} nodes (expected k + 1 each)")
    assert nodes[0] == 0, f"{what}: the accepted path must start at the root (node 0), got {nodes}"
    assert tokens[:k] == [tokens_with_root[i] for i in nodes[1:]], (
        f"{what}: emitted {tokens[:k]} as accepted but the accepted nodes {nodes} hold "
        f"{[tokens_with_root[i] for i in nodes[1:]]}")
    assert 0 <= tokens[k] < vocab, f"{what}: final token {tokens[k]} is not in [0, {vocab})"
    return tuple(tokens)


def inverse_cdf(weights, v: float) -> int:
    """The smallest t with C_t > v * C_total (float64 running sum), at most the last positive weight."""
    run, c = 0.0, []
    for w in weights:
        run += float(w)
        c.append(run)
    idx = sum(1 for x in c if x <= v * c[-1])
    return min(idx, max(t for t, w in enumerate(weights) if w > 0))


def ancestors(parents: list[int], i: int) -> set[int]:
    out = set()
    while i >= 0:
        out.add(i)
        i = parents[i]
    return out


def assert_generator_is_one_uniform_draw(impl, fn_name: str, seeds: int) -> None:
    """``fn(tree, p, generator=g)`` == ``fn(tree, p, uniforms=torch.rand(N, float64))`` drawn from
    the same seed, and ``g`` ends in that draw's state (the contract's consumption of the
    generator), for ``seeds`` seeds on a fixed 3-path tree of N nodes."""
    fn = impl.get(fn_name)
    tree = impl.get("build_tree")(0, [[1, 2], [2, 0], [1, 1]])
    n = len(tree.tokens)
    p = torch.softmax(torch.randn(n, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64), 1)
    for seed in range(seeds):
        g1, g2 = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        a = fn(tree, p, generator=g1)
        b = fn(tree, p, uniforms=torch.rand(n, generator=g2, dtype=torch.float64))
        assert a.tokens.tolist() == b.tokens.tolist(), (seed, a, b)
        assert torch.equal(g1.get_state(), g2.get_state()), "the generator must be consumed as torch.rand(N, float64)"


# ============================================================================= the law
# What ANY correct tree verifier must do, apart from the reference's choices (docs/tree_spec.md,
# "Choices the law leaves open"; reference/tree_spec.py's docstring). The law is the contract's
# algorithm with its interface: the children of the current node are tried in node order;
# uniforms[c] decides candidate c by the threshold a_c = min(1, p(x_c) / q_c(x_c)), p the current
# distribution (the node's target row, or the normalised residual max(p - q, 0) / Σ left by the
# siblings rejected before c; p itself when that has no positive entry), up to float32 rounding
# (speculative's accept_decisions: a uniform within a relative F32_SLACK of a_c may go either way,
# a candidate of probability 0 is never accepted); an accepted candidate moves on to its children
# with its own target row; the final token is drawn from the last distribution p by ANY
# randomness derived from uniforms[0] alone -- so it lies in p's support and, for a uniform
# uniforms[0], is distributed as p. Greedy: the accepted nodes follow an argmax (speculative's
# argmax_set: every maximum and values within float32 rounding of it) and the path is a deepest
# one; typical acceptance: a deepest root path of typical nodes (float32 rounding of the
# threshold admitted), the final token in the last row's support.

def chi2_sf(stat: float, dof: int) -> float:
    """The chi-square survival function, scipy.stats.chi2.sf(stat, dof): the function it
    evaluates (scipy.special.chdtrc), imported without scipy.stats' second of import time."""
    from scipy.special import chdtrc
    return float(chdtrc(dof, stat))


def read_path(result, tokens_with_root: list[int], parents: list[int], vocab: int,
              what: str = "verify_tree") -> tuple[tuple, int]:
    """Check a TreeVerified's form (read_verified) and that its ``nodes`` are a root path (each
    the child of the one before); return (nodes, the final emitted token)."""
    emitted = read_verified(result, tokens_with_root, vocab, what)
    nodes = tuple(int(i) for i in result[2].tolist())
    for a, b in zip(nodes, nodes[1:]):
        assert 0 < b < len(parents) and parents[b] == a, (
            f"{what}: the accepted nodes {list(nodes)} are not a root path: node {b} is not a child of node {a} "
            f"(parents {parents})")
    return nodes, emitted[-1]


def _rows(t) -> list[tuple] | None:
    if t is None:
        return None
    return [tuple(Fraction(v) for v in row) for row in t.detach().cpu().double().tolist()]


def _children(parents: list[int]) -> list[list[int]]:
    children: list[list[int]] = [[] for _ in parents]
    for i in range(1, len(parents)):
        children[parents[i]].append(i)
    return children


def tree_outcomes(tokens: list[int], parents: list[int], target_probs, draft_probs, uniforms) -> dict:
    """{accepted path (node indices, root first): the tokens the law allows as the final token}
    for one verify_tree call (tokens with the root; probabilities as the call's tensors; uniforms
    the call's N floats): the module's law, computed in exact arithmetic from the inputs' float64
    values, both branches followed where float32 rounding may decide a candidate either way."""
    p_rows, q_rows = _rows(target_probs), _rows(draft_probs)
    u = [float(v) for v in (uniforms.tolist() if isinstance(uniforms, torch.Tensor) else uniforms)]
    children, vocab, out = _children(parents), len(p_rows[0]), {}

    def walk(cur, j, p, path):
        if j == len(children[cur]):
            out[path] = out.get(path, frozenset()) | support(p)
            return
        c = children[cur][j]
        x = tokens[c]
        q = q_rows[cur] if q_rows is not None else one_hot(x, vocab)
        decisions = accept_decisions(float(p[x]), float(q[x]), u[c])
        if True in decisions:
            walk(c, 0, p_rows[c], path + (c,))
        if False in decisions:
            walk(cur, j + 1, normalised_residual(p, q), path)

    walk(0, 0, p_rows[0], (0,))
    return out


def outcome_violation(allowed: dict, nodes: tuple, token: int) -> str | None:
    """Why (nodes, token) is not among ``allowed`` (tree_outcomes'), or None."""
    if nodes not in allowed:
        return (f"accepted the nodes {list(nodes)}; the law accepts {' or '.join(str(list(k)) for k in sorted(allowed))} "
                f"(children tried in node order, uniforms[c] against min(1, p(x_c) / q(x_c)) with p the normalised "
                f"residual after rejected siblings, float32 rounding admitted)")
    if token not in allowed[nodes]:
        return (f"accepted the nodes {list(nodes)} and emitted the final token {token}, which the law never emits "
                f"there: allowed {sorted(allowed[nodes])} (the support of the distribution left at the last node: "
                f"its target row, or the residual after its rejected children)")
    return None


@dataclass(frozen=True)
class TreeGroup:
    """Candidates and accepted path: the final token's exact distribution and the acceptance
    uniforms' law points."""
    tokens: tuple         # candidate tokens (node order, root excluded)
    path: tuple           # accepted nodes, root first
    weight: Fraction      # P(candidates) * P(this path)
    dist: tuple           # the final token's distribution (Fractions summing to 1)
    points: dict          # "mid" / "low" / "high" -> N uniforms (uniforms[0] = 0.5: drawn fresh)


@functools.lru_cache(maxsize=64)
def tree_groups(st: SpecTree) -> tuple[TreeGroup, ...]:
    """Every (candidate tree, accepted path) of positive probability, with the law's points:
    an accepted node's uniform in [0, a) (low = 0), a rejected one's in [a, 1) (high = 1 - 2^-53;
    low = 0 for a candidate of probability 0), every one at least LAW_MARGIN from its threshold
    (float32 rounding cannot flip it)."""
    n = len(st.parents())
    out = []
    for toks, path, weight, ints, p in _stops(st):
        points = {}
        for where in POINTS:
            u = [0.5] * n
            for node, (kind, a) in ints.items():
                if kind == "acc":
                    u[node] = 0.0 if where == "low" else law_point(Fraction(0), a, where)
                elif where == "high":
                    u[node] = ONE_MINUS
                else:
                    u[node] = 0.0 if a == 0 and where == "low" else law_point(a, Fraction(1), where)
            points[where] = u
        total = sum(p)
        out.append(TreeGroup(toks, path, weight, tuple(w / total for w in p), points))
    return tuple(out)


# ----------------------------------------------------------------------------- greedy and typical
def _path_problem(tokens, parents, nodes) -> str | None:
    for a, b in zip(nodes, nodes[1:]):
        if parents[b] != a:
            return f"the accepted nodes {list(nodes)} are not a root path (node {b}'s parent is {parents[b]})"
    return None if nodes and nodes[0] == 0 else f"the accepted nodes {list(nodes)} do not start at the root"


def greedy_violation(tokens: list[int], parents: list[int], target_probs, nodes: tuple, token: int) -> str | None:
    """Why verify_tree_greedy's result (nodes, final token) is not the law's, or None. The law:
    each accepted node's token is an argmax of its parent's row and the final token an argmax of
    the last node's row (argmax_set: ties, and values within float32 rounding of the maximum, may
    go either way), and the path is a DEEPEST one: with the argmax the result shows at each path
    node, and any argmax at the other nodes, no node deeper than the last one follows the chain.
    Which of several equally deep matching nodes is kept is not the law's."""
    why = _path_problem(tokens, parents, nodes)
    if why:
        return why
    rows = target_probs.detach().cpu().double().tolist()
    best = [argmax_set(r) for r in rows]
    children, k = _children(parents), len(nodes) - 1
    for a, b in zip(nodes, nodes[1:]):
        if tokens[b] not in best[a]:
            return (f"node {b} (token {tokens[b]}) was accepted but is not an argmax of its parent's row "
                    f"{rows[a]} (argmax {sorted(best[a])})")
    if token not in best[nodes[-1]]:
        return f"the final token {token} is not an argmax of node {nodes[-1]}'s row {rows[nodes[-1]]} (argmax {sorted(best[nodes[-1]])})"
    depth = [0] * len(parents)
    for i in range(1, len(parents)):
        depth[i] = depth[parents[i]] + 1

    @functools.lru_cache(maxsize=None)
    def reach(m):      # the least depth a chain through m reaches, over the argmax choices below m
        return min(max([depth[m]] + [reach(c) for c in children[m] if tokens[c] == v]) for v in best[m])

    chosen = {a: tokens[b] for a, b in zip(nodes, nodes[1:])} | {nodes[-1]: token}
    for a in nodes:
        for m in children[a]:
            if m not in nodes and tokens[m] == chosen[a] and reach(m) > k:
                return (f"kept a path of {k} accepted nodes {list(nodes)}, but node {m} (token {tokens[m]}, a child of "
                        f"node {a}) also follows the argmax {chosen[a]} and the chain through it reaches depth "
                        f"{reach(m)} whatever argmax is taken below it: the path kept is not a deepest one")
    return None


def typical_decisions(value: float, threshold: float) -> frozenset:
    """Is a candidate of parent probability ``value`` typical (value > threshold)? Within a
    relative F32_SLACK of the threshold either answer (float32 entropy and exp)."""
    if abs(value - threshold) <= F32_SLACK * threshold:
        return frozenset({True, False})
    return frozenset({value > threshold})


def typical_violation(tokens: list[int], parents: list[int], target_probs, epsilon: float, delta: float,
                      nodes: tuple, token: int) -> str | None:
    """Why typical_accept's result is not the law's, or None: every accepted node typical
    (p_par(x) > min(ε, δ exp(-H(p_par))), float32 rounding admitted), no node deeper than the
    last one on a root path of nodes that are accepted or surely typical, the final token in the
    last row's support. Which of several equally deep paths is kept is not the law's."""
    why = _path_problem(tokens, parents, nodes)
    if why:
        return why
    rows = target_probs.detach().cpu().double().tolist()
    thr = [min(epsilon, delta * math.exp(sum(x * math.log(x) for x in r if x > 0))) for r in rows]
    n, on = len(parents), set(nodes)
    typ = [frozenset({True})] + [typical_decisions(rows[parents[i]][tokens[i]], thr[parents[i]]) for i in range(1, n)]
    for b in nodes[1:]:
        if True not in typ[b]:
            a = parents[b]
            return (f"node {b} (token {tokens[b]}) was accepted but is not typical: p = {rows[a][tokens[b]]:.6g} <= "
                    f"min(ε, δ exp(-H)) = {thr[a]:.6g} (its parent's row {rows[a]})")
    depth, ok = [0] * n, [True] + [False] * (n - 1)
    for i in range(1, n):
        depth[i] = depth[parents[i]] + 1
        ok[i] = ok[parents[i]] and (i in on or typ[i] == {True})
        if ok[i] and depth[i] > len(nodes) - 1:
            return (f"kept a path of {len(nodes) - 1} accepted nodes {list(nodes)}, but node {i} at depth {depth[i]} "
                    f"has a root path of typical nodes: the path kept is not a deepest one")
    if rows[nodes[-1]][token] <= 0:
        return f"the final token {token} has probability 0 in node {nodes[-1]}'s row {rows[nodes[-1]]}"
    return None
