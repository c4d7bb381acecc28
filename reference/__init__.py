"""The specification: one module per concept, plain PyTorch, written to be read.

Signatures and docstrings here ARE the contract an implementation provides (see docs/).
"""
from reference import attention, kv_bytes, stopping, metrics, model, generate, sampling  # noqa: F401
