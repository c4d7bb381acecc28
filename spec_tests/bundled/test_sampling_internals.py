"""Internals of the bundled optimized sampler's torch schedule (optimized/sampling/torch_path.py,
optimized/sampling/fused_tail.py): its fused Triton tail against its own torch tail, and its
chunked topk against torch.topk. These are helpers of the bundled code, not the contract, so they
are never run against a submission; the contract itself is specified in spec_tests/sampling/."""
from __future__ import annotations

import math

import pytest
import torch

from optimized.sampling import torch_path
from reference.sampling import SamplingParams, resolve_params
from spec_tests.sampling.oracles import assert_clear_of_rounding

pytestmark = pytest.mark.concept("sampling")


@pytest.mark.parametrize("seed", [0, 1])
def test_fused_triton_tail_matches_torch_tail(device, seed):
    """The fused Triton tail (the CUDA fast path) == the torch tail: same tokens for the same
    uniforms, same status (fine / tie / bad row). Native on a GPU, interpreted on the CPU."""
    pytest.importorskip("triton")
    from optimized.sampling.fused_tail import fused_tail
    g = torch.Generator().manual_seed(seed)
    b, vocab = 6, 40
    x = (torch.randint(-4, 5, (b, vocab), generator=g).float() if seed else torch.randn(b, vocab, generator=g) * 2)
    x[5, :] = -math.inf
    x[5, 3] = 1.0                                              # one finite token: a tie of -infs
    params = SamplingParams(temperature=[0.7, 1.0, 1.3, 0.5, 2.0, 1.0], top_k=[5, 1, 9, 3, 12, 4],
                            top_p=[0.9, 1.0, 0.5, 0.8, 0.95, 0.9], min_p=[0.0, 0.0, 0.1, 0.0, 0.3, 0.0])
    rows = resolve_params(params, b, vocab, torch.float32, device)
    t = {n: getattr(rows, n) for n in ("temperature", "top_k", "top_p", "min_p")}
    vals, ids = torch.topk(x.to(device), 13, dim=1)
    u = torch.rand(b, generator=g, dtype=torch.float64).to(device)
    assert_clear_of_rounding(x, params, u)     # the tails' exp and sums differ: equal tokens need clear inputs
    tok_t, st_t, _ = torch_path.fast_tail(vals, ids, t, t["top_k"], u)
    tok_f, st_f = fused_tail(vals, ids, t["temperature"], t["top_k"], t["top_p"], t["min_p"], u)
    assert st_f.tolist() == st_t.tolist()
    fine = st_t == 0
    assert torch.equal(tok_f[fine], tok_t[fine])


@pytest.mark.parametrize("chunk", [None, 7, 16])
def test_chunked_topk_selects_the_same_values(chunk):
    """topk through chunk maxima returns the same sorted values as torch.topk, and ids that hold
    those values (inside a tie it may pick other ids), NaN still first."""
    g = torch.Generator().manual_seed(3 if chunk is None else chunk)
    x = torch.cat([torch.randn(3, 1003, generator=g), torch.randint(-3, 4, (3, 1003), generator=g).float()])
    x[1, 17] = math.nan
    vals, ids = torch_path.chunked_topk(x, 11, chunk=chunk)
    ref_vals, _ = torch.topk(x, 11, dim=1)
    assert torch.equal(vals.nan_to_num(), ref_vals.nan_to_num()) and bool(vals[1, 0].isnan())
    assert torch.equal(x.gather(1, ids).nan_to_num(), vals.nan_to_num())
    assert all(len(set(r)) == 11 for r in ids.tolist()), "an id selected twice"
