"""The scheduler's pinned cases and bad input (course 04.04).

- the policy on hand-made instances (each one a step of vLLM v1's ``Scheduler.schedule`` worked out
  by hand in its docstring): running first, a chunked prefill cut to the budget, whole prefills
  skipped past without chunked prefill, the newest preempted (itself included), recompute from the
  front of waiting, ``max_num_seqs``, prefix hits capped at ``len - 1``;
- bad input: the constructor, ``add_request`` and ``update`` reject malformed arguments with a
  ``TypeError`` / ``ValueError`` naming the argument and leave the queues, the pool and the pending
  output as they were (a rejected ``update`` is followed by the right one, which must work).
"""
from __future__ import annotations

import pytest

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.scheduler.driver import Config, Run, alone


def sched(impl, *args, **kw):
    return impl.get("Scheduler")(*args, **kw)


def steps(s, n=1, sampled_token=1):
    """Run ``n`` steps, every sampled token ``sampled_token``; returns the outputs as plain data."""
    outs = []
    for _ in range(n):
        o = s.schedule()
        outs.append((dict(o.num_scheduled_tokens), dict(o.num_computed_tokens), list(o.preempted)))
        s.update(o, {rid: sampled_token for rid in o.sampling})
    return outs


# -- the policy, by hand -------------------------------------------------------------------------
def test_running_first_then_chunked_admission(impl):
    """Budget 4: 'a' (3-token prompt) is admitted whole; next step 'a' decodes (1 token) before 'b'
    (5-token prompt) gets the 3 tokens left, a chunk; then 'a' 1 + 'b' 2 (its prompt done, it samples)."""
    s = sched(impl, 16, 2, 4, 4)
    s.add_request("a", [1, 2, 3], 5)
    assert steps(s)[0][0] == {"a": 3}
    s.add_request("b", [4, 4, 4, 4, 4], 5)
    o = s.schedule()
    assert list(dict(o.num_scheduled_tokens).items()) == [("a", 1), ("b", 3)]
    assert list(o.sampling) == ["a"]
    s.update(o, {"a": 0})
    o = s.schedule()
    assert list(dict(o.num_scheduled_tokens).items()) == [("a", 1), ("b", 2)]
    assert dict(o.num_computed_tokens) == {"a": 4, "b": 3} and list(o.sampling) == ["a", "b"]


def test_steps_are_numbered_from_one(impl):
    """``SchedulerOutput.step`` is 1 for the first ``schedule()`` and counts up by one a step, empty
    steps included (nothing waiting, nothing running)."""
    s = sched(impl, 16, 2, 4, 4)
    got = []
    for rid in ("a", "b"):
        s.add_request(rid, [1, 2, 3], 2)
        for _ in range(3):
            o = s.schedule()
            got.append(o.step)
            s.update(o, {r: 1 for r in o.sampling})
    assert got == [1, 2, 3, 4, 5, 6], f"steps numbered {got}; the contract's: [1, 2, 3, 4, 5, 6]"


def test_whole_prefill_is_passed_not_chunked(impl):
    """Without chunked prefill a prompt that does not fit the budget left waits (keeping its place at
    the front), and a later one that fits is admitted past it (vLLM v1)."""
    s = sched(impl, 16, 2, 6, 4, enable_chunked_prefill=False)
    s.add_request("a", [1, 1, 1], 3)
    steps(s)
    s.add_request("b", [2] * 6, 1)   # 6 > 6 - 1 (a's decode takes 1)
    s.add_request("c", [3] * 2, 2)
    o = s.schedule()
    assert list(dict(o.num_scheduled_tokens).items()) == [("a", 1), ("c", 2)]
    assert list(s.waiting) == ["b"] and list(s.running) == ["a", "c"]


def test_newest_running_is_preempted_and_recomputed(impl):
    """4 blocks of 1 token, budget 8: 'a' (2 tokens) and 'b' (2 tokens) fill the pool; at the next
    step 'a' needs a block: 'b', the newest, is preempted (front of waiting, 0 computed), not
    re-admitted in that step; later it recomputes its prompt and its generated token at once."""
    s = sched(impl, 4, 1, 8, 4)
    s.add_request("a", [1, 2], 3)
    s.add_request("b", [3, 4], 3)
    o = s.schedule()
    assert dict(o.num_scheduled_tokens) == {"a": 2, "b": 2}
    s.update(o, {"a": 0, "b": 0})
    o = s.schedule()  # a needs a 3rd block, none is free: the newest, b, is preempted
    assert list(dict(o.num_scheduled_tokens).items()) == [("a", 1)] and list(o.preempted) == ["b"]
    assert list(s.waiting) == ["b"] and list(s.running) == ["a"] and s.num_free_blocks == 1
    s.update(o, {"a": 0})
    o = s.schedule()  # a needs its 4th block: the pool has 1 free; b waits
    assert list(dict(o.num_scheduled_tokens).items()) == [("a", 1)]
    s.update(o, {"a": 0})  # a finishes (3 tokens)
    o = s.schedule()
    assert dict(o.num_scheduled_tokens) == {"b": 3} and dict(o.num_computed_tokens) == {"b": 0}
    assert list(o.token_ids["b"]) == [3, 4, 0] and list(o.finished) == ["a"]


