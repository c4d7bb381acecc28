"""Expert parallelism (course 06.06): ep_moe_forward on W = 2 ranks of a real gloo process group
(forked processes on this machine, spec_tests/moe/cluster.py) equals the dense moe_forward over the
ranks' tokens concatenated in rank order, within the tolerance rule of the float64 oracle; the
capacity counts every rank's tokens, and the dropped set is exactly the dense rule's. One group is
spawned per example and runs several cases (about 50 ms a spawn)."""
from __future__ import annotations

import torch
from hypothesis import example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.strategies import seeds
from conformance.tolerance import assert_close_to_oracle
from spec_tests.moe import cluster, oracles
from spec_tests.moe.strategies import FACTORS, MoECase
from spec_tests.moe.test_moe import signature_layer


def _scaled(n: int) -> int:
    return max(1, round(n * settings().max_examples / 25))


@st.composite
def ep_runs(draw):
    """A (case, split) of 2 ranks: E = 2 x (1-3) experts, T 0-10 tokens split raggedly (a rank
    may have none)."""
    per = draw(st.integers(1, 3))
    experts = 2 * per
    tokens = draw(st.integers(0, 10))
    first = draw(st.integers(0, tokens))
    case = MoECase(tokens, draw(st.integers(1, 12)), draw(st.integers(1, 12)), experts,
                   draw(st.integers(1, min(3, experts))), draw(st.sampled_from(FACTORS)), draw(st.booleans()),
                   draw(st.sampled_from(("float32", "bfloat16", "float64"))), draw(seeds),
                   draw(st.sampled_from(("normal", "ties", "skewed"))))
    return case, (first, tokens - first)


def _ok(outs, runs):
    for rank, out in enumerate(outs):
        assert out["error"] is None, f"rank {rank} of {len(outs)} failed in ep_moe_forward:\n{out['error']}"
        assert isinstance(out["result"], list) and len(out["result"]) == len(runs), out["result"]


def check_runs(impl, reference, runs, **kw):
    outs = impl.call_in_process(cluster.ep_run, runs, **kw)
    _ok(outs, runs)
    for i, (case, split) in enumerate(runs):
        args = case.build()
        y = torch.cat([out["result"][i] for out in outs]) if all(
            isinstance(out["result"][i], torch.Tensor) for out in outs) else outs[0]["result"][i]
        oracle, kept, _ = oracles.moe(**args)
        ref = reference.get("moe_forward")(**args)
        name = f"ep_moe_forward over 2 ranks (tokens split {split}) of {case!r}, concatenated"
        assert_close_to_oracle(y, ref, oracle, name=name, inputs=args, floor_from=oracles.moe_magnitude(**args))
        for t, row in enumerate(kept):
            if not any(row):
                assert bool((y[t] == 0).all()), f"{name}: token {t} had every choice dropped; its output must be 0"


@example(runs=[(MoECase(7, 6, 5, 4, 2, 0.75, True, "float32", 21, "skewed"), (3, 4)),
               (MoECase(5, 4, 3, 2, 1, 0.5, False, "float32", 22, "skewed"), (2, 3)),
               (MoECase(4, 3, 3, 2, 1, 1.0, True, "float32", 25), (4, 0)),
               (MoECase(6, 5, 4, 4, 2, None, True, "bfloat16", 23), (2, 4)),
               (MoECase(0, 3, 3, 2, 1, 1.0, True, "float32", 24), (0, 0)),
               # float64, which an optimized implementation's kernels may refuse (their fallback path)
               (MoECase(5, 4, 3, 2, 1, None, True, "float64", 26), (2, 3))]).via(
    "mutant:ep_capacity_from_local_tokens mutant:ep_rank_offset_ignored")
@settings(max_examples=_scaled(2))
@given(runs=st.lists(ep_runs(), min_size=2, max_size=3))
def test_ep_equals_dense(impl, reference, runs):
    """Each rank's output is its rows of the dense layer over all tokens in rank order (ragged
    splits, a rank without tokens, no token at all, capacity drops counted over all ranks,
    bfloat16 without drops, float64), within the tolerance rule; fully dropped tokens exactly 0."""
    check_runs(impl, reference, runs)


