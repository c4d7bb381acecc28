"""Planted bugs of `paged_attention` (each must make a paged_attention test fail).

The kernel mutants patch the real Triton source of optimized/paged_attention.py, so the bug runs
in the same kernel code (under the interpreter on CPU); the last one patches the reference."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("reads_past_seq_len",
          "The kernel's key mask is `keys <= stop` instead of `<`: it reads one slot past the end of "
          "its stretch (past seq_len in the last split: a slot the sequence does not own).",
          "            key_ok = (keys >= lo) & (keys < stop)\n",
          "            key_ok = (keys >= lo) & (keys <= stop)\n", module="optimized"),
    Patch("last_split_wrong_table",
          "The last split of every sequence reads the block table of the next sequence in the batch.",
          "        bt_row = BT + b64 * sbt_b\n",
          "        bt_row = BT + tl.where(pid_s == n_splits - 1, (off_b + 1) % tl.num_programs(2), off_b)"
          ".to(tl.int64) * sbt_b\n", module="optimized"),
    Patch("merge_averages_splits",
          "The split-KV merge averages the splits' partial outputs (equal weights for every non-empty "
          "split) instead of weighting each by its share of the softmax mass, 2^(lse_s - max).",
          "        w = tl.math.exp2(lse - m_use)                         # an empty split weighs 0\n",
          "        w = tl.where(lse == float(\"-inf\"), 0.0, 1.0)\n", module="optimized"),
    Patch("gqa_interleaved_heads",
          "GQA packing maps row r to query head (r % group) * kv_heads + kvh (heads interleaved across "
          "KV heads) instead of kvh * group + r % group.",
          "        head = off_kvh * group + rows % group\n",
          "        head = (rows % group) * tl.num_programs(1) + off_kvh\n", module="optimized"),
    Patch("drops_partial_last_block",
          "The reference gathers seq_len // block_size whole blocks, losing the tokens of a partial "
          "last block (the newest ones).",
          "        k = gather_cache(k_cache, block_tables[b], start, seq_len)\n"
          "        v = gather_cache(v_cache, block_tables[b], start, seq_len)\n",
          "        stop = seq_len // k_cache.shape[1] * k_cache.shape[1]\n"
          "        k = gather_cache(k_cache, block_tables[b], min(start, stop), stop)\n"
          "        v = gather_cache(v_cache, block_tables[b], min(start, stop), stop)\n"),
    Patch("default_scale_unscaled",
          "The kernel's entry point defaults to scale 1.0 (raw dot products, a `softmax_scale=1.0` "
          "default) instead of the contract's None = 1/sqrt(head_dim): right whenever the caller "
          "passes scale, even scale=None, wrong for every call that omits it.",
          "def paged_attention(q, k_cache, v_cache, block_tables, seq_lens, *, scale: float | None = None,\n",
          "def paged_attention(q, k_cache, v_cache, block_tables, seq_lens, *, scale: float | None = 1.0,\n", module="optimized"),
    Patch("reads_left_of_window",
          "The kernel walks the keys from position 0 and lets the window mask the scores only: the "
          "blocks wholly left of the window (which an engine frees and reuses) are read, and a "
          "masked score's p = 0 times a NaN value is NaN.",
          "        lo = tl.maximum(seq_len - q_len - left, 0)\n",
          "        lo = tl.maximum(seq_len - q_len - left, 0) * 0\n", module="optimized"),
    Patch("spec_queries_see_all",
          "Every speculative query gets the last query's position (pos = seq_len - 1): right for "
          "decode (q_len 1), but the first q_len - 1 draft tokens see the keys of the tokens after "
          "them.",
          "        pos = seq_len - q_len + qi                     # absolute position of each query\n",
          "        pos = seq_len - 1 + 0 * qi                     # absolute position of each query\n", module="optimized"),
    Patch("first_visible_plus_one",
          "The first position a windowed query can see is computed one too far right "
          "(seq_len - q_len - window + 1): the key at exactly `window` positions back is dropped.",
          "    return 0 if window is None else max(0, seq_len - q_len - window)\n",
          "    return 0 if window is None else max(0, seq_len - q_len - window + 1)\n"),
    Patch("block_id_eq_num_blocks",
          "A block id equal to num_blocks passes validation (`> num_blocks` for `>=`): one past the pool.",
          "    bad = used & ((table < 0) | (table >= num_blocks))\n",
          "    bad = used & ((table < 0) | (table > num_blocks))\n"),
    Patch("full_table_rejected",
          "A table row exactly as wide as its sequence needs is rejected as too short (`>=` for `>`).",
          "        if -(-n // block_size) > width:\n",
          "        if -(-n // block_size) >= width:\n"),
    Patch("lse_in_q_dtype",
          "lse is returned in q's dtype (float16/bfloat16) instead of float32.",
          "    lse = torch.full((batch, q_len, q_heads), float(\"-inf\"), dtype=compute_dtype(q.dtype), device=q.device)\n",
          "    lse = torch.full((batch, q_len, q_heads), float(\"-inf\"), dtype=q.dtype, device=q.device)\n"),
    Patch("scale_zero_as_default",
          "scale=0 (legal: uniform weights) is treated as 'not given' (`scale or None`), i.e. 1/sqrt(head_dim).",
          "                           causal=True, window=window, scale=scale, return_lse=True)\n",
          "                           causal=True, window=window, scale=scale or None, return_lse=True)\n"),
    # ---- the plan/run path (PagedAttentionPlan)
    Patch("plan_splits_for_planned_lengths",
          "The plan sizes the split-KV stretches for the lengths it was given, not for max_seq_len: "
          "a later run whose sequences grew (an engine's next decode steps, or a graph replay) "
          "leaves the keys past the planned stretch unread.",
          "        lens = [max_seq_len if window is None else min(max_seq_len, q_len + window + block_n - 1)]\n",
          "        lens = list(lens)\n", module="optimized"),
    Patch("run_reads_planned_lengths",
          "run attends over the lengths read at plan time (a copy kept by the plan) instead of "
          "seq_lens's values at run time: right until the engine writes the next step's lengths "
          "into the tensor.",
          "                          scale=scale, window=window, max_seq_len=max_seq_len)\n\n"
          "    def run(self, q, k_cache, v_cache, block_tables, seq_lens, *, return_lse: bool = False):\n",
          "                          scale=scale, window=window, max_seq_len=max_seq_len, lens=seq_lens.clone())\n\n"
          "    def run(self, q, k_cache, v_cache, block_tables, seq_lens, *, return_lse: bool = False):\n"
          "        seq_lens = self._plan[\"lens\"] if self._plan is not None else seq_lens\n"),
    Patch("failed_plan_forgets_previous",
          "plan drops the previous plan before validating the new one: a plan that raises leaves an "
          "object that can no longer run.",
          "        lens = check_paged_attention_inputs(q, k_cache, v_cache, block_tables, seq_lens, window, scale)\n"
          "        max_seq_len = check_max_seq_len(max_seq_len, lens, block_tables, k_cache)\n"
          "        self._plan = dict(",
          "        self._plan = None\n"
          "        lens = check_paged_attention_inputs(q, k_cache, v_cache, block_tables, seq_lens, window, scale)\n"
          "        max_seq_len = check_max_seq_len(max_seq_len, lens, block_tables, k_cache)\n"
          "        self._plan = dict("),
    Patch("run_trusts_the_tensors",
          "run skips the metadata check (it trusts the caller to pass the planned "
          "tensors): a q of another batch is launched on the planned grid.",
          "        check_run_metadata(p[\"meta\"], q, k_cache, v_cache, block_tables, seq_lens)\n"
          "        q4 = q.unsqueeze(1) if p[\"decode\"] else q\n",
          "        q4 = q.unsqueeze(1) if p[\"decode\"] else q\n", module="optimized"),
    Patch("max_seq_len_past_the_table",
          "plan accepts a max_seq_len longer than a table row can hold (the promise a run would break).",
          "    if max_seq_len > slots:\n",
          "    if max_seq_len > slots + 1:\n"),
]