def test_preemption_takes_newest_first_until_it_fits(impl):
    """The oldest running request preempts the newest, then the next newest, until its blocks fit."""
    s = sched(impl, 3, 1, 8, 4)
    for rid in ("a", "b", "c"):
        s.add_request(rid, [5], 3)
    o = s.schedule()
    assert dict(o.num_scheduled_tokens) == {"a": 1, "b": 1, "c": 1}
    s.update(o, {"a": 1, "b": 1, "c": 1})
    o = s.schedule()   # each needs a 2nd block, none is free: a preempts c, then b preempts itself
    assert list(dict(o.num_scheduled_tokens).items()) == [("a", 1)]
    assert list(o.preempted) == ["c", "b"] and list(s.waiting) == ["b", "c"]


def test_max_num_seqs_caps_running(impl):
    """Three short requests, max_num_seqs 2: the third waits until one finishes."""
    s = sched(impl, 16, 2, 16, 2)
    for rid in ("a", "b", "c"):
        s.add_request(rid, [1], 2)
    o = s.schedule()
    assert list(dict(o.num_scheduled_tokens)) == ["a", "b"] and list(s.waiting) == ["c"]
    s.update(o, {"a": 1, "b": 1}, stopped=["a"])
    o = s.schedule()
    assert list(dict(o.num_scheduled_tokens).items()) == [("b", 1), ("c", 1)]


def test_prefix_hit_capped_and_cached_after_update(impl):
    """Prefix caching, blocks of 2: 'b' shares 'a''s 4-token prompt; once 'a''s step is updated
    'b' hits 2 blocks but recomputes its last token (hit capped at len - 1 = 3 -> 2 tokens)."""
    s = sched(impl, 8, 2, 16, 4, enable_prefix_caching=True)
    s.add_request("a", [1, 2, 3, 4], 2)
    steps(s)
    s.add_request("b", [1, 2, 3, 4], 2)
    s.add_request("c", [1, 2, 3, 4, 5], 1)
    o = s.schedule()
    assert dict(o.num_computed_tokens) == {"a": 4, "b": 2, "c": 4}
    assert dict(o.num_scheduled_tokens) == {"a": 1, "b": 2, "c": 1}
    assert list(o.block_tables["b"])[0] == list(o.block_tables["a"])[0]


def test_a_hit_is_a_prefix_even_when_a_later_block_outlives_its_parent(impl):
    """A hit is the longest cached *prefix* of blocks: it stops at the first block not cached, even
    where a later block of the same chain is still cached. That happens after duplicate work: 'a'
    and 'b' start together on the same first block, so only 'a''s copy of it is cached ('b''s second
    block is cached, keyed by the whole prefix); 'c' then evicts 'a''s blocks and 'd', which shares
    'b''s first two blocks, must start from token 0 (a continue past the gap would hand 'd' 'b''s
    second block as its first)."""
    s = sched(impl, 8, 2, 16, 4, enable_prefix_caching=True)
    s.add_request("a", [1, 2, 3, 4, 5], 1)
    s.add_request("b", [1, 2, 7, 7, 5], 1)
    assert steps(s)[0][0] == {"a": 5, "b": 5}          # both whole, both finished: their blocks freed
    s.add_request("c", [9] * 9, 1)                       # five blocks: the two never used, then 'a''s
    assert steps(s)[0][:2] == ({"c": 9}, {"c": 0})
    s.add_request("d", [1, 2, 7, 7, 8], 1)
    o = s.schedule()
    assert dict(o.num_computed_tokens) == {"d": 0}, (
        f"'d' starts at {dict(o.num_computed_tokens)['d']} tokens: its first block [1, 2] was evicted, so no "
        f"block of it is a prefix hit (the cached [1, 2, 7, 7] follows a block that is gone)")
    assert dict(o.num_scheduled_tokens) == {"d": 5}


