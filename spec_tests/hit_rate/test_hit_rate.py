"""Hit-rate accounting (course 03.10): hits against brute force and closed forms, what holds as the
capacity grows, the token- and request-level rates, the prefill cost model, the scheduling
simulation, and bad input. See docs/hit_rate.md."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from reference.hit_rate import PrefillCost
from reference.radix import RadixCache
from spec_tests.hit_rate.oracles import attention_pairs, prefill_time_by_token, unbounded_hits
from spec_tests.hit_rate.strategies import BLOCK_SIZES, agent_trace, capacities, traces


def floor_to(n: int, block: int) -> int:
    return n - n % block


# --- hits --------------------------------------------------------------------------------------

@given(trace=traces, block_size=BLOCK_SIZES)
def test_unbounded_hits_match_brute_force(impl, trace, block_size):
    """With unbounded capacity (None, or one that holds every prompt) each request hits its longest
    common prefix with any earlier prompt, at most len - 1 tokens, in whole blocks."""
    replay = impl.get("replay")
    expect = unbounded_hits(trace, block_size)
    assert replay(trace, block_size=block_size) == expect
    everything = sum(len(p) for p in trace)
    assert replay(trace, block_size=block_size, capacity=everything) == expect


@pytest.mark.parametrize("n, length, block_size", [(1, 5, 1), (4, 9, 1), (3, 9, 4), (5, 8, 4), (2, 1, 1), (3, 3, 4)])
def test_identical_prompts_closed_form(impl, n, length, block_size):
    """n identical prompts of L tokens: the first misses, each later one hits floor_B(L - 1)
    tokens (never its last token): (n - 1) x floor_B(L - 1) hit tokens in all."""
    trace = [list(range(10, 10 + length))] * n
    hits = impl.get("replay")(trace, block_size=block_size)
    per = floor_to(length - 1, block_size)
    assert hits == [0] + [per] * (n - 1)
    rates = impl.get("hit_rates")(trace, hits)
    assert rates["hit_tokens"] == (n - 1) * per
    assert rates["prefill_tokens"] == n * length - (n - 1) * per
    assert rates["request_hit_rate"] == ((n - 1) / n if per else 0.0)
    assert math.isclose(rates["token_hit_rate"], (n - 1) * per / (n * length))


@given(agents=st.integers(1, 3), turns=st.integers(1, 4), system=st.integers(0, 9),
       turn_tokens=st.integers(1, 5), block_size=BLOCK_SIZES, interleave=st.booleans(),
       seed=st.integers(0, 2**16))
def test_agent_trace_closed_form(impl, agents, turns, system, turn_tokens, block_size, interleave, seed):
    """Agents sharing an S-token system prompt, turn k sending S + k x T tokens (its whole
    history), nothing evicted: an agent's first turn hits floor_B(S) if another agent came first,
    else 0; turn k > 1 hits floor_B(S + (k - 1) x T), the previous turn's whole prompt."""
    trace = agent_trace(agents=agents, turns=turns, system=system, turn_tokens=turn_tokens,
                        seed=seed, interleave=interleave)
    order = ([(a, k) for k in range(1, turns + 1) for a in range(agents)] if interleave
             else [(a, k) for a in range(agents) for k in range(1, turns + 1)])
    expect, seen = [], set()
    for a, k in order:
        if k == 1:
            expect.append(floor_to(system, block_size) if seen else 0)
        else:
            expect.append(floor_to(system + (k - 1) * turn_tokens, block_size))
        seen.add(a)
    assert impl.get("replay")(trace, block_size=block_size) == expect


@given(trace=traces, block_size=BLOCK_SIZES)
def test_capacity_zero_caches_nothing(impl, trace, block_size):
    """capacity=0: nothing stays cached, every request misses."""
    assert impl.get("replay")(trace, block_size=block_size, capacity=0) == [0] * len(trace)


