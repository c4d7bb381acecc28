"""Quantised paged attention (course 05.06): decode over FP8/INT8 code blocks with per-token-head
scales, against two float64 oracles.

1. The dequantised oracle: exact attention over codes x scales (oracles.dequantized), gathered
   contiguously per sequence. The implementation must match it by the tolerance rule (2x the
   reference's own low-precision error + the rounding floor): right codes, right scales, right
   blocks, nothing unowned read. Every slot no query may see holds a NaN code (E4M3) or -128 and
   a NaN scale.
2. The unquantised oracle: exact attention over the original K/V. Exact attention over the
   dequantised cache must lie within the *derived* bound (oracles.attention_bound: the format's
   half step, through the logits, the softmax and the weighted sum) of it; the implementation's
   output within that bound plus what the tolerance rule allows in 1.

On CPU the optimized implementation runs its Triton kernel under the interpreter: short contexts.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.tolerance import assert_close_to_oracle, rounding_floor
from reference.kv_quant import quantize_kv as reference_quantize
from reference.kv_quant import quantized_paged_attention as reference_attention
from spec_tests.kv_quant.oracles import attention64, attention_bound, dequantized
from spec_tests.kv_quant.strategies import QuantCase, quant_cases
from spec_tests.paged_attention.strategies import PagedCase


def _scaled(n: int) -> int:
    return max(1, round(n * settings().max_examples / 25))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _check(impl, case: QuantCase, device, *, quantize=None, bound=True):
    """impl's (out, lse) against the dequantised oracle (tolerance rule) and, with ``bound``,
    against the unquantised oracle (the derived bound + the tolerance allowance)."""
    x = case.build(quantize or reference_quantize, device)
    before = [t.clone() for t in x.args]
    fn = impl.get("quantized_paged_attention")
    out, lse = fn(*x.args, return_lse=True, **case.kwargs)
    names = ("q", "k_cache", "v_cache", "k_scale", "v_scale", "block_tables", "seq_lens")
    for name, t, b in zip(names, x.args, before):
        assert _same(t, b), f"quantized_paged_attention modified its input {name}"
    rank3 = x.q.dim() == 3
    q4 = x.q4
    khat = [dequantized(c, s) for c, s in x.k_codes]
    vhat = [dequantized(c, s) for c, s in x.v_codes]
    oracle_q, oracle_q_lse = attention64(q4, khat, vhat, **case.kwargs)      # exact, over the codes
    if rank3:
        oracle_q, oracle_q_lse = oracle_q[:, 0], oracle_q_lse[:, 0]
    ref, ref_lse = reference_attention(*(t.cpu() for t in x.args), return_lse=True, **case.kwargs)
    ctx = dict(case=case)
    if isinstance(out, torch.Tensor) and out.shape == oracle_q.shape and out.is_floating_point():
        nan = out.isnan().cpu() & ~oracle_q.isnan()
        if nan.any():
            raise AssertionError(
                f"out is NaN at {tuple(nan.nonzero()[0].tolist())}: every slot no query may see holds a NaN code "
                f"(E4M3) or a NaN scale, so the implementation read one of them.\n    case: {case!r}")
    assert_close_to_oracle(out.cpu() if isinstance(out, torch.Tensor) else out, ref, oracle_q,
                           name="out vs attention over the dequantised cache", inputs=ctx)
    assert isinstance(lse, torch.Tensor) and lse.dtype == ref_lse.dtype, (
        f"lse must be {ref_lse.dtype}, got {getattr(lse, 'dtype', type(lse))}")
    assert_close_to_oracle(lse.cpu(), ref_lse, oracle_q_lse, name="lse vs attention over the dequantised cache",
                           inputs=ctx)
    if not bound:
        return out, lse
    oracle, oracle_lse = attention64(q4, x.k, x.v, **case.kwargs)               # exact, unquantised
    b_out, b_lse = attention_bound(q4.cpu(), [k.cpu() for k in x.k], [v.cpu() for v in x.v], case.fmt,
                                   **case.kwargs)
    if rank3:
        oracle, oracle_lse, b_out, b_lse = oracle[:, 0], oracle_lse[:, 0], b_out[:, 0], b_lse[:, 0]
    _within(oracle_q, oracle, b_out, "exact attention over the dequantised cache", case)
    _within(oracle_q_lse, oracle_lse, b_lse, "its lse", case)
    # end to end: |impl - A(x)| <= |impl - A(x_hat)| + |A(x_hat) - A(x)| <= tolerance + bound
    err_ref = float((ref.double() - oracle_q).nan_to_num(posinf=0, neginf=0).abs().max()) if ref.numel() else 0.0
    allowance = 2 * err_ref + rounding_floor(oracle_q, out.dtype)
    _within(out.cpu().double(), oracle, b_out + allowance, "the implementation's out", case)
    return out, lse


def _within(got: torch.Tensor, oracle: torch.Tensor, bound: torch.Tensor, what: str, case) -> None:
    finite = torch.isfinite(oracle)
    assert torch.equal(finite, torch.isfinite(got)) and torch.equal(got[~finite], oracle[~finite]), (
        f"{what}: non-finite where unquantised attention is finite (or the reverse)\n    case: {case!r}")
    err = torch.where(finite, (got - oracle).abs(), torch.zeros_like(got))
    over = err - bound
    if (over > 0).any():
        idx = tuple(int(i) for i in torch.unravel_index(over.argmax(), over.shape))
        raise AssertionError(
            f"{what} is {float(err[idx]):.4g} from unquantised attention at {idx}, over the derived bound "
            f"{float(bound[idx]):.4g} (max_j u(v_j) + tanh(eps) (max_j v - min_j v), eps = tau max_j "
            f"sum_d |q_d| u(k_jd); u = the format's half step: INT8 scale/2, E4M3 max(2^-4|x|, 2^-10 scale))\n"
            f"    case: {case!r}")


# Pinned cases (explicit examples run first), each labelled with the mutants it catches.
# GQA 4:2, block 4, shared first block, partial last blocks, several splits; FP8
@example(case=QuantCase(PagedCase((37, 70, 5), 0, 4, 2, 16, 4, None, "float16", 1, shared_blocks=1), "fp8")).via(
    "mutant:kernel_swaps_scales mutant:kernel_scale_of_head_0 mutant:kernel_v_unscaled")
# INT8, bf16, MQA, a padding row, a window (blocks left of it hold NaN)
@example(case=QuantCase(PagedCase((0, 1, 64, 33), 0, 8, 1, 32, 16, 5, "bfloat16", 2, spare_cols=2), "int8",
                        "mixed")).via("mutant:kernel_swaps_scales mutant:kernel_v_unscaled")
# outlier tokens, INT8, GQA 2:2
@example(case=QuantCase(PagedCase((40, 23), 0, 4, 2, 16, 8, None, "bfloat16", 3), "int8", "outliers")).via(
    "mutant:kernel_scale_of_head_0")
@settings(max_examples=_scaled(8))
@given(case=quant_cases(max_len=64))
def test_decode_matches_dequantized_and_stays_within_the_bound(impl, device, case):
    """One decode token per sequence: out and lse == exact attention over codes x scales (tolerance
    rule), and within the derived bound of exact attention over the unquantised K/V -- block sizes
    1-128, shared and non-contiguous blocks, windows, MHA/GQA/MQA, FP8 and INT8, and the
    adversarial profiles (outlier tokens, all-equal keys, tiny and huge magnitudes, zero rows)."""
    _check(impl, case, device)


@example(case=QuantCase(PagedCase((40, 3, 17), 3, 4, 2, 16, 8, None, "float16", 4, shared_blocks=1), "int8")).via(
    "mutant:kernel_swaps_scales mutant:kernel_scale_of_head_0 mutant:kernel_v_unscaled")
@settings(max_examples=_scaled(3))
@given(case=quant_cases(q_lens=(1, 2, 3, 4), max_len=40))
def test_speculative_tokens(impl, device, case):
    """A few query tokens per sequence (q rank 4): causal among themselves, bottom-right aligned,
    over the quantised cache: the same two oracles."""
    _check(impl, case, device)


ADVERSARIAL = [
    # one token 100x the others in K and V: its scale is its own, the others keep their step
    QuantCase(PagedCase((33, 17), 0, 4, 2, 16, 4, None, "bfloat16", 21), "fp8", "outliers"),
    # every key equal: uniform attention, the output is the mean of the (quantised) values
    QuantCase(PagedCase((29,), 0, 4, 1, 16, 8, None, "float16", 22), "int8", "equal_keys"),
    # 2^-100: the scale floor; bf16 keeps float32's exponent range
    QuantCase(PagedCase((21, 8), 0, 4, 2, 16, 4, None, "bfloat16", 23), "fp8", "tiny"),
    QuantCase(PagedCase((21, 8), 0, 4, 2, 16, 4, None, "bfloat16", 24), "int8", "tiny"),
    # 2^100: the softmax saturates to one key
    QuantCase(PagedCase((19,), 0, 4, 2, 16, 2, None, "bfloat16", 25), "int8", "huge"),
    # a third of the token-heads all zero
    QuantCase(PagedCase((26, 12), 0, 4, 2, 32, 8, 9, "float16", 26), "fp8", "zero_rows"),
    QuantCase(PagedCase((26, 12), 0, 4, 2, 32, 8, None, "bfloat16", 27), "int8", "zero_rows"),
    # every token its own magnitude 2^-20..2^20
    QuantCase(PagedCase((30, 5), 0, 4, 2, 16, 16, None, "float32", 28, scale=0.0), "fp8", "mixed"),
    # q up to ~2^26 in bfloat16: beyond float16's range (a kernel running its dots in float16)
    QuantCase(PagedCase((18, 33), 0, 4, 2, 16, 8, None, "bfloat16", 29), "fp8", "huge_q"),
    QuantCase(PagedCase((18, 33), 0, 4, 2, 16, 8, None, "bfloat16", 30), "int8", "huge_q"),
]


@pytest.mark.parametrize("case", ADVERSARIAL, ids=lambda c: f"{c.fmt}-{c.profile}-{c.paged.dtype}")
def test_adversarial_inputs_stay_within_the_bound(impl, device, case):
    """Outlier tokens, all-equal keys, magnitudes 2^-100 and 2^100, zero rows, mixed magnitudes, q
    beyond float16's range:
    the same two oracles (a test the per-token-head scales pass and a per-tensor scale fails)."""
    _check(impl, case, device)


@pytest.mark.parametrize("fmt", ("fp8", "int8"))
def test_end_to_end_with_the_implementations_quantizer(impl, device, fmt):
    """The implementation's quantize_kv writes the cache its quantized_paged_attention reads: the
    result stays within the derived bound of unquantised attention (the bound computed from the
    original values and the contract's scale, never from the implementation's own)."""
    for case in (QuantCase(PagedCase((45, 9), 0, 4, 2, 16, 4, None, "bfloat16", 31, shared_blocks=1), fmt, "outliers"),
                 QuantCase(PagedCase((20,), 2, 4, 1, 32, 8, 6, "float16", 32), fmt, "zero_rows")):
        _check(impl, case, device, quantize=impl.get("quantize_kv"))


@pytest.mark.parametrize("fmt", ("fp8", "int8"))
def test_zero_scales_are_zero_values(impl, device, fmt):
    """A scale of 0 is a legal value (codes times 0: the values are 0; nothing checks scales'
    values, which would need a sync). With every V scale 0 the output is exactly 0; with every K
    scale 0 too, attention is uniform, lse = log(visible keys). Pins a kernel that divides by a
    tile's largest V scale without guarding 0."""
    fn = impl.get("quantized_paged_attention")
    case = QuantCase(PagedCase((21, 40), 0, 4, 2, 16, 8, None, "bfloat16", 53, shared_blocks=1), fmt)
    x = case.build(reference_quantize, device)
    ks, vs = x.k_scale.clone(), x.v_scale.clone()
    ks[ks.isfinite()], vs[vs.isfinite()] = 0.0, 0.0          # the slots no query sees keep NaN
    vhat = [dequantized(c, torch.zeros_like(sc)) for c, sc in x.v_codes]
    for k_scale, zero_k in ((x.k_scale, False), (ks, True)):
        args = (x.q, x.k_cache, x.v_cache, k_scale, vs, x.block_tables, x.seq_lens)
        out, lse = fn(*args, return_lse=True, **case.kwargs)
        ref_out, ref_lse = reference_attention(*(t.cpu() for t in args), return_lse=True, **case.kwargs)
        khat = [dequantized(c, torch.zeros_like(sc) if zero_k else sc) for c, sc in x.k_codes]
        _, oracle_lse = attention64(x.q4, khat, vhat, **case.kwargs)
        oracle_lse = oracle_lse[:, 0] if x.q.dim() == 3 else oracle_lse
        assert torch.equal(ref_out, torch.zeros_like(ref_out))
        assert not out.isnan().any() and torch.equal(out.cpu(), torch.zeros_like(ref_out)), (
            f"every V scale 0 (values 0): out must be exactly 0, got max |out| "
            f"{float(out.nan_to_num(1e30).abs().max()):.4g} (NaN: {bool(out.isnan().any())})\n    case: {case!r}")
        assert_close_to_oracle(lse.cpu(), ref_lse, oracle_lse, name="lse with V scales 0", inputs=dict(case=case))


