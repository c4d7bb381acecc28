"""Attention, optimized: the contract of reference/attention.py served by the Triton
FlashAttention-2 kernels of optimized/flash_attention.py (fp16/bf16 on a Hopper GPU or under the
Triton interpreter; the reference's PyTorch math for every other dtype or device)."""
from optimized.flash_attention import attention, kernel_supports  # noqa: F401

__all__ = ["attention"]
