"""Candidate trees: the trie of explicit paths, any tree from parents, the top-k expansion; the tree
attention mask, the depth-based positions and the retrieval indices; and the tree forward pass
checked against running every path as its own sequence through the reference model."""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.tree_spec.oracles import ancestors, node_paths
from spec_tests.tree_spec.strategies import parent_arrays, path_lists


def _paths_of(tree) -> list[tuple]:
    toks, pars = tree.tokens.tolist(), tree.parents.tolist()
    return node_paths(tuple(toks[1:]), pars)


def _check_structure(tree, tokens: list[int], parents: list[int], what: str):
    """mask, depth and retrieve from the definitions, given the tree's tokens and parents."""
    n = len(tokens)
    assert tree.tokens.dtype == torch.int64 and tree.tokens.tolist() == tokens, f"{what}: tokens {tree.tokens}"
    assert tree.parents.dtype == torch.int64 and tree.parents.tolist() == parents, f"{what}: parents {tree.parents}"
    depth = [len(ancestors(parents, i)) - 1 for i in range(n)]
    assert tree.depth.tolist() == depth, f"{what}: depth {tree.depth.tolist()}, expected {depth} (position = start + depth)"
    want = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in ancestors(parents, i):
            want[i, j] = True
    assert tree.mask.dtype == torch.bool and tuple(tree.mask.shape) == (n, n), f"{what}: mask {tree.mask.dtype} {tuple(tree.mask.shape)}"
    bad = (tree.mask != want).nonzero().tolist()
    assert not bad, (f"{what}: mask[{bad[0][0]}, {bad[0][1]}] = {bool(tree.mask[bad[0][0], bad[0][1]])}; node i "
                     f"sees exactly itself and its ancestors (parents {parents})")
    leaves = [i for i in range(n) if i not in parents]
    width = max(depth) + 1
    rows = [sorted(ancestors(parents, leaf), key=lambda j: depth[j]) for leaf in leaves]
    rows = [r + [-1] * (width - len(r)) for r in rows]
    assert tree.retrieve.dtype == torch.int64 and tree.retrieve.tolist() == rows, (
        f"{what}: retrieve {tree.retrieve.tolist()}, expected {rows} (one row per leaf in node order: its "
        f"path root -> leaf, -1 padded)")


@example(paths=[[1, 2], [1, 3], [2]]).via("mutant:mask_siblings_visible")
@example(paths=[[1, 2, 3], [2]]).via("mutant:retrieve_reversed")
@example(paths=[[1, 2], [3]]).via("mutant:depth_first_order")
@given(paths=path_lists())
def test_build_tree_is_the_trie(impl, paths):
    """Nodes are the distinct prefixes of the paths, ordered by depth then first appearance; each
    node's path is its prefix; mask = ancestors and self; depth; retrieve = the leaves' paths."""
    root = 7
    tree = impl.get("build_tree")(root, paths)
    prefixes = []
    for d in range(1, max((len(p) for p in paths), default=0) + 1):
        for p in paths:
            if len(p) >= d and tuple(p[:d]) not in prefixes:
                prefixes.append(tuple(p[:d]))
    parents = [-1] + [0 if len(s) == 1 else 1 + prefixes.index(s[:-1]) for s in prefixes]
    tokens = [root] + [s[-1] for s in prefixes]
    _check_structure(tree, tokens, parents, f"build_tree({root}, {paths})")
    assert _paths_of(tree)[1:] == prefixes


@given(parents=parent_arrays(), data=st.data())
def test_tree_from_parents(impl, parents, data):
    """Any tree (siblings may repeat a token): mask, depth, retrieve from the definitions."""
    tokens = data.draw(st.lists(st.integers(0, 3), min_size=len(parents), max_size=len(parents)))
    _check_structure(impl.get("tree_from_parents")(tokens, parents), tokens, parents,
                     f"tree_from_parents({tokens}, {parents})")


def test_tree_from_parents_every_tree(impl):
    """Bounded-exhaustive: EVERY parents array of 1..6 nodes (every tree whose parents come first:
    1 + 1 + 2 + 6 + 24 + 120 = 154 trees), tokens repeating in a cycle of 2: mask, depth, retrieve
    from the definitions."""
    import itertools
    count = 0
    for n in range(1, 7):
        for choice in itertools.product(*[range(i) for i in range(1, n)]):
            parents = [-1, *choice]
            tokens = [i % 2 for i in range(n)]
            _check_structure(impl.get("tree_from_parents")(tokens, parents), tokens, parents,
                             f"tree_from_parents({tokens}, {parents})")
            count += 1
    assert count == 154


