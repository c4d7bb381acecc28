"""W4A16 matmul (optimized/weight_quant.py) against cuBLAS bf16 ``x @ w.T`` and torchao's int4
weight-only path, in the same run (docs/weight_quant.md).

Shapes: bf16 activations x (M, K), a weight (N, K) quantised to INT4, asymmetric, groups of 128
(packed uint8 (N, K/2), bf16 scales, uint8 zeros), (K, N) in {(4096, 4096), (8192, 8192),
(4096, 14336), (14336, 4096)}, M in {1, 4, 16, 64, 256}. Providers (cuBLAS first: the runner's
``speedups`` are each provider's median time / cuBLAS's, so the speed-up over cuBLAS is 1 / that):
    cublas bf16         ``x @ w.T`` on the bf16 weight the int4 one approximates, CUDA-graph replay
    ours (graph)        ``w4a16_matmul_with`` (the kernels, launch_config's choice), graph replay
    ours (call)         ``w4a16_matmul`` itself, eager (input checks + launch from Python)
    torchao int4        torchao's ``Int4WeightOnlyConfig(group_size=128)`` (tinygemm layout) on an nn.Linear of the same
                        bf16 weight, graph replay; skipped with the reason when torchao does not
                        import or its int4 path does not run here
    cublas bf16 (eager), torchao int4 (eager)
Metric TFLOP/s (2 M N K per call); each row also carries ``bytes`` (what the provider must read:
weights, scales, zeros, x; and write: y) and ``GB/s`` = bytes / median time. CUDA events, L2
flushed before each call (the 256 MB flush: the weights are read from HBM), medians.
Correctness first (``check``): ours against the float64 oracle x ŵᵀ under the tolerance rule
(2 x the error of dequantise-then-matmul in bf16 + the rounding floor) on the first and last rows.
Tags: ``tiles`` (with ``sweep``: launch configurations around launch_config's choice, for tuning),
``smoke`` (tiny CPU shapes, the kernels under the Triton interpreter).

    python -m bench run --concept weight_quant --out docs/results/weight_quant_h200.json
    python -m bench run --concept weight_quant --tag tiles --out docs/results/weight_quant_h200_tiles.json
"""
from __future__ import annotations

import torch

import optimized.weight_quant as wq
from bench.runner import Case, P, Unavailable
from conformance.tolerance import assert_close_to_oracle
import reference.weight_quant as refwq
from reference.weight_quant import dequantize, pack_int4, quantize, unpack_int4

KN = ((4096, 4096), (8192, 8192), (4096, 14336), (14336, 4096))
MS = (1, 4, 16, 64, 256)
GROUP = 128
DEFAULT_TIMING = dict(warmup_ms=25, budget_ms=100)

MAIN = (P("cublas bf16", "cublas", graph=True), P("ours (graph)", "ours", graph=True), P("ours (call)", "call"),
        P("torchao int4", "torchao", graph=True), P("cublas bf16 (eager)", "cublas"),
        P("torchao int4 (eager)", "torchao"))

# Tuning sweep: (BLOCK_M, BLOCK_N, BLOCK_K, DOT, SPLIT_K, num_warps, num_stages) per M class.
SWEEP = {
    16: [(16, bn, bk, True, sk, w, s) for bn in (32, 64, 128) for bk in (64, 128) for sk in (1, 2, 4, 8)
         for w, s in ((4, 4), (4, 3))],
    256: [(bm, bn, 64, True, sk, w, s) for bm, bn in ((64, 128), (128, 128), (128, 64), (128, 256))
          for sk in (1, 2) for w, s in ((4, 3), (8, 3), (8, 4))],
}


def _params(m, k, n, group=GROUP):
    return dict(m=m, k=k, n=n, group=group, dtype="bf16", scales="bf16", symmetric=False)


def _case(m, k, n, providers, tags=(), suffix="", devices=("cuda",), timing=None, group=GROUP) -> Case:
    return Case(f"w4a16 m{m} k{k} n{n}{suffix}", _params(m, k, n, group), tuple(providers), metric="TFLOP/s",
                work=2 * m * n * k, devices=devices, tags=tags, timing=timing or {})


