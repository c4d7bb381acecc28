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
]
