"""Planted bugs of `routing` (each must make a routing test fail)."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("load_cap_strict",
          "The load cap compared with < instead of <=: a replica exactly load_cap above the least-loaded "
          "(which the cap allows) is refused, so a session or a cached prefix leaves it one request early.",
          "        return self.load_cap is None or self._loads[r] <= min(self._loads) + self.load_cap\n",
          "        return self.load_cap is None or self._loads[r] < min(self._loads) + self.load_cap\n"),
    Patch("least_loaded_ties_to_last",
          "Least-loaded breaks ties to the last replica (scans the replicas from the end), not the lowest index.",
          "        return min(range(len(self._loads)), key=lambda r: self._loads[r])   # min keeps the first of equals\n",
          "        return min(reversed(range(len(self._loads))), key=lambda r: self._loads[r])\n"),
    Patch("cache_not_updated",
          "The chosen replica's cache is probed but not updated after routing: nothing is ever cached, "
          "so no later request hits and cache-aware routing sees no prefix.",
          "        cache.insert(list(prompt), slots)\n",
          "        pass\n"),
    Patch("hit_in_blocks",
          "The cached prefix is counted in blocks where tokens are meant (block_size > 1): hit tokens "
          "are divided by the block size.",
          "        hit = cache.match_prefix(list(prompt[:-1])).length\n",
          "        hit = cache.match_prefix(list(prompt[:-1])).length // self.block_size\n"),
    Patch("round_robin_counts_rejected",
          "Round-robin's counter advances on a rejected request (an id already in flight): the next "
          "accepted request skips a replica.",
          "        if request_id in self._in_flight:\n            raise ValueError(",
          "        if request_id in self._in_flight:\n            self._turn += 1\n            raise ValueError("),
    Patch("session_cleared_on_complete",
          "The session table forgets a session when its request completes: the next turn of the "
          "conversation is routed as new (least-loaded), away from its cached history.",
          "        r, session = self._in_flight.pop(request_id)\n",
          "        r, session = self._in_flight.pop(request_id)\n        self._sessions.pop(session, None)\n"),
    Patch("session_ignores_cap",
          "Session affinity sticks to the session's replica whatever its load: the load cap is not applied.",
          "            if r is not None and self._allowed(r):\n",
          "            if r is not None:\n"),
    Patch("cache_aware_ties_to_lowest_index",
          "Cache-aware breaks ties between equal cached prefixes by index only, not by the smaller load "
          "first: with no prefix anywhere it piles onto replica 0 up to the cap.",
          "        return min(allowed, key=lambda r: (-match[r], self._loads[r], r))\n",
          "        return min(allowed, key=lambda r: (-match[r], r))\n"),
    Patch("cache_aware_ignores_cap",
          "Cache-aware takes the longest cached prefix among all replicas: the load cap is computed but not applied.",
          "        allowed = [r for r in range(len(self._caches)) if self._allowed(r)]\n",
          "        allowed = list(range(len(self._caches)))\n"),
    Patch("cache_aware_matches_whole_prompt",
          "Cache-aware ranks replicas by the cached prefix of the whole prompt, last token included, "
          "not by what would be served from cache (prompt[:-1]).",
          "        match = [c.match_prefix(list(prompt[:-1])).length for c in self._caches]\n",
          "        match = [c.match_prefix(list(prompt)).length for c in self._caches]\n"),
    Patch("capacity_over_all_replicas",
          "Evicts the chosen replica down to capacity / num_replicas tokens, as if the capacity were "
          "the fleet's, not each replica's.",
          "            cache.evict(cache.total - self.capacity)\n",
          "            cache.evict(cache.total - self.capacity // len(self._caches))\n"),
    Patch("completes_strictly_before",
          "The simulator completes only requests that finished strictly before the arrival: one finishing "
          "exactly at the arrival still counts as load.",
          "        for j in sorted((j for j in running if finish[j] <= arrival), key=lambda j: (finish[j], j)):\n",
          "        for j in sorted((j for j in running if finish[j] < arrival), key=lambda j: (finish[j], j)):\n"),
    Patch("no_queueing",
          "The simulator starts every request at its arrival: a replica serves its queue in parallel, "
          "so queueing is always 0.",
          "        start[i] = max(arrival, free[r])\n",
          "        start[i] = arrival\n"),
    Patch("service_ignores_hits",
          "The service time prefills the whole prompt: cached tokens are not subtracted.",
          "        finish[i] = free[r] = start[i] + cost.a + cost.b * (len(prompt) - hit) + cost.d * out_tokens\n",
          "        finish[i] = free[r] = start[i] + cost.a + cost.b * len(prompt) + cost.d * out_tokens\n"),
]
