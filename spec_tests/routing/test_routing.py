"""Pinned cases, the simulator's laws and bad input (course 06.07, 07.02-07.03)."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from reference.routing import POLICIES, ServiceCost

UNIT = ServiceCost(a=1.0, b=0.0, d=0.0)   # every request takes exactly 1 s


def observe(router) -> tuple:
    return (list(router.loads), list(router.hit_tokens), list(router.prompt_tokens), list(router.requests),
            dict(router.sessions))


# --- pinned cases -----------------------------------------------------------------------------
def test_round_robin_cycles_and_skips_rejected_calls(impl):
    """Round-robin: the k-th accepted route goes to k mod N; a rejected route does not count."""
    r = impl.get("Router")(3, "round_robin")
    got = [r.route(0, [1, 2]), r.route(1, [1, 2])]
    with pytest.raises(ValueError):
        r.route(1, [5])          # id 1 in flight
    with pytest.raises(TypeError):
        r.route(2, [1.5])
    got += [r.route(2, [1, 2]), r.route(3, [1, 2])]
    assert got == [0, 1, 2, 0], f"round-robin over 3 replicas routed {got}; want [0, 1, 2, 0]"


def test_least_loaded_follows_completions(impl):
    """Least-loaded: the smallest load, ties to the lowest index; a completion frees its replica."""
    r = impl.get("Router")(3, "least_loaded")
    got = [r.route(i, [i % 2, 9]) for i in range(4)]
    assert got == [0, 1, 2, 0], f"least-loaded routed {got}; want [0, 1, 2, 0]"
    assert r.complete(1) == 1
    assert r.route(4, [3]) == 1, f"after completing request 1 (replica 1), loads {list(r.loads)}: replica 1 is least loaded"


def test_session_sticks_moves_over_cap_and_survives_completion(impl):
    """Session affinity: a session stays on its replica across completed turns; over the cap it moves."""
    r = impl.get("Router")(2, "session_affinity", load_cap=1)
    assert r.route("t1", [7, 7, 1], "chat") == 0
    r.complete("t1")
    assert dict(r.sessions) == {"chat": 0}, f"a completed turn keeps its session: sessions {dict(r.sessions)}"
    assert r.route("t2", [7, 7, 1, 4, 2], "chat") == 0, "the next turn of the session goes back to replica 0"
    assert list(r.hit_tokens) == [3, 0], f"the second turn hits its first turn's 3 tokens: {list(r.hit_tokens)}"
    assert r.route("x", [5], "other") == 1, "a new session goes least-loaded"
    assert r.route("y", [6], None) in (0, 1)
    # loads now [1, 2] or [2, 1]: push replica 0 two above replica 1
    r2 = impl.get("Router")(2, "session_affinity", load_cap=1)
    r2.route(0, [1], "s")                      # s -> 0, loads [1, 0]
    r2.route(1, [2], "s")                      # 1 <= 0 + 1: stays, loads [2, 0]
    assert r2.route(2, [3], "s") == 1, "replica 0 is 2 above the least-loaded, over load_cap 1: the session moves"
    assert dict(r2.sessions) == {"s": 1}, f"the moved session's table entry: {dict(r2.sessions)}"


def test_cache_aware_takes_longest_prefix_within_the_cap(impl):
    """Cache-aware: the longest cached prefix among the replicas the cap allows; ties to the smaller load."""
    r = impl.get("Router")(3, "cache_aware", load_cap=1)
    assert r.route(0, [1, 2, 3, 4]) == 0          # no match anywhere: least loaded, lowest index
    assert r.route(1, [5, 6, 7]) == 1             # no match: replica 1 and 2 have load 0
    assert r.route(2, [1, 2, 3, 9]) == 0          # replica 0 caches 3 tokens, load 1 <= 0 + 1
    assert r.route(3, [1, 2, 8]) == 2, "replica 0 (load 2) is over the cap (least 0 + 1): least-loaded replica 2"
    r.complete(0)
    assert r.route(4, [1, 2, 3, 4, 5]) == 0, "replica 0 (load 1) is allowed again and caches 4 tokens"
    assert list(r.hit_tokens) == [3 + 4, 0, 0], f"hit tokens per replica {list(r.hit_tokens)}: replica 2 had cached nothing"


def test_cache_aware_without_cap_piles_onto_the_prefix(impl):
    """Cache-aware without a cap: every request sharing a prefix goes to the replica that has it."""
    r = impl.get("Router")(4, "cache_aware")
    got = [r.route(i, [9, 9, 9, i + 10]) for i in range(6)]
    assert got == [0] * 6, f"routed {got}: with no load cap the cached prefix wins over any load"


def test_block_size_counts_whole_blocks_in_tokens(impl):
    """Hits are tokens, whole blocks of them: with block_size 2, 5 shared tokens hit 4."""
    r = impl.get("Router")(1, "round_robin", block_size=2)
    r.route(0, [1, 2, 3, 4, 5, 6])
    r.route(1, [1, 2, 3, 4, 5, 7, 8])
    assert list(r.hit_tokens) == [4], f"hit tokens {list(r.hit_tokens)}: 5 shared tokens are 2 whole blocks = 4 tokens"


def test_capacity_is_per_replica(impl):
    """capacity bounds each replica's cache: 2 replicas of capacity 3 keep one 3-token prompt each."""
    r = impl.get("Router")(2, "round_robin", capacity=3)
    for i, p in enumerate([[1, 2, 3], [4, 5, 6], [1, 2, 3, 0], [4, 5, 6, 0]]):
        r.route(i, p)
    assert list(r.hit_tokens) == [3, 3], f"hit tokens {list(r.hit_tokens)}: each replica kept its 3-token prompt"


