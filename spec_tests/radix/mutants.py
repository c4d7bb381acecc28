"""Planted bugs of `radix` (each must make a radix test fail). All patch the tree,
optimized/radix.py: the reference is a naive store with no tree to get wrong."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("split_loses_tail",
          "A split does not hang the old node (the rest of the run) under the new one: the tail of "
          "the edge, and everything below it, is lost.",
          "        new.children[k[m:m + self._page_bytes]] = child\n",
          "", module="optimized"),
    Patch("evict_locked_leaf",
          "lock does not take the node out of the eviction candidates: a locked leaf is evicted.",
          "                self._protected += len(node.key) >> 2\n                self._leaves.discard(node)\n",
          "                self._protected += len(node.key) >> 2\n", module="optimized"),
    Patch("evict_locked_parent",
          "A parent left without children joins the candidates even when it is locked.",
          "                elif parent.lock == 0:\n",
          "                else:\n", module="optimized"),
    Patch("unlock_wrong_path",
          "unlock decrements the path from the handle's parent up: the handle's own node stays "
          "protected and its ancestors lose a lock they still hold.",
          "        node.held -= 1\n        while node.parent is not None:\n",
          "        node.held -= 1\n        node = node.parent\n        while node.parent is not None:\n", module="optimized"),
    Patch("unlock_unchecked",
          "unlock does not check that the handle holds a lock (as SGLang's dec_lock_ref): "
          "unlocking an ancestor releases a lock taken below it.",
          "        if node.held == 0:\n",
          "        if False:\n", module="optimized"),
    Patch("match_not_page_truncated",
          "Where a walk stops inside a run, the common prefix is not rounded down to whole pages: "
          "matches (and splits) end mid-page.",
          "            m -= m % page           # whole pages only\n",
          "", module="optimized"),
    Patch("clock_not_refreshed_on_match",
          "match_prefix does not touch the nodes it matched: a prefix that is read all the time but "
          "never re-inserted looks unused to LRU.",
          "        for nd in path:\n            touch(nd, now)\n        if not path:\n",
          "        if not path:\n", module="optimized"),
    Patch("insert_returns_new_count",
          "insert returns how many tokens it added instead of how many were already cached (the "
          "caller frees the wrong slots).",
          "        return pos >> 2\n",
          "        return (len(q) - pos) >> 2\n", module="optimized"),
    Patch("extra_key_ignored",
          "insert ignores the extra key: every sequence lands in the default namespace, so a "
          "request of another adapter (or cache salt) hits it.",
          "        s = self._slots(slots, len(tokens))\n        check_extra_key(extra_key)\n",
          "        s = self._slots(slots, len(tokens))\n        check_extra_key(extra_key)\n        extra_key = None\n", module="optimized"),
    Patch("parent_not_candidate",
          "A parent that becomes an unlocked leaf is not pushed onto this call's heap: evict(n) "
          "stops short of n while evictable tokens remain.",
          "                    heappush(heap, (priority(parent), count, parent))\n",
          "", module="optimized"),
    Patch("evict_most_recent",
          "evict takes the candidate with the largest priority: most recently used first.",
          "            nd = heappop(heap)[2]\n",
          "            top = max(heap)\n            heap.remove(top)\n            heapify(heap)\n            nd = top[2]\n", module="optimized"),
    Patch("clock_ticks_before_checks",
          "match_prefix advances the clock before checking extra_key: a rejected call still counts "
          "as a time step, which shifts the hybrid policy's order.",
          "        q = self._tokens(tokens)\n        if not (extra_key is None or type(extra_key) is str):\n"
          "            check_extra_key(extra_key)\n        self._clock += 1\n",
          "        self._clock += 1\n        q = self._tokens(tokens)\n"
          "        if not (extra_key is None or type(extra_key) is str):\n            check_extra_key(extra_key)\n", module="optimized"),
    Patch("split_drops_history",
          "A split gives the new node a fresh access record (as SGLang's _split_node does) instead "
          "of the old node's: under LFU a hot prefix looks cold once split off.",
          "        self.policy.copy(child, new)\n",
          "        self.policy.touch(new, self._clock)\n", module="optimized"),
    Patch("split_forgets_locks",
          "A split gives the new node a lock count of 0 instead of the old node's: the path above a "
          "locked handle loses its protection when a later call splits it.",
          "        new.lock = child.lock  # the locks below it; it holds none itself\n",
          "        new.lock = 0\n", module="optimized"),
    # found by the bounded-exhaustive exploration (test_exhaustive.py), missed by the random tests
    Patch("split_copies_held",
          "A split copies the old node's own locks to the new node above it (its lock count and its "
          "held count alike): unlocking a match of the upper half then succeeds, releasing a lock "
          "that was taken below it.",
          "        new.lock = child.lock  # the locks below it; it holds none itself\n",
          "        new.lock = child.lock\n        new.held = child.held\n", module="optimized"),
    # found by a blind bug hunt (realistic slips written without reading this file)
    Patch("match_touches_last_node_only",
          "match_prefix touches only the node the walk ends at, not every node of its path: under LRU "
          "this is invisible (a parent is used whenever its child is), under LFU a shared parent "
          "counts too few uses and is evicted before a leaf used less often than its subtree.",
          "        touch, now = self.policy.touch, self._clock\n        for nd in path:\n            touch(nd, now)\n"
          "        if not path:\n            return MatchResult(0, array(\"q\"), self._empty)\n",
          "        if not path:\n            return MatchResult(0, array(\"q\"), self._empty)\n"
          "        self.policy.touch(node, self._clock)\n", module="optimized"),
]
