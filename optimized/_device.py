"""What the Triton kernels of the optimized modules ask of the device a tensor lives on.

Shared by every module with Triton kernels, so that the dispatch rule is written once: kernels run
on a CUDA device of at least the module's compute capability (compiled by Triton), or on CPU
tensors under Triton's interpreter (``TRITON_INTERPRET=1``, set by the test plugin when there is no
GPU, before ``triton`` is imported); everywhere else a module takes its PyTorch path.
"""
from __future__ import annotations

import functools
import os

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"  # read once: triton.jit decided at import


def triton_runs_on(t: torch.Tensor, min_major: int = 8) -> bool:
    """True if Triton kernels run on ``t``'s device: a CUDA device of compute capability
    ``min_major``.x or later (compiled, not interpreted), or the CPU under the interpreter."""
    if t.device.type == "cuda":
        return not INTERPRET and torch.cuda.get_device_capability(t.device)[0] >= min_major
    return t.device.type == "cpu" and INTERPRET


@functools.lru_cache(maxsize=16)
def _multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


@functools.lru_cache(maxsize=16)
def _shared_memory(index: int) -> int:
    return getattr(torch.cuda.get_device_properties(index), "shared_memory_per_block_optin", 0)


def shared_memory_per_block(device: torch.device) -> int:
    """Bytes of shared memory one program may opt in to on a CUDA device (227 KB on an H100 or
    H200, 163 KB on an A100, 99 KB on Ada); 0 for any other device. Tiles that need more than a
    GPU has fail to launch, so a launch config that picks large tiles asks this first."""
    if device.type != "cuda":
        return 0
    return _shared_memory(device.index if device.index is not None else torch.cuda.current_device())


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device (the current one for a bare ``cuda``); 0 for
    any other device (a launch config reads 0 as "no SMs to fill": its interpreter shapes)."""
    if device.type != "cuda":
        return 0
    return _multiprocessors(device.index if device.index is not None else torch.cuda.current_device())
