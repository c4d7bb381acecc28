"""Multi-LoRA batching (course 06.08): every row of a batched lora_forward equals its own adapter
applied alone, y = x W^T + (alpha / r) (x A^T) B^T, and a row of adapter -1 the base alone --
within the tolerance rule of a float64 oracle computed row by row (2 x the error of the contract's
own low-precision computation, the reference's, plus the rounding floor). Metamorphic: a row
alone, the batch permuted, other adapters' weights changed, the rank padded with zeros."""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from conformance.tolerance import assert_close_to_oracle
from spec_tests.lora import oracles
from spec_tests.lora.strategies import LoraCase, lora_cases


def _scaled(n: int) -> int:
    return max(1, round(n * settings().max_examples / 25))


def _call(kw: dict) -> str:
    parts = [f"{k}={tuple(v.shape)} {str(v.dtype)[6:]}" if isinstance(v, torch.Tensor) else f"{k}={v!r}"
             for k, v in kw.items()]
    ids = kw["adapter_ids"].tolist()
    return f"lora_forward({', '.join(parts)}) with adapter_ids {ids if len(ids) <= 12 else ids[:12] + ['...']}"


def check(impl, reference, kw: dict, name: str = "y") -> torch.Tensor:
    """lora_forward(**kw) within the tolerance rule of the row-by-row float64 oracle; inputs unchanged."""
    before = {k: v.clone() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    y = impl.get("lora_forward")(**kw)
    for k, v in before.items():
        assert torch.equal(kw[k], v), f"{_call(kw)} modified its input {k}"
    assert_close_to_oracle(y, reference.get("lora_forward")(**kw), oracles.lora(**kw), name=f"{_call(kw)}: {name}",
                           inputs=kw)
    return y


@example(case=LoraCase(6, 12, 10, 3, 4, 8.0, "float32", 1)).via(
    "mutant:scaling_alpha_only mutant:scaling_ignores_alpha mutant:none_rows_get_last_adapter "
    "mutant:first_rows_adapter_for_all mutant:adapter_replaces_base")
@example(case=LoraCase(5, 9, 7, 2, 3, 16.0, "bfloat16", 2, "distinct")).via("mutant:first_rows_adapter_for_all")
@example(case=LoraCase(4, 33, 35, 0, 2, 1.0, "float32", 3, "none")).via("boundary: no adapter at all (N = 0), every row -1")
@example(case=LoraCase(0, 8, 6, 2, 2, 8.0, "float16", 4)).via("boundary: empty batch")
@example(case=LoraCase(9, 40, 40, 4, 8, -4.0, "bfloat16", 5, "grouped")).via(
    "boundary: 9 rows (two row blocks), widths past one 32-wide tile, negative alpha")
@example(case=LoraCase(5, 20, 1, 3, 24, 16.0, "float32", 6, "distinct")).via(
    "boundary: rank 24 (above 16 and not a power of two: a kernel's rank tile must cover it), one output column")
@settings(max_examples=_scaled(10))
@given(case=lora_cases())
def test_matches_oracle(impl, reference, case):
    """y[i] = x[i] W^T + (alpha / r) (x[i] A[a_i]^T) B[a_i]^T, or the base for a_i = -1, within the
    tolerance rule, for batches 0-9, d_in and d_out 1-40, 0-4 adapters of rank 1-8, alpha of
    either sign, every pattern of ids, float16/bfloat16/float32/float64."""
    check(impl, reference, case.build())


@example(case=LoraCase(6, 12, 10, 3, 4, 8.0, "float32", 11), pick=2).via("mutant:first_rows_adapter_for_all")
@settings(max_examples=_scaled(5))
@given(case=lora_cases(max_batch=7), pick=st.integers(0, 6))
def test_batched_equals_alone(impl, reference, case, pick):
    """The law of multi-LoRA batching: a row's result in the batch and the same row sent alone
    (a batch of one, the same adapters) are both within the tolerance rule of its float64 value."""
    kw = case.build()
    y = check(impl, reference, kw)
    if case.batch == 0:
        return
    i = pick % case.batch
    alone = dict(kw, x=kw["x"][i:i + 1], adapter_ids=kw["adapter_ids"][i:i + 1])
    check(impl, reference, alone, name=f"row {i} sent alone")
    assert y.shape[0] == case.batch


@example(case=LoraCase(7, 16, 12, 3, 4, 8.0, "bfloat16", 21)).via(
    "mutant:first_rows_adapter_for_all mutant:none_rows_get_last_adapter")
@settings(max_examples=_scaled(5))
@given(case=lora_cases(patterns=("random", "distinct", "grouped")))
def test_other_adapters_do_not_matter(impl, case):
    """Giving every adapter but one new weights changes nothing in the rows of that one adapter
    nor in the rows of none (-1), bit for bit (as values): a row reads its own adapter only."""
    kw = case.build()
    if case.adapters == 0 or case.batch == 0:
        return
    keep = int(kw["adapter_ids"].max().clamp(min=0))
    y = impl.get("lora_forward")(**kw)
    g = torch.Generator().manual_seed(case.seed + 7)
    a2, b2 = kw["lora_a"].clone(), kw["lora_b"].clone()
    others = [n for n in range(case.adapters) if n != keep]
    for n in others:
        a2[n] = torch.randn(a2[n].shape, generator=g).to(a2.dtype)
        b2[n] = torch.randn(b2[n].shape, generator=g).to(b2.dtype)
    y2 = impl.get("lora_forward")(**dict(kw, lora_a=a2, lora_b=b2))
    ids = kw["adapter_ids"]
    for i in range(case.batch):
        if int(ids[i]) in (keep, -1):
            assert torch.equal(y[i], y2[i]), (
                f"{_call(kw)}: row {i} (adapter {int(ids[i])}) changed when only adapters {others} were given "
                f"new weights: {y[i].tolist()} -> {y2[i].tolist()}")


@settings(max_examples=_scaled(5))
@given(case=lora_cases(max_batch=6), seed=st.integers(0, 2**16))
def test_permuting_the_batch_permutes_the_rows(impl, reference, case, seed):
    """The batch in another order (rows and their ids together) gives the rows in that order,
    each within the tolerance rule."""
    kw = case.build()
    perm = torch.randperm(case.batch, generator=torch.Generator().manual_seed(seed))
    y = check(impl, reference, dict(kw, x=kw["x"][perm], adapter_ids=kw["adapter_ids"][perm]), name="permuted batch")
    assert y.shape[0] == case.batch


@example(case=LoraCase(5, 10, 9, 2, 3, 6.0, "float32", 31)).via("mutant:scaling_alpha_only")
@settings(max_examples=_scaled(4))
@given(case=lora_cases(dtypes=("float32", "float64")))
def test_scaling_is_alpha_over_rank(impl, reference, case):
    """Padding every adapter's rank r to 2r with zero rows of A and zero columns of B and doubling
    alpha keeps alpha / r: the same result (tolerance rule); alpha = 0 gives the base alone."""
    kw = case.build()
    a, b = kw["lora_a"], kw["lora_b"]
    padded = dict(kw, lora_a=torch.cat([a, torch.zeros_like(a)], dim=1), lora_b=torch.cat([b, torch.zeros_like(b)], dim=2),
                  alpha=2 * kw["alpha"])
    check(impl, reference, padded, name="rank padded to 2r, alpha doubled")
    check(impl, reference, dict(kw, alpha=0.0), name="alpha 0")


def test_zero_width_input(impl):
    """d_in = 0 is a legal shape (x (B, 0), W (d_out, 0), A (N, r, 0)): every product is an empty sum,
    y is exactly 0 (d_out columns), rows with and without an adapter alike."""
    x, w = torch.zeros(3, 0), torch.zeros(4, 0)
    a, b = torch.zeros(2, 3, 0), torch.randn(2, 4, 3, generator=torch.Generator().manual_seed(7))
    ids = torch.tensor([0, 1, -1])
    got = impl.get("lora_forward")(x, w, a, b, ids, 8.0)
    assert torch.equal(got, torch.zeros(3, 4)), f"d_in = 0: y must be exactly 0 (3 x 4), got {got}"


def test_hand_computed(impl):
    """d_in = d_out = 2, W = I, one adapter of rank 1: A = [[1, 1]], B = [[1], [0]], alpha 2 (scaling
    2): row x = [1, 2] with the adapter gives [1 + 2 * 3, 2] = [7, 2]; with id -1, [1, 2]."""
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0]])
    y = impl.get("lora_forward")(x, torch.eye(2), torch.tensor([[[1.0, 1.0]]]), torch.tensor([[[1.0], [0.0]]]),
                                 torch.tensor([0, -1]), 2.0)
    assert y.tolist() == [[7.0, 2.0], [1.0, 2.0]], f"expected [[7, 2], [1, 2]], got {y.tolist()}"


