"""The last, partial key tile is treated as an interior tile: the key range split rounds the end of
the unmasked stretch up instead of down, so the zero-filled keys past the sequence end enter the
softmax with score 0. Right whenever kv_len is a multiple of the tile size.

A real kernel mutant: optimized/flash_attention.py with one line changed (see
conformance/mutants/_source_mutant.py), run through the same Triton kernels (under the
interpreter on CPU). It exposes the flash_attention contract names only."""
from conformance.mutants._source_mutant import plant

TARGET = "flash_attention"

_kernel = plant("optimized/flash_attention.py",
                "full_hi = (seq_k // BLOCK_N) * BLOCK_N",
                "full_hi = tl.cdiv(seq_k, BLOCK_N) * BLOCK_N",
                "unmasked_tail")
attention_varlen = _kernel.attention_varlen
FlashAttention = _kernel.FlashAttention
