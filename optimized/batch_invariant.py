"""Batch-invariant kernels in Triton (course 08.10, 08.11): the contract of
reference/batch_invariant.py, fast.

* ``matmul``: a tiled matmul with no split-K and ONE reduction configuration per dtype
  (BLOCK_K): each output tile (BLOCK_M x BLOCK_N) is one program that walks K in BLOCK_K steps,
  accumulating in float32 in the same order whatever M is. A row's result therefore depends only
  on K. The output tile's M x N size is the only thing chosen from the shape: ``TILES`` above
  ``SMALL_M`` rows, ``TILES_SMALL_M`` at or below it (so that a decode-sized M still launches
  enough programs to fill the GPU). A tile's M x N size is not a reduction dimension; that it
  leaves every element's bits unchanged (the tensor-core instruction adds an element's K-group in
  the same order whatever the tile) was measured on the H200 for 8 bfloat16 and 4 float32 tile
  shapes, M in {1, 16, 129, 300, 512}, all bitwise equal to the shipped tile
  (bench/cases/batch_invariant.py, tag tile-probe; docs/results/bi_tile_probe_h200.json), and is checked on
  every GPU run by ``test_matmul_tile_choice_keeps_bits`` and the 1-vs-129-rows invariance
  property, which crosses ``SMALL_M``.
* ``rms_norm``, ``log_softmax``, ``softmax``: one program per row; the row is read in chunks of
  ``ROW_BLOCK`` = 1024 columns accumulated lane-wise in float32, then one ``tl.sum`` tree — an
  order that depends only on the row's length.
* ``decode_attention``: flash-decoding with the reference's FIXED split size ``KV_SPLIT`` = 32
  keys. Kernel 1, one program per (split, sequence, KV head): the split's scores for the G = H/Hkv
  query heads of that KV head (one ``tl.dot``), its max ``m``, ``l = sum exp(s - m)`` (one
  ``tl.sum``) and ``o = p @ v`` (one ``tl.dot``; p rounded to v's dtype for float16/bfloat16, as
  FlashAttention and reference/attention.py do; IEEE float32 for float32), written to a float32
  workspace. Kernel 2, one program per (sequence, query head): merges that sequence's
  ceil(n / 32) splits left to right with the reference's formulas, then ``o / l`` (``div_rn``).
  The number of splits of a sequence is a function of its own length only, never of B, S or the
  other lengths; splits past a sequence's length are skipped.
* ``row_sum``, ``row_mean``: the reference's PyTorch code (no kernel here).
* ``invariant_mode()``: routes torch's mm/addmm/bmm/_log_softmax/_softmax/mean.dim on CPU and
  CUDA tensors through these functions (``torch.library`` overrides of the aten ops), restored
  on exit.

Bits. The kernels' orders are fixed but NOT the reference's order: ``tl.dot`` and ``tl.sum`` add
inside a tile in the compiler's/hardware's order (a tree, tensor-core k-groups), the reference
adds left to right in blocks of 16. So optimized and reference agree within the tolerance rule,
not bit for bit; each is batch invariant on its own. In decode_attention the split boundaries
and the left-to-right merge ARE the reference's; what differs is inside a split (the dot over D,
the sum over the split's keys, p's rounding before p @ v) and the exp implementation. Where
those cannot matter -- every score of a sequence equal (so every p is exp(0) = 1 and every merge
factor 1) and values whose sums are exact -- the kernel's bits are the reference's
(``test_decode_attention_bits_equal_reference_when_order_free``).

Dispatch: kernels for float16/bfloat16/float32 on a CUDA GPU or on CPU tensors under the Triton
interpreter (``TRITON_INTERPRET=1``); everything else (float64, no Triton, empty inputs) computes
with the reference's PyTorch code.
"""
from __future__ import annotations

import math
import os
import types

import torch

from reference import batch_invariant as _ref
from reference.batch_invariant import (BLOCK, KV_SPLIT, _check_decode, _routing, fixed_order_sum,
                                       row_mean, row_sum)

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["fixed_order_sum", "matmul", "rms_norm", "log_softmax", "softmax",
           "row_sum", "row_mean", "decode_attention", "invariant_mode"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages). BLOCK_K (the reduction) is one per dtype, never