def test_one_node_tree(impl):
    """A tree of one node: the root alone, mask [[True]], depth [0], retrieve [[0]]."""
    for tree in (impl.get("build_tree")(5, []), impl.get("tree_from_parents")([5], [-1])):
        _check_structure(tree, [5], [-1], "one node")


# ----------------------------------------------------------------------------- top-k expansion
def _next_probs(table, vocab, per_depth):
    def next_probs(path):
        key = len(path) if per_depth else sum((t + 1) * 5 ** i for i, t in enumerate(path))
        return torch.tensor(table[key % len(table)], dtype=torch.float64) / sum(table[key % len(table)])
    return next_probs


@example(vocab=3, k=2, depth=2, table=[[2, 1, 1], [1, 1, 2]], per_depth=False).via(
    "mutant:topk_ties_to_larger_id")
@given(vocab=st.integers(1, 5), k=st.integers(1, 5), depth=st.integers(0, 3), per_depth=st.booleans(),
       table=st.lists(st.lists(st.integers(0, 3), min_size=5, max_size=5).filter(any), min_size=1, max_size=3))
def test_expand_topk(impl, vocab, k, depth, table, per_depth):
    """EAGLE (path-conditioned) and Medusa (per-depth heads) expansions: every node above ``depth``
    has as children the k most probable tokens of next_probs(its path), probability descending,
    ties to the smaller id; the tree is build_tree of the k^depth paths in rank order."""
    k = min(k, vocab)
    table = [row[:vocab] if any(row[:vocab]) else [1] * vocab for row in table]
    next_probs = _next_probs(table, vocab, per_depth)
    root = 1 % vocab
    tree = impl.get("expand_topk")(root, next_probs, k, depth)
    paths = [()]
    for _ in range(depth):
        grown = []
        for path in paths:
            p = next_probs((root,) + path).tolist()
            grown += [path + (t,) for t in sorted(range(vocab), key=lambda t: (-p[t], t))[:k]]
        paths = grown
    want = impl.get("build_tree")(root, [list(p) for p in paths if p])
    for field in ("tokens", "parents", "depth", "mask", "retrieve"):
        assert torch.equal(getattr(tree, field), getattr(want, field)), (
            f"expand_topk(k={k}, depth={depth}): {field} {getattr(tree, field).tolist()}, expected "
            f"{getattr(want, field).tolist()} (top-k per node, ties to the smaller id)")


# ----------------------------------------------------------------------------- the tree forward pass
def _model(reference, dtype, seed=3, vocab=8):
    config = reference.of("model").get("ModelConfig")(vocab_size=vocab, dim=16, n_layers=2, n_heads=4, n_kv_heads=2,
                                                max_seq_len=32, dtype=dtype)
    return reference.of("model").get("Transformer")(config, seed=seed)


TOL = {torch.float64: 1e-9, torch.float32: 2e-4}


@example(paths=[[1, 2], [3, 4], [1, 5]], context=[2, 6, 1]).via("mutant:logits_causal_over_tree")
@example(paths=[[4, 4], [5]], context=[]).via("mutant:positions_off_by_one")
@example(paths=[[1], [2], [3, 1]], context=[0]).via("mutant:positions_by_index")
@given(paths=path_lists(vocab=8, max_depth=3, max_paths=4), context=st.lists(st.integers(0, 7), max_size=5))
def test_tree_logits_equal_each_path_run_alone(impl, reference, paths, context):
    """One pass over context + tree with the tree mask gives, at node i, the logits the reference
    model gives at the end of context + path(i) run as its own sequence (float64: 1e-9)."""
    model = _model(reference, torch.float64)
    tree = impl.get("build_tree")(3, paths)
    got = impl.get("tree_logits")(model, torch.tensor(context, dtype=torch.int64), tree)
    n = len(tree.tokens)
    assert tuple(got.shape) == (n, 8), f"tree_logits shape {tuple(got.shape)}, expected ({n}, 8)"
    for i, path in enumerate(_paths_of(tree)):
        seq = torch.tensor([context + [3] + list(path)], dtype=torch.int64)
        with torch.no_grad():
            want = model(seq)[0, -1]
        err = float((got[i].double() - want.double()).abs().max())
        assert err <= TOL[torch.float64], (f"node {i} (path {list(path)} after context {context}): max |diff| "
                                           f"{err:.3g} against running the path alone")