@given(trace=traces, block_size=BLOCK_SIZES, capacity=st.integers(0, 40), more=st.integers(1, 12))
def test_hits_monotone_in_capacity(impl, trace, block_size, capacity, more):
    """LRU is a stack algorithm: for a fixed order, what a smaller cache holds a larger one holds
    too, so every request's hit is non-decreasing in the capacity, and never above unbounded."""
    replay = impl.get("replay")
    small = replay(trace, block_size=block_size, capacity=capacity)
    large = replay(trace, block_size=block_size, capacity=capacity + more)
    top = unbounded_hits(trace, block_size)
    assert all(s <= g <= t for s, g, t in zip(small, large, top)), (small, large, top)


def test_evicted_prefix_no_longer_hits(impl):
    """A capacity that holds one prompt: A, then B (disjoint) evicts A, so A again misses; with
    room for both it hits."""
    replay = impl.get("replay")
    a, b = [1, 2, 3, 4], [5, 6, 7, 8]
    assert replay([a, b, a], capacity=4) == [0, 0, 0]
    assert replay([a, b, a], capacity=8) == [0, 0, 3]
    assert replay([a, a, b, a], capacity=4) == [0, 3, 0, 0]


def test_eviction_is_least_recently_used(impl):
    """Room for two prompts: A, B, A again (a hit refreshes A), C: C evicts B, the least recently
    used, not A, the least recently cached."""
    replay = impl.get("replay")
    a, b, c = [1, 2, 3], [4, 5, 6], [7, 8, 9]
    assert replay([a, b, a, c, a, b], capacity=6) == [0, 0, 2, 0, 2, 0]


def test_shared_system_prompt_survives_under_lru(impl):
    """A system prompt S shared by every request stays cached while one-off suffixes churn
    through a cache that holds S plus one suffix: every request after the first hits S."""
    S = list(range(100, 116))
    trace = [S + [i, i + 1000, i + 2000, i + 3000] for i in range(6)]
    hits = impl.get("replay")(trace, capacity=len(S) + 4)
    assert hits == [0] + [len(S)] * 5


def test_extension_hits_the_whole_earlier_prompt(impl):
    """The whole prompt is cached, its last token included: a later prompt that extends it (the
    next turn of a conversation) hits every one of its tokens."""
    replay = impl.get("replay")
    assert replay([[1, 2, 3], [1, 2, 3, 4]]) == [0, 3]
    assert replay([[1, 2, 3, 4], [1, 2, 3, 4, 5, 6]], block_size=2) == [0, 4]


def test_evicts_exactly_the_excess(impl):
    """Over capacity by n tokens, evict(n): LRU whole leaves until n are freed, no more. Room for
    six: A (2 tokens), B (4), then C (2) frees exactly A, so B still hits; evicting one token more
    would also take B."""
    replay = impl.get("replay")
    a, b, c = [1, 2], [3, 4, 5, 6], [7, 8]
    assert replay([a, b, c, b], capacity=6) == [0, 0, 0, 3]
    assert replay([a, b, c, a], capacity=6) == [0, 0, 0, 0]


def test_cache_argument(impl):
    """``cache``: an empty cache with the radix contract is used as given (here a reference
    RadixCache of page size 2): the same hits as the default cache, and afterwards that cache holds
    the trace's whole pages (replay and simulate alike)."""
    replay = impl.get("replay")
    trace = [[1, 2, 3, 4], [1, 2, 3, 9], [5, 6], [1, 2, 3, 4]]
    given = RadixCache(page_size=2)
    assert replay(trace, block_size=2, cache=given) == replay(trace, block_size=2) == [0, 2, 0, 2]
    assert given.total == 8 and given.match_prefix([1, 2, 3, 9]).length == 4, "the given cache was not used"
    given = RadixCache(page_size=2)
    r = impl.get("simulate")([(0.0, p) for p in trace], block_size=2, cache=given)
    assert r["hits"] == [0, 2, 0, 2]
    assert given.total == 8 and given.match_prefix([5, 6]).length == 2, "simulate did not use the given cache"


