"""Reusable scratch tensors for the CPU paths of the optimized kernels (sampling, speculative):
fresh multi-MB allocations page-fault on every call there. One dict per thread; names are
namespaced by the caller's module. Never returned to a caller of the public API."""
from __future__ import annotations

import threading

import torch

_WS = threading.local()


def scratch(name: str, shape, dtype: torch.dtype, device) -> torch.Tensor:
    """A tensor of ``shape`` and ``dtype`` reused across calls on the CPU (contents undefined);
    elsewhere a plain ``torch.empty``."""
    device = torch.device(device)
    if device.type != "cpu":
        return torch.empty(shape, dtype=dtype, device=device)
    bufs = _WS.__dict__.setdefault("bufs", {})
    t = bufs.get(name)
    if t is None or t.shape != tuple(shape) or t.dtype != dtype:
        t = bufs[name] = torch.empty(shape, dtype=dtype)
    return t
