"""Batch invariance (course 08.10, 08.11): a row's result has the same bits alone, at any
position and in any other batch; the values agree with torch's ops within the tolerance rule."""
from __future__ import annotations

import functools
import math

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.strategies import DTYPES, generator
from conformance.tolerance import ToleranceError, assert_close_to_oracle, check_kind
from spec_tests.attention.oracles import out_floor_from
from reference.model import ModelConfig
from spec_tests.batch_invariant import under_mode
from spec_tests.batch_invariant.oracles import plain_decode
from spec_tests.batch_invariant.strategies import (LENGTHS, ROW_LENGTHS, composition, dtype_name,
                                                   place, rand)

ROW_OPS = ("rms_norm", "log_softmax", "softmax", "row_sum", "row_mean")


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def same_bits(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))


def _row_op(impl, op, seed, D, dtype, device="cpu"):
    f = impl.get(op)
    if op == "rms_norm":
        w = torch.randn(D, generator=generator(seed + 1)).to(dtype).to(device)
        return lambda x: f(x, w, 1e-6)
    return f


# --- invariance -------------------------------------------------------------------------------
# 129 rows crosses a kernel's 128-row tile and any "split-K above M" threshold; 64 crosses a
# block size chosen from the batch. Mutants: split_k_above_m, block_from_batch, atomic_add_order.
@example(dt="float32", K=80, N=8, a=(129, 100, 3), b=(1, 0, 4), seed=1).via(
    "mutant:split_k_above_m mutant:kernel_block_k_from_batch "
    "mutant:atomic_add_order")
@example(dt="bfloat16", K=40, N=33, a=(64, 63, 5), b=(2, 1, 6), seed=2).via("mutant:block_from_batch")
@settings(max_examples=6)
@given(dt=dtype_name, K=st.sampled_from(LENGTHS), N=st.sampled_from((1, 8, 33)),
       a=composition(), b=composition(), seed=st.integers(0, 2**31 - 1))
def test_matmul_row_is_batch_invariant(impl, device, dt, K, N, a, b, seed):
    """matmul(batch, w)[position] has the bits of matmul(row, w)[0], for two different batches."""
    mm = impl.get("matmul")
    row, w = rand((1, K), seed, dt), rand((K, N), seed + 1, dt).to(device)
    alone = mm(row.to(device), w)[0]
    for rows, pos, s in (a, b):
        got = mm(place(row, rows, pos, s).to(device), w)[pos]
        assert same_bits(got, alone), (
            f"row {pos} of a {rows}-row batch differs from the row alone (K={K}, N={N}, {dt}): "
            f"max diff {(got.double() - alone.double()).abs().max():.3e}")


# Mutants: position_dependent_order, block_from_batch. Every function on every run (a function
# the implementation lacks leaves the others checked).
@example(dt="float32", D=100, a=(129, 1, 3), b=(1, 0, 4), seed=1).via("mutant:position_dependent_order")
@example(dt="float32", D=100, a=(64, 5, 3), b=(7, 2, 4), seed=1
         ).via("mutant:block_from_batch mutant:position_dependent_order")
@settings(max_examples=2)
@given(dt=dtype_name, D=st.sampled_from(ROW_LENGTHS),
       a=composition(max_rows=64), b=composition(max_rows=64), seed=st.integers(0, 2**31 - 1))
@pytest.mark.parametrize("op", ROW_OPS)
def test_row_op_is_batch_invariant(impl, device, op, dt, D, a, b, seed):
    """rms_norm / log_softmax / softmax / row_sum / row_mean of a row: the same bits alone, at
    any position, in any other batch."""
    f = _row_op(impl, op, seed, D, DTYPES[dt], device)
    row = rand((1, D), seed, dt) * 4
    alone = f(row.to(device))[0]
    for rows, pos, s in (a, b):
        got = f(place(row, rows, pos, s).to(device))[pos]
        assert same_bits(got, alone), f"{op}: row {pos} of {rows} rows differs from the row alone (D={D}, {dt})"


# Decode attention: lengths on both sides of the 32-key split boundaries (1, 31 | 32 | 33, 64 |
# 65, 97 = 3 splits + 1); GQA groups 1, 2, 4; 1 to 5 sequences padded to S >= every length. Mutants:
# attention_splits_from_batch (a split count chosen from B), kernel_split_from_longest (the
# kernel's split size chosen from the batch's longest context).
ATT_LENGTHS = (1, 31, 32, 33, 64, 65, 97)
ATT_HEADS = ((2, 2), (4, 2), (4, 1))     # (H, Hkv): MHA, GQA, MQA (small: the interpreter pays per program)


def _decode_batch(q, k, v, n, rows, pos, seed):
    """A batch of ``rows`` sequences of random lengths in [1, S] (padded to a random S in
    [n, n + 63]) with the sequence (q, k, v) of length n at ``pos``; every other entry random."""
    g = generator(seed)
    S = n + int(torch.randint(0, 64, (), generator=g))    # others may be much longer than n
    lens = torch.randint(1, S + 1, (rows,), generator=g)
    lens[pos] = n
    qb = torch.randn(rows, *q.shape[1:], generator=g).to(q.dtype)
    kb = torch.randn(rows, k.shape[1], S, k.shape[3], generator=g).to(q.dtype)
    vb = torch.randn(rows, k.shape[1], S, k.shape[3], generator=g).to(q.dtype)
    qb[pos], kb[pos, :, :n], vb[pos, :, :n] = q[0], k[0], v[0]
    return qb, kb, vb, lens


