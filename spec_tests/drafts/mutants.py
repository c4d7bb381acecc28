"""Planted bugs of `drafts` (each must make a drafts test fail)."""
from conformance.mutants import Patch

MUTANTS = [
    Patch("no_target_rollback",
          "After a rejection the target's KV cache keeps the rejected drafts' K/V: later tokens "
          "attend to tokens that were never emitted (and sit at shifted positions).",
          "reference/drafts.py",
          "        _truncate(t_cache, kept + 1 + k)\n",
          "        pass\n"),
    Patch("ngram_matches_itself",
          "The proposer's search starts at the suffix itself (j = L - n): the most recent "
          "'occurrence' is always the suffix, with nothing after it, so it never proposes.",
          "reference/drafts.py",
          "    for j in range(length - n - 1, -1, -1):",
          "    for j in range(length - n, -1, -1):"),
    Patch("bonus_dropped",
          "When every draft is accepted, the bonus token from p_γ is thrown away (only the "
          "accepted drafts are emitted).",
          "reference/drafts.py",
          "        new = [int(t) for t in tokens[0, :k + 1].tolist()]\n",
          "        new = [int(t) for t in tokens[0, :k + 1].tolist()]\n"
          "        if drafts and k == len(drafts):\n"
          "            new = new[:-1]\n"),
    Patch("alpha_to_the_gamma",
          "Expected tokens per target pass with α^γ instead of α^(γ+1): (1 - α^γ) / (1 - α) "
          "forgets the bonus token (and the speedup and break-even α with it).",
          "reference/drafts.py",
          "    return (1 - a ** (gamma + 1)) / (1 - a)\n",
          "    return (1 - a ** gamma) / (1 - a)\n"),
    Patch("ngram_oldest_match",
          "Ties go to the OLDEST earlier occurrence of the n-gram instead of the most recent.",
          "reference/drafts.py",
          "    for j in range(length - n - 1, -1, -1):          # most recent first; j = L - n is the suffix",
          "    for j in range(0, length - n):"),
    Patch("draft_last_layers",
          "draft_model keeps the target's LAST n_layers decoder layers instead of the first ones "
          "(not an early exit: the kept layers never saw the embedding's statistics).",
          "reference/drafts.py",
          "    source = target.state_dict()\n",
          "    skip = target.config.n_layers - layers\n"
          "    source = {(k.replace(f'layers.{int(k.split(\".\")[2])}.', f'layers.{int(k.split(\".\")[2]) - skip}.')\n"
          "               if k.startswith('model.layers.') else k): v for k, v in target.state_dict().items()\n"
          "              if not k.startswith('model.layers.') or int(k.split('.')[2]) >= skip}\n"),
    Patch("draft_noise_ignored",
          "draft_model ignores noise: every draft is an exact copy.",
          "reference/drafts.py",
          "        if sigma:\n            draw", "        if False:\n            draw"),
    Patch("verify_always_one_step",
          "The cost model charges the verification pass one step at every batch (memory-bound "
          "forever): speculation never loses at large batch.",
          "reference/drafts.py",
          "    return tokens * plain / (cost * gamma * plain + _step(b * (gamma + 1), r))\n",
          "    return tokens * plain / (cost * gamma * plain + plain)\n"),
    Patch("draft_cost_flat",
          "The cost model charges draft steps c at every batch instead of c times a target step at "
          "that batch (the draft is assumed never to become compute-bound).",
          "reference/drafts.py",
          "    return tokens * plain / (cost * gamma * plain + _step(b * (gamma + 1), r))\n",
          "    return tokens * plain / (cost * gamma + _step(b * (gamma + 1), r))\n"),
    Patch("break_even_batch_no_gamma",
          "break_even_batch forgets that the verification pass holds γ + 1 tokens per row: ridge "
          "(E - cγ) instead of ridge (E - cγ) / (γ + 1).",
          "reference/drafts.py",
          "    return r * margin / (gamma + 1) if margin > 1 else 0.0\n",
          "    return r * margin if margin > 1 else 0.0\n"),
]
