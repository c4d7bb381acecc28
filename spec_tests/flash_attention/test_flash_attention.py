"""FlashAttention-2 (course 05.07): a tiled, IO-aware kernel that must compute exactly attention.

The contract (reference/flash_attention.py) is attention's (reference/attention.py) in two more
forms: the packed ``flash_attention.attention_varlen`` (total_tokens, heads, head_dim) with
cumulative sequence lengths, and ``flash_attention.FlashAttention``, the nn.Module a transformer
layer calls. Forward AND backward
are specified. Every floating comparison follows DESIGN's rule against a float64 oracle (the
reference run in float64, itself checked against a brute force in spec_tests/attention/): outputs
and lse within 2x the reference's own error in the same dtype + the rounding floor, gradients
(dq, dk, dv by autograd) within 3x.

The sweep is FlashAttention's own: ragged lengths, q_len != kv_len both ways (bottom-right
causal), sliding windows, GQA ratios 1/2/4/8, fully masked rows, packed batches with empty
sequences. On CPU the optimized implementation runs its real Triton kernels under the
interpreter, so these cases are small: lengths up to 65 drawn on the kernel's tile edges half the
time (two and more tiles in every dimension in about a third of the examples), windows whose edge
falls on a key-tile boundary, head_dim 8 to 64 (plus pinned 24, 40 and 256), scales 0 and negative
(spec_tests/attention/strategies.py); plus three odd lengths, 113 and 203. The long ones (up to
2049) run natively on a GPU (``gpu``) or on CPU with ``--run-slow``.

The rounding floor of out is taken at the scores' magnitude times the values', that of lse at the
scores' (spec_tests/attention/oracles.py). Pinned examples name the mutant
(spec_tests/flash_attention/mutants.py) each one catches.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.strategies import LOW_PRECISION as LOW, randn
from conformance.tolerance import assert_close_to_oracle, assert_metamorphic
from spec_tests.attention.oracles import lse_floor_from, out_floor_from, packed_as_batch
from spec_tests.attention.strategies import AttnCase, attn_cases
from spec_tests.flash_attention.strategies import VarlenCase, varlen_cases


def _scaled(n: int) -> int:
    """``n`` examples under the dev profile (25), scaled with the loaded profile (ci, thorough)."""
    return max(1, round(n * settings().max_examples / 25))


# ------------------------------------------------------------------------------ helpers
def _pack(t: torch.Tensor) -> torch.Tensor:
    """(batch, heads, len, d) -> (batch * len, heads, d): equal-length sequences end to end."""
    return t.transpose(1, 2).reshape(-1, t.shape[1], t.shape[3])


def _run_module(impl, q, k, v, kwargs, grad_out=None):
    """FlashAttention()(q, k, v) and, given grad_out, the gradients (dq, dk, dv)."""
    xs = [t.detach().clone().requires_grad_(grad_out is not None) for t in (q, k, v)]
    out = impl.get("FlashAttention")()(*xs, **kwargs)
    if grad_out is None:
        return out.detach(), None
    out.backward(grad_out.to(out.dtype))
    return out.detach(), [x.grad for x in xs]


def _run_varlen(impl, q, k, v, cu_q, cu_k, kwargs, grad_out=None, grad_lse=None):
    xs = [t.detach().clone().requires_grad_(grad_out is not None) for t in (q, k, v)]
    out, lse = impl.get("attention_varlen")(*xs, cu_q, cu_k, return_lse=True, **kwargs)
    if grad_out is None:
        return out.detach(), lse.detach(), None
    if not (out.requires_grad or lse.requires_grad):  # nothing to attend to: out does not depend on q, k, v
        return out.detach(), lse.detach(), [torch.zeros_like(x) for x in xs]
    finite = torch.isfinite(lse.detach())
    torch.autograd.backward([out, torch.where(finite, lse, 0.0)],
                            [grad_out.to(out.dtype), grad_lse.to(lse.dtype)])
    return out.detach(), lse.detach(), [x.grad for x in xs]


def _out_floor(q, k, v, scale, oracle, packed=False):
    if packed:
        q, k, v = (packed_as_batch(t) for t in (q, k, v))
    return out_floor_from(q, k, v, scale, oracle)


def _lse_floor(q, k, scale, packed=False):
    if packed:
        q, k = packed_as_batch(q), packed_as_batch(k)
    return lse_floor_from(q, k, scale)


def _delta_magnitude(q, k, out, do, scale) -> float:
    """|scale| * max_i sum_d |dO_id O_id| * max(rms q, rms k): the backward's row term
    delta_i = rowsum(dO_i * O_i) is formed from O as stored (the input dtype, as FlashAttention-2
    does), so a correct kernel's delta carries that rounding, and it reaches dq and dk through
    dS = P * (dP - delta) times scale * K (or Q). Where dP - delta cancels (a query over two keys
    at a large scale) that is most of the gradient's error, and the reference's autograd, which
    has no delta, does not share it: the gradients' floor is taken at least at this magnitude."""
    if out.numel() == 0:
        return 0.0
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else abs(float(scale))
    row = (do.detach().to(torch.float64) * out.detach().to(torch.float64)).abs().sum(-1).max()
    rms = max(float(t.detach().to(torch.float64).pow(2).mean().sqrt()) for t in (q, k))
    return scale * float(row) * rms