def test_inserted_slots_are_fresh(impl):
    """Every prompt is inserted with fresh slot ids: no two cached tokens share a slot (replay and
    simulate alike, capacity 0 to unbounded), so a cache passed in never aliases two tokens' KV."""
    trace = [[1, 2, 3], [4, 5], [1, 2, 6, 7], [8]]
    for run in ("replay", "simulate"):
        given = RadixCache()
        if run == "replay":
            impl.get("replay")(trace, cache=given)
        else:
            impl.get("simulate")([(float(i), p) for i, p in enumerate(trace)], policy="lpm", cache=given)
        slots = {}
        for p in trace:
            m = given.match_prefix(p)
            for i, s in enumerate(m.slots):
                slots.setdefault(tuple(p[:i + 1]), int(s))
        assert given.total == len(slots) == 8, f"{run}: {given.total} cached tokens, {len(slots)} prefixes"
        assert len(set(slots.values())) == len(slots), f"{run}: two cached tokens share a slot: {slots}"


@pytest.mark.parametrize("policy", ["fcfs", "lpm"])
def test_simulate_capacity_zero_caches_nothing(impl, policy):
    """simulate with capacity 0 (legal: an int >= 0) caches nothing: every request misses, even an
    exact repeat."""
    r = impl.get("simulate")([(0.0, [1, 2, 3]), (0.0, [1, 2, 3]), (5.0, [1, 2, 3])], policy=policy, capacity=0)
    assert r["hits"] == [0, 0, 0]


# --- rates -------------------------------------------------------------------------------------

def test_rates_definitions(impl):
    """Token rate = hit tokens / prompt tokens; request rate = requests with >= 1 hit token /
    requests; an empty trace has both 0.0."""
    rates = impl.get("hit_rates")
    r = rates([[1] * 10, [1] * 10, [2] * 4, [3] * 6], [0, 8, 0, 5])
    assert r == {"requests": 4, "prompt_tokens": 30, "hit_tokens": 13, "prefill_tokens": 17,
                 "token_hit_rate": 13 / 30, "request_hit_rate": 0.5}
    assert rates([], []) == {"requests": 0, "prompt_tokens": 0, "hit_tokens": 0, "prefill_tokens": 0,
                             "token_hit_rate": 0.0, "request_hit_rate": 0.0}
    one = rates([[5, 6, 7]], [0])
    assert one["token_hit_rate"] == one["request_hit_rate"] == 0.0 and one["prefill_tokens"] == 3


def test_token_rate_can_be_above_or_below_request_rate(impl):
    """No order between the two rates in general: one long cached prompt among short misses puts
    the token rate above the request rate; short hits among long misses put it below."""
    rates = impl.get("hit_rates")
    above = rates([[1] * 1000, [2], [3], [4]], [999, 0, 0, 0])
    assert above["token_hit_rate"] > above["request_hit_rate"] == 0.25
    below = rates([[1, 1], [1, 1], [2] * 100, [3] * 100], [0, 1, 0, 0])
    assert below["token_hit_rate"] < below["request_hit_rate"] == 0.25


@given(trace=traces, block_size=BLOCK_SIZES, capacity=capacities)
def test_rate_relations(impl, trace, block_size, capacity):
    """What holds between the rates: hit tokens <= sum of (len - 1) over the requests that hit;
    token rate <= 1 - requests / prompt tokens; both rates are 0 together; for prompts of one
    length L, token rate <= request rate x (L - 1) / L."""
    hits = impl.get("replay")(trace, block_size=block_size, capacity=capacity)
    r = impl.get("hit_rates")(trace, hits)
    assert r["hit_tokens"] == sum(hits) and r["prefill_tokens"] == r["prompt_tokens"] - sum(hits)
    assert r["hit_tokens"] <= sum(len(p) - 1 for p, h in zip(trace, hits) if h >= 1)
    assert (r["token_hit_rate"] == 0) == (r["request_hit_rate"] == 0)
    assert r["request_hit_rate"] == (sum(h >= 1 for h in hits) / len(trace) if trace else 0.0)
    if trace:
        assert r["token_hit_rate"] <= 1 - len(trace) / r["prompt_tokens"] + 1e-12
        L = len(trace[0])
        if all(len(p) == L for p in trace):
            assert r["token_hit_rate"] <= r["request_hit_rate"] * (L - 1) / L + 1e-12