def test_skipped_requests_keep_their_place_at_the_head(impl):
    """Without chunked prefill a waiting request too long for the budget left is skipped, and the
    skipped go back to the *head* of the queue, ahead of those the step did not reach: budget 4,
    'x' (2) admitted, 'a' (3 > 2) skipped, 'c' (2) admitted, the budget spent before 'd' and 'e';
    waiting is then [a, d, e], so the next step admits 'a', not 'd' (two requests behind the gap:
    an insertion before the last one is caught too)."""
    s = sched(impl, 16, 2, 4, 4, enable_chunked_prefill=False)
    for rid, n, max_tokens in (("x", 2, 1), ("a", 3, 1), ("c", 2, 1), ("d", 3, 1), ("e", 3, 1)):
        s.add_request(rid, [5] * n, max_tokens)
    assert steps(s)[0][0] == {"x": 2, "c": 2}
    got = steps(s)[0][0]
    assert got == {"a": 3}, f"the step after the skip scheduled {got}: 'a' was skipped, so it is first in line"


def test_int_and_str_ids_of_equal_length_wait_together(impl):
    """Request ids may be ints or strs, mixed: waiting requests of the same length with ids of both
    types are scheduled like any others (an implementation that orders its queue by (length, id)
    would compare 7 with 'a' and raise). Budget 8 without chunked prefill: 'a' and 7 (3 tokens each)
    run, 'b' (3 > 2 left) waits for the next step."""
    s = sched(impl, 16, 2, 8, 4, enable_chunked_prefill=False)
    s.add_request("a", [1, 2, 3], 1)
    s.add_request(7, [4, 5, 6], 1)
    s.add_request("b", [1, 1, 1], 1)
    assert steps(s)[0][0] == {"a": 3, 7: 3}
    assert steps(s)[0][0] == {"b": 3}


def test_request_tokens_match_alone_under_pressure(impl):
    """Six requests through a 5-block pool with a 3-token budget: every request's tokens equal its
    tokens alone, and the toy engine's laws hold at every step."""
    cfg = Config(5, 2, 3, 3)
    run = Run(cfg.make(impl.get("Scheduler")), cfg)
    for i in range(6):
        run.add(f"r{i}", [i % 3, 1, (2 * i) % 3][: 1 + i % 3], 1 + (5 * i) % 4)
    for _ in range(200):
        if not run.s.has_unfinished_requests():
            break
        run.step()
    assert not run.s.has_unfinished_requests()
    for rid in run.prompts:
        assert run.out[rid] == alone(run.prompts[rid], run.max_tokens[rid])


# -- bad input -----------------------------------------------------------------------------------
VALID = dict(num_blocks=8, block_size=2, max_num_batched_tokens=8, max_num_seqs=4)

BAD_INIT = [
    Bad("num_blocks 0", dict(num_blocks=0), ValueError, ("num_blocks",)),
    Bad("num_blocks float", dict(num_blocks=8.0), TypeError, ("num_blocks",)),
    Bad("block_size 0", dict(block_size=0), ValueError, ("block_size",)),
    Bad("block_size bool", dict(block_size=True), TypeError, ("block_size",)),
    Bad("token budget 0", dict(max_num_batched_tokens=0), ValueError, ("max_num_batched_tokens",)),
    Bad("token budget None", dict(max_num_batched_tokens=None), TypeError, ("max_num_batched_tokens",)),
    Bad("max_num_seqs 0", dict(max_num_seqs=0), ValueError, ("max_num_seqs",)),
    Bad("max_num_seqs str", dict(max_num_seqs="4"), TypeError, ("max_num_seqs",)),
    Bad("chunked flag int", dict(enable_chunked_prefill=1), TypeError, ("enable_chunked_prefill",)),
    Bad("prefix flag None", dict(enable_prefix_caching=None), TypeError, ("enable_prefix_caching",)),
]


@bad_cases(BAD_INIT)
def test_constructor_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("Scheduler"), VALID, bad)


def observe(s) -> tuple:
    return (list(s.waiting), list(s.running), s.num_free_blocks, bool(s.has_unfinished_requests()))


def busy(impl, **kw):
    """A scheduler of 8 blocks of 2 tokens, budget 8: 'a' ran one step (it is running), 'w' waits
    (max_num_seqs 1)."""
    s = sched(impl, 8, 2, 8, 1, **kw)
    s.add_request("a", [1, 2, 3], 4)
    s.update(s.schedule(), {"a": 0})
    s.add_request("w", [5, 6], 2)
    return s


