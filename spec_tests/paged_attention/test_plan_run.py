"""Plan once, run many (the optional ``PagedAttentionPlan``, FlashInfer's plan()/run()).

``plan`` reads the batch's host-side metadata and validates it completely; ``run`` reads the
tensors' values on the device only, so an engine captures it in a CUDA graph and replays it after
updating q, the lengths and the tables in place. The properties: plan + run is paged_attention (the
same oracle, the same tolerance rule, unseen slots NaN); one plan serves every run whose lengths
stay within its ``max_seq_len``, however the values changed since the plan; a re-plan for another
batch serves that batch, and a run with tensors unlike the plan's is refused, naming the argument;
a plan rejects exactly what paged_attention rejects, and a plan that raises leaves the previous
one in force; on a GPU a captured run replays correctly after in-place updates.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.strategies import generator
from spec_tests.paged_attention.strategies import PagedCase, paged_cases
from spec_tests.paged_attention.test_paged_attention import BAD, _check, _scaled, _valid, _with

ARGS = ("q", "k_cache", "v_cache", "block_tables", "seq_lens")


def _planned(impl, **plan_kwargs):
    """paged_attention's signature, computed as one plan and one run of a fresh plan object."""
    def call(q, k_cache, v_cache, block_tables, seq_lens, *, scale=None, window=None, return_lse=False):
        plan = impl.get("PagedAttentionPlan")()
        plan.plan(q, k_cache, v_cache, block_tables, seq_lens, scale=scale, window=window, **plan_kwargs)
        return plan.run(q, k_cache, v_cache, block_tables, seq_lens, return_lse=return_lse)
    return call


@example(case=PagedCase((37, 70, 5), 0, 4, 2, 16, 4, None, "float16", 1, shared_blocks=1)).via(
    "boundary: a shared prefix block and partial last blocks, through a plan")
@example(case=PagedCase((0, 1, 64, 33), 0, 8, 1, 32, 16, 5, "bfloat16", 2, spare_cols=2)).via(
    "boundary: an empty row, a one-token row and a window, through a plan")
@example(case=PagedCase((2, 65), 4, 8, 2, 32, 1, 9, "bfloat16", 5)).via(
    "boundary: blind speculative queries (seq_len < q_len) with a window, through a plan")
@settings(max_examples=_scaled(8))
@given(case=paged_cases(q_lens=(0, 0, 1, 3)))
def test_plan_then_run_matches_oracle(impl, device, case):
    """plan(...) then run(...) is paged_attention: the float64 contiguous oracle within the
    tolerance rule, exact zeros for a query that sees no key, no slot it may not see reaching the
    output, no argument modified (decode and speculative q, windows, GQA, every block size)."""
    _check(impl, case, device, call=_planned(impl))


def _prefix(x, lens: list[int], q: torch.Tensor):
    """``x`` with other (shorter or equal) lengths and another q: the oracle's keys cut to match."""
    return dataclasses.replace(x, q=q, seq_lens=torch.tensor(lens, dtype=x.seq_lens.dtype, device=x.seq_lens.device),
                               k=tuple(k[:n] for k, n in zip(x.k, lens)), v=tuple(v[:n] for v, n in zip(x.v, lens)))


@example(full=(40, 17, 64), q_len=0, window=None, block_size=4, dtype="float16", seed=5).via(
    "mutant:plan_splits_for_planned_lengths mutant:run_reads_planned_lengths")  # planned at 10, 12, 22
@example(full=(70, 1), q_len=3, window=6, block_size=16, dtype="bfloat16", seed=4).via(
    "boundary: speculative rows and a window whose span the plan bounds by q_len + window")
@settings(max_examples=_scaled(6))
@given(full=st.lists(st.integers(1, 72), min_size=1, max_size=3).map(tuple), q_len=st.sampled_from([0, 2]),
       window=st.one_of(st.none(), st.integers(0, 40)), block_size=st.sampled_from([1, 4, 16]),
       dtype=st.sampled_from(["float16", "bfloat16", "float32"]), seed=st.integers(0, 2**16))
