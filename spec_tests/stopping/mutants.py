"""Planted bugs of `stopping` (each must make a stopping test fail)."""
from conformance.mutants import Patch

MUTANTS = [
    Patch("missed_across_boundary",
          "The stop-string matcher searches only the text the new token added: an occurrence that "
          "begins in an earlier token (\"Hel\" + \"lo wor\" with stop \"o w\") is never found, so "
          "generation runs on and streams the stop string.",
          "optimized/stopping.py",
          "            start = window.find(s, max(0, base - len(s) + 1))  # the first one ending after base\n",
          "            start = window.find(s, base)\n"),
    Patch("leaks_partial_stop",
          "The stream holds back only a partial stop string lying inside the newest token's text: "
          "when a stop string's beginning arrived in an earlier token and the new token continues "
          "it (\"a\", then \"b\" of the stop string \"abc\"), the partial match is emitted although "
          "it may still complete.",
          "optimized/stopping.py",
          "        m = self._starts.search(window, max(0, end - self._keep))  # candidate first characters\n",
          "        m = self._starts.search(window, max(base, end - self._keep))\n"),
    Patch("eos_ignores_min_tokens",
          "EOS ends generation even before min_tokens tokens were generated (min_tokens is applied "
          "to stop strings and stop token ids, but the EOS check forgets it).",
          "reference/stopping.py",
          "        if may_stop and token_id == p.eos_token_id and not p.ignore_eos:\n",
          "        if token_id == p.eos_token_id and not p.ignore_eos:\n"),
    Patch("includes_excluded_stop",
          "The final text is cut at the end of the matched stop string even when stop strings are "
          "to be excluded (include_stop_str_in_output=False): the client sees the stop string.",
          "optimized/stopping.py",
          "                cut = start + len(s) if p.include_stop_str_in_output else start\n",
          "                cut = start + len(s)\n"),
]
