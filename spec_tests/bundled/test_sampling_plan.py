"""The optimized SamplerPlan's Triton runs (optimized/sampling/plan.py) under the interpreter: the
public SamplerPlan takes the torch schedule on the CPU, so these pick the split and one-program
schedules by the constructor's ``schedule=`` and check, token for token, that a run equals
``dispatch.sample`` at the same schedule and configuration for the same uniforms -- rows that end
on the row, in a gather, or redone by the one-program kernel launched with only the unfinished
rows active (the sync-free redo) -- that one plan serves logits rewritten in place, and that bad
rows (NaN, +inf, all -inf: the caller's broken promise) give tokens, never an error. Helpers of
the bundled code: never run against a submission (the contract: spec_tests/sampling/)."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from optimized.sampling import dispatch
from optimized.sampling.config import SPLIT_INTERPRETER, SamplerConfig
from optimized.sampling.plan import SamplerPlan
from reference.sampling import SamplingParams

pytestmark = pytest.mark.concept("sampling")
triton = pytest.importorskip("triton")

CONFIGS = {
    "default": None,
    "every row redone": SamplerConfig(split=dataclasses.replace(SPLIT_INTERPRETER, search_passes=0)),
    "one pass, then gather or redo": SamplerConfig(split=dataclasses.replace(SPLIT_INTERPRETER, search_passes=1)),
}


def _device():
    if dispatch.interpreter_on():
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    pytest.skip("no GPU and no interpreter: the kernels cannot run")


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("schedule", ["split", "one-program"])
def test_run_equals_sample_at_the_schedule(schedule, config):
    """Two steps of a decode loop on one plan (logits rewritten in place between them): each run
    draws dispatch.sample's tokens at the same schedule and configuration, and the plan chose
    that schedule (not the torch fallback); greedy, top-k, top-p, min-p rows, penalties, bias.
    The same kernels on the same values: equal tokens are demanded whatever the rounding."""
    if schedule == "one-program" and config != "default":
        pytest.skip("the split configurations do not reach the one-program schedule")
    dev = _device()
    cfg = CONFIGS[config]
    g = torch.Generator().manual_seed(5)
    b, vocab = 5, 200
    p = SamplingParams(temperature=[0.0, 0.7, 1.0, 1.3, 0.9], top_k=[0, 40, 0, 120, 0], top_p=[1.0, 0.9, 0.8, 1.0, 0.95],
                       min_p=[0.0, 0.0, 0.0, 0.02, 0.0], repetition_penalty=1.2, logit_bias={3: 1.0})
    kw = dict(prompt_tokens=[[1, 2], [3], [], [4], [5]])
    buf = torch.empty(b, vocab, device=dev)
    plan = SamplerPlan(schedule=schedule, config=cfg)
    plan.plan(buf, p, **kw)
    assert plan._plan["kind"] == schedule
    for step in range(2):
        x = torch.randn(b, vocab, generator=g) * (1 + 2 * step)
        u = torch.rand(b, generator=g, dtype=torch.float64)
        buf.copy_(x)
        got = plan.run(buf, uniforms=u.to(dev))
        want = dispatch.sample(buf, p, uniforms=u.to(dev), schedule=schedule, config=cfg, **kw)
        assert torch.equal(got.cpu(), want.cpu()), f"step {step}: run {got.tolist()} != sample {want.tolist()}"


@pytest.mark.parametrize("schedule", ["split", "one-program", "torch"])
def test_bad_rows_give_tokens_not_errors(schedule):
    """NaN, +inf and all -inf rows are the caller's broken promise: run returns (batch,) int64 and
    raises nothing (sample raises ValueError naming the row); the good rows' tokens are sample's
    on those rows alone."""
    dev = _device()
    g = torch.Generator().manual_seed(6)
    x = torch.randn(4, 64, generator=g)
    x[0, 5], x[1, 7], x[2] = math.nan, math.inf, -math.inf
    p = SamplingParams(temperature=0.8, top_p=0.9)
    u = torch.rand(4, generator=g, dtype=torch.float64)
    plan = SamplerPlan(schedule=schedule)
    plan.plan(x.to(dev), p)
    tokens = plan.run(x.to(dev), uniforms=u.to(dev))
    assert tokens.dtype == torch.int64 and tokens.shape == (4,)
    with pytest.raises(ValueError, match="row 0"):
        dispatch.sample(x.to(dev), p, uniforms=u.to(dev), schedule=schedule)
    alone = dispatch.sample(x[3:].to(dev), p, uniforms=u[3:].to(dev), schedule=schedule)
    assert int(tokens[3]) == int(alone[0])
