"""Online softmax without the accumulator rescale: when a new key tile raises the running row max,
the output accumulated so far is not multiplied by exp2(m_old - m_new) (the denominator still is).
Right whenever the first tile holds each row's maximum; wrong otherwise.

A real kernel mutant: optimized/flash_attention.py with one line changed (see
conformance/mutants/_source_mutant.py), run through the same Triton kernels (under the
interpreter on CPU). It exposes the flash_attention contract names only."""
from conformance.mutants._source_mutant import plant

TARGET = "flash_attention"

_kernel = plant("optimized/flash_attention.py",
                "acc = acc * alpha[:, None]",
                "acc = acc  # BUG: not rescaled to the new max",
                "no_rescale")
attention_varlen = _kernel.attention_varlen
FlashAttention = _kernel.FlashAttention