@example(dt="float32", n=70, heads=(2, 2), a=(1, 0, 1), b=(5, 4, 2), seed=3
         ).via("mutant:attention_splits_from_batch")
@example(dt="float16", n=33, heads=(4, 2), a=(5, 4, 4), b=(2, 0, 8), seed=4
         ).via("mutant:kernel_split_from_longest")
@settings(max_examples=3)
@given(dt=dtype_name, n=st.sampled_from(ATT_LENGTHS), heads=st.sampled_from(ATT_HEADS),
       a=composition(max_rows=64), b=composition(max_rows=64), seed=st.integers(0, 2**31 - 1))
def test_decode_attention_is_batch_invariant(impl, device, dt, n, heads, a, b, seed):
    """A sequence's decode output has the same bits alone, at any position among sequences of
    other (ragged) lengths (1-5 sequences), in two other batches, whatever the padded length S."""
    att = impl.get("decode_attention")
    (H, Hkv), D = heads, 16
    a, b = (min(a[0], 5), min(a[1], min(a[0], 5) - 1), a[2]), (min(b[0], 5), min(b[1], min(b[0], 5) - 1), b[2])
    q, k, v = rand((1, H, D), seed, dt), rand((1, Hkv, n, D), seed + 1, dt), rand((1, Hkv, n, D), seed + 2, dt)
    alone = att(q.to(device), k.to(device), v.to(device), torch.tensor([n], device=device))[0]
    for rows, pos, s in (a, b):
        qb, kb, vb, lens = _decode_batch(q, k, v, n, rows, pos, s)
        got = att(qb.to(device), kb.to(device), vb.to(device), lens.to(device))[pos]
        assert same_bits(got, alone), (
            f"sequence of length {n} at {pos} of {rows} (S={kb.shape[2]}, lengths {lens.tolist()}, "
            f"H={H}, Hkv={Hkv}) differs from alone ({dt})")


# --- values -----------------------------------------------------------------------------------
def _oracles(op, x, w, eps=1e-6):
    x64 = x.double()
    if op == "matmul":
        return x64 @ w.double()
    if op == "rms_norm":
        return w.double() * (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps))
    if op == "log_softmax":
        return torch.log_softmax(x64, -1)
    if op == "softmax":
        return torch.softmax(x64, -1)
    if op == "row_sum":
        return x64.sum(-1)
    return x64.mean(-1)


@example(op="log_softmax", dt="float32", rows=3, L=17, seed=1, scale=200.0, eps=1e-6).via(
    "mutant:log_softmax_without_max")
@example(op="softmax", dt="bfloat16", rows=3, L=17, seed=1, scale=200.0, eps=1e-6).via(
    "mutant:softmax_without_max")
@example(op="rms_norm", dt="float32", rows=3, L=17, seed=1, scale=3.0, eps=0.5).via(
    "mutant:rms_eps_outside_sqrt")
@example(op="rms_norm", dt="bfloat16", rows=3, L=80, seed=2, scale=1.0, eps=3.0).via(
    "mutant:rms_eps_ignored")
@settings(max_examples=12)
@given(op=st.sampled_from(("matmul",) + ROW_OPS), dt=dtype_name, rows=st.sampled_from((1, 3, 20)),
       L=st.sampled_from((1, 17, 80, 300)), seed=st.integers(0, 2**31 - 1),
       scale=st.sampled_from((3.0, 200.0)), eps=st.sampled_from((1e-6, 0.0, 0.5)))
def test_values_agree_with_torch(impl, reference, device, op, dt, rows, L, seed, scale, eps):
    """Each function computes the plain op: within the tolerance rule of a float64 oracle
    (2 x the reference's own error + two ulps), at ordinary magnitudes and at |x| ~ 200 (where
    exp(x) overflows float32 unless the row max is subtracted first), and for rms_norm at eps 0,
    the default and 0.5 (where eps goes -- inside the square root -- is visible)."""
    x = rand((rows, L), seed, dt) * scale
    w = rand((L, 5) if op == "matmul" else (L,), seed + 1, dt)
    args = tuple(t.to(device) for t in ((x, w) if op in ("matmul", "rms_norm") else (x,)))
    kw = dict(eps=eps) if op == "rms_norm" else {}
    got = impl.get(op)(*args, **kw)
    ref = reference.get(op)(*args, **kw)
    assert_close_to_oracle(got, ref, _oracles(op, x, w, eps), inputs=dict(x=x, w=w, eps=eps), name=op,
                           floor_from=_floor_from(op, x, w))


def _order_free_bound(op, x, w, eps, out_dtype):
    """The error any summation ORDER may make (the order is a choice the law leaves open, so the
    law's accuracy must admit every one): recursive summation of L float32 terms errs by at most
    (L - 1) u sum|terms| (Higham, Accuracy and Stability, 4.2; u = 2^-24, the compute dtype's
    unit roundoff), plus a few roundings of the elementwise steps and two ulps of the output dtype.
    A left-to-right float32 row_sum of 1100 terms of about 40 is 3e-2 off the float64 sum, 1.3 x
    this file's blocked order's bound under the tolerance rule -- and correct."""
    u, L = 2.0 ** -24, x.shape[-1]
    g = max(L - 1, 0) * u + 8 * u
    x64, o = x.double(), _oracles(op, x, w, eps)
    if op == "matmul":
        err = g * (x64.abs() @ w.double().abs())
    elif op in ("row_sum", "row_mean"):
        err = g * x64.abs().sum(-1) / (L if op == "row_mean" and L else 1)
    elif op == "log_softmax":
        err = g + 4 * u * (o.abs() + 1)
    else:                                  # rms_norm, softmax: relative error of the row's sum
        err = g * o.abs()
    return err + 2 * torch.finfo(out_dtype).eps * o.abs() + 2 * torch.finfo(out_dtype).tiny


