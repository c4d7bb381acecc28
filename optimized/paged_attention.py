"""Paged attention in Triton: split-KV decoding (flash-decoding) straight from the block table.

The contract is reference/paged_attention.py's: q (batch, q_heads, head_dim) or (batch, q_len,
q_heads, head_dim), caches (num_blocks, block_size, kv_heads, head_dim) ("NHD"), int32/int64
block tables and lengths, bottom-right causal queries, left ``window``, GQA/MQA by ``h // group``,
a query that sees no key gives out 0 and lse -inf, lse float32.

Algorithm. A decode step is memory bound: every byte of the visible K/V is read once and used for
a handful of queries, so the kernel is organised around reading the cache once at full bandwidth.

* One program owns (sequence b, KV head, split s). It holds *all* ``q_len x group`` query rows
  that read this KV head (GQA packing: the K/V tile is loaded once for the whole group, not once
  per query head) as the M side of two ``tl.dot`` s, padded to 16 rows.
* It walks its share of the sequence in tiles of BLOCK_N positions. Position ``j`` is slot
  ``j % BLOCK_SIZE`` of block ``block_tables[b, j // BLOCK_SIZE]``: the kernel loads the table
  entries of the tile, then gathers the K and V rows (``head_dim`` contiguous values each) from
  wherever the blocks are. BLOCK_SIZE is a compile-time constant (a power of two becomes a shift
  and a mask); nothing is gathered into a contiguous copy first.
* Online softmax in base 2 (``qk_scale = scale * log2 e``, ``exp2``), float32 accumulators, the
  FlashAttention rescale when the running max rises.
* Split-KV (flash-decoding, Dao et al. 2023): at small batch a (sequence, KV head) pair alone
  cannot fill 132 SMs, so the visible keys are cut into ``n_splits`` equal stretches, one program
  each. Every program writes its normalised partial output and its log-sum-exp; a second kernel
  merges them exactly:  ``out = sum_s w_s o_s / sum_s w_s``, ``w_s = 2^(lse_s - max lse)``,
  ``lse = max + log2(sum_s w_s)``. The split count comes from the shapes (``plan``): enough
  programs for about four per SM, never fewer than a few tiles per program, and no split at all
  for a batch that fills the GPU by itself; with one split the first kernel writes the output
  directly and the merge is skipped.
* Only positions some query can see are loaded (all loads masked): slots past ``seq_len`` in the
  partial last block, blocks left of the window and unused table entries are never touched.

Dispatch. The kernels run for float16/bfloat16 with head_dim <= 256 and at most 128 query rows per
KV head (``q_len * group``: decode and a few speculative tokens), on a CUDA GPU of compute
capability >= 8.0 or on CPU tensors under the Triton interpreter (``TRITON_INTERPRET=1``, set by
the test plugin when there is no GPU, so CI executes the real kernel code on small shapes).
Everything else -- float32/float64, CPU without the interpreter, larger q_len -- computes with the
reference's PyTorch math (same contract, same results, no speed-up). ``kernel_supports`` says
which path a call takes. Input checks are the reference's (they read ``seq_lens`` and the block
table on the host: on a GPU one small device-to-host copy per call; ``_paged_decode`` is the
launch alone, for an engine that validated its tables once).
"""
from __future__ import annotations

import contextlib
import math
from typing import NamedTuple

import torch

from optimized._device import shared_memory_per_block, sm_count, triton_runs_on
from reference.paged_attention import check_max_seq_len, check_paged_attention_inputs, check_run_metadata
from reference.paged_attention import first_visible, masked_paged_attention, run_metadata

try:  # Triton is optional: without it everything takes the PyTorch path.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is a dependency on linux x86-64
    triton = None

__all__ = ["paged_attention", "PagedAttentionPlan"]

LOG2E = 1.4426950408889634
KERNEL_DTYPES = (torch.float16, torch.bfloat16)
MAX_ROWS = 128        # q_len * group rows held by one program
MAX_SPLITS = 256
UNBOUNDED = 1 << 30  # an unbounded window