def test_ep_dropped_set_is_the_dense_rule(impl):
    """With the signature experts (expert e writes only column e), the (token, expert) pairs that
    contribute on the two ranks are exactly the dense rule's kept set: the second rank's first
    choices queue behind the first rank's, before anyone's second choices."""
    ids, experts, factor = [[0, 1], [1, 0], [0, 1], [0, 3], [2, 0], [0, 2]], 4, 0.75
    runs = [(signature_layer(ids, experts, factor), (3, 3))]
    outs = impl.call_in_process(cluster.ep_run, runs)
    _ok(outs, runs)
    y = torch.cat([out["result"][0] for out in outs])
    cap = oracles.capacity(len(ids), experts, 2, factor)
    pos = oracles.positions(ids, experts)
    for t, row in enumerate(ids):
        want = {e for j, e in enumerate(row) if pos[t][j] < cap}
        got = {e for e in range(experts) if float(y[t, e]) != 0.0}
        assert got == want, (f"token {t} (rank {t // 3}, choices {row}): experts {sorted(got)} contributed; the dense "
                             f"rule over all 6 tokens (capacity {cap}) keeps {sorted(want)}")


def test_ep_with_a_subgroup(impl, reference):
    """group: the MoE runs on ranks 1 and 2 of a world of 3 (``dist.new_group([1, 2])``), rank 0
    idle: an implementation must use the group it is given (its size and its ranks)."""
    check_runs(impl, reference, [(MoECase(5, 4, 3, 4, 2, 1.0, True, "float32", 31, "skewed"), (2, 3))], idle=1)


def test_ep_needs_an_initialized_group(impl):
    """Without torch.distributed initialised (this process): RuntimeError."""
    import pytest
    kw = MoECase(2, 4, 3, 2, 1, None, True, "float32", 41).build()
    with pytest.raises(RuntimeError):
        impl.get("ep_moe_forward")(**kw)


# --- bad input: raised before anything is sent (a group of one rank) --------------------------------
def _valid() -> dict:
    return MoECase(3, 4, 3, 2, 1, 1.0, True, "float32", 51).build()


EP_BAD = [
    Bad("w_gate more experts than the logits' columns", lambda kw: {**kw, "w_gate": torch.cat([kw["w_gate"]] * 2),
                                                                   "w_up": torch.cat([kw["w_up"]] * 2),
                                                                   "w_down": torch.cat([kw["w_down"]] * 2)},
        ValueError, ("w_gate",)),
    Bad("k above E", dict(k=3), ValueError, ("k",)),
    Bad("bool k", dict(k=True), TypeError, ("k",)),
    Bad("zero capacity_factor", dict(capacity_factor=0.0), ValueError, ("capacity_factor",)),
    Bad("str capacity_factor", dict(capacity_factor="1"), TypeError, ("capacity_factor",)),
    Bad("int renormalize", dict(renormalize=1), TypeError, ("renormalize",)),
    Bad("nan logits", lambda kw: {**kw, "router_logits": kw["router_logits"].clone().fill_(float("nan"))},
        ValueError, ("router_logits",)),
    Bad("x rank 3", lambda kw: {**kw, "x": kw["x"][None]}, ValueError, ("x",)),
    Bad("w_down wrong shape", lambda kw: {**kw, "w_down": kw["w_down"][:, :-1]}, ValueError, ("w_down",)),
    Bad("w_up of another dtype", lambda kw: {**kw, "w_up": kw["w_up"].double()}, TypeError, ("w_up",)),
]


@bad_cases(EP_BAD)
def test_ep_rejects_bad_input(impl, bad):
    """Every check of moe_forward, before any message: on a group of one rank (which holds all E
    experts), each bad call raises the error naming the argument (``impl`` seen through
    cluster.OneRankGroup: its ep_moe_forward runs in that group, and what it raises comes back)."""
    impl = cluster.OneRankGroup(impl)
    assert_rejects(impl.get("ep_moe_forward"), _valid(), bad)