def _within_order_free_bound(op, got, x, w, eps) -> bool:
    """Every element of ``got`` within :func:`_order_free_bound` of the float64 oracle."""
    o = _oracles(op, x, w, eps)
    err = (got.detach().to("cpu", torch.float64) - o).abs()
    ok = torch.isfinite(o) & (err <= _order_free_bound(op, x, w, eps, got.dtype))
    return bool((ok | (o == got.detach().to("cpu", torch.float64))).all())


def _floor_from(op, x, w):
    """The magnitude that bounds a correct sum's rounding error: for a sum
    of terms, sum |term| (a sum that cancels to a small value keeps the terms' rounding), never
    the output alone. A float32 kernel accumulating 300 products in another order than torch's
    was 5.6 ulps of the output off the oracle on the H200 (torch's own: 1.4)."""
    x64 = x.double()
    if op == "matmul":
        return torch.cat([(x64 @ w.double()).reshape(-1), (x64.abs() @ w.double().abs()).reshape(-1)])
    if op in ("row_sum", "row_mean"):
        tot = x64.abs().sum(-1)
        return torch.cat([_oracles(op, x, w).reshape(-1), tot if op == "row_sum" else tot / max(x.shape[-1], 1)])
    return None


# Every (function, dtype) pair on every run (the sampled test above draws 12 of its 432
# combinations), each length, and for rms_norm each eps. One call per (length, eps) holds rows of
# four magnitudes -- 3, 200 (exp overflows float32 without the row max), 0.05 (eps dominates),
# and 3 plus an offset of 40 (10 in float16: a sum that cancels little and grows to 40 L) -- and
# each row is judged on its own (the
# rule's bound is a max over the compared elements: a row of 200 would hide a row of 0.05).
ROW_SCALES = (3.0, 200.0, 0.05, 3.0)
ROW_OFFSETS = (0.0, 0.0, 0.0, 40.0)


def _scaled_rows(L, seed, dt):
    x = rand((len(ROW_SCALES), L), seed, "float32") * torch.tensor(ROW_SCALES)[:, None]
    offsets = torch.tensor(ROW_OFFSETS)[:, None] / (4 if dt == "float16" else 1)   # a float16 sum stays finite
    return (x + offsets).to(DTYPES[dt])


