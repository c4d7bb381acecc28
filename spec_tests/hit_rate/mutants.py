"""Planted bugs of `hit_rate` (each must make a hit_rate test fail)."""
from conformance.mutants import Patch

F = "reference/hit_rate.py"

MUTANTS = [
    Patch("last_token_from_cache",
          "Matches the whole prompt, last token included: a fully cached prompt counts every token "
          "as a hit, though its last token must be computed for its logits.",
          F,
          "        return self.cache.match_prefix(list(prompt[:-1])).length\n",
          "        return self.cache.match_prefix(list(prompt)).length\n"),
    Patch("evicted_prefixes_hit",
          "Never evicts: the capacity is ignored, so prefixes that a cache of that size would have "
          "evicted still count as hits.",
          F,
          "        if self.capacity is not None and self.cache.total > self.capacity:\n",
          "        if False:\n"),
    Patch("capacity_zero_unbounded",
          "Tests the capacity for truth instead of against None: capacity 0 (cache nothing) "
          "means unbounded.",
          F,
          "        if self.capacity is not None and self.cache.total > self.capacity:\n",
          "        if self.capacity and self.cache.total > self.capacity:\n"),
    Patch("lru_not_refreshed",
          "The eviction clock is not refreshed on a hit: a prefix keeps the time it was first "
          "cached (FIFO), so a hot system prompt is evicted before a cold one-off prompt.",
          F,
          "        return RadixCache(page_size=block_size)\n",
          "        from reference.eviction import LRU\n\n"
          "        class FirstAccess(LRU):\n"
          "            def touch(self, key, now):\n"
          "                if key not in self._records:\n"
          "                    super().touch(key, now)\n\n"
          "        return RadixCache(page_size=block_size, policy=FirstAccess())\n"),
    Patch("request_rate_over_tokens",
          "The request-level hit rate divides the requests that hit by the prompt tokens instead "
          "of by the requests.",
          F,
          '        "request_hit_rate": hit_requests / len(prompts) if prompts else 0.0,\n',
          '        "request_hit_rate": hit_requests / prompt_tokens if prompts else 0.0,\n'),
    Patch("saved_time_linear",
          "Time saved counts the per-token (dense) cost of the hit tokens only, not the attention "
          "among them, which grows with the square of the hit length.",
          F,
          "    return prefill_time(L, 0, cost) - prefill_time(L - h, h, cost)\n",
          "    return cost.b * h\n"),
    Patch("attention_ignores_cached_context",
          "The prefill's attention term counts the new tokens among themselves only, not their "
          "attention to the cached prefix.",
          F,
          "    return a + b * n + c * (n * k + n * (n + 1) / 2)\n",
          "    return a + b * n + c * (n * (n + 1) / 2)\n"),
    Patch("fcfs_by_index",
          "FCFS serves requests in list order, not arrival order.",
          F,
          "        by_arrival = sorted(arrived, key=lambda i: (reqs[i][0], i))\n",
          "        by_arrival = sorted(arrived)\n"),
    Patch("lpm_shortest_first",
          "The cache-aware policy sorts the wrong way: shortest cached prefix first.",
          F,
          "            pick = min(by_arrival, key=lambda i: -match[i])   # min keeps the first of equals\n",
          "            pick = min(by_arrival, key=lambda i: match[i])\n"),
    Patch("response_from_start",
          "Response time measured from the start of service, not from arrival: queueing is left out.",
          F,
          "    response = [finish[i] - reqs[i][0] for i in range(n)]\n",
          "    response = [finish[i] - start[i] for i in range(n)]\n"),
]
