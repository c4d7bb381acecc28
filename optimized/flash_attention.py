"""FlashAttention-2 in Triton: forward and backward, padded and variable-length batches (05.07).

The contract is reference/attention.py's: layout (batch, heads, seq, head_dim), bottom-right
causal, left ``window``, GQA/MQA by ``h // group`` (K/V are never repeated), a fully masked row
gives out 0 and lse -inf, lse float32. ``attention_varlen`` takes packed (total, heads, head_dim)
tensors and cumulative sequence lengths; both forms share one set of kernels (a padded batch is a
varlen batch whose sequences start at ``b * stride``).

Algorithm (FlashAttention-2, Dao 2023). A program owns BLOCK_M query rows and streams K/V in
BLOCK_N tiles, keeping a running row max ``m``, denominator ``l`` and unnormalised ``acc``
(online softmax: when the max rises, rescale ``acc`` and ``l`` by ``exp(m_old - m_new)``); the
(N, N) score matrix never reaches HBM: the traffic is Q and O once and K, V once per query tile
(mostly served by L2), instead of N^2 scores written and read back several times. Scores live
in base 2 (``qk_scale = scale * log2 e``, ``exp2``). The key range of a query tile is split into
three stretches: masked tiles left of the window, interior tiles every row of the tile may see
(no mask arithmetic at all), and masked tiles on the causal diagonal / at the ragged tail.
The backward recomputes P from the saved lse: one kernel per K/V tile accumulates dK, dV over
every query head of its GQA group (no atomics, so results are bitwise deterministic), one kernel
per Q tile accumulates dQ, after a small kernel computes ``delta = rowsum(dO * O)``.

Forward variants (``_flash_forward``'s config; fwd_config turns HOST_DESC on for n_q <= 4096, as measured).
The shipped forward builds four per-sequence TMA descriptors per program on the device. For padded
batches, HOST_DESC passes four host-built 4-D descriptors over (batch, heads, seq, head_dim) as
kernel arguments instead (block [1, 1, rows, BLOCK_D]: the same zero-filled reads and clipped
stores per sequence), and PERSISTENT adds a persistent schedule over the (query tile, batch, head)
work items. Both run the same tile code (``_fwd_tile``), so out and lse have the same bits.

Dispatch. The kernels run for float16/bfloat16 with head_dim a multiple of 8 in [8, 256], on a
CUDA GPU of compute capability >= 9.0 (TMA tensor descriptors; tuned and measured on an H200) or
on CPU tensors under the Triton interpreter (``TRITON_INTERPRET=1``, set by the test plugin when
there is no GPU, so CI executes the real kernel code). Everything else -- float32/float64, other
head dims, CPU without the interpreter, empty tensors -- computes with the reference's PyTorch
math: same contract, same results, no speed-up. ``kernel_supports(q)`` says which path a tensor
takes. Gradients flow through ``out`` and ``lse`` on both paths.
"""
from __future__ import annotations

import contextlib
import math

import torch

from optimized._device import INTERPRET, sm_count, triton_runs_on  # noqa: F401 (INTERPRET: read by the tests)
from reference.attention import attention as _reference_attention
from reference.attention import check_attention_inputs
from reference.flash_attention import attention_varlen as _reference_attention_varlen
from reference.flash_attention import check_varlen_inputs

try:  # Triton is optional: without it everything takes the PyTorch path.
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - triton is a dependency on linux x86-64
    triton = None

LOG2E = 1.4426950408889634
KERNEL_DTYPES = (torch.float16, torch.bfloat16)
UNBOUNDED = 1 << 30  # an unbounded window reach (see _reach)