# --- the simulator ----------------------------------------------------------------------------
def test_simulate_pinned_queue(impl):
    """Unit service: two requests at 0 on one replica queue; a third at 2 starts at 2."""
    out = impl.get("simulate_routing")([(0, [1, 2], 0), (0, [1, 3], 0), (2, [1, 2, 4], 0)], num_replicas=1, cost=UNIT)
    assert list(out["start"]) == [0.0, 1.0, 2.0] and list(out["finish"]) == [1.0, 2.0, 3.0], out
    assert list(out["queueing"]) == [0.0, 1.0, 0.0] and math.isclose(out["mean_queueing"], 1 / 3), out
    assert list(out["hits"]) == [0, 1, 2] and out["hit_tokens"] == 3 and out["prompt_tokens"] == 7, out
    assert math.isclose(out["token_hit_rate"], 3 / 7) and math.isclose(out["makespan"], 3.0), out


def test_simulate_completes_at_equal_finish(impl):
    """A request finishing exactly when another arrives is complete: its replica's load is 0 again."""
    out = impl.get("simulate_routing")([(0, [1], 0), (1, [3], 0)], num_replicas=2, policy="least_loaded", cost=UNIT)
    assert list(out["replica"]) == [0, 0], (f"replicas {list(out['replica'])}: the first request finished at 1, when "
                                            "the second arrived: loads [0, 0], the tie goes to replica 0")


requests_st = st.lists(st.tuples(st.integers(0, 6).map(lambda t: t / 2), st.lists(st.integers(0, 2), min_size=1, max_size=4),
                                 st.integers(0, 3), st.sampled_from([None, "a", "b", 3])), max_size=10)


@settings(max_examples=30)
@given(requests=requests_st, n=st.integers(1, 3), policy=st.sampled_from(POLICIES),
       capacity=st.sampled_from([None, 0, 3]), cap=st.sampled_from([None, 0, 1]),
       cost=st.sampled_from([UNIT, ServiceCost(0.5, 0.25, 0.125), ServiceCost()]))