def _check_grads(got, ref, oracle, inputs, delta_magnitude: float = 0.0):
    """dq, dk, dv within 3x the reference's own error + 2 ulps at the larger of every gradient of
    the call (a gradient that is 0 exactly, e.g. dq of a query over one key, is computed as a
    difference of float32 sums) and the delta term's magnitude (``_delta_magnitude``)."""
    floor_from = torch.cat([g.detach().reshape(-1).cpu() for g in oracle]
                           + [torch.tensor([delta_magnitude], dtype=torch.float64)])
    for name, a, r, o in zip(("dq", "dk", "dv"), got, ref, oracle):
        assert a is not None, f"no gradient reached {name[1:]}"
        assert_close_to_oracle(a, r, o, factor=3.0, name=name, inputs=inputs, floor_from=floor_from)


def _grad_out(shape, seed, device):
    return randn(shape, seed + 3, torch.float64, device)


# ------------------------------------------------------------------------------ forward
# Pinned cases (explicit examples run first, so a planted bug fails fast), each labelled with the
# mutant it catches. The interpreter's tiles are 32 queries x 16 keys (dK/dV: 16 x 32).
@example(case=AttnCase(1, 4, 2, 37, 45, 32, False, None, "float16", 1)).via("mutant:unmasked_tail mutant:gqa_wrong_kv_head")  # GQA 2x2, ragged key tail, 3 tiles
@example(case=AttnCase(1, 4, 2, 33, 33, 16, True, None, "bfloat16", 2)).via("mutant:causal_off_by_one")  # causal diagonal
@example(case=AttnCase(2, 8, 1, 29, 41, 16, True, 7, "float16", 3)).via("mutant:window_first_tile_skipped")  # MQA, causal + window, q < kv
@example(case=AttnCase(1, 2, 1, 20, 9, 16, True, None, "float16", 4)).via("mutant:causal_off_by_one")  # q > kv: 11 fully masked rows
@example(case=AttnCase(1, 2, 1, 64, 64, 32, True, None, "bfloat16", 5)).via("mutant:q_tiles_off_by_one")  # two full query tiles
@example(case=AttnCase(1, 2, 2, 48, 65, 16, True, 33, "float16", 6)).via("mutant:window_edge_tile_unmasked")  # window edge 1 past a key tile
@example(case=AttnCase(1, 2, 1, 5, 32, 16, False, None, "float16", 7, -0.25, 3.0)).via("mutant:negative_scale_max")  # negative scale, whole key tiles
@example(case=AttnCase(1, 2, 1, 9, 17, 16, True, None, "bfloat16", 8, 0.0)).via("mutant:scale_zero_is_default")  # scale 0
@example(case=AttnCase(1, 4, 2, 17, 20, 8, False, 0, "float16", 9)).via("mutant:window_zero_is_none")  # window 0, head_dim 8
@example(case=AttnCase(1, 2, 1, 1, 1, 16, True, None, "float16", 10)).via("mutant:causal_off_by_one")  # q_len 1, kv_len 1
@example(case=AttnCase(1, 2, 1, 18, 33, 256, True, None, "float16", 11)).via("mutant:block_d_capped_at_128")  # the largest head_dim
@example(case=AttnCase(1, 2, 1, 19, 24, 40, True, None, "bfloat16", 12)).via("boundary: head_dim 40, not a power of two: BLOCK_D 64 > head_dim")  # head_dim 40 (BLOCK_D 64)
@settings(max_examples=_scaled(16))
@given(case=attn_cases(dtypes=LOW, max_len=65, head_dims=(8, 16, 32, 64), groups=(1, 2, 4, 8), max_work=48))
def test_forward_matches_oracle(impl, reference, device, case):
    """FlashAttention()(q, k, v) (padded) and attention_varlen on the same batch packed: out and
    lse within 2x the reference's own error of the float64 oracle."""
    q, k, v = case.tensors(device)
    kw = case.kwargs
    inputs = dict(case=case)
    out, _ = _run_module(impl, q, k, v, kw)
    ref, _ = _run_module(reference, q, k, v, kw)
    oracle, _ = _run_module(reference, q.double(), k.double(), v.double(), kw)
    assert_close_to_oracle(out, ref, oracle, name="FlashAttention out", inputs=inputs,
                           floor_from=_out_floor(q, k, v, case.scale, oracle))

    # The same batch packed end to end: every sequence has q_len queries and kv_len keys.
    cu_q = VarlenCase.cumulative([case.q_len] * case.batch).to(device)
    cu_k = VarlenCase.cumulative([case.kv_len] * case.batch).to(device)
    packed = [_pack(t) for t in (q, k, v)]
    out_v, lse_v, _ = _run_varlen(impl, *packed, cu_q, cu_k, kw)
    ref_v, ref_lse, _ = _run_varlen(reference, *packed, cu_q, cu_k, kw)
    o_v, o_lse, _ = _run_varlen(reference, *[t.double() for t in packed], cu_q, cu_k, kw)
    assert_close_to_oracle(out_v, ref_v, o_v, name="attention_varlen out", inputs=inputs,
                           floor_from=_out_floor(q, k, v, case.scale, o_v))
    assert lse_v.dtype == torch.float32, f"lse must be float32, got {lse_v.dtype}"
    assert_close_to_oracle(lse_v, ref_lse, o_lse, name="attention_varlen lse", inputs=inputs,
                           floor_from=_lse_floor(q, k, case.scale))