if triton is not None:

    @triton.jit
    def _kv_head(off_h, group):
        """GQA: query head h reads KV head h // group."""
        return off_h // group

    @triton.jit
    def _visible(rows, cols, diag, seq_k, left, right):
        """Mask of (query row, key col) pairs that may attend. Query i sits at pos = i + diag and
        sees keys pos - left <= j <= pos + right (causal: right = 0; no window: left = UNBOUNDED)."""
        pos = rows + diag
        return (cols < seq_k) & (cols <= pos + right) & (cols >= pos - left)

    @triton.jit
    def _kv_range(start_m, seq_k, diag, left, right, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        """Key tiles of a query tile: [lo, full_lo) masked, [full_lo, full_hi) seen by every row
        (no mask), [full_hi, hi) masked. All bounds but hi are multiples of BLOCK_N; nothing
        negative is ever divided (integer division rounds differently on device and in Python)."""
        hi = tl.minimum(seq_k, tl.maximum(start_m + BLOCK_M + diag + right, 0))  # last row's reach
        lo = (tl.maximum(start_m + diag - left, 0) // BLOCK_N) * BLOCK_N          # first row's reach
        hi_ceil = tl.cdiv(hi, BLOCK_N) * BLOCK_N
        full_lo = tl.cdiv(tl.maximum(start_m + BLOCK_M - 1 + diag - left, 0), BLOCK_N) * BLOCK_N
        full_lo = tl.maximum(tl.minimum(full_lo, hi_ceil), lo)
        full_hi = (seq_k // BLOCK_N) * BLOCK_N
        full_hi = tl.minimum(full_hi, (tl.maximum(start_m + diag + right + 1, 0) // BLOCK_N) * BLOCK_N)
        full_hi = tl.maximum(tl.minimum(full_hi, hi_ceil), full_lo)
        return lo, full_lo, full_hi, hi

    @triton.jit
    def _seq_bounds(cu_q, cu_k, off_b, n_q, n_k, VARLEN: tl.constexpr):
        if VARLEN:
            q_start = tl.load(cu_q + off_b)
            seq_q = tl.load(cu_q + off_b + 1) - q_start
            k_start = tl.load(cu_k + off_b)
            seq_k = tl.load(cu_k + off_b + 1) - k_start
        else:
            q_start = 0
            k_start = 0
            seq_q = n_q
            seq_k = n_k
        return q_start, seq_q, k_start, seq_k

    # ---------------------------------------------------------------- forward
    @triton.jit
    def _load_tile(desc, off_b, off_h, row, ROWS: tl.constexpr, COLS: tl.constexpr, DESC4: tl.constexpr):
        """The (ROWS, COLS) tile at ``row``: of a per-sequence 2-D descriptor built on the device
        (DESC4 False; off_b, off_h unused), or of a host 4-D (batch, heads, seq, head_dim)
        descriptor with block [1, 1, ROWS, COLS] at batch off_b, head off_h (DESC4 True). Either
        way rows past the sequence end and columns past head_dim read zeros."""
        if DESC4:
            tile = desc.load([off_b, off_h, row, 0]).reshape(ROWS, COLS)
        else:
            tile = desc.load([row, 0])
        return tile

    @triton.jit
    def _store_tile(desc, off_b, off_h, row, tile, ROWS: tl.constexpr, COLS: tl.constexpr,
                    DESC4: tl.constexpr):
        """Store a (ROWS, COLS) tile at ``row`` (see _load_tile); clipped at the sequence end."""
        if DESC4:
            desc.store([off_b, off_h, row, 0], tile.reshape(1, 1, ROWS, COLS))
        else:
            desc.store([row, 0], tile)

    @triton.jit
    def _fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_kvh, offs_m, lo, hi, diag, seq_k, left,
                   right, qk_scale, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, MASKED: tl.constexpr,
                   WARP_SPEC: tl.constexpr, DESC4: tl.constexpr):
        offs_n = tl.arange(0, BLOCK_N)
        for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPEC):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            k = _load_tile(desc_k, off_b, off_kvh, start_n, BLOCK_N, BLOCK_D, DESC4)
            qk = tl.dot(q, tl.trans(k))
            if MASKED:
                ok = _visible(offs_m[:, None], start_n + offs_n[None, :], diag, seq_k, left, right)
                qk = tl.where(ok, qk * qk_scale, float("-inf"))
                m_ij = tl.maximum(m_i, tl.max(qk, 1))
                m_use = tl.where(m_ij == float("-inf"), 0.0, m_ij)  # a row that has seen nothing yet
                qk = qk - m_use[:, None]
            else:
                m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
                m_use = m_ij
                qk = qk * qk_scale - m_use[:, None]
            p = tl.math.exp2(qk)
            alpha = tl.math.exp2(m_i - m_use)  # rescale what was accumulated under the old max
            acc = acc * alpha[:, None]
            v = _load_tile(desc_v, off_b, off_kvh, start_n, BLOCK_N, BLOCK_D, DESC4)
            acc = tl.dot(p.to(v.dtype), v, acc)
            l_i = l_i * alpha + tl.sum(p, 1)  # after the dot: fewer live registers across it
            m_i = m_ij
        return acc, l_i, m_i

    @triton.jit
    def _fwd_tile(desc_q, desc_k, desc_v, desc_o, LSE, sl_b, sl_h, sl_n, off_b, off_h, off_kvh, start_m,
                  q_start, seq_q, seq_k, qk_scale, left, right, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, MASK_FREE: tl.constexpr,
                  WARP_SPEC: tl.constexpr, DESC4: tl.constexpr):
        """The query tile at row start_m of one head of one sequence: out and lse. Shared by both
        forward kernels; DESC4 says how the descriptors index (_load_tile)."""
        offs_m = start_m + tl.arange(0, BLOCK_M)
        diag = seq_k - seq_q
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        q = _load_tile(desc_q, off_b, off_h, start_m, BLOCK_M, BLOCK_D, DESC4)
        if MASK_FREE:  # no causal, no window, whole key tiles: one loop without mask arithmetic
            acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_kvh, offs_m, 0, seq_k,
                                       diag, seq_k, left, right, qk_scale, BLOCK_N, BLOCK_D, False,
                                       WARP_SPEC, DESC4)
        else:
            lo, full_lo, full_hi, hi = _kv_range(start_m, seq_k, diag, left, right, BLOCK_M, BLOCK_N)
            acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_kvh, offs_m, lo, full_lo,
                                       diag, seq_k, left, right, qk_scale, BLOCK_N, BLOCK_D, True, False,
                                       DESC4)
            acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_kvh, offs_m, full_lo,
                                       full_hi, diag, seq_k, left, right, qk_scale, BLOCK_N, BLOCK_D, False,
                                       WARP_SPEC, DESC4)
            acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_kvh, offs_m, full_hi, hi,
                                       diag, seq_k, left, right, qk_scale, BLOCK_N, BLOCK_D, True, False,
                                       DESC4)
        seen = l_i > 0.0  # a fully masked row: out 0, lse -inf
        l_safe = tl.where(seen, l_i, 1.0)
        lse = tl.where(seen, (m_i + tl.math.log2(l_safe)) * 0.6931471805599453, float("-inf"))
        _store_tile(desc_o, off_b, off_h, start_m, (acc / l_safe[:, None]).to(desc_o.dtype),
                    BLOCK_M, BLOCK_D, DESC4)
        lse_ptrs = (LSE + off_b.to(tl.int64) * sl_b + off_h.to(tl.int64) * sl_h
                    + (q_start + offs_m).to(tl.int64) * sl_n)
        tl.store(lse_ptrs, lse, mask=offs_m < seq_q)

    @triton.jit(do_not_specialize=["n_q", "n_k", "left", "right", "group"])
    def _fwd_kernel(Q, K, V, O, LSE, cu_q, cu_k,
                    sq_b, sq_h, sq_n, sk_b, sk_h, sk_n, sv_b, sv_h, sv_n, so_b, so_h, so_n,
                    sl_b, sl_h, sl_n, n_q, n_k, qk_scale, left, right, group,
                    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, VARLEN: tl.constexpr, MASK_FREE: tl.constexpr,
                    WARP_SPEC: tl.constexpr):
        """Grid (query tiles, heads, batch); per-sequence descriptors built here, on the device."""
        pid_m = tl.program_id(0)
        off_h = tl.program_id(1)
        off_b = tl.program_id(2)
        q_start, seq_q, k_start, seq_k = _seq_bounds(cu_q, cu_k, off_b, n_q, n_k, VARLEN)
        n_blocks = tl.cdiv(seq_q, BLOCK_M)
        if VARLEN:
            if pid_m >= n_blocks:  # the grid is sized for the longest sequence
                return
        start_m = (n_blocks - 1 - pid_m) * BLOCK_M  # heaviest causal tiles first
        off_kvh = _kv_head(off_h, group)
        b64 = off_b.to(tl.int64)
        q_base = Q + b64 * sq_b + off_h.to(tl.int64) * sq_h + q_start.to(tl.int64) * sq_n
        k_base = K + b64 * sk_b + off_kvh.to(tl.int64) * sk_h + k_start.to(tl.int64) * sk_n
        v_base = V + b64 * sv_b + off_kvh.to(tl.int64) * sv_h + k_start.to(tl.int64) * sv_n
        o_base = O + b64 * so_b + off_h.to(tl.int64) * so_h + q_start.to(tl.int64) * so_n
        # Per-sequence descriptors: loads past the sequence end read zeros, stores are clipped.
        desc_q = tl.make_tensor_descriptor(q_base, shape=[seq_q, HEAD_DIM], strides=[sq_n, 1],
                                           block_shape=[BLOCK_M, BLOCK_D])
        kv_rows = tl.maximum(seq_k, 1)  # an empty key sequence is never read; keep the descriptor valid
        desc_k = tl.make_tensor_descriptor(k_base, shape=[kv_rows, HEAD_DIM], strides=[sk_n, 1],
                                           block_shape=[BLOCK_N, BLOCK_D])
        desc_v = tl.make_tensor_descriptor(v_base, shape=[kv_rows, HEAD_DIM], strides=[sv_n, 1],
                                           block_shape=[BLOCK_N, BLOCK_D])
        desc_o = tl.make_tensor_descriptor(o_base, shape=[seq_q, HEAD_DIM], strides=[so_n, 1],
                                           block_shape=[BLOCK_M, BLOCK_D])
        _fwd_tile(desc_q, desc_k, desc_v, desc_o, LSE, sl_b, sl_h, sl_n, off_b, off_h, off_kvh, start_m,
                  q_start, seq_q, seq_k, qk_scale, left, right, BLOCK_M, BLOCK_N, BLOCK_D, MASK_FREE,
                  WARP_SPEC, False)

    @triton.jit(do_not_specialize=["n_q", "n_k", "n_heads", "n_batch", "left", "right", "group"])
    def _fwd_kernel_host(desc_q, desc_k, desc_v, desc_o, LSE, sl_b, sl_h, sl_n, n_q, n_k, n_heads, n_batch,
                         qk_scale, left, right, group, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_D: tl.constexpr, MASK_FREE: tl.constexpr, WARP_SPEC: tl.constexpr,
                         PERSISTENT: tl.constexpr):
        """Padded batches only, with host-built 4-D descriptors (kernel arguments: nothing is made
        on the device). Grid (query tiles, heads, batch), or PERSISTENT: a fixed number of programs
        striding over the work items ordered (query tile, batch, head), head fastest: the heaviest
        causal tiles come first and the query heads of one KV head (h // group) run side by side."""
        n_blocks = tl.cdiv(n_q, BLOCK_M)
        if PERSISTENT:
            per_m = n_batch * n_heads
            for item in tl.range(tl.program_id(0), n_blocks * per_m, tl.num_programs(0)):
                pid_m = item // per_m
                rest = item - pid_m * per_m
                off_b = rest // n_heads
                off_h = rest - off_b * n_heads
                _fwd_tile(desc_q, desc_k, desc_v, desc_o, LSE, sl_b, sl_h, sl_n, off_b, off_h,
                          _kv_head(off_h, group), (n_blocks - 1 - pid_m) * BLOCK_M, 0, n_q, n_k, qk_scale,
                          left, right, BLOCK_M, BLOCK_N, BLOCK_D, MASK_FREE, WARP_SPEC, True)
        else:
            off_h = tl.program_id(1)
            _fwd_tile(desc_q, desc_k, desc_v, desc_o, LSE, sl_b, sl_h, sl_n, tl.program_id(2), off_h,
                      _kv_head(off_h, group), (n_blocks - 1 - tl.program_id(0)) * BLOCK_M, 0, n_q, n_k,
                      qk_scale, left, right, BLOCK_M, BLOCK_N, BLOCK_D, MASK_FREE, WARP_SPEC, True)

    # --------------------------------------------------------------- backward
    @triton.jit(do_not_specialize=["n_q"])
    def _bwd_delta_kernel(O, DO, DELTA, cu_q, so_b, so_h, so_n, sd_b, sd_h, sd_n, sl_b, sl_h, sl_n,
                          n_q, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                          VARLEN: tl.constexpr):
        """delta_i = sum_d dO_id * O_id (the row term of dS = P * (dP - delta))."""
        pid_m = tl.program_id(0)
        off_h = tl.program_id(1).to(tl.int64)
        off_b = tl.program_id(2)
        q_start, seq_q, _, _ = _seq_bounds(cu_q, cu_q, off_b, n_q, n_q, VARLEN)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        rows = (q_start + offs_m).to(tl.int64)
        mask = (offs_m < seq_q)[:, None] & (offs_d < HEAD_DIM)[None, :]
        b64 = off_b.to(tl.int64)
        o = tl.load(O + b64 * so_b + off_h * so_h + rows[:, None] * so_n + offs_d[None, :], mask=mask, other=0.0)
        do = tl.load(DO + b64 * sd_b + off_h * sd_h + rows[:, None] * sd_n + offs_d[None, :], mask=mask, other=0.0)
        delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
        tl.store(DELTA + b64 * sl_b + off_h * sl_h + rows * sl_n, delta, mask=offs_m < seq_q)

    @triton.jit
    def _bwd_dkdv_inner(dk, dv, k, v, Q, DO, LSE, DELTA, sq_n, sd_n, sl_n, q_start, seq_q, seq_k, diag,
                        left, right, qk_scale, offs_n, offs_d, lo, hi, HEAD_DIM: tl.constexpr,
                        BLOCK_M: tl.constexpr, MASKED: tl.constexpr):
        for start_m in range(lo, hi, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            row_ok = offs_m < seq_q
            rows = (q_start + offs_m).to(tl.int64)
            mask = row_ok[:, None] & (offs_d < HEAD_DIM)[None, :]
            q = tl.load(Q + rows[:, None] * sq_n + offs_d[None, :], mask=mask, other=0.0)
            do = tl.load(DO + rows[:, None] * sd_n + offs_d[None, :], mask=mask, other=0.0)
            # Rows past the end and fully masked rows (lse = -inf) get lse = +inf, hence P = 0.
            lse = tl.load(LSE + rows * sl_n, mask=row_ok, other=float("inf"))
            lse = tl.where(lse == float("-inf"), float("inf"), lse) * 1.4426950408889634
            delta = tl.load(DELTA + rows * sl_n, mask=row_ok, other=0.0)
            pT = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])  # (BLOCK_N, BLOCK_M)
            if MASKED:
                ok = _visible(offs_m[None, :], offs_n[:, None], diag, seq_k, left, right)
                pT = tl.where(ok, pT, 0.0)
            dv = tl.dot(pT.to(do.dtype), do, dv)
            dpT = tl.dot(v, tl.trans(do))
            dsT = pT * (dpT - delta[None, :])
            dk = tl.dot(dsT.to(q.dtype), q, dk)
        return dk, dv

    @triton.jit(do_not_specialize=["n_q", "n_k", "left", "right", "group"])
    def _bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, cu_q, cu_k,
                         sq_b, sq_h, sq_n, sk_b, sk_h, sk_n, sv_b, sv_h, sv_n, sd_b, sd_h, sd_n,
                         sdk_b, sdk_h, sdk_n, sdv_b, sdv_h, sdv_n, sl_b, sl_h, sl_n,
                         n_q, n_k, scale, qk_scale, left, right, group,
                         HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, VARLEN: tl.constexpr):
        pid_n = tl.program_id(0)
        off_kvh = tl.program_id(1)
        off_b = tl.program_id(2)
        q_start, seq_q, k_start, seq_k = _seq_bounds(cu_q, cu_k, off_b, n_q, n_k, VARLEN)
        start_n = pid_n * BLOCK_N
        if start_n >= seq_k:
            return
        b64 = off_b.to(tl.int64)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        cols = (k_start + offs_n).to(tl.int64)
        kv_mask = (offs_n < seq_k)[:, None] & (offs_d < HEAD_DIM)[None, :]
        k = tl.load(K + b64 * sk_b + off_kvh.to(tl.int64) * sk_h + cols[:, None] * sk_n + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        v = tl.load(V + b64 * sv_b + off_kvh.to(tl.int64) * sv_h + cols[:, None] * sv_n + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
        diag = seq_k - seq_q
        # Query tiles that see this key tile: [lo, full_lo) masked, [full_lo, full_hi) unmasked,
        # [full_hi, hi) masked. Rows past seq_q need no mask: their P is 0 (lse = +inf).
        # Row i sees key j iff j - right <= i + diag <= j + left.
        hi = tl.minimum(seq_q, tl.maximum(start_n + BLOCK_N + left - diag, 0))   # last key's reach
        lo = (tl.maximum(start_n - right - diag, 0) // BLOCK_M) * BLOCK_M       # first key's reach
        hi_ceil = tl.cdiv(hi, BLOCK_M) * BLOCK_M
        full_lo = tl.cdiv(tl.maximum(start_n + BLOCK_N - 1 - right - diag, 0), BLOCK_M) * BLOCK_M
        full_lo = tl.maximum(tl.minimum(full_lo, hi_ceil), lo)
        full_hi = (tl.maximum(start_n + left - diag + 1, 0) // BLOCK_M) * BLOCK_M
        full_hi = tl.maximum(tl.minimum(full_hi, hi_ceil), full_lo)
        for g in range(group):  # every query head of this KV head's group: dK, dV sum over them
            off_h = (off_kvh * group + g).to(tl.int64)
            Qh = Q + b64 * sq_b + off_h * sq_h
            DOh = DO + b64 * sd_b + off_h * sd_h
            LSEh = LSE + b64 * sl_b + off_h * sl_h
            DELTAh = DELTA + b64 * sl_b + off_h * sl_h
            dk, dv = _bwd_dkdv_inner(dk, dv, k, v, Qh, DOh, LSEh, DELTAh, sq_n, sd_n, sl_n, q_start,
                                     seq_q, seq_k, diag, left, right, qk_scale, offs_n, offs_d, lo, full_lo,
                                     HEAD_DIM, BLOCK_M, True)
            dk, dv = _bwd_dkdv_inner(dk, dv, k, v, Qh, DOh, LSEh, DELTAh, sq_n, sd_n, sl_n, q_start,
                                     seq_q, seq_k, diag, left, right, qk_scale, offs_n, offs_d, full_lo,
                                     full_hi, HEAD_DIM, BLOCK_M, False)
            dk, dv = _bwd_dkdv_inner(dk, dv, k, v, Qh, DOh, LSEh, DELTAh, sq_n, sd_n, sl_n, q_start,
                                     seq_q, seq_k, diag, left, right, qk_scale, offs_n, offs_d, full_hi, hi,
                                     HEAD_DIM, BLOCK_M, True)
        dk = dk * scale
        tl.store(DK + b64 * sdk_b + off_kvh.to(tl.int64) * sdk_h + cols[:, None] * sdk_n + offs_d[None, :],
                 dk.to(DK.dtype.element_ty), mask=kv_mask)
        tl.store(DV + b64 * sdv_b + off_kvh.to(tl.int64) * sdv_h + cols[:, None] * sdv_n + offs_d[None, :],
                 dv.to(DV.dtype.element_ty), mask=kv_mask)

    @triton.jit
    def _bwd_dq_inner(dq, q, do, lse, delta, K, V, sk_n, sv_n, k_start, offs_m, offs_d, seq_k, diag,
                      left, right, qk_scale, lo, hi, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
                      MASKED: tl.constexpr):
        for start_n in range(lo, hi, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            cols = (k_start + offs_n).to(tl.int64)
            mask = (offs_n < seq_k)[:, None] & (offs_d < HEAD_DIM)[None, :]
            k = tl.load(K + cols[:, None] * sk_n + offs_d[None, :], mask=mask, other=0.0)
            v = tl.load(V + cols[:, None] * sv_n + offs_d[None, :], mask=mask, other=0.0)
            p = tl.math.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
            if MASKED:
                ok = _visible(offs_m[:, None], offs_n[None, :], diag, seq_k, left, right)
                p = tl.where(ok, p, 0.0)
            dp = tl.dot(do, tl.trans(v))
            ds = p * (dp - delta[:, None])
            dq = tl.dot(ds.to(k.dtype), k, dq)
        return dq

    @triton.jit(do_not_specialize=["n_q", "n_k", "left", "right", "group"])
    def _bwd_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, cu_q, cu_k,
                       sq_b, sq_h, sq_n, sk_b, sk_h, sk_n, sv_b, sv_h, sv_n, sd_b, sd_h, sd_n,
                       sdq_b, sdq_h, sdq_n, sl_b, sl_h, sl_n, n_q, n_k, scale, qk_scale, left, right,
                       group, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, VARLEN: tl.constexpr):
        pid_m = tl.program_id(0)
        off_h = tl.program_id(1)
        off_b = tl.program_id(2)
        q_start, seq_q, k_start, seq_k = _seq_bounds(cu_q, cu_k, off_b, n_q, n_k, VARLEN)
        n_blocks = tl.cdiv(seq_q, BLOCK_M)
        if pid_m >= n_blocks:
            return
        start_m = (n_blocks - 1 - pid_m) * BLOCK_M
        off_kvh = _kv_head(off_h, group)
        b64 = off_b.to(tl.int64)
        h64 = off_h.to(tl.int64)
        offs_m = start_m + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        rows = (q_start + offs_m).to(tl.int64)
        row_ok = offs_m < seq_q
        mask = row_ok[:, None] & (offs_d < HEAD_DIM)[None, :]
        q = tl.load(Q + b64 * sq_b + h64 * sq_h + rows[:, None] * sq_n + offs_d[None, :], mask=mask, other=0.0)
        do = tl.load(DO + b64 * sd_b + h64 * sd_h + rows[:, None] * sd_n + offs_d[None, :], mask=mask, other=0.0)
        lse = tl.load(LSE + b64 * sl_b + h64 * sl_h + rows * sl_n, mask=row_ok, other=float("inf"))
        lse = tl.where(lse == float("-inf"), float("inf"), lse) * 1.4426950408889634
        delta = tl.load(DELTA + b64 * sl_b + h64 * sl_h + rows * sl_n, mask=row_ok, other=0.0)
        Kh = K + b64 * sk_b + off_kvh.to(tl.int64) * sk_h
        Vh = V + b64 * sv_b + off_kvh.to(tl.int64) * sv_h
        diag = seq_k - seq_q
        dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        lo, full_lo, full_hi, hi = _kv_range(start_m, seq_k, diag, left, right, BLOCK_M, BLOCK_N)
        dq = _bwd_dq_inner(dq, q, do, lse, delta, Kh, Vh, sk_n, sv_n, k_start, offs_m, offs_d, seq_k, diag,
                           left, right, qk_scale, lo, full_lo, HEAD_DIM, BLOCK_N, True)
        dq = _bwd_dq_inner(dq, q, do, lse, delta, Kh, Vh, sk_n, sv_n, k_start, offs_m, offs_d, seq_k, diag,
                           left, right, qk_scale, full_lo, full_hi, HEAD_DIM, BLOCK_N, False)
        dq = _bwd_dq_inner(dq, q, do, lse, delta, Kh, Vh, sk_n, sv_n, k_start, offs_m, offs_d, seq_k, diag,
                           left, right, qk_scale, full_hi, hi, HEAD_DIM, BLOCK_N, True)
        dq = dq * scale
        tl.store(DQ + b64 * sdq_b + h64 * sdq_h + rows[:, None] * sdq_n + offs_d[None, :],
                 dq.to(DQ.dtype.element_ty), mask=mask)


# ------------------------------------------------------------------- launch configuration
def _block_d(head_dim: int) -> int:
    return max(16, triton.next_power_of_2(head_dim))


def fwd_config(head_dim: int, causal: bool, device: torch.device, n_q: int = 4096) -> dict:
    """Tile sizes of the forward kernel. Under the interpreter tiles are small so that the short
    test sequences still cross several tiles (the online-softmax rescale, the masked/unmasked
    split and the ragged tail all run). On the GPU: the winners of the H200 tile sweep
    (bench/cases/flash_attention.py, tag tune; numbers in docs/performance.md), and HOST_DESC
    (host-built descriptors, module doc) for n_q <= 4096: in the H200 run of the six GQA and
    short-sequence shapes (tag shapes) it gained 3-51 % at N = 512-4096 (176 -> 266
    TFLOP/s at 32 x 32/8 x 512) and lost 11 % at 1 x 16 x 16k causal, with the same bits."""
    if device.type != "cuda":
        return dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1, WARP_SPEC=False)
    return dict(_fwd_tiles(head_dim, causal, n_q), HOST_DESC=n_q <= 4096)


def _fwd_tiles(head_dim: int, causal: bool, n_q: int) -> dict:
    if head_dim <= 64:
        return dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3, WARP_SPEC=False)
    if head_dim <= 128:
        if causal or n_q <= 1024:
            return dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3, WARP_SPEC=False)
        return dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3, WARP_SPEC=False)
    # head_dim 129..256: the D = 256 sweep (bench/cases/flash_attention.py, tag d256-tiles; H200, bf16,
    # 2 x 8 x 4096): 64 x 64, 3 stages 417 / 532 TFLOP/s causal / full vs 328 / 445 for 64 x 32, 2 stages
    return dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3, WARP_SPEC=False)