def test_simulate_law(impl, reference, requests, n, policy, capacity, cap, cost):
    """The simulator: the reference's output, and by definition: a replica serves one request at a time in
    routing order, start = max(arrival, previous finish), finish = start + a + b (len - hit) + d out, the
    per-replica and total counts add up."""
    kw = dict(num_replicas=n, policy=policy, capacity=capacity, load_cap=cap, cost=cost)
    got, want = impl.get("simulate_routing")(requests, **kw), reference.get("simulate_routing")(requests, **kw)
    where = f"simulate_routing({requests}, **{kw})"
    for k in ("replica", "hits", "replica_requests", "replica_hit_tokens", "replica_prompt_tokens"):
        assert list(got[k]) == list(want[k]), f"{where}: {k} {list(got[k])}; the reference: {list(want[k])}"
    order = sorted(range(len(requests)), key=lambda i: (requests[i][0], i))
    free = [0.0] * n
    for i in order:
        t, p, out_tokens, _ = requests[i]
        r, h = got["replica"][i], got["hits"][i]
        start = max(t, free[r])
        finish = start + cost.a + cost.b * (len(p) - h) + cost.d * out_tokens
        assert math.isclose(got["start"][i], start, abs_tol=1e-12) and math.isclose(got["finish"][i], finish, abs_tol=1e-12), (
            f"{where}: request {i} on replica {r}: start {got['start'][i]}, finish {got['finish'][i]}; "
            f"by the service model {start}, {finish}")
        assert math.isclose(got["queueing"][i], start - t, abs_tol=1e-12), f"{where}: queueing of {i}"
        free[r] = finish
    m = len(requests)
    assert got["prompt_tokens"] == sum(len(p) for _, p, _, _ in requests) and got["hit_tokens"] == sum(got["hits"]), where
    assert math.isclose(got["token_hit_rate"], got["hit_tokens"] / got["prompt_tokens"] if m else 0.0), where
    for k in ("mean_queueing", "max_queueing", "mean_response", "makespan"):
        assert math.isclose(got[k], want[k], abs_tol=1e-12), f"{where}: {k} {got[k]}; the reference: {want[k]}"
    for r in range(n):
        p = got["replica_prompt_tokens"][r]
        assert math.isclose(got["replica_hit_rate"][r], got["replica_hit_tokens"][r] / p if p else 0.0), where


# --- bad input --------------------------------------------------------------------------------
VALID_ROUTER = dict(num_replicas=2, policy="cache_aware", block_size=1, capacity=None, load_cap=None)
ROUTER_BAD = [
    Bad("num_replicas float", dict(num_replicas=2.0), TypeError, ("num_replicas",)),
    Bad("num_replicas bool", dict(num_replicas=True), TypeError, ("num_replicas",)),
    Bad("num_replicas zero", dict(num_replicas=0), ValueError, ("num_replicas",)),
    Bad("policy unknown", dict(policy="random"), ValueError, ("policy",)),
    Bad("policy not a str", dict(policy=1), TypeError, ("policy",)),
    Bad("block_size zero", dict(block_size=0), ValueError, ("block_size",)),
    Bad("block_size float", dict(block_size=1.0), TypeError, ("block_size",)),
    Bad("capacity negative", dict(capacity=-1), ValueError, ("capacity",)),
    Bad("capacity float", dict(capacity=2.5), TypeError, ("capacity",)),
    Bad("load_cap negative", dict(load_cap=-1), ValueError, ("load_cap",)),
    Bad("load_cap float", dict(load_cap=0.5), TypeError, ("load_cap",)),
]


@bad_cases(ROUTER_BAD)
def test_router_rejects_bad_arguments(impl, bad):
    assert_rejects(impl.get("Router"), VALID_ROUTER, bad)


