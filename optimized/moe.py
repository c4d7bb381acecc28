"""Mixture of experts, fast: a fused Triton MoE (grouped matmuls over all experts, one launch each).

The contract is reference/moe.py's. ``route_topk``, ``expert_capacity``, ``dispatch_positions``
and ``load_balance_loss`` are the reference's own (a sort, a softmax and a cumulative count: a few
tensor ops, not the layer's cost). :func:`moe_forward` runs the experts as vLLM's fused_moe does:

1. align (:func:`align_rows`, tensor ops): the T*k assignments, the dropped ones
   excluded, are sorted by expert (stable, so each expert's rows keep their order) and each
   expert's run is padded to whole BLOCK_M-row tiles; every tile has one expert;
2. ``_gate_up_kernel`` (one launch for all experts): per tile, x's rows gathered by token times
   the expert's ``w_gate`` and ``w_up`` (two float32 accumulators, ``tl.dot``), and
   ``h = silu(a) * b`` rounded to x's dtype, as the contract's hidden activation;
3. ``_down_kernel`` (one launch): h times the expert's ``w_down`` in float32, times the row's gate;
4. combine: each token's k rows summed in float32 (a dropped row stays 0), rounded to x's dtype.

The input checks read the router logits once (a host sync); past them, :func:`fused_moe` (the
kernel path) has none, so a CUDA graph can capture it. :func:`ep_moe_forward` is the reference's exchange (the same messages) with the local experts run
by steps 1-3 (no gate: the source rank applies it after the combine all-to-all).

Dispatch: the kernels run for float16/bfloat16/float32 x on a CUDA GPU of compute capability
>= 8.0, or on CPU tensors under the Triton interpreter (``TRITON_INTERPRET=1``, set by the test
plugin when there is no GPU). float64 x, and CPU without the interpreter, take the reference's
per-expert loop. ``kernel_supports`` says which. float32 uses IEEE float32 products (no TF32).
"""
from __future__ import annotations

import contextlib
import functools

import torch

from optimized._device import shared_memory_per_block, triton_runs_on
from reference._checks import compute_dtype
from reference.moe import (_check_bool, _check_k, _check_layer, _ep_forward, _positions, _route, dispatch_positions,  # noqa: F401
                           expert_capacity, load_balance_loss, route_topk)
from reference.moe import moe_forward as _reference_moe_forward

try:  # Triton is optional: without it everything takes the PyTorch path.
    import triton

    from optimized._moe_triton import _down_kernel, _gate_up_kernel
except ImportError:  # pragma: no cover - triton is a dependency on linux x86-64
    triton = None

__all__ = ["route_topk", "expert_capacity", "dispatch_positions", "load_balance_loss", "moe_forward",
           "ep_moe_forward"]

KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def kernel_supports(x: torch.Tensor) -> bool:
    """True if :func:`moe_forward` on ``x`` runs the Triton kernels."""
    if triton is None or x.dtype not in KERNEL_DTYPES:
        return False
    return triton_runs_on(x)


@functools.lru_cache(maxsize=256)
def launch_config(n_rows: int, d: int, f: int, device_type: str, shared_memory: int = 0) -> dict:
    """Tiles of the two kernels for ``n_rows`` assignment rows, model width d and expert width F:
    dict(BLOCK_M, BLOCK_N_UP, BLOCK_N_DOWN, BLOCK_K_UP, BLOCK_K_DOWN, num_warps, num_stages). On the
    CPU (the interpreter) 16-wide tiles (tl.dot's smallest). On the GPU, from the H200 tile sweep
    (``python -m bench run --concept moe --tag tiles``, 2026-12-07, docs/moe.md): 16-row tiles while
    experts get few rows (at 16 tokens every candidate was within 7 %); above 256 rows, where the
    GPU has the ``shared_memory`` (bytes a program may opt in to) for three or four stages of
    128 x 64 A and two B tiles (144 / 192 KB: Hopper), 128 x 128 tiles of 8 warps, 4 stages from
    4096 rows (8192 tokens: 447 TFLOP/s against 316 with the former 64 x 64 tiles), 3 below (1024
    tokens: 368 against 319); elsewhere (an A100, Ada) the former 64 x 64 tiles of 4 warps."""
    if device_type != "cuda":
        return dict(BLOCK_M=16, BLOCK_N_UP=16, BLOCK_N_DOWN=16, BLOCK_K_UP=16, BLOCK_K_DOWN=16, num_warps=4,
                    num_stages=1)
    if n_rows > 256 and shared_memory >= 200 * 1024:
        return dict(BLOCK_M=128, BLOCK_N_UP=128, BLOCK_N_DOWN=128, BLOCK_K_UP=64, BLOCK_K_DOWN=64, num_warps=8,
                    num_stages=4 if n_rows >= 4096 else 3)
    bm = 16 if n_rows <= 256 else 64
    return dict(BLOCK_M=bm, BLOCK_N_UP=64, BLOCK_N_DOWN=64, BLOCK_K_UP=64, BLOCK_K_DOWN=64, num_warps=4,
                num_stages=3)


