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
statement as speculative's, via spec_tests.speculative.oracles.lossless_violation.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from fractions import Fraction

import torch

from spec_tests.speculative.oracles import ONE_MINUS, accept_prob
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


@functools.lru_cache(maxsize=32)
def tree_cells(st: SpecTree) -> tuple[TreeCell, ...]:
    """Every cell of positive probability of the recursive rejection rule (module doc)."""
    case, parents = st.case, st.parents()
    n = len(parents)
    children = [[] for _ in range(n)]
    for i in range(1, n):
        children[parents[i]].append(i)
    out = []
    for toks, wt in candidate_trees(st):
        paths = node_paths(toks, parents)

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
                    walk(cur, j + 1, normalised_residual(p, q), weight * (1 - a), path,
                                    {**ints, c: ("rej", a)})
                return
            total, lo = sum(p), Fraction(0)
            for t, w in enumerate(p):
                if w == 0:
                    continue
                v_lo, v_hi = lo / total, (lo + w) / total
                lo += w
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
                out.append(TreeCell(toks, path, t, weight * w / total, points))

        walk(0, 0, case.p(()), wt, (0,), {})
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