BAD_ADD = [
    Bad("float id", dict(request_id=1.5), TypeError, ("request_id",)),
    Bad("bool id", dict(request_id=True), TypeError, ("request_id",)),
    Bad("None id", dict(request_id=None), TypeError, ("request_id",)),
    Bad("duplicate running id", dict(request_id="a"), ValueError, ("request_id",)),
    Bad("duplicate waiting id", dict(request_id="w"), ValueError, ("request_id",)),
    Bad("prompt a str", dict(prompt="abc"), TypeError, ("prompt",)),
    Bad("prompt a set", dict(prompt={1, 2}), TypeError, ("prompt",)),
    Bad("empty prompt", dict(prompt=[]), ValueError, ("prompt",)),
    Bad("float token", dict(prompt=[1, 2.0]), TypeError, ("prompt",)),
    Bad("bool token", dict(prompt=(True,)), TypeError, ("prompt",)),
    Bad("negative token", dict(prompt=[3, -1]), ValueError, ("prompt",)),
    Bad("prompt longer than the pool", dict(prompt=[1] * 17), ValueError, ("prompt",)),
    Bad("prompt + max_tokens longer than the pool", dict(prompt=[1] * 16, max_tokens=2), ValueError, ("prompt",)),
    Bad("max_tokens 0", dict(max_tokens=0), ValueError, ("max_tokens",)),
    Bad("max_tokens -1", dict(max_tokens=-1), ValueError, ("max_tokens",)),
    Bad("max_tokens float", dict(max_tokens=2.0), TypeError, ("max_tokens",)),
    Bad("max_tokens None", dict(max_tokens=None), TypeError, ("max_tokens",)),
]


@bad_cases(BAD_ADD)
def test_add_request_rejects_bad_input(impl, bad):
    s = busy(impl)
    assert_rejects(s.add_request, dict(request_id="n", prompt=[1, 2], max_tokens=2), bad, state=lambda: observe(s))


def test_add_request_longer_than_budget_without_chunking(impl):
    """Without chunked prefill a request whose len(prompt) + max_tokens - 1 exceeds the token budget
    could never be recomputed in one step: rejected (``ValueError`` naming ``prompt``)."""
    s = busy(impl, enable_chunked_prefill=False)
    assert_rejects(s.add_request, dict(request_id="n", prompt=[1] * 8, max_tokens=2),
                   Bad("longer than the budget", {}, ValueError, ("prompt",)), state=lambda: observe(s))
    s.add_request("n", [1] * 8, 1)  # 8 tokens: fits the budget of 8


def pending(impl):
    """'a' (decoding) and 'b' (whole prompt this step) both sample; 'c' is a 7-token prompt cut to
    a chunk of 2 tokens by the budget of 6, so it does not sample."""
    s = sched(impl, 16, 2, 6, 4)
    s.add_request("a", [1, 2], 4)
    s.update(s.schedule(), {"a": 0})
    s.add_request("b", [3, 4, 5], 4)
    s.add_request("c", [6] * 7, 4)
    return s, s.schedule()


BAD_UPDATE = [
    Bad("sampled a list", dict(sampled=[1, 2]), TypeError, ("sampled",)),
    Bad("sampled misses an id", dict(sampled={"a": 1}), ValueError, ("sampled",)),
    Bad("sampled of a chunk", dict(sampled={"a": 1, "b": 1, "c": 1}), ValueError, ("sampled",)),
    Bad("sampled of an unknown id", dict(sampled={"a": 1, "b": 1, "zz": 1}), ValueError, ("sampled",)),
    Bad("sampled token float", dict(sampled={"a": 1, "b": 1.0}), TypeError, ("sampled",)),
    Bad("sampled token negative", dict(sampled={"a": -1, "b": 1}), ValueError, ("sampled",)),
    Bad("sampled token None", dict(sampled={"a": 1, "b": None}), TypeError, ("sampled",)),
    Bad("stopped did not sample", dict(stopped=["c"]), ValueError, ("stopped",)),
    Bad("stopped unknown", dict(stopped=["zz"]), ValueError, ("stopped",)),
    Bad("stopped an int", dict(stopped=3), TypeError, ("stopped",)),
    Bad("output None", dict(output=None), ValueError, ("output",)),
]


@bad_cases(BAD_UPDATE)
def test_update_rejects_bad_input(impl, reference, bad):
    """A rejected update changes nothing: the right update afterwards gives the reference's result."""
    s, o = pending(impl)
    assert_rejects(s.update, dict(output=o, sampled={"a": 1, "b": 1}, stopped=()), bad, state=lambda: observe(s))
    r, ro = pending(reference)
    assert list(s.update(o, {"a": 1, "b": 1}, ["b"])) == list(r.update(ro, {"a": 1, "b": 1}, ["b"]))
    assert observe(s) == observe(r)


def test_update_of_a_stale_output_rejected(impl):
    """An output already updated cannot be updated again (``ValueError`` naming ``output``), and
    ``schedule()`` twice without ``update()`` is a ``RuntimeError``; neither changes the queues."""
    s = sched(impl, 16, 2, 6, 4)
    s.add_request("a", [1, 2], 4)
    first = s.schedule()
    s.update(first, {"a": 0})
    second = s.schedule()
    assert_rejects(s.update, dict(output=first, sampled={"a": 0}, stopped=()),
                   Bad("stale output", {}, ValueError, ("output",)), state=lambda: observe(s))
    before = observe(s)
    with pytest.raises(RuntimeError):
        s.schedule()
    assert observe(s) == before
    s.update(second, {"a": 0})
