"""Planted bugs of `stopping` (each must make a stopping test fail)."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("missed_across_boundary",
          "The stop-string matcher searches only the text the new token added: an occurrence that "
          "begins in an earlier token (\"Hel\" + \"lo w\" + \"orld\" with stop \"o wo\") is never found, so "
          "generation runs on and streams the stop string.",
          "            start = window.find(s, max(0, base - len(s) + 1))  # the first one ending after base\n",
          "            start = window.find(s, base)\n", module="optimized"),
    Patch("leaks_partial_stop",
          "The stream holds back only a partial stop string lying inside the newest token's text: "
          "when a stop string's beginning arrived in an earlier token and the new token continues "
          "it (\"a\", then \"b\" of the stop string \"abc\"), the partial match is emitted although "
          "it may still complete.",
          "        m = self._starts.search(window, max(0, end - self._keep))  # candidate first characters\n",
          "        m = self._starts.search(window, max(base, end - self._keep))\n", module="optimized"),
    Patch("eos_ignores_min_tokens",
          "EOS ends generation even before min_tokens tokens were generated (min_tokens is applied "
          "to stop strings and stop token ids, but the EOS check forgets it).",
          "        if may_stop and token_id == p.eos_token_id and not p.ignore_eos:\n",
          "        if token_id == p.eos_token_id and not p.ignore_eos:\n"),
    Patch("includes_excluded_stop",
          "The final text is cut at the end of the matched stop string even when stop strings are "
          "to be excluded (include_stop_str_in_output=False): the client sees the stop string.",
          "                cut = start + len(s) if p.include_stop_str_in_output else start\n",
          "                cut = start + len(s)\n", module="optimized"),
]

MUTANTS += [
    # Defaults and boundaries; each names the pinned case of test_stopping.py it fails.
    Patch("default_max_tokens_16",
          "StopParams defaults to max_tokens=16 (vLLM's SamplingParams default) instead of no "
          "limit: a generation with max_tokens omitted ends by length after 16 tokens "
          "(test_no_limit_by_default).",
          "    max_tokens: int | None = None\n",
          "    max_tokens: int | None = 16\n"),
    Patch("ignore_eos_default_true",
          "StopParams defaults to ignore_eos=True (benchmark scripts set it to force full-length "
          "outputs, and it was copied as the default): with ignore_eos omitted, EOS never stops "
          "generation (test_omitted_arguments_mean_the_defaults, EOS_IN_MIN with ignore_eos omitted).",
          "    ignore_eos: bool = False\n",
          "    ignore_eos: bool = True\n"),
    Patch("min_tokens_off_by_one",
          "Stops are allowed from token n == min_tokens (>=) instead of n > min_tokens: one token "
          "too early (EOS_IN_MIN, MIN_EQ_MAX).",
          "        may_stop = n > p.min_tokens\n",
          "        may_stop = n >= p.min_tokens\n", module="optimized"),
    Patch("stop_ids_before_eos",
          "stop_token_ids are checked before EOS: a token that is both reports its id as "
          "stop_reason instead of None (EOS_AND_STOP_ID).",
          "        if may_stop and token_id == p.eos_token_id and not p.ignore_eos:\n"
          "            return self._finish(n, self.text, \"stop\", None)\n"
          "        if may_stop and token_id in self._stop_ids:\n"
          "            return self._finish(n, self.text, \"stop\", token_id)\n",
          "        if may_stop and token_id in self._stop_ids:\n"
          "            return self._finish(n, self.text, \"stop\", token_id)\n"
          "        if may_stop and token_id == p.eos_token_id and not p.ignore_eos:\n"
          "            return self._finish(n, self.text, \"stop\", None)\n", module="optimized"),
    Patch("ignore_eos_skips_stop_ids",
          "ignore_eos removes the EOS id from the stop token ids too: an EOS id the caller also "
          "listed in stop_token_ids no longer stops (IGNORED_EOS_STOP_ID).",
          "        self._stop_ids = frozenset(params.stop_token_ids)\n",
          "        self._stop_ids = frozenset(params.stop_token_ids) - ({params.eos_token_id} if params.ignore_eos else set())\n", module="optimized"),
    Patch("max_tokens_one_late",
          "The length limit compares the count before this token (num_tokens == max_tokens): "
          "generation ends one token after max_tokens (MAX_ONE, MIN_EQ_MAX).",
          "        if n == p.max_tokens:\n",
          "        if self.num_tokens == p.max_tokens:\n", module="optimized"),
    Patch("match_at_start_missed",
          "The matcher tests `start > 0` instead of `start != -1`: a stop string at the very start "
          "of the searched window is never found (MATCH_AT_START).",
          "            if start != -1 and (best is None or (start + len(s), -len(s)) < best[0]):\n",
          "            if start > 0 and (best is None or (start + len(s), -len(s)) < best[0]):\n", module="optimized"),
    Patch("length_beats_stop",
          "max_tokens is checked before stop strings (as vLLM v1's scheduler does): a stop string "
          "completed by the last allowed token reports \"length\" and keeps the stop string "
          "(LENGTH_VS_STOP).",
          "        if may_stop and new and self._stop:\n",
          "        if n == p.max_tokens:\n"
          "            return self._finish(n, self.text + new, \"length\", None)\n"
          "        if may_stop and new and self._stop:\n", module="optimized"),
    Patch("no_pending_utf8",
          "Each token's bytes are decoded on their own (errors=\"replace\"): a character split "
          "across tokens becomes U+FFFD characters instead of waiting for its last byte "
          "(SPLIT_EURO).",
          "        k = pending_length(data)\n",
          "        k = 0\n", module="optimized"),
    Patch("endswith_only",
          "A stop string counts only when the text ends with it (`text.endswith(stop)`): one "
          "followed by more text in the same token is missed (EXCLUDE_TAIL, EARLIEST_END).",
          "            start = window.find(s, max(0, base - len(s) + 1))  # the first one ending after base\n",
          "            start = len(window) - len(s) if window.endswith(s) and len(window) - len(s) >= max(0, base - len(s) + 1) else -1\n", module="optimized"),
    Patch("first_in_list_order",
          "Of several stop strings completing on one token, the first in the list wins (vLLM's "
          "check_stop_strings), not the one ending first (EARLIEST_END).",
          "                best = ((start + len(s), -len(s)), start, s)\n",
          "                best = ((start + len(s), -len(s)), start, s)\n"
          "                break\n", module="optimized"),
    Patch("tie_prefers_shortest",
          "Of stop strings ending at the same character the shortest wins instead of the longest "
          "(EARLIEST_END: \"c\" instead of \"bc\").",
          "            if start != -1 and (best is None or (start + len(s), -len(s)) < best[0]):\n"
          "                best = ((start + len(s), -len(s)), start, s)\n",
          "            if start != -1 and (best is None or (start + len(s), len(s)) < best[0]):\n"
          "                best = ((start + len(s), len(s)), start, s)\n", module="optimized"),
    Patch("holds_fixed_window",
          "The stream always holds back the last max_stop_len - 1 characters (vLLM v1) instead of "
          "only a suffix that can still begin a stop string (PARTIAL_THEN_MISS).",
          "        held = self._held_back(window, base) if self._hold else 0\n",
          "        held = min(self._keep, self._length) if self._hold else 0\n", module="optimized"),
    Patch("include_flag_ignored",
          "The final text is always cut at the start of the stop string, even with "
          "include_stop_str_in_output=True (INCLUDE).",
          "                cut = start + len(s) if p.include_stop_str_in_output else start\n",
          "                cut = start\n", module="optimized"),
    Patch("holds_back_when_included",
          "Partial stop strings are held back even with include_stop_str_in_output=True, where "
          "every decoded character is already safe to show (INCLUDE).",
          "        self._hold = not params.include_stop_str_in_output and bool(self._prefixes)\n",
          "        self._hold = bool(self._prefixes)\n", module="optimized"),
    Patch("empty_stop_accepted",
          "StopParams accepts an empty stop string (which matches everywhere and ends every "
          "generation at its first token) instead of rejecting it naming stop.",
          '        if any(s == "" for s in stop):\n',
          '        if False:\n'),
]
MUTANTS += [
    # Validation the contract states (bad-input tables of test_stopping.py).
    Patch("accepts_bool_token_id",
          "append checks isinstance(token_id, int), which True and False pass: a bool is appended "
          "as token 1 or 0 instead of being rejected naming token_id.",
          "        if not is_int(token_id):\n",
          "        if not isinstance(token_id, int):\n", module="optimized"),
    Patch("append_after_finish_allowed",
          "append has no finished check: a token appended after the stop runs on from the "
          "cleared state instead of raising ValueError saying generation finished.",
          "        if self.finished:\n"
          "            raise ValueError(f\"token_id {token_id}: generation already finished ({self.finish_reason})\")\n",
          "", module="optimized"),
    Patch("unknown_stop_id_accepted",
          "stop_token_ids are not checked against the vocab: an id the model can never produce "
          "(a tokenizer mismatch) is accepted silently.",
          "    unknown = [t for t in params.stop_token_ids if t not in checked]\n",
          "    unknown = []\n"),
]
MUTANTS += [
    # Probes for gaps (min_tokens per mechanism, overlapping matches, pending bytes, params).
    Patch("stop_ids_ignore_min_tokens",
          "A stop token id stops generation even at n <= min_tokens (only EOS honours min_tokens).",
          "        if may_stop and token_id in p.stop_token_ids:\n",
          "        if token_id in p.stop_token_ids:\n"),
    Patch("stop_strings_ignore_min_tokens",
          "Stop strings are matched even at n <= min_tokens.",
          "        if may_stop:\n            match = first_stop_match(",
          "        if True:\n            match = first_stop_match("),
    Patch("no_holdback_during_min_tokens",
          "Nothing is held back while n <= min_tokens (a stop string cannot end there), so a "
          "stop-string prefix streamed then may become part of a later match.",
          "        held = 0 if p.include_stop_str_in_output else held_back_length(text, p.stop)\n",
          "        held = 0 if p.include_stop_str_in_output or not may_stop else held_back_length(text, p.stop)\n"),
    Patch("old_match_counts",
          "A stop-string occurrence that ended at the previous text end (complete at a token <= "
          "min_tokens) still counts (>= for >).",
          "            if end > after:\n",
          "            if end >= after:\n"),
    Patch("non_overlapping_search",
          "Occurrences of a stop string are searched non-overlapping (resuming after a match), "
          "missing one that overlaps an earlier, already-too-old occurrence.",
          "            start = text.find(s, start + 1)\n",
          "            start = text.find(s, start + len(s))\n"),
    Patch("pending_replaced_at_length",
          "At a length finish the pending UTF-8 tail is decoded as U+FFFD instead of dropped.",
          '            return self._finish(n, text, "length", None)\n',
          '            return self._finish(n, data.decode("utf-8", errors="replace"), "length", None)\n'),
    Patch("pending_ignores_second_byte_range",
          "The pending-tail test ignores Table 3-7's second-byte range: e.g. E0 80 or ED A0 is "
          "held as pending instead of decoding to U+FFFD.",
          "        if k >= 2 and not lo <= data[-k + 1] <= hi:\n",
          "        if False:\n"),
    Patch("single_stop_string_split",
          "A single stop string is not wrapped in a tuple: 'ab' becomes the stop strings 'a' and 'b'.",
          "        stop = (self.stop,) if isinstance(self.stop, str) else self.stop\n",
          "        stop = self.stop\n"),
    Patch("min_equal_max_rejected",
          "min_tokens == max_tokens is rejected (>= for >), though it is legal.",
          "        if self.max_tokens is not None and self.min_tokens > self.max_tokens:\n",
          "        if self.max_tokens is not None and self.min_tokens >= self.max_tokens:\n"),
]
