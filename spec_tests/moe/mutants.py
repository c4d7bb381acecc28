"""Planted bugs of `moe` (each must make a moe test fail): the slips of routing, capacity, the
load statistic and the expert-parallel exchange, patched into reference/moe.py."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("ties_to_highest_index", "Equal logits ranked by the HIGHER expert index (an unstable or reversed "
          "sort): a tie at the k-th place keeps the wrong expert.",
          "    ids = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :k]\n",
          "    ids = (logits.shape[1] - 1 - torch.sort(logits.flip(-1), dim=-1, descending=True, stable=True)"
          ".indices)[:, :k]\n"),
    Patch("topk_smallest", "The k SMALLEST logits chosen (ascending sort).",
          "    ids = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :k]\n",
          "    ids = torch.sort(logits, dim=-1, descending=False, stable=True).indices[:, :k]\n"),
    Patch("gates_not_renormalized", "renormalize=True returns the full softmax's probabilities of the chosen "
          "experts (they do not sum to 1).",
          "        gates = torch.softmax(logits.gather(1, ids), dim=-1)\n",
          "        gates = torch.softmax(logits, dim=-1).gather(1, ids)\n"),
    Patch("renormalize_ignored", "renormalize=False still renormalises (Switch's top-1 gate becomes 1).",
          "        gates = torch.softmax(logits, dim=-1).gather(1, ids)\n",
          "        gates = torch.softmax(logits.gather(1, ids), dim=-1)\n"),
    Patch("capacity_floor", "The capacity rounded down (int()) instead of up: 2.5 -> 2.",
          "    return -(-exact.numerator // exact.denominator)\n",
          "    return exact.numerator // exact.denominator\n"),
    Patch("capacity_ignores_k", "The capacity of top-1 for every k: T x factor / E (k T assignments share "
          "E x C places).",
          "    exact = Fraction(k * num_tokens) * Fraction(factor) / num_experts\n",
          "    exact = Fraction(num_tokens) * Fraction(factor) / num_experts\n"),
    Patch("queue_token_major", "The queue in token order, all of a token's choices before the next token's "
          "(not GShard's first choices of every token first): a late token's first choice is dropped for an "
          "earlier token's second choice.",
          "    order = expert_ids.long().T.reshape(-1)                       # choice-major: (j, t) -> j * T + t\n"
          "    one_hot = F.one_hot(order, num_experts)                       # (k T, E)\n"
          "    earlier = torch.cumsum(one_hot, dim=0) - one_hot              # assignments to e before this one\n"
          "    return earlier.gather(1, order[:, None])[:, 0].reshape(expert_ids.shape[1], -1).T.contiguous()\n",
          "    order = expert_ids.long().reshape(-1)\n"
          "    one_hot = F.one_hot(order, num_experts)\n"
          "    earlier = torch.cumsum(one_hot, dim=0) - one_hot\n"
          "    return earlier.gather(1, order[:, None])[:, 0].reshape(expert_ids.shape).contiguous()\n"),
    Patch("kept_at_capacity", "An assignment kept while position <= capacity: one more than the capacity.",
          "    return positions, positions < capacity\n", "    return positions, positions <= capacity\n"),
    Patch("silu_on_up_projection", "The activation applied to the up projection instead of the gate "
          "projection: w_down (w_gate v * silu(w_up v)).",
          "        h = (F.silu(v @ w_gate[e].to(cdt).T) * (v @ w_up[e].to(cdt).T)).to(rows.dtype)\n",
          "        h = ((v @ w_gate[e].to(cdt).T) * F.silu(v @ w_up[e].to(cdt).T)).to(rows.dtype)\n"),
    Patch("no_gate_weighting", "The experts' outputs summed without their gates (every gate 1).",
          "    y.index_add_(0, slot // k, out * gates.reshape(-1)[slot, None].to(out.dtype))\n",
          "    y.index_add_(0, slot // k, out)\n"),
    Patch("balance_without_num_experts", "The load statistic without the factor E: sum f_i P_i (1/E when "
          "balanced, not 1).",
          "    return experts * torch.sum(f * probs.mean(dim=0))\n", "    return torch.sum(f * probs.mean(dim=0))\n"),
    Patch("balance_f_over_tokens_only", "f_i divided by T, not T k: the fractions sum to k (HF Mixtral's "
          "scale) while the contract's sum to 1.",
          "torch.ones(ids.numel(), dtype=probs.dtype, device=probs.device)) / (tokens * k)\n",
          "torch.ones(ids.numel(), dtype=probs.dtype, device=probs.device)) / tokens\n"),
    Patch("ep_capacity_from_local_tokens", "Expert parallelism sizes the capacity from the rank's own tokens, "
          "not all ranks' (the dense layer's C over the whole batch).",
          "    capacity = expert_capacity(int(table[:, 0].sum()), experts, k, capacity_factor)\n",
          "    capacity = expert_capacity(tokens, experts, k, capacity_factor)\n"),
    Patch("ep_rank_offset_ignored", "Expert parallelism queues a rank's assignments as if no earlier rank had "
          "any: each rank's first tokens are kept, as with a per-rank capacity.",
          "    before = per_rank.sum(dim=0).cumsum(dim=0) - per_rank.sum(dim=0) + per_rank[:rank].sum(dim=0)\n",
          "    before = per_rank.sum(dim=0).cumsum(dim=0) - per_rank.sum(dim=0)\n"),
]
