"""The log-sum-exp is returned in base 2 (the kernel's exp2 domain) without the ln 2 conversion:
outputs are right, lse is wrong by a factor 1/ln 2, and so is the backward, which rebuilds the
probabilities from the stored lse.

A real kernel mutant: optimized/flash_attention.py with one line changed (see
conformance/mutants/_source_mutant.py), run through the same Triton kernels (under the
interpreter on CPU). It exposes the flash_attention contract names only."""
from conformance.mutants._source_mutant import plant

TARGET = "flash_attention"

_kernel = plant("optimized/flash_attention.py",
                "(m_i + tl.math.log2(l_safe)) * 0.6931471805599453",
                "(m_i + tl.math.log2(l_safe))",
                "lse_base2")
attention_varlen = _kernel.attention_varlen
FlashAttention = _kernel.FlashAttention