def test_omitted_arguments_mean_the_defaults(impl, device):
    """Omitting scale, window and return_lse is passing None, None, False: out alone, softmax scale
    1/sqrt(head_dim)."""
    fn = impl.get("quantized_paged_attention")
    x = QuantCase(PagedCase((21, 9), 0, 4, 2, 16, 4, None, "float16", 51), "fp8").build(reference_quantize, device)
    got = fn(*x.args)
    assert isinstance(got, torch.Tensor), "return_lse omitted must return out alone"
    assert torch.equal(got, fn(*x.args, scale=0.25, window=None, return_lse=False)), (
        "scale=None must mean 1/sqrt(head_dim) = 0.25 here")


@pytest.mark.parametrize("fmt", ("fp8", "int8"))
def test_a_batch_of_no_sequences(impl, device, fmt):
    """batch 0 (an empty decode step): out (0, q_heads, head_dim) in q's dtype and lse (0, q_heads)
    float32, nothing computed, over a valid cache."""
    x = QuantCase(PagedCase((5, 9), 0, 4, 2, 16, 4, None, "bfloat16", 52), fmt).build(reference_quantize, device)
    args = (x.q[:0], x.k_cache, x.v_cache, x.k_scale, x.v_scale, x.block_tables[:0], x.seq_lens[:0])
    out, lse = impl.get("quantized_paged_attention")(*args, return_lse=True)
    assert out.shape == (0, 4, 16) and out.dtype == torch.bfloat16, (out.shape, out.dtype)
    assert lse.shape == (0, 4) and lse.dtype == torch.float32, (lse.shape, lse.dtype)