def bwd_config(head_dim: int, device: torch.device) -> dict:
    """Tile sizes of the backward kernels (dK/dV: BLOCK_N keys x BLOCK_M queries; dQ the reverse);
    GPU values from the same sweep."""
    if device.type != "cuda":
        return dict(dkdv=dict(BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=1),
                    dq=dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1))
    if head_dim <= 64:
        return dict(dkdv=dict(BLOCK_M=32, BLOCK_N=128, num_warps=4, num_stages=3),
                    dq=dict(BLOCK_M=128, BLOCK_N=32, num_warps=4, num_stages=3))
    if head_dim <= 128:
        return dict(dkdv=dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=2),
                    dq=dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2))
    # head_dim 129..256, from the D = 256 sweeps (the joint backward tiles of tag d256-tiles, H200 bf16
    # 2 x 8 x 4096: 182 / 196 TFLOP/s causal / full, against 99 / 105 for the old guess)
    return dict(dkdv=dict(BLOCK_M=64, BLOCK_N=64, num_warps=8, num_stages=1),
                dq=dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=1))


def _alloc(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _ensure_allocator() -> None:
    """Device-side TMA descriptors need a little global scratch. Triton keeps its allocator in a
    ContextVar, so a thread that never set one (autograd's backward threads) gets one here; an
    allocator the caller installed is left alone."""
    from triton.runtime import _allocation
    current = _allocation._allocator.get()
    if isinstance(current, _allocation.NullAllocator):
        triton.set_allocator(_alloc)


def kernel_supports(q: torch.Tensor) -> bool:
    """True if attention on ``q`` (and k, v like it) runs the Triton kernels (module doc)."""
    if triton is None or q.dtype not in KERNEL_DTYPES:
        return False
    d = q.shape[-1]
    if d % 8 or not 8 <= d <= 256:
        return False
    return triton_runs_on(q, min_major=9)


def _tma_aligned(t: torch.Tensor) -> bool:
    """TMA wants a 16-byte aligned base, unit stride in head_dim and 16-byte aligned other strides."""
    es = t.element_size()
    return t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all((s * es) % 16 == 0 for s in t.stride()[:-1])


def _tma_ready(t: torch.Tensor) -> torch.Tensor:
    """``t``, or a contiguous copy of it when TMA cannot address it."""
    return t if _tma_aligned(t) else t.contiguous()


def _host_desc(t: torch.Tensor, block_rows: int, block_d: int):
    """A host TMA descriptor over a (batch, heads, seq, head_dim) tensor, block [1, 1, block_rows,
    block_d]: like the device path's per-sequence descriptors, rows past a sequence's end read zeros
    and stores there are clipped (a flat 2-D view would read the next head's rows instead), and
    block_d may exceed head_dim (zeros again). None if TMA cannot address ``t``."""
    if t.dim() != 4 or min(t.shape) == 0 or not _tma_aligned(t):
        return None
    return TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, block_rows, block_d])


