"""Weight-only quantisation, fast: a Triton W4A16 matmul that dequantises in registers.

The contract is reference/weight_quant.py's. ``quantize``, ``dequantize``, ``pack_int4``,
``unpack_int4`` and ``gptq`` are the reference's own functions (offline, once per checkpoint: not
on the serving path). ``w4a16_matmul`` is the kernel of optimized/_weight_quant_triton.py:

* it reads the packed int4 weight once, as it lies in memory (half a byte per weight, plus one
  scale and one zero byte per group), never materialising ŵ; the activations are bf16/fp16, the
  accumulator float32;
* every shape M (rows of x) from 1 up: a GEMV-style tile on the CUDA cores for a few rows, a
  ``tl.dot`` tile (tensor cores) from 5 rows on; split-K when the output tiles alone cannot fill the
  GPU (at M = 1 and N = 4096 there are 128 tiles of 32 features for 132 SMs), the splits' float32
  partials summed in order by a second small kernel;
* the launch configuration is ONE function, :func:`launch_config` (shape in, tiles, split, warps
  and stages out; cached per shape), the place to tune on a new GPU; the public call plans
  nothing else, reads nothing from the device (no host sync) and allocates only its output (the
  split-K workspace is kept per device and grown when needed: two calls on two streams of one
  device at once would share it -- don't).

Dispatch: the kernels run for float16/bfloat16 x with a group size that is a multiple of 32 (so a
32-column tile never straddles two groups), on a CUDA GPU of compute capability >= 8.0 or on CPU
tensors under the Triton interpreter (``TRITON_INTERPRET=1``, set by the test plugin when there is
no GPU). Everything else (float32/float64 x, other group sizes, CPU without the interpreter)
takes the reference's dequantise-then-matmul. ``kernel_supports`` says which.
"""
from __future__ import annotations

import contextlib
import functools

import torch

from optimized._device import sm_count, triton_runs_on
from reference.weight_quant import check_w4a16_inputs
from reference.weight_quant import dequantize, gptq, pack_int4, quantize, unpack_int4  # noqa: F401
from reference.weight_quant import w4a16_matmul as _reference_w4a16_matmul

try:  # Triton is optional: without it everything takes the PyTorch path.
    import triton

    from optimized._weight_quant_triton import _reduce_kernel, _w4a16_kernel
except ImportError:  # pragma: no cover - triton is a dependency on linux x86-64
    triton = None

__all__ = ["quantize", "dequantize", "pack_int4", "unpack_int4", "gptq", "w4a16_matmul"]

KERNEL_DTYPES = (torch.float16, torch.bfloat16)
GROUP_MULTIPLE = 32
REDUCE_BLOCK = 1024


def _pick_block_k(preferred: int, group: int) -> int:
    """The largest of ``preferred``, 64, 32 that divides the group (a tile has one scale)."""
    for bk in (preferred, 128, 64, 32):
        if bk <= preferred and group % bk == 0:
            return bk
    return 32