def test_int32_ids_and_strided_inputs(impl, reference):
    """adapter_ids int32; x a column slice of a wider buffer; the stacks transposed views."""
    kw = LoraCase(6, 12, 10, 3, 4, 8.0, "bfloat16", 41).build()
    wide = torch.cat([kw["x"], torch.full_like(kw["x"], float("nan"))], dim=1)[:, : kw["x"].shape[1]]
    strided = dict(kw, x=wide, adapter_ids=kw["adapter_ids"].to(torch.int32),
                   lora_a=kw["lora_a"].transpose(1, 2).contiguous().transpose(1, 2),
                   lora_b=kw["lora_b"].transpose(1, 2).contiguous().transpose(1, 2),
                   base_weight=kw["base_weight"].T.contiguous().T)
    y = impl.get("lora_forward")(**strided)
    assert_close_to_oracle(y, reference.get("lora_forward")(**kw), oracles.lora(**kw), name="strided inputs, int32 ids")


# --- merging -----------------------------------------------------------------------------------
@example(rank=3, d_in=7, d_out=5, alpha=8.0, dtype="float32", seed=1).via(
    "mutant:merge_scaling_alpha_only mutant:merge_forgets_base")
@given(rank=st.integers(1, 8), d_in=st.integers(1, 24), d_out=st.integers(1, 24),
       alpha=st.sampled_from((1.0, 8.0, 16.0, -2.0)), dtype=st.sampled_from(("float32", "bfloat16", "float16", "float64")),
       seed=st.integers(0, 2**16))
