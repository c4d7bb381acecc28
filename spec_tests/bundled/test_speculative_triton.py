"""The Triton draw of the bundled optimized verifier (optimized/_speculative_triton.py, chosen in
optimized/speculative.py by ``VerifyConfig(draw=...)``), asked for explicitly
(``verify_traced(..., config=VerifyConfig(draw="triton", block_v=16))``, whose trace says that the
kernel ran and which rows it flagged) at small vocabularies and small blocks (several blocks per
row) so the CPU interpreter runs it: token for token and count
for count against reference.speculative.verify with the same uniforms -- random p and q, disjoint
supports, p == q, q > 0 where p = 0, drafts without probabilities, greedy rows with argmax ties,
per-row γ, uniforms of 0 and just below 1, every float dtype, batch 0, γ 0 -- and the fallback:
the rows the kernel cannot certify (empty residuals, targets within the rounding margin of a
cumulative step) are flagged, their raw kernel tokens can differ from the reference, and the
torch path redraws exactly them. Private helper of the bundled code: never run against a
submission (the contract: spec_tests/speculative/). To run that whole spec through this path on
the CPU under TRITON_INTERPRET=1, check a file that binds it, e.g. one holding
``def verify(*a, **k): return verify_with(*a, config=VerifyConfig(draw="triton"), **k)``
(``pytest spec_tests/speculative --impl that_file.py``)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

import optimized.speculative as opt
import reference.speculative as ref
from reference.sampling import inverse_cdf
from spec_tests.bundled._sm90 import assert_compiles_for_sm90

pytestmark = pytest.mark.concept("speculative")
triton = pytest.importorskip("triton")
kern = pytest.importorskip("optimized._speculative_triton")

ONE_MINUS = 1.0 - 2.0 ** -53
F64 = torch.float64
DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}


@pytest.fixture
def tri():
    """Where the kernel runs (CPU tensors under TRITON_INTERPRET=1, else CUDA tensors natively) and
    the config that routes verify's step 2 through it with 16-token blocks."""
    if opt._interpreter_on():
        device = "cpu"
    elif torch.cuda.is_available():
        device = "cuda"
    else:
        pytest.skip("the kernel runs on CUDA or under TRITON_INTERPRET=1")
    return SimpleNamespace(device=device, config=opt.VerifyConfig(draw="triton", block_v=16))


def _to(kw: dict, device) -> dict:
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}


def _check(kw: dict, tri, config: opt.VerifyConfig | None = None) -> opt.DrawTrace:
    """opt.verify_traced through the kernel (``config``, default ``tri.config``) ==
    reference.verify on the CPU (the contract's sequential float64 cumsum), tokens and counts; the
    kernel ran (the trace says so); returns the trace (the kernel's flags, the rows redrawn). On
    CUDA too: certified rows do not depend on the summation order, and flagged rows are redrawn on
    the CPU (on CUDA torch.cumsum is a parallel scan whose last bits depend on the shape: the first
    H200 run, which redrew flagged rows on the GPU, differed from the reference on the razor-edge
    rows below)."""
    want = ref.verify(**kw)
    got, trace = opt.verify_traced(**_to(kw, tri.device), config=config or tri.config)
    assert torch.equal(got.num_accepted.cpu(), want.num_accepted), (got.num_accepted, want.num_accepted)
    assert torch.equal(got.tokens.cpu(), want.tokens), (got.tokens, want.tokens)
    if kw["target_probs"].shape[0]:
        assert trace.path == "triton", "the Triton kernel did not run"
        assert trace.redrawn == int(trace.flags.sum())   # the flagged rows, and only them, redrawn
    else:
        assert trace.path is None                         # an empty batch: nothing to draw
    return trace