# --- the cost model ----------------------------------------------------------------------------

costs = st.builds(PrefillCost, a=st.floats(1e-4, 1e-1), b=st.floats(0, 1e-3), c=st.floats(0, 1e-6))


@given(new=st.integers(0, 300), cached=st.integers(0, 3000), cost=costs)
def test_prefill_time_sums_per_token_costs(impl, new, cached, cost):
    """prefill_time(n, k) = a + sum over the n new tokens of (b + c x keys it attends), the new
    token at position p attending p + 1 keys; 0 for n == 0."""
    got = impl.get("prefill_time")(new, cached, cost)
    assert math.isclose(got, prefill_time_by_token(new, cached, *cost), rel_tol=1e-9, abs_tol=1e-15)
    pairs = attention_pairs(new, cached)
    assert pairs == new * cached + new * (new + 1) // 2


def test_prefill_time_defaults(impl):
    """Omitted cached_tokens is 0 and omitted cost the documented 8B-on-H100 constants."""
    f = impl.get("prefill_time")
    d = PrefillCost()
    assert (d.a, d.b, d.c) == (4.8e-3, 3.2e-5, 1.1e-9)
    assert f(2048) == f(2048, 0, d) == pytest.approx(d.a + d.b * 2048 + d.c * 2048 * 2049 / 2)
    assert f(0) == 0.0


@given(length=st.integers(1, 5000), frac=st.floats(0, 1), cost=costs)
def test_time_saved_closed_form(impl, length, frac, cost):
    """Serving h of L tokens from cache saves b x h + c x h (h + 1) / 2 seconds: the dense cost
    of h tokens and the attention among them (quadratic); the per-pass a cancels."""
    h = min(int(frac * length), length - 1)
    saved = impl.get("time_saved")(length, h, cost)
    f = impl.get("prefill_time")
    assert math.isclose(saved, cost.b * h + cost.c * h * (h + 1) / 2, rel_tol=1e-7, abs_tol=1e-12)
    assert math.isclose(saved, f(length, 0, cost) - f(length - h, h, cost), rel_tol=1e-7, abs_tol=1e-12)


def test_time_saved_long_prompt_example(impl):
    """A 10k-token prompt with 9,984 tokens cached (default cost): 0.32 s of dense work plus
    0.055 s of attention saved, of 0.38 s; the attention share grows with the hit length."""
    saved = impl.get("time_saved")(10_000, 9_984)
    assert saved == pytest.approx(3.2e-5 * 9984 + 1.1e-9 * 9984 * 9985 / 2)
    assert 0.37 < saved < 0.38
    assert impl.get("time_saved")(10_000, 0) == 0.0
    # the largest legal hit, every token but the last
    assert impl.get("time_saved")(10, 9, PrefillCost(1.0, 0.5, 0.25)) == pytest.approx(0.5 * 9 + 0.25 * 45)


# --- the scheduling simulation -----------------------------------------------------------------

def _cost():
    return PrefillCost(a=1.0, b=0.5, c=0.0)   # a request of n new tokens takes 1 + n / 2 seconds


def test_fcfs_all_at_once_is_replay(impl):
    """All requests arriving at 0, FCFS, unbounded: served in list order with replay's hits,
    back to back; response = finish; throughput = requests / last finish."""
    sim = impl.get("simulate")
    trace = [[1, 2, 3, 4], [1, 2, 3, 5, 6], [7, 8], [1, 2, 3, 4]]
    r = sim([(0, p) for p in trace], cost=_cost())
    assert r["order"] == [0, 1, 2, 3]
    assert r["hits"] == impl.get("replay")(trace) == [0, 3, 0, 3]
    durations = [1 + 4 / 2, 1 + 2 / 2, 1 + 2 / 2, 1 + 1 / 2]
    ends = [sum(durations[:i + 1]) for i in range(4)]
    assert r["finish"] == pytest.approx(ends) and r["response"] == pytest.approx(ends)
    assert r["start"] == pytest.approx([0] + ends[:3])
    assert r["mean_response"] == pytest.approx(sum(ends) / 4)
    assert r["throughput"] == pytest.approx(4 / ends[-1])


