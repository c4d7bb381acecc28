"""Strategies for tree speculation: frozen cases whose repr is valid Python.

``SpecTree``: a tree SHAPE (node 0 the root; ``shape[0]`` children of the root, then
``shape[1 + j]`` children of the root's j-th child: depth <= 2, branching <= 2 in the generated
cases) over a target and a draft given by a :class:`spec_tests.speculative.strategies.TreeCase`
(prefix-dependent dyadic p and q over a vocabulary <= 5, so the enumeration of oracles.py is exact;
its modes give q == p, disjoint supports, q > 0 where p = 0). ``tokens`` None: each node's children
are drawn i.i.d. from the draft q(. | path) (enumerated); otherwise the candidate tokens are fixed
(one per non-root node, repeats allowed) and verification gets ``draft_probs=None``.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

import itertools

from spec_tests.speculative.strategies import TreeCase, dyadic

ROOT = 0   # the root's token in every generated case (the target conditions on the path after it)


@dataclass(frozen=True)
class SpecTree:
    case: TreeCase          # p(. | path), q(. | path), vocab; case.gamma = the tree's depth
    shape: tuple            # (children of the root, children of each depth-1 node ...)
    tokens: tuple | None = None   # fixed candidate tokens (node order, root excluded), or None: drawn from q

    def parents(self) -> list[int]:
        """Breadth-first parents of the shape: node 0 the root."""
        parents = [-1] + [0] * self.shape[0]
        for j, count in enumerate(self.shape[1:1 + self.shape[0]]):
            parents += [1 + j] * count
        return parents


def shape_nodes(shape: tuple) -> int:
    return 1 + shape[0] + sum(shape[1:1 + shape[0]])


@st.composite
def spec_trees(draw, *, max_vocab: int = 5, max_branch: int = 2, max_trees: int = 81,
               modes=("table", "equal", "disjoint", "mixture", "fixed")):
    """SpecTrees whose draft trees to enumerate number at most ``max_trees`` (vocab ** candidates)."""
    b0 = draw(st.integers(0, max_branch))
    deeper = tuple(draw(st.integers(0, max_branch)) for _ in range(b0))
    shape = (b0,) + deeper
    candidates = shape_nodes(shape) - 1
    mode = draw(st.sampled_from(modes))
    top = max_vocab
    if mode != "fixed":
        while top > 1 and top ** candidates > max_trees:
            top -= 1
    vocab = draw(st.integers(1, top))
    if mode == "disjoint" and vocab < 2:
        mode = "table"
    den = draw(st.sampled_from((4, 8, 64)))
    support = other = None
    if mode == "disjoint":
        split = draw(st.integers(1, vocab - 1))
        order = draw(st.permutations(range(vocab)))
        support, other = sorted(order[:split]), sorted(order[split:])
    p_table = tuple(draw(dyadic(vocab, den, support)) for _ in range(draw(st.integers(1, 3))))
    q_table = ()
    if mode in ("table", "mixture"):
        q_table = tuple(draw(dyadic(vocab, den)) for _ in range(draw(st.integers(1, 2))))
    elif mode == "disjoint":
        q_table = (draw(dyadic(vocab, den, other)),)
    depth = 0 if b0 == 0 else (2 if any(deeper) else 1)
    q_mode = {"fixed": "equal"}.get(mode, mode)
    case = TreeCase(vocab=vocab, gamma=depth, den=den, p_table=p_table, q_mode=q_mode, q_table=q_table,
                    p_key=draw(st.integers(0, 40)), q_key=draw(st.integers(0, 40)))
    tokens = None
    if mode == "fixed":
        tokens = tuple(draw(st.lists(st.integers(0, vocab - 1), min_size=candidates, max_size=candidates)))
    return SpecTree(case, shape, tokens)


def path_lists(vocab: int = 4, max_depth: int = 3, max_paths: int = 5):
    """Explicit candidate paths (repeats and shared prefixes are likely over a small vocabulary)."""
    return st.lists(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=max_depth),
                    min_size=0, max_size=max_paths)


@st.composite
def parent_arrays(draw, max_nodes: int = 8):
    """A valid (parents) array of a random tree: parents[i] in [0, i)."""
    n = draw(st.integers(1, max_nodes))
    return [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)]


# ----------------------------------------------------------------------------- fixed cases and the sweep
# (shared by the law, test_law.py, and the reference's exact rule, test_lossless.py)
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



def all_shapes(max_branch: int = 2) -> list[tuple]:
    """Every tree shape of depth <= 2 and branching <= ``max_branch`` (13 for 2), then the root
    with 3 children (none or one of them with a child): three siblings, two rejected in a row."""
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
