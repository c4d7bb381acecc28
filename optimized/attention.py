"""Attention, optimized: the contract names of reference/attention.py served by the Triton
FlashAttention-2 kernels of optimized/flash_attention.py (fp16/bf16 on a Hopper GPU or under the
Triton interpreter; the reference's PyTorch math for every other dtype or device)."""
from optimized.flash_attention import (FlashAttention, attention, attention_varlen,  # noqa: F401
                                       kernel_supports)

__all__ = ["attention", "attention_varlen", "FlashAttention", "kernel_supports"]