def _sweep_providers(m):
    rows = SWEEP[16 if m <= 16 else 256]     # launch_config takes the 16-row tensor-core tile up to m = 16
    return [P(f"ours bm{bm} bn{bn} bk{bk} {'dot' if dot else 'fma'} split{sk} w{w} s{s}", "ours", graph=True,
              config=dict(BLOCK_M=bm if dot else max(1, min(bm, m)), BLOCK_N=bn, BLOCK_K=bk, DOT=dot, SPLIT_K=sk,
                          num_warps=w, num_stages=s))
            for bm, bn, bk, dot, sk, w, s in rows]


CASES = (
    [_case(m, k, n, MAIN) for k, n in KN for m in MS]
    + [_case(m, k, n, _sweep_providers(m), ("tiles", "sweep"), " tiles") for k, n in ((4096, 4096), (4096, 14336))
       for m in (1, 16, 256)]
    + [_case(m, 64, 48, (P("ours (call)", "call"), P("reference", "reference"), P("cublas bf16 (eager)", "cublas")),
             ("smoke",), devices=("cpu",), timing=dict(repeats=2, budget_ms=None, min_warmup=1, warmup_ms=0), group=32)
       for m in (1, 5)])


def _bytes(m, k, n, group) -> int:
    """Bytes a W4A16 call must move: packed weights, bf16 scales, uint8 zeros, bf16 x, bf16 y."""
    return n * k // 2 + n * (k // group) * 3 + 2 * m * k + 2 * m * n


def setup(case, device, seed: int = 0):
    p = case.params
    m, k, n, group = p["m"], p["k"], p["n"], p["group"]
    g = torch.Generator(device=device).manual_seed(seed)
    w = torch.randn(n, k, device=device, generator=g, dtype=torch.float32) * 0.02
    x = torch.randn(m, k, device=device, generator=g, dtype=torch.bfloat16)
    codes, scales, zeros = quantize(w, bits=4, group_size=group, symmetric=p["symmetric"])
    scales = scales.to(torch.bfloat16)
    qweight = pack_int4(codes)
    w_hat = dequantize(codes, scales, zeros).to(torch.bfloat16)     # the bf16 weight cuBLAS reads
    return dict(x=x, qweight=qweight, scales=scales, zeros=zeros, w_bf16=w_hat.contiguous())


def check(prob, case, device) -> dict:
    """Ours on the first and last rows against the float64 oracle x ŵᵀ (tolerance rule)."""
    x, qw, s, z = prob["x"], prob["qweight"], prob["scales"], prob["zeros"]
    rows = sorted({0, x.shape[0] - 1})
    ours = wq.w4a16_matmul(x, qw, s, z)[rows]
    w64 = dequantize(unpack_int4(qw), s.double(), z)
    oracle = x[rows].double() @ w64.T
    low = x[rows] @ prob["w_bf16"].T
    out = dict(ok=True, rows=rows, max_abs_err_vs_oracle=float((ours.double() - oracle).abs().max()),
               reference_err=float((low.double() - oracle).abs().max()),
               kernel=wq.kernel_supports(x, case.params["group"]))
    try:
        assert_close_to_oracle(ours, low, oracle, name="w4a16 vs float64 oracle")
    except AssertionError as exc:
        out.update(ok=False, error=str(exc).splitlines()[0])
    return out


def _info(case, **extra) -> dict:
    p = case.params
    return dict(bytes=_bytes(p["m"], p["k"], p["n"], p["group"]), **extra)


def _ours(prob, case, device, config=None):
    args = (prob["x"], prob["qweight"], prob["scales"], prob["zeros"])
    p = case.params
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.startswith("cuda") else 0
    info = _info(case, config=config or wq.launch_config(p["m"], p["n"], p["k"], p["group"],
                                                         torch.device(device).type, sms))
    if config is not None:
        want = wq.w4a16_matmul(*args)
        got = wq.w4a16_matmul_with(*args, config=config)
        info["max_abs_diff_vs_default"] = float((got.float() - want.float()).abs().max())
        scale = float(want.float().abs().max()) + 1e-6
        if info["max_abs_diff_vs_default"] > 2e-2 * scale:
            raise Unavailable(f"differs from the default configuration by {info['max_abs_diff_vs_default']:.3g}")
    return (lambda: wq.w4a16_matmul_with(*args, config=config)), info


