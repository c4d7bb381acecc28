"""FlashAttention-2 in Triton (optimized/flash_attention.py) against torch SDPA's cuDNN and
FlashAttention-2 backends and the plain reference (docs/performance.md, docs/flash_attention.md).

Providers: ``ours`` = ``flash_forward`` / ``flash_backward`` (the kernel launches alone, what
autograd calls); ``sdpa_cudnn`` / ``sdpa_flash`` = ``scaled_dot_product_attention`` under one
backend (the backward through autograd, ``retain_graph``; GQA with ``enable_gqa``, or K/V repeated
when a backend refuses it: the row says ``kv``); ``reference`` = ``reference.attention.attention``
(N <= 4096, forward). ``ours <tile>`` providers launch the kernel at another tile configuration
(the sweeps); each is first checked on 2 heads of the shape against the float64 oracle, and a
host-descriptor variant also bit for bit against the device-descriptor kernel at the same tiles.
Before any timing every case is checked the same way with the shipped configuration (forward out
and lse; the backward's dq, dk, dv for N <= 4096). FLOPs = 4 B Hq N^2 D (x0.5 causal, x2.5
backward). Times: CUDA events, L2 flushed before each call, 25 ms of warm-up, up to 100 ms of
calls, median (``triton.testing.do_bench``'s method, which the recorded numbers used).

Tags: ``main`` (batch x N = 16k tokens, heads x D = 2048, N in {1k, 4k, 16k}, D in {64, 128},
causal and not, fp16 and bf16, forward and backward, plus the matmul ceilings), ``n4096`` (its
N = 4096 rows), ``gate`` (the regression gate's shapes, bench/gate.py), ``shapes`` (six shapes:
GQA and many short sequences, with the host-descriptor and persistent forward variants), ``d256``
(head_dim 256). Tile sweeps (tagged ``sweep`` too, so they run only when named): ``tune`` (the
sweep that chose fwd_config / bwd_config at D 64 and 128), ``d256-tiles`` (forward, dK/dV, dQ and
joint backward tiles at D 256), ``shapes-tiles`` (the GQA shapes' forward tiles). ``smoke``: tiny
CPU shapes (the kernels under the Triton interpreter).
"""
from __future__ import annotations

import math
from contextlib import nullcontext

import torch
import torch.nn.functional as F

import optimized.flash_attention as fa
import reference.attention as ref
from bench.runner import Case, P, Unavailable
from conformance.tolerance import assert_close_to_oracle

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
TOKENS, WIDTH = 16384, 2048
CUDA = torch.device("cuda")
DEFAULT_TIMING = dict(warmup_ms=25, budget_ms=100)
HOST_KEYS = ("HOST_DESC", "PERSISTENT", "PROGRAMS_PER_SM")


def flops(b, hq, n, d, causal, bwd=False) -> float:
    return 4.0 * b * hq * n * n * d * (0.5 if causal else 1.0) * (2.5 if bwd else 1.0)


def shape_name(pass_, dtype, b, hq, hkv, n, d, causal) -> str:
    heads = f"H{hq}" if hq == hkv else f"H{hq}/{hkv}"
    return f"{pass_} {dtype} B{b} {heads} N{n} D{d} {'causal' if causal else 'full'}"


# ----------------------------------------------------------------------------- tile configs
def fwd_cfg(bm, bn, warps, stages, warp_spec=False, **keys) -> dict:
    return dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages, WARP_SPEC=warp_spec, **keys)


def bwd_cfg(dkdv, dq) -> dict:
    return dict(dkdv=dict(zip(("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"), dkdv)),
                dq=dict(zip(("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"), dq)))


def tile_name(cfg: dict) -> str:
    if "dkdv" in cfg:
        a, b = cfg["dkdv"], cfg["dq"]
        return (f"dkdv {a['BLOCK_M']}x{a['BLOCK_N']}w{a['num_warps']}s{a['num_stages']} "
                f"dq {b['BLOCK_M']}x{b['BLOCK_N']}w{b['num_warps']}s{b['num_stages']}")
    name = f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}w{cfg['num_warps']}s{cfg['num_stages']}"
    if cfg.get("WARP_SPEC"):
        name += " ws"
    if cfg.get("HOST_DESC"):
        name += " host"
    if cfg.get("PERSISTENT"):
        name += " persistent"
    return name


