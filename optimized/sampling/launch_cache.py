"""Cheap relaunches of Triton kernels: a kernel compiled without value specialisation
(:func:`unspecialised_jit`) depends only on its arguments' types, its constexprs and num_warps,
so :func:`launch` keeps the compiled kernel of the first call per such key and relaunches it
directly (Triton's ``CompiledKernel[grid](...)``, as its fused-softmax tutorial launches),
skipping Triton's per-call specialisation: a Triton launch costs ~15-20 us of host time, and the
split-row schedule makes about 14 of them per ~0.5 ms call."""
from __future__ import annotations

import inspect

import torch
import triton

_COMPILED: dict = {}     # (kernel, argument types, constexprs, num_warps, device) -> compiled kernel


def unspecialised_jit(fn):
    """triton.jit with no value or alignment specialisation of the runtime arguments: one compiled
    kernel per set of constexprs whatever the pointers and integers are, so :func:`launch` can
    reuse it."""
    names = [n for n, prm in inspect.signature(fn).parameters.items() if "constexpr" not in str(prm.annotation)]
    return triton.jit(fn, do_not_specialize=names, do_not_specialize_on_alignment=names)


def launch(kernel, grid, args, consts: dict, num_warps: int, *, cache: bool = True) -> None:
    """kernel[grid](*args, **consts, num_warps=num_warps) -- on CUDA with ``cache`` through the
    compiled kernel of the first such call (``kernel`` must come from :func:`unspecialised_jit`)."""
    if not (cache and args[0].is_cuda):
        kernel[grid](*args, **consts, num_warps=num_warps)
        return
    types = tuple(a.dtype if isinstance(a, torch.Tensor) else abs(a) >= 2 ** 31 for a in args)
    key = (kernel, types, tuple(consts.items()), num_warps, args[0].device)
    compiled = _COMPILED.get(key)
    if compiled is None:
        _COMPILED[key] = kernel[grid](*args, **consts, num_warps=num_warps)
        return
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    compiled[grid3](*args, *(consts[n] for n in kernel.arg_names if n in consts))
