"""Planted bugs of `tensor_parallel` (each must make a test fail): the slips of a Megatron split."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("no_allreduce_after_mlp", "The MLP's down_proj partial sums are added to the residual without the "
          "all-reduce: each rank keeps only its own hidden features' share.",
          '            h = h + self._all_reduce(F.linear(act, w[p + "mlp.down_proj.weight"]))\n',
          '            h = h + F.linear(act, w[p + "mlp.down_proj.weight"])\n'),
    Patch("allreduce_includes_residual", "The all-reduce after o_proj sums the residual stream too: the "
          "replicated residual is counted world_size times.",
          '            h = h + self._all_reduce(F.linear(out, w[p + "self_attn.o_proj.weight"]))\n',
          '            h = self._all_reduce(h + F.linear(out, w[p + "self_attn.o_proj.weight"]))\n'),
    Patch("row_shard_takes_rows", "row_shard splits the weight's rows (dim 0, torch's `out`) like column_shard: "
          "the Megatron names read in torch's (out, in) layout the wrong way round.",
          "    return _shard(weight, rank, world_size, 1)\n", "    return _shard(weight, rank, world_size, 0)\n"),
    Patch("o_proj_column_sharded", "o_proj sharded by its output rows like q_proj, instead of by the input "
          "columns of the rank's heads (row-parallel).",
          '            out[name] = t[:, q_heads.start * hd:q_heads.stop * hd].contiguous().clone()\n',
          '            out[name] = t[q_heads.start * hd:q_heads.stop * hd].contiguous().clone()\n'),
    Patch("replicated_kv_head_by_modulo", "A replicated KV head chosen as rank % n_kv_heads: rank 1 of 4 with 2 KV "
          "heads gets head 1, but its query head reads head 0.",
          "        head = rank // (world_size // n_kv_heads)\n", "        head = rank % n_kv_heads\n"),
    Patch("allreduce_in_float32", "Partial sums upcast to float32 for the all-reduce: twice the bytes of a "
          "bf16/fp16 model on the wire.",
          "            dist.all_reduce(partial, op=dist.ReduceOp.SUM, group=self.group)\n",
          "            wide = partial.float()\n"
          "            dist.all_reduce(wide, op=dist.ReduceOp.SUM, group=self.group)\n"
          "            partial.copy_(wide)\n"),
    Patch("world_one_pays_allreduce", "The closed form charges a world of 1 the all-reduces it never makes.",
          "    if world_size == 1:\n        return 0\n    return 2 * config.n_layers", "    return 2 * config.n_layers"),
    Patch("one_allreduce_per_layer", "One all-reduce per layer counted (the MLP's forgotten).",
          "    return 2 * config.n_layers * config.dim * element_bytes(dtype)\n",
          "    return config.n_layers * config.dim * element_bytes(dtype)\n"),
    Patch("allreduce_bytes_ring_factor", "The bytes a ring all-reduce sends per rank, 2 (p-1)/p of the payload, "
          "reported as the bytes all-reduced.",
          "    return 2 * config.n_layers * config.dim * element_bytes(dtype)\n",
          "    return 2 * (world_size - 1) * config.n_layers * config.dim * element_bytes(dtype) // world_size\n"),
    Patch("cache_all_kv_heads", "Each rank's cache allocated for every KV head (the unsharded cache): the "
          "memory TP should divide is not divided.",
          "        return KVCache(layers=c.n_layers, batch=batch, kv_heads=len(self.kv_heads), head_dim=c.head_dim,\n",
          "        return KVCache(layers=c.n_layers, batch=batch, kv_heads=c.n_kv_heads, head_dim=c.head_dim,\n"),
    Patch("kv_divisibility_unchecked", "KV heads that neither divide nor are divided by world_size are not "
          "refused: each rank takes the block rank*K/p (floored), the wrong KV head for some of its queries.",
          '    raise ValueError(f"n_kv_heads ({n_kv_heads}) must be a multiple or a divisor of world_size={world_size} "\n'
          '                     "(KV heads are split when a multiple, replicated when a divisor)")\n',
          "    return q_heads, range(rank * n_kv_heads // world_size, rank * n_kv_heads // world_size + 1)\n"),
]
