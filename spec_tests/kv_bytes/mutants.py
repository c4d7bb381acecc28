"""Planted bugs of `kv_bytes` (each must make a kv_bytes test fail)."""
from conformance.mutants import Patch

MUTANTS = [
    Patch("missing_factor_two", "Counts only the keys: forgets the factor 2 for K and V.",
          "reference/kv_bytes.py",
          "    return 2 * layers * kv_heads * head_dim * element_bytes(dtype)",
          "    return layers * kv_heads * head_dim * element_bytes(dtype)"),
    Patch("assumes_fp16", "Hard-codes 2 bytes per element (fp16): wrong for fp32, fp64 or fp8 caches.",
          "reference/kv_bytes.py",
          "    return 2 * layers * kv_heads * head_dim * element_bytes(dtype)",
          "    return 2 * layers * kv_heads * head_dim * 2"),
    Patch("append_overwrites",
          "append writes at position length - 1 when the cache is non-empty (an off-by-one that "
          "overwrites the last cached token) and grows the length anyway.",
          "reference/kv_bytes.py",
          "        self.k[layer, :, :, start:start + n] = k\n        self.v[layer, :, :, start:start + n] = v\n",
          "        w = max(start - 1, 0)\n"
          "        self.k[layer, :, :, w:w + n] = k\n        self.v[layer, :, :, w:w + n] = v\n"),
]