def shipped_tiles(d, causal, n) -> dict:
    """fwd_config's tiles on a GPU, without the descriptor keys."""
    return {k: v for k, v in fa.fwd_config(d, causal, CUDA, n).items() if k not in HOST_KEYS}


def persistent(cfg: dict, d: int, dtype: str) -> dict:
    """cfg + HOST_DESC + PERSISTENT, num_stages lowered until a program fits in shared memory (a
    persistent program keeps one more M x D buffer). The head_dim the kernel pads to: the next
    power of two, at least 16."""
    block_d = max(16, 1 << (d - 1).bit_length())
    out = dict(cfg, HOST_DESC=True, PERSISTENT=True)
    while out["num_stages"] > 1 and fa.fwd_shared_bytes(out["BLOCK_M"], out["BLOCK_N"], block_d, out["num_stages"],
                                                         DTYPES[dtype].itemsize, persistent=True) > fa.SMEM_PER_PROGRAM:
        out["num_stages"] -= 1
    return out


# the tile sweep that chose fwd_config / bwd_config at D 64 and 128 (N 1k and 4k, fp16)
TUNE_FWD = {  # (BLOCK_M, BLOCK_N, num_warps, num_stages, warp_specialize)
    64: [(128, 64, 4, 3, False), (128, 64, 4, 4, False), (128, 128, 8, 3, False), (128, 128, 8, 3, True),
         (128, 64, 8, 3, True), (64, 64, 4, 3, False), (64, 128, 4, 3, False), (64, 64, 4, 4, False)],
    128: [(128, 64, 8, 3, False), (128, 64, 8, 3, True), (128, 128, 8, 3, False), (128, 128, 8, 3, True),
          (128, 64, 8, 4, False), (64, 64, 4, 3, False), (64, 64, 4, 4, False), (64, 128, 4, 3, False),
          (128, 128, 8, 2, True), (64, 64, 4, 2, False)],
}
TUNE_BWD = {  # ((dK/dV BLOCK_M, BLOCK_N, warps, stages), (dQ BLOCK_M, BLOCK_N, warps, stages))
    64: [((32, 128, 4, 3), (128, 32, 4, 3)), ((32, 128, 4, 4), (128, 32, 4, 4)),
         ((64, 128, 4, 3), (128, 64, 4, 3)), ((32, 64, 4, 3), (64, 32, 4, 3))],
    128: [((64, 128, 8, 2), (128, 64, 8, 2)), ((64, 128, 8, 3), (128, 64, 8, 3)),
          ((32, 128, 4, 3), (128, 32, 4, 3)), ((32, 64, 4, 3), (64, 32, 4, 3))],
}
# head_dim 256 (B 2 x H 8 x N 4096, bf16): forward tiles, then the backward's dK/dV kernel (dQ at
# the shipped config), the dQ kernel (dK/dV shipped), and both jointly around the winners
D256_FWD = [(64, 32, 4, 2, False), (64, 64, 4, 2, False), (64, 64, 4, 3, False), (128, 32, 8, 2, False),
            (128, 64, 8, 2, False), (128, 64, 8, 3, False), (64, 64, 4, 2, True), (128, 64, 8, 2, True),
            (64, 32, 4, 3, False), (128, 32, 4, 2, False), (64, 64, 8, 2, False), (128, 128, 8, 2, False)]
D256_DKDV = [(32, 64, 8, 1), (16, 64, 4, 1), (16, 64, 8, 1), (32, 64, 4, 1), (32, 64, 8, 2), (16, 128, 8, 1),
             (32, 128, 8, 1), (64, 64, 8, 1), (16, 32, 4, 1), (32, 32, 4, 1), (64, 32, 8, 1), (32, 64, 4, 2)]