# ----------------------------------------------------------------------------- backward
@example(case=AttnCase(1, 4, 2, 37, 45, 32, False, None, "float16", 1)).via("mutant:gqa_wrong_kv_head")  # GQA 2x2: dK/dV sum over the group
@example(case=AttnCase(2, 8, 1, 29, 41, 16, True, 7, "float16", 3)).via("mutant:window_first_tile_skipped")  # MQA, causal + window
@example(case=AttnCase(1, 2, 1, 40, 35, 16, False, 21, "float16", 13)).via("mutant:bwd_window_tile_unmasked")  # window edge in the dK/dV tiles
@settings(max_examples=_scaled(6))
@given(case=attn_cases(dtypes=LOW, max_len=48, head_dims=(8, 16, 32), groups=(1, 2, 4, 8), max_work=16))
def test_backward_matches_oracle(impl, reference, device, case):
    """dq, dk, dv of FlashAttention()(q, k, v) within 3x the reference's own gradient error; for
    GQA, dk/dv sum over the query heads of each group."""
    q, k, v = case.tensors(device)
    do = _grad_out(q.shape, case.seed, device)
    kw = case.kwargs
    out, got = _run_module(impl, q, k, v, kw, do)
    _, ref = _run_module(reference, q, k, v, kw, do)
    o, oracle = _run_module(reference, q.double(), k.double(), v.double(), kw, do)
    _check_grads(got, ref, oracle, dict(case=case), _delta_magnitude(q, k, o, do, case.scale))


