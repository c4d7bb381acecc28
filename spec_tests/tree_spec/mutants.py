"""Planted bugs of `tree_spec` (each must make a tree_spec test fail): realistic slips in
reference/tree_spec.py's tree building, tree forward pass and verifiers."""
from conformance.mutants import Patch

REF = "reference/tree_spec.py"

MUTANTS = [
    Patch("mask_siblings_visible",
          "The tree mask also lets a node see its siblings (the other children of its parent): "
          "candidate branches contaminate each other's attention.",
          REF, "        if i:\n            depth[i] = depth[pars[i]] + 1\n",
          "        if i:\n            depth[i] = depth[pars[i]] + 1\n"
          "            for s in range(1, n):\n                if pars[s] == pars[i]:\n                    mask[i, s] = True\n"),
    Patch("logits_causal_over_tree",
          "The tree forward pass uses a plain causal mask over the flattened tree (every node sees "
          "every earlier node, earlier siblings and cousins included) instead of tree.mask.",
          REF, "    allowed[n_ctx:, n_ctx:] = tree.mask.to(torch.bool).cpu()               # the tree: ancestors only\n",
          ""),
    Patch("positions_off_by_one",
          "RoPE positions of the tree nodes start one too late (C + depth + 1): the root sits at "
          "C + 1, not right after the context.",
          REF, "[n_ctx + d for d in depth]", "[n_ctx + d + 1 for d in depth]"),
    Patch("positions_by_index",
          "RoPE positions by node index (C + i, as if the flattened tree were a sequence) instead "
          "of by depth: siblings get different positions.",
          REF, "[n_ctx + d for d in depth]", "[n_ctx + i for i in range(len(depth))]"),
    Patch("retrieve_reversed",
          "Retrieval rows list the path leaf -> root (the parent walk not reversed): the candidate "
          "sequences are read backwards.",
          REF, "        rows.append(path[::-1] + [-1] * (width - len(path)))\n",
          "        rows.append(path + [-1] * (width - len(path)))\n"),
    Patch("depth_first_order",
          "build_tree numbers the trie's nodes depth-first (in path order) instead of breadth-first "
          "(by depth, then first appearance): a valid tree, but not the pinned node order.",
          REF, "    for d in range(1, max((len(p) for p in clean), default=0) + 1):\n"
               "        for path in clean:\n",
          "    for path in clean:\n"
          "        for d in range(1, len(path) + 1):\n"),
    Patch("topk_ties_to_larger_id",
          "Top-k expansion breaks probability ties toward the larger token id.",
          REF, "key=lambda t: (-p[t], t))[:k]", "key=lambda t: (-p[t], -t))[:k]"),
    Patch("sibling_stop",
          "The tree verifier stops at the first rejected sibling (only the first child of each node "
          "is ever tried) instead of trying the next sibling with the residual.",
          REF, "        for c in children[cur]:\n            x = toks[c]\n",
          "        for c in children[cur][:1]:\n            x = toks[c]\n"),
    Patch("residual_not_updated",
          "After a sibling is rejected the next sibling is tested against the same p (the residual is "
          "never formed): mass is double counted.",
          REF, "                p = [r / total for r in residual]\n", "                pass\n"),
    Patch("residual_unnormalised",
          "The residual max(p - q, 0) is passed to the next sibling's acceptance test without "
          "normalising it (fine for an inverse-CDF draw, wrong for a min(1, p/q) test).",
          REF, "                p = [r / total for r in residual]\n", "                p = residual\n"),
    Patch("child_p_not_switched",
          "After accepting a child the verifier keeps testing (and finally drawing) with the "
          "parent's distribution instead of the child's target row.",
          REF, "                path.append(c)\n                p = p_rows[c]\n", "                path.append(c)\n"),
    Patch("greedy_first_child_only",
          "Greedy tree verification only follows the first child of each node (a chain), so a "
          "matching sibling is never found.",
          REF, "    return _result(toks, _deepest(parents, lambda i, par: toks[i] == argmax[par]), None, argmax)\n",
          "    first = [i for i in range(1, len(parents)) if parents[i] >= 0 and i == min(\n"
          "        j for j in range(1, len(parents)) if parents[j] == parents[i])]\n"
          "    return _result(toks, _deepest(parents, lambda i, par: i in first and toks[i] == argmax[par]), None, argmax)\n"),
    Patch("typical_own_row",
          "Typical acceptance scores a candidate with its OWN target row (the distribution after it) "
          "instead of its parent's (the distribution it was drawn for).",
          REF, "lambda i, par: p[par][toks[i]] > threshold[par])", "lambda i, par: p[i][toks[i]] > threshold[i])"),
    Patch("typical_no_exp",
          "Typical acceptance's threshold min(ε, δ · H) instead of min(ε, δ · exp(-H)).",
          REF, "    threshold = [min(eps, dlt * math.exp(-_entropy(row))) for row in p]\n",
          "    threshold = [min(eps, dlt * _entropy(row)) for row in p]\n"),
]
