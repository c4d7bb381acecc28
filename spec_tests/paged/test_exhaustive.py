"""Bounded-exhaustive exploration of the block allocator (issue 22, item 1): every sequence of
calls up to a small depth over a small universe, each step compared with the reference up to a
consistent renaming of block ids (the contract leaves which free block a call takes open; see
``Renaming`` in test_state_machine.py).

The universes (``CONFIGS``): pools of 4 blocks of 1 slot and 3 blocks of 2 (default), and 4 x 2,
3 x 3 and 5 x 1 under ``thorough``; at most 3 live sequences (ids ``s0``, ``s1``, ``s2``; a new
sequence -- allocated or forked -- takes the smallest id not live, so ids are reused after
``free``). From every state it tries: ``allocate`` of a new sequence of every length from 0 to
one past the pool; ``append`` of 0, 1, ``block_size`` and ``block_size + 1`` tokens to each live
sequence; ``fork`` of each into a new id; ``free`` of each; and the reads and rejected calls:
``slot_mapping`` of every position, ``num_tokens``, ``sequences``, ``can_allocate`` of every length,
``ref_count`` of every block, an ``allocate`` of a live seq, a ``fork`` onto a live child or from
an unknown parent, an ``append``/``free``/``slot_mapping`` of an unknown seq, a position past the
end. Every call the reference rejects (out of blocks included) must be rejected with the same
error type, and the reads and rejected calls must leave the state exactly as it was (block ids
included). A call the reference accepts is compared by its result (tables, copy-on-write pairs,
slots, ref counts, through the renaming) and then the whole state (free count, live sequences,
lengths, tables, every ref count).

Symmetry and dedup: a state is keyed by the reference's state up to block renaming and sequence
ids (the smallest key over the orderings of the live sequences, blocks named by first
appearance); each distinct state is expanded once (breadth first), until no new state is reached:
every reachable state of the universe is visited. The implementation is replayed from scratch for
each transition (the recorded results are compared: it must be deterministic).

New states per depth on the reference, to the fixpoint (``python -m spec_tests.paged.test_exhaustive``):

    universe  states per depth                 states  calls checked  calls made  in-process
    4x1       1 5 13 30 23 18 3                93      3,504          11,857      0.1 s
    3x2       1 7 20 48 25 12                  113     4,737          15,364      0.2 s
    4x2 (thorough)  1 9 31 85 62 50 11         249     11,356         39,726      0.4 s
    3x3 (thorough)  1 10 34 87 35 30 3         200     9,190          28,424      0.3 s
    5x1 (thorough)  1 6 17 43 39 43 18 1       168     6,736          24,074      0.2 s

An isolated submission (about 0.2 ms a call on the 2-core machine) takes 2-4 s per universe.

Scratch bugs tried on copies of the reference (12 real, 2 equivalent): all 12 are caught here;
the random tests missed two of them on some seeds -- an ``append`` whose out-of-blocks check
counts the new tokens' blocks without the room left in the last block, and an ``append(seq, 0)``
that still copies a shared partial last block (planted: ``append_capacity_ignores_room``,
``append_zero_copies``). The two equivalent ones pass (``free`` pushing blocks first to last: which free block
comes next is not in the contract; the length recorded before a failing allocation's check:
never observable).
"""
from __future__ import annotations

import copy
import itertools
import time
from typing import NamedTuple

import pytest
from hypothesis import settings

from spec_tests.paged.test_state_machine import Renaming, State, observe

ERRORS = (TypeError, ValueError, KeyError)
SEQ_IDS = ("s0", "s1", "s2")
DEAD = "gone"   # never allocated
READS = ("slot_mapping", "num_tokens", "can_allocate", "ref_count", "sequences")


class Config(NamedTuple):
    num_blocks: int
    block_size: int
    max_live: int
    thorough_only: bool


CONFIGS = {
    "4x1": Config(4, 1, 3, False),
    "3x2": Config(3, 2, 3, False),
    "4x2": Config(4, 2, 3, True),
    "3x3": Config(3, 3, 3, True),
    "5x1": Config(5, 1, 3, True),
}


def call(obj, op: str, args: tuple) -> tuple:
    try:
        out = getattr(obj, op)(*args)
    except ERRORS as exc:
        return ("err", type(exc))
    if op == "append":
        out = [tuple(p) for p in out]
    elif op == "sequences":
        out = sorted(out, key=repr)
    return ("ok", out)


def fmt(outcome) -> str:
    return repr(outcome[1]) if outcome[0] == "ok" else outcome[1].__name__


def snippet(cfg: Config, path, last=None) -> str:
    lines = [f"a = BlockAllocator({cfg.num_blocks}, {cfg.block_size})"]
    lines += [f"a.{op}{tuple(args)!r}  # -> {fmt(out)}".replace(",)", ")") for op, args, out in path]
    if last is not None:
        lines.append(f"a.{last[0]}{tuple(last[1])!r}  # <- this call".replace(",)", ")"))
    return "\n    ".join(lines)


