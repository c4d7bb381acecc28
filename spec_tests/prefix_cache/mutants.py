"""Planted bugs of `prefix_cache` (each must make a prefix_cache test fail)."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("hash_not_chained",
          "A block's key is its own tokens only, not its parent's hash: the same block content at "
          "another position, or after another parent, hits.",
          "        return (extra_key, tokens[:(i + 1) * self.block_size])\n",
          "        return (extra_key, tokens[i * self.block_size:(i + 1) * self.block_size])\n"),
    Patch("extra_key_ignored",
          "The extra key (adapter id, cache salt) is left out of the hash: a prompt cached under "
          "one adapter hits under another.",
          "        return (extra_key, tokens[:(i + 1) * self.block_size])\n",
          "        return (None, tokens[:(i + 1) * self.block_size])\n"),
    Patch("last_token_from_cache",
          "Hits may cover the whole prompt: a fully cached prompt of whole blocks computes nothing, "
          "so there are no logits for its last token.",
          "        max_blocks = (len(tokens) - 1) // self.block_size",
          "        max_blocks = len(tokens) // self.block_size"),
    Patch("partial_block_cached",
          "mark_computed caches the partly filled last block too (rounds the block count up).",
          "        full = n_tokens // self.block_size\n",
          "        full = -(-n_tokens // self.block_size)\n"),
    Patch("free_head_first",
          "free queues a sequence's blocks first block first: eviction takes the chain's head and "
          "leaves its cached tail orphaned (unreachable, yet holding a slot).",
          "        for b in reversed(table):\n            self.refs[b] -= 1",
          "        for b in table:\n            self.refs[b] -= 1"),
    Patch("evict_most_recently_freed",
          "Allocation takes the free queue's tail (most recently freed) instead of its head.",
          "            b = self.free_queue.pop(0)         # least recently freed",
          "            b = self.free_queue.pop()"),
    Patch("evicted_hash_kept",
          "A cached free block handed out again keeps its cache entry: a later lookup hits a block "
          "that now holds another sequence's tokens.",
          "            key = self.block_key.pop(b, None)\n            if key is not None:                # evicted: its slot is reused\n                del self.cache[key]\n",
          "            key = None\n"),
    Patch("revived_hits_not_counted",
          "The capacity check counts the misses only, not the free cached blocks a hit takes off "
          "the queue: an allocation that cannot fit is accepted (and fails half way).",
          "        if need + revived > len(self.free_queue):",
          "        if need > len(self.free_queue):"),
]

# Found by the bounded-exhaustive exploration and the law scenarios (issue 22): slips the random
# state machine missed on fresh seeds.
MUTANTS += [
    Patch("key_by_position_not_parent",
          "A block's key is its position and its own tokens, not the prefix it ends: blocks cached by "
          "two different prompts combine into a hit for a third that neither computed.",
          "        return (extra_key, tokens[:(i + 1) * self.block_size])\n",
          "        return (extra_key, i, tokens[i * self.block_size:(i + 1) * self.block_size])\n"),
    Patch("hits_skip_missing_blocks",
          "The hit walk skips a block whose key is not cached instead of stopping there: a cached "
          "block after an evicted parent is served, with the parent's KV missing.",
          "            if block is None:\n                break\n",
          "            if block is None:\n                continue\n"),
    Patch("duplicate_overwrites_key",
          "mark_computed of a block whose key another block holds moves the key to the new block "
          "but leaves the old block marked cached: evicting the old block later drops the key the "
          "new block holds, and a block said to be cached no longer hits.",
          "            if b in self.block_key or key in self.cache:\n",
          "            if b in self.block_key:\n"),
]
