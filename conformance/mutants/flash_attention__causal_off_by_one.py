"""Causal mask off by one: key j is visible only if j < pos instead of j <= pos, so every query
loses its own position (and a query whose only key is its own sees nothing).

A real kernel mutant: optimized/flash_attention.py with one line changed (see
conformance/mutants/_source_mutant.py), run through the same Triton kernels (under the
interpreter on CPU). It exposes the flash_attention contract names only."""
from conformance.mutants._source_mutant import plant

TARGET = "flash_attention"

_kernel = plant("optimized/flash_attention.py",
                "(cols <= pos + right)",
                "(cols < pos + right)",
                "causal_off_by_one")
attention_varlen = _kernel.attention_varlen
FlashAttention = _kernel.FlashAttention