def canonical(state: State) -> tuple:
    """The state up to block renaming and sequence ids."""
    best = None
    for order in itertools.permutations(sorted(state.tables, key=repr)):
        names: dict = {}
        recs = tuple((state.lengths[s], tuple(names.setdefault(b, len(names)) for b in state.tables[s]))
                     for s in order)
        key = (state.free, recs)
        best = key if best is None or key < best else best
    return best


def ops_at(ref, cfg: Config) -> list:
    """Every call tried from the reference's state ``ref`` (the reads and rejected calls are told
    apart by running them on a copy of the reference)."""
    nb, bs = cfg.num_blocks, cfg.block_size
    live = sorted(ref.tables)
    new = next((s for s in SEQ_IDS if s not in ref.tables), None) if len(live) < cfg.max_live else None
    ops = []
    if new is not None:
        ops += [("allocate", (new, n)) for n in range(nb * bs + 2)]
    for s in live:
        ops += [("append", (s, n)) for n in sorted({0, 1, bs, bs + 1})]
        if new is not None:
            ops.append(("fork", (s, new)))
        ops.append(("free", (s,)))
        ops.append(("slot_mapping", (s, list(range(ref.lengths[s])))))
        ops.append(("slot_mapping", (s, [ref.lengths[s]])))
        ops.append(("num_tokens", (s,)))
    ops += [("can_allocate", (n,)) for n in range(nb * bs + 2)]
    ops += [("ref_count", (b,)) for b in range(nb)]
    ops.append(("sequences", ()))
    ops += [("append", (DEAD, 1)), ("free", (DEAD,)), ("fork", (DEAD, new or DEAD + "2")),
            ("slot_mapping", (DEAD, [0]))]
    if live:
        ops += [("allocate", (live[0], 0)), ("fork", (live[0], live[-1]))]
    return ops


class Explored(NamedTuple):
    states_per_depth: list
    transitions: int
    calls: int
    seconds: float