if triton is not None:

    @triton.jit(do_not_specialize=["q_len", "group", "left", "split_len"])
    def _split_kernel(Q, K, V, BT, LENS, O, LSE, O_PART, LSE_PART,
                      sq_b, sq_n, sq_h, sk_blk, sk_slot, sk_h, sv_blk, sv_slot, sv_h, sbt_b,
                      so_b, so_n, so_h, sl_b, sl_n, sl_h,
                      q_len, q_heads, group, left, split_len, qk_scale,
                      KS, VS, sks_blk, sks_slot, sks_h, svs_blk, svs_slot, svs_h,
                      HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_SIZE: tl.constexpr, SPLIT: tl.constexpr,
                      QUANT: tl.constexpr = 0):
        # QUANT (optimized/kv_quant.py): 0 a float cache; 1 float8_e4m3fn codes, 2 int8 codes, each
        # token-head's float32 scale at KS/VS[block, slot, head] (the same block table).
        pid_s = tl.program_id(0)
        off_kvh = tl.program_id(1)
        off_b = tl.program_id(2)
        n_splits = tl.num_programs(0)
        b64 = off_b.to(tl.int64)
        seq_len = tl.load(LENS + off_b).to(tl.int32)

        # Row r of the tile is query i = r // group of head kvh * group + r % group (GQA packing).
        rows = tl.arange(0, BLOCK_M)
        qi = rows // group
        head = off_kvh * group + rows % group
        row_ok = qi < q_len
        pos = seq_len - q_len + qi                     # absolute position of each query
        offs_d = tl.arange(0, BLOCK_D)
        d_ok = offs_d < HEAD_DIM
        q_rows = b64 * sq_b + qi.to(tl.int64) * sq_n + head.to(tl.int64) * sq_h
        q = tl.load(Q + q_rows[:, None] + offs_d[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        if QUANT:   # the dots run in float16 (one conversion instruction per two codes on sm_89+, where
            # codes -> bfloat16 takes several): each row of q is scaled by a power of two into float16's
            # range, exactly (bfloat16's 8 bits fit float16's 11), and the scores scaled back.
            q32 = q.to(tl.float32)
            e = (tl.max(tl.abs(q32), 1).to(tl.int32, bitcast=True) >> 23) & 0xFF   # biased exponent of the row max
            e = tl.maximum(e, 15)
            q_up = ((268 - e) << 23).to(tl.float32, bitcast=True)      # 2^(141 - e): the row max below 2^15
            q_down = ((e - 14) << 23).to(tl.float32, bitcast=True)     # 2^(e - 141)
            q = (q32 * q_up[:, None]).to(tl.float16)

        # Visible keys of the sequence: [lo, seq_len). Splits cut [lo rounded down to a tile,
        # seq_len) into stretches of split_len (a multiple of BLOCK_N) positions.
        lo = tl.maximum(seq_len - q_len - left, 0)
        start = (lo // BLOCK_N) * BLOCK_N + pid_s * split_len
        stop = tl.minimum(start + split_len, seq_len)

        bt_row = BT + b64 * sbt_b
        k_head = K + off_kvh.to(tl.int64) * sk_h
        v_head = V + off_kvh.to(tl.int64) * sv_h
        offs_n = tl.arange(0, BLOCK_N)
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        for start_n in range(start, stop, BLOCK_N):
            keys = start_n + offs_n
            key_ok = (keys >= lo) & (keys < stop)
            block = tl.load(bt_row + keys // BLOCK_SIZE, mask=key_ok, other=0).to(tl.int64)
            slot = (keys % BLOCK_SIZE).to(tl.int64)
            if BLOCK_D == HEAD_DIM:   # a mask constant along head_dim keeps the loads vectorised
                kv_mask = key_ok[:, None]
            else:
                kv_mask = key_ok[:, None] & d_ok[None, :]
            k = tl.load(k_head + (block * sk_blk + slot * sk_slot)[:, None] + offs_d[None, :],
                        mask=kv_mask, other=0.0)
            v = tl.load(v_head + (block * sv_blk + slot * sv_slot)[:, None] + offs_d[None, :],
                        mask=kv_mask, other=0.0)
            if QUANT:   # dequantise in registers: codes -> q's dtype exactly, scales fold into qk and p
                k_sc = tl.load(KS + off_kvh.to(tl.int64) * sks_h + block * sks_blk + slot * sks_slot,
                               mask=key_ok, other=0.0)
                v_sc = tl.load(VS + off_kvh.to(tl.int64) * svs_h + block * svs_blk + slot * svs_slot,
                               mask=key_ok, other=0.0)
                k = k.to(tl.float16)   # exact: every E4M3 code and every int8 is a float16
                v = v.to(tl.float16)
            qk = tl.dot(q, tl.trans(k))
            if QUANT:
                qk = qk * q_down[:, None] * k_sc[None, :]
            visible = key_ok[None, :] & (keys[None, :] <= pos[:, None]) & (keys[None, :] >= pos[:, None] - left)
            qk = tl.where(visible, qk * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            m_use = tl.where(m_ij == float("-inf"), 0.0, m_ij)   # a row that has seen nothing yet
            p = tl.math.exp2(qk - m_use[:, None])
            alpha = tl.math.exp2(m_i - m_use)                   # rescale what came before
            if QUANT:   # sum_j p_j (c_j s_j) = s_max sum_j (p_j s_j / s_max) c_j: float16 weights in [0, 1]
                v_max = tl.max(v_sc, 0)
                v_max = tl.where(v_max > 0.0, v_max, 1.0)   # scales all 0 (legal: values 0)
                acc = acc * alpha[:, None] + v_max * tl.dot((p * (v_sc / v_max)[None, :]).to(tl.float16), v)
            else:
                acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            m_i = m_ij

        seen = l_i > 0.0                                      # a row that saw no key: out 0, lse -inf
        l_safe = tl.where(seen, l_i, 1.0)
        out = acc / l_safe[:, None]
        lse2 = tl.where(seen, m_i + tl.math.log2(l_safe), float("-inf"))
        if SPLIT:   # partial results, (batch, q_len, q_heads, n_splits[, head_dim]) float32
            part = ((b64 * q_len + qi) * q_heads + head) * n_splits + pid_s
            tl.store(O_PART + part[:, None] * HEAD_DIM + offs_d[None, :], out,
                     mask=row_ok[:, None] & d_ok[None, :])
            tl.store(LSE_PART + part, lse2, mask=row_ok)
        else:       # one split: this is the answer
            o_rows = b64 * so_b + qi.to(tl.int64) * so_n + head.to(tl.int64) * so_h
            tl.store(O + o_rows[:, None] + offs_d[None, :], out.to(O.dtype.element_ty),
                     mask=row_ok[:, None] & d_ok[None, :])
            l_rows = b64 * sl_b + qi.to(tl.int64) * sl_n + head.to(tl.int64) * sl_h
            tl.store(LSE + l_rows, lse2 * 0.6931471805599453, mask=row_ok)

    @triton.jit
    def _merge_kernel(O_PART, LSE_PART, O, LSE, n_splits, so_b, so_n, so_h, sl_b, sl_n, sl_h,
                      HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr):
        """One (head, query, sequence): out = sum_s w_s o_s / sum_s w_s, w_s = 2^(lse_s - max)."""
        off_h = tl.program_id(0)
        off_i = tl.program_id(1)
        off_b = tl.program_id(2)
        q_heads = tl.num_programs(0)
        q_len = tl.num_programs(1)
        row = (off_b.to(tl.int64) * q_len + off_i) * q_heads + off_h
        offs_s = tl.arange(0, BLOCK_S)
        offs_d = tl.arange(0, BLOCK_D)
        s_ok = offs_s < n_splits
        d_ok = offs_d < HEAD_DIM
        lse = tl.load(LSE_PART + row * n_splits + offs_s, mask=s_ok, other=float("-inf"))
        m = tl.max(lse, 0)
        m_use = tl.where(m == float("-inf"), 0.0, m)
        w = tl.math.exp2(lse - m_use)                         # an empty split weighs 0
        denom = tl.sum(w, 0)
        o = tl.load(O_PART + (row * n_splits + offs_s)[:, None] * HEAD_DIM + offs_d[None, :],
                    mask=s_ok[:, None] & d_ok[None, :], other=0.0)
        seen = denom > 0.0
        out = tl.sum(w[:, None] * o, 0) / tl.where(seen, denom, 1.0)
        lse_out = tl.where(seen, (m_use + tl.math.log2(tl.where(seen, denom, 1.0))) * 0.6931471805599453,
                           float("-inf"))
        base_o = off_b.to(tl.int64) * so_b + off_i.to(tl.int64) * so_n + off_h.to(tl.int64) * so_h
        tl.store(O + base_o + offs_d, out.to(O.dtype.element_ty), mask=d_ok)
        tl.store(LSE + off_b.to(tl.int64) * sl_b + off_i.to(tl.int64) * sl_n + off_h.to(tl.int64) * sl_h, lse_out)


# ------------------------------------------------------------------- launch configuration
def decode_config(head_dim: int, device: torch.device, rows: int = 1) -> dict:
    """Tile and split parameters. Under the interpreter the tiles are small and splits are cut
    after a single tile, so the short test contexts cross many tiles and many splits (the merge,
    the partial last tile and empty splits all run). On the GPU: BLOCK_N keys per tile, warps and
    pipeline stages from the H200 sweep of bench/cases/paged_attention.py (tag tiles; 64, 4, 2 were
    best at every measured decode shape; docs/paged_attention.md), about 4 x SMs programs in all.
    ``rows`` = q_len x group query rows per program: above 16 (speculative verify, q_len 5 at
    GQA 4: 20 rows in a 32-row tile) 128 keys per tile where the GPU has the shared memory for two
    stages of 128 x 128 K and V tiles (128 KB; H100 sweep of ``bench/paged_plan_shapes.py --sweep``:
    2.82-2.97 TB/s against 2.31 at 64 keys, SDPA-cuDNN 3.00)."""
    if device.type != "cuda":
        return dict(BLOCK_N=16, num_warps=4, num_stages=1, programs=16, min_tiles=1)
    sms = sm_count(device)
    if head_dim > 128:  # not swept: half the keys per tile keeps the K/V stages' shared memory
        return dict(BLOCK_N=32, num_warps=4, num_stages=2, programs=4 * sms, min_tiles=8)
    if rows > 16 and shared_memory_per_block(device) >= 160 * 1024:
        return dict(BLOCK_N=128, num_warps=4, num_stages=2, programs=4 * sms, min_tiles=4)
    return dict(BLOCK_N=64, num_warps=4, num_stages=2, programs=4 * sms, min_tiles=4)


def split_plan(lens: list[int], q_len: int, window: int | None, units: int, block_n: int, programs: int,
               min_tiles: int, splits: int | None = None) -> tuple[int, int]:
    """(n_splits, split_len): cut the longest visible stretch into splits of split_len positions
    (a multiple of block_n), so that at most about ``programs`` programs run in all (``units`` =
    batch x kv_heads of them per split; a batch that fills the GPU alone is not split: on the
    H200 one split was fastest at 512 units, 2 splits 2 % slower), each with at least
    ``min_tiles`` tiles. ``splits`` forces a count (benchmarks)."""
    if window is None:
        span = max(lens, default=0)
    else:
        span = max((n - first_visible(n, q_len, window) // block_n * block_n for n in lens), default=0)
    tiles = max(1, -(-span // block_n))
    if splits is None:
        splits = max(1, min(programs // max(units, 1), tiles // max(min_tiles, 1), MAX_SPLITS))
    splits = max(1, min(splits, tiles, MAX_SPLITS))
    per_split = -(-tiles // splits)
    return -(-tiles // per_split), per_split * block_n


def kernel_supports(q: torch.Tensor, k_cache: torch.Tensor) -> bool:
    """True if paged_attention on these tensors runs the Triton kernels (module doc)."""
    if triton is None or q.dtype not in KERNEL_DTYPES or not 1 <= q.shape[-1] <= 256:
        return False
    q_len = 1 if q.dim() == 3 else q.shape[1]
    if q_len * (q.shape[-2] // k_cache.shape[2]) > MAX_ROWS:
        return False
    return triton_runs_on(q)


def _unit_last(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()



class Launch(NamedTuple):
    """Everything a launch needs that the host decides once (``launch_plan``): the grid's split
    count and stretch, the tiles and warps, and the split workspace (None with one split)."""
    n_splits: int
    split_len: int
    left: int
    block_d: int
    block_m: int
    block_n: int
    cfg: dict
    o_part: torch.Tensor | None
    lse_part: torch.Tensor | None


def launch_plan(q4_shape, kv_heads: int, lens: list[int], window, device, *, max_seq_len: int | None = None,
                config=None, splits=None) -> Launch:
    """The host's half of a decode call: splits and tiles for the lengths ``lens`` -- or, given
    ``max_seq_len``, for every length up to it (with a window a row's keys then span at most
    ``q_len + window`` positions plus a tile) -- and the float32 split workspace."""
    batch, q_len, q_heads, head_dim = q4_shape
    group = q_heads // kv_heads
    cfg = dict(config or decode_config(head_dim, device, rows=q_len * group))
    block_n, programs, min_tiles = cfg.pop("BLOCK_N"), cfg.pop("programs"), cfg.pop("min_tiles")
    if max_seq_len is not None:   # any row of at most max_seq_len keys
        lens = [max_seq_len if window is None else min(max_seq_len, q_len + window + block_n - 1)]
    n_splits, split_len = split_plan(lens, q_len, window if max_seq_len is None else None, batch * kv_heads,
                                     block_n, programs, min_tiles, splits)
    block_m = max(16, triton.next_power_of_2(q_len * group))
    if device.type == "cuda" and block_m >= 64:  # many speculative rows: more warps for the larger tiles
        cfg["num_warps"] = max(cfg["num_warps"], 8)
    o_part = lse_part = None
    if n_splits > 1:
        o_part = torch.empty((batch, q_len, q_heads, n_splits, head_dim), dtype=torch.float32, device=device)
        lse_part = torch.empty((batch, q_len, q_heads, n_splits), dtype=torch.float32, device=device)
    return Launch(n_splits, split_len, UNBOUNDED if window is None else min(int(window), UNBOUNDED),
                  max(16, triton.next_power_of_2(head_dim)), block_m, block_n, cfg, o_part, lse_part)


def launch(lp: Launch, q4, k_cache, v_cache, block_tables, seq_lens, scale: float, *, k_scale=None, v_scale=None):
    """The device's half: the split kernel (and the merge with more than one split) on checked
    inputs, reading ``seq_lens`` and the table on the device only. No host sync; allocates only
    out and lse (capturable in a CUDA graph)."""
    batch, q_len, q_heads, head_dim = q4.shape
    block_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    q4, k_cache, v_cache = _unit_last(q4), _unit_last(k_cache), _unit_last(v_cache)
    out = torch.empty(q4.shape, dtype=q4.dtype, device=q4.device)
    lse = torch.empty((batch, q_len, q_heads), dtype=torch.float32, device=q4.device)
    split = lp.n_splits > 1
    o_part, lse_part = (lp.o_part, lp.lse_part) if split else (out, lse)
    quant = 0 if k_scale is None else (2 if k_cache.dtype == torch.int8 else 1)
    ks, vs = (q4, q4) if k_scale is None else (k_scale, v_scale)
    s_ks = (0, 0, 0) if k_scale is None else k_scale.stride()
    s_vs = (0, 0, 0) if k_scale is None else v_scale.stride()
    with torch.cuda.device(q4.device) if q4.is_cuda else contextlib.nullcontext():
        _split_kernel[(lp.n_splits, kv_heads, batch)](
            q4, k_cache, v_cache, block_tables, seq_lens, out, lse, o_part, lse_part,
            q4.stride(0), q4.stride(1), q4.stride(2),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_tables.stride(0),
            out.stride(0), out.stride(1), out.stride(2), lse.stride(0), lse.stride(1), lse.stride(2),
            q_len, q_heads, q_heads // kv_heads, lp.left, lp.split_len, scale * LOG2E,
            ks, vs, *s_ks, *s_vs,
            HEAD_DIM=head_dim, BLOCK_D=lp.block_d, BLOCK_M=lp.block_m, BLOCK_N=lp.block_n,
            BLOCK_SIZE=block_size, SPLIT=split, QUANT=quant, **lp.cfg)
        if split:
            _merge_kernel[(q_heads, q_len, batch)](
                o_part, lse_part, out, lse, lp.n_splits,
                out.stride(0), out.stride(1), out.stride(2), lse.stride(0), lse.stride(1), lse.stride(2),
                HEAD_DIM=head_dim, BLOCK_D=lp.block_d, BLOCK_S=max(2, triton.next_power_of_2(lp.n_splits)),
                num_warps=4)
    return out, lse


def _paged_decode(q4, k_cache, v_cache, block_tables, seq_lens, lens, scale, window, *,
                  config=None, splits=None, k_scale=None, v_scale=None):
    """Plan and launch in one go on checked inputs. ``q4`` is (batch, q_len, q_heads, head_dim);
    ``lens`` the host copy of ``seq_lens``. Returns (out like q4, lse (batch, q_len, q_heads)
    float32). With ``k_scale``/``v_scale`` (num_blocks, block_size, kv_heads) float32 the caches
    hold float8_e4m3fn or int8 codes (optimized/kv_quant.py), dequantised in registers."""
    lp = launch_plan(q4.shape, k_cache.shape[2], lens, window, q4.device, config=config, splits=splits)
    return launch(lp, q4, k_cache, v_cache, block_tables, seq_lens, scale, k_scale=k_scale, v_scale=v_scale)


def paged_attention_unchecked(q, k_cache, v_cache, block_tables, seq_lens, *, lens: list[int],
                              scale: float | None = None, window: int | None = None,
                              config: dict | None = None, splits: int | None = None,
                              return_lse: bool = False):
    """The kernels alone, on inputs checked once already: ``lens`` is the host copy of ``seq_lens``
    that ``check_paged_attention_inputs`` returns. Same results as paged_attention where the
    kernels run (``kernel_supports``), without the checks' device-to-host copy and sync: what an
    engine replays in a CUDA graph, and what the benchmarks time. ``config`` replaces
    decode_config's dict; ``splits`` forces the split-KV count (``plan``)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    decode = q.dim() == 3
    out, lse = _paged_decode(q.unsqueeze(1) if decode else q, k_cache, v_cache, block_tables, seq_lens,
                             lens, scale, window, config=config, splits=splits)
    if decode:
        out, lse = out[:, 0], lse[:, 0]
    return (out, lse) if return_lse else out


class PagedAttentionPlan:
    """reference.paged_attention.PagedAttentionPlan (the contract: plan once on the host, run many
    times on the device) on the split-KV kernels. ``plan`` validates (one device-to-host copy of
    the lengths and the table), chooses the split count and tiles for the longest sequence a run
    may see (``max_seq_len``; with a window, at most ``q_len + window`` keys plus a tile), and
    allocates the split workspace; ``run`` compares the tensors' metadata with the plan's and
    launches: no sync, no allocation but the outputs, safe to capture in a CUDA graph. Where the
    kernels do not run (``kernel_supports``) run computes the reference's device-masked math
    (``masked_paged_attention``, also sync-free) on the arguments checked once by the plan.
    ``config``/``splits`` replace decode_config's tiles / force the split count (tuning)."""

    def __init__(self):
        self._plan: dict | None = None

    def plan(self, q, k_cache, v_cache, block_tables, seq_lens, *, scale: float | None = None,
             window: int | None = None, max_seq_len: int | None = None, config: dict | None = None,
             splits: int | None = None) -> None:
        lens = check_paged_attention_inputs(q, k_cache, v_cache, block_tables, seq_lens, window, scale)
        max_seq_len = check_max_seq_len(max_seq_len, lens, block_tables, k_cache)
        meta = run_metadata(q, k_cache, v_cache, block_tables, seq_lens)
        if not kernel_supports(q, k_cache) or q.numel() == 0:   # the reference's device-masked math
            self._plan = dict(meta=meta, decode=q.dim() == 3,
                              fallback=dict(max_seq_len=max_seq_len, scale=scale, window=window))
            return
        q4_shape = (q.shape[0], 1 if q.dim() == 3 else q.shape[1], q.shape[-2], q.shape[-1])
        lp = launch_plan(q4_shape, k_cache.shape[2], lens, window, q.device, max_seq_len=max_seq_len,
                         config=config, splits=splits)
        self._plan = dict(meta=meta, fallback=None, launch=lp, decode=q.dim() == 3,
                          scale=1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale))

    def run(self, q, k_cache, v_cache, block_tables, seq_lens, *, return_lse: bool = False):
        p = self._plan
        if p is None:
            raise RuntimeError("run before plan: call plan(...) with this batch's metadata first")
        check_run_metadata(p["meta"], q, k_cache, v_cache, block_tables, seq_lens)
        q4 = q.unsqueeze(1) if p["decode"] else q
        if p["fallback"] is not None:
            out, lse = masked_paged_attention(q4, k_cache, v_cache, block_tables, seq_lens, **p["fallback"])
        else:
            out, lse = launch(p["launch"], q4, k_cache, v_cache, block_tables, seq_lens, p["scale"])
        if p["decode"]:
            out, lse = out[:, 0], lse[:, 0]
        return (out, lse) if return_lse else out


def paged_attention(q, k_cache, v_cache, block_tables, seq_lens, *, scale: float | None = None,
                    window: int | None = None, return_lse: bool = False):
    """reference.paged_attention.paged_attention, computed by the split-KV kernels (module doc):
    a plan for this batch, then its run."""
    plan = PagedAttentionPlan()
    plan.plan(q, k_cache, v_cache, block_tables, seq_lens, scale=scale, window=window)
    return plan.run(q, k_cache, v_cache, block_tables, seq_lens, return_lse=return_lse)
