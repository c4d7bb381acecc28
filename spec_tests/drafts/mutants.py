"""Planted bugs of `drafts` (each must make a drafts test fail)."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("no_target_rollback",
          "After a rejection the target's KV cache keeps the rejected drafts' K/V: later tokens "
          "attend to tokens that were never emitted (and sit at shifted positions).",
          "        _truncate(t_cache, kept + 1 + k)\n",
          "        pass\n"),
    Patch("ngram_matches_itself",
          "The proposer's search starts at the suffix itself (j = L - n): the most recent "
          "'occurrence' is always the suffix, with nothing after it, so it never proposes.",
          "    for j in range(length - n - 1, -1, -1):",
          "    for j in range(length - n, -1, -1):"),
    Patch("bonus_dropped",
          "When every draft is accepted, the bonus token from p_γ is thrown away (only the "
          "accepted drafts are emitted).",
          "        new = [int(t) for t in tokens[0, :k + 1].tolist()]\n",
          "        new = [int(t) for t in tokens[0, :k + 1].tolist()]\n"
          "        if drafts and k == len(drafts):\n"
          "            new = new[:-1]\n"),
    Patch("alpha_to_the_gamma",
          "Expected tokens per target pass with α^γ instead of α^(γ+1): (1 - α^γ) / (1 - α) "
          "forgets the bonus token (and the speedup and break-even α with it).",
          "    return (1 - a ** (gamma + 1)) / (1 - a)\n",
          "    return (1 - a ** gamma) / (1 - a)\n"),
    Patch("ngram_oldest_match",
          "Ties go to the OLDEST earlier occurrence of the n-gram instead of the most recent (a "
          "change of the reference's choice, not of the law: caught at the token-exact level).",
          "    for j in range(length - n - 1, -1, -1):          # most recent first; j = L - n is the suffix",
          "    for j in range(0, length - n):"),
    Patch("draft_last_layers",
          "draft_model keeps the target's LAST n_layers decoder layers instead of the first ones "
          "(not an early exit: the kept layers never saw the embedding's statistics).",
          "    source = target.state_dict()\n",
          "    skip = target.config.n_layers - layers\n"
          "    source = {(k.replace(f'layers.{int(k.split(\".\")[2])}.', f'layers.{int(k.split(\".\")[2]) - skip}.')\n"
          "               if k.startswith('model.layers.') else k): v for k, v in target.state_dict().items()\n"
          "              if not k.startswith('model.layers.') or int(k.split('.')[2]) >= skip}\n"),
    Patch("draft_noise_ignored",
          "draft_model ignores noise: every draft is an exact copy.",
          "        if sigma:\n            draw", "        if False:\n            draw"),
    Patch("verify_always_one_step",
          "The cost model charges the verification pass one step at every batch (memory-bound "
          "forever): speculation never loses at large batch.",
          "    return tokens * plain / (cost * gamma * plain + _step(b * (gamma + 1), r))\n",
          "    return tokens * plain / (cost * gamma * plain + plain)\n"),
    Patch("draft_cost_flat",
          "The cost model charges draft steps c at every batch instead of c times a target step at "
          "that batch (the draft is assumed never to become compute-bound).",
          "    return tokens * plain / (cost * gamma * plain + _step(b * (gamma + 1), r))\n",
          "    return tokens * plain / (cost * gamma + _step(b * (gamma + 1), r))\n"),
    Patch("break_even_batch_no_gamma",
          "break_even_batch forgets that the verification pass holds γ + 1 tokens per row: ridge "
          "(E - cγ) instead of ridge (E - cγ) / (γ + 1).",
          "    return r * margin / (gamma + 1) if margin > 1 else 0.0\n",
          "    return r * margin if margin > 1 else 0.0\n"),
    # --- probes (round 2) ---
    Patch("temperature_not_applied",
          "softmax(logits) instead of softmax(logits / temperature): sampling ignores the temperature "
          "(greedy and temperature 1 are unaffected).",
          "    return torch.softmax(logits / temperature, dim=-1)\n",
          "    return torch.softmax(logits, dim=-1)\n"),
    Patch("draft_q_at_unit_temperature",
          "The draft samples from softmax(logits / T) but hands the verifier q = softmax(logits) (the "
          "distribution at temperature 1): the acceptance ratios p/q are wrong for T != 1.",
          "                qs.append(qi)\n",
          "                qs.append(qi if greedy else _probs(logits, 1.0))\n"),
    Patch("break_even_batch_tie_wins",
          "break_even_batch treats a tie at small batch (E - c gamma == 1) as a win: it returns "
          "ridge / (gamma + 1) instead of 0.",
          "    return r * margin / (gamma + 1) if margin > 1 else 0.0\n",
          "    return r * margin / (gamma + 1) if margin >= 1 else 0.0\n"),
    Patch("draft_noise_in_place",
          "draft_model adds the noise in place to the state_dict tensors, which share storage with "
          "the target's parameters: the target is perturbed too.",
          "            w = (w.to(torch.float32) + sigma * w.to(torch.float32).std(unbiased=False) * draw).to(p.dtype)\n",
          "            w = w.add_((sigma * w.to(torch.float32).std(unbiased=False) * draw).to(w.dtype))\n"),
    Patch("draft_noise_reseeded_per_parameter",
          "draft_model reseeds a fresh generator for every parameter: parameters of one shape get the "
          "same draws (not one stream in state_dict order).",
          "            draw = torch.randn(p.shape, generator=g, dtype=torch.float32)",
          "            draw = torch.randn(p.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)"),
    Patch("one_token_prompt_prefilled",
          "The prefill runs even for a one-token prompt (an empty prefill): the model rejects it.",
          "    if len(seq) > 1:\n",
          "    if len(seq) >= 1:\n"),
    Patch("ngram_proposes_past_remaining",
          "The n-gram proposer is asked for gamma tokens, not gamma_r = min(gamma, still to emit - 1): "
          "the last round can draft past the last position.",
          "            drafts = ngram_propose(seq, g)\n",
          "            drafts = ngram_propose(seq, gamma)\n"),
    Patch("gamma_r_overshoots",
          "gamma_r = min(gamma, still to emit) instead of still to emit - 1: the last round drafts "
          "one token too many (and the target scores a position past prompt + max_new_tokens - 1).",
          "        g = min(gamma, max_new_tokens - len(emitted) - 1)\n",
          "        g = min(gamma, max_new_tokens - len(emitted))\n"),
    Patch("break_even_alpha_c_zero_bisected",
          "break_even_alpha has no c == 0 case: the bisection returns about 1e-12, not 0.",
          "    if cost == 0:\n        return 0.0\n    lo, hi = 0.0, 1.0",
          "    lo, hi = 0.0, 1.0"),
    # --- issue 22: bugs the output cannot show (speculation is lossless for ANY draft) ---
    Patch("draft_cache_past_written",
          "After a round whose drafts were all accepted, the draft's KV cache is set to len(seq) + k "
          "without the min: it claims the last draft's position, which the draft proposed but never "
          "ran on, so the next round skips feeding that token and attends to an unwritten slot. The "
          "output is still the target's; the drafts come from a corrupted context.",
          "            _truncate(d_cache, min(d_cache.seq_len, len(seq) + k))\n",
          "            _truncate(d_cache, len(seq) + k)\n"),
    Patch("ngram_looks_up_prompt_only",
          "Prompt lookup in the loop searches the prompt tensor instead of the sequence so far: its "
          "n-gram is the prompt's last one every round, and what was generated is never matched.",
          "            drafts = ngram_propose(seq, g)\n",
          "            drafts = ngram_propose(prompt, g)\n"),
    Patch("ngram_drafts_verified_greedily",
          "Prompt-lookup drafts (one-hot q) are verified greedily at temperature > 0 (accepted iff "
          "they are the target's argmax): the emitted tokens are no longer distributed as the target.",
          "        tokens, num_accepted = verify(p, q, x, greedy=greedy,",
          "        tokens, num_accepted = verify(p, q, x, greedy=greedy or draft is None,"),
    Patch("ngram_drafts_given_target_q",
          "At temperature > 0 the loop hands the verifier q = p for prompt-lookup drafts (as if the "
          "target had proposed them) instead of draft_probs None (one-hot q): every lookup is "
          "accepted, and the output follows the prompt instead of the target.",
          "        # 3. verify\n",
          "        # 3. verify\n"
          "        if draft is None and drafts and not greedy:\n"
          "            q = p[:, :len(drafts)].clone()\n"),
]
