"""Planted bugs of `scheduler` (each must make a scheduler test fail)."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("preempt_oldest",
          "a running request that cannot get blocks preempts the oldest running request (the front "
          "of running) instead of the newest.",
          "victim = self.requests[self._running.pop()]",
          "victim = self.requests[self._running.pop(0)]"),
    Patch("token_budget_off_by_one",
          "the per-step token budget starts at max_num_batched_tokens + 1 (a '<=' written as '<').",
          "budget = self.max_num_batched_tokens\n",
          "budget = self.max_num_batched_tokens + 1\n"),
    Patch("finish_leaks_blocks",
          "a finished request leaves running but its blocks are never returned to the pool.",
          "            self._running.remove(rid)\n            self.pool.free(req.blocks)\n",
          "            self._running.remove(rid)\n"),
    Patch("recompute_prompt_only",
          "admission schedules the prompt's uncomputed tokens, not the request's: a preempted request "
          "resumes by recomputing its prompt and leaves its generated tokens for later steps.",
          "n = req.num_tokens - hit_tokens",
          "n = len(req.prompt) - hit_tokens"),
    Patch("admits_past_max_num_seqs",
          "admission checks the running count with '<=': one request more than max_num_seqs runs.",
          "len(self._running) < self.max_num_seqs",
          "len(self._running) <= self.max_num_seqs"),
    Patch("admits_after_preemption",
          "waiting requests are admitted even in a step that preempted a running request (they take "
          "the blocks just freed from the requests already running).",
          "        if not out.preempted:\n",
          "        if True:\n"),
    Patch("preempted_to_back",
          "a preempted request goes to the back of the waiting queue instead of the front.",
          "self._waiting.insert(0, req.request_id)",
          "self._waiting.append(req.request_id)"),
    Patch("eviction_keeps_hash",
          "a cached free block handed out again keeps its key in the cache: a later request hits a "
          "block that now holds another prefix's KV.",
          "        if key is not None:  # evicted: its slot is reused\n            del self.cache[key]\n",
          "        pass\n"),
    Patch("hit_not_capped",
          "a prefix-cache hit may cover the whole prompt: the last prompt token is not recomputed, so "
          "no logits are there to sample from.",
          "range((len(tokens) - 1) // self.block_size)",
          "range(len(tokens) // self.block_size)"),
]