# ------------------------------------------------------------------------------- varlen
@example(case=VarlenCase((17, 0, 33), (25, 7, 33), 4, 2, 32, True, None, "float16", 6)).via("mutant:gqa_wrong_kv_head")  # empty sequence, GQA
@example(case=VarlenCase((40, 1, 23), (40, 1, 23), 2, 1, 16, False, 5, "bfloat16", 7)).via("mutant:window_edge_tile_unmasked mutant:bwd_window_tile_unmasked")  # window 5 per sequence
@example(case=VarlenCase((64, 3), (64, 3), 2, 1, 16, True, None, "float16", 8)).via("mutant:varlen_grid_last_sequence mutant:q_tiles_off_by_one")  # longest first, 2 full tiles
@example(case=VarlenCase((33, 16), (48, 31), 2, 2, 24, True, 17, "bfloat16", 9)).via("mutant:delta_head_dim_unmasked")  # head_dim 24 (BLOCK_D 32)
@settings(max_examples=_scaled(8))
@given(case=varlen_cases())
def test_varlen_matches_oracle(impl, reference, device, case):
    """Packed batches (empty sequences, q_len != kv_len per sequence): out, lse and the gradients
    through both (d lse included) match the float64 oracle; inputs are left untouched."""
    q, k, v, cu_q, cu_k = case.tensors(device)
    before = [t.clone() for t in (q, k, v, cu_q, cu_k)]
    do = _grad_out(q.shape, case.seed, device)
    dl = _grad_out(q.shape[:2], case.seed + 1, device)
    kw = case.kwargs
    inputs = dict(case=case)
    out, lse, got = _run_varlen(impl, q, k, v, cu_q, cu_k, kw, do, dl)
    for name, t, b in zip(("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k"), (q, k, v, cu_q, cu_k), before):
        assert torch.equal(t, b), f"attention_varlen modified its input {name}"
    ref, ref_lse, ref_g = _run_varlen(reference, q, k, v, cu_q, cu_k, kw, do, dl)
    o, o_lse, o_g = _run_varlen(reference, q.double(), k.double(), v.double(), cu_q, cu_k, kw, do, dl)
    delta = _delta_magnitude(q, k, o, do, case.scale)
    assert_close_to_oracle(out, ref, o, name="varlen out", inputs=inputs,
                           floor_from=_out_floor(q, k, v, case.scale, o, packed=True))
    assert_close_to_oracle(lse, ref_lse, o_lse, name="varlen lse", inputs=inputs,
                           floor_from=_lse_floor(q, k, case.scale, packed=True))
    _check_grads(got, ref_g, o_g, inputs, delta)


@settings(max_examples=_scaled(3))
@given(case=attn_cases(dtypes=LOW, max_len=24, head_dims=(16,)), extra=st.integers(1, 8))
def test_fully_masked_rows(impl, device, case, extra):
    """Causal with q_len > kv_len: the first q_len - kv_len queries see no key. Their output is
    exactly 0, their lse -inf, their dq exactly 0, and no NaN reaches any gradient."""
    case = AttnCase(**{**case.__dict__, "causal": True, "window": None, "q_len": case.kv_len + extra})
    q, k, v = case.tensors(device)
    do = _grad_out(q.shape, case.seed, device)
    out, grads = _run_module(impl, q, k, v, case.kwargs, do)
    assert (out[:, :, :extra] == 0).all(), "fully masked rows must output exactly 0"
    for name, g in zip(("dq", "dk", "dv"), grads):
        assert torch.isfinite(g).all(), f"non-finite {name}"
    assert (grads[0][:, :, :extra] == 0).all(), "a query that sees no key has dq = 0"
    cu_q = VarlenCase.cumulative([case.q_len] * case.batch).to(device)
    cu_k = VarlenCase.cumulative([case.kv_len] * case.batch).to(device)
    _, lse, _ = _run_varlen(impl, *[_pack(t) for t in (q, k, v)], cu_q, cu_k, case.kwargs)
    lse = lse.reshape(case.batch, case.q_len, case.q_heads)
    assert (lse[:, :extra] == -math.inf).all(), "fully masked rows must have lse = -inf"
    assert torch.isfinite(lse[:, extra:]).all()


# ------------------------------------------------------------------------------ defaults
MODULE_DEFAULTS = dict(causal=False, window=None, scale=None)
VARLEN_DEFAULTS = dict(causal=False, window=None, scale=None, return_lse=False)


def _equal(got, want) -> bool:
    got, want = ((x,) if isinstance(x, torch.Tensor) else tuple(x) for x in (got, want))
    return len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want))


@example(case=AttnCase(1, 2, 1, 6, 9, 16, True, None, "float16", 41), omit=frozenset({"causal"})).via("mutant:module_default_causal")
@settings(max_examples=_scaled(6))
@given(case=attn_cases(dtypes=LOW, max_len=24, head_dims=(16, 64), max_work=8),
       omit=st.frozensets(st.sampled_from(sorted(VARLEN_DEFAULTS)), min_size=1))