def test_tree_logits_float32(impl, reference):
    """The same in float32 (2e-4), a wider tree, and the greedy-verified path of the float32
    target's own logits agrees with greedy decoding of the model."""
    model = _model(reference, torch.float32, seed=4)
    tree = impl.get("build_tree")(1, [[2, 3, 4], [2, 5], [6], [7, 0, 1], [2, 3, 0]])
    context = [5, 4, 3, 2]
    got = impl.get("tree_logits")(model, torch.tensor(context), tree)
    for i, path in enumerate(_paths_of(tree)):
        with torch.no_grad():
            want = model(torch.tensor([context + [1] + list(path)]))[0, -1]
        assert float((got[i] - want).abs().max()) <= TOL[torch.float32], (i, path)


@pytest.mark.parametrize("context_len, paths", [
    (29, [[1, 2], [1, 3], [4, 5], [4, 6], [7, 0], [2]]),    # depth 2: positions up to 31 = max_seq_len - 1
    (30, [[1], [2], [3], [4], [5]]),                        # depth 1: 6 nodes, positions up to 31
])
def test_tree_logits_fill_max_seq_len(impl, reference, context_len, paths):
    """Only the DEPTH counts against max_seq_len (siblings share a position): context C + a tree of
    depth D with C + D + 1 == max_seq_len (32) is legal however many nodes it has, and each node's
    row is still its path run alone."""
    model = _model(reference, torch.float64)
    context = [(5 * i + 1) % 8 for i in range(context_len)]
    tree = impl.get("build_tree")(3, paths)
    assert context_len + int(max(tree.depth.tolist())) + 1 == model.config.max_seq_len < context_len + len(tree.tokens)
    got = impl.get("tree_logits")(model, torch.tensor(context, dtype=torch.int64), tree)
    for i, path in enumerate(_paths_of(tree)):
        with torch.no_grad():
            want = model(torch.tensor([context + [3] + list(path)], dtype=torch.int64))[0, -1]
        assert float((got[i].double() - want.double()).abs().max()) <= TOL[torch.float64], (i, path)


# ----------------------------------------------------------------------------- bad input
BUILD_BAD = [
    Bad("root negative", dict(root=-1), ValueError, ("root",)),
    Bad("root float", dict(root=1.0), TypeError, ("root",)),
    Bad("root a float tensor", dict(root=torch.tensor(1.0)), TypeError, ("root",)),
    Bad("root a bool tensor", dict(root=torch.tensor(True)), TypeError, ("root",)),
    Bad("paths a string", dict(paths="12"), TypeError, ("paths",)),
    Bad("paths an int", dict(paths=3), TypeError, ("paths",)),
    Bad("empty path", dict(paths=[[1], []]), ValueError, ("paths",)),
    Bad("negative token", dict(paths=[[1, -2]]), ValueError, ("paths",)),
    Bad("float token", dict(paths=[[1, 2.0]]), TypeError, ("paths",)),
]


@bad_cases(BUILD_BAD)
def test_build_tree_rejects_bad_input(impl, bad):
    """build_tree: root an int >= 0; paths a list of non-empty lists of ints >= 0."""
    assert_rejects(impl.get("build_tree"), dict(root=0, paths=[[1, 2], [3]]), bad)


PARENTS_BAD = [
    Bad("no nodes", dict(tokens=[], parents=[]), ValueError, ("tokens",)),
    Bad("root has a parent", dict(parents=[0, 0, 1]), ValueError, ("parents",)),
    Bad("parent after child", dict(parents=[-1, 2, 0]), ValueError, ("parents",)),
    Bad("self parent", dict(parents=[-1, 1, 0]), ValueError, ("parents",)),
    Bad("length mismatch", dict(parents=[-1, 0]), ValueError, ("parents",)),
    Bad("negative token", dict(tokens=[0, -1, 2]), ValueError, ("tokens",)),
    Bad("float tokens tensor", dict(tokens=torch.tensor([0.0, 1.0, 2.0])), TypeError, ("tokens",)),
    Bad("parents a string", dict(parents="-100"), TypeError, ("parents",)),
    Bad("root parent -2", dict(parents=[-2, 0, 1]), ValueError, ("parents",)),
    Bad("a second root (parent -1)", dict(parents=[-1, 0, -1]), ValueError, ("parents",)),
    Bad("a node its own parent", dict(parents=[-1, 0, 2]), ValueError, ("parents",)),
]