def align_rows(expert_of_row: torch.Tensor, num_experts: int, block_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sorted_rows, tile_expert)`` for rows whose expert is ``expert_of_row`` (int64; the value
    ``num_experts`` marks a row to skip): each expert's rows in order, padded with ``n_rows`` to a
    whole number of ``block_m``-row tiles; ``tile_expert[i]`` the expert of tile i, ``num_experts``
    for the unused tiles of the bound ``min(n, ceil(n / block_m) + E)`` (no host sync)."""
    n = expert_of_row.numel()
    device = expert_of_row.device
    max_tiles = min(n, -(-n // block_m) + num_experts)
    counts = torch.zeros(num_experts + 1, dtype=torch.int64, device=device)
    counts.scatter_add_(0, expert_of_row, torch.ones_like(expert_of_row))
    counts = counts[:num_experts]
    tiles = (counts + block_m - 1) // block_m
    tile_end = torch.cumsum(tiles, 0)
    tile_expert = torch.searchsorted(tile_end, torch.arange(max_tiles, device=device), right=True)
    order = torch.argsort(expert_of_row, stable=True)               # skipped rows (id E) last
    first_row = torch.cumsum(counts, 0) - counts
    first_slot = (tile_end - tiles) * block_m
    expert = expert_of_row[order]
    valid = expert < num_experts
    safe = torch.where(valid, expert, 0)
    dest = first_slot[safe] + torch.arange(n, device=device) - first_row[safe]
    slots = max_tiles * block_m
    sorted_rows = torch.full((slots + 1,), n, dtype=torch.int64, device=device)   # + a slot for skipped rows
    sorted_rows[torch.where(valid, dest, slots)] = torch.where(valid, order, n)
    sorted_rows = sorted_rows[:slots]
    return sorted_rows, tile_expert.to(torch.int32)


def grouped_experts(x: torch.Tensor, expert_of_row: torch.Tensor, top_k: int, gates: torch.Tensor | None,
                    w_gate, w_up, w_down, *, config: dict | None = None) -> torch.Tensor:
    """Row r (its expert ``expert_of_row[r]``, ``E`` to skip it) runs that expert on token
    ``x[r // top_k]``, times ``gates[r]`` if given: (rows, d) float32, skipped rows 0 (steps 1-3).
    ``config``: the tiles (:func:`launch_config`'s keys; None: launch_config's choice)."""
    n, d = expert_of_row.numel(), x.shape[1]
    experts, f = w_gate.shape[0], w_gate.shape[1]
    out = torch.zeros((n, d), dtype=torch.float32, device=x.device)
    if n == 0 or d == 0:
        return out
    cfg = config or launch_config(n, d, f, x.device.type, shared_memory_per_block(x.device))
    bm = cfg["BLOCK_M"]
    sorted_rows, tile_expert = align_rows(expert_of_row, experts, bm)
    tiles = tile_expert.numel()
    h = torch.empty((n, f), dtype=x.dtype, device=x.device)
    extra = dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    with torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext():
        if f:
            _gate_up_kernel[(tiles, triton.cdiv(f, cfg["BLOCK_N_UP"]))](
                x, sorted_rows, tile_expert, w_gate, w_up, h, n, experts, d, f, top_k,
                x.stride(0), x.stride(1), w_gate.stride(0), w_gate.stride(1), w_gate.stride(2),
                h.stride(0), h.stride(1), BLOCK_M=bm, BLOCK_N=cfg["BLOCK_N_UP"], BLOCK_K=cfg["BLOCK_K_UP"], **extra)
            g = gates if gates is not None else out
            _down_kernel[(tiles, triton.cdiv(d, cfg["BLOCK_N_DOWN"]))](
                h, sorted_rows, tile_expert, w_down, g, out, n, experts, d, f,
                h.stride(0), h.stride(1), w_down.stride(0), w_down.stride(1), w_down.stride(2),
                out.stride(0), out.stride(1), MUL_GATE=gates is not None, BLOCK_M=bm, BLOCK_N=cfg["BLOCK_N_DOWN"],
                BLOCK_K=cfg["BLOCK_K_DOWN"], **extra)
    return out


def _same_strides(w_gate, w_up):
    """The gate-up kernel reads w_gate and w_up with one set of strides."""
    return (w_gate, w_up) if w_gate.stride() == w_up.stride() else (w_gate.contiguous(), w_up.contiguous())


def moe_forward(x, router_logits, w_gate, w_up, w_down, k, capacity_factor=None, renormalize=True):
    """reference.moe.moe_forward, the experts run by the grouped kernels (module doc)."""
    if not (isinstance(x, torch.Tensor) and kernel_supports(x)):
        return _reference_moe_forward(x, router_logits, w_gate, w_up, w_down, k, capacity_factor, renormalize)
    _check_layer(x, router_logits, w_gate, w_up, w_down, 1)
    k = _check_k(k, w_gate.shape[0])
    capacity = expert_capacity(x.shape[0], w_gate.shape[0], k, capacity_factor)
    _check_bool("renormalize", renormalize)
    return fused_moe(x, router_logits, w_gate, w_up, w_down, k, capacity, renormalize)


def fused_moe(x, router_logits, w_gate, w_up, w_down, k: int, capacity: int, renormalize: bool = True, *,
              config: dict | None = None):
    """The kernel path of :func:`moe_forward` on arguments it has checked (``capacity`` the
    expert capacity, >= T for none): routing, the capacity rule, :func:`grouped_experts` (``config``
    its tiles, for a tile sweep) and the combine, with no host sync (a CUDA graph can capture it)."""
    experts = w_gate.shape[0]
    ids, gates = _route(router_logits, k, renormalize)
    if capacity < x.shape[0]:
        ids = torch.where(_positions(ids, experts) < capacity, ids, experts)
    w_gate, w_up = _same_strides(w_gate, w_up)
    out = grouped_experts(x, ids.reshape(-1), k, gates.reshape(-1).to(torch.float32), w_gate, w_up, w_down,
                          config=config)
    return out.reshape(x.shape[0], k, x.shape[1]).sum(dim=1).to(x.dtype)


def _run_experts(rows, expert_of_row, w_gate, w_up, w_down):
    """The local experts of ep_moe_forward: (rows, d) in the compute dtype."""
    if not kernel_supports(rows):
        from reference.moe import _run_experts as reference_run
        return reference_run(rows, expert_of_row, w_gate, w_up, w_down)
    w_gate, w_up = _same_strides(w_gate, w_up)
    return grouped_experts(rows, expert_of_row, 1, None, w_gate, w_up, w_down).to(compute_dtype(rows.dtype))


def ep_moe_forward(x, router_logits, w_gate, w_up, w_down, k, capacity_factor=None, renormalize=True, *,
                   group=None):
    """reference.moe.ep_moe_forward, the local experts run by the grouped kernels (module doc)."""
    return _ep_forward(x, router_logits, w_gate, w_up, w_down, k, capacity_factor, renormalize, group,
                       _run_experts)