@pytest.mark.parametrize("dt", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("op", ("matmul",) + ROW_OPS)
def test_values_every_op_dtype_length(impl, reference, device, op, dt):
    """Each function against a float64 oracle, for every dtype and length L in 1, 17, 80, 300
    (and 1100, 4096 for the row functions: more than one 1024-wide kernel chunk; a 16-bit
    accumulator stagnates once the running sum's ulp exceeds a block's partial), rms_norm at eps 0,
    1e-6 and 0.5: within the tolerance rule row by row (2 x the reference's own error + two ulps
    of the row's magnitude, or, where another summation order is less accurate than the reference's
blocks, within the error bound of any order). A result that is batch invariant but wrong -- accumulated in the
    16-bit dtype, normalised with a max or a count over the wrong dim, eps misplaced -- fails here."""
    lengths = (1, 17, 80, 300) + (() if op == "matmul" else (1100, 4096))
    for L, eps in [(L, eps) for L in lengths for eps in ((0.0, 1e-6, 0.5) if op == "rms_norm" else (1e-6,))]:
        seed = 1000 + L
        x = _scaled_rows(L, seed, dt)
        w = rand((L, 5) if op == "matmul" else (L,), seed + 1, dt)
        args = tuple(t.to(device) for t in ((x, w) if op in ("matmul", "rms_norm") else (x,)))
        kw = dict(eps=eps) if op == "rms_norm" else {}
        got, ref = impl.get(op)(*args, **kw), reference.get(op)(*args, **kw)
        oracle = _oracles(op, x, w, eps)
        floor = _floor_from(op, x, w)
        check_kind(got, ref, op)
        for r in range(x.shape[0]):
            sl = slice(r, r + 1)
            fl = None if floor is None else _floor_from(op, x[sl], w)
            try:
                assert_close_to_oracle(got[sl], ref[sl], oracle[sl], name=f"{op} row {r} (scale {ROW_SCALES[r]}, "
                                       f"offset {ROW_OFFSETS[r]}) of L={L}, {dt}" + (f", eps={eps}" if kw else ""),
                                       inputs=dict(x=x, w=w), floor_from=fl)
            except ToleranceError as exc:
                # another summation order (a choice the law leaves open) may be less accurate than
                # the reference's blocks: the law admits any order's worst-case error
                if not _within_order_free_bound(op, got[sl].cpu(), x[sl], w, eps):
                    raise ToleranceError(f"{exc}\n    and beyond the error bound of ANY summation order "
                                         f"((L - 1) u sum|terms| + output rounding)") from None


@pytest.mark.parametrize("dt", ["bfloat16", "float32"])
def test_matmul_values_across_output_tiles(impl, reference, device, dt):
    """matmul computes every output element: M and N past one output tile of a kernel (64 and 256
    columns, 64, 128 and 8 x 128 rows: a grouped launch order) and K past one BLOCK_K, against a
    float64 oracle within the tolerance rule."""
    for M, K, N in ((3, 17, 100), (130, 40, 300), (1040, 16, 70)):
        a, b = rand((M, K), M, dt), rand((K, N), N, dt)
        got = impl.get("matmul")(a.to(device), b.to(device))
        ref = reference.get("matmul")(a, b)
        assert_close_to_oracle(got, ref, _oracles("matmul", a, b), name=f"matmul ({M}, {K}) @ ({K}, {N}), {dt}",
                               floor_from=_floor_from("matmul", a, b))


@pytest.mark.parametrize("dt", ["bfloat16", "float32"])
def test_reference_agrees_with_torch_ops(reference, dt):
    """The reference itself is the plain op: within the tolerance rule with torch's own op as the
    low-precision baseline (so a reference bug cannot hide behind the rule)."""
    x, w = rand((9, 300), 5, dt) * 3, rand((300, 7), 6, dt)
    R = lambda n: reference.get(n)  # noqa: E731
    assert_close_to_oracle(R("matmul")(x, w), x @ w, _oracles("matmul", x, w), name="matmul")
    assert_close_to_oracle(R("log_softmax")(x), torch.log_softmax(x, -1), _oracles("log_softmax", x, w),
                           name="log_softmax")
    assert_close_to_oracle(R("softmax")(x), torch.softmax(x, -1), _oracles("softmax", x, w), name="softmax")
    assert_close_to_oracle(R("row_mean")(x), x.mean(-1), _oracles("row_mean", x, w), name="row_mean")


@example(dt="float32", heads=(4, 2), lens=(97, 1, 33), seed=1, D=16).via("mutant:gqa_head_modulo")
@example(dt="float32", heads=(2, 1), lens=(40, 3), seed=2, D=24).via("mutant:decode_scale_padded_dim")  # a padded head_dim
@settings(max_examples=3)
@given(dt=dtype_name, heads=st.sampled_from(ATT_HEADS),
       lens=st.lists(st.sampled_from(ATT_LENGTHS), min_size=1, max_size=3).map(tuple),
       seed=st.integers(0, 2**31 - 1), D=st.sampled_from((16, 24, 8)))
def test_decode_attention_values(impl, device, dt, heads, lens, seed, D):
    """decode_attention = softmax(q k^T / sqrt(D)) v over each sequence's first lengths[b] keys,
    GQA: within the tolerance rule of a float64 oracle, with plain attention
    (reference/attention.py, the same dtype, no splits) as the low-precision baseline. D is the
    real head_dim, also where a kernel pads it to a power of two (D = 24: the scale is 1/sqrt(24))."""
    (H, Hkv), S = heads, max(lens) + 5
    B = len(lens)
    q, k, v = rand((B, H, D), seed, dt) * 2, rand((B, Hkv, S, D), seed + 1, dt), rand((B, Hkv, S, D), seed + 2, dt)
    got = impl.get("decode_attention")(q.to(device), k.to(device), v.to(device),
                                                         torch.tensor(lens, device=device))
    plain = plain_decode(q.to(device), k.to(device), v.to(device), lens)      # on got's device
    oracle = plain_decode(q.double(), k.double(), v.double(), lens)
    assert_close_to_oracle(got, plain, oracle, name="decode_attention",
                           inputs=dict(q=q, k=k, v=v, lengths=lens),
                           floor_from=out_floor_from(q[:, :, None], k, v, None, oracle))


def test_edge_cases(impl, device):
    """M = 0 rows -> empty; K = 0 -> zeros; an empty row -> empty (softmax) or NaN (mean); a row of
    -inf -> NaN in log_softmax, as torch; a row of one element -> log_softmax 0, softmax 1. Every
    row function on an empty row length, on no rows, on a 1-D and on a 3-D x gives torch's shape
    and dtype (x.shape, or x.shape[:-1] for row_sum / row_mean: 0 and NaN for an empty row), and
    a 1-D or 3-D x's rows have the bits of the same rows as a 2-D batch."""
    G = lambda n: impl.get(n)  # noqa: E731
    for dt in ("bfloat16", "float32"):
        d = DTYPES[dt]
        e = G("matmul")(torch.empty(0, 4, dtype=d, device=device), torch.ones(4, 3, dtype=d, device=device))
        assert e.shape == (0, 3) and e.dtype == d
        z = G("matmul")(torch.empty(2, 0, dtype=d, device=device), torch.empty(0, 3, dtype=d, device=device))
        assert z.shape == (2, 3) and bool((z == 0).all())
        assert G("log_softmax")(torch.empty(3, 0, dtype=d, device=device)).shape == (3, 0)
        assert bool(G("row_mean")(torch.empty(3, 0, dtype=d, device=device)).isnan().all())
        x = torch.tensor([[float("-inf")] * 5, [0.5] * 5], dtype=d, device=device)
        ls = G("log_softmax")(x)
        assert bool(ls[0].isnan().all()) and torch.allclose(ls[1].float(), torch.log_softmax(x[1:].float(), -1)[0], atol=1e-2)
        one = torch.tensor([[3.0]], dtype=d, device=device)
        assert float(G("log_softmax")(one)) == 0.0 and float(G("softmax")(one)) == 1.0
        for op in ROW_OPS:                  # torch's shape and dtype for empty dims and any rank >= 1
            for shape in ((3, 0), (0, 5), (5,), (2, 3, 5)):
                f = _row_op(impl, op, 4, shape[-1], d, device)
                x = rand(shape, 4, dt).to(device)
                got = f(x)
                want_shape = shape[:-1] if op in ("row_sum", "row_mean") else shape
                assert got.shape == want_shape and got.dtype == d, (
                    f"{op} of shape {shape} ({dt}): got {tuple(got.shape)} {got.dtype}, torch's {want_shape} {d}")
                if shape[-1] == 0 and op in ("row_sum", "row_mean"):
                    assert bool((got == 0).all() if op == "row_sum" else got.isnan().all()), f"{op} of an empty row"
                elif got.numel():               # rank 1 or 3: each row has the bits of the row in a 2-D batch
                    rows = f(x.reshape(-1, shape[-1])).reshape(got.shape)
                    assert same_bits(got, rows), f"{op} of shape {shape} ({dt}) differs from the same rows in 2-D"


@pytest.mark.choice("reductions in blocks of 16 terms, left to right, partials left to right from +0")
def test_fixed_order_is_the_documented_one(impl):
    """fixed_order_sum adds blocks of BLOCK = 16 terms left to right, then the partials left to right
    from +0.0. Three numbers show why the order matters: (1e8 + -1e8) + 1 = 1 but 1e8 + (-1e8 + 1)
    = 0 in float32."""
    fos = impl.get("fixed_order_sum")
    one = lambda v: torch.tensor([v], dtype=torch.float32)  # noqa: E731
    terms = [1e8, -1e8, 1.0]
    assert float((one(1e8) + one(-1e8)) + one(1.0)) == 1.0      # the example itself, in float32
    assert float(one(1e8) + (one(-1e8) + one(1.0))) == 0.0      # -1e8 + 1 rounds to -1e8 (ulp 8)
    assert float(fos(lambda k: one(terms[k]), 3, torch.float32, (1,))) == 1.0   # left to right
    assert float(fos(lambda k: one(terms[2 - k]), 3, torch.float32, (1,))) == 0.0  # reversed order
    g = generator(7)
    vals = (torch.randn(50, generator=g) * 10.0 ** torch.randint(-3, 4, (50,), generator=g)).tolist()
    want = one(0.0)
    for k0 in range(0, 50, 16):
        part = one(vals[k0])
        for k in range(k0 + 1, min(k0 + 16, 50)):
            part = part + one(vals[k])
        want = want + part
    assert same_bits(fos(lambda k: one(vals[k]), 50, torch.float32, (1,)), want)


@pytest.mark.choice("the reference's order in float64: blocks of 16 in every reduction, decode_attention's "
                    "splits of KV_SPLIT = 32 keys merged left to right")
def test_float64_has_the_references_bits(impl, reference, device):
    """In float64 (the compute dtype float64, no kernel order in between) every function has the
    reference's bits: matmul, the row functions and decode_attention, at lengths on both sides of
    the 32-key split boundaries (a sequence of 65 keys is splits 32 + 32 + 1)."""
    x, w = rand((5, 100), 8, "float32").double().to(device), rand((100, 7), 9, "float32").double().to(device)
    for op in ("matmul",) + ROW_OPS:
        args = (x, w) if op == "matmul" else (x, w[:, 0]) if op == "rms_norm" else (x,)
        assert same_bits(impl.get(op)(*args), reference.get(op)(*args)), f"{op} (float64) != the reference's bits"
    lens = torch.tensor(ATT_LENGTHS, device=device)
    B, S = len(ATT_LENGTHS), max(ATT_LENGTHS)
    q, k, v = (rand(shape, 10 + i, "float32").double().to(device)
               for i, shape in enumerate(((B, 4, 16), (B, 2, S, 16), (B, 2, S, 16))))
    got, want = impl.get("decode_attention")(q, k, v, lens), reference.get("decode_attention")(q, k, v, lens)
    assert same_bits(got, want), "decode_attention (float64) != the reference's bits"


# --- invariant mode ---------------------------------------------------------------------------
# invariant_mode() patches torch's kernels in the process that enters it: the torch calls these
# tests compare run where the implementation runs (under_mode.py, through impl.call_in_process --
# for a submission, its worker process); the comparisons are made here.
def test_invariant_mode_routes_and_restores(impl, device):
    """After invariant_mode() exits (also after an exception, which must propagate) torch's own
    kernels are back. Inside it: torch.matmul / F.linear (with bias) / log_softmax / softmax /
    mean of the last dim compute with this concept's functions (same bits) and F.linear is batch
    invariant."""
    G = lambda n: impl.get(n)  # noqa: E731
    x, w, bias = (rand((9, 40), 1, "float32").to(device), rand((24, 40), 2, "float32").to(device),
                  rand((24,), 3, "float32").to(device))
    back = impl.call_in_process(under_mode.restores, x, w)
    assert same_bits(back["after_exit"], back["plain"]), "torch.mm not restored after invariant_mode()"
    assert back["raised"] == "ZeroDivisionError", "an exception inside invariant_mode() must propagate"
    assert same_bits(back["after"], back["plain"]), "torch.mm not restored after invariant_mode() exited by an exception"
    got = impl.call_in_process(under_mode.routes, x, w, bias)
    mm, lin, lin1, lsm, sm, mean, mean0 = (got[k] for k in ("mm", "lin", "lin1", "lsm", "sm", "mean", "mean0"))
    assert same_bits(lin[3], lin1[0]), "F.linear: row 3 of 9 differs from the row alone inside invariant_mode()"
    assert torch.allclose(mean0, x.mean(0), rtol=1e-6, atol=1e-6)
    assert same_bits(mm, G("matmul")(x, w.t()))
    assert same_bits(lsm, G("log_softmax")(x))
    assert same_bits(mean[:, 0], G("row_mean")(x))
    assert same_bits(sm, G("softmax")(x))


def test_invariant_mode_values(impl, device):
    """What the routed ops compute inside invariant_mode() is the plain op: torch.matmul, F.linear
    WITH its bias, torch.addmm with alpha 0 and 2 (beta 0.5), torch.bmm, log_softmax, softmax (over
    the last dim and over dim 0, which the mode moves to the last) and mean of the last dim against
    float64 oracles
    (the tolerance rule, torch's own op outside the mode as the baseline) -- a mode that is batch
    invariant but drops the bias or multiplies the wrong bmm entries fails here -- and torch.bmm's
    entry 1 has the same bits in a batch of 3 as alone."""
    x, w, bias = (rand((9, 40), 1, "float32").to(device), rand((24, 40), 2, "float32").to(device),
                  rand((24,), 3, "float32").to(device))
    got = impl.call_in_process(under_mode.routes, x, w, bias)
    x3, w3 = under_mode.bmm_operands(x, w)
    x64, w64, b64 = x.double(), w.double(), bias.double()
    cases = [("torch.matmul", got["mm"], x @ w.t(), x64 @ w64.t()),
             ("F.linear with bias", got["lin"], torch.nn.functional.linear(x, w, bias), x64 @ w64.t() + b64),
             ("torch.bmm", got["bmm"], torch.bmm(x3, w3), torch.bmm(x3.double(), w3.double())),
             ("log_softmax", got["lsm"], torch.log_softmax(x, -1), torch.log_softmax(x64, -1)),
             ("softmax", got["sm"], torch.softmax(x, -1), torch.softmax(x64, -1)),
             ("mean(-1)", got["mean"], x.mean(-1, keepdim=True), x64.mean(-1, keepdim=True)),
             ("log_softmax over dim 0", got["lsm0"], torch.log_softmax(x, 0), torch.log_softmax(x64, 0)),
             ("softmax over dim 0", got["sm0"], torch.softmax(x, 0), torch.softmax(x64, 0)),
             ("torch.addmm alpha=0", got["addmm0"], torch.addmm(bias, x, w.t(), alpha=0),
              torch.addmm(b64, x64, w64.t(), alpha=0)),
             ("torch.addmm beta=0.5 alpha=2", got["addmm2"], torch.addmm(bias, x, w.t(), beta=0.5, alpha=2),
              torch.addmm(b64, x64, w64.t(), beta=0.5, alpha=2))]
    for name, value, baseline, oracle in cases:
        assert_close_to_oracle(value, baseline, oracle, name=f"{name} inside invariant_mode()")
    assert same_bits(got["bmm"][1], got["bmm1"][0]), "torch.bmm: entry 1 of 3 differs from the entry alone"


def test_invariant_mode_keeps_torchs_dim_check(impl, device):
    """Inside invariant_mode() softmax / log_softmax over a dim out of range (x.dim() or
    -x.dim() - 1) still raise torch's IndexError: the mode changes how the ops compute, not what
    they accept."""
    x = rand((9, 40), 1, "float32").to(device)
    got = impl.call_in_process(under_mode.out_of_range_dims, x)
    bad = {call: kind for call, kind in got.items() if kind != "IndexError"}
    assert not bad, f"inside invariant_mode(), an out-of-range dim gave {bad} (torch raises IndexError)"


def test_invariant_mode_edges(impl, device):
    """Inside invariant_mode() the routed ops give torch's result at the edges of their shapes
    (under_mode.edge_calls): an empty M, K, batch or row length of mm / bmm / softmax / log_softmax /
    mean gives torch's shape and dtype (zeros for K = 0, NaN for the mean of nothing); softmax and
    log_softmax over each non-last dim of a 3-D tensor (moved to the last and back) and addmm with
    beta = -1 and beta = 0 (the bias ignored, a NaN in it included, as torch documents) are torch's
    op: the same shape and dtype, values within the tolerance rule of a float64 oracle."""
    x, w, bias = (rand((9, 40), 1, "float32").to(device), rand((24, 40), 2, "float32").to(device),
                  rand((24,), 3, "float32").to(device))
    got = impl.call_in_process(under_mode.edges, x, w, bias)
    plain = {name: call() for name, call in under_mode.edge_calls(x, w, bias).items()}
    oracle = {name: call() for name, call in under_mode.edge_calls(x.double(), w.double(), bias.double()).items()}
    for name, want in plain.items():
        value = got[name]
        assert value.shape == want.shape and value.dtype == want.dtype, (
            f"{name} inside invariant_mode(): shape {tuple(value.shape)} {value.dtype}, torch's "
            f"{tuple(want.shape)} {want.dtype}")
        nan = oracle[name].isnan()
        assert torch.equal(value.isnan().cpu(), nan.cpu()), f"{name} inside invariant_mode(): NaN where torch has none, or the reverse"
        if bool((~nan).any()):
            assert_close_to_oracle(value[~nan], want[~nan], oracle[name][~nan], name=f"{name} inside invariant_mode()")


@pytest.mark.choice("torch.bmm routed as one matmul per batch entry (the bits of matmul)")
def test_invariant_mode_bmm_is_matmul_per_entry(impl, device):
    """torch.bmm inside invariant_mode() has, per batch entry, the bits of this concept's matmul."""
    x, w, bias = (rand((9, 40), 1, "float32").to(device), rand((24, 40), 2, "float32").to(device),
                  rand((24,), 3, "float32").to(device))
    got = impl.call_in_process(under_mode.routes, x, w, bias)
    x3, w3 = under_mode.bmm_operands(x, w)
    for i in range(3):
        assert same_bits(got["bmm"][i], impl.get("matmul")(x3[i], w3[i])), f"bmm entry {i} != matmul's bits"


# --- end to end -------------------------------------------------------------------------------
NEEDLE_MODEL = ModelConfig(vocab_size=64, dim=32, n_layers=1, n_heads=2, n_kv_heads=1, max_seq_len=16)


def _device_for(impl) -> str:
    """Where a model runs under the implementation's mode: an implementation whose mode runs Triton
    kernels runs on the GPU, and is skipped on a CPU (the interpreted kernels are too slow for a
    model); any other runs on the CPU."""
    if not impl.call_in_process(under_mode.uses_triton_kernels):
        return "cpu"
    if not torch.cuda.is_available():
        pytest.skip("a model under interpreted Triton kernels is too slow on CPU; run on the GPU")
    return "cuda"


def test_needle_request_is_batch_invariant(impl, reference):
    """The reference model (reference/model.py, float32) under invariant_mode(): a needle prompt's
    greedy tokens and its seeded-sampled tokens (Gumbel-max with the request's own generator), with
    their logprobs, are bitwise identical alone and as row 2 of a batch of 5 prompts of the same
    length (no padding: a batched forward with a KV cache). Whether they diverge WITHOUT the mode
    is printed (an observation, not a verdict). A mode of Triton kernels runs only on a GPU (the
    interpreted kernels are too slow for a model on CPU)."""
    dev = _device_for(impl)
    g = generator(11)
    needle = torch.randint(0, 64, (1, 6), generator=g).to(dev)
    batch = torch.randint(0, 64, (5, 6), generator=g).to(dev)
    batch[2] = needle[0]
    ids = {1: [0], 5: [7, 8, 0, 9, 10]}               # request ids: the needle is request 0

    def decode(tokens, sample, mode):
        return impl.call_in_process(under_mode.decode, NEEDLE_MODEL, dev, tokens, ids[tokens.shape[0]], sample, mode)

    for sample in (False, True):
        t1, l1 = decode(needle, sample, True)
        t5, l5 = decode(batch, sample, True)
        kind = "sampled" if sample else "greedy"
        assert torch.equal(t1[0], t5[2]) and same_bits(l1[0], l5[2]), f"{kind} needle differs alone vs in a batch of 5"
        p1, q1 = decode(needle, sample, False)
        p5, q5 = decode(batch, sample, False)
        print(f"without invariant_mode ({kind}): tokens {'same' if torch.equal(p1[0], p5[2]) else 'DIFFER'}, "
              f"logprob bits {'same' if same_bits(q1[0], q5[2]) else 'DIFFER'}")


_NEEDLE = [5, 17, 42, 3, 3, 60, 11]              # a 7-token needle prompt
_NEEDLE_ALONE: dict = {}                           # (impl, sample) -> (tokens, logprobs), alone
PACKED_MODEL = ModelConfig(vocab_size=64, dim=32, n_layers=1, n_heads=2, n_kv_heads=1, max_seq_len=32)


@example(others=(1, 12, 7, 14, 2), pos=3, seed=5).via("mutant:attention_splits_from_batch")
@settings(max_examples=3)
@given(others=st.lists(st.integers(1, 14), min_size=1, max_size=7).map(tuple),
       pos=st.integers(0, 7), seed=st.integers(0, 2**31 - 1))
def test_needle_packed_among_other_lengths(impl, others, pos, seed):
    """End to end with requests of OTHER lengths: the reference model (float32) run batched by
    packing (oracles.PackedRunner: all prompts in one token row with per-sequence positions,
    per-request KV slots, attention through this concept's decode_attention with ragged lengths;
    the model's own forward cannot batch prompts of different lengths). Under invariant_mode()
    the needle's 3 greedy and 3 seeded-sampled tokens and their logprobs are bitwise identical
    alone and at any position among 1..7 other requests of lengths 1..14. The same comparison
    WITHOUT the mode is printed (an observation, not a verdict)."""
    dev = _device_for(impl)
    g = generator(seed)
    prompts = [torch.randint(0, 64, (n,), generator=g).tolist() for n in others]
    pos = min(pos, len(prompts))
    prompts.insert(pos, _NEEDLE)
    ids = [100 + i for i in range(len(prompts))]
    ids[pos] = 0                                  # the needle is request 0, wherever it sits
    run = functools.partial(impl.call_in_process, under_mode.packed_generate, PACKED_MODEL, dev, 32)
    if (impl.name, "checked") not in _NEEDLE_ALONE:   # the oracle forward IS the model
        lp, want = impl.call_in_process(under_mode.packed_matches_forward, PACKED_MODEL, dev, 32, _NEEDLE)
        assert torch.allclose(lp, want, atol=1e-5, rtol=0), "packed forward != model.forward"
        _NEEDLE_ALONE[(impl.name, "checked")] = True
    for sample in (False, True):
        kind = "sampled" if sample else "greedy"
        for inv in (True, False):
            key = (impl.name, sample, inv)
            if key not in _NEEDLE_ALONE:
                _NEEDLE_ALONE[key] = run([_NEEDLE], [0], 3, sample, inv)
            t, lp = run(prompts, ids, 3, sample, inv)
            t1, l1 = _NEEDLE_ALONE[key]
            same_t, same_l = torch.equal(t1[0], t[pos]), same_bits(l1[0], lp[pos])
            if inv:
                assert same_t and same_l, (
                    f"{kind} needle at {pos} among lengths {list(others)}: tokens "
                    f"{t1[0].tolist()} alone vs {t[pos].tolist()}, logprob max diff "
                    f"{(l1[0] - lp[pos]).abs().max():.3e}")
            else:
                print(f"packed, without invariant_mode ({kind}, needle at {pos} among {list(others)}): "
                      f"tokens {'same' if same_t else 'DIFFER'}, logprob bits {'same' if same_l else 'DIFFER'}")


# --- bad input --------------------------------------------------------------------------------
def _mm_valid():
    return dict(a=torch.ones(3, 4), b=torch.ones(4, 2))


MM_BAD = [
    Bad("a not a tensor", dict(a=[[1.0]]), TypeError, ("a",)),
    Bad("a rank 3", lambda v: {**v, "a": v["a"][None]}, ValueError, ("a",)),
    Bad("b rank 1", lambda v: {**v, "b": v["b"][:, 0]}, ValueError, ("b",)),
    Bad("K mismatch", lambda v: {**v, "b": torch.ones(5, 2)}, ValueError, ("b",)),
    Bad("int a", lambda v: {**v, "a": torch.ones(3, 4, dtype=torch.int64)}, TypeError, ("a",)),
    Bad("mixed dtypes", lambda v: {**v, "b": v["b"].double()}, TypeError, ("b",)),
]


@bad_cases(MM_BAD)
def test_matmul_rejects_bad_input(impl, bad):
    """matmul: tensors (TypeError), rank 2 each and matching K (ValueError), one float dtype."""
    assert_rejects(impl.get("matmul"), _mm_valid, bad)


def _norm_valid():
    return dict(x=torch.ones(3, 4), weight=torch.ones(4), eps=1e-6)


NORM_BAD = [
    Bad("x not a tensor", dict(x=1.0), TypeError, ("x",)),
    Bad("x scalar", lambda v: {**v, "x": torch.tensor(1.0)}, ValueError, ("x",)),
    Bad("weight wrong size", lambda v: {**v, "weight": torch.ones(5)}, ValueError, ("weight",)),
    Bad("weight int", lambda v: {**v, "weight": torch.ones(4, dtype=torch.int32)}, TypeError, ("weight",)),
    Bad("negative eps", dict(eps=-1.0), ValueError, ("eps",)),
    Bad("nan eps", dict(eps=math.nan), ValueError, ("eps",)),
    Bad("string eps", dict(eps="1e-6"), TypeError, ("eps",)),
]


@bad_cases(NORM_BAD)
def test_rms_norm_rejects_bad_input(impl, bad):
    """rms_norm: x a float tensor of rank >= 1, weight (D,), eps a finite real >= 0."""
    assert_rejects(impl.get("rms_norm"), _norm_valid, bad)


ROW_BAD = [
    Bad("x not a tensor", dict(x=[[1.0, 2.0]]), TypeError, ("x",)),
    Bad("x scalar", dict(x=torch.tensor(1.0)), ValueError, ("x",)),
    Bad("int x", dict(x=torch.ones(3, 4, dtype=torch.int64)), TypeError, ("x",)),
]


@bad_cases(ROW_BAD)
@pytest.mark.parametrize("op", ("log_softmax", "softmax", "row_sum", "row_mean"))
def test_row_functions_reject_bad_input(impl, op, bad):
    """log_softmax / softmax / row_sum / row_mean: x a float tensor (TypeError) of rank >= 1
    (ValueError), the message naming x."""
    assert_rejects(impl.get(op), lambda: dict(x=torch.ones(3, 4)), bad)


def _att_valid():
    return dict(q=torch.ones(2, 1, 4), k=torch.ones(2, 1, 5, 4), v=torch.ones(2, 1, 5, 4),
                lengths=torch.tensor([5, 1]))


ATT_BAD = [
    Bad("q rank 4", lambda v: {**v, "q": v["q"][:, :, None]}, ValueError, ("q",)),
    Bad("k wrong head_dim", lambda v: {**v, "k": torch.ones(2, 1, 5, 3)}, ValueError, ("k",)),
    Bad("Hkv not dividing H", lambda v: {**v, "k": torch.ones(2, 2, 5, 4), "v": torch.ones(2, 2, 5, 4)},
        ValueError, ("k",)),
    Bad("v dtype", lambda v: {**v, "v": v["v"].double()}, TypeError, ("v",)),
    Bad("v not a tensor", lambda v: {**v, "v": v["v"].tolist()}, TypeError, ("v",)),
    Bad("no KV heads", lambda v: {**v, "k": torch.ones(2, 0, 5, 4), "v": torch.ones(2, 0, 5, 4)}, ValueError, ("k",)),
    Bad("zero length", lambda v: {**v, "lengths": torch.tensor([0, 1])}, ValueError, ("lengths",)),
    Bad("length past S", lambda v: {**v, "lengths": torch.tensor([6, 1])}, ValueError, ("lengths",)),
    Bad("float lengths", lambda v: {**v, "lengths": torch.tensor([5.0, 1.0])}, TypeError, ("lengths",)),
    Bad("lengths list", lambda v: {**v, "lengths": [5, 1]}, TypeError, ("lengths",)),
    Bad("lengths wrong size", lambda v: {**v, "lengths": torch.tensor([5])}, ValueError, ("lengths",)),
]


@bad_cases(ATT_BAD)
def test_decode_attention_rejects_bad_input(impl, bad):
    """decode_attention: q (B,H,D), k/v (B,Hkv,S,D) of q's dtype with Hkv dividing H, lengths an int
    tensor (B,) in [1, S]."""
    assert_rejects(impl.get("decode_attention"), _att_valid, bad)