def test_omitted_arguments_mean_the_defaults(impl, device, case, omit):
    """FlashAttention()(q, k, v) and attention_varlen without ``causal`` / ``window`` / ``scale``
    (/ ``return_lse``) give, bit for bit, what passing the documented defaults gives (causal=False,
    window=None, scale=None = 1/sqrt(head_dim), return_lse=False). Mutant: module_default_causal."""
    q, k, v = case.tensors(device)
    drawn = dict(case.kwargs, return_lse=case.seed % 2 == 1)
    module = impl.get("FlashAttention")()
    given_m = {n: x for n, x in drawn.items() if n in MODULE_DEFAULTS and n not in omit}
    explicit_m = {**given_m, **{n: MODULE_DEFAULTS[n] for n in omit if n in MODULE_DEFAULTS}}
    assert _equal(module(q, k, v, **given_m), module(q, k, v, **explicit_m)), (
        f"FlashAttention: omitting {sorted(omit)} must mean the defaults\n  case: {case!r}")
    if explicit_m["scale"] is None:
        assert _equal(module(q, k, v, **explicit_m), module(q, k, v, **{**explicit_m, "scale": case.head_dim ** -0.5})), (
            f"scale=None must mean 1/sqrt({case.head_dim})\n  case: {case!r}")
    cu_q = VarlenCase.cumulative([case.q_len] * case.batch).to(device)
    cu_k = VarlenCase.cumulative([case.kv_len] * case.batch).to(device)
    packed = [_pack(t) for t in (q, k, v)]
    fn = impl.get("attention_varlen")
    given_v = {n: x for n, x in drawn.items() if n not in omit}
    explicit_v = {**given_v, **{n: VARLEN_DEFAULTS[n] for n in omit}}
    got = fn(*packed, cu_q, cu_k, **given_v)
    if not explicit_v["return_lse"]:
        assert isinstance(got, torch.Tensor), f"return_lse omitted must return out alone, got {type(got).__name__}"
    assert _equal(got, fn(*packed, cu_q, cu_k, **explicit_v)), (
        f"attention_varlen: omitting {sorted(omit)} must mean the defaults\n  case: {case!r}")


# ---------------------------------------------------------------- the nn.Module drop-in
class _AttentionLayer(torch.nn.Module):
    """A GQA self-attention block whose attention is a pluggable callable (as in model.py)."""

    def __init__(self, attend, dim=64, q_heads=4, kv_heads=2, head_dim=16):
        super().__init__()
        self.attend, self.h, self.kv, self.d = attend, q_heads, kv_heads, head_dim
        self.wq = torch.nn.Linear(dim, q_heads * head_dim, bias=False)
        self.wkv = torch.nn.Linear(dim, 2 * kv_heads * head_dim, bias=False)
        self.wo = torch.nn.Linear(q_heads * head_dim, dim, bias=False)

    def forward(self, x):
        b, n, _ = x.shape
        q = self.wq(x).view(b, n, self.h, self.d).transpose(1, 2)          # strided, not copied
        k, v = self.wkv(x).view(b, n, 2, self.kv, self.d).unbind(2)
        out = self.attend(q, k.transpose(1, 2), v.transpose(1, 2), causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, n, -1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_module_is_a_drop_in_attention_callable(impl, reference, device, dtype):
    """A layer using FlashAttention() as its attention (with strided q/k/v views, as a model
    produces them) computes the same outputs and weight gradients as with the reference."""
    module = impl.get("FlashAttention")()
    assert isinstance(module, torch.nn.Module) and not list(module.parameters())
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 21, 64, generator=gen, dtype=torch.float64)
    weights = _AttentionLayer(None).to(torch.float64).state_dict()
    for w in weights.values():
        w.copy_(torch.randn(w.shape, generator=gen, dtype=torch.float64) / 8)

    def run(attend, dt):
        layer = _AttentionLayer(attend).to(device)
        layer.load_state_dict(weights)
        layer = layer.to(dt)
        y = layer(x.to(device, dt))
        y.backward(torch.ones_like(y))
        return y.detach(), [p.grad for p in layer.parameters()]

    y, g = run(module, dtype)
    y_ref, g_ref = run(reference.get("FlashAttention")(), dtype)
    y_o, g_o = run(reference.get("FlashAttention")(), torch.float64)
    assert_close_to_oracle(y, y_ref, y_o, name="layer output")
    floor_from = torch.cat([t.reshape(-1).cpu() for t in g_o])
    for name, a, r, o in zip(("wq", "wkv", "wo"), g, g_ref, g_o):
        assert_close_to_oracle(a, r, o, factor=3.0, name=f"d{name}", floor_from=floor_from)


