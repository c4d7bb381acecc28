"""Multi-LoRA serving, fast: the base matmul plus Punica-style BGMV Triton kernels.

The contract is reference/lora.py's. ``merge_lora`` is the reference's own (offline, once per
adapter). :func:`lora_forward` runs, after the reference's input checks (which read the adapter
ids once: a host sync):

1. the base product ``x W^T`` (one matmul for the whole batch: cuBLAS on the GPU), in x's dtype;
2. ``_shrink_kernel``: each row's ``v = x A[id]^T`` (float32, r values), every row gathering its
   own adapter (BGMV: no sort, no padding; rows of id -1 are masked out), split-K: d_in cut into
   SPLIT_K stretches (:func:`launch_config`), one program per block of rows and stretch, each
   writing its float32 partial to a ``(SPLIT_K, batch, BLOCK_R)`` workspace (no atomics);
3. ``_expand_kernel``: each row's ``v`` as the sum of the SPLIT_K partials in a fixed order
   (deterministic), then ``y = base + (alpha / r) v B[id]^T``, float32, rounded to x's dtype,
   written over the base product in place (rows of id -1 keep the base).

The base is rounded to x's dtype before the LoRA term is added (two roundings where the contract
has one): within the tolerance rule, which allows 2 x the contract's own error plus two ulps.
:func:`lora_apply` is steps 1-3 on checked arguments, with no host sync (a CUDA graph captures it).

Dispatch: the kernels run for float16/bfloat16/float32 x on a CUDA GPU of compute capability
>= 8.0, or on CPU tensors under the Triton interpreter (``TRITON_INTERPRET=1``, set by the test
plugin when there is no GPU); float64 x, and CPU without the interpreter, take the reference.
"""
from __future__ import annotations

import contextlib

import torch

from optimized._device import sm_count, triton_runs_on
from reference.lora import check_lora_inputs, merge_lora  # noqa: F401
from reference.lora import lora_forward as _reference_lora_forward

try:  # Triton is optional: without it everything takes the PyTorch path.
    import triton

    from optimized._lora_triton import _expand_kernel, _shrink_kernel
except ImportError:  # pragma: no cover - triton is a dependency on linux x86-64
    triton = None

__all__ = ["lora_forward", "merge_lora"]

KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def kernel_supports(x: torch.Tensor) -> bool:
    """True if :func:`lora_forward` on ``x`` runs the Triton kernels."""
    if triton is None or x.dtype not in KERNEL_DTYPES:
        return False
    return triton_runs_on(x)


MAX_SPLIT_K = 32   # the expand adds SPLIT_K partials per row (an unrolled loop): bounded


