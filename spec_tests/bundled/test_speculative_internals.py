"""Internals of the bundled optimized verifier (optimized/speculative.py): its binary-search
inverse CDF against the reference's ``inverse_cdf`` (reference/sampling.py), including the branch
only subnormal totals reach, its chunked validation against plain reductions, and its
``VerifyConfig`` (every choice an argument: what it accepts, and that each choice gives the same
result). Private helpers, not the contract: never run against a submission; the contract is
specified in spec_tests/speculative/."""
from __future__ import annotations

import math

import pytest
import torch

import optimized.speculative as opt
from reference.sampling import inverse_cdf

pytestmark = pytest.mark.concept("speculative")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_binary_search_inverse_cdf_matches_reference(seed):
    """Same token as reference.sampling.inverse_cdf for random float64 weights with zeros, for
    uniforms at 0, just below 1 and on exact CDF steps, and for subnormal totals (where
    v * C_last rounds up to C_last and both fall back to the last positive-weight token)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(64, 300, generator=g, dtype=torch.float64)
    w[w < 0.7] = 0.0
    w[5] = 0.0
    w[5, 17] = 1.0
    w[6] = 0.0
    w[6, :3] = 2.0 ** -1074 * torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)  # the smallest subnormal
    w[6, 250] = 0.0
    v = torch.rand(64, generator=g, dtype=torch.float64)
    v[0], v[1], v[6] = 0.0, 1.0 - 2.0 ** -53, 0.9
    c = torch.cumsum(w, dim=1)
    v[2] = c[2, 100] / c[2, -1]           # a uniform on a step
    got = opt._inverse_cdf(torch.cumsum(w, dim=1), w, v)
    want = inverse_cdf(w, v)
    assert torch.equal(got, want), (got - want).nonzero().flatten().tolist()
    assert int(got[6]) == 1


@pytest.mark.parametrize("chunk_bytes", [1, 4096, 2 << 20, 1 << 40])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_chunked_validation_matches_plain_reductions(chunk_bytes, dtype):
    """Chunked sums and minima == one sum and one amin over the whole tensor, NaN propagated."""
    g = torch.Generator().manual_seed(3)
    p = torch.softmax(torch.randn(7, 3, 50, generator=g), dim=2).to(dtype)
    p[4, 1, 7] = math.nan
    p[2, 0, 3] = -0.5
    sums, mins = opt._sums_mins(p, chunk_bytes)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    torch.testing.assert_close(sums, p.to(acc).sum(dim=2), equal_nan=True, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(mins, p.amin(dim=2).to(acc), equal_nan=True, rtol=0, atol=0)
    assert torch.isnan(sums[4, 1]) and torch.isnan(mins[4, 1]) and float(mins[2, 0]) == -0.5


def test_config_rejects_what_it_cannot_run():
    """A draw path outside DRAW_PATHS, a block that is not a power of 2, a chunk of 0 bytes, and a
    config of another type are refused when made / passed, not at some later call."""
    for bad in (dict(draw="1"), dict(draw=None), dict(block_v=24), dict(block_v=0), dict(validation_chunk_bytes=0)):
        with pytest.raises(ValueError):
            opt.VerifyConfig(**bad)
    kw = dict(target_probs=torch.full((1, 1, 4), 0.25), draft_probs=None,
              draft_tokens=torch.zeros(1, 0, dtype=torch.int64))
    with pytest.raises(TypeError):
        opt.verify_with(**kw, config={"draw": "torch"})
    assert opt.VerifyConfig() == opt.VerifyConfig(draw="auto", block_v=1024, validation_chunk_bytes=2 << 20)


@pytest.mark.parametrize("config", [dict(draw="torch"), dict(draw="auto"), dict(validation_chunk_bytes=1)])
def test_every_config_gives_the_contract_result(config):
    """verify_with(config=...) == verify == the reference, tokens and counts, on CPU tensors; with
    draw "torch" (or "auto" on the CPU) the trace names the torch path and no row was redrawn."""
    import reference.speculative as ref
    g = torch.Generator().manual_seed(5)
    p = torch.softmax(torch.randn(6, 3, 40, generator=g) * 3, dim=2)
    q = torch.softmax(torch.randn(6, 2, 40, generator=g) * 3, dim=2)
    x = torch.multinomial(q.reshape(-1, 40), 1, generator=g).reshape(6, 2)
    kw = dict(target_probs=p, draft_probs=q, draft_tokens=x, greedy=[False, True] * 3,
              uniforms=torch.rand(6, 3, generator=g, dtype=torch.float64))
    want = ref.verify(**kw)
    got, trace = opt.verify_traced(**kw, config=opt.VerifyConfig(**config))
    for out in (got, opt.verify_with(**kw, config=opt.VerifyConfig(**config)), opt.verify(**kw)):
        assert torch.equal(out.tokens, want.tokens) and torch.equal(out.num_accepted, want.num_accepted)
    assert trace.path == "torch" and trace.flags is None and trace.redrawn == 0