def _batch(kind: str, b: int, g: int, vocab: int, dtype: str, seed: int) -> dict:
    """verify's keyword arguments for one scenario (float64 built, cast to dtype; per-row γ with
    NaN padding, a third of the rows greedy, acceptance and draw uniforms of 0 and just below 1
    in some rows)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.arange(vocab)
    if kind == "ties":                                     # integer logits: exact argmax ties
        logits = torch.randint(0, 3, (b, g + 1, vocab), generator=gen).to(F64)
    else:
        logits = torch.randn(b, g + 1, vocab, generator=gen, dtype=F64) * 2
    p = torch.softmax(logits, dim=2)
    q = torch.softmax(logits[:, :g] + torch.randn(b, g, vocab, generator=gen, dtype=F64), dim=2)
    if kind == "equal":
        q = p[:, :g].clone()
    elif kind == "disjoint":                               # p on even ids, q on odd ids
        p = torch.where(ids % 2 == 0, p, 0.0)
        q = torch.where(ids % 2 == 1, q, 0.0)
    elif kind == "q_where_p_zero":                         # p = 0 on a random half, q > 0 there
        p = torch.where(torch.rand(b, g + 1, vocab, generator=gen) < 0.5, 0.0, p)
        p[..., 0] += 1e-3
    p = p / p.sum(2, keepdim=True)
    q = q / q.sum(2, keepdim=True).clamp(min=1e-300)
    dt = DTYPES[dtype]
    p, q = p.to(dt), q.to(dt)
    c = q.to(F64).cumsum(2)                                # drafts drawn from q
    x = (c <= torch.rand(b, g, 1, generator=gen, dtype=F64) * c[:, :, -1:]).sum(2).clamp(max=vocab - 1)
    u = torch.rand(b, g + 1, generator=gen, dtype=F64)
    u[0::4] = 0.0
    u[1::4, g] = ONE_MINUS
    u[2::4, :g] = ONE_MINUS
    lens = torch.randint(0, g + 1, (b,), generator=gen)
    lens[0] = g
    pos = torch.arange(g + 1)
    p = p.masked_fill((pos[None, :] > lens[:, None])[:, :, None], math.nan)
    q = q.masked_fill((pos[None, :g] >= lens[:, None])[:, :, None], math.nan)
    x = x.masked_fill(pos[None, :g] >= lens[:, None], -1)
    greedy = [r % 3 == 2 or (kind == "ties" and r % 2 == 0) for r in range(b)]
    return dict(target_probs=p, draft_probs=None if kind == "ngram" else q, draft_tokens=x,
                draft_lens=lens.tolist(), greedy=greedy, uniforms=u)


SCENARIOS = [
    ("random", 7, "float32"), ("random", 33, "float64"), ("random", 200, "bfloat16"),
    ("random", 33, "float16"), ("random", 1, "float32"), ("random", 2, "float64"),
    ("equal", 33, "float32"), ("equal", 7, "bfloat16"), ("disjoint", 33, "float64"),
    ("disjoint", 2, "float32"), ("q_where_p_zero", 33, "float32"), ("q_where_p_zero", 7, "float16"),
    ("ngram", 33, "float32"), ("ngram", 200, "float16"), ("ngram", 1, "float64"),
    ("ties", 7, "float32"), ("ties", 33, "bfloat16"),
]


@pytest.mark.parametrize("kind,vocab,dtype", SCENARIOS)
def test_kernel_path_matches_reference(tri, kind, vocab, dtype):
    """Same tokens and counts as the reference for the same uniforms, γ 3 with per-row γ_r."""
    _check(_batch(kind, 6, 3, vocab, dtype, seed=vocab * 7 + len(kind)), tri)


def test_equal_draft_accepts_everything(tri):
    """p == q (exactly, after the cast), u just below 1: every draft accepted, the bonus drawn by
    the kernel."""
    gen = torch.Generator().manual_seed(1)
    p = torch.softmax(torch.randn(5, 3, 33, generator=gen) * 2, 2)
    x = torch.multinomial(p[:, :2].reshape(-1, 33), 1, generator=gen).reshape(5, 2)
    u = torch.rand(5, 3, generator=gen, dtype=F64)
    u[:, :2] = ONE_MINUS
    kw = dict(target_probs=p, draft_probs=p[:, :2].clone(), draft_tokens=x, uniforms=u)
    assert ref.verify(**kw).num_accepted.tolist() == [2] * 5
    _check(kw, tri)


def test_greedy_argmax_ties_to_the_smallest_id(tri):
    """Greedy rows whose p at the emitted position has its maximum at several ids, in several
    blocks: the smallest id, as torch.argmax."""
    p = torch.full((3, 1, 40), 0.0, dtype=F64)
    p[0, 0, [3, 20, 37]] = 1 / 3
    p[1, 0, [31, 5]] = 0.5
    p[2, 0, :] = 1 / 40
    kw = dict(target_probs=p, draft_probs=None, draft_tokens=torch.zeros(3, 0, dtype=torch.int64),
              greedy=True, uniforms=torch.rand(3, 1, dtype=F64))
    assert ref.verify(**kw).tokens[:, 0].tolist() == [3, 5, 0]
    _check(kw, tri)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gamma_zero_and_batch_zero(tri, dtype):
    """γ = 0 (one token from p_0 per row, the kernel's placeholders for q and the drafts) and an
    empty batch (no kernel call)."""
    kw = _batch("random", 4, 0, 33, dtype, seed=3)
    _check(kw, tri)
    _check(_batch("ngram", 4, 0, 7, dtype, seed=4), tri)
    empty = dict(target_probs=torch.zeros(0, 3, 5, dtype=DTYPES[dtype]), draft_probs=torch.zeros(0, 2, 5),
                 draft_tokens=torch.zeros(0, 2, dtype=torch.int64), uniforms=torch.zeros(0, 3, dtype=F64))
    _check(empty, tri)


def test_strided_inputs(tri):
    """Probabilities with a vocabulary stride of 2 and uniforms in a transposed tensor."""
    kw = _batch("random", 5, 2, 33, "float32", seed=5)
    for name in ("target_probs", "draft_probs"):
        t = kw[name]
        wide = torch.full(t.shape[:2] + (2 * t.shape[2],), 7.0, dtype=t.dtype)
        wide[..., ::2] = t
        kw[name] = wide[..., ::2]
    kw["uniforms"] = kw["uniforms"].t().contiguous().t()
    assert kw["target_probs"].stride(2) == 2 and kw["uniforms"].stride(0) == 1
    _check(kw, tri)


# ----------------------------------------------------------------------------- the fallback
def _raw(kw: dict, k: torch.Tensor, device, block_v: int = 4):
    """The kernel's own (tokens, flags) for rows with k accepted, no fallback."""
    p, q = kw["target_probs"], kw["draft_probs"]
    b, g = p.shape[0], p.shape[1] - 1
    lens = torch.full((b,), g, dtype=torch.int64) if kw.get("draft_lens") is None else torch.tensor(kw["draft_lens"])
    x = kw["draft_tokens"].clamp(min=0)
    out = kern.draw_rows(p.to(device), None if q is None else q.to(device), x.to(device), k.to(device),
                         lens.to(device), torch.zeros(b, dtype=torch.bool, device=device),
                         kw["uniforms"][:, g].to(device), block_v=block_v)
    return out[0].cpu(), out[1].cpu()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_empty_residual_is_flagged_and_drawn_from_p(tri, dtype):
    """p <= q everywhere with p != q (both sums within tolerance): the drafted token (q's argmax,
    where p < q) is rejected even by u just below 1, the residual max(p - q, 0) is all zero and
    the contract draws from p. The kernel flags every such row (its own token is not even a
    token: nothing exceeds a zero target); the torch path redraws them = the reference."""
    gen = torch.Generator().manual_seed(7)
    b, vocab = 5, 33
    q = torch.softmax(torch.randn(b, 1, vocab, generator=gen, dtype=F64) * 2, 2).to(DTYPES[dtype])
    shrink = 1 - (1e-9 if dtype == "float64" else 1e-6)     # many ulps, well within SUM_TOLERANCE
    p = torch.cat([(q.to(F64) * shrink).to(q.dtype), torch.softmax(torch.randn(b, 1, vocab, generator=gen), 2).to(q.dtype)], 1)
    x = q[:, 0].to(F64).argmax(1, keepdim=True)
    u = torch.rand(b, 2, generator=gen, dtype=F64)
    u[:, 0] = ONE_MINUS
    u[0, 1] = 0.0
    kw = dict(target_probs=p, draft_probs=q, draft_tokens=x, uniforms=u)
    assert bool((p[:, 0] <= q[:, 0]).all()) and ref.verify(**kw).num_accepted.tolist() == [0] * b
    tok, flag = _raw(kw, torch.zeros(b, dtype=torch.int64), tri.device)
    assert flag.tolist() == [1] * b
    assert not torch.equal(tok, ref.verify(**kw).tokens[:, 0])   # ignoring the flags would be wrong
    assert _check(kw, tri).flags.tolist() == [1] * b


@pytest.mark.parametrize("residual", [False, True])
def test_targets_on_a_cumulative_step_are_flagged(tri, residual):
    """Razor-edge draws: v * total within a few ulps of a cumulative step C_j (v = C_j / C_last
    and its float64 neighbours). The kernel sums in blocks of 4, the reference sequentially, so
    the kernel's own token differs from the reference's on some rows; the margin flags every one
    of them (all of these rows, in fact), and verify still equals the reference."""
    gen = torch.Generator().manual_seed(11)
    b, vocab = 24, 33
    p = torch.rand(b, 2, vocab, generator=gen, dtype=F64) ** 4
    p = p / p.sum(2, keepdim=True)
    q = torch.softmax(torch.randn(b, 1, vocab, generator=gen, dtype=F64) * 3, 2)
    if residual:                      # draft the token q favours most over p: rejected by u ~ 1
        x = (q[:, 0] - p[:, 0]).argmax(1, keepdim=True)
        w = (p[:, 0] - q[:, 0]).clamp(min=0)
        k = torch.zeros(b, dtype=torch.int64)
    else:                             # the bonus: p_1 after an accepted draft with p = q = 1 at it
        x = torch.zeros(b, 1, dtype=torch.int64)
        q = p[:, :1].clone()
        w = p[:, 1]
        k = torch.ones(b, dtype=torch.int64)
    c = torch.cumsum(w, 1)
    j = torch.randint(0, vocab - 1, (b,), generator=gen)
    j = torch.maximum(j, (w > 0).to(torch.int8).argmax(1))   # a positive step (v = 0 is exact)
    steps = torch.randint(-3, 4, (b,), generator=gen).tolist()
    v = []
    for r in range(b):
        t = float(c[r, j[r]] / c[r, -1])
        for _ in range(abs(steps[r])):
            t = math.nextafter(t, math.inf if steps[r] > 0 else -math.inf)
        v.append(min(max(t, 0.0), ONE_MINUS))
    u = torch.stack([torch.full((b,), ONE_MINUS if residual else 0.0, dtype=F64), torch.tensor(v, dtype=F64)], 1)
    kw = dict(target_probs=p, draft_probs=q, draft_tokens=x, uniforms=u)
    want = ref.verify(**kw)
    assert want.num_accepted.tolist() == k.tolist()
    assert torch.equal(inverse_cdf(w, u[:, 1]), want.tokens[torch.arange(b), k])
    tok, flag = _raw(kw, k, tri.device)
    wrong = tok != want.tokens[torch.arange(b), k]
    if tri.device == "cpu":           # the interpreter's sums are deterministic (a GPU's may differ)
        assert bool(wrong.any()), "no row where the summation order changes the token: the case is too easy"
    assert bool(flag[wrong].all()), "a row whose kernel token differs from the reference was not flagged"
    assert bool(flag.all())
    trace = _check(kw, tri, opt.VerifyConfig(draw="triton", block_v=4))
    assert bool(trace.flags.all()) and trace.redrawn == b   # the flagged rows (all of them here), redrawn


def test_ordinary_rows_are_certified(tri):
    """Away from the edges (random uniforms, no empty residual) the kernel's tokens stand: no row
    is flagged, so the fallback is the exception it is meant to be."""
    kw = _batch("random", 8, 2, 200, "float32", seed=13)
    kw["uniforms"] = torch.rand(8, 3, generator=torch.Generator().manual_seed(2), dtype=F64) * 0.98 + 0.01
    kw["greedy"] = None
    trace = _check(kw, tri)
    assert trace.flags.tolist() == [0] * 8 and trace.redrawn == 0


@pytest.mark.heavy
def test_kernel_compiles_for_sm90():
    """The kernels (the draw, and the exact redraw of flagged rows) compile for an H100/H200 (sm_90)
    without a GPU, which catches what the
    interpreter accepts and the compiler does not (loop-carried and if-redefined types, methods on
    constexprs): float32 and bfloat16 with a vocabulary of 1024+, and float16/float64 with V = 1,
    G = 1 and unit strides (Triton specialises an int argument equal to 1 into a constant)."""
    code = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import optimized._speculative_triton as m
from optimized.speculative import VerifyConfig
for dtype, one, has_q in [('fp32', 0, 1), ('bf16', 0, 0), ('fp16', 1, 1), ('fp64', 1, 0)]:
    i = 'constexpr' if one else 'i32'
    sig = {'p_ptr': '*' + dtype, 'q_ptr': '*' + dtype, 'x_ptr': '*i64', 'k_ptr': '*i64', 'lens_ptr': '*i64',
           'greedy_ptr': '*u1', 'v_ptr': '*fp64', 'tok_ptr': '*i64', 'flag_ptr': '*i8', 'V': i, 'G': i,
           'sp_b': 'i64', 'sp_i': 'i32', 'sp_v': i, 'sq_b': 'i64', 'sq_i': 'i32', 'sq_v': i, 'sx_b': 'i32',
           'sv': 'i32', 'HAS_Q': 'constexpr', 'BLOCK': 'constexpr'}
    const = dict(HAS_Q=bool(has_q), BLOCK=16 if one else VerifyConfig().block_v)
    if one:
        const.update(V=1, G=1, sp_v=1, sq_v=1)
    triton.compile(ASTSource(fn=m._draw_kernel, signature=sig, constexprs=const),
                   target=GPUTarget('cuda', 90, 32), options=dict(num_warps=m.NUM_WARPS))
    # the exact redraw of flagged rows (VerifyPlan.run: no sync), same argument types
    sig = {k: v for k, v in sig.items() if k not in ('greedy_ptr', 'BLOCK')}
    const.pop('BLOCK')
    triton.compile(ASTSource(fn=m._exact_kernel, signature=sig, constexprs=const),
                   target=GPUTarget('cuda', 90, 32), options=dict(num_warps=1))
"""
    assert_compiles_for_sm90(code)