def test_scales_may_be_views(impl, device):
    """The code pools as halves of one (num_blocks, 2, block_size, kv_heads, head_dim) buffer and
    the scale pools as halves of one (num_blocks, 2, block_size, kv_heads) buffer (strided views):
    the same result as separate contiguous pools."""
    case = QuantCase(PagedCase((21, 40), 0, 4, 2, 16, 8, None, "bfloat16", 41, shared_blocks=1), "int8")
    x = case.build(reference_quantize, device)
    codes = torch.stack([x.k_cache, x.v_cache], dim=1)
    scales = torch.stack([x.k_scale, x.v_scale], dim=1)
    fn = impl.get("quantized_paged_attention")
    want = fn(*x.args, **case.kwargs)
    got = fn(x.q, codes[:, 0], codes[:, 1], scales[:, 0], scales[:, 1], x.block_tables, x.seq_lens, **case.kwargs)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num()), (
        "strided views of the code and scale pools changed the result")


# ------------------------------------------------------------------------------ bad input
def _valid():
    x = QuantCase(PagedCase((5, 9), 0, 4, 2, 16, 4, None, "float16", 0), "fp8").build(reference_quantize)
    return dict(q=x.q, k_cache=x.k_cache, v_cache=x.v_cache, k_scale=x.k_scale, v_scale=x.v_scale,
                block_tables=x.block_tables, seq_lens=x.seq_lens)


