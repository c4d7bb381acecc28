"""Planted bugs of `hit_rate` (each must make a hit_rate test fail)."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("last_token_from_cache",
          "Matches the whole prompt, last token included: a fully cached prompt counts every token "
          "as a hit, though its last token must be computed for its logits.",
          "        return self.cache.match_prefix(list(prompt[:-1])).length\n",
          "        return self.cache.match_prefix(list(prompt)).length\n"),
    Patch("evicted_prefixes_hit",
          "Never evicts: the capacity is ignored, so prefixes that a cache of that size would have "
          "evicted still count as hits.",
          "        if self.capacity is not None and self.cache.total > self.capacity:\n",
          "        if False:\n"),
    Patch("capacity_zero_unbounded",
          "Tests the capacity for truth instead of against None: capacity 0 (cache nothing) "
          "means unbounded.",
          "        if self.capacity is not None and self.cache.total > self.capacity:\n",
          "        if self.capacity and self.cache.total > self.capacity:\n"),
    Patch("lru_not_refreshed",
          "The eviction clock is not refreshed on a hit: a prefix keeps the time it was first "
          "cached (FIFO), so a hot system prompt is evicted before a cold one-off prompt.",
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
          '        "request_hit_rate": hit_requests / len(prompts) if prompts else 0.0,\n',
          '        "request_hit_rate": hit_requests / prompt_tokens if prompts else 0.0,\n'),
    Patch("saved_time_linear",
          "Time saved counts the per-token (dense) cost of the hit tokens only, not the attention "
          "among them, which grows with the square of the hit length.",
          "    return prefill_time(L, 0, cost) - prefill_time(L - h, h, cost)\n",
          "    return cost.b * h\n"),
    Patch("attention_ignores_cached_context",
          "The prefill's attention term counts the new tokens among themselves only, not their "
          "attention to the cached prefix.",
          "    return a + b * n + c * (n * k + n * (n + 1) / 2)\n",
          "    return a + b * n + c * (n * (n + 1) / 2)\n"),
    Patch("fcfs_by_index",
          "FCFS serves requests in list order, not arrival order.",
          "        by_arrival = sorted(arrived, key=lambda i: (reqs[i][0], i))\n",
          "        by_arrival = sorted(arrived)\n"),
    Patch("lpm_shortest_first",
          "The cache-aware policy sorts the wrong way: shortest cached prefix first.",
          "            pick = min(by_arrival, key=lambda i: -match[i])   # min keeps the first of equals\n",
          "            pick = min(by_arrival, key=lambda i: match[i])\n"),
    Patch("response_from_start",
          "Response time measured from the start of service, not from arrival: queueing is left out.",
          "    response = [finish[i] - reqs[i][0] for i in range(n)]\n",
          "    response = [finish[i] - start[i] for i in range(n)]\n"),
    # --- probes (round 2) ---
    Patch("lpm_ties_by_index",
          "LPM breaks ties between equal cached prefixes by list position instead of by arrival "
          "(then index).",
          "            pick = min(by_arrival, key=lambda i: -match[i])   # min keeps the first of equals\n",
          "            pick = min(sorted(arrived), key=lambda i: -match[i])\n"),
    Patch("lpm_ranks_whole_prompt",
          "LPM ranks waiting requests by the cached prefix of the WHOLE prompt, last token included, "
          "not by what would be served from cache (prompt[:-1]).",
          "            match = {i: server.probe(reqs[i][1]) for i in sorted(arrived)}\n",
          "            match = {i: server.cache.match_prefix(list(reqs[i][1])).length for i in sorted(arrived)}\n"),
    Patch("lpm_probes_do_not_refresh",
          "LPM's ranking probes are side-effect free peeks (on a copy of the cache): unlike SGLang's, "
          "they do not refresh the LRU clock of what they match.",
          "            match = {i: server.probe(reqs[i][1]) for i in sorted(arrived)}\n",
          "            match = {i: __import__('copy').deepcopy(server.cache).match_prefix(list(reqs[i][1][:-1])).length\n"
          "                     for i in sorted(arrived)}\n"),
    Patch("cache_argument_ignored",
          "A cache passed as ``cache`` is validated but a fresh RadixCache is used instead.",
          "        raise ValueError(f\"cache has page_size {cache.page_size}, block_size is {block_size}\")\n    return cache\n",
          "        raise ValueError(f\"cache has page_size {cache.page_size}, block_size is {block_size}\")\n"
          "    return RadixCache(page_size=block_size)\n"),
    Patch("insert_without_last_token",
          "Caches only prompt[:-1] (as if the last token, never a hit, need not be cached): a later "
          "prompt that extends this one cannot hit its last token.",
          "        self.cache.insert(list(prompt), slots)\n",
          "        self.cache.insert(list(prompt[:-1]), slots[:-1])\n"),
    Patch("evict_one_extra",
          "Evicts total - capacity + 1 tokens (one more than needed): a cache exactly at capacity "
          "after a later insert loses an extra leaf.",
          "            self.cache.evict(self.cache.total - self.capacity)\n",
          "            self.cache.evict(self.cache.total - self.capacity + 1)\n"),
    Patch("throughput_from_zero",
          "Throughput over [0, last finish] instead of [first arrival, last finish].",
          "    span = max(finish, default=0.0) - min((r[0] for r in reqs), default=0.0)\n",
          "    span = max(finish, default=0.0)\n"),
    Patch("time_saved_rejects_max_hit",
          "time_saved rejects the largest legal hit, prompt_tokens - 1 (>= instead of >).",
          "    if h > L - 1:\n",
          "    if h >= L - 1:\n"),
    Patch("request_hit_needs_two_tokens",
          "A request counts as a hit only with more than one cached token (h > 1 instead of h >= 1).",
          "    hit_requests = sum(1 for h in hits if h >= 1)\n",
          "    hit_requests = sum(1 for h in hits if h > 1)\n"),
    # found by the bounded-exhaustive exploration (test_exhaustive.py), missed by the random tests
    Patch("evict_only_on_miss",
          "Evicts down to the capacity only after a miss: a hit whose new suffix takes the cache over "
          "capacity leaves it there, and a later request hits what should have been evicted.",
          "        if self.capacity is not None and self.cache.total > self.capacity:\n",
          "        if self.capacity is not None and self.cache.total > self.capacity and hit == 0:\n"),
    Patch("lpm_probes_unarrived",
          "LPM ranks (and so probes, refreshing their LRU clock) every pending request, those that "
          "have not arrived yet included: what they match survives an eviction it should not.",
          "            match = {i: server.probe(reqs[i][1]) for i in sorted(arrived)}\n",
          "            match = {i: server.probe(reqs[i][1]) for i in sorted(pending)}\n"),
    Patch("arrival_at_free_time_waits",
          "A request arriving exactly when the server frees up is not among the waiting ones (arrival "
          "< now) unless no other is: it is ranked a turn late.",
          "        arrived = [i for i in pending if reqs[i][0] <= now]\n",
          "        arrived = [i for i in pending if reqs[i][0] < now] or [i for i in pending if reqs[i][0] <= now][:1]\n"),
    # found by a blind bug hunt (realistic slips written without reading this file)
    Patch("lpm_probes_in_arrival_order",
          "LPM probes the waiting requests in arrival order instead of index order: the LRU clock "
          "of what two unchosen requests match is stamped in the other order, and the next eviction "
          "takes the other one.",
          "            match = {i: server.probe(reqs[i][1]) for i in sorted(arrived)}\n",
          "            match = {i: server.probe(reqs[i][1]) for i in by_arrival}\n"),
]
