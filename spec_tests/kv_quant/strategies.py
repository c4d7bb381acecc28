"""Quantised paged-attention problems: per-sequence K/V (the originals), quantised per token-head,
scattered into a pool of code blocks with a parallel scale pool through one block table.

A :class:`QuantCase` is plain data (its repr is valid Python). It reuses paged_attention's
:class:`PagedCase` for the batch's shape and block table (random block order, shared prefix
blocks, partial last blocks, spare table columns), then:

* shapes the originals by ``profile`` (the adversarial inputs of the bound):
    "normal"      standard normal K, V
    "outliers"    a few tokens 100x larger in K and V (their own scale; the others' unaffected)
    "equal_keys"  every key of a KV head the same vector (uniform attention), V normal
    "tiny"        K, V times 2^-100 (bf16/float32 only: far below float16's range; a row whose
                  absmax / QMAX is under 2^-126 meets the scale floor)
    "huge"        K, V times 2^100 (bf16/float32), or 2^8 (float16): softmax saturates
    "zero_rows"   about a third of the token-heads all zero (scale floor, codes 0)
    "mixed"       each token's magnitude 2^e, e uniform in [-20, 20] ([-8, 8] for float16): every
                  row its own scale
    "huge_q"      q times 2^24 (bf16/float32: beyond float16's range, where a kernel that runs its
                  dots in float16 must scale q first), or 2^4 (float16); K, V normal
* quantises each sequence's K, V with ``quantize`` (the test passes the reference's or the
  implementation's quantize_kv) and writes codes and scales to the pools; every slot no query may
  see holds a NaN code (E4M3) or the code -128 (INT8) and a NaN scale, so an implementation that
  reads one returns NaN.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, generator
from spec_tests.kv_quant.oracles import CODE
from spec_tests.paged_attention.strategies import PagedCase, paged_cases

PROFILES = ("normal", "outliers", "equal_keys", "tiny", "huge", "zero_rows", "mixed", "huge_q")


@dataclass(frozen=True)
class QuantInputs:
    q: torch.Tensor               # (batch, q_heads, d) or (batch, q_len, q_heads, d)
    k_cache: torch.Tensor         # (num_blocks, block_size, kv_heads, d) codes
    v_cache: torch.Tensor
    k_scale: torch.Tensor         # (num_blocks, block_size, kv_heads) float32
    v_scale: torch.Tensor
    block_tables: torch.Tensor
    seq_lens: torch.Tensor
    k: tuple[torch.Tensor, ...]   # the originals per sequence (seq_len, kv_heads, d), q's dtype
    v: tuple[torch.Tensor, ...]
    k_codes: tuple[tuple[torch.Tensor, torch.Tensor], ...]   # per sequence (codes, scale) of K
    v_codes: tuple[tuple[torch.Tensor, torch.Tensor], ...]

    @property
    def args(self) -> tuple:
        return self.q, self.k_cache, self.v_cache, self.k_scale, self.v_scale, self.block_tables, self.seq_lens

    @property
    def q4(self) -> torch.Tensor:
        return self.q if self.q.dim() == 4 else self.q.unsqueeze(1)


@dataclass(frozen=True)
class QuantCase:
    paged: PagedCase
    fmt: str = "fp8"          # "fp8" (float8_e4m3fn) or "int8"
    profile: str = "normal"

    @property
    def kwargs(self) -> dict:
        return self.paged.kwargs

    def originals(self):
        """(q, ks, vs, table, pool size) with K/V shaped by the profile, in the case's dtype."""
        p = self.paged
        x = p.build(dtype=torch.float32)
        g = generator(p.seed + 7)
        dt = DTYPES[p.dtype]
        ks, vs = [], []
        for k, v in zip(x.k, x.v):
            k, v = k.clone(), v.clone()
            n = k.shape[0]
            if self.profile == "outliers" and n:
                hot = torch.randint(0, n, (max(1, n // 8),), generator=g)
                k[hot] *= 100.0
                v[hot] *= 100.0
            elif self.profile == "equal_keys":
                k[:] = k[:1] if n else k
            elif self.profile == "tiny":
                k, v = k * 2.0 ** -100, v * 2.0 ** -100
            elif self.profile == "huge":
                f = 2.0 ** 8 if dt == torch.float16 else 2.0 ** 100
                k, v = k * f, v * f
            elif self.profile == "zero_rows":
                zero = torch.rand(k.shape[:2], generator=g) < 1 / 3
                k[zero], v[torch.rand(v.shape[:2], generator=g) < 1 / 3] = 0.0, 0.0
            elif self.profile == "mixed":
                top = 8 if dt == torch.float16 else 20                 # float16 tops out at 65504
                e = torch.randint(-top, top + 1, (n, 1, 1), generator=g).double()
                k, v = k * 2.0 ** e.float(), v * 2.0 ** e.flip(0).float()
            ks.append(k.to(dt))
            vs.append(v.to(dt))
        # shared prefix blocks hold sequence 0's tokens (as PagedCase builds them)
        bs = p.block_size
        for b in range(1, len(ks)):
            n_sh = _shared(p, b) * bs
            ks[b][:n_sh], vs[b][:n_sh] = ks[0][:n_sh], vs[0][:n_sh]
        q = x.q
        if self.profile == "huge_q":
            q = q * (2.0 ** 4 if dt == torch.float16 else 2.0 ** 24)
        return q.to(dt), ks, vs, x.block_tables, x.k_cache.shape[0]

    def build(self, quantize, device="cpu") -> QuantInputs:
        """``quantize(x, dtype) -> (codes, scale)``: whose quantize_kv writes the cache."""
        p = self.paged
        q, ks, vs, table, pool = self.originals()
        code = CODE[self.fmt]
        bs, shape = p.block_size, (p.kv_heads, p.head_dim)
        caches = []
        kq, vq = [], []
        for seqs, out in ((ks, kq), (vs, vq)):
            codes = torch.zeros((pool, bs, *shape), dtype=code)
            codes.view(torch.uint8).fill_(0x7F if self.fmt == "fp8" else 0x80)   # NaN / -128
            scales = torch.full((pool, bs, p.kv_heads), float("nan"))
            for b, x in enumerate(seqs):
                c, s = quantize(x, code)
                out.append((c, s))
                n = x.shape[0]
                lo = p.first_seen(n) // bs * bs
                pos = torch.arange(lo, n)
                blocks = table[b].long()[pos // bs]
                codes[blocks, pos % bs] = c[lo:].to("cpu")
                scales[blocks, pos % bs] = s[lo:].to("cpu")
            caches.append((codes, scales))
        (kc, kscale), (vc, vscale) = caches
        lens = torch.tensor(p.seq_lens, dtype=torch.int32)
        to = lambda t: t.to(device)  # noqa: E731
        return QuantInputs(to(q), to(kc), to(vc), to(kscale), to(vscale), to(table), to(lens),
                           tuple(map(to, ks)), tuple(map(to, vs)), tuple(kq), tuple(vq))


def _shared(p: PagedCase, b: int) -> int:
    full = [n // p.block_size for n in p.seq_lens]
    return min(p.shared_blocks, full[0], full[b])


@st.composite
def quant_cases(draw, *, profiles=PROFILES, fmts=("fp8", "int8"), **paged):
    case = draw(paged_cases(**paged))
    profile = draw(st.sampled_from(profiles))
    if profile == "tiny" and case.dtype == "float16":
        profile = "normal"
    return QuantCase(case, draw(st.sampled_from(fmts)), profile)
