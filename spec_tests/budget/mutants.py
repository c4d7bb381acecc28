"""Planted bugs of `budget` (each must make a test fail): the slips of a thinking budget, of s1's
budget forcing and of its interplay with stopping."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("ceiling_off_by_one", "The ceiling is checked with > instead of ==: one thinking token past the budget.",
          "        elif self.phase == THINKING and self.thinking_tokens == b.max_thinking_tokens:   # 2. the ceiling\n",
          "        elif self.phase == THINKING and b.max_thinking_tokens is not None "
          "and self.thinking_tokens > b.max_thinking_tokens:\n"),
    Patch("ceiling_yields_to_end", "At the ceiling a proposed end of thinking is taken as the model's own: "
          "no forced end, no answer prefix.",
          "        elif self.phase == THINKING and self.thinking_tokens == b.max_thinking_tokens:   # 2. the ceiling\n",
          "        elif self.phase == THINKING and self.thinking_tokens == b.max_thinking_tokens "
          "and token_id != b.end_think_id:\n"),
    Patch("end_id_hard_coded", "The model's own end of thinking recognised by a hard-coded id (1, the id of the "
          "tests' own budgets, as a Qwen3 port hard-codes 151668) instead of budget.end_think_id.",
          "        elif self.phase == THINKING and token_id == b.end_think_id:\n",
          "        elif self.phase == THINKING and token_id == 1:\n"),
    Patch("no_answer_prefix", "The forced end of thinking is not followed by the answer prefix.",
          "            self._queue = list(b.answer_prefix_ids)\n", "            self._queue = []\n"),
    Patch("prefix_after_natural_end", "The answer prefix is also appended after the model's own end of thinking.",
          "                token, forced = token_id, False                           # 4. the model's own end\n",
          "                token, forced = token_id, False\n                self._queue = list(b.answer_prefix_ids)\n"),
    Patch("wait_at_floor", "A Wait is inserted at the floor too (<= instead of <): one Wait too many.",
          "            if self.thinking_tokens < b.min_thinking_tokens and",
          "            if self.thinking_tokens <= b.min_thinking_tokens and"),
    Patch("one_wait_too_many", "max_waits compared with <=: one suppression more than allowed.",
          "(b.max_waits is None or self.waits < b.max_waits):\n",
          "(b.max_waits is None or self.waits <= b.max_waits):\n"),
    Patch("wait_not_counted", "The tokens of a Wait after its first are not counted as thinking tokens.",
          "            token, forced = self._queue.pop(0), True\n            if self.phase == THINKING:\n"
          "                self.thinking_tokens += 1\n",
          "            token, forced = self._queue.pop(0), True\n"),
    Patch("eos_taken_for_end", "The loop treats an EOS proposed while thinking as an end of thinking (a Wait may replace it).",
          "        step = forcer.step(proposal)\n",
          "        step = forcer.step(b.end_think_id if proposal == eos_token_id and forcer.phase == THINKING else proposal)\n"),
    Patch("model_skipped_when_forced", "The loop does not call the model at forced steps (the contract: one call per step).",
          "        proposal = model(list(tokens))\n",
          "        proposal = model(list(tokens)) if forcer.next_forced is None else forcer.next_forced\n"),
    Patch("model_sees_live_list", "The model is given the loop's own list of tokens, which it can change.",
          "        proposal = model(list(tokens))\n", "        proposal = model(tokens)\n"),
]