def fwd_shared_bytes(block_m: int, block_n: int, block_d: int, num_stages: int, element_size: int,
                     persistent: bool = False) -> int:
    """Shared memory of a forward program: Q, num_stages buffers of K and V, barriers; a persistent
    program also keeps an O buffer, so its TMA store overlaps the next work item. Exact for the
    sm_90 compilations checked (Triton 3.6: 64x64 / 128x64 / 128x128 tiles, D 64 / 128 / 256), at
    most 1 KiB over for small ones."""
    return element_size * block_d * (block_m * (2 if persistent else 1) + 2 * max(num_stages, 1) * block_n) + 1024


SMEM_PER_SM, SMEM_PER_PROGRAM = 228 * 1024, 227 * 1024  # Hopper (H100 / H200)


def _programs_per_sm(block_m: int, block_n: int, block_d: int, num_warps: int, num_stages: int,
                     element_size: int) -> int:
    """Resident persistent forward programs per SM (1 to 4): the shared-memory bound (1 KiB is
    reserved per program) and a register estimate, about acc + scores per thread plus 88 (within
    10% of ptxas for the sm_90 compilations checked)."""
    smem = fwd_shared_bytes(block_m, block_n, block_d, num_stages, element_size, persistent=True)
    regs = min(255, block_m * (block_d + block_n) // (32 * num_warps) + 88)
    return max(1, min(4, SMEM_PER_SM // (smem + 1024), 65536 // (regs * 32 * num_warps)))


def _reach(causal: bool, window: int | None) -> tuple[int, int]:
    """(left, right): query at position p sees keys p - left .. p + right. UNBOUNDED stands for
    'unbounded' and stays far from int32 overflow for any sequence a GPU can hold."""
    return (UNBOUNDED if window is None else min(int(window), UNBOUNDED)), (0 if causal else UNBOUNDED)


def _strides3(t: torch.Tensor, varlen: bool) -> tuple[int, int, int]:
    """(batch, head, seq) strides of a (b, h, n, d) tensor or of a packed (total, h, d) one."""
    return (0, t.stride(1), t.stride(0)) if varlen else (t.stride(0), t.stride(1), t.stride(2))


def _lse_strides(lse: torch.Tensor, varlen: bool) -> tuple[int, int, int]:
    return (0, lse.stride(1), lse.stride(0)) if varlen else (lse.stride(0), lse.stride(1), lse.stride(2))


def _dims(q, k, varlen):
    if varlen:
        return 1, q.shape[1], k.shape[1]
    return q.shape[0], q.shape[1], k.shape[1]


def _flash_forward(q, k, v, cu_q, cu_k, max_q, max_k, causal, window, scale, config=None):
    """Launch the forward kernel. Returns (out, lse float32).

    ``config`` (default fwd_config's) holds the tiles and launch options, and two optional keys
    for padded batches: HOST_DESC (default False in an explicit config) passes host-built 4-D TMA descriptors as kernel
    arguments instead of building four per program on the device; PERSISTENT (default False, with
    HOST_DESC only) launches min(work items, SMs x PROGRAMS_PER_SM) programs that loop over the
    (query tile, batch, head) items, PROGRAMS_PER_SM defaulting to _programs_per_sm's estimate.
    A tensor TMA cannot address (and every varlen batch) takes the device-descriptor kernel."""
    varlen = cu_q is not None
    q, k, v = _tma_ready(q), _tma_ready(k), _tma_ready(v)
    batch, q_heads, kv_heads = _dims(q, k, varlen)
    if varlen:
        batch = cu_q.numel() - 1
    head_dim = q.shape[-1]
    block_d = _block_d(head_dim)
    n_q, n_k = (max_q, max_k) if varlen else (q.shape[2], k.shape[2])
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
    cfg = dict(config or fwd_config(head_dim, causal, q.device, n_q))
    block_m, block_n = cfg.pop("BLOCK_M"), cfg.pop("BLOCK_N")
    host_desc, persistent = cfg.pop("HOST_DESC", False), cfg.pop("PERSISTENT", False)
    per_sm = cfg.pop("PROGRAMS_PER_SM", None)
    left, right = _reach(causal, window)
    mask_free = not varlen and left == UNBOUNDED and right == UNBOUNDED and n_k % block_n == 0
    group = q_heads // kv_heads
    descs = None
    if host_desc and not varlen:
        descs = [_host_desc(t, rows, block_d) for t, rows in ((q, block_m), (k, block_n), (v, block_n),
                                                             (out, block_m))]
        descs = None if None in descs else descs
    if q.is_cuda:
        _ensure_allocator()
    with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
        if descs is not None:
            grid = (triton.cdiv(n_q, block_m), q_heads, batch)
            if persistent:
                if per_sm is None:
                    per_sm = _programs_per_sm(block_m, block_n, block_d, cfg.get("num_warps", 4),
                                              cfg.get("num_stages", 3), q.element_size())
                grid = (min(grid[0] * q_heads * batch, max(1, sm_count(q.device)) * per_sm),)
            _fwd_kernel_host[grid](
                *descs, lse, *_lse_strides(lse, False), n_q, n_k, q_heads, batch, scale * LOG2E, left,
                right, group, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, MASK_FREE=mask_free,
                PERSISTENT=bool(persistent), **cfg)
            return out, lse
        grid = (triton.cdiv(n_q, block_m), q_heads, batch)
        cu_q_arg, cu_k_arg = (cu_q, cu_k) if varlen else (lse, lse)  # unused when not varlen
        _fwd_kernel[grid](
            q, k, v, out, lse, cu_q_arg, cu_k_arg,
            *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen), *_strides3(out, varlen),
            *_lse_strides(lse, varlen), n_q, n_k, scale * LOG2E, left, right,
            group, HEAD_DIM=head_dim, BLOCK_D=block_d,
            BLOCK_M=block_m, BLOCK_N=block_n, VARLEN=varlen, MASK_FREE=mask_free, **cfg)
    return out, lse


def _flash_backward(do, q, k, v, out, lse, dlse, cu_q, cu_k, max_q, max_k, causal, window, scale,
                    config=None):
    """Launch the three backward kernels. Returns (dq, dk, dv) in the inputs' dtype."""
    varlen = cu_q is not None
    batch, q_heads, kv_heads = _dims(q, k, varlen)
    if varlen:
        batch = cu_q.numel() - 1
    head_dim = q.shape[-1]
    block_d = _block_d(head_dim)
    n_q, n_k = (max_q, max_k) if varlen else (q.shape[2], k.shape[2])
    if do.stride(-1) != 1:
        do = do.contiguous()
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    delta = torch.empty_like(lse)
    cfg = config or bwd_config(head_dim, q.device)
    cu_q_arg, cu_k_arg = (cu_q, cu_k) if varlen else (lse, lse)  # unused when not varlen
    common = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, VARLEN=varlen)
    reach = (*_reach(causal, window), q_heads // kv_heads)
    with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
        _bwd_delta_kernel[(triton.cdiv(n_q, 64), q_heads, batch)](
            out, do, delta, cu_q_arg, *_strides3(out, varlen), *_strides3(do, varlen),
            *_lse_strides(delta, varlen), n_q, HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=64,
            VARLEN=varlen)
        if dlse is not None:  # d lse_i / d s_ij = P_ij: it enters dS as -dlse_i next to delta_i
            delta -= dlse.to(torch.float32)
        c1 = dict(cfg["dkdv"])
        bm1, bn1 = c1.pop("BLOCK_M"), c1.pop("BLOCK_N")
        _bwd_dkdv_kernel[(triton.cdiv(n_k, bn1), kv_heads, batch)](
            q, k, v, do, lse, delta, dk, dv, cu_q_arg, cu_k_arg,
            *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen), *_strides3(do, varlen),
            *_strides3(dk, varlen), *_strides3(dv, varlen), *_lse_strides(lse, varlen),
            n_q, n_k, scale, scale * LOG2E, *reach, BLOCK_M=bm1, BLOCK_N=bn1, **common, **c1)
        c2 = dict(cfg["dq"])
        bm2, bn2 = c2.pop("BLOCK_M"), c2.pop("BLOCK_N")
        _bwd_dq_kernel[(triton.cdiv(n_q, bm2), q_heads, batch)](
            q, k, v, do, lse, delta, dq, cu_q_arg, cu_k_arg,
            *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen), *_strides3(do, varlen),
            *_strides3(dq, varlen), *_lse_strides(lse, varlen),
            n_q, n_k, scale, scale * LOG2E, *reach, BLOCK_M=bm2, BLOCK_N=bn2, **common, **c2)
    return dq, dk, dv


