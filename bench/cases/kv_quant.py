"""KV-cache quantisation (optimized/kv_quant.py): FP8 (and INT8) paged decode against the bf16 paged
decode of optimized/paged_attention.py, same kernel, same shapes (docs/kv_quant.md).

Shapes: batch 64, every sequence at the full context 4k / 8k / 16k / 32k, 32 query / 8 KV heads,
D = 128, blocks of 16 whose ids are a random permutation of the pool. Providers, timed alternately
in one case (so the speed-up is a ratio measured in one run):
    bf16 (graph)    paged_attention_unchecked on the bf16 cache (the baseline)
    fp8 (graph)     quantized_paged_attention_unchecked on float8_e4m3fn codes + float32 scales
    int8 (graph)    the same on int8 codes
    fp8 (call)      quantized_paged_attention itself (input checks + kernels), eager
All CUDA-graph replays except "(call)"; CUDA events, L2 flushed before each call, medians.

Metric: ms per decode step; each provider records ``bytes_read``, the bytes it must read
(bf16: 2 x B x N x 8 x 128 x 2; fp8/int8: 2 x B x N x 8 x (128 + 4), codes + scales, i.e.
reference.kv_quant.quantized_kv_bytes with layers=1), so throughput = bytes_read / median time,
and the speed-up is bf16's median / fp8's (goal >= 1.8x: the bytes shrink 1.94x). ``table(path)``
prints the docs' table from the JSON:

    python -m bench run --concept kv_quant --out docs/results/kv_quant_h200.json
    python -c "from bench.cases.kv_quant import table; table('docs/results/kv_quant_h200.json')"

Correctness first (``check``): on two sequences, the fp8 and int8 kernels against the float64
attention over the dequantised cache (tolerance rule), and the float64 attention over the
dequantised cache against the float64 attention over the original bf16 cache, with the derived
bound of spec_tests/kv_quant/oracles.py (recorded: the largest error, the bound there, the ratio).
Tag ``smoke``: tiny CPU shapes, the kernels under the Triton interpreter. Tag ``tiles``: the fp8
kernel at BLOCK_N 64/128 x warps 4/8 x stages 2/3/4, and 128/2/3, 256/4/2, 256/8/2, at 64 x 8k and
64 x 32k, beside bf16 (optimized/kv_quant.py quant_decode_config holds the chosen tile: 128/4/3
from the H100 run of this sweep):

    python -m bench run --concept kv_quant --tag tiles --out $OUT/kv_quant_h200_tiles.json
"""
from __future__ import annotations

import json

import torch

import optimized.paged_attention as pa
from bench.runner import Case, P
from conformance.tolerance import assert_close_to_oracle
from optimized import kv_quant as kq
from reference.kv_quant import quantize_kv, quantized_kv_bytes
from reference.kv_quant import quantized_paged_attention as ref_quantized
from spec_tests.kv_quant.oracles import attention64, attention_bound, dequantized

CONTEXTS = (4096, 8192, 16384, 32768)
BATCH, Q_HEADS, KV_HEADS, HEAD_DIM, BLOCK = 64, 32, 8, 128, 16
DEFAULT_TIMING = dict(warmup_ms=25, budget_ms=200)
CODES = {"fp8": torch.float8_e4m3fn, "int8": torch.int8}


def bytes_read(batch, n, kv_heads=KV_HEADS, head_dim=HEAD_DIM, fmt="bf16") -> int:
    """Bytes of K and V one decode step reads (one layer)."""
    dtype = torch.bfloat16 if fmt == "bf16" else CODES[fmt]
    return quantized_kv_bytes(layers=1, kv_heads=kv_heads, head_dim=head_dim, seq_len=n, batch=batch, dtype=dtype)


def _params(batch, n, q_heads=Q_HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, block=BLOCK, dtype="bf16"):
    return dict(batch=batch, context=n, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, block_size=block,
                dtype=dtype)


MAIN = (P("bf16 (graph)", "bf16", graph=True), P("fp8 (graph)", "quant", graph=True, fmt="fp8"),
        P("int8 (graph)", "quant", graph=True, fmt="int8"), P("fp8 (call)", "call", fmt="fp8"))
