"""Batch-invariant kernels (optimized/batch_invariant.py): what invariance costs, and witnesses that
plain torch is not invariant (docs/batch_invariant.md, docs/performance.md).

* matmul (M, 4096) @ (4096, 4096) bf16, M in {1, 16, 128, 1024, 4096}: ``matmul`` against
  ``torch.matmul`` (cuBLAS), TFLOP/s; the check records, bitwise, whether row 0 of the M-row
  product equals the 1-row product (torch and ours: an observation for torch, a requirement for
  ours) and ours' largest difference from cuBLAS.
* rms_norm and log_softmax of 8192 x 8192 bf16 against torch eager, TB/s of bytes read + written,
  next to a copy (``y.copy_(x)``) in the same run; log_softmax's row 0 of 4,096 rows == alone.
* the reference model (reference/model.py, default config) forward of 16 x 64 tokens, float32 and
  bf16, plain and under ``invariant_mode()``: ms; row 3 of the batch == the same prompt alone.
* decode attention, B in {1, 16, 64}, context 4096, GQA 32 / 8 heads, D 128, bf16: ``ours`` =
  ``decode_attention`` (its checks read the lengths on the host), ``kernels`` = its two launches
  alone (``decode_attention_unchecked``), ``sdpa`` (``enable_gqa``), ``split_free`` = a Triton
  kernel written here (one program per (sequence, KV head) streaming the whole context: also
  invariant, but only B x 8 programs); TB/s of K + V read. Checked first: two sequences against
  the float64 oracle (tolerance rule), ours' sequence 0 in the batch == alone (also with ragged
  lengths), bitwise; SDPA's sequence 0 == alone recorded.
* ``tile-probe`` (with ``sweep``): the matmul kernel at other output tiles (``matmul_tiled``):
  whether each gives the shipped tile's bits (same BLOCK_K, same K loop), and its speed against
  cuBLAS at each M: the evidence behind TILES_SMALL_M.
Times: CUDA events, L2 flushed, medians. ``smoke``: tiny CPU shapes under the Triton interpreter.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bench.runner import Case, P, Unavailable
from optimized import batch_invariant as O

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEFAULT_TIMING = dict(warmup_ms=25, budget_ms=200)
M_VALUES = (1, 16, 128, 1024, 4096)
PROBE_TILES = {
    "bf16": [(128, 128, 64, 8, 3), (64, 256, 64, 4, 3), (64, 128, 64, 4, 4), (64, 64, 64, 4, 4),
             (32, 64, 64, 4, 4), (16, 64, 64, 4, 4), (16, 32, 64, 2, 4)],
    "fp32": [(32, 64, 32, 4, 3), (16, 64, 32, 4, 3), (64, 32, 32, 4, 3)],
}
PROBE_BITS_M = (512, 300, 129, 16, 1)

if triton is not None:
    @triton.jit
    def _decode_nosplit_kernel(q_ptr, k_ptr, v_ptr, len_ptr, out_ptr, Hkv, scale,
                               sqb, sqh, skb, skh, sks, svb, svh, svs,
                               G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, D_PAD: tl.constexpr,
                               BLOCK_N: tl.constexpr):
        """Split-free decode: one program per (sequence, KV head) streams the whole context with an
        online softmax (FlashAttention's loop). Its order depends only on the length (invariant),
        but it has only B * Hkv programs."""
        bh = tl.program_id(0)
        b = (bh // Hkv).to(tl.int64)
        hk = bh % Hkv
        n = tl.load(len_ptr + b)
        rg = tl.arange(0, G_PAD)
        rd = tl.arange(0, D_PAD)
        hq = hk * G + rg
        q = tl.load(q_ptr + b * sqb + hq[:, None] * sqh + rd[None, :], mask=(rg[:, None] < G) & (rd[None, :] < D),
                    other=0.0)
        m_i = tl.full((G_PAD,), float("-inf"), tl.float32)
        l_i = tl.zeros((G_PAD,), tl.float32)
        acc = tl.zeros((G_PAD, D_PAD), tl.float32)
        for s0 in range(0, n, BLOCK_N):
            rs = s0 + tl.arange(0, BLOCK_N)
            kt = tl.load(k_ptr + b * skb + hk * skh + rs[None, :] * sks + rd[:, None],
                         mask=(rs[None, :] < n) & (rd[:, None] < D), other=0.0)
            v = tl.load(v_ptr + b * svb + hk * svh + rs[:, None] * svs + rd[None, :],
                        mask=(rs[:, None] < n) & (rd[None, :] < D), other=0.0)
            s = tl.dot(q, kt) * scale
            s = tl.where(rs[None, :] < n, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        o = acc / l_i[:, None]
        tl.store(out_ptr + (b * Hkv * G + hq[:, None]) * D + rd[None, :], o.to(out_ptr.dtype.element_ty),
                 mask=(rg[:, None] < G) & (rd[None, :] < D))


def decode_nosplit(q, k, v, lengths, block_n=64):
    B, H, D = q.shape
    Hkv = k.shape[1]
    G = H // Hkv
    out = torch.empty_like(q)
    lens = lengths.to(device=q.device, dtype=torch.int32)
    _decode_nosplit_kernel[(B * Hkv,)](
        q, k, v, lens, out, Hkv, 1.0 / math.sqrt(D), q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        k.stride(2), v.stride(0), v.stride(1), v.stride(2), G=G, G_PAD=max(16, triton.next_power_of_2(G)),
        D=D, D_PAD=max(16, triton.next_power_of_2(D)), BLOCK_N=block_n, num_warps=4)
    return out


# ----------------------------------------------------------------------------- the cases
def _matmul_case(m, k=4096, n=4096, dtype="bf16", tags=(), devices=("cuda",), timing=None) -> Case:
    return Case(f"matmul M{m} K{k} N{n} {dtype}", dict(op="matmul", M=m, K=k, N=n, dtype=dtype),
                (P("invariant", "matmul"), P("cublas", "torch_matmul")), metric="TFLOP/s", work=2 * m * n * k,
                devices=devices, tags=tags, timing=timing or {})


def _row_case(op, rows=8192, cols=8192, dtype="bf16", tags=(), devices=("cuda",), timing=None) -> Case:
    providers = {"copy": (P("copy_", "copy"),),
                 "rms_norm": (P("invariant", "rms_norm"), P("eager formula", "eager_rms"), P("F.rms_norm", "f_rms")),
                 "log_softmax": (P("invariant", "log_softmax"), P("torch", "torch_log_softmax"))}[op]
    nbytes = 2 * rows * cols * DTYPES[dtype].itemsize
    name = f"ceiling: copy {rows} x {cols} {dtype}" if op == "copy" else f"{op} {rows} x {cols} {dtype}"
    return Case(name, dict(op=op, rows=rows, cols=cols, dtype=dtype), providers, metric="TB/s", work=nbytes,
                devices=devices, tags=tags, timing=timing or {})


def _decode_case(b, ctx=4096, h=32, hkv=8, d=128, dtype="bf16", tags=(), devices=("cuda",), timing=None) -> Case:
    return Case(f"decode attention B{b} ctx {ctx} H{h}/{hkv} D{d} {dtype}",
                dict(op="decode", B=b, ctx=ctx, H=h, Hkv=hkv, D=d, dtype=dtype),
                (P("ours", "decode"), P("kernels", "decode_kernels"), P("sdpa", "decode_sdpa"),
                 P("split_free", "decode_split_free")), metric="TB/s",
                work=2 * b * hkv * ctx * d * DTYPES[dtype].itemsize, devices=devices, tags=tags, timing=timing or {})


SMOKE = dict(devices=("cpu",), tags=("smoke",), timing=dict(repeats=2, budget_ms=None, min_warmup=1, warmup_ms=0))
CASES = (
    [_matmul_case(m) for m in M_VALUES]
    + [_row_case("copy"), _row_case("rms_norm"), _row_case("log_softmax")]
    + [Case(f"model forward 16 x 64 {dt}", dict(op="model", batch=16, tokens=64, dtype=dt),
            (P("invariant_mode", "model", mode=True), P("plain", "model", mode=False)), metric="ms")
       for dt in ("fp32", "bf16")]
    + [_decode_case(b) for b in (1, 16, 64)]
    + [Case(f"tile probe {dt} {'x'.join(map(str, t))} M{m}", dict(op="probe", M=m, K=4096, N=4096, dtype=dt, tile=t),
            (P("tile", "matmul_tiled"), P("cublas", "torch_matmul")), metric="TFLOP/s", work=2 * m * 4096 * 4096,
            tags=("tile-probe", "sweep"), timing=dict(warmup_ms=25, budget_ms=100))
       for dt, tiles in PROBE_TILES.items() for t in [O.TILES[DTYPES[dt]]] + tiles for m in M_VALUES]
    + [_matmul_case(3, 32, 16, "fp32", **SMOKE), _row_case("log_softmax", 3, 40, "fp32", **SMOKE),
       _decode_case(3, ctx=70, h=4, hkv=2, d=16, dtype="fp16", **SMOKE)])


# ----------------------------------------------------------------------------- set-up and checks
def setup(case, device):
    p = case.params
    g = torch.Generator(device=device).manual_seed(0)
    dt = DTYPES[p["dtype"]]
    if p["op"] in ("matmul", "probe"):
        rows = max(p["M"], 512) if p["op"] == "probe" else p["M"]
        a = torch.randn(rows, p["K"], device=device, dtype=dt, generator=g)
        w = torch.randn(p["K"], p["N"], device=device, dtype=dt, generator=g)
        if p["op"] == "probe":
            w = w / 64
        return dict(A=a, a=a[:p["M"]].contiguous(), w=w)
    if p["op"] in ("copy", "rms_norm", "log_softmax"):
        x = torch.randn(p["rows"], p["cols"], device=device, dtype=dt, generator=g)
        return dict(x=x, w=torch.randn(p["cols"], device=device, dtype=dt, generator=g), y=torch.empty_like(x))
    if p["op"] == "model":
        from reference.model import ModelConfig, Transformer
        model = Transformer(ModelConfig(dtype=dt, max_seq_len=128), seed=0).to(device)
        return dict(model=model, tokens=torch.randint(0, 128, (p["batch"], p["tokens"]), device=device, generator=g))
    q = torch.randn(p["B"], p["H"], p["D"], device=device, dtype=dt, generator=g)
    k = torch.randn(p["B"], p["Hkv"], p["ctx"], p["D"], device=device, dtype=dt, generator=g)
    v = torch.randn(p["B"], p["Hkv"], p["ctx"], p["D"], device=device, dtype=dt, generator=g)
    ragged = torch.randint(1, p["ctx"] + 1, (p["B"],), device=device, generator=g, dtype=torch.int32)
    return dict(q=q, k=k, v=v, lens=torch.full((p["B"],), p["ctx"], device=device, dtype=torch.int32), ragged=ragged)


def _sdpa_decode(q, k, v):
    return F.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=True)[:, :, 0]


def check(prob, case, device) -> dict:
    p = case.params
    op = p["op"]
    if op == "matmul":
        a, w, A = prob["a"], prob["w"], prob["A"]
        return dict(ok=torch.equal(O.matmul(a, w)[:1], O.matmul(A[:1].contiguous(), w)),
                    invariant_row0_same_as_alone=torch.equal(O.matmul(a, w)[:1], O.matmul(A[:1].contiguous(), w)),
                    torch_row0_same_as_alone=torch.equal(torch.matmul(a, w)[:1], torch.matmul(A[:1], w)),
                    max_abs_diff_vs_cublas=float((O.matmul(a, w).float() - torch.matmul(a, w).float()).abs().max()))
    if op == "log_softmax":
        x = prob["x"]
        half = max(1, x.shape[0] // 2)
        inv = torch.equal(O.log_softmax(x[:half])[0], O.log_softmax(x[:1])[0])
        return dict(ok=inv, invariant_row0_same_as_alone=inv,
                    torch_row0_same_as_alone=torch.equal(torch.log_softmax(x[:half], -1)[0],
                                                         torch.log_softmax(x[:1], -1)[0]))
    if op == "model":
        model, tokens = prob["model"], prob["tokens"]
        with torch.no_grad():
            with O.invariant_mode():
                mode = torch.equal(model(tokens)[3], model(tokens[3:4])[0])
            plain = torch.equal(model(tokens)[3], model(tokens[3:4])[0])
        return dict(ok=mode, mode_row3_same_as_alone=mode, plain_row3_same_as_alone=plain)
    if op == "decode":
        return _check_decode(prob, p)
    if op == "probe":
        return _check_probe(prob, p)
    return dict(ok=True)


def _check_decode(prob, p) -> dict:
    from conformance.tolerance import assert_close_to_oracle
    from reference.attention import attention as plain_attention
    q, k, v, lens, ragged = prob["q"], prob["k"], prob["v"], prob["lens"], prob["ragged"]
    outs = {"ours": O.decode_attention(q, k, v, lens), "sdpa": _sdpa_decode(q, k, v),
            "split_free": decode_nosplit(q, k, v, lens), "kernels": O.decode_attention_unchecked(q, k, v, lens)}
    nb = min(p["B"], 2)
    oracle = torch.stack([plain_attention(q[i:i + 1, :, None].double(), k[i:i + 1].double(),
                                          v[i:i + 1].double())[0, :, 0] for i in range(nb)])
    res = dict(ok=True, kernels_equal_decode_attention=torch.equal(outs["ours"], outs["kernels"]))
    for name in ("ours", "split_free"):
        try:
            assert_close_to_oracle(outs[name][:nb], outs["sdpa"][:nb], oracle, name=f"decode {name}")
            res[f"{name}_ok"] = True
        except AssertionError as exc:
            res[f"{name}_ok"], res[f"{name}_error"] = False, str(exc).splitlines()[0]
        res[f"{name}_max_err"] = float((outs[name][:nb].double() - oracle).abs().max())
    res["sdpa_max_err"] = float((outs["sdpa"][:nb].double() - oracle).abs().max())
    res["ours_seq0_same_as_alone"] = torch.equal(outs["ours"][0], O.decode_attention(q[:1], k[:1], v[:1], lens[:1])[0])
    res["sdpa_seq0_same_as_alone"] = torch.equal(outs["sdpa"][0], _sdpa_decode(q[:1], k[:1], v[:1])[0])
    n0 = int(ragged[0])
    alone = O.decode_attention(q[:1], k[:1, :, :n0].contiguous(), v[:1, :, :n0].contiguous(), ragged[:1])
    res["ours_ragged_seq0_same_as_alone"] = torch.equal(O.decode_attention(q, k, v, ragged)[0], alone[0])
    res["ok"] = all(res[key] for key in ("kernels_equal_decode_attention", "ours_ok", "split_free_ok",
                                         "ours_seq0_same_as_alone", "ours_ragged_seq0_same_as_alone"))
    return res


def _check_probe(prob, p) -> dict:
    """Whether the tile gives the shipped tile's bits: rows of a 512-row product with the shipped
    tile against the same rows computed at M in PROBE_BITS_M with this tile (an observation)."""
    A, w, dt = prob["A"], prob["w"], DTYPES[p["dtype"]]
    base = O.matmul_tiled(A[:512].contiguous(), w, tile=O.TILES[dt])
    same = {}
    for m in PROBE_BITS_M:
        try:
            same[str(m)] = bool(torch.equal(O.matmul_tiled(A[:m].contiguous(), w, tile=tuple(p["tile"])), base[:m]))
        except Exception as exc:  # noqa: BLE001 - a tile that does not compile
            same[str(m)] = f"error: {type(exc).__name__}: {str(exc)[:80]}"
    return dict(ok=True, shipped=tuple(p["tile"]) == O.TILES[dt], bitwise_equal_to_shipped=same)


# ----------------------------------------------------------------------------- builders
def _eager_rms(x, w, eps=1e-6):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _model(prob, case, device, mode):
    model, tokens = prob["model"], prob["tokens"]

    def run():
        with torch.no_grad():
            if mode:
                with O.invariant_mode():
                    return model(tokens)
            return model(tokens)
    return run


def _tiled(prob, case, device):
    tile = tuple(case.params["tile"])
    try:
        O.matmul_tiled(prob["a"], prob["w"], tile=tile)
    except Exception as exc:  # noqa: BLE001
        raise Unavailable(f"tile {tile} does not launch: {type(exc).__name__}") from exc
    return lambda: O.matmul_tiled(prob["a"], prob["w"], tile=tile)


BUILDERS = {
    "matmul": lambda prob, case, device: lambda: O.matmul(prob["a"], prob["w"]),
    "torch_matmul": lambda prob, case, device: lambda: torch.matmul(prob["a"], prob["w"]),
    "matmul_tiled": _tiled,
    "copy": lambda prob, case, device: lambda: prob["y"].copy_(prob["x"]),
    "rms_norm": lambda prob, case, device: lambda: O.rms_norm(prob["x"], prob["w"], 1e-6),
    "eager_rms": lambda prob, case, device: lambda: _eager_rms(prob["x"], prob["w"]),
    "f_rms": lambda prob, case, device: lambda: F.rms_norm(prob["x"], (prob["x"].shape[-1],), prob["w"], 1e-6),
    "log_softmax": lambda prob, case, device: lambda: O.log_softmax(prob["x"]),
    "torch_log_softmax": lambda prob, case, device: lambda: torch.log_softmax(prob["x"], -1),
    "model": _model,
    "decode": lambda prob, case, device: lambda: O.decode_attention(prob["q"], prob["k"], prob["v"], prob["lens"]),
    "decode_kernels": lambda prob, case, device: lambda: O.decode_attention_unchecked(prob["q"], prob["k"], prob["v"],
                                                                                      prob["lens"]),
    "decode_sdpa": lambda prob, case, device: lambda: _sdpa_decode(prob["q"], prob["k"], prob["v"]),
    "decode_split_free": lambda prob, case, device: lambda: decode_nosplit(prob["q"], prob["k"], prob["v"],
                                                                           prob["lens"]),
}