def flash_forward(q, k, v, *, causal: bool = False, window: int | None = None,
                  scale: float | None = None, config: dict | None = None):
    """The forward kernel's launch alone on padded (batch, heads, seq, head_dim) tensors: returns
    (out, lse float32), like ``attention(..., return_lse=True)``. No input checks, no autograd, no
    PyTorch fallback: the caller has checked the inputs (``check_attention_inputs``) and
    ``kernel_supports(q)`` holds. ``scale`` defaults to 1/sqrt(head_dim) and must be >= 0 (attention
    folds a negative scale into k). ``config`` replaces fwd_config's dict: tiles and launch options,
    and the HOST_DESC / PERSISTENT / PROGRAMS_PER_SM keys of the module doc. What the benchmarks
    time (bench/cases/flash_attention.py), without the checks' cost."""
    return _flash_forward(q, k, v, None, None, 0, 0, bool(causal), window, _scale(scale, q.shape[-1]), config)


def flash_backward(do, q, k, v, out, lse, *, causal: bool = False, window: int | None = None,
                   scale: float | None = None, config: dict | None = None):
    """The three backward launches alone (what autograd calls after flash_forward): returns (dq, dk,
    dv) in the inputs' dtype for the upstream gradient ``do`` of ``out``, given flash_forward's
    (out, lse) for the same q, k, v, causal, window and scale. No checks; ``config`` replaces
    bwd_config's dict ({"dkdv": {...}, "dq": {...}})."""
    return _flash_backward(do, q, k, v, out, lse, None, None, None, 0, 0, bool(causal), window,
                           _scale(scale, q.shape[-1]), config)