def test_strided_inputs_equal_contiguous(impl, reference, device):
    """q/k/v given as transposed views of (batch, len, heads, d) storage give the same result
    as contiguous copies (the layout is read through strides, never assumed)."""
    case = AttnCase(2, 4, 2, 19, 27, 32, True, None, "float16", 9)
    q, k, v = case.tensors(device)
    views = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v)]
    assert not views[0].is_contiguous()
    fa = impl.get("FlashAttention")()
    a, b = fa(*views, causal=True), fa(q, k, v, causal=True)
    ref = reference.get("FlashAttention")()(q, k, v, causal=True)
    oracle = reference.get("FlashAttention")()(q.double(), k.double(), v.double(), causal=True)
    assert_metamorphic(a, b, ref, oracle, name="strided vs contiguous", inputs=dict(case=case))


def _valid_varlen(device) -> dict:
    """A valid packed call: two sequences, 4 + 6 queries over 3 + 4 keys, 4 query heads over 2."""
    return dict(q=torch.randn(10, 4, 16, device=device), k=torch.randn(7, 2, 16, device=device),
                v=torch.randn(7, 2, 16, device=device),
                cu_seqlens_q=torch.tensor([0, 4, 10], dtype=torch.int32, device=device),
                cu_seqlens_k=torch.tensor([0, 3, 7], dtype=torch.int32, device=device))


def _with(**changes):
    """A Bad change computed from the valid arguments: ``name=lambda valid_kwargs: new_value``."""
    return lambda kw: {**kw, **{name: f(kw) for name, f in changes.items()}}


def _cu(*values):
    return lambda kw: torch.tensor(values, dtype=torch.int32, device=kw["q"].device)


VARLEN_BAD = [
    Bad("q rank 4", _with(q=lambda kw: kw["q"][None]), ValueError, ("q",)),
    Bad("k rank 2", _with(k=lambda kw: kw["k"][:, 0]), ValueError, ("k",)),
    Bad("v not a tensor", _with(v=lambda kw: kw["v"].tolist()), TypeError, ("v",)),
    Bad("heads not a multiple", _with(q=lambda kw: kw["q"][:, :3]), ValueError, ("q",)),
    Bad("q dtype differs", _with(q=lambda kw: kw["q"].half()), TypeError, ("q",)),
    Bad("cu_seqlens_q starts at 1", _with(cu_seqlens_q=lambda kw: kw["cu_seqlens_q"] + 1), ValueError,
        ("cu_seqlens_q",)),
    Bad("cu_seqlens_q decreases", _with(cu_seqlens_q=_cu(0, 6, 4, 10)), ValueError, ("cu_seqlens_q",)),
    Bad("cu_seqlens_k ends early", _with(cu_seqlens_k=_cu(0, 3, 6)), ValueError, ("cu_seqlens_k",)),
    Bad("float cu_seqlens_q", _with(cu_seqlens_q=lambda kw: kw["cu_seqlens_q"].float()), TypeError,
        ("cu_seqlens_q",)),
    Bad("cu_seqlens_k a list", dict(cu_seqlens_k=[0, 3, 7]), TypeError, ("cu_seqlens_k",)),
    Bad("cu_seqlens_q 2-d", _with(cu_seqlens_q=lambda kw: kw["cu_seqlens_q"][None]), ValueError,
        ("cu_seqlens_q",)),
    Bad("sequence counts differ", _with(cu_seqlens_k=_cu(0, 7)), ValueError, ("cu_seqlens_k",)),
    # no sequence at all: a batch is >= 1 sequence (two entries), even over empty tensors
    Bad("cu_seqlens of one entry", _with(q=lambda kw: kw["q"][:0], k=lambda kw: kw["k"][:0], v=lambda kw: kw["v"][:0],
                                         cu_seqlens_q=_cu(0), cu_seqlens_k=_cu(0)), ValueError, ("cu_seqlens_q",)),
    Bad("negative window", dict(window=-1), ValueError, ("window",)),
    Bad("bool window", dict(window=False), TypeError, ("window",)),
    Bad("inf scale", dict(scale=math.inf), ValueError, ("scale",)),
    Bad("string scale", dict(scale="0.5"), TypeError, ("scale",)),
    Bad("k dtype differs", _with(k=lambda kw: kw["k"].double()), TypeError, ("k",)),
    Bad("head_dim 0", _with(q=lambda kw: kw["q"][..., :0], k=lambda kw: kw["k"][..., :0],
                            v=lambda kw: kw["v"][..., :0]), ValueError, ("head_dim",)),
    # The checks are of the whole packed tensors, not of the sequences the loop happens to visit:
    # k and v rows beyond what cu_seqlens_k describes, and bad arguments when no sequence has a
    # query (an all-empty q, legal by itself), are rejected all the same.
    Bad("k and v lengths differ", _with(v=lambda kw: torch.cat([kw["v"], kw["v"][:1]])), ValueError, ("k", "v")),
    Bad("negative window, no queries", _with(q=lambda kw: kw["q"][:0], cu_seqlens_q=_cu(0, 0, 0),
                                             window=lambda kw: -1), ValueError, ("window",)),
    Bad("heads not a multiple, no queries", _with(q=lambda kw: kw["q"][:0, :3], cu_seqlens_q=_cu(0, 0, 0)),
        ValueError, ("q",)),
    Bad("k dtype differs, no queries", _with(q=lambda kw: kw["q"][:0], cu_seqlens_q=_cu(0, 0, 0),
                                             k=lambda kw: kw["k"].double()), TypeError, ("k",)),
]