def test_merge_matches_oracle(impl, reference, rank, d_in, d_out, alpha, dtype, seed):
    """merge_lora = W + (alpha / r) B A within the tolerance rule of the float64 value, in W's
    dtype; float64 rows through the merged weight equal lora_forward's (1e-12 relative)."""
    kw = LoraCase(3, d_in, d_out, 1, rank, alpha, dtype, seed, "one").build()
    w, a, b = kw["base_weight"], kw["lora_a"][0], kw["lora_b"][0]
    got = impl.get("merge_lora")(w, a, b, alpha)
    assert_close_to_oracle(got, reference.get("merge_lora")(w, a, b, alpha), oracles.merged(w, a, b, alpha),
                           name=f"merge_lora(r={rank}, d_in={d_in}, d_out={d_out}, alpha={alpha}, {dtype})")
    if dtype == "float64":
        y = impl.get("lora_forward")(**kw)
        via_merge = kw["x"] @ got.T
        assert torch.allclose(y, via_merge, rtol=1e-12, atol=1e-12), (
            f"float64: x merge_lora(W, A, B, {alpha})^T and lora_forward of the same rows differ by "
            f"{float((y - via_merge).abs().max()):.3e} (both are x (W + (alpha / r) B A)^T)")


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
def test_merge_leaves_inputs(impl, dtype):
    """merge_lora modifies none of its inputs."""
    kw = LoraCase(2, 6, 5, 1, 2, 4.0, dtype, 51).build()
    args = (kw["base_weight"], kw["lora_a"][0], kw["lora_b"][0])
    before = [t.clone() for t in args]
    impl.get("merge_lora")(*args, 4.0)
    assert all(torch.equal(t, b) for t, b in zip(args, before)), "merge_lora modified an input"
