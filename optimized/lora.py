"""Multi-LoRA serving, fast: the base matmul plus Punica-style BGMV Triton kernels.

The contract is reference/lora.py's. ``merge_lora`` is the reference's own (offline, once per
adapter). :func:`lora_forward` runs, after the reference's input checks (which read the adapter
ids once: a host sync):

1. the base product ``x W^T`` (one matmul for the whole batch: cuBLAS on the GPU), in x's dtype;
2. ``_shrink_kernel``: each row's ``v = x A[id]^T`` (float32, r values), every row gathering its
   own adapter (BGMV: no sort, no padding; rows of id -1 are masked out);
3. ``_expand_kernel``: each row's ``y = base + (alpha / r) v B[id]^T``, float32, rounded to x's
   dtype, written over the base product in place (rows of id -1 keep the base).

The base is rounded to x's dtype before the LoRA term is added (two roundings where the contract
has one): within the tolerance rule, which allows 2 x the contract's own error plus two ulps.
:func:`lora_apply` is steps 1-3 on checked arguments, with no host sync (a CUDA graph captures it).

Dispatch: the kernels run for float16/bfloat16/float32 x on a CUDA GPU of compute capability
>= 8.0, or on CPU tensors under the Triton interpreter (``TRITON_INTERPRET=1``, set by the test
plugin when there is no GPU); float64 x, and CPU without the interpreter, take the reference.
"""
from __future__ import annotations

import contextlib
import os

import torch

from reference.lora import check_lora_inputs, merge_lora  # noqa: F401
from reference.lora import lora_forward as _reference_lora_forward

try:  # Triton is optional: without it everything takes the PyTorch path.
    import triton

    from optimized._lora_triton import _expand_kernel, _shrink_kernel
except ImportError:  # pragma: no cover - triton is a dependency on linux x86-64
    triton = None

__all__ = ["lora_forward", "merge_lora"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"  # read once: triton.jit decided at import
KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def kernel_supports(x: torch.Tensor) -> bool:
    """True if :func:`lora_forward` on ``x`` runs the Triton kernels."""
    if triton is None or x.dtype not in KERNEL_DTYPES:
        return False
    if x.device.type == "cuda":
        return not INTERPRET and torch.cuda.get_device_capability(x.device)[0] >= 8
    return x.device.type == "cpu" and INTERPRET


def launch_config(rank: int, d_in: int, d_out: int, device_type: str) -> dict:
    """BLOCK_M (rows per program), BLOCK_R (the rank, padded to a power of two >= 16), BLOCK_K
    (shrink's step over d_in) and BLOCK_N (expand's outputs per program): on the CPU (the
    interpreter) few large programs; on the GPU first guesses (to be tuned with
    ``python -m bench run --concept lora``): a few rows per program, about 8K tile elements."""
    block_r = max(16, triton.next_power_of_2(rank))
    if device_type != "cuda":
        return dict(BLOCK_M=8, BLOCK_R=block_r, BLOCK_K=32, BLOCK_N=32, num_warps=4)
    return dict(BLOCK_M=4, BLOCK_R=block_r, BLOCK_K=max(16, 2048 // block_r), BLOCK_N=max(16, 2048 // block_r),
                num_warps=4)


def lora_apply(x, base_weight, lora_a, lora_b, adapter_ids, alpha: float) -> torch.Tensor:
    """Steps 1-3 of the module doc on arguments :func:`lora_forward` has checked (no host sync)."""
    batch, d_in = x.shape
    adapters, rank = lora_a.shape[0], lora_a.shape[1]
    d_out = base_weight.shape[0]
    y = x @ base_weight.T
    if batch == 0 or d_out == 0 or adapters == 0:
        return y
    y = y.contiguous()
    cfg = launch_config(rank, d_in, d_out, x.device.type)
    v = torch.empty((batch, rank), dtype=torch.float32, device=x.device)
    with torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext():
        grid_m = triton.cdiv(batch, cfg["BLOCK_M"])
        _shrink_kernel[(grid_m,)](x, lora_a, adapter_ids, v, batch, d_in, rank, x.stride(0), x.stride(1),
                                  lora_a.stride(0), lora_a.stride(1), lora_a.stride(2), v.stride(0),
                                  BLOCK_M=cfg["BLOCK_M"], BLOCK_R=cfg["BLOCK_R"], BLOCK_K=cfg["BLOCK_K"],
                                  num_warps=cfg["num_warps"])
        _expand_kernel[(grid_m, triton.cdiv(d_out, cfg["BLOCK_N"]))](
            v, lora_b, adapter_ids, y, batch, d_out, rank, alpha / rank, v.stride(0), lora_b.stride(0),
            lora_b.stride(1), lora_b.stride(2), y.stride(0), y.stride(1), BLOCK_M=cfg["BLOCK_M"],
            BLOCK_R=cfg["BLOCK_R"], BLOCK_N=cfg["BLOCK_N"], num_warps=cfg["num_warps"])
    return y


def lora_forward(x, base_weight, lora_a, lora_b, adapter_ids, alpha):
    """reference.lora.lora_forward, computed by the base matmul and the BGMV kernels (module doc)."""
    if not (isinstance(x, torch.Tensor) and kernel_supports(x)):
        return _reference_lora_forward(x, base_weight, lora_a, lora_b, adapter_ids, alpha)
    alpha = check_lora_inputs(x, base_weight, lora_a, lora_b, adapter_ids, alpha)
    return lora_apply(x, base_weight, lora_a, lora_b, adapter_ids, alpha)