@bad_cases(VARLEN_BAD)
def test_varlen_rejects_bad_input(impl, device, bad):
    """Malformed packed input raises TypeError (wrong kind of value) or ValueError (illegal value)
    whose message names the argument; the rejected call leaves its tensors unchanged."""
    assert_rejects(impl.get("attention_varlen"), lambda: _valid_varlen(device), bad)


def _valid_padded(device) -> dict:
    """A valid FlashAttention() call: 4 query heads over 2 KV heads, 8 positions, head_dim 16."""
    return dict(q=torch.randn(1, 4, 8, 16, device=device), k=torch.randn(1, 2, 8, 16, device=device),
                v=torch.randn(1, 2, 8, 16, device=device))


MODULE_BAD = [
    Bad("q rank 3", _with(q=lambda kw: kw["q"][0]), ValueError, ("q",)),
    Bad("k not a tensor", _with(k=lambda kw: kw["k"].tolist()), TypeError, ("k",)),
    Bad("v dtype differs", _with(v=lambda kw: kw["v"].half()), TypeError, ("v",)),
    Bad("heads not a multiple", _with(q=lambda kw: kw["q"][:, :3]), ValueError, ("q",)),
    Bad("negative window", dict(window=-1), ValueError, ("window",)),
    Bad("float window", dict(window=1.5), TypeError, ("window",)),
    Bad("nan scale", dict(scale=math.nan), ValueError, ("scale",)),
    Bad("string scale", dict(scale="1"), TypeError, ("scale",)),
]


@bad_cases(MODULE_BAD)
def test_module_rejects_bad_input(impl, device, bad):
    """FlashAttention()(q, k, v, ...) rejects what attention rejects, naming the argument."""
    assert_rejects(impl.get("FlashAttention")(), lambda: _valid_padded(device), bad)


# ------------------------------------------------------ long and odd lengths (GPU / slow)
def _long_cases():
    cases = []
    for i, (nq, nk) in enumerate([(113, 113), (203, 203), (1023, 1023), (2049, 2049), (113, 203),
                                  (203, 113), (1, 1023), (1023, 1), (257, 1000)]):
        for causal in (False, True):
            d = (64, 128)[i % 2]
            cases.append(AttnCase(1, 4, (4, 2, 1)[i % 3], nq, nk, d, causal, None,
                                  LOW[(i + causal) % 2], 100 + i))
    cases += [AttnCase(2, 8, 1, 511, 777, 128, True, 128, "bfloat16", 201),       # MQA, window
              AttnCase(1, 8, 1, 1000, 1000, 64, False, 256, "float16", 202),     # group 8, window only
              AttnCase(1, 2, 2, 333, 333, 256, True, None, "float16", 203),      # head_dim 256
              AttnCase(1, 2, 2, 333, 333, 96, False, None, "bfloat16", 204),     # head_dim 96
              AttnCase(1, 4, 4, 1500, 1500, 32, True, None, "float16", 205)]     # head_dim 32
    return cases