def test_fcfs_follows_arrival_and_waits_when_idle(impl):
    """FCFS is by arrival time, not list position; an idle server waits for the next arrival;
    response = finish - arrival (queueing included)."""
    sim = impl.get("simulate")
    reqs = [(1.0, [1, 2]), (0.5, [3, 4]), (0.0, [5, 6, 7, 8, 9, 10]), (20.0, [7, 8])]
    r = sim(reqs, cost=_cost())                 # 1 + n / 2 s: 2 s each, 4 s for the third
    assert r["order"] == [2, 1, 0, 3]
    assert r["start"] == pytest.approx([6.0, 4.0, 0.0, 20.0])
    assert r["finish"] == pytest.approx([8.0, 6.0, 4.0, 22.0])
    assert r["response"] == pytest.approx([7.0, 5.5, 4.0, 2.0])
    assert r["mean_response"] == pytest.approx(18.5 / 4)
    assert r["throughput"] == pytest.approx(4 / 22.0)


def test_lpm_serves_longest_cached_prefix_first(impl):
    """With A's prefix cached and X (no match) waiting before Y (matches A), LPM serves Y first,
    FCFS X; ties (equal matches) go by arrival."""
    sim = impl.get("simulate")
    A = [1, 2, 3, 4, 5, 6]
    reqs = [(0.0, A), (0.5, [9, 9, 9, 9]), (0.6, A[:5] + [7]), (0.7, [8, 8])]
    lpm = sim(reqs, policy="lpm", cost=_cost())
    fcfs = sim(reqs, policy="fcfs", cost=_cost())
    assert fcfs["order"] == [0, 1, 2, 3]
    assert lpm["order"] == [0, 2, 1, 3]
    assert lpm["hits"] == [0, 0, 5, 0] == fcfs["hits"]
    assert lpm["response"][2] < fcfs["response"][2]


def test_lpm_ranks_by_what_would_be_served_ties_by_arrival(impl):
    """LPM ranks by the cached prefix of prompt[:-1] (what serving it would hit), not of the whole
    prompt; equal matches go by arrival, then index (not list position)."""
    sim = impl.get("simulate")
    A = [1, 2, 3, 4]
    # X = A: 3 servable cached tokens (4 if its last token counted); Y = A + [5, 6]: 4
    r = sim([(0.0, A), (0.1, list(A)), (0.2, A + [5, 6])], policy="lpm", cost=_cost())
    assert r["order"] == [0, 2, 1] and r["hits"] == [0, 3, 4], r
    B = [1, 2, 3, 4, 5, 6]
    # at t = 4 (B served): indices 3 and 4 tie at 3 cached tokens, 1 and 2 at 0; arrivals out of list order
    reqs = [(0.0, B), (0.7, [9, 9, 9]), (0.5, [8, 8, 8]), (0.9, B[:3] + [7]), (0.6, B[:3] + [5])]
    assert sim(reqs, policy="lpm", cost=_cost())["order"] == [0, 4, 3, 2, 1]
    assert sim(reqs, policy="fcfs", cost=_cost())["order"] == [0, 2, 4, 1, 3]


def test_lpm_probes_refresh_lru(impl):
    """LPM's ranking probes are accesses (SGLang): a prefix matched by a waiting request that is
    NOT chosen is refreshed, so the next eviction takes an older one. Room for 10 tokens: A, D, C
    cached in that order; at t = 8, X (matches A: 3) and Y (matches C: 4) wait; Y goes first and
    its insert evicts one leaf: D (A was just probed), so X still hits A's 3 tokens."""
    sim = impl.get("simulate")
    A, D, C = [1, 1, 1], [3, 3, 3], [2, 2, 2, 2]
    reqs = [(0.0, A), (0.1, D), (0.2, C), (5.5, A + [8]), (5.6, C + [5])]
    r = sim(reqs, policy="lpm", capacity=10, cost=_cost())
    assert r["order"] == [0, 1, 2, 4, 3], r
    assert r["hits"] == [0, 0, 0, 3, 4], r


