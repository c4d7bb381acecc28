"""Planted bugs of `flash_attention` (each must make a flash_attention test fail): one-line
patches of the real Triton kernels in optimized/flash_attention.py, run through the same kernel
code (under the interpreter on CPU)."""
from conformance.mutants import Patch

KERNEL = "optimized/flash_attention.py"

MUTANTS = [
    Patch("causal_off_by_one",
          "Causal mask off by one: key j is visible only if j < pos instead of j <= pos, so every "
          "query loses its own position (and a query whose only key is its own sees nothing).",
          KERNEL, "(cols <= pos + right)", "(cols < pos + right)"),
    Patch("gqa_wrong_kv_head",
          "GQA head mapping by modulo: query head h reads KV head h % kv_heads instead of h // group. "
          "Right for MHA and MQA, wrong for every real GQA model (in the forward and the dQ kernel; "
          "the dK/dV kernel still gathers by group).",
          KERNEL, "return off_h // group", "return off_h % (tl.num_programs(1) // group)"),
    Patch("lse_base2",
          "The log-sum-exp is returned in base 2 (the kernel's exp2 domain) without the ln 2 "
          "conversion: outputs are right, lse is wrong by a factor 1/ln 2, and so is the backward, "
          "which rebuilds the probabilities from the stored lse.",
          KERNEL, "(m_i + tl.math.log2(l_safe)) * 0.6931471805599453", "(m_i + tl.math.log2(l_safe))"),
    Patch("no_rescale",
          "Online softmax without the accumulator rescale: when a new key tile raises the running "
          "row max, the output accumulated so far is not multiplied by exp2(m_old - m_new) (the "
          "denominator still is). Right whenever the first tile holds each row's maximum.",
          KERNEL, "acc = acc * alpha[:, None]", "acc = acc  # BUG: not rescaled to the new max"),
    Patch("unmasked_tail",
          "The last, partial key tile is treated as an interior tile: the key range split rounds the "
          "end of the unmasked stretch up instead of down, so the zero-filled keys past the sequence "
          "end enter the softmax with score 0. Right whenever kv_len is a multiple of the tile size.",
          KERNEL, "full_hi = (seq_k // BLOCK_N) * BLOCK_N", "full_hi = tl.cdiv(seq_k, BLOCK_N) * BLOCK_N"),
]