D256_DQ = [(64, 32, 8, 1), (64, 16, 4, 1), (64, 32, 4, 1), (64, 64, 8, 1), (128, 32, 8, 1), (32, 32, 4, 1),
           (64, 32, 8, 2), (128, 16, 8, 1), (32, 64, 4, 1)]
D256_JOINT_DKDV = [(64, 64, 8, 1), (64, 64, 8, 2), (128, 64, 8, 1), (64, 32, 8, 1), (32, 64, 8, 1), (64, 128, 8, 1)]
D256_JOINT_DQ = [(128, 32, 8, 1), (128, 64, 8, 1), (128, 32, 8, 2), (64, 32, 4, 1)]
# the GQA shapes' forward tiles (device descriptors, host descriptors, persistent)
GQA_FWD = [(64, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 128, 4, 3), (64, 64, 4, 4), (128, 64, 4, 3)]
GQA_HOST = [(64, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3)]
GQA_PERSIST_EXTRA = [(64, 64, 4, 2), (128, 128, 8, 2)]
# (B, Hq, Hkv, N, D, causal, dtype): GQA and many short sequences, D 64 to 256
SHAPES = [(4, 16, 16, 4096, 128, False, "fp16"), (1, 16, 16, 16384, 128, True, "fp16"),
          (4, 32, 32, 4096, 64, False, "fp16"), (8, 32, 8, 2048, 128, True, "bf16"),
          (32, 32, 8, 512, 128, True, "bf16"), (2, 8, 8, 4096, 256, True, "bf16")]
GATE = (("fwd", "fp16", 4096, 128, True), ("fwd", "bf16", 4096, 128, False),
        ("fwd", "fp16", 4096, 64, True), ("bwd", "fp16", 4096, 128, True))


def ours(config=None, *, name=None) -> P:
    if config is None:
        return P("ours", "ours")
    return P(name or f"ours {tile_name(config)}", "ours", config=config)


PEERS = (P("sdpa_cudnn", "sdpa", backend="cudnn"), P("sdpa_flash", "sdpa", backend="flash"))


# ----------------------------------------------------------------------------- the cases
_CASES: dict[str, Case] = {}


def add(pass_, dtype, b, hq, hkv, n, d, causal, providers, tags, *, suffix="", devices=("cuda",), timing=None):
    """Declare a case; a case declared twice (one shape in two sets) gets both sets' providers
    and tags."""
    name = shape_name(pass_, dtype, b, hq, hkv, n, d, causal) + suffix
    params = dict(pass_=pass_, dtype=dtype, B=b, Hq=hq, Hkv=hkv, N=n, D=d, causal=causal)
    old = _CASES.get(name)
    if old is not None:
        have = {p.name for p in old.providers}
        providers = old.providers + tuple(p for p in providers if p.name not in have)
        tags = old.tags + tuple(t for t in tags if t not in old.tags)
    _CASES[name] = Case(name, params, tuple(providers), metric="TFLOP/s",
                        work=flops(b, hq, n, d, causal, pass_ == "bwd"), devices=devices, tags=tuple(tags),
                        timing=timing or {})