def _with(**changes):
    return lambda kw: {**kw, **{k: f(kw) for k, f in changes.items()}}


def _set(t, index, value):
    t = t.clone()
    t[index] = value
    return t


BAD = [
    Bad("q not a tensor", _with(q=lambda kw: kw["q"].tolist()), TypeError, ("q",)),
    Bad("integer q", _with(q=lambda kw: kw["q"].long()), TypeError, ("q",)),
    Bad("q rank 2", _with(q=lambda kw: kw["q"][:, 0]), ValueError, ("q",)),
    Bad("float16 caches (not codes)", _with(k_cache=lambda kw: kw["k_cache"].half(),
                                            v_cache=lambda kw: kw["v_cache"].half()), TypeError, ("k_cache",)),
    Bad("uint8 k_cache", _with(k_cache=lambda kw: kw["k_cache"].view(torch.uint8),
                               v_cache=lambda kw: kw["v_cache"].view(torch.uint8)), TypeError, ("k_cache",)),
    Bad("e5m2 caches", _with(k_cache=lambda kw: kw["k_cache"].view(torch.float8_e5m2),
                             v_cache=lambda kw: kw["v_cache"].view(torch.float8_e5m2)), TypeError, ("k_cache",)),
    Bad("v_cache int8, k_cache fp8", _with(v_cache=lambda kw: kw["v_cache"].view(torch.int8)), TypeError,
        ("v_cache",)),
    Bad("k_cache rank 3", _with(k_cache=lambda kw: kw["k_cache"][0]), ValueError, ("k_cache",)),
    # both caches rank 3 with their scales cut alike: only the caches' own rank check names k_cache
    Bad("both caches rank 3", _with(k_cache=lambda kw: kw["k_cache"][0], v_cache=lambda kw: kw["v_cache"][0],
                                    k_scale=lambda kw: kw["k_scale"][0], v_scale=lambda kw: kw["v_scale"][0]),
        ValueError, ("k_cache",)),
    Bad("v_cache shape differs", _with(v_cache=lambda kw: kw["v_cache"][:-1]), ValueError, ("v_cache",)),
    Bad("k_scale float16", _with(k_scale=lambda kw: kw["k_scale"].half()), TypeError, ("k_scale",)),
    Bad("v_scale not a tensor", _with(v_scale=lambda kw: kw["v_scale"].tolist()), TypeError, ("v_scale",)),
    Bad("k_scale with head_dim", _with(k_scale=lambda kw: kw["k_scale"][..., None].expand(*kw["k_scale"].shape, 16)),
        ValueError, ("k_scale",)),
    Bad("v_scale one block short", _with(v_scale=lambda kw: kw["v_scale"][:-1]), ValueError, ("v_scale",)),
    Bad("k_scale per block, not per slot", _with(k_scale=lambda kw: kw["k_scale"][:, :1]), ValueError, ("k_scale",)),
    Bad("heads not a multiple", _with(q=lambda kw: kw["q"][:, :3]), ValueError, ("heads",)),
    Bad("head_dim differs", _with(q=lambda kw: kw["q"][..., :8]), ValueError, ("head_dim",)),
    Bad("float block_tables", _with(block_tables=lambda kw: kw["block_tables"].float()), TypeError,
        ("block_tables",)),
    Bad("negative seq_len", _with(seq_lens=lambda kw: _set(kw["seq_lens"], 1, -1)), ValueError, ("seq_lens",)),
    Bad("table too short for seq_len",
        _with(seq_lens=lambda kw: _set(kw["seq_lens"], 1, kw["block_tables"].shape[1] * kw["k_cache"].shape[1] + 1)),
        ValueError, ("block_tables", "seq_lens")),
    Bad("block id >= num_blocks",
        _with(block_tables=lambda kw: _set(kw["block_tables"], (1, 2), kw["k_cache"].shape[0])), ValueError,
        ("block_tables",)),
    Bad("negative window", dict(window=-1), ValueError, ("window",)),
    Bad("nan softmax scale", dict(scale=math.nan), ValueError, ("scale",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """paged_attention's bad input, with codes instead of a float cache: caches that are not
    float8_e4m3fn/int8 (or not the same one), scales that are not float32 or not of the caches'
    shape without head_dim (one per token-head, not per block) -> TypeError/ValueError naming the
    argument, nothing modified."""
    assert_rejects(impl.get("quantized_paged_attention"), _valid, bad)


def _meta(name):
    return Bad(f"{name} on another device", _with(**{name: lambda kw: kw[name].to("meta")}), ValueError, (name,))


@pytest.mark.parametrize("moved", [_meta(n) for n in ("k_cache", "k_scale", "v_scale")],
                         ids=lambda b: b.id)
def test_rejects_arguments_on_another_device(impl, moved):
    """A code or scale pool on another device than q raises ValueError naming it (here "meta":
    tensors without data, so the no-change check cannot run)."""
    from conformance.badinput import assert_rejects_without_data
    assert_rejects_without_data(impl.get("quantized_paged_attention"), moved.apply(_valid()), moved)


@pytest.mark.parametrize("fmt", ("fp8", "int8"))
def test_the_bound_is_attained(impl, device, fmt):
    """The bound cannot be halved: one visible key (softmax weight 1, no logit term) whose value
    row holds an element at a midpoint of the grid (INT8: y = 41.5 with 127 present; E4M3: y = 34,
    halfway between 32 and 36, with 448 present) comes out exactly half a step away, i.e. at the
    bound (INT8: to its 2^-20 float32 slack; E4M3: 16/17 of it, the worst ratio at a midpoint)."""
    y = 41.5 if fmt == "int8" else 34.0
    top = 127.0 if fmt == "int8" else 448.0
    v = torch.zeros(1, 1, 16, dtype=torch.float32)
    v[0, 0, 0], v[0, 0, 1] = top * 2.0 ** -3, y * 2.0 ** -3          # s = 2^-3
    k = torch.ones(1, 1, 16, dtype=torch.float32)
    q = torch.ones(1, 1, 16, dtype=torch.float32)
    quantize = impl.get("quantize_kv")
    code = {"fp8": torch.float8_e4m3fn, "int8": torch.int8}[fmt]
    (kc, ks), (vc, vs) = quantize(k, code), quantize(v, code)
    args = (q.to(device), kc[None].to(device), vc[None].to(device), ks[None].to(device), vs[None].to(device),
            torch.zeros(1, 1, dtype=torch.int32, device=device), torch.ones(1, dtype=torch.int32, device=device))
    out = impl.get("quantized_paged_attention")(*args)
    bound = attention_bound(q[:, None], [k], [v], fmt)[0][:, 0]
    err = (out.cpu().double() - v[:, 0].double()).abs()
    half = (0.5 if fmt == "int8" else 2.0) * 2.0 ** -3                 # E4M3's step at 32..64 is 4
    assert float(err[0, 0, 1]) == half, (
        f"the midpoint element must come out exactly half a step ({half}) away, got error {float(err[0, 0, 1])}")
    # INT8: s/2 exactly; E4M3: 2^-4 |y| is reached as y -> 2^e from above, at y = 34 = 32 (1 + 1/16): 16/17
    tight = 0.99 if fmt == "int8" else 0.94
    assert tight * float(bound[0, 0, 1]) <= float(err[0, 0, 1]) <= float(bound[0, 0, 1]), (
        f"error {float(err[0, 0, 1])}, bound {float(bound[0, 0, 1])}")
