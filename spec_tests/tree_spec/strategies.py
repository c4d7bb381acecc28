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