def _check_long(impl, reference, device, case):
    q, k, v = case.tensors(device)
    do = _grad_out(q.shape, case.seed, device)
    out, got = _run_module(impl, q, k, v, case.kwargs, do)
    ref, ref_g = _run_module(reference, q, k, v, case.kwargs, do)
    o, o_g = _run_module(reference, q.double(), k.double(), v.double(), case.kwargs, do)
    assert_close_to_oracle(out, ref, o, name="out", inputs=dict(case=case),
                           floor_from=_out_floor(q, k, v, case.scale, o))
    _check_grads(got, ref_g, o_g, dict(case=case), _delta_magnitude(q, k, o, do, case.scale))


@pytest.mark.gpu
@pytest.mark.parametrize("case", _long_cases(), ids=repr)
def test_long_and_odd_lengths_gpu(impl, reference, device, case):
    """FlashAttention's sweep at full size, natively: out and gradients vs the float64 oracle."""
    _check_long(impl, reference, device, case)


@pytest.mark.gpu
def test_varlen_long_gpu(impl, reference, device):
    """A packed batch of long ragged sequences (and an empty one) natively, with gradients."""
    case = VarlenCase((1023, 0, 17, 2000), (1023, 5, 700, 1999), 8, 2, 128, True, None, "bfloat16", 301)
    q, k, v, cu_q, cu_k = case.tensors(device)
    do, dl = _grad_out(q.shape, 1, device), _grad_out(q.shape[:2], 2, device)
    out, lse, got = _run_varlen(impl, q, k, v, cu_q, cu_k, case.kwargs, do, dl)
    ref, ref_lse, ref_g = _run_varlen(reference, q, k, v, cu_q, cu_k, case.kwargs, do, dl)
    o, o_lse, o_g = _run_varlen(reference, q.double(), k.double(), v.double(), cu_q, cu_k, case.kwargs, do, dl)
    assert_close_to_oracle(out, ref, o, name="varlen out", floor_from=_out_floor(q, k, v, None, o, packed=True))
    assert_close_to_oracle(lse, ref_lse, o_lse, name="varlen lse", floor_from=_lse_floor(q, k, None, packed=True))
    _check_grads(got, ref_g, o_g, dict(case=case), _delta_magnitude(q, k, o, do, None))


@pytest.mark.gpu
def test_deterministic_gpu(impl, device):
    """Same inputs, same bits: 50 forward + backward runs are bitwise equal (no atomics)."""
    case = AttnCase(2, 8, 2, 1000, 1000, 128, True, None, "bfloat16", 401)
    q, k, v = case.tensors(device)
    do = _grad_out(q.shape, 1, device)
    first = None
    for _ in range(50):
        out, grads = _run_module(impl, q, k, v, case.kwargs, do)
        now = [out, *grads]
        if first is None:
            first = now
        for name, a, b in zip(("out", "dq", "dk", "dv"), now, first):
            assert torch.equal(a, b), f"{name} differs between runs on identical inputs"


@pytest.mark.parametrize("case", [AttnCase(1, 2, 1, 203, 203, 32, True, None, "float16", 501),
                                  AttnCase(1, 2, 2, 113, 203, 64, False, 40, "bfloat16", 502),
                                  AttnCase(1, 4, 1, 203, 113, 16, True, None, "float16", 503)], ids=repr)
def test_odd_lengths(impl, reference, device, case):
    """Three of FlashAttention's odd lengths everywhere (about 1 s each under the interpreter):
    several query and key tiles, ragged tails, q_len != kv_len both ways, with gradients."""
    _check_long(impl, reference, device, case)


@pytest.mark.slow
@pytest.mark.parametrize("case", [AttnCase(2, 8, 2, 1023, 1023, 64, True, None, "bfloat16", 601),
                                  AttnCase(1, 4, 1, 511, 777, 128, False, 100, "float16", 602)], ids=repr)
def test_long_lengths_slow(impl, reference, device, case):
    """Longer sequences on CPU (minutes under the interpreter), so opt-in (--run-slow)."""
    _check_long(impl, reference, device, case)