def _declare() -> list[Case]:
    cases = [Case(f"ceiling: matmul {dt} 8192 x 8192 x 8192", dict(dtype=dt, M=8192, N=8192, K=8192),
                  (P("torch.matmul", "matmul"),), metric="TFLOP/s", work=2 * 8192 ** 3, tags=("main", "ceiling"))
             for dt in ("bf16", "fp16")]
    for d in (64, 128):
        for causal in (False, True):
            for dtype in DTYPES:
                for n in (1024, 4096, 16384):
                    b, h = TOKENS // n, WIDTH // d
                    tags = ("main",) + (("n4096",) if n == 4096 else ())
                    gate = tuple(s for s in GATE if s[1:] == (dtype, n, d, causal))
                    add("fwd", dtype, b, h, h, n, d, causal,
                        (ours(),) + PEERS + ((P("reference"),) if n <= 4096 else ()),
                        tags + (("gate",) if any(s[0] == "fwd" for s in gate) else ()))
                    add("bwd", dtype, b, h, h, n, d, causal, (ours(),) + PEERS,
                        tags + (("gate",) if any(s[0] == "bwd" for s in gate) else ()))
    for b, hq, hkv, n, d, causal, dtype in SHAPES:
        base = shipped_tiles(d, causal, n)
        pcfg = persistent(base, d, dtype)
        lowered = "" if pcfg["num_stages"] == base["num_stages"] else f"_s{pcfg['num_stages']}"
        tags = ("shapes",) + (("d256",) if d == 256 else ())
        add("fwd", dtype, b, hq, hkv, n, d, causal,
            (ours(),) + PEERS + (ours(base, name="ours_device"), ours(dict(base, HOST_DESC=True), name="ours_host"),
                                 ours(pcfg, name="ours_host_persist" + lowered)), tags)
        add("bwd", dtype, b, hq, hkv, n, d, causal, (ours(),) + PEERS, tags)
        if hkv != hq:
            tiles = ([ours(fwd_cfg(*t)) for t in GQA_FWD] + [ours(fwd_cfg(*t, HOST_DESC=True)) for t in GQA_HOST]
                     + [ours(fwd_cfg(*t, HOST_DESC=True, PERSISTENT=True)) for t in GQA_HOST + GQA_PERSIST_EXTRA])
            add("fwd", dtype, b, hq, hkv, n, d, causal, (ours(),) + tuple(tiles), ("shapes-tiles", "sweep"),
                suffix=" tiles")
    for causal in (False, True):
        add("fwd", "bf16", 2, 8, 8, 4096, 256, causal, (ours(),) + PEERS, ("d256",))
        add("bwd", "bf16", 2, 8, 8, 4096, 256, causal, (ours(),) + PEERS, ("d256",))
        shipped = fa.bwd_config(256, CUDA)
        sd, sq = (tuple(shipped[k][x] for x in ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")) for k in ("dkdv", "dq"))
        add("fwd", "bf16", 2, 8, 8, 4096, 256, causal, (ours(),) + tuple(ours(fwd_cfg(*t)) for t in D256_FWD),
            ("d256-tiles", "sweep"), suffix=" tiles")
        for label, pairs in (("dkdv", [(t, sq) for t in D256_DKDV]), ("dq", [(sd, t) for t in D256_DQ]),
                             ("joint", [(a, q) for a in D256_JOINT_DKDV for q in D256_JOINT_DQ])):
            add("bwd", "bf16", 2, 8, 8, 4096, 256, causal, (ours(),) + tuple(ours(bwd_cfg(*pq)) for pq in pairs),
                ("d256-tiles", "sweep"), suffix=f" tiles {label}")
    for d in (64, 128):
        b4, h = TOKENS // 4096, WIDTH // d
        for causal in (False, True):
            for n in (1024, 4096):
                add("fwd", "fp16", TOKENS // n, h, h, n, d, causal,
                    (ours(),) + tuple(ours(fwd_cfg(*t)) for t in TUNE_FWD[d]), ("tune", "sweep"), suffix=" tiles")
            add("bwd", "fp16", b4, h, h, 4096, d, causal, (ours(),) + tuple(ours(bwd_cfg(*t)) for t in TUNE_BWD[d]),
                ("tune", "sweep"), suffix=" tiles")
    smoke = dict(devices=("cpu",), timing=dict(repeats=2, budget_ms=None, min_warmup=1, warmup_ms=0))
    cpu_peers = (P("sdpa", backend=None),)
    add("fwd", "fp16", 1, 2, 2, 64, 16, True, (ours(),) + cpu_peers + (P("reference"),), ("smoke",), **smoke)
    add("fwd", "fp16", 1, 4, 2, 48, 16, False,
        (ours(), ours(fwd_cfg(16, 16, 4, 1, HOST_DESC=True))) + cpu_peers, ("smoke",), **smoke)
    add("bwd", "fp16", 1, 2, 2, 64, 16, True, (ours(),) + cpu_peers, ("smoke",), **smoke)
    return cases + list(_CASES.values())


CASES = _declare()


def case_named(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


# ----------------------------------------------------------------------------- set-up and checks
def make(b, hq, hkv, n, d, dtype, device, seed=0, grad=False):
    g = torch.Generator(device=device).manual_seed(seed)
    shapes = [(b, hq, n, d), (b, hkv, n, d), (b, hkv, n, d)]
    return [torch.randn(s, device=device, dtype=DTYPES[dtype], generator=g).requires_grad_(grad) for s in shapes]


def setup(case, device):
    p = case.params
    if "pass_" not in p:                              # a ceiling
        g = torch.Generator(device=device).manual_seed(1)
        return [torch.randn(p["M"], p["K"], device=device, dtype=DTYPES[p["dtype"]], generator=g) for _ in range(2)]
    q, k, v = make(p["B"], p["Hq"], p["Hkv"], p["N"], p["D"], p["dtype"], device, grad=p["pass_"] == "bwd")
    return dict(q=q, k=k, v=v, do=torch.randn_like(q) if p["pass_"] == "bwd" else None)


def check_heads(p: dict, device, fwd_config=None, bwd_config=None, backward=True) -> dict:
    """2 query heads of the shape (sharing one KV head when it is GQA) against the float64 oracle,
    with the tolerance rule: forward out and lse; dq, dk, dv when ``backward``. With a
    host-descriptor ``fwd_config``, also whether out and lse have the bits of the device-descriptor
    kernel at the same tiles."""
    from spec_tests.attention.oracles import lse_floor_from
    gqa = p["Hq"] != p["Hkv"]
    q, k, v = make(1, 2, 1 if gqa else 2, p["N"], p["D"], p["dtype"], device, seed=7)
    causal, res = p["causal"], {}
    try:
        out, lse = fa.flash_forward(q, k, v, causal=causal, config=fwd_config)
    except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory for this tile
        return dict(fwd=f"error: {exc!r}"[:300])
    r_out, r_lse = ref.attention(q, k, v, causal=causal, return_lse=True)
    o_out, o_lse = ref.attention(q.double(), k.double(), v.double(), causal=causal, return_lse=True)
    for name, a, r, o, floor in (("fwd", out, r_out, o_out, None),
                                 ("lse", lse, r_lse, o_lse, lse_floor_from(q, k.repeat_interleave(2 if gqa else 1, 1),
                                                                           1 / math.sqrt(p["D"])))):
        try:
            assert_close_to_oracle(a, r, o, name="out" if name == "fwd" else name, floor_from=floor)
            res[name] = "ok"
        except AssertionError as exc:
            res[name] = str(exc).splitlines()[0]
    res["fwd_max_err"] = (out.double() - o_out).abs().max().item()
    if fwd_config is not None and fwd_config.get("HOST_DESC"):
        tiles = {key: val for key, val in fwd_config.items() if key not in HOST_KEYS}
        d_out, d_lse = fa.flash_forward(q, k, v, causal=causal, config=tiles)
        same = torch.equal(out.view(torch.int16), d_out.view(torch.int16)) and torch.equal(
            lse.view(torch.int32), d_lse.view(torch.int32))
        res["bits"] = "same" if same else (
            f"differ: out {(out.double() - d_out.double()).abs().max().item():.3e}, "
            f"lse {(lse.double() - d_lse.double()).nan_to_num().abs().max().item():.3e}")
    if backward and p["N"] <= 4096:
        do = torch.randn_like(q)
        dq, dk, dv = fa.flash_backward(do, q, k, v, out, lse, causal=causal, config=bwd_config)
        grads = {}
        for name, dt in (("ref", DTYPES[p["dtype"]]), ("oracle", torch.float64)):
            xs = [t.detach().to(dt).requires_grad_() for t in (q, k, v)]
            ref.attention(*xs, causal=causal).backward(do.to(dt))
            grads[name] = [x.grad for x in xs]
        floor_from = torch.cat([g.reshape(-1) for g in grads["oracle"]])
        try:
            for nm, a, r, o in zip(("dq", "dk", "dv"), (dq, dk, dv), grads["ref"], grads["oracle"]):
                assert_close_to_oracle(a, r, o, factor=3.0, name=nm, floor_from=floor_from)
            res["bwd"] = "ok"
        except AssertionError as exc:
            res["bwd"] = str(exc).splitlines()[0]
    return res


def check(problem, case, device) -> dict:
    p = case.params
    if "pass_" not in p:
        return dict(ok=True)
    res = check_heads(p, device, backward=p["pass_"] == "bwd")
    res["ok"] = all(v in ("ok", "same") for k, v in res.items() if k in ("fwd", "lse", "bwd"))
    return res


# ----------------------------------------------------------------------------- builders
BACKENDS = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
            "math": "MATH"}


def _backend(name):
    if name is None:
        return nullcontext
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = getattr(SDPBackend, BACKENDS[name])
    return lambda: sdpa_kernel(backend)


def _ours(prob, case, device, config=None, extra_heads=0.0):
    """Our forward or backward launch; ``config`` another tile configuration (checked first);
    ``extra_heads`` a planted slowdown for the gate's proof (the kernel run again on that fraction
    of the heads: it lives here, never in the kernel path users call)."""
    p = case.params
    causal = p["causal"]
    q, k, v = (t.detach() for t in (prob["q"], prob["k"], prob["v"]))
    info = {}
    if config is not None:
        bwd = "dkdv" in config
        c = check_heads(p, device, fwd_config=None if bwd else config, bwd_config=config if bwd else None,
                        backward=bwd)
        info["check"] = c
        verdict = c.get("bwd" if bwd else "fwd")
        if verdict != "ok" or c.get("bits", "same") != "same":
            raise Unavailable(f"failed its check: {c}")
    if p["pass_"] == "fwd":
        part = None
        if extra_heads:
            n_extra = math.ceil(p["B"] * p["Hq"] * extra_heads)
            part = [t.reshape(1, -1, p["N"], p["D"])[:, :n_extra] for t in (q, k, v)]

        def fwd():
            with torch.no_grad():
                fa.flash_forward(q, k, v, causal=causal, config=config)
                if part is not None:
                    fa.flash_forward(*part, causal=causal)
        return fwd, info
    if extra_heads:
        raise ValueError("the planted slowdowns are forward-only")
    out, lse = fa.flash_forward(q, k, v, causal=causal)
    do = prob["do"]
    return (lambda: fa.flash_backward(do, q, k, v, out, lse, causal=causal, config=config)), info


def _sdpa(prob, case, device, backend):
    """SDPA under one backend (None: torch's choice); enable_gqa where the backend takes it, else
    K/V repeated to the query heads (``kv`` in the row says which)."""
    p = case.params
    causal, kernel = p["causal"], _backend(backend)
    q, k, v = prob["q"], prob["k"], prob["v"]
    kw, how = dict(is_causal=causal), "same heads"
    if p["Hq"] != p["Hkv"]:
        try:
            with torch.no_grad(), kernel():
                F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw)
            kw["enable_gqa"], how = True, "native"
        except RuntimeError:
            r = p["Hq"] // p["Hkv"]
            k, v = (t.detach().repeat_interleave(r, 1).requires_grad_(t.requires_grad) for t in (k, v))
            how = "repeated"
    if p["pass_"] == "fwd":
        def fwd():
            with torch.no_grad(), kernel():
                return F.scaled_dot_product_attention(q, k, v, **kw)
        return fwd, dict(kv=how)
    with kernel():
        o = F.scaled_dot_product_attention(q, k, v, **kw)
    do = prob["do"]

    def bwd():
        q.grad = k.grad = v.grad = None
        o.backward(do, retain_graph=True)
    return bwd, dict(kv=how)


def _reference(prob, case, device):
    q, k, v = (t.detach() for t in (prob["q"], prob["k"], prob["v"]))
    return lambda: ref.attention(q, k, v, causal=case.params["causal"])


def _matmul(prob, case, device):
    a, b = prob
    return lambda: a @ b


BUILDERS = {"ours": _ours, "sdpa": _sdpa, "reference": _reference, "matmul": _matmul}
