"""Planted bugs of `parallel_sampling` (each must make a test fail): the slips of sharing a prompt's
KV between branches -- data that does not follow the blocks, branches that share randomness, and
memory counted as if nothing were shared."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("cow_skips_data", "Copy-on-write remaps the block table but never copies the K/V: the copy "
          "block holds stale data where the prompt's last tokens should be.",
          "        for src, dst in copies:\n            self.k_pool[:, dst] = self.k_pool[:, src]\n"
          "            self.v_pool[:, dst] = self.v_pool[:, src]\n",
          "        pass\n"),
    Patch("cow_copies_one_layer", "Copy-on-write copies the first layer's K/V only.",
          "            self.k_pool[:, dst] = self.k_pool[:, src]\n            self.v_pool[:, dst] = self.v_pool[:, src]\n",
          "            self.k_pool[0, dst] = self.k_pool[0, src]\n            self.v_pool[0, dst] = self.v_pool[0, src]\n"),
    Patch("fork_copies_prompt", "fork gives the child its own copy of every block (no sharing): correct "
          "tokens, but the memory of n independent runs.",
          "        self.allocator.fork(parent, child)\n",
          "        self.add(child, *self.read(parent))\n"),
    Patch("free_scrubs_blocks", "free zeroes the K/V of every block of the freed table, shared ones "
          "included, before giving them back.",
          "    def free(self, seq) -> None:\n        self.allocator.free(seq)\n",
          "    def free(self, seq) -> None:\n        for block in self.allocator.block_table(seq):\n"
          "            self.k_pool[:, block] = 0\n            self.v_pool[:, block] = 0\n"
          "        self.allocator.free(seq)\n"),
    Patch("shared_generator", "Every branch draws from branch 0's generator: the branches are not "
          "independent runs with their own seeds.",
          "            tokens[b].append(_draw(sample_fn, step[b], generators[b], c.vocab_size))\n",
          "            tokens[b].append(_draw(sample_fn, step[b], generators[0], c.vocab_size))\n"),
    Patch("seed_by_branch_index", "Branch i's generator is seeded with i, not with seeds[i].",
          "    generators = [torch.Generator().manual_seed(s) for s in seeds]\n",
          "    generators = [torch.Generator().manual_seed(b) for b in range(n)]\n"),
    Patch("first_token_shared", "The first token is sampled once, before the fork, and every branch "
          "starts with it.",
          "            tokens[b].append(_draw(sample_fn, step[b], generators[b], c.vocab_size))\n",
          "            tokens[b].append(tokens[0][0] if t == 0 and b else _draw(sample_fn, step[b], generators[b], "
          "c.vocab_size))\n"),
    Patch("view_drops_new_token", "A step's attention reads the cached positions but not the new ones "
          "(the K/V just written are not gathered back).",
          "        blocks, slots = self.kv._slots(self.seq, 0, start + n)\n",
          "        blocks, slots = self.kv._slots(self.seq, 0, max(start, 1))\n"),
    Patch("in_use_counts_per_branch", "blocks_in_use counts every branch's table in full: the shared "
          "prompt blocks once per branch.",
          "        in_use.append(kv.blocks_in_use)\n",
          "        in_use.append(sum(len(kv.block_table(b)) for b in range(n)))\n"),
    Patch("pool_check_off_by_one", "The pool-size check accepts one block fewer than the run needs (it "
          "then runs out of blocks mid-run, with an error that does not name num_blocks).",
          "    if num_blocks < need:\n", "    if num_blocks < need - 1:\n"),
    Patch("shared_counts_partial_once", "shared_blocks counts the prompt's partial block as shared "
          "(ceil instead of floor): the copies every writing branch makes are forgotten.",
          "    full = p // b\n    grown = [k for k in ks if k > 0]\n    own = ",
          "    full = blocks_for(p, b)\n    grown = [k for k in ks if k > 0]\n    own = "),
    Patch("silent_branch_ignored", "shared_blocks forgets the original partial block that a branch "
          "that never wrote still holds.",
          "    return full + own + (1 if p % b and len(grown) < len(ks) else 0)\n",
          "    return full + own\n"),
    Patch("copies_for_every_branch", "copy_on_write_count counts a copy for every writing branch, the "
          "last holder (which writes in place) included.",
          "    return grown - (grown == len(ks)) if p % b else 0\n", "    return grown if p % b else 0\n"),
    Patch("independent_floor", "independent_blocks rounds each branch's blocks down (a partial block is "
          "not a block).",
          "    return sum(blocks_for(p + k, b) for k in ks)\n", "    return sum((p + k) // b for k in ks)\n"),
]
