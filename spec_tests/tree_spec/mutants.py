"""Planted bugs of `tree_spec` (each must make a tree_spec test fail): realistic slips in
reference/tree_spec.py's tree building, tree forward pass and verifiers."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("mask_siblings_visible",
          "The tree mask also lets a node see its siblings (the other children of its parent): "
          "candidate branches contaminate each other's attention.",
          "        if i:\n            depth[i] = depth[pars[i]] + 1\n",
          "        if i:\n            depth[i] = depth[pars[i]] + 1\n"
          "            for s in range(1, n):\n                if pars[s] == pars[i]:\n                    mask[i, s] = True\n"),
    Patch("logits_causal_over_tree",
          "The tree forward pass uses a plain causal mask over the flattened tree (every node sees "
          "every earlier node, earlier siblings and cousins included) instead of tree.mask.",
          "    allowed[n_ctx:, n_ctx:] = tree.mask.to(torch.bool).cpu()               # the tree: ancestors only\n",
          ""),
    Patch("positions_off_by_one",
          "RoPE positions of the tree nodes start one too late (C + depth + 1): the root sits at "
          "C + 1, not right after the context.",
          "[n_ctx + d for d in depth]", "[n_ctx + d + 1 for d in depth]"),
    Patch("positions_by_index",
          "RoPE positions by node index (C + i, as if the flattened tree were a sequence) instead "
          "of by depth: siblings get different positions.",
          "[n_ctx + d for d in depth]", "[n_ctx + i for i in range(len(depth))]"),
    Patch("retrieve_reversed",
          "Retrieval rows list the path leaf -> root (the parent walk not reversed): the candidate "
          "sequences are read backwards.",
          "        rows.append(path[::-1] + [-1] * (width - len(path)))\n",
          "        rows.append(path + [-1] * (width - len(path)))\n"),
    Patch("depth_first_order",
          "build_tree numbers the trie's nodes depth-first (in path order) instead of breadth-first "
          "(by depth, then first appearance): a valid tree, but not the pinned node order.",
          "    for d in range(1, max((len(p) for p in clean), default=0) + 1):\n"
               "        for path in clean:\n",
          "    for path in clean:\n"
          "        for d in range(1, len(path) + 1):\n"),
    Patch("topk_ties_to_larger_id",
          "Top-k expansion breaks probability ties toward the larger token id.",
          "key=lambda t: (-p[t], t))[:k]", "key=lambda t: (-p[t], -t))[:k]"),
    Patch("sibling_stop",
          "The tree verifier stops at the first rejected sibling (only the first child of each node "
          "is ever tried) instead of trying the next sibling with the residual.",
          "        for c in children[cur]:\n            x = toks[c]\n",
          "        for c in children[cur][:1]:\n            x = toks[c]\n"),
    Patch("residual_not_updated",
          "After a sibling is rejected the next sibling is tested against the same p (the residual is "
          "never formed): mass is double counted.",
          "                p = [r / total for r in residual]\n", "                pass\n"),
    Patch("residual_unnormalised",
          "The residual max(p - q, 0) is passed to the next sibling's acceptance test without "
          "normalising it (fine for an inverse-CDF draw, wrong for a min(1, p/q) test).",
          "                p = [r / total for r in residual]\n", "                p = residual\n"),
    Patch("child_p_not_switched",
          "After accepting a child the verifier keeps testing (and finally drawing) with the "
          "parent's distribution instead of the child's target row.",
          "                path.append(c)\n                p = p_rows[c]\n", "                path.append(c)\n"),
    Patch("greedy_first_child_only",
          "Greedy tree verification only follows the first child of each node (a chain), so a "
          "matching sibling is never found.",
          "    return _result(toks, _deepest(parents, lambda i, par: toks[i] == argmax[par]), None, argmax)\n",
          "    first = [i for i in range(1, len(parents)) if parents[i] >= 0 and i == min(\n"
          "        j for j in range(1, len(parents)) if parents[j] == parents[i])]\n"
          "    return _result(toks, _deepest(parents, lambda i, par: i in first and toks[i] == argmax[par]), None, argmax)\n"),
    Patch("typical_own_row",
          "Typical acceptance scores a candidate with its OWN target row (the distribution after it) "
          "instead of its parent's (the distribution it was drawn for).",
          "lambda i, par: p[par][toks[i]] > threshold[par])", "lambda i, par: p[i][toks[i]] > threshold[i])"),
    Patch("typical_no_exp",
          "Typical acceptance's threshold min(ε, δ · H) instead of min(ε, δ · exp(-H)).",
          "    threshold = [min(eps, dlt * math.exp(-_entropy(row))) for row in p]\n",
          "    threshold = [min(eps, dlt * _entropy(row)) for row in p]\n"),
    # --- probes (round 2) ---
    Patch("uniforms_negative_accepted",
          "The uniforms check tests only the upper bound (u < 1): negative uniforms are accepted.",
          "        if not bool(((u >= 0) & (u < 1)).all()):\n",
          "        if not bool((u < 1).all()):\n"),
    Patch("typical_draws_one_uniform",
          "typical_accept draws one uniform from the generator (it only uses uniforms[0]) instead "
          "of the N that the contract says it draws.",
          "    toks, children, p, _, u = _check_verify(tree, target_probs, None, uniforms, generator)\n"
               "    u = _uniforms(u, generator, len(toks))\n",
          "    toks, children, p, _, u = _check_verify(tree, target_probs, None, uniforms, generator)\n"
          "    u = _uniforms(u, generator, 1)\n"),
    Patch("max_seq_len_counts_nodes",
          "tree_logits checks context + NODES against max_seq_len instead of context + depth + 1: a "
          "wide tree whose positions fit is rejected.",
          "    if n_ctx + max(depth) + 1 > c.max_seq_len:\n",
          "    if n_ctx + n > c.max_seq_len:\n"),
    Patch("max_seq_len_off_by_one",
          "tree_logits rejects a tree whose deepest position is exactly max_seq_len - 1 (>= instead of >).",
          "    if n_ctx + max(depth) + 1 > c.max_seq_len:\n",
          "    if n_ctx + max(depth) + 1 >= c.max_seq_len:\n"),
    Patch("deepest_ties_to_last",
          "Among equally deep accepted nodes the LAST in node order is kept, not the first.",
          "            if ok_depth[i] > ok_depth[best]:\n",
          "            if ok_depth[i] >= ok_depth[best]:\n"),
    Patch("inverse_cdf_strict",
          "The inverse CDF counts C_t < v C_total instead of <=: at a cell edge (v = 0 before a zero "
          "weight) it picks a token of probability 0.",
          "    idx = sum(1 for x in c if x <= target)\n",
          "    idx = sum(1 for x in c if x < target)\n"),
    Patch("final_draw_ignores_residual",
          "After rejected siblings the final token is drawn from the node's original target row, not "
          "from the residual left by the rejections.",
          "            return _result(toks, path, _inverse_cdf(p, u[0]))\n",
          "            return _result(toks, path, _inverse_cdf(p_rows[path[-1]], u[0]))\n"),
    Patch("draft_q_child_row",
          "A child's acceptance uses the draft row of the child itself instead of its parent's (the "
          "distribution the child was drawn from).",
          "            q = q_rows[cur] if q_rows is not None",
          "            q = q_rows[c] if q_rows is not None"),
    Patch("accept_le",
          "Accept iff u q(x) <= p(x) instead of <: at u = 0 a candidate of target probability 0 is accepted.",
          "            if q[x] > 0 and u[c] * q[x] < p[x]:\n",
          "            if q[x] > 0 and u[c] * q[x] <= p[x]:\n"),
    Patch("topk_path_without_root",
          "expand_topk calls next_probs with the path below the root, without the root token.",
          "            p = _distribution(\"next_probs\", next_probs((root,) + path))\n",
          "            p = _distribution(\"next_probs\", next_probs(path))\n"),
    Patch("gqa_repeat_not_interleave",
          "The tree forward pass expands K/V heads with repeat (head h reads K/V head h % n_kv) "
          "instead of repeat_interleave (h // (n_heads / n_kv)).",
          "        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)\n",
          "        k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)\n"),
    Patch("typical_entropy_log2",
          "Typical acceptance's entropy in bits (log2) instead of nats.",
          "    return -sum(x * math.log(x) for x in p if x > 0)\n",
          "    return -sum(x * math.log2(x) for x in p if x > 0)\n"),
]