ROUTE_BAD = [
    Bad("request_id float", dict(request_id=1.5), TypeError, ("request_id",)),
    Bad("request_id None", dict(request_id=None), TypeError, ("request_id",)),
    Bad("request_id in flight", dict(request_id="first"), ValueError, ("request_id",)),
    Bad("prompt empty", dict(prompt=[]), ValueError, ("prompt",)),
    Bad("prompt a str", dict(prompt="1 2"), TypeError, ("prompt",)),
    Bad("prompt float token", dict(prompt=[1, 2.0]), TypeError, ("prompt",)),
    Bad("prompt negative token", dict(prompt=[1, -1]), ValueError, ("prompt",)),
    Bad("prompt token 2**32", dict(prompt=[2**32]), ValueError, ("prompt",)),
    Bad("session float", dict(session=1.5), TypeError, ("session",)),
    Bad("session list", dict(session=["a"]), TypeError, ("session",)),
]


@pytest.mark.parametrize("policy", POLICIES)
@bad_cases(ROUTE_BAD)
def test_route_rejects_bad_input(impl, bad, policy):
    """A rejected route changes nothing: loads, hits, sessions; round-robin's next replica too."""
    r = impl.get("Router")(3, policy, load_cap=1)
    r.route("first", [1, 2, 3], "s")
    assert_rejects(r.route, dict(request_id="next", prompt=[1, 2, 4], session="s"), bad, state=lambda: observe(r))
    nxt = r.route("next", [1, 2, 4], "s")
    if policy == "round_robin":
        assert nxt == 1, f"after a rejected route, round-robin's second accepted request went to {nxt}; want 1"


COMPLETE_BAD = [
    Bad("request_id float", dict(request_id=0.0), TypeError, ("request_id",)),
    Bad("request_id not in flight", dict(request_id=5), ValueError, ("request_id",)),
    Bad("request_id completed", dict(request_id="done"), ValueError, ("request_id",)),
]


@bad_cases(COMPLETE_BAD)
def test_complete_rejects_bad_input(impl, bad):
    r = impl.get("Router")(2, "least_loaded")
    r.route("done", [1])
    r.complete("done")
    r.route(0, [2])
    assert_rejects(r.complete, dict(request_id=0), bad, state=lambda: observe(r))


VALID_SIM = dict(requests=[(0.0, [1, 2], 3), (0.5, [1, 2, 3], 1, "s")], num_replicas=2, policy="cache_aware",
                 block_size=1, capacity=None, load_cap=None, cost=ServiceCost())
SIM_BAD = [
    Bad("requests not a list", dict(requests=5), TypeError, ("requests",)),
    Bad("request of two fields", dict(requests=[(0.0, [1])]), TypeError, ("requests",)),
    Bad("arrival negative", dict(requests=[(-1.0, [1], 0)]), ValueError, ("arrival",)),
    Bad("arrival nan", dict(requests=[(float("nan"), [1], 0)]), ValueError, ("arrival",)),
    Bad("arrival a str", dict(requests=[("0", [1], 0)]), TypeError, ("arrival",)),
    Bad("prompt empty", dict(requests=[(0.0, [], 0)]), ValueError, ("prompt",)),
    Bad("output_tokens negative", dict(requests=[(0.0, [1], -1)]), ValueError, ("output_tokens",)),
    Bad("output_tokens float", dict(requests=[(0.0, [1], 1.0)]), TypeError, ("output_tokens",)),
    Bad("session float", dict(requests=[(0.0, [1], 1, 0.5)]), TypeError, ("session",)),
    Bad("num_replicas zero", dict(num_replicas=0), ValueError, ("num_replicas",)),
    Bad("policy unknown", dict(policy="lpm"), ValueError, ("policy",)),
    Bad("load_cap negative", dict(load_cap=-2), ValueError, ("load_cap",)),
    Bad("cost not a ServiceCost", dict(cost=(1.0, 2.0)), TypeError, ("cost",)),
    Bad("cost negative", dict(cost=ServiceCost(a=-1.0)), ValueError, ("cost.a",)),
]


@bad_cases(SIM_BAD)
def test_simulate_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("simulate_routing"), VALID_SIM, bad)