@functools.lru_cache(maxsize=1024)
def launch_config(m: int, n: int, k: int, group: int, device_type: str, sms: int = 132) -> dict:
    """Tiles, split-K and warps for x (m, k) times ŵᵀ (k, n) with groups of ``group`` columns.

    Returns dict(BLOCK_M, BLOCK_N, BLOCK_K, DOT, SPLIT_K, num_warps, num_stages). On CPU (the
    interpreter): small tiles, the GEMV path for 1-2 rows and a split of 2 whenever K has two
    tiles, so that short test shapes run every path. On the GPU: tensor-core tiles of 16 rows up to
    m = 16 (the GEMV-style path took 1.6-2.8x the time of the 16-row tile at m = 1 and 3-5.2x at
    m = 4 on an H100: docs/weight_quant.md), 64 / 128 rows above; split-K until about ``2 x sms``
    programs run. Tiles to tune with ``python -m bench run --concept weight_quant --tag tiles``.
    """
    if device_type != "cuda":
        dot = m > 2
        bm = 16 if dot else (1 if m == 1 else 2)
        bk = 32
        tiles = k // bk
        return dict(BLOCK_M=bm, BLOCK_N=16, BLOCK_K=bk, DOT=dot, SPLIT_K=2 if tiles >= 2 else 1,
                    num_warps=4, num_stages=1)
    if m <= 16:
        cfg = dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, num_stages=4)
    elif m <= 64:
        cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, num_stages=4)
    else:
        cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=_pick_block_k(64, group), DOT=True, num_warps=8, num_stages=3)
    tiles = k // cfg["BLOCK_K"]
    programs = -(-n // cfg["BLOCK_N"]) * -(-m // cfg["BLOCK_M"])
    cfg["SPLIT_K"] = max(1, min(tiles // 2, -(-2 * sms // programs), 16)) if programs < sms else 1
    return cfg


def kernel_supports(x: torch.Tensor, group_size: int) -> bool:
    """True if w4a16_matmul on ``x`` with groups of ``group_size`` columns runs the kernels."""
    if triton is None or x.dtype not in KERNEL_DTYPES or group_size % GROUP_MULTIPLE:
        return False
    return triton_runs_on(x)


_WORKSPACE: dict = {}


def _workspace(device: torch.device, numel: int) -> torch.Tensor:
    """A float32 buffer of at least ``numel`` elements, kept per device (module doc)."""
    buf = _WORKSPACE.get(device)
    if buf is None or buf.numel() < numel:
        buf = _WORKSPACE[device] = torch.empty(max(numel, 1 << 16), dtype=torch.float32, device=device)
    return buf


def _launch(x2, qweight, scales, zeros, out, group, cfg):
    """Run the kernels on checked 2-D inputs: out (m, n) = x2 (m, k) ŵᵀ."""
    m, k = x2.shape
    n = qweight.shape[0]
    cfg = dict(cfg)
    bm, bn, bk, split = cfg.pop("BLOCK_M"), cfg.pop("BLOCK_N"), cfg.pop("BLOCK_K"), cfg.pop("SPLIT_K")
    dot = cfg.pop("DOT")
    tiles = k // bk
    per_split = -(-tiles // max(1, min(split, tiles)))
    split = -(-tiles // per_split)
    part = _workspace(x2.device, split * m * n) if split > 1 else out
    grid = (triton.cdiv(n, bn), split, triton.cdiv(m, bm))
    with torch.cuda.device(x2.device) if x2.is_cuda else contextlib.nullcontext():
        _w4a16_kernel[grid](
            x2, qweight, scales, zeros, out, part, m, n, k, per_split * bk,
            x2.stride(0), x2.stride(1), qweight.stride(0), qweight.stride(1),
            scales.stride(0), scales.stride(1), zeros.stride(0), zeros.stride(1), out.stride(0), out.stride(1),
            GROUP=group, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, DOT=dot, SPLIT=split > 1, **cfg)
        if split > 1:
            _reduce_kernel[(triton.cdiv(m * n, REDUCE_BLOCK),)](part, out, m * n, split, BLOCK=REDUCE_BLOCK,
                                                                 num_warps=4)
    return out


def w4a16_matmul_with(x, qweight, scales, zeros, *, config: dict | None = None):
    """:func:`w4a16_matmul` with the launch configuration given (``config``: launch_config's
    dict; None: launch_config's choice). For benchmarks and tuning; where the kernels do not run
    (``kernel_supports``) ``config`` is ignored and the reference computes."""
    group = check_w4a16_inputs(x, qweight, scales, zeros)
    if not kernel_supports(x, group):
        return _reference_w4a16_matmul(x, qweight, scales, zeros)
    k, n = x.shape[-1], qweight.shape[0]
    x2 = x.reshape(-1, k)
    m = x2.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m and n:
        if config is None:
            config = launch_config(m, n, k, group, x.device.type, sm_count(x.device))
        _launch(x2, qweight, scales, zeros, out, group, config)
    return out.reshape(*x.shape[:-1], n)


def w4a16_matmul(x, qweight, scales, zeros):
    """reference.weight_quant.w4a16_matmul, computed by the W4A16 kernels (module doc)."""
    return w4a16_matmul_with(x, qweight, scales, zeros)