def test_lpm_probes_in_index_order(impl):
    """LPM's probes are accesses made in index order (module doc), whatever the arrival order: of
    two waiting requests that are not chosen, the one of lower index is probed first, so its match
    is the less recently used. Room for 6 tokens: [1,1], [2,2], [3,3] cached; at t = 7.5 X = [1,1,5]
    (index 4), Y = [2,2,5] (index 5) and Z = [3,3,5] (index 6, the first arrival) wait, all matching
    2 tokens; Z is served and its new token evicts one leaf: X's [1,1] (probed before Y's [2,2]),
    so Y then hits 2 and X none."""
    sim = impl.get("simulate")
    reqs = [(0.0, [1, 1]), (0.0, [2, 2]), (0.0, [3, 3]), (6.0, [3, 3]),
            (6.3, [1, 1, 5]), (6.2, [2, 2, 5]), (6.1, [3, 3, 5])]
    r = sim(reqs, policy="lpm", capacity=6, cost=_cost())
    assert r["order"] == [0, 1, 2, 3, 6, 5, 4], r
    assert r["hits"] == [0, 0, 0, 1, 0, 2, 2], r


def test_lpm_keeps_hits_that_fcfs_evicts(impl):
    """A cache with room for one conversation, two interleaved conversations all waiting at 0:
    FCFS alternates and every request misses; LPM finishes one conversation's turns while it is
    cached: more hits, less time, higher throughput."""
    sim = impl.get("simulate")
    p = [[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, 3, 4, 10, 11], [5, 6, 7, 8, 12, 13]]
    reqs = [(0.0, x) for x in p]
    fcfs = sim(reqs, policy="fcfs", capacity=6, cost=_cost())
    lpm = sim(reqs, policy="lpm", capacity=6, cost=_cost())
    assert fcfs["order"] == [0, 1, 2, 3] and fcfs["hits"] == [0, 0, 0, 0]
    assert lpm["order"] == [0, 2, 1, 3] and lpm["hits"] == [0, 0, 4, 4]
    assert lpm["throughput"] > fcfs["throughput"] and lpm["mean_response"] < fcfs["mean_response"]


@given(trace=traces, block_size=BLOCK_SIZES, capacity=capacities, policy=st.sampled_from(["fcfs", "lpm"]))
def test_simulation_accounting(impl, trace, block_size, capacity, policy):
    """Whatever the policy: every request served once; each starts when the previous one finished
    or at its own arrival, whichever is later; each takes prefill_time(len - hit, hit); response
    = finish - arrival. FCFS hits are what replay gives for the service order (LPM's probes are
    accesses too, so under a capacity its LRU order may differ from a plain replay's)."""
    sim, replay = impl.get("simulate"), impl.get("replay")
    f = impl.get("prefill_time")
    reqs = [(float(i % 3), p) for i, p in enumerate(trace)]
    r = sim(reqs, policy=policy, block_size=block_size, capacity=capacity)
    assert sorted(r["order"]) == list(range(len(trace)))
    served = [trace[i] for i in r["order"]]
    if policy == "fcfs" or capacity is None:
        assert [r["hits"][i] for i in r["order"]] == replay(served, block_size=block_size, capacity=capacity)
    prev = 0.0
    for i in r["order"]:
        assert r["start"][i] == pytest.approx(max(prev, reqs[i][0]))
        took = f(len(trace[i]) - r["hits"][i], r["hits"][i])
        assert r["finish"][i] == pytest.approx(r["start"][i] + took)
        assert r["response"][i] == pytest.approx(r["finish"][i] - reqs[i][0])
        prev = r["finish"][i]