SWEEP = [(bn, w, st) for bn in (64, 128) for w in (4, 8) for st in (2, 3, 4)] + [(128, 2, 3), (256, 4, 2), (256, 8, 2)]
CASES = (
    [Case(f"decode {BATCH} x {n}", _params(BATCH, n), MAIN, metric="ms", tags=("main",)) for n in CONTEXTS]
    + [Case(f"decode {BATCH} x {n} fp8 tiles", _params(BATCH, n),
            (P("bf16 (graph)", "bf16", graph=True),)
            + tuple(P(f"fp8 BLOCK_N {bn} w{w} s{st}", "quant", graph=True, fmt="fp8",
                      config=dict(BLOCK_N=bn, num_warps=w, num_stages=st, min_tiles=4)) for bn, w, st in SWEEP),
            metric="ms", tags=("tiles", "sweep")) for n in (8192, 32768)]
    + [Case("decode 2 x 80 smoke", _params(2, 80, q_heads=4, kv_heads=2, head_dim=16, dtype="fp16"),
            (P("bf16 (eager)", "bf16"), P("fp8 (eager)", "quant", fmt="fp8"), P("int8 (eager)", "quant", fmt="int8"),
             P("fp8 (call)", "call", fmt="fp8")),
            metric="ms", devices=("cpu",), tags=("smoke",),
            timing=dict(repeats=2, budget_ms=None, min_warmup=1, warmup_ms=0))])