def test_one_plan_serves_runs_whose_lengths_grow(impl, device, full, q_len, window, block_size, dtype, seed):
    """An engine's decode loop: plan once with ``max_seq_len`` = the longest length any step will
    reach and lengths far shorter; then each step writes new lengths (growing, then one of them back
    to 0: a finished row padded) and a new q *into the same tensors* and runs again.
    Every run equals the oracle on the values it was given -- a run that used the planned lengths,
    or splits sized for them, misses the newer keys."""
    case = PagedCase(full, q_len, 4, 2, 16, block_size, None, dtype, seed, spare_cols=1)
    x = case.build(device)
    g = generator(seed)
    start = [int(torch.randint(0, n + 1, (), generator=g)) for n in full]
    q, seq_lens = x.q.clone(), x.seq_lens.clone()
    plan = impl.get("PagedAttentionPlan")()
    seq_lens.copy_(torch.tensor(start, dtype=seq_lens.dtype))
    plan.plan(q, x.k_cache, x.v_cache, x.block_tables, seq_lens, window=window, max_seq_len=max(full))
    steps = [start, [(a + b + 1) // 2 for a, b in zip(start, full)], list(full), [0] + list(full[1:])]
    for lens in steps:
        q.copy_(torch.randn(q.shape, generator=g).to(q.dtype))
        seq_lens.copy_(torch.tensor(lens, dtype=seq_lens.dtype))
        inputs = _prefix(x, lens, q)
        _check(impl, dataclasses.replace(case, window=window, seq_lens=tuple(lens)), device,
               inputs=dataclasses.replace(inputs, q=q, seq_lens=seq_lens),
               call=lambda *a, scale=None, window=None, return_lse=False: plan.run(*a, return_lse=return_lse))


def test_replan_for_another_batch(impl, device):
    """One plan object, re-planned: a plan for batch A, runs of A; a plan for batch B (other batch
    size, heads, block size, q_len, window), runs of B; a run with A's tensors after B's plan is
    refused (q's shape differs from the plan's: ValueError naming q), and a plan for A again
    serves A again."""
    a = PagedCase((30, 7), 0, 4, 2, 16, 4, None, "float16", 21, shared_blocks=1)
    b = PagedCase((5, 41, 0), 2, 8, 2, 32, 8, 6, "float16", 22)
    xa, xb = a.build(device), b.build(device)
    plan = impl.get("PagedAttentionPlan")()
    for case, x in ((a, xa), (b, xb), (a, xa)):
        plan.plan(*x.args, **case.kwargs)
        _check(impl, case, device, inputs=x, call=lambda *args, scale=None, window=None, return_lse=False:
               plan.run(*args, return_lse=return_lse))
        if case is b:
            with pytest.raises(ValueError, match=r"\bq\b"):
                plan.run(*xa.args)


def test_run_before_plan_is_refused(impl, device):
    """A run of a plan object that was never planned raises RuntimeError naming ``plan``."""
    x = PagedCase((5,), 0, 4, 2, 16, 4, None, "float16", 0).build(device)
    with pytest.raises(RuntimeError, match=r"\bplan\b"):
        impl.get("PagedAttentionPlan")().run(*x.args)


RUN_BAD = [
    Bad("q batch differs", _with(q=lambda kw: kw["q"][:1]), ValueError, ("q",)),
    Bad("q dtype differs", _with(q=lambda kw: kw["q"].to(torch.bfloat16)), TypeError, ("q",)),
    Bad("q rank 4 for a rank-3 plan", _with(q=lambda kw: kw["q"][:, None]), ValueError, ("q",)),
    Bad("k_cache with a block more", _with(k_cache=lambda kw: torch.cat([kw["k_cache"], kw["k_cache"][:1]]),
                                           v_cache=lambda kw: torch.cat([kw["v_cache"], kw["v_cache"][:1]])),
        ValueError, ("k_cache",)),
    Bad("v_cache dtype differs", _with(v_cache=lambda kw: kw["v_cache"].float()), TypeError, ("v_cache",)),
    Bad("block_tables a column wider", _with(block_tables=lambda kw: torch.cat(
        [kw["block_tables"], kw["block_tables"][:, :1]], 1)), ValueError, ("block_tables",)),
    Bad("int64 seq_lens for an int32 plan", _with(seq_lens=lambda kw: kw["seq_lens"].long()), TypeError, ("seq_lens",)),
    Bad("seq_lens not a tensor", _with(seq_lens=lambda kw: kw["seq_lens"].tolist()), TypeError, ("seq_lens",)),
]


@bad_cases(RUN_BAD)
def test_run_refuses_tensors_unlike_the_plan(impl, bad):
    """run checks what the host knows without a sync: a tensor whose shape, dtype or device differs
    from the planned one raises (TypeError for a dtype or a non-tensor, ValueError for a shape),
    naming the argument, before anything is computed and without modifying an argument. (Values
    -- lengths past max_seq_len, bad block ids -- are the caller's promise, unchecked.)"""
    plan = impl.get("PagedAttentionPlan")()
    plan.plan(**_valid())
    assert_rejects(plan.run, _valid, bad)


@bad_cases(BAD)
def test_plan_rejects_what_paged_attention_rejects(impl, bad):
    """plan validates completely: every bad input of paged_attention (the same table) raises the
    same kind of error naming the same argument, at plan time."""
    assert_rejects(lambda *a, **kw: impl.get("PagedAttentionPlan")().plan(*a, **kw), _valid, bad)


PLAN_BAD = [
    Bad("float max_seq_len", dict(max_seq_len=9.0), TypeError, ("max_seq_len",)),
    Bad("bool max_seq_len", dict(max_seq_len=True), TypeError, ("max_seq_len",)),
    Bad("negative max_seq_len", dict(max_seq_len=-1), ValueError, ("max_seq_len",)),
    Bad("max_seq_len below a length", dict(max_seq_len=8), ValueError, ("max_seq_len",)),
    Bad("max_seq_len past a table row's slots", lambda kw: {**kw, "max_seq_len": kw["block_tables"].shape[1] * 4 + 1},
        ValueError, ("max_seq_len",)),
]


@bad_cases(PLAN_BAD)
def test_plan_checks_max_seq_len(impl, bad):
    """``max_seq_len`` (the longest length a run of the plan may see) is an int, at least every
    planned length (here 9) and at most a table row's slots (width x block_size); else
    TypeError/ValueError naming it."""
    assert_rejects(lambda *a, **kw: impl.get("PagedAttentionPlan")().plan(*a, **kw), _valid, bad)


def test_a_failed_plan_leaves_the_previous_plan(impl, device):
    """A plan that raises changes nothing: the previous plan still runs, with its own scale and
    window (here scale 0.3, window 3; the failed plan asked for window 0 and a shorter table)."""
    case = PagedCase((21, 9), 0, 4, 2, 16, 4, 3, "float16", 31, scale=0.3)
    x = case.build(device)
    plan = impl.get("PagedAttentionPlan")()
    plan.plan(*x.args, **case.kwargs)
    with pytest.raises(ValueError):
        plan.plan(x.q, x.k_cache, x.v_cache, x.block_tables[:, :1], x.seq_lens, window=0)
    _check(impl, case, device, inputs=x, call=lambda *a, scale=None, window=None, return_lse=False:
           plan.run(*a, return_lse=return_lse))


@pytest.mark.gpu
@pytest.mark.parametrize("window", [None, 37])
def test_a_captured_run_replays_after_in_place_updates_gpu(impl, device, window):
    """What an engine does: plan once (max_seq_len = the table's slots), capture ``run`` in a CUDA
    graph, then per step write new q, lengths and tables into the captured tensors and replay.
    Capture fails if run syncs with the host; every replay equals the oracle on that step's values."""
    if device != "cuda":
        pytest.skip("CUDA graphs need a CUDA device")
    case = PagedCase((700, 1, 333, 1024), 0, 8, 2, 64, 16, None, "bfloat16", 41, spare_cols=0)
    x = case.build(device)
    q, lens, table = x.q.clone(), x.seq_lens.clone(), x.block_tables.clone()
    plan = impl.get("PagedAttentionPlan")()
    plan.plan(q, x.k_cache, x.v_cache, table, lens, window=window, max_seq_len=1024)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan.run(q, x.k_cache, x.v_cache, table, lens, return_lse=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = plan.run(q, x.k_cache, x.v_cache, table, lens, return_lse=True)
    g = generator(5)
    for step, new in enumerate(([700, 1, 333, 1024], [64, 0, 1000, 17], [1024, 1024, 1, 0])):
        new = [min(n, full) for n, full in zip(new, case.seq_lens)]
        q.copy_(torch.randn(q.shape, generator=g).to(q.dtype))
        lens.copy_(torch.tensor(new, dtype=lens.dtype))
        graph.replay()
        torch.cuda.synchronize()
        inputs = dataclasses.replace(_prefix(x, new, q), block_tables=table, seq_lens=lens)
        got = (out.clone(), lse.clone())
        _check(impl, dataclasses.replace(case, window=window, seq_lens=tuple(new)), device, inputs=inputs,
               call=lambda *a, scale=None, window=None, return_lse=False: got)


def test_a_plan_of_empty_sequences_over_an_empty_pool(impl, device):
    """A batch whose sequences are all empty over a cache of no blocks is valid (paged_attention
    accepts it: nothing is read), and so is its plan with max_seq_len 0 (given or by default): the run
    gives zeros and lse -inf. Only a max_seq_len > 0 needs a block to read, and is refused."""
    q = torch.randn(2, 4, 16, dtype=torch.float16, device=device)
    cache = torch.zeros(0, 4, 2, 16, dtype=torch.float16, device=device)
    tables = torch.zeros(2, 1, dtype=torch.int32, device=device)
    lens = torch.zeros(2, dtype=torch.int32, device=device)
    plan = impl.get("PagedAttentionPlan")()
    for max_seq_len in (None, 0):
        plan.plan(q, cache, cache, tables, lens, max_seq_len=max_seq_len)
        out, lse = plan.run(q, cache, cache, tables, lens, return_lse=True)
        assert isinstance(out, torch.Tensor) and out.shape == q.shape and bool((out == 0).all()), out
        assert bool(torch.isneginf(lse).all()), lse
    with pytest.raises(ValueError, match=r"\bmax_seq_len\b"):
        plan.plan(q, cache, cache, tables, lens, max_seq_len=1)