def test_empty_and_single_request(impl):
    """No requests: nothing served, mean response and throughput 0.0. One request: it misses,
    response = its prefill time, throughput = 1 / (finish - arrival)."""
    sim = impl.get("simulate")
    for policy in ("fcfs", "lpm"):
        r = sim([], policy=policy)
        assert r["order"] == [] and r["mean_response"] == 0.0 and r["throughput"] == 0.0
        one = sim([(3.0, [1, 2, 3])], policy=policy)
        t = impl.get("prefill_time")(3)
        assert one["hits"] == [0] and one["response"] == pytest.approx([t])
        assert one["throughput"] == pytest.approx(1 / t)
    assert impl.get("replay")([]) == [] and impl.get("replay")([[4]]) == [0]


# --- bad input ---------------------------------------------------------------------------------

REPLAY_VALID = dict(trace=[[1, 2, 3], [1, 2, 4]], block_size=1, capacity=None)
REPLAY_BAD = [
    Bad("trace a str", dict(trace="abc"), TypeError, ("trace",)),
    Bad("trace None", dict(trace=None), TypeError, ("trace",)),
    Bad("prompt not a list", dict(trace=[[1, 2], 3]), TypeError, ("trace",)),
    Bad("empty prompt", dict(trace=[[1, 2], []]), ValueError, ("trace",)),
    Bad("float token", dict(trace=[[1, 2.0]]), TypeError, ("trace",)),
    Bad("bool token", dict(trace=[[1, True]]), TypeError, ("trace",)),
    Bad("negative token", dict(trace=[[1, -1]]), ValueError, ("trace",)),
    Bad("token past 2**32", dict(trace=[[2**32]]), ValueError, ("trace",)),
    Bad("zero block_size", dict(block_size=0), ValueError, ("block_size",)),
    Bad("float block_size", dict(block_size=2.0), TypeError, ("block_size",)),
    Bad("negative capacity", dict(capacity=-1), ValueError, ("capacity",)),
    Bad("float capacity", dict(capacity=10.0), TypeError, ("capacity",)),
    Bad("bool capacity", dict(capacity=True), TypeError, ("capacity",)),
    Bad("cache not a cache", dict(cache=object()), TypeError, ("cache",)),
    Bad("cache not empty", lambda v: {**v, "cache": _filled_cache()}, ValueError, ("cache",)),
    Bad("cache of another page size", lambda v: {**v, "cache": RadixCache(page_size=2)}, ValueError, ("cache",)),
]


def _filled_cache():
    c = RadixCache()
    c.insert([1, 2], [0, 1])
    return c


@bad_cases(REPLAY_BAD)
def test_replay_rejects_bad_input(impl, bad):
    """replay: the trace is a list of non-empty token lists, block_size an int >= 1, capacity
    None or an int >= 0, cache an empty radix cache; the message names the argument."""
    assert_rejects(impl.get("replay"), REPLAY_VALID, bad)


RATES_VALID = dict(trace=[[1, 2, 3], [1, 2, 4]], hits=[0, 2])
RATES_BAD = [
    Bad("hits too short", dict(hits=[0]), ValueError, ("hits",)),
    Bad("hits not a list", dict(hits=2), ValueError, ("hits",)),
    Bad("hit past len - 1", dict(hits=[0, 3]), ValueError, ("hits",)),
    Bad("negative hit", dict(hits=[-1, 0]), ValueError, ("hits",)),
    Bad("float hit", dict(hits=[0, 2.0]), TypeError, ("hits",)),
    Bad("bad trace", dict(trace=[[1, 2, 3], "12"]), TypeError, ("trace",)),
]


@bad_cases(RATES_BAD)
def test_hit_rates_rejects_bad_input(impl, bad):
    """hit_rates: one int hit in [0, len - 1] per prompt; the message names the argument."""
    assert_rejects(impl.get("hit_rates"), RATES_VALID, bad)