def setup(case, device, seed: int = 0):
    """A float cache (bf16 / fp16) in paged layout and its fp8 and int8 quantisations."""
    p = case.params
    batch, n, hq, hkv, d, block = p["batch"], p["context"], p["q_heads"], p["kv_heads"], p["head_dim"], p["block_size"]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[p["dtype"]]
    g = torch.Generator(device=device).manual_seed(seed)
    per_seq = -(-n // block)
    num_blocks = batch * per_seq
    q = torch.randn(batch, hq, d, device=device, dtype=dtype, generator=g)
    k_cache = torch.randn(num_blocks, block, hkv, d, device=device, dtype=dtype, generator=g)
    v_cache = torch.randn(num_blocks, block, hkv, d, device=device, dtype=dtype, generator=g)
    tables = torch.randperm(num_blocks, device=device, generator=g).reshape(batch, per_seq).to(torch.int32)
    lens = torch.full((batch,), n, device=device, dtype=torch.int32)
    prob = dict(q=q, k_cache=k_cache, v_cache=v_cache, tables=tables, lens=lens, lens_list=[n] * batch)
    for fmt, code in CODES.items():
        parts = {}
        for name, cache in (("k", k_cache), ("v", v_cache)):
            codes = torch.empty(cache.shape, dtype=code, device=device)
            scale = torch.empty(cache.shape[:-1], dtype=torch.float32, device=device)
            for i in range(0, num_blocks, 4096):    # in chunks: quantize_kv's float32 temporaries stay small
                codes[i:i + 4096], scale[i:i + 4096] = quantize_kv(cache[i:i + 4096], code)
            parts[name] = (codes, scale)
        prob[fmt] = (parts["k"][0], parts["v"][0], parts["k"][1], parts["v"][1])
    return prob


def _sequence(prob, fmt, b):
    """Sequence b's positions, contiguous: (original K, V) and the (codes, scale) of each."""
    rows = prob["tables"][b].long()
    n = prob["lens_list"][b]
    take = lambda t: t[rows].flatten(0, 1)[:n]  # noqa: E731
    kc, vc, ks, vs = prob[fmt]
    return take(prob["k_cache"]), take(prob["v_cache"]), (take(kc), take(ks)), (take(vc), take(vs))


def check(prob, case, device) -> dict:
    """Two sequences: each format's kernel vs float64 attention over its dequantised cache (tolerance
    rule); that attention vs float64 attention over the original cache, against the derived bound."""
    batch = prob["q"].shape[0]
    rows = sorted({0, batch - 1})
    out = dict(ok=True, checked_rows=rows)
    for fmt in CODES:
        kc, vc, ks, vs = prob[fmt]
        args = (prob["q"], kc, vc, ks, vs, prob["tables"], prob["lens"])
        ours = kq.quantized_paged_attention_unchecked(*args, lens=prob["lens_list"])
        low = ref_quantized(prob["q"][rows], kc, vc, ks, vs, prob["tables"][rows], prob["lens"][rows])
        q4 = prob["q"][rows].unsqueeze(1).cpu()
        seqs = [_sequence(prob, fmt, b) for b in rows]
        k = [s[0].cpu() for s in seqs]
        v = [s[1].cpu() for s in seqs]
        khat = [dequantized(*(t.cpu() for t in s[2])) for s in seqs]
        vhat = [dequantized(*(t.cpu() for t in s[3])) for s in seqs]
        oracle_q = attention64(q4, khat, vhat)[0][:, 0]
        oracle = attention64(q4, k, v)[0][:, 0]
        bound = attention_bound(q4, k, v, fmt)[0][:, 0]
        err = (oracle_q - oracle).abs()
        worst = int(torch.argmax(err / bound))
        out[fmt] = dict(max_abs_err_vs_dequantized=float((ours[rows].cpu().double() - oracle_q).abs().max()),
                        max_abs_err_vs_unquantized=float((ours[rows].cpu().double() - oracle).abs().max()),
                        exact_quantized_err=float(err.max()), bound_at_worst=float(bound.flatten()[worst]),
                        err_over_bound=float((err / bound).max()),
                        max_abs_diff_vs_bf16_kernel=float((ours.float() - pa.paged_attention_unchecked(
                            prob["q"], prob["k_cache"], prob["v_cache"], prob["tables"], prob["lens"],
                            lens=prob["lens_list"]).float()).abs().max()))
        try:
            assert_close_to_oracle(ours[rows].cpu(), low.cpu(), oracle_q, name=f"{fmt} out vs dequantised oracle")
            if bool((err > bound).any()):
                raise AssertionError(f"{fmt}: exact quantised attention outside the derived bound")
        except AssertionError as exc:
            out.update(ok=False, error=str(exc).splitlines()[0])
    return out


def _bf16(prob, case, device):
    p = case.params
    info = dict(bytes_read=bytes_read(p["batch"], p["context"], p["kv_heads"], p["head_dim"], "bf16"))
    args = (prob["q"], prob["k_cache"], prob["v_cache"], prob["tables"], prob["lens"])
    return (lambda: pa.paged_attention_unchecked(*args, lens=prob["lens_list"])), info


def _quant(prob, case, device, fmt, config=None):
    """The quantised kernels alone; ``config`` (the tile sweep) replaces quant_decode_config's tiles,
    keeping its program count."""
    p = case.params
    info = dict(bytes_read=bytes_read(p["batch"], p["context"], p["kv_heads"], p["head_dim"], fmt))
    if config is not None:
        config = dict(config, programs=kq.quant_decode_config(p["head_dim"], torch.device(device))["programs"])
    args = (prob["q"], *prob[fmt], prob["tables"], prob["lens"])
    return (lambda: kq.quantized_paged_attention_unchecked(*args, lens=prob["lens_list"], config=config)), info


def _call(prob, case, device, fmt):
    p = case.params
    info = dict(bytes_read=bytes_read(p["batch"], p["context"], p["kv_heads"], p["head_dim"], fmt))
    args = (prob["q"], *prob[fmt], prob["tables"], prob["lens"])
    return (lambda: kq.quantized_paged_attention(*args)), info


BUILDERS = {"bf16": _bf16, "quant": _quant, "call": _call}


def table(path: str) -> list[dict]:
    """The docs' table from a run's JSON: per context, TB/s of each provider's own bytes, the
    speed-up over bf16, and the fp8 error against its bound."""
    data = json.load(open(path))
    rows = []
    for case in data["cases"]:
        if "main" not in case.get("tags", ()):
            continue
        res = {r["provider"]: r for r in case["results"]}
        base = res.get("bf16 (graph)", {}).get("median_ms")
        row = dict(context=case["params"]["context"])
        for name, r in res.items():
            if "median_ms" in r:
                row[f"{name} TB/s"] = r["bytes_read"] / r["median_ms"] / 1e9
                if base:
                    row[f"{name} speed-up"] = base / r["median_ms"]
        chk = (case.get("check") or {}).get("fp8", {})
        row["fp8 err / bound"] = chk.get("err_over_bound")
        rows.append(row)
        print("  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
    return rows


def bound_ratios(profiles=None) -> list[dict]:
    """How tight the derived bound is (docs/kv_quant.md, CPU, float64): per format and profile of
    spec_tests/kv_quant/strategies.py, on 2 sequences (200 and 64 tokens, 8 query / 2 KV heads,
    D 64, bf16), the largest |dequantised - original| / element bound, and the largest and median
    |exact quantised attention - exact attention| / attention bound.

        python -c "from bench.cases.kv_quant import bound_ratios; bound_ratios()"
    """
    from spec_tests.kv_quant.oracles import element_bound
    from spec_tests.kv_quant.strategies import PROFILES, QuantCase
    from spec_tests.paged_attention.strategies import PagedCase
    rows = []
    for fmt in CODES:
        for profile in profiles or PROFILES:
            x = QuantCase(PagedCase((200, 64), 0, 8, 2, 64, 16, None, "bfloat16", 5), fmt, profile).build(quantize_kv)
            khat = [dequantized(c, s) for c, s in x.k_codes]
            vhat = [dequantized(c, s) for c, s in x.v_codes]
            err = (attention64(x.q4, khat, vhat)[0] - attention64(x.q4, x.k, x.v)[0]).abs()
            ratio = err / attention_bound(x.q4, x.k, x.v, fmt)[0]
            element = max(float(((kh - k.double()).abs() / element_bound(k, fmt)).max()) for kh, k in zip(khat, x.k))
            row = dict(fmt=fmt, profile=profile, element_max=element, attention_max=float(ratio.max()),
                       attention_median=float(ratio.median()))
            rows.append(row)
            print(f"{fmt:5s} {profile:11s} element {element:.3f}  attention max {row['attention_max']:.4f} "
                  f"median {row['attention_median']:.4f}")
    return rows