def launch_config(rank: int, d_in: int, d_out: int, batch: int, device_type: str, sms: int = 132) -> dict:
    """The launch of the two kernels for a batch of ``batch`` rows, adapters of rank ``rank``,
    d_in -> d_out, on a GPU of ``sms`` SMs (read only on the GPU).

    Returns dict(BLOCK_M (rows per program), BLOCK_R (the rank, padded to a power of two >= 16),
    BLOCK_K (shrink's step over d_in), SPLIT_K (shrink's splits of d_in, the second axis of its
    grid), K_PER_SPLIT (columns per split: a multiple of BLOCK_K, at least one step, every split
    non-empty), BLOCK_N (expand's outputs per program), num_warps).

    On the CPU (the interpreter): few large programs, BLOCK_K 16 and SPLIT_K 2 whenever d_in has
    two BLOCK_K steps (every d_in > 16), so that the tests' short shapes run the split path. On the
    GPU: 4 rows per program and about 8K tile elements (BLOCK_K = 2048 / BLOCK_R, at least 16);
    SPLIT_K the smallest power of two with ``cdiv(batch, 4) * SPLIT_K >= sms``, at most
    MAX_SPLIT_K = 32 and the number of BLOCK_K steps of d_in, the steps then dealt out evenly (the
    last split possibly shorter), so that even batch 1 has about one program per SM (the shrink is
    latency-bound: without the split, batch 1 ran ONE program walking all of d_in); where d_in has
    fewer steps than that, BLOCK_K first halves (down to 32), so that a program's work stays small.
    On an H100 (132 SMs), rank 16, d_in 4096: batch 1 gives BLOCK_K 128, SPLIT_K 32 (32 programs
    of one step: more splits cost the expand a partial each); batch 64, BLOCK_K 128, SPLIT_K 16 (256 programs of 2 steps); batch 256, BLOCK_K
    128, SPLIT_K 4 (256 programs of 8 steps); from batch 525 on, no split. First guesses, to be
    tuned with ``python -m bench run --concept lora``."""
    block_r = max(16, triton.next_power_of_2(rank))
    if device_type != "cuda":
        cfg = dict(BLOCK_M=8, BLOCK_R=block_r, BLOCK_K=16, BLOCK_N=32, num_warps=4)
        want = 2
    else:
        block_k = max(16, 2048 // block_r)
        cfg = dict(BLOCK_M=4, BLOCK_R=block_r, BLOCK_K=block_k, BLOCK_N=block_k, num_warps=4)
        programs = triton.cdiv(batch, cfg["BLOCK_M"])
        want = min(triton.next_power_of_2(triton.cdiv(max(sms, 1), max(programs, 1))), MAX_SPLIT_K)
        while cfg["BLOCK_K"] > 32 and triton.cdiv(d_in, cfg["BLOCK_K"]) < want:
            cfg["BLOCK_K"] //= 2
    steps = max(1, triton.cdiv(d_in, cfg["BLOCK_K"]))   # BLOCK_K steps over d_in (one for d_in = 0)
    per_split = triton.cdiv(steps, min(want, steps))    # steps per split; the last split non-empty
    cfg.update(SPLIT_K=triton.cdiv(steps, per_split), K_PER_SPLIT=per_split * cfg["BLOCK_K"])
    return cfg


def lora_apply(x, base_weight, lora_a, lora_b, adapter_ids, alpha: float) -> torch.Tensor:
    """Steps 1-3 of the module doc on arguments :func:`lora_forward` has checked (no host sync)."""
    batch, d_in = x.shape
    adapters, rank = lora_a.shape[0], lora_a.shape[1]
    d_out = base_weight.shape[0]
    y = x @ base_weight.T
    if batch == 0 or d_out == 0 or adapters == 0:
        return y
    y = y.contiguous()
    sms = sm_count(x.device)
    cfg = launch_config(rank, d_in, d_out, batch, x.device.type, sms)
    split = cfg["SPLIT_K"]
    v_part = torch.empty((split, batch, cfg["BLOCK_R"]), dtype=torch.float32, device=x.device)  # shrink writes all
    with torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext():
        grid_m = triton.cdiv(batch, cfg["BLOCK_M"])
        _shrink_kernel[(grid_m, split)](x, lora_a, adapter_ids, v_part, batch, d_in, rank, cfg["K_PER_SPLIT"],
                                        x.stride(0), x.stride(1), lora_a.stride(0), lora_a.stride(1),
                                        lora_a.stride(2), v_part.stride(0), v_part.stride(1),
                                        BLOCK_M=cfg["BLOCK_M"], BLOCK_R=cfg["BLOCK_R"], BLOCK_K=cfg["BLOCK_K"],
                                        num_warps=cfg["num_warps"])
        _expand_kernel[(grid_m, triton.cdiv(d_out, cfg["BLOCK_N"]))](
            v_part, lora_b, adapter_ids, y, batch, d_out, rank, alpha / rank, v_part.stride(0), v_part.stride(1),
            lora_b.stride(0), lora_b.stride(1), lora_b.stride(2), y.stride(0), y.stride(1), BLOCK_M=cfg["BLOCK_M"],
            BLOCK_R=cfg["BLOCK_R"], BLOCK_N=cfg["BLOCK_N"], SPLIT_K=split, num_warps=cfg["num_warps"])
    return y


def lora_forward(x, base_weight, lora_a, lora_b, adapter_ids, alpha):
    """reference.lora.lora_forward, computed by the base matmul and the BGMV kernels (module doc)."""
    if not (isinstance(x, torch.Tensor) and kernel_supports(x)):
        return _reference_lora_forward(x, base_weight, lora_a, lora_b, adapter_ids, alpha)
    alpha = check_lora_inputs(x, base_weight, lora_a, lora_b, adapter_ids, alpha)
    return lora_apply(x, base_weight, lora_a, lora_b, adapter_ids, alpha)
