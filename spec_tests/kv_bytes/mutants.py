"""Planted bugs of `kv_bytes` (each must make a kv_bytes test fail)."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("missing_factor_two", "Counts only the keys: forgets the factor 2 for K and V.",
          "    return 2 * layers * kv_heads * head_dim * element_bytes(dtype)",
          "    return layers * kv_heads * head_dim * element_bytes(dtype)"),
    Patch("assumes_fp16", "Hard-codes 2 bytes per element (fp16): wrong for fp32, fp64 or fp8 caches.",
          "    return 2 * layers * kv_heads * head_dim * element_bytes(dtype)",
          "    return 2 * layers * kv_heads * head_dim * 2"),
    Patch("append_overwrites",
          "append writes at position length - 1 when the cache is non-empty (an off-by-one that "
          "overwrites the last cached token) and grows the length anyway.",
          "        self.k[layer, :, :, start:start + n] = k\n        self.v[layer, :, :, start:start + n] = v\n",
          "        w = max(start - 1, 0)\n"
          "        self.k[layer, :, :, w:w + n] = k\n        self.v[layer, :, :, w:w + n] = v\n"),
    # Boundaries and defaults.
    Patch("zero_seq_len_rejected",
          "seq_len must be >= 1 (the check KVCache makes of max_seq_len, copied): an empty cache, "
          "seq_len 0, raises instead of being 0 bytes.",
          '    _positive_int("seq_len", seq_len, allow_zero=True)\n',
          '    _positive_int("seq_len", seq_len)\n'),
    Patch("zero_batch_rejected",
          "batch must be >= 1: a batch of 0 sequences raises instead of being 0 bytes.",
          '    _positive_int("batch", batch, allow_zero=True)\n',
          '    _positive_int("batch", batch)\n'),
    Patch("default_dtype_fp32",
          "kv_cache_bytes defaults to a float32 cache (KVCache's default, copied) instead of the "
          "documented float16: every call that omits dtype is 2x too large.",
          "seq_len: int, batch: int = 1,\n                   dtype: torch.dtype = torch.float16) -> int:",
          "seq_len: int, batch: int = 1,\n                   dtype: torch.dtype = torch.float32) -> int:"),
    Patch("bits_over_eight",
          "Element bytes as torch.finfo(dtype).bits / 8: right for every float dtype, but the result "
          "is a float (and loses exactness past 2**53).",
          "    return torch.empty((), dtype=dtype).element_size()\n",
          "    return torch.finfo(dtype).bits / 8\n"),
    Patch("cache_default_fp16",
          "KVCache allocates float16 tensors when dtype is omitted instead of the documented float32.",
          "                 dtype: torch.dtype = torch.float32, device: str | torch.device = \"cpu\"):",
          "                 dtype: torch.dtype = torch.float16, device: str | torch.device = \"cpu\"):"),
    Patch("full_cache_rejected",
          "The capacity check uses >= instead of >: appending the chunk that fills the cache exactly "
          "to max_seq_len raises.",
          "        if start + n > self.max_seq_len:\n",
          "        if start + n >= self.max_seq_len:\n"),
    Patch("overflow_unchecked",
          "No capacity check: appending past max_seq_len is left to torch, which raises a "
          "RuntimeError about sizes (not a ValueError naming max_seq_len).",
          "        if start + n > self.max_seq_len:\n"
          "            raise ValueError(",
          "        if False:\n"
          "            raise ValueError("),
    Patch("range_check_only",
          "Sizes are checked for their range only, not their type: a float or bool size (2.0, "
          "True) is accepted and silently computes a float or a wrong count.",
          "    return check_int(name, value, minimum=0 if allow_zero else 1)\n",
          "    if value < (0 if allow_zero else 1):\n"
          "        raise ValueError(f\"{name} must be >= {0 if allow_zero else 1}, got {value}\")\n"
          "    return value\n"),
    Patch("zero_sizes_accepted",
          "Every size is checked as >= 0: a model of 0 layers, 0 KV heads or head_dim 0 (and a "
          "KVCache of 0 positions or sequences) is accepted instead of rejected.",
          "def _positive_int(name: str, value, allow_zero: bool = False) -> int:",
          "def _positive_int(name: str, value, allow_zero: bool = True) -> int:"),
    Patch("default_batch_zero",
          "kv_cache_bytes defaults to batch=0 (the smallest legal batch, allow_zero's bound taken as "
          "the default) instead of the documented 1: every call that omits batch returns 0 bytes.",
          "seq_len: int, batch: int = 1,\n",
          "seq_len: int, batch: int = 0,\n"),
]
MUTANTS += [
    # Probes for gaps (cache device, per-layer lengths, k/v checks, returned views).
    Patch("cache_device_ignored",
          "KVCache drops its device argument: k and v are always allocated on the CPU.",
          "        self.k = torch.zeros(shape, dtype=dtype, device=device)\n"
          "        self.v = torch.zeros(shape, dtype=dtype, device=device)\n",
          "        self.k = torch.zeros(shape, dtype=dtype)\n"
          "        self.v = torch.zeros(shape, dtype=dtype)\n"),
    Patch("seq_len_last_layer",
          "seq_len reads the last layer's length instead of layer 0's: mid forward pass (layer 0 "
          "appended, later layers not yet) it reports the old length.",
          "        return self.lengths[0]\n",
          "        return self.lengths[-1]\n"),
    Patch("lengths_shared_across_layers",
          "append advances every layer's length, not just the appended layer's.",
          "        self.lengths[layer] = start + n\n",
          "        self.lengths = [start + n] * len(self.lengths)\n"),
    Patch("kv_shape_mismatch_unchecked",
          "append does not check that k and v have the same shape.",
          "        if k.shape != v.shape:\n",
          "        if False:\n"),
    Patch("append_returns_whole_buffer",
          "append returns views of all max_seq_len positions (zeros included) instead of the "
          "cached ones.",
          "        return self.k[layer, :, :, :start + n], self.v[layer, :, :, :start + n]\n",
          "        return self.k[layer], self.v[layer]\n"),
    Patch("start_from_layer_zero",
          "append writes at layer 0's length for every layer.",
          "        start, n = self.lengths[layer], k.shape[2]\n",
          "        start, n = self.lengths[0], k.shape[2]\n"),
]