@bad_cases(PARENTS_BAD)
def test_tree_from_parents_rejects_bad_input(impl, bad):
    """tree_from_parents: at least the root; parents[0] = -1, 0 <= parents[i] < i; tokens >= 0."""
    assert_rejects(impl.get("tree_from_parents"), dict(tokens=[0, 1, 2], parents=[-1, 0, 1]), bad)


def test_root_may_be_a_0d_integer_tensor(impl):
    """root is a token id: an int >= 0, or a 0-d integer tensor holding one (the token a model just
    emitted, e.g. ``tokens[-1]``); the tree is the one of the plain int."""
    for root in (torch.tensor(3), torch.tensor(3, dtype=torch.int32)):
        got = impl.get("build_tree")(root, [[1, 2], [4]])
        want = impl.get("build_tree")(3, [[1, 2], [4]])
        assert got.tokens.tolist() == want.tokens.tolist() == [3, 1, 4, 2]
        top = impl.get("expand_topk")(root, _uniform, 2, 1)
        assert top.tokens.tolist() == [3, 0, 1]


def _uniform(path):
    return torch.full((4,), 0.25, dtype=torch.float64)


TOPK_BAD = [
    Bad("k zero", dict(k=0), ValueError, ("k",)),
    Bad("next_probs a negative entry", dict(next_probs=lambda path: torch.tensor([1.5, -0.5, 0.0, 0.0], dtype=torch.float64)),
        ValueError, ("next_probs",)),
    Bad("root a float tensor", dict(root=torch.tensor(0.0)), TypeError, ("root",)),
    Bad("k past vocab", dict(k=5), ValueError, ("k",)),
    Bad("k float", dict(k=2.0), TypeError, ("k",)),
    Bad("depth negative", dict(depth=-1), ValueError, ("depth",)),
    Bad("next_probs not callable", dict(next_probs=[0.25] * 4), TypeError, ("next_probs",)),
    Bad("next_probs not a distribution", dict(next_probs=lambda path: torch.ones(4, dtype=torch.float64)),
        ValueError, ("next_probs",)),
    Bad("next_probs a list", dict(next_probs=lambda path: [0.25] * 4), TypeError, ("next_probs",)),
]


@bad_cases(TOPK_BAD)
def test_expand_topk_rejects_bad_input(impl, bad):
    """expand_topk: k in [1, vocab], depth >= 0, next_probs a callable returning a 1-D distribution."""
    assert_rejects(impl.get("expand_topk"), dict(root=0, next_probs=_uniform, k=2, depth=2), bad)


def _logits_valid(reference):
    return dict(model=_model(reference, torch.float32), context=torch.tensor([1, 2]),
                tree=reference.get("build_tree")(3, [[4, 5], [6]]))


LOGITS_BAD = [
    Bad("context 2-D", lambda v: {**v, "context": v["context"][None]}, ValueError, ("context",)),
    Bad("context float", lambda v: {**v, "context": v["context"].float()}, TypeError, ("context",)),
    Bad("context id past vocab", lambda v: {**v, "context": torch.tensor([1, 8])}, ValueError, ("context",)),
    Bad("context id -1", lambda v: {**v, "context": torch.tensor([1, -1])}, ValueError, ("context",)),
    Bad("tree token -1", lambda v: {**v, "tree": v["tree"]._replace(tokens=torch.tensor([3, -1, 6, 5]))},
        ValueError, ("tree",)),
    Bad("tree token past vocab", lambda v: {**v, "tree": v["tree"]._replace(tokens=torch.tensor([3, 4, 6, 9]))},
        ValueError, ("tree",)),
    Bad("past max_seq_len", lambda v: {**v, "context": torch.zeros(30, dtype=torch.int64)}, ValueError, ("max_seq_len",)),
    Bad("tree a list of paths", dict(tree=[[4, 5], [6]]), TypeError, ("tree",)),
    Bad("model a string", dict(model="llama"), TypeError, ("model",)),
]


@bad_cases(LOGITS_BAD)
def test_tree_logits_rejects_bad_input(impl, reference, bad):
    """tree_logits: a reference model, 1-D integer context in the vocabulary, a Tree whose depth fits."""
    assert_rejects(impl.get("tree_logits"), _logits_valid(reference), bad)
