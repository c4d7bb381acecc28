"""Paged attention (optimized/paged_attention.py): decode over a block table against torch SDPA
reading the same K/V stored contiguously (docs/paged_attention.md, docs/performance.md).

Shapes (batch x context): 32 query / 8 KV heads, D = 128, bf16, blocks of 16 whose ids are a
random permutation of the pool, every sequence at the full context. Providers:
    ours (graph)    the kernels alone (``paged_attention_unchecked``: split + merge), CUDA-graph replay
    ours (eager)    the same launched from Python
    run (graph)     the public plan/run API: ``PagedAttentionPlan.plan`` once (setup), ``run`` timed,
                    CUDA-graph replay (what an engine does); ``run (eager)`` launched from Python
    ours (call)     ``paged_attention`` itself: input checks (a device-to-host copy of seq_lens and
                    the block table) + kernels, eager
    checks alone    ``check_paged_attention_inputs`` alone (eager)
    sdpa_cudnn      SDPA's CUDNN_ATTENTION backend on (B, 8, N, 128) K/V, the GQA group folded into
                    the query length (q (B, 8, 4, 128): the cache is read once), graph replay; also eager
    sdpa_flash      the same with the FLASH_ATTENTION backend
    ours splits=S   the kernels with the split-KV count forced (``splits``), graph replay
Bandwidth = KV bytes (2 x B x N x 8 x 128 x 2 B) / time; CUDA events, L2 flushed before each call,
medians. Ceilings in the same run: a 2 GiB device-to-device copy (bytes read + written) and a
2 GiB bf16 read (``torch.sum``). Correctness first: two sequences against the float64 oracle
(tolerance rule), every sequence against SDPA-cuDNN (max difference recorded).
Tags: ``ceiling``, ``splits`` (the split counts around the planner's choice), ``tiles`` (with
``sweep``: BLOCK_N x warps x stages x split counts), ``smoke`` (tiny CPU shapes, the kernels under
the Triton interpreter).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import optimized.paged_attention as pa
from bench.runner import Case, P, Unavailable, extra_rows
from conformance.tolerance import assert_close_to_oracle
from reference.attention import attention as ref_attention
from reference.paged_attention import check_paged_attention_inputs
from reference.paged_attention import paged_attention as ref_paged_attention

SHAPES = ((64, 4096), (1, 32768), (256, 512))
Q_HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 8, 128, 16
SPLITS = {(64, 4096): (1, 2), (1, 32768): (32, 40, 44, 48, 56, 64, 80, 96, 128), (256, 512): (1, 2)}
SWEEP = [(bn, w, s) for bn in (32, 64, 128) for w in (4, 8) for s in (2, 3, 4)]
SWEEP_SPLITS = {(64, 4096): (1, 2, 4), (1, 32768): (16, 32, 64, 128), (256, 512): (1, 2)}
DEFAULT_TIMING = dict(warmup_ms=25, budget_ms=100)


def kv_bytes(batch, n, kv_heads=KV_HEADS, head_dim=HEAD_DIM, element_size=2) -> int:
    return 2 * batch * n * kv_heads * head_dim * element_size


def _params(batch, n, q_heads=Q_HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, dtype="bf16", block=BLOCK):
    return dict(batch=batch, context=n, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, block_size=block,
                dtype=dtype)


def _decode_case(batch, n, providers, tags=(), suffix="", devices=("cuda",), timing=None, **shape) -> Case:
    p = _params(batch, n, **shape)
    return Case(f"decode {batch} x {n}{suffix}", p, tuple(providers), metric="TB/s",
                work=kv_bytes(batch, n, p["kv_heads"], p["head_dim"]), devices=devices, tags=tags, timing=timing or {})


MAIN = (P("run (graph)", "run", graph=True), P("run (eager)", "run"),
        P("ours (graph)", "ours", graph=True), P("ours (eager)", "ours"), P("ours (call)", "call"),
        P("checks alone", "checks"), P("sdpa_cudnn", "sdpa", graph=True, backend="cudnn"),
        P("sdpa_cudnn (eager)", "sdpa", backend="cudnn"), P("sdpa_flash", "sdpa", graph=True, backend="flash"),
        P("sdpa_flash (eager)", "sdpa", backend="flash"))
GiB2 = 1 << 30   # bf16 elements: 2 GiB
CASES = (
    [Case("ceiling: copy 2 GiB bf16", dict(elements=GiB2), (P("copy_", "copy"),), metric="TB/s", work=2 * 2 * GiB2,
          tags=("ceiling",)),
     Case("ceiling: read 2 GiB bf16 (sum)", dict(elements=GiB2), (P("torch.sum", "read"),), metric="TB/s",
          work=2 * GiB2, tags=("ceiling",))]
    + [_decode_case(b, n, MAIN, ("main",)) for b, n in SHAPES]
    + [_decode_case(b, n, [P(f"ours splits={s}", "ours", graph=True, splits=s) for s in SPLITS[(b, n)]], ("splits",),
                    suffix=" splits") for b, n in SHAPES]
    + [_decode_case(b, n, [P(f"ours BLOCK_N {bn} w{w} s{st} splits={sp}", "ours", graph=True, splits=sp,
                             config=dict(BLOCK_N=bn, num_warps=w, num_stages=st, min_tiles=1))
                           for bn, w, st in SWEEP for sp in SWEEP_SPLITS[(b, n)]], ("tiles", "sweep"), suffix=" tiles")
       for b, n in SHAPES]
    + [_decode_case(2, 80, [P("ours (eager)", "ours"), P("ours splits=2", "ours", splits=2), P("ours (call)", "call"),
                            P("reference", "reference")], ("smoke",), devices=("cpu",), q_heads=4, kv_heads=2,
                    head_dim=16, dtype="fp16", timing=dict(repeats=2, budget_ms=None, min_warmup=1, warmup_ms=0))])


def setup(case, device, seed: int = 0):
    p = case.params
    if "elements" in p:
        src = torch.randn(p["elements"], device=device, dtype=torch.bfloat16)
        return dict(src=src, dst=torch.empty_like(src))
    batch, n, hq, hkv, d, block = p["batch"], p["context"], p["q_heads"], p["kv_heads"], p["head_dim"], p["block_size"]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[p["dtype"]]
    g = torch.Generator(device=device).manual_seed(seed)
    kw = dict(device=device, dtype=dtype, generator=g)
    q = torch.randn(batch, hq, d, **kw)
    k = torch.randn(batch, hkv, n, d, **kw)      # contiguous, SDPA's layout
    v = torch.randn(batch, hkv, n, d, **kw)
    per_seq = -(-n // block)
    num_blocks = batch * per_seq
    tables = torch.randperm(num_blocks, device=device, generator=g).reshape(batch, per_seq).to(torch.int32)
    k_cache = torch.zeros(num_blocks, block, hkv, d, device=device, dtype=dtype)
    v_cache = torch.zeros_like(k_cache)
    pad = per_seq * block - n
    for src, cache in ((k, k_cache), (v, v_cache)):   # (B, KVH, N, D) -> the blocks of each table row
        blocks = F.pad(src, (0, 0, 0, pad)).permute(0, 2, 1, 3).reshape(batch * per_seq, block, hkv, d)
        cache[tables.long().reshape(-1)] = blocks
    lens = torch.full((batch,), n, device=device, dtype=torch.int32)
    return dict(q=q, k=k, v=v, k_cache=k_cache, v_cache=v_cache, tables=tables, lens=lens, lens_list=[n] * batch)


def check(prob, case, device) -> dict:
    """Two sequences against the float64 oracle (tolerance rule); every sequence against SDPA."""
    if "q" not in prob:
        return dict(ok=True)
    batch = prob["q"].shape[0]
    rows = sorted({0, batch - 1})
    ours = pa.paged_attention_unchecked(prob["q"], prob["k_cache"], prob["v_cache"], prob["tables"], prob["lens"],
                                        lens=prob["lens_list"])
    q = prob["q"][rows].unsqueeze(2)              # (r, H, 1, D)
    k, v = prob["k"][rows], prob["v"][rows]
    oracle = ref_attention(q.double(), k.double(), v.double())[:, :, 0]
    low = ref_attention(q, k, v)[:, :, 0]
    out = dict(ok=True, checked_rows=rows, max_abs_err_vs_oracle=float((ours[rows].double() - oracle).abs().max()),
               reference_err=float((low.double() - oracle).abs().max()))
    try:
        assert_close_to_oracle(ours[rows], low, oracle, name="paged out vs float64 oracle")
    except AssertionError as exc:
        out.update(ok=False, error=str(exc).splitlines()[0])
    try:
        sdpa = _sdpa(prob, case, device, "cudnn" if device == "cuda" else None)()
        out["max_abs_diff_vs_sdpa"] = float((ours.float() - sdpa.float()).abs().max())
    except RuntimeError as exc:   # a backend that refuses the shape
        out["sdpa"] = str(exc).splitlines()[0][:200]
    return out


def _ours(prob, case, device, config=None, splits=None):
    if config is not None:
        config = dict(config, programs=pa.decode_config(case.params["head_dim"], torch.device(device))["programs"])
    args = (prob["q"], prob["k_cache"], prob["v_cache"], prob["tables"], prob["lens"])
    plan_cfg = config or pa.decode_config(case.params["head_dim"], torch.device(device))
    info = dict(plan=pa.split_plan(prob["lens_list"], 1, None, case.params["batch"] * case.params["kv_heads"],
                             plan_cfg["BLOCK_N"], plan_cfg["programs"], plan_cfg["min_tiles"], splits))
    if config is not None or splits is not None:
        want = pa.paged_attention_unchecked(*args, lens=prob["lens_list"])
        got = pa.paged_attention_unchecked(*args, lens=prob["lens_list"], config=config, splits=splits)
        info["max_abs_diff_vs_default"] = float((got.float() - want.float()).abs().max())
        if info["max_abs_diff_vs_default"] > 2e-2:
            raise Unavailable(f"differs from the default configuration by {info['max_abs_diff_vs_default']:.3g}")
    return (lambda: pa.paged_attention_unchecked(*args, lens=prob["lens_list"], config=config, splits=splits)), info


def _sdpa(prob, case, device, backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    p = case.params
    batch, group = p["batch"], p["q_heads"] // p["kv_heads"]
    qg = prob["q"].reshape(batch, p["kv_heads"], group, p["head_dim"])   # head h = kvh * group + g
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}

    def run():
        if backend is None:
            return F.scaled_dot_product_attention(qg, prob["k"], prob["v"]).reshape(batch, p["q_heads"], p["head_dim"])
        with sdpa_kernel([backends[backend]]):
            return F.scaled_dot_product_attention(qg, prob["k"], prob["v"]).reshape(batch, p["q_heads"], p["head_dim"])
    return run


def _run(prob, case, device, extra: float = 0.0):
    """The public two-step API: one plan (host checks, splits, workspace), then ``run`` alone.
    ``extra`` (the regression gate's planted slowdown, bench/gate_proof.py, never a default):
    also run a second plan over the first ``max(1, round(extra x batch))`` sequences."""
    args = (prob["q"], prob["k_cache"], prob["v_cache"], prob["tables"], prob["lens"])
    plan = pa.PagedAttentionPlan()
    plan.plan(*args)
    if not extra:
        return lambda: plan.run(*args)
    r = extra_rows(prob["q"].shape[0], extra)
    more = (prob["q"][:r], prob["k_cache"], prob["v_cache"], prob["tables"][:r], prob["lens"][:r])
    plan2 = pa.PagedAttentionPlan()
    plan2.plan(*more)
    return lambda: (plan.run(*args), plan2.run(*more))[0]



BUILDERS = {
    "ours": _ours,
    "run": _run,
    "call": lambda prob, case, device: lambda: pa.paged_attention(prob["q"], prob["k_cache"], prob["v_cache"],
                                                                  prob["tables"], prob["lens"]),
    "checks": lambda prob, case, device: lambda: check_paged_attention_inputs(
        prob["q"], prob["k_cache"], prob["v_cache"], prob["tables"], prob["lens"], None, None),
    "reference": lambda prob, case, device: lambda: ref_paged_attention(prob["q"], prob["k_cache"], prob["v_cache"],
                                                                        prob["tables"], prob["lens"]),
    "sdpa": _sdpa,
    "copy": lambda prob, case, device: lambda: prob["dst"].copy_(prob["src"]),
    "read": lambda prob, case, device: lambda: torch.sum(prob["src"], dtype=torch.float32),
}