class _FlashAttentionFn(torch.autograd.Function):
    """out, lse = FlashAttention-2 forward; backward recomputes P tile by tile from lse."""

    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, max_q, max_k, causal, window, scale):
        out, lse = _flash_forward(q, k, v, cu_q, cu_k, max_q, max_k, causal, window, scale)
        ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
        ctx.args = (max_q, max_k, causal, window, scale)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
        max_q, max_k, causal, window, scale = ctx.args
        if dout is None:
            dout = torch.zeros_like(out)
        dq, dk, dv = _flash_backward(dout, q, k, v, out, lse, dlse, cu_q, cu_k, max_q, max_k,
                                     causal, window, scale)
        return dq, dk, dv, None, None, None, None, None, None, None


def _scale(scale, head_dim):
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


def _signed(k, scale):
    """(k, scale) with scale >= 0: the forward kernel's unmasked loop takes each row's max before
    scaling (max(qk) * scale, one multiply saved per score), which is the max only for scale >= 0.
    A negative scale is applied as q.(-k) * |scale|, the same scores exactly (negation is exact);
    autograd carries dk back through the negation."""
    return (-k, -scale) if scale < 0 else (k, scale)


def attention(q, k, v, *, causal: bool = False, window: int | None = None,
              scale: float | None = None, return_lse: bool = False):
    """reference.attention.attention, computed by the FlashAttention-2 kernels (module doc)."""
    check_attention_inputs(q, k, v, window, scale)
    if not kernel_supports(q) or min(q.numel(), k.numel()) == 0:
        return _reference_attention(q, k, v, causal=causal, window=window, scale=scale,
                                    return_lse=return_lse)
    k, scale = _signed(k, _scale(scale, q.shape[-1]))
    out, lse = _FlashAttentionFn.apply(q, k, v, None, None, 0, 0, bool(causal), window, scale)
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal: bool = False,
                     window: int | None = None, scale: float | None = None, return_lse: bool = False):
    """reference.flash_attention.attention_varlen (packed sequences), computed by the same kernels."""
    check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, window, scale)
    if not kernel_supports(q) or min(q.numel(), k.numel()) == 0:
        return _reference_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=causal,
                                           window=window, scale=scale, return_lse=return_lse)
    cq, ck = cu_seqlens_q.cpu(), cu_seqlens_k.cpu()
    max_q, max_k = int((cq[1:] - cq[:-1]).max()), int((ck[1:] - ck[:-1]).max())
    cu_q = cu_seqlens_q.to(device=q.device, dtype=torch.int32)
    cu_k = cu_seqlens_k.to(device=q.device, dtype=torch.int32)
    k, scale = _signed(k, _scale(scale, q.shape[-1]))
    out, lse = _FlashAttentionFn.apply(q, k, v, cu_q, cu_k, max(max_q, 1), max(max_k, 1), bool(causal),
                                       window, scale)
    return (out, lse) if return_lse else out


class FlashAttention(torch.nn.Module):
    """Drop-in attention callable: ``forward(q, k, v, *, causal=False, window=None, scale=None)``
    with :func:`attention`'s semantics; the kernels on CUDA (and under the interpreter), the
    PyTorch path elsewhere."""

    def forward(self, q, k, v, *, causal: bool = False, window: int | None = None,
                scale: float | None = None):
        return attention(q, k, v, causal=causal, window=window, scale=scale)