def _cublas(prob, case, device):
    x, w = prob["x"], prob["w_bf16"]
    p = case.params
    return (lambda: x @ w.T), dict(bytes=2 * p["n"] * p["k"] + 2 * p["m"] * p["k"] + 2 * p["m"] * p["n"])


def _torchao(prob, case, device):
    """torchao's int4 weight-only linear (tinygemm on CUDA) on the same bf16 weight."""
    if not device.startswith("cuda"):
        raise Unavailable("torchao's int4 weight-only path needs a CUDA GPU")
    try:
        import torchao
        from torchao.quantization import quantize_
    except Exception as exc:  # noqa: BLE001 - any import failure is the recorded reason
        raise Unavailable(f"import torchao failed: {type(exc).__name__}: {exc}") from None
    try:
        try:
            from torchao.quantization import Int4WeightOnlyConfig
            try:   # torchao >= 0.14: the tinygemm layout (in torch itself; "plain", the default, needs fbgemm-gpu)
                config = Int4WeightOnlyConfig(group_size=case.params["group"], int4_packing_format="tile_packed_to_4d")
            except TypeError:
                config = Int4WeightOnlyConfig(group_size=case.params["group"])
        except ImportError:
            from torchao.quantization import int4_weight_only
            config = int4_weight_only(group_size=case.params["group"])
        p = case.params
        lin = torch.nn.Linear(p["k"], p["n"], bias=False, device=device, dtype=torch.bfloat16)
        with torch.no_grad():
            lin.weight.copy_(prob["w_bf16"])
        quantize_(lin, config)
        x = prob["x"]
        with torch.no_grad():
            y = lin(x)
        err = float((y.float() - (x @ prob["w_bf16"].T).float()).abs().max())
    except Exception as exc:  # noqa: BLE001
        raise Unavailable(f"torchao {getattr(torchao, '__version__', '?')} int4 weight-only did not run: "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None

    def run():
        with torch.no_grad():
            return lin(x)
    return run, _info(case, torchao=getattr(torchao, "__version__", "?"), max_abs_diff_vs_cublas=err)


BUILDERS = {
    "ours": _ours,
    "call": lambda prob, case, device: ((lambda: wq.w4a16_matmul(prob["x"], prob["qweight"], prob["scales"],
                                                                 prob["zeros"])), _info(case)),
    "reference": lambda prob, case, device: (lambda: refwq.w4a16_matmul(prob["x"], prob["qweight"], prob["scales"],
                                                                       prob["zeros"])),
    "cublas": _cublas,
    "torchao": _torchao,
}


def summary(path: str) -> str:
    """A markdown table of a results file: per case and provider the median time, TFLOP/s, GB/s
    (the row's ``bytes`` / time) and the speed-up over cuBLAS bf16 (graph) of the same case."""
    import json
    data = json.load(open(path))
    lines = [f"device: {data.get('device')}, torch {data.get('torch')}, triton {data.get('triton')}", "",
             "| case | provider | median us | TFLOP/s | GB/s | speed-up vs cuBLAS |", "|---|---|---|---|---|---|"]
    for c in data["cases"]:
        if c.get("params", {}).get("k") is None:
            continue
        base = next((r.get("median_ms") for r in c["results"] if r["provider"] == "cublas bf16"), None)
        for r in c["results"]:
            if "median_ms" not in r:
                reason = r.get("skipped") or r.get("error") or "-"
                lines.append(f"| {c['name']} | {r['provider']} | - | - | - | {str(reason)[:80]} |")
                continue
            ms = r["median_ms"]
            gbs = r.get("bytes", 0) / ms / 1e6 if r.get("bytes") else float("nan")
            up = base / ms if base else float("nan")
            lines.append(f"| {c['name']} | {r['provider']} | {ms * 1e3:.1f} | {r.get('value', float('nan')):.1f} | "
                         f"{gbs:.0f} | {up:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":   # python -m bench.cases.weight_quant results.json
    import sys
    print(summary(sys.argv[1]))