def explore(impl, reference, cfg: Config, depth: int | None = None) -> Explored:
    """Breadth first from the empty pool, ``depth`` calls deep (None: until no new state is
    reached -- every reachable state of the universe)."""
    nb, bs = cfg.num_blocks, cfg.block_size
    cls, ref_cls = impl.get("BlockAllocator"), reference.get("BlockAllocator")
    calls, transitions = 0, 0
    t0 = time.perf_counter()

    def fresh(path):
        nonlocal calls
        a = cls(nb, bs)
        for op, args, outcome in path:
            got = call(a, op, args)
            calls += 1
            assert got == outcome, (
                f"replaying the same calls gave another result: {op}{tuple(args)!r} -> {fmt(got)}, "
                f"earlier {fmt(outcome)} (the implementation must be deterministic)\n    " + snippet(cfg, path))
        return a

    def fail(msg, path, op, args):
        raise AssertionError(f"{msg}\n  reproduce:\n    {snippet(cfg, path, (op, args))}") from None

    def pair_state(ren: Renaming, got: State, want: State, where: str):
        assert got.free == want.free, f"{where}: {got.free} free blocks; the reference has {want.free}"
        assert set(got.tables) == set(want.tables) and got.lengths == want.lengths, (
            f"{where}: live sequences and lengths {got.lengths}; the reference has {want.lengths}")
        for s in sorted(want.tables, key=repr):
            assert len(got.tables[s]) == len(want.tables[s]), (
                f"{where}: block_table({s!r}) = {got.tables[s]}; the reference's has "
                f"{len(want.tables[s])} blocks: {want.tables[s]}")
            for i, (x, y) in enumerate(zip(got.tables[s], want.tables[s])):
                assert isinstance(x, int) and 0 <= x < nb, f"{where}: block_table({s!r})[{i}] = {x!r}"
                ren.pair(x, y, f"{where}: block_table({s!r})[{i}]")
        pairs = ren.pairs()
        for x in range(nb):
            expected = want.refs[pairs[x]] if x in pairs else 0
            assert got.refs[x] == expected, (
                f"{where}: ref_count({x}) = {got.refs[x]}; expected {expected} (tables {got.tables}; "
                f"the reference's {want.tables} with its refs {want.refs})")

    def check_result(ren: Renaming, op, args, got, want, where):
        if op == "allocate":
            assert isinstance(got, list) and len(got) == len(want), f"{where}: returned {got!r}; the reference {want!r}"
            for i, (x, y) in enumerate(zip(got, want)):
                ren.pair(x, y, f"{where}[{i}]")
        elif op == "append":
            assert len(got) == len(want), f"{where}: copy list {got!r}; the reference's {want!r}"
            for (xs, xd), (ys, yd) in zip(got, want):
                ren.pair(xs, ys, f"{where}: source of the copy ({xs}, {xd})")
                ren.pair(xd, yd, f"{where}: destination of the copy ({xs}, {xd})")
        elif op == "slot_mapping":
            assert isinstance(got, list) and len(got) == len(want), f"{where}: returned {got!r}; the reference {want!r}"
            for p, x, y in zip(args[1], got, want):
                assert isinstance(x, int) and 0 <= x < nb * bs and x % bs == y % bs, (
                    f"{where}: position {p} at slot {x!r}; the reference's slot {y} (offset {y % bs})")
                ren.pair(x // bs, y // bs, f"{where}: slot {x} of position {p}")
        elif op == "ref_count":
            b = ren.pairs().get(args[0])
            want_ref = ref_obs_now.refs[b] if b is not None else 0
            assert got == want_ref, f"{where}: returned {got!r}; expected {want_ref}"
        else:
            assert got == want, f"{where}: returned {got!r}; the reference returns {want!r}"

    def fork_renaming(ren: Renaming) -> Renaming:
        new = Renaming()
        new.a2b, new.b2a = dict(ren.a2b), dict(ren.b2a)
        return new

    root_ref = ref_cls(nb, bs)
    states = [((), root_ref, observe(cls(nb, bs), nb))]  # (path, reference, the implementation's observation)
    calls += 2 + nb
    seen = {canonical(observe(root_ref, nb))}
    per_depth = [1]
    while states and (depth is None or len(per_depth) <= depth):
        nxt = []
        for path, ref, impl_obs in states:
            ref_obs_now = observe(ref, nb)
            base = Renaming()
            pair_state(base, impl_obs, ref_obs_now, "state")
            static, moving = [], []
            for op, args in ops_at(ref, cfg):
                r = copy.deepcopy(ref)
                want = call(r, op, args)
                mutates = want[0] == "ok" and (op in ("allocate", "fork", "free") or (op == "append" and args[1] > 0))
                (moving if mutates else static).append((op, args, r, want))
            a = fresh(path)
            for j, (op, args, r, want) in enumerate(static + moving):
                if j > len(static):
                    a = fresh(path)
                if j == len(static):   # the reads and rejected calls changed nothing, block ids included
                    after = observe(a, nb)
                    calls += 2 + 2 * len(after.tables) + nb
                    if after != impl_obs:
                        raise AssertionError(
                            f"a read or a rejected call changed the state: {impl_obs} -> {after}\n  reproduce "
                            f"(then the reads and rejected calls {[(o, x) for o, x, _, _ in static]}):\n    "
                            + snippet(cfg, path))
                got = call(a, op, args)
                calls += 1
                transitions += 1
                where = f"{op}{tuple(args)!r}"
                try:
                    if got[0] != want[0] or (got[0] == "err" and not issubclass(got[1], want[1])):
                        raise AssertionError(f"{where}: {fmt(got)}; the reference: {fmt(want)}")
                    ren = fork_renaming(base)
                    if got[0] == "ok":
                        check_result(ren, op, args, got[1], want[1], where)
                    if j >= len(static):
                        after, want_after = observe(a, nb), observe(r, nb)
                        calls += 2 + 2 * len(after.tables) + nb
                        pair_state(ren, after, want_after, f"after {where}")
                        key = canonical(want_after)
                        if key not in seen:
                            seen.add(key)
                            nxt.append((path + ((op, args, got),), r, after))
                except AssertionError as exc:
                    fail(str(exc), path, op, args)
        states = nxt
        per_depth.append(len(nxt))
    return Explored(per_depth, transitions, calls, time.perf_counter() - t0)


def _universes() -> list:
    """The default universes, and the larger ones under ``thorough`` (the profile is chosen before
    the tests are collected)."""
    thorough = settings.get_current_profile_name().startswith("thorough")
    return [name for name, cfg in CONFIGS.items() if thorough or not cfg.thorough_only]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", _universes())
def test_exhaustive(impl, reference, name):
    """Every reachable state of the universe (module docstring), every call from it: results and
    whole state agree with the reference up to a renaming of block ids after every step; a
    rejected call changes nothing."""
    explore(impl, reference, CONFIGS[name])


if __name__ == "__main__":
    from conformance.loader import load_implementation
    ref = load_implementation("reference").of("paged")
    for name, cfg in CONFIGS.items():
        if True:
            r = explore(ref, ref, cfg)
            print(f"{name} {cfg}: new states per depth {r.states_per_depth}, "
                  f"{sum(r.states_per_depth)} states, {r.transitions} calls checked, {r.calls} calls made, "
                  f"{r.seconds:.1f} s")
