"""Tree speculation: the specification (course 05.10; chapters 7-8).

A draft proposes not one chain of γ tokens but a TREE of candidates (Medusa, EAGLE, SpecInfer):
the target scores every node in ONE forward pass with a tree attention mask, and the verifier walks
the tree from the root, keeping the longest accepted path plus one token of its own.

The contract::

    build_tree(root, paths) -> Tree                      candidate tree from explicit paths (a trie)
    tree_from_parents(tokens, parents) -> Tree           any tree (siblings may repeat a token)
    expand_topk(root, next_probs, k, depth) -> Tree      top-k expansion (EAGLE / Medusa)
    tree_logits(model, context, tree) -> (N, vocab)      the target's logits at every node, one pass
    verify_tree_greedy(tree, target_probs) -> TreeVerified
    verify_tree(tree, target_probs, draft_probs=None, *, uniforms=None, generator=None) -> TreeVerified
    typical_accept(tree, target_probs, *, epsilon=0.09, delta=0.3, uniforms=None,
                   generator=None) -> TreeVerified

**The tree.** ``Tree(tokens, parents, depth, mask, retrieve)`` with N nodes; node 0 is the ROOT,
the last token already emitted (its K/V is not yet in the cache: the target scores it with the
tree), the other nodes are candidate tokens:

    tokens    (N,) int64   node i's token (tokens[0] = root)
    parents   (N,) int64   parents[0] = -1; 0 <= parents[i] < i (a parent comes before its children)
    depth     (N,) int64   depth[0] = 0, depth[i] = depth[parents[i]] + 1; node i's RoPE position
                           is start + depth[i] (start = the root's position, len(context))
    mask      (N, N) bool  mask[i, j] iff j is i or an ancestor of i: node i attends to the
                           context, its ancestors and itself -- never to a sibling, a cousin or a
                           descendant (Medusa / SpecInfer's tree attention)
    retrieve  (L, D + 1) int64  one row per LEAF (a node without children), leaves in node order:
                           the node indices of the leaf's path root -> leaf, padded with -1 to the
                           tree's depth D + 1 (Medusa's retrieve_indices): the candidate sequences

``build_tree(root, paths)``: ``root`` a token id (an int >= 0, or a 0-d integer tensor, as
``logits.argmax()`` gives; ``expand_topk`` likewise), ``paths`` a sequence of non-empty sequences of
token ids (ints >= 0), each the tokens after the root; the nodes are their distinct prefixes (a trie: equal prefixes are
one node), ordered by depth, then by first appearance in ``paths`` (so node order is breadth-first
and parents come first). ``paths = []`` is the tree of one node (the root). ``tree_from_parents``
takes the (tokens, parents) arrays as they are (no merging; siblings may hold the same token, as
when SpecInfer samples a node's children i.i.d. from the draft).

``expand_topk(root, next_probs, k, depth)``: ``next_probs(path)`` is the draft's next-token
distribution (a 1-D tensor over the vocabulary) after ``path``, the tuple of tokens from the root
(inclusive) to a node. Each node of depth < ``depth`` gets the k most probable tokens as children
(probability descending, ties to the smaller id; k <= vocab). EAGLE's dynamic tree conditions on
the path; Medusa's heads ignore all of it but its length. The result is ``build_tree`` of the
k^depth root-to-leaf paths in rank order.

**Scoring the tree.** ``tree_logits(model, context, tree)`` runs a reference ``Transformer``
(reference/model.py) on ``context`` (1-D int tokens before the root, possibly empty) followed by
the N tree tokens, with the causal mask over the context, ``tree.mask`` over the tree (every node
sees all of the context) and RoPE positions 0..C-1, C + depth. Row i of the result is the target's
next-token logits after node i's path: equal (to rounding) to the last row of ``model(context +
path(i))``. The model's forward takes no custom mask, so this function is built from its public
pieces (embedding, each layer's norms, projections and MLP, ``rope_cos_sin``/``apply_rope``, the
final norm and ``lm_head``), with attention written out: softmax(q k^T / sqrt(head_dim) + mask) v
in float32 (float64 for float64 models), GQA by repeating K/V heads.

**Verification.** ``target_probs`` (N, vocab): row i is the target's next-token distribution after
node i's path (floating, each row >= 0 summing to 1 within speculative.SUM_TOLERANCE; rows are
validated for every node). Every verifier returns ``TreeVerified(tokens, num_accepted, nodes)``:
``nodes`` (k + 1,) int64 the accepted path's node indices (root first: the positions whose K/V to
keep), ``tokens`` (k + 1,) int64 the emitted tokens (the k accepted candidates, then one more),
``num_accepted`` = k, an int.

``verify_tree_greedy``: a node is accepted iff its token is the argmax of its parent's row (ties
to the smaller id) and its parent is accepted (the root always is); keep the deepest accepted node
(the first in node order among the deepest: with repeated sibling tokens several paths may
match) and emit the argmax of its row. In a trie (build_tree, expand_topk) this is walking down
the argmax chain, and it equals greedy-verifying every root-to-leaf path as a chain (speculative's
greedy rule) and keeping the longest.

``verify_tree`` (lossless, recursive rejection sampling over siblings: SpecInfer's multi-step
speculative sampling; with ``draft_probs=None`` it is SGLang's target-only tree sampling with
thresholds 1). ``draft_probs`` (N, vocab) or None: row i is the distribution node i's children were
drawn from (i.i.d., with replacement); None means deterministic candidates, q one-hot on each
child's own token. With p = target_probs[cur] in float64 and, for each child c of cur in node order,
q_c = draft_probs[cur] (or one-hot(tokens[c]))::

    accept c  iff  q_c(x_c) > 0  and  u_c * q_c(x_c) < p(x_c)        (x_c = tokens[c], u_c = uniforms[c])
        then cur = c, p = target_probs[c], and repeat with c's children
    else p = max(p - q_c, 0) / its sum   (the normalised residual; p itself is kept if that has
        no positive entry, reachable only through rounding), and try the next sibling WITH THIS
        RESIDUAL (normalised: it is the next acceptance test's p)
    when cur has no child left: emit inverse_cdf(p, uniforms[0])      (the reference's draw: a choice, below)

(inverse_cdf as in reference.sampling: the smallest t with C_t > v * C_total, C the float64 cumsum
in token order.) The emitted tokens are distributed exactly as the target's (docs/tree_spec.md;
spec_tests/tree_spec/test_lossless.py enumerates it, test_law.py checks the law). A chain
(branching 1) is exactly ``speculative.verify`` with uniforms[1..γ] as its acceptance uniforms and
uniforms[0] as its draw.

``uniforms``: None or (N,) floating in [0, 1) (cast to float64): uniforms[i], i >= 1, decides node
i; uniforms[0] draws the final token. ``generator`` (used when uniforms is None): the uniforms are
``torch.rand(N, generator=generator, dtype=torch.float64)``, one call, drawn after validation.

``typical_accept`` (Medusa's typical acceptance; NOT distribution-preserving): candidate node c with
parent cur is typical iff p(x_c) > min(epsilon, delta * exp(-H(p))), p = target_probs[cur],
H(p) = -Σ p log p (natural log, 0 log 0 = 0). The accepted path is the deepest root path of typical
nodes (ties to the first such deepest node in node order); the final token is drawn from the
target at its end, inverse_cdf(target_probs[last], uniforms[0]). Only uniforms[0] is used (the
generator still draws N). epsilon in (0, 1], delta >= 0 (Medusa: epsilon 0.09, delta 0.3).

**The law and the reference's choices** (docs/tree_spec.md; spec_tests/tree_spec/oracles.py, "the
law"). What ANY correct implementation must do: ``verify_tree`` is the algorithm above -- the
children of the current node tried in node order, uniforms[c] deciding candidate c by the
threshold min(1, p(x_c) / q_c(x_c)), p the node's target row or the normalised residual left by
the siblings rejected before c (p kept when the residual has no positive entry), an accepted
candidate moving on with its own target row -- up to float32 rounding (a uniform within a relative
2^-21 of a threshold may go either way; a candidate of probability 0 is never accepted, not even
by u = 0; p(x) >= q(x) always accepts); the final token is drawn from the last p by randomness
derived from uniforms[0] alone: it lies in p's support and, for a uniform uniforms[0], follows p.
The sibling order and "uniforms[c] decides node c" are law, not choice: they are how this contract
defines the call for given uniforms (which node is kept, whose K/V survive), the caller orders the
candidates (expand_topk's rank order), and any other order or use of the uniforms is another
function of the same arguments. ``verify_tree_greedy``: the accepted nodes follow an argmax (ties,
and values within float32 rounding of the maximum, either way) and the path is a deepest one, the
final token an argmax of its last row. ``typical_accept``: a deepest root path of typical nodes
(the threshold up to float32 rounding), the final token in the last row's support, drawn from it.
With ``generator``, the outputs are distributed as with uniform ``uniforms``.

Choices the law leaves open (checked only at token-exact: the tests marked
``@pytest.mark.choice``, enforced for the bundled implementations, the mutants and submissions
declaring ``TOKEN_EXACT = True``): the final token is ``inverse_cdf(p, uniforms[0])`` in token-id
order (an exponential race argmax p / Exp(1), a Gumbel max, or a generator seeded from
uniforms[0] are as lawful); acceptance in float64 as ``u * q < p``; greedy argmax ties to the
smaller id; among equally deep matching nodes (greedy, typical) the first in node order; typical's
threshold and entropy in float64; the generator consumed as one ``torch.rand(N, float64)``.

Bad input: TypeError (wrong kind) or ValueError (wrong value), the message naming the argument:
root / tokens / paths not ints >= 0 (paths empty or not a sequence of sequences); parents not a
valid tree; k < 1 or > vocab, depth < 0; next_probs not returning a 1-D distribution; context not
1-D integers, ids out of the model's vocabulary, context + tree depth past max_seq_len; tree not a
Tree; target_probs / draft_probs not (N, vocab) floating distributions; tree tokens outside
[0, vocab); uniforms not (N,) in [0, 1); neither uniforms nor a torch.Generator; epsilon, delta out
of range. Inputs are never modified; a rejected call draws nothing.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import torch

from reference._checks import FLOAT_DTYPES, check_int, check_real, check_tensor, compute_dtype, is_int
from reference.model import apply_rope, rope_cos_sin
from reference.speculative import SUM_TOLERANCE

__all__ = ["build_tree", "tree_from_parents", "expand_topk", "tree_logits", "verify_tree_greedy",
           "verify_tree", "typical_accept"]  # the contract
__optional__ = []


class Tree(NamedTuple):
    """A candidate tree (module doc): node 0 is the root."""
    tokens: torch.Tensor    # (N,) int64
    parents: torch.Tensor   # (N,) int64, parents[0] = -1
    depth: torch.Tensor     # (N,) int64
    mask: torch.Tensor      # (N, N) bool: mask[i, j] iff j is i or an ancestor of i
    retrieve: torch.Tensor  # (leaves, max depth + 1) int64, -1 padded


class TreeVerified(NamedTuple):
    """What the verifiers return."""
    tokens: torch.Tensor    # (k + 1,) int64: accepted candidates, then one more token
    num_accepted: int       # k
    nodes: torch.Tensor     # (k + 1,) int64: root, then the accepted nodes


# ----------------------------------------------------------------------------- building trees
def _token(name: str, value) -> int:
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not (
            value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool):
        value = int(value)
    return check_int(name, value, minimum=0)


def _int_list(name: str, values) -> list[int]:
    if isinstance(values, torch.Tensor):
        check_tensor(name, values, ndim=1, dims="nodes")
        if values.dtype.is_floating_point or values.dtype.is_complex or values.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers, got {values.dtype}")
        return [int(v) for v in values.tolist()]
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a 1-D integer tensor or a list of ints, got {type(values).__name__}")
    for i, v in enumerate(values):
        check_int(f"{name}[{i}]", v)
    return list(values)


def tree_from_parents(tokens, parents) -> Tree:
    """The tree with these nodes as given (module doc): tokens[i] >= 0; parents[0] = -1 and
    0 <= parents[i] < i for i >= 1."""
    toks = _int_list("tokens", tokens)
    pars = _int_list("parents", parents)
    if not toks:
        raise ValueError("tokens: a tree has at least one node (the root)")
    if len(pars) != len(toks):
        raise ValueError(f"parents: one per node ({len(toks)}), got {len(pars)}")
    for i, t in enumerate(toks):
        if t < 0:
            raise ValueError(f"tokens[{i}] = {t} is not a token id (>= 0)")
    if pars[0] != -1:
        raise ValueError(f"parents[0] must be -1 (node 0 is the root), got {pars[0]}")
    for i in range(1, len(pars)):
        if not 0 <= pars[i] < i:
            raise ValueError(f"parents[{i}] = {pars[i]}: a parent must be an earlier node, in [0, {i})")
    n = len(toks)
    depth = [0] * n
    mask = torch.zeros(n, n, dtype=torch.bool)
    has_child = [False] * n
    for i in range(n):
        j = i
        while j >= 0:
            mask[i, j] = True
            j = pars[j]
        if i:
            depth[i] = depth[pars[i]] + 1
            has_child[pars[i]] = True
    width = max(depth) + 1
    rows = []
    for leaf in (i for i in range(n) if not has_child[i]):
        path, j = [], leaf
        while j >= 0:
            path.append(j)
            j = pars[j]
        rows.append(path[::-1] + [-1] * (width - len(path)))
    return Tree(torch.tensor(toks, dtype=torch.int64), torch.tensor(pars, dtype=torch.int64),
                torch.tensor(depth, dtype=torch.int64), mask,
                torch.tensor(rows, dtype=torch.int64).reshape(len(rows), width))


def build_tree(root: int, paths: Sequence[Sequence[int]]) -> Tree:
    """The trie of ``paths`` under ``root`` (module doc): nodes by depth, then by first appearance."""
    root = _token("root", root)
    if isinstance(paths, (str, bytes)) or not isinstance(paths, (list, tuple)):
        raise TypeError(f"paths must be a list of token lists, got {type(paths).__name__}")
    clean = []
    for i, path in enumerate(paths):
        path = _int_list(f"paths[{i}]", path)
        if not path:
            raise ValueError(f"paths[{i}] is empty: every path holds at least one token after the root")
        for t in path:
            if t < 0:
                raise ValueError(f"paths[{i}] holds {t}: token ids are >= 0")
        clean.append(tuple(path))
    index: dict[tuple, int] = {(): 0}
    order: list[tuple] = []
    for d in range(1, max((len(p) for p in clean), default=0) + 1):
        for path in clean:
            if len(path) >= d and path[:d] not in index:
                index[path[:d]] = len(index)
                order.append(path[:d])
    tokens = [root] + [prefix[-1] for prefix in order]
    parents = [-1] + [index[prefix[:-1]] for prefix in order]
    return tree_from_parents(tokens, parents)


def _distribution(name: str, probs) -> list[float]:
    check_tensor(name, probs, ndim=1, dims="vocab", dtypes=FLOAT_DTYPES)
    p = probs.detach().to("cpu", torch.float64)
    if p.numel() == 0 or not bool(torch.isfinite(p).all()) or bool((p < 0).any()) or \
            abs(float(p.sum()) - 1) > SUM_TOLERANCE[probs.dtype]:
        raise ValueError(f"{name} is not a probability vector (finite, >= 0, summing to 1)")
    return p.tolist()


def expand_topk(root: int, next_probs: Callable, k: int, depth: int) -> Tree:
    """Each node above ``depth`` gets the top ``k`` tokens of ``next_probs(path)`` as children
    (ties to the smaller id); the k^depth paths in rank order, as ``build_tree`` (module doc)."""
    root = _token("root", root)
    if not callable(next_probs):
        raise TypeError(f"next_probs must be callable (path -> 1-D probabilities), got {type(next_probs).__name__}")
    check_int("k", k, minimum=1)
    check_int("depth", depth, minimum=0)
    paths: list[tuple] = [()]
    for _ in range(depth):
        grown = []
        for path in paths:
            p = _distribution("next_probs", next_probs((root,) + path))
            if k > len(p):
                raise ValueError(f"k = {k} exceeds the vocabulary ({len(p)})")
            ranked = sorted(range(len(p)), key=lambda t: (-p[t], t))[:k]
            grown.extend(path + (t,) for t in ranked)
        paths = grown
    return build_tree(root, [list(p) for p in paths if p])


# ----------------------------------------------------------------------------- scoring the tree
def _check_tree(tree) -> tuple[list[int], list[int]]:
    if not all(isinstance(getattr(tree, f, None), torch.Tensor) for f in Tree._fields):
        raise TypeError(f"tree must be a Tree (build_tree / tree_from_parents / expand_topk), got {type(tree).__name__}")
    return [int(t) for t in tree.tokens.tolist()], [int(p) for p in tree.parents.tolist()]


@torch.no_grad()
def tree_logits(model, context, tree: Tree) -> torch.Tensor:
    """The target's logits after every node's path, in ONE pass with the tree mask (module doc):
    (N, vocab) in the model's dtype."""
    toks, pars = _check_tree(tree)
    for attr in ("config", "model", "lm_head"):
        if not hasattr(model, attr):
            raise TypeError(f"model must be a reference Transformer, got {type(model).__name__}")
    c = model.config
    check_tensor("context", context, ndim=1, dims="seq")
    if context.dtype.is_floating_point or context.dtype.is_complex or context.dtype == torch.bool:
        raise TypeError(f"context must hold integers, got {context.dtype}")
    ids = [int(t) for t in context.tolist()] + toks
    if min(ids) < 0 or max(ids) >= c.vocab_size:
        raise ValueError(f"context / tree tokens: ids must be in [0, {c.vocab_size})")
    n_ctx, n = context.numel(), len(toks)
    depth = tree.depth.tolist()
    if n_ctx + max(depth) + 1 > c.max_seq_len:
        raise ValueError(f"context: {n_ctx} tokens + a tree of depth {max(depth)} exceed max_seq_len={c.max_seq_len}")
    device = model.device
    total = n_ctx + n
    allowed = torch.ones(total, total, dtype=torch.bool).tril()            # the context: causal
    allowed[n_ctx:, n_ctx:] = tree.mask.to(torch.bool).cpu()               # the tree: ancestors only
    allowed = allowed.to(device)
    positions = torch.tensor(list(range(n_ctx)) + [n_ctx + d for d in depth], device=device)
    cos, sin = rope_cos_sin(positions, c.head_dim, c.rope_theta, model.dtype)
    acc = compute_dtype(model.dtype)
    h = model.model.embed_tokens(torch.tensor([ids], device=device))
    for layer in model.model.layers:
        attn = layer.self_attn
        x = layer.input_layernorm(h)
        q = attn.q_proj(x).view(1, total, attn.n_heads, attn.head_dim).transpose(1, 2)
        k = attn.k_proj(x).view(1, total, attn.n_kv_heads, attn.head_dim).transpose(1, 2)
        v = attn.v_proj(x).view(1, total, attn.n_kv_heads, attn.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = attn.n_heads // attn.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = (q.to(acc) @ k.to(acc).transpose(-1, -2)) / math.sqrt(attn.head_dim)
        scores = scores.masked_fill(~allowed, float("-inf"))
        out = (torch.softmax(scores, dim=-1) @ v.to(acc)).to(model.dtype)
        h = h + attn.o_proj(out.transpose(1, 2).reshape(1, total, attn.n_heads * attn.head_dim))
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    return model.lm_head(model.model.norm(h))[0, n_ctx:]


# ----------------------------------------------------------------------------- verification
def _check_probs(name: str, probs, n: int, vocab: int | None) -> list[list[float]]:
    check_tensor(name, probs, ndim=2, dims="nodes, vocab", dtypes=FLOAT_DTYPES)
    if probs.shape[0] != n or (vocab is not None and probs.shape[1] != vocab):
        want = f"({n}, {'vocab' if vocab is None else vocab})"
        raise ValueError(f"{name} must have shape (nodes, vocab) = {want}, got {tuple(probs.shape)}")
    if probs.shape[1] < 1:
        raise ValueError(f"{name}: vocab (dim 1) must be >= 1")
    p = probs.detach().to("cpu", torch.float64)
    tol = SUM_TOLERANCE[probs.dtype]
    sums, finite, negative = p.sum(dim=1), torch.isfinite(p).all(dim=1), (p < 0).any(dim=1)
    bad = ~finite | negative | ((sums - 1).abs() > tol)
    if bool(bad.any()):
        i = int(bad.nonzero()[0])
        if not bool(finite[i]):
            raise ValueError(f"{name}[{i}] is not a probability vector: it holds NaN or inf")
        if bool(negative[i]):
            raise ValueError(f"{name}[{i}] has a negative entry: probabilities are >= 0")
        raise ValueError(f"{name}[{i}] sums to {float(sums[i]):.8g}, not 1 (tolerance {tol:g} for {probs.dtype})")
    return p.tolist()


def _check_verify(tree, target_probs, draft_probs, uniforms, generator, random: bool = True):
    toks, pars = _check_tree(tree)
    n = len(toks)
    p = _check_probs("target_probs", target_probs, n, None)
    vocab = len(p[0])
    q = None if draft_probs is None else _check_probs("draft_probs", draft_probs, n, vocab)
    for i, t in enumerate(toks):
        if i and not 0 <= t < vocab:
            raise ValueError(f"tree: tokens[{i}] = {t} is not a token id in [0, {vocab})")
    u = None
    if uniforms is not None:
        if not isinstance(uniforms, torch.Tensor):
            raise TypeError(f"uniforms must be a torch.Tensor of shape (nodes,), got {type(uniforms).__name__}")
        if not uniforms.dtype.is_floating_point:
            raise TypeError(f"uniforms must be floating, got {uniforms.dtype}")
        if tuple(uniforms.shape) != (n,):
            raise ValueError(f"uniforms must have shape (nodes,) = ({n},), got {tuple(uniforms.shape)}")
        u = uniforms.detach().to("cpu", torch.float64)
        if not bool(((u >= 0) & (u < 1)).all()):
            raise ValueError("uniforms must lie in [0, 1)")
        u = u.tolist()
    elif random:
        if generator is None:
            raise ValueError("generator: tree verification needs an explicit torch.Generator (or explicit uniforms)")
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    children: list[list[int]] = [[] for _ in range(n)]
    for i in range(1, n):
        children[pars[i]].append(i)
    return toks, children, p, q, u


def _uniforms(u, generator, n: int) -> list[float]:
    return u if u is not None else torch.rand(n, generator=generator, dtype=torch.float64).tolist()


def _inverse_cdf(weights: list[float], v: float) -> int:
    """reference.sampling.inverse_cdf on one row: the smallest t with C_t > v * C_total."""
    c, run = [], 0.0
    for w in weights:
        run += w
        c.append(run)
    target = v * c[-1]
    idx = sum(1 for x in c if x <= target)
    last = max(t for t, w in enumerate(weights) if w > 0)
    return min(idx, last)


def _argmax(row: list[float]) -> int:
    return max(range(len(row)), key=lambda t: (row[t], -t))


def _result(toks: list[int], path: list[int], token: int | None, argmax: list[int] | None = None) -> TreeVerified:
    if token is None:                                # greedy: the argmax at the last node
        token = argmax[path[-1]]
    emitted = [toks[i] for i in path[1:]] + [token]
    return TreeVerified(torch.tensor(emitted, dtype=torch.int64), len(path) - 1,
                        torch.tensor(path, dtype=torch.int64))


def verify_tree_greedy(tree: Tree, target_probs: torch.Tensor) -> TreeVerified:
    """Follow the target's argmax down the tree; emit the argmax at the last node (module doc)."""
    toks, _, p, _, _ = _check_verify(tree, target_probs, None, None, None, random=False)
    parents = tree.parents.tolist()
    argmax = [_argmax(row) for row in p]
    return _result(toks, _deepest(parents, lambda i, par: toks[i] == argmax[par]), None, argmax)


def _deepest(parents: list[int], keep: Callable[[int, int], bool]) -> list[int]:
    """The root path to the deepest node all of whose path nodes i (with parent par) satisfy
    keep(i, par), the first in node order among the deepest."""
    ok_depth = [0] + [-1] * (len(parents) - 1)   # depth of node i if its whole path is kept, else -1
    best = 0
    for i in range(1, len(parents)):
        par = parents[i]
        if ok_depth[par] >= 0 and keep(i, par):
            ok_depth[i] = ok_depth[par] + 1
            if ok_depth[i] > ok_depth[best]:
                best = i
    path, j = [], best
    while j >= 0:
        path.append(j)
        j = parents[j]
    return path[::-1]


def verify_tree(tree: Tree, target_probs: torch.Tensor, draft_probs: torch.Tensor | None = None, *,
                uniforms: torch.Tensor | None = None, generator: torch.Generator | None = None) -> TreeVerified:
    """Lossless tree verification: recursive rejection sampling over siblings (module doc)."""
    toks, children, p_rows, q_rows, u = _check_verify(tree, target_probs, draft_probs, uniforms, generator)
    u = _uniforms(u, generator, len(toks))
    vocab = len(p_rows[0])
    path = [0]
    p = p_rows[0]
    while True:
        cur = path[-1]
        moved = False
        for c in children[cur]:
            x = toks[c]
            q = q_rows[cur] if q_rows is not None else [float(t == x) for t in range(vocab)]
            if q[x] > 0 and u[c] * q[x] < p[x]:
                path.append(c)
                p = p_rows[c]
                moved = True
                break
            residual = [max(a - b, 0.0) for a, b in zip(p, q)]
            total = sum(residual)
            if total > 0:                                  # else keep p (only through rounding)
                p = [r / total for r in residual]
        if not moved:
            return _result(toks, path, _inverse_cdf(p, u[0]))


def _entropy(p: list[float]) -> float:
    return -sum(x * math.log(x) for x in p if x > 0)


def typical_accept(tree: Tree, target_probs: torch.Tensor, *, epsilon: float = 0.09, delta: float = 0.3,
                   uniforms: torch.Tensor | None = None, generator: torch.Generator | None = None) -> TreeVerified:
    """Medusa's typical acceptance (module doc): NOT distribution-preserving."""
    eps = check_real("epsilon", epsilon, minimum=0, maximum=1)
    if eps <= 0:
        raise ValueError(f"epsilon must be in (0, 1], got {epsilon}")
    dlt = check_real("delta", delta, minimum=0)
    toks, children, p, _, u = _check_verify(tree, target_probs, None, uniforms, generator)
    u = _uniforms(u, generator, len(toks))
    threshold = [min(eps, dlt * math.exp(-_entropy(row))) for row in p]
    path = _deepest(tree.parents.tolist(), lambda i, par: p[par][toks[i]] > threshold[par])
    return _result(toks, path, _inverse_cdf(p[path[-1]], u[0]))