# chosen from the shape; the output tile shrinks at M <= SMALL_M (bits unchanged: module doc).
TILES = {
    torch.bfloat16: (128, 256, 64, 8, 3),
    torch.float16: (128, 256, 64, 8, 3),
    torch.float32: (64, 64, 32, 4, 3),
}
SMALL_M = 128
TILES_SMALL_M = {
    torch.bfloat16: (64, 64, 64, 4, 4),
    torch.float16: (64, 64, 64, 4, 4),
    torch.float32: (32, 64, 32, 4, 3),
}
assert all(TILES[d][2] == TILES_SMALL_M[d][2] for d in TILES), "one BLOCK_K per dtype"
ROW_BLOCK = 1024

if triton is not None:

    @triton.jit
    def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       IEEE: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        grid_m = tl.cdiv(M, BLOCK_M)
        grid_n = tl.cdiv(N, BLOCK_N)
        width = GROUP_M * grid_n                      # grouped launch order (L2 reuse only)
        group = pid // width
        first_m = group * GROUP_M
        size_m = tl.minimum(grid_m - first_m, GROUP_M)
        pid_m = first_m + (pid % width) % size_m
        pid_n = (pid % width) // size_m
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):               # one K order for every M: no split-K
            kk = k0 + rk
            a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak,
                        mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn,
                        mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
            if IEEE:
                acc = tl.dot(a, b, acc, input_precision="ieee")
            else:
                acc = tl.dot(a, b, acc)
        c = acc.to(c_ptr.dtype.element_ty)
        tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, c,
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    @triton.jit
    def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, D, eps, BLOCK_D: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        x_row = x_ptr + row * D
        y_row = y_ptr + row * D
        cols = tl.arange(0, BLOCK_D)
        acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
        for d0 in range(0, D, BLOCK_D):
            x = tl.load(x_row + d0 + cols, mask=d0 + cols < D, other=0.0).to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / D + eps)
        for d0 in range(0, D, BLOCK_D):
            m = d0 + cols < D
            x = tl.load(x_row + d0 + cols, mask=m, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + d0 + cols, mask=m, other=0.0).to(tl.float32)
            normed = (x * rstd).to(y_ptr.dtype.element_ty).to(tl.float32)
            tl.store(y_row + d0 + cols, (w * normed).to(y_ptr.dtype.element_ty), mask=m)

    @triton.jit
    def _softmax_kernel(x_ptr, y_ptr, D, BLOCK_D: tl.constexpr, LOG: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        x_row = x_ptr + row * D
        y_row = y_ptr + row * D
        cols = tl.arange(0, BLOCK_D)
        mx = tl.full((BLOCK_D,), float("-inf"), tl.float32)
        for d0 in range(0, D, BLOCK_D):
            x = tl.load(x_row + d0 + cols, mask=d0 + cols < D, other=float("-inf")).to(tl.float32)
            mx = tl.maximum(mx, x)
        m = tl.max(mx, axis=0)
        m = tl.where((m == float("inf")) | (m == float("-inf")) | (m != m), 0.0, m)
        acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
        for d0 in range(0, D, BLOCK_D):
            x = tl.load(x_row + d0 + cols, mask=d0 + cols < D, other=float("-inf")).to(tl.float32)
            acc += tl.exp(x - m)
        s = tl.sum(acc, axis=0)
        log_s = tl.log(s)
        for d0 in range(0, D, BLOCK_D):
            msk = d0 + cols < D
            x = tl.load(x_row + d0 + cols, mask=msk, other=0.0).to(tl.float32)
            if LOG:
                y = (x - m) - log_s
            else:
                y = tl.exp(x - m) / s
            tl.store(y_row + d0 + cols, y.to(y_ptr.dtype.element_ty), mask=msk)

    @triton.jit
    def _decode_split_kernel(q_ptr, k_ptr, v_ptr, len_ptr, m_ptr, l_ptr, o_ptr, Hkv, NS, scale,
                             sqb, sqh, skb, skh, sks,
                             G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, D_PAD: tl.constexpr,
                             SPLIT: tl.constexpr, IEEE: tl.constexpr):
        # k and v: contiguous, one shape, so one set of strides and offsets serves both
        split = tl.program_id(0)
        bh = tl.program_id(1)
        b = bh // Hkv
        n = tl.load(len_ptr + b)
        s0 = split * SPLIT
        if s0 < n:                                    # splits past this sequence's length: nothing
            hk = bh % Hkv
            rg = tl.arange(0, G_PAD)
            rd = tl.arange(0, D_PAD)
            rs = s0 + tl.arange(0, SPLIT)
            b64 = b.to(tl.int64)
            q_mask = (rg[:, None] < G) & (rd[None, :] < D)
            q = tl.load(q_ptr + b64 * sqb + (hk * G) * sqh + (rg[:, None] * sqh + rd[None, :]), mask=q_mask, other=0.0)
            kv_off = b64 * skb + hk * skh + (rs[:, None] * sks + rd[None, :])          # (SPLIT, D_PAD)
            kv_mask = (rs[:, None] < n) & (rd[None, :] < D)
            k = tl.load(k_ptr + kv_off, mask=kv_mask, other=0.0)
            v = tl.load(v_ptr + kv_off, mask=kv_mask, other=0.0)
            if IEEE:
                s = tl.dot(q, tl.trans(k), input_precision="ieee")
            else:
                s = tl.dot(q, tl.trans(k))
            s = tl.where(rs[None, :] < n, s * scale, float("-inf"))              # (G_PAD, SPLIT)
            m = tl.max(s, axis=1)
            p = tl.exp(s - m[:, None])
            l = tl.sum(p, axis=1)
            if IEEE:
                o = tl.dot(p, v, input_precision="ieee")
            else:
                o = tl.dot(p.to(v.dtype), v)                                     # (G_PAD, D_PAD) fp32
            row = (b64 * Hkv + hk) * G * NS + split + rg * NS                    # (B, H, NS) layout
            tl.store(m_ptr + row, m, mask=rg < G)
            tl.store(l_ptr + row, l, mask=rg < G)
            tl.store(o_ptr + (row[:, None] * D + rd[None, :]), o, mask=q_mask)

    @triton.jit
    def _decode_merge_kernel(m_ptr, l_ptr, o_ptr, len_ptr, out_ptr, H, NS,
                             D: tl.constexpr, D_PAD: tl.constexpr, SPLIT: tl.constexpr):
        bh = tl.program_id(0).to(tl.int64)
        n = tl.load(len_ptr + bh // H)
        rd = tl.arange(0, D_PAD)
        dm = rd < D
        row = bh * NS
        m_all = tl.load(m_ptr + row)
        l_all = tl.load(l_ptr + row)
        o_all = tl.load(o_ptr + row * D + rd, mask=dm, other=0.0)
        for j in range(1, tl.cdiv(n, SPLIT)):         # left to right, as the reference
            m = tl.load(m_ptr + row + j)
            l = tl.load(l_ptr + row + j)
            o = tl.load(o_ptr + (row + j) * D + rd, mask=dm, other=0.0)
            m_new = tl.maximum(m_all, m)
            a_old = tl.exp(m_all - m_new)
            a_new = tl.exp(m - m_new)
            l_all = l_all * a_old + l * a_new
            o_all = o_all * a_old + o * a_new
            m_all = m_new
        y = tl.math.div_rn(o_all, tl.zeros_like(o_all) + l_all)
        tl.store(out_ptr + bh * D + rd, y.to(out_ptr.dtype.element_ty), mask=dm)


def _kernel_ok(*ts) -> bool:
    if triton is None:
        return False
    t = ts[0]
    if t.dtype not in KERNEL_DTYPES or any(x.dtype != t.dtype for x in ts) or any(x.numel() == 0 for x in ts):
        return False
    return t.is_cuda or (INTERPRET and t.device.type == "cpu")


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (M, K) @ b (K, N), one tile configuration per dtype, no split-K; result in a.dtype."""
    _ref._float_tensor("a", a, 2, "M, K")
    _ref._float_tensor("b", b, 2, "K, N")
    if a.dtype != b.dtype:
        raise TypeError(f"b must have a's dtype {a.dtype}, got {b.dtype}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"b must have {a.shape[1]} rows (a's K), got shape {tuple(b.shape)}")
    if not _kernel_ok(a, b):
        return _ref.matmul(a, b)
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty(M, N, dtype=a.dtype, device=a.device)
    bm, bn, bk, warps, stages = (TILES_SMALL_M if M <= SMALL_M else TILES)[a.dtype]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                         IEEE=a.dtype == torch.float32, GROUP_M=8, num_warps=warps, num_stages=stages)
    return c


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """weight * x / sqrt(mean(x^2) + eps) along the last dim; one program per row."""
    _ref._last_dim("x", x)
    _ref._float_tensor("weight", weight, 1, "D")
    if weight.shape[0] != x.shape[-1]:
        raise ValueError(f"weight must have {x.shape[-1]} elements (x's last dim), got {weight.shape[0]}")
    eps = _ref.check_real("eps", eps, minimum=0.0)
    if not _kernel_ok(x, weight):
        return _ref.rms_norm(x, weight, eps)
    D = x.shape[-1]
    x2 = x.reshape(-1, D).contiguous()
    y = torch.empty_like(x2)
    _rms_norm_kernel[(x2.shape[0],)](x2, weight.contiguous(), y, D, eps, BLOCK_D=ROW_BLOCK, num_warps=8)
    return y.view(x.shape)


def _softmax(x: torch.Tensor, log: bool) -> torch.Tensor:
    _ref._last_dim("x", x)
    if not _kernel_ok(x):
        return _ref.log_softmax(x) if log else _ref.softmax(x)
    D = x.shape[-1]
    x2 = x.reshape(-1, D).contiguous()
    y = torch.empty_like(x2)
    _softmax_kernel[(x2.shape[0],)](x2, y, D, BLOCK_D=ROW_BLOCK, LOG=log, num_warps=8)
    return y.view(x.shape)


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    """log_softmax along the last dim; one program per row."""
    return _softmax(x, True)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """softmax along the last dim; one program per row."""
    return _softmax(x, False)


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     lengths: torch.Tensor) -> torch.Tensor:
    """One decode query per sequence (GQA) against its first lengths[b] keys; fixed splits of
    KV_SPLIT keys computed in parallel, merged left to right per (sequence, head)."""
    _check_decode(q, k, v, lengths)
    if not _kernel_ok(q, k, v):
        return _ref.decode_attention(q, k, v, lengths)
    return _decode_kernels(q.contiguous(), k.contiguous(), v.contiguous(),
                           lengths.to(device=q.device, dtype=torch.int32).contiguous())


def _decode_kernels(q, k, v, lens):
    """The two launches of decode_attention, on checked contiguous inputs (lens int32)."""
    B, H, D = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    G = H // Hkv
    NS = triton.cdiv(S, KV_SPLIT)
    m = torch.empty(B, H, NS, dtype=torch.float32, device=q.device)
    l = torch.empty_like(m)
    o = torch.empty(B, H, NS, D, dtype=torch.float32, device=q.device)
    out = torch.empty(B, H, D, dtype=q.dtype, device=q.device)
    D_PAD = max(16, triton.next_power_of_2(D))
    _decode_split_kernel[(NS, B * Hkv)](
        q, k, v, lens, m, l, o, Hkv, NS, 1.0 / math.sqrt(D),
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
        G=G, G_PAD=max(16, triton.next_power_of_2(G)), D=D, D_PAD=D_PAD, SPLIT=KV_SPLIT,
        IEEE=q.dtype == torch.float32, num_warps=4)
    _decode_merge_kernel[(B * H,)](m, l, o, lens, out, H, NS, D=D, D_PAD=D_PAD, SPLIT=KV_SPLIT, num_warps=1)
    return out


def decode_attention_unchecked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                               lengths: torch.Tensor) -> torch.Tensor:
    """decode_attention's two kernel launches alone: no argument checks (they read the lengths on
    the host) and no fallback. The caller passes what decode_attention would: contiguous q, k, v
    of a kernel dtype and int32 ``lengths`` on q's device. What the benchmarks time as "kernels"."""
    return _decode_kernels(q, k, v, lengths)


def matmul_tiled(a: torch.Tensor, b: torch.Tensor, *, tile: tuple[int, int, int, int, int]) -> torch.Tensor:
    """matmul's kernel launched with an explicit ``tile`` (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
    instead of TILES / TILES_SMALL_M, for measuring tile choices (the tile probe of
    bench/cases/batch_invariant.py). No checks and no fallback: a, b are 2-D CUDA (or interpreted
    CPU) tensors of one kernel dtype. Batch invariant only while BLOCK_K is the dtype's."""
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty(M, N, dtype=a.dtype, device=a.device)
    bm, bn, bk, warps, stages = tile
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                         IEEE=a.dtype == torch.float32, GROUP_M=8, num_warps=warps, num_stages=stages)
    return c


def invariant_mode():
    """Context manager: torch's mm/addmm/bmm/_log_softmax/_softmax/mean.dim on CPU and CUDA
    tensors compute through this module's kernels; restored on exit."""
    fns = types.SimpleNamespace(matmul=matmul, log_softmax=log_softmax, softmax=softmax, row_mean=row_mean)
    return _routing(fns, ("CPU", "CUDA"))
