"""Planted bugs of `kv_tiers` (each must make a kv_tiers test fail): the slips of 07.04-07.06."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("demote_to_lru_end", "A block pushed down a tier enters it as its LEAST recently used (next to go), "
          "not its most recently used.",
          "                    orders[t + 1].append(victim)\n",
          "                    orders[t + 1].insert(0, victim)\n"),
    Patch("evict_mru", "The cascade pushes out a tier's most recently used block instead of its least.",
          "                victim = orders[t].pop(0)\n",
          "                victim = orders[t].pop()\n"),
    Patch("get_no_touch", "A get of a block already in hbm does not refresh its recency.",
          "            self._tiers[HBM].move_to_end(key)\n",
          "            pass\n"),
    Patch("disk_via_float32", "The disk tier stores values, not bits: a block is written through float32 "
          "(numpy has no bfloat16), which canonicalises NaN payloads and rounds nothing else.",
          "                f.write(raw[:half].cpu().numpy().tobytes())\n",
          "                source = source.float().to(meta[0]) if source.is_floating_point() else source\n"
          "                raw = _bytes_of(source.contiguous())\n"
          "                f.write(raw[:half].cpu().numpy().tobytes())\n"),
    Patch("fault_half_committed", "A faulted operation keeps the LRU orders it planned (committed before the "
          "copies): a block is listed where its bytes never arrived.",
          "        orders, transfers, dropped = self._plan(key, src, dst)\n",
          "        orders, transfers, dropped = self._plan(key, src, dst)\n"
          "        self._tiers = [OrderedDict((k, self._tiers[i].get(k, next((t[k] for t in self._tiers if k in t), data)))\n"
          "                                   for k in order) for i, order in enumerate(orders)]\n"),
    Patch("fault_leaves_partial_file", "A faulted disk write leaves its half-written temporary file in the "
          "directory.",
          "            for name in staged_files:\n                (self.directory / name).unlink(missing_ok=True)\n            raise\n",
          "            raise\n"),
    Patch("reload_skips_host_count", "A reload from disk is counted as one transfer disk -> host, its host -> "
          "hbm bytes forgotten.",
          '                moved[f"{TIERS[a]}->{TIERS[b]}"] += self._nbytes(meta_of[k])\n',
          '                if not (k == key and a == HOST and b == HBM and src == DISK):\n'
          '                    moved[f"{TIERS[a]}->{TIERS[b]}"] += self._nbytes(meta_of[k])\n'),
    Patch("capacity_off_by_one", "A tier is allowed one block more than its capacity (> capacity + 1).",
          "            while len(orders[t]) > self.capacities[t]:\n",
          "            while len(orders[t]) > self.capacities[t] + 1:\n"),
    Patch("kv_bytes_k_only", "The reload moves only the keys: 1 x layers x kv_heads x head_dim per token, "
          "not 2 (K and V).",
          "    return 2 * c.n_layers * c.n_kv_heads * c.head_dim * torch.empty((), dtype=c.dtype).element_size()\n",
          "    return c.n_layers * c.n_kv_heads * c.head_dim * torch.empty((), dtype=c.dtype).element_size()\n"),
    Patch("recompute_linear_only", "Recompute priced at 2 x parameters FLOPs per token, the attention over the "
          "prefix (quadratic in its length) forgotten.",
          "    return Fraction(forward_flops(c, batch=1, new_tokens=tokens), 1) / rate if tokens else Fraction(0)\n",
          "    linear = forward_flops(c, batch=1, new_tokens=1) - 4 * c.n_layers * c.n_heads * c.head_dim\n"
          "    return Fraction(linear * tokens, 1) / rate\n"),
    Patch("reload_ignores_latency", "The crossover compares bandwidth terms only: the reload's fixed latency is "
          "dropped.",
          "        return _reload(c, n, bw, lat) <= _recompute(c, n, rate)\n",
          "        return _reload(c, n, bw, Fraction(0)) <= _recompute(c, n, rate)\n"),
    Patch("crossover_off_by_one", "The crossover returns the last length where recompute still wins (one short).",
          "    return hi\n", "    return max(1, lo)\n"),
]