PREFILL_VALID = dict(new_tokens=10, cached_tokens=5, cost=PrefillCost())
PREFILL_BAD = [
    Bad("negative new_tokens", dict(new_tokens=-1), ValueError, ("new_tokens",)),
    Bad("float new_tokens", dict(new_tokens=1.5), TypeError, ("new_tokens",)),
    Bad("negative cached_tokens", dict(cached_tokens=-3), ValueError, ("cached_tokens",)),
    Bad("cached_tokens -1", dict(cached_tokens=-1), ValueError, ("cached_tokens",)),
    Bad("None cached_tokens", dict(cached_tokens=None), TypeError, ("cached_tokens",)),
    Bad("cost a tuple", dict(cost=(1e-3, 1e-5, 1e-9)), TypeError, ("cost",)),
    Bad("zero a", dict(cost=PrefillCost(a=0.0)), ValueError, ("cost.a",)),
    Bad("negative b", dict(cost=PrefillCost(b=-1e-5)), ValueError, ("cost.b",)),
    Bad("nan c", dict(cost=PrefillCost(c=float("nan"))), ValueError, ("cost.c",)),
    Bad("str c", dict(cost=PrefillCost(c="1e-9")), TypeError, ("cost.c",)),
]


@bad_cases(PREFILL_BAD)
def test_prefill_time_rejects_bad_input(impl, bad):
    """prefill_time: token counts are ints >= 0; cost a PrefillCost of finite reals, a > 0,
    b, c >= 0; the message names the argument."""
    assert_rejects(impl.get("prefill_time"), PREFILL_VALID, bad)


SAVED_VALID = dict(prompt_tokens=10, hit_tokens=9)
SAVED_BAD = [
    Bad("zero prompt_tokens", dict(prompt_tokens=0, hit_tokens=0), ValueError, ("prompt_tokens",)),
    Bad("hit the last token", dict(hit_tokens=10), ValueError, ("hit_tokens",)),
    Bad("negative hit_tokens", dict(hit_tokens=-1), ValueError, ("hit_tokens",)),
    Bad("float hit_tokens", dict(hit_tokens=9.0), TypeError, ("hit_tokens",)),
    Bad("bool prompt_tokens", dict(prompt_tokens=True), TypeError, ("prompt_tokens",)),
    Bad("cost None", dict(cost=None), TypeError, ("cost",)),
]


@bad_cases(SAVED_BAD)
def test_time_saved_rejects_bad_input(impl, bad):
    """time_saved: 0 <= hit_tokens <= prompt_tokens - 1 (the last token is always computed)."""
    assert_rejects(impl.get("time_saved"), SAVED_VALID, bad)


SIM_VALID = dict(requests=[(0.0, [1, 2, 3]), (1, [1, 2, 4])], policy="lpm", block_size=1, capacity=None)
SIM_BAD = [
    Bad("requests a dict", dict(requests={0: [1]}), TypeError, ("requests",)),
    Bad("requests an empty dict", dict(requests={}), TypeError, ("requests",)),
    Bad("requests None", dict(requests=None), TypeError, ("requests",)),
    Bad("request not a pair", dict(requests=[(0.0, [1], 3)]), TypeError, ("requests",)),
    Bad("request a bare prompt", dict(requests=[[1, 2, 3]]), TypeError, ("requests",)),
    Bad("negative arrival", dict(requests=[(-1.0, [1])]), ValueError, ("arrival",)),
    Bad("inf arrival", dict(requests=[(float("inf"), [1])]), ValueError, ("arrival",)),
    Bad("str arrival", dict(requests=[("0", [1])]), TypeError, ("arrival",)),
    Bad("empty prompt", dict(requests=[(0.0, [])]), ValueError, ("requests",)),
    Bad("unknown policy", dict(policy="lru"), ValueError, ("policy",)),
    Bad("negative capacity", dict(capacity=-2), ValueError, ("capacity",)),
    Bad("capacity -1", dict(capacity=-1), ValueError, ("capacity",)),
    Bad("zero block_size", dict(block_size=0), ValueError, ("block_size",)),
    Bad("cost a dict", dict(cost={"a": 1}), TypeError, ("cost",)),
]


@bad_cases(SIM_BAD)
def test_simulate_rejects_bad_input(impl, bad):
    """simulate: (arrival, prompt) pairs with finite arrival >= 0, a known policy, the replay
    arguments' rules; the message names the argument."""
    assert_rejects(impl.get("simulate"), SIM_VALID, bad)
