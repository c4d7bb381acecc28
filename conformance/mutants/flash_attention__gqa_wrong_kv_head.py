"""GQA head mapping by modulo: query head h reads KV head h % kv_heads instead of h // group.
Right for MHA and MQA, wrong for every real GQA model (in the forward and the dQ kernel; the
dK/dV kernel still gathers by group).

A real kernel mutant: optimized/flash_attention.py with one line changed (see
conformance/mutants/_source_mutant.py), run through the same Triton kernels (under the
interpreter on CPU). It exposes the flash_attention contract names only."""
from conformance.mutants._source_mutant import plant

TARGET = "flash_attention"

_kernel = plant("optimized/flash_attention.py",
                "return off_h // group",
                "return off_h % (tl.num_programs(1) // group)",
                "gqa_wrong_kv_head")
attention_varlen = _kernel.attention_varlen
FlashAttention = _kernel.FlashAttention
