"""Bounded-exhaustive exploration of BranchKV: every fork/append/free sequence of a tiny universe.

The universes (``CONFIGS``): a pool of 3 blocks of 2 slots (default), 4 x 1, 4 x 2 and 3 x 3 under
``thorough``; one layer, one KV head of dimension 1 (a token's K is one number, every token
written a new one, V = -K); at most 3 live sequences (``s0``, ``s1``, ``s2``: a new sequence takes
the smallest id not live, so ids come back after ``free``). From every state it tries ``add`` of a
new sequence of 0, 1, block_size + 1, the pool's and one past the pool's tokens, ``append`` of 0,
1, block_size and block_size + 1 tokens to each live sequence, ``fork`` of each into a new id,
``free`` of each, and the rejected calls: ``add`` of a live id, ``fork`` onto a live id,
``append``, ``free``, ``read`` and ``fork`` of an id never added. The expected outcome of each call
is the block model's (spec_tests/parallel_sampling/oracles.py ``Branches``): which calls run out of
blocks (the error type of every rejected call), the copy list of an append, and the whole
observable state after it (``check_snapshot`` of test_branch_kv.py: every live sequence's K/V, the
block structure up to renaming, ref counts, blocks in use -- so a free gives back exactly the
blocks no other sequence holds). The rejected calls of a state run one after another on one
replay and the state is compared after the last (a call that changed it shows there); every call
that changes the state runs on its own replay.

States are deduplicated up to sequence ids, block renaming and value relabelling (the model's
tables and contents, canonical over the orders of the live sequences) and expanded breadth first
until no new state is reached: every reachable state of the universe. The plan (which calls, what
the model expects) is made here; the calls run where the implementation runs
(``impl.call_in_process``: a submission's worker, without a message per call), replayed from
scratch for each job (the implementation must be deterministic), and come back as plain data that
is compared here.

New states per depth on the reference, to the fixpoint, pinned in ``STATES``
(``python -m spec_tests.parallel_sampling.test_exhaustive``)::

    universe          states per depth                        states  calls
    3x2               1 5 16 43 49 37 4                        155     19,363
    4x1 (thorough)    1 4 11 26 27 21 3                         93     11,632
    4x2 (thorough)    1 5 18 58 105 131 74 8                   400     59,613
    3x3 (thorough)    1 5 19 54 88 95 66 30 8 2                368     48,758
"""
from __future__ import annotations

import copy
import itertools
import time
from typing import NamedTuple

import pytest
import torch
from hypothesis import settings

from spec_tests.parallel_sampling.oracles import Branches
from spec_tests.parallel_sampling.test_branch_kv import check_snapshot, snapshot

SEQ_IDS = ("s0", "s1", "s2")
NEVER = "gone"
SHAPE = (1, 1, 1)


class Config(NamedTuple):
    num_blocks: int
    block_size: int
    thorough_only: bool


CONFIGS = {"3x2": Config(3, 2, False), "4x1": Config(4, 1, True), "4x2": Config(4, 2, True),
           "3x3": Config(3, 3, True)}
# new states per depth (the reference, measured; pinned so the exploration is the one stated)
STATES = {"3x2": [1, 5, 16, 43, 49, 37, 4], "4x1": [1, 4, 11, 26, 27, 21, 3],
          "4x2": [1, 5, 18, 58, 105, 131, 74, 8], "3x3": [1, 5, 19, 54, 88, 95, 66, 30, 8, 2]}


def canonical(model: Branches) -> tuple:
    best = None
    for order in itertools.permutations(sorted(model.tables, key=repr)):
        blocks: dict = {}
        values: dict = {}
        key = tuple((tuple(blocks.setdefault(b, len(blocks)) for b in model.tables[s]),
                     tuple(values.setdefault(v, len(values)) for v in model.contents[s])) for s in order)
        best = key if best is None or key < best else best
    return best


def tensors(values: list) -> tuple[torch.Tensor, torch.Tensor]:
    k = torch.tensor(values, dtype=torch.float32).reshape(1, len(values), 1, 1)
    return k, -k


class Node(NamedTuple):
    path: tuple      # ((op, args), ...) where args hold plain values (token values, not tensors)
    model: Branches
    next_value: float


def ops_at(node: Node, cfg: Config) -> list:
    live = sorted(node.model.tables, key=repr)
    new = next((s for s in SEQ_IDS if s not in node.model.tables), None)
    bs = cfg.block_size
    ops = []
    if new is not None:
        pool = cfg.num_blocks * bs
        ops += [("add", (new, n)) for n in sorted({0, 1, bs, bs + 1, pool, pool + 1})]
    for s in live:
        ops += [("append", (s, n)) for n in sorted({0, 1, bs, bs + 1})]
        if new is not None:
            ops.append(("fork", (s, new)))
        ops.append(("free", (s,)))
    if live:
        ops += [("add", (live[0], 1)), ("fork", (live[0], live[-1]))]
    ops += [("append", (NEVER, 1)), ("free", (NEVER,)), ("read", (NEVER,)), ("fork", (NEVER, "x"))]
    return ops


def expect(model: Branches, cfg: Config, op: str, args: tuple):
    """The model's outcome: ("ok", copies made or blocks freed) or ("err", the error type)."""
    free = cfg.num_blocks - model.in_use()
    if NEVER in args[:1]:
        return ("err", KeyError)
    if op == "add":
        if args[0] in model.tables:
            return ("err", ValueError)
        return ("err", ValueError) if -(-args[1] // model.block_size) > free else ("ok", None)
    if op == "fork":
        return ("err", ValueError) if args[1] in model.tables else ("ok", None)
    if op == "append":
        return ("err", ValueError) if model.need(args[0], args[1]) > free else ("ok", None)
    return ("ok", model.own_blocks(args[0]))


def apply(kv, op: str, args: tuple, value: float):
    """Run one call on the implementation; returns (outcome, next value). The outcome is ("ok", the
    copy list of an append or None) or ("err", "KeyError" / "ValueError" / "TypeError")."""
    try:
        if op in ("add", "append"):
            out = getattr(kv, op)(args[0], *tensors([value + i for i in range(args[1])]))
            return ("ok", [tuple(c) for c in out] if op == "append" else None), value + args[1]
        getattr(kv, op)(*args)
        return ("ok", None), value
    except KeyError:
        return ("err", "KeyError"), value
    except ValueError:
        return ("err", "ValueError"), value
    except TypeError:
        return ("err", "TypeError"), value


def run_jobs(impl, cfg: Config, jobs: list) -> list:
    """Where the implementation runs (``impl.call_in_process``): for each job ``(path, ops)`` a fresh
    ``BranchKV`` replayed along ``path``, then the ``ops`` one after another. Returns, per job,
    ``(the ops' outcomes, a snapshot after the last)``: plain data, compared in the judge."""
    cls = impl.get("BranchKV")
    out = []
    for path, ops in jobs:
        kv, value = cls(cfg.num_blocks, cfg.block_size), 1.0
        for op, args in path:
            _, value = apply(kv, op, args, value)
        outcomes = []
        for op, args in ops:
            outcome, value = apply(kv, op, args, value)
            outcomes.append(outcome)
        out.append((outcomes, snapshot(kv, cfg.num_blocks)))
    return out


def snippet(cfg: Config, path, last=None) -> str:
    lines = [f"kv = BranchKV({cfg.num_blocks}, {cfg.block_size})"]
    value = 1.0
    for op, args in list(path) + ([last] if last else []):
        if op in ("add", "append"):
            vals = [value + i for i in range(args[1])]
            value += args[1] if last is None or (op, args) != last else 0
            lines.append(f"kv.{op}({args[0]!r}, k, -k)  # k = torch.tensor({vals}).reshape(1, {args[1]}, 1, 1)")
        else:
            lines.append(f"kv.{op}{tuple(args)!r}".replace(",)", ")"))
    if last:
        lines[-1] += "   # <- this call"
    return "\n    ".join(lines)


class Transition(NamedTuple):
    path: tuple
    op: tuple
    want: tuple          # expect()'s outcome
    model: Branches      # the model after the call
    copied: bool         # an append that copies on write


def plan(cfg: Config) -> tuple[list, list, list]:
    """Breadth first over the model alone: (jobs, the transitions in job order, new states per depth)."""
    root = Node((), Branches(cfg.block_size), 1.0)
    seen, frontier, per_depth = {canonical(root.model)}, [root], [1]
    jobs, transitions = [], []
    while frontier:
        nxt = []
        for node in frontier:
            ops = ops_at(node, cfg)
            still = [o for o in ops if expect(node.model, cfg, *o)[0] == "err"]
            groups = [still] + [[o] for o in ops if o not in still]
            for group in groups:
                if not group:
                    continue
                jobs.append((node.path, group))
                for op, args in group:
                    model = copy.deepcopy(node.model)
                    want = expect(model, cfg, op, args)
                    copied, value = False, node.next_value
                    if want[0] == "ok" and op in ("add", "append"):
                        values = [value + i for i in range(args[1])]
                        before = list(model.tables[args[0]]) if op == "append" else None
                        getattr(model, op)(args[0], values)
                        copied = op == "append" and model.tables[args[0]][:len(before)] != before
                        value += args[1]
                    elif want[0] == "ok" and op in ("fork", "free"):
                        getattr(model, op)(*args)
                    transitions.append(Transition(node.path, (op, args), want, model, copied))
                    if want[0] == "ok" and op != "read":
                        key = canonical(model)
                        if key not in seen:
                            seen.add(key)
                            nxt.append(Node(node.path + ((op, args),), model, value))
        if nxt:
            per_depth.append(len(nxt))
        frontier = nxt
    return jobs, transitions, per_depth


class Explored(NamedTuple):
    states_per_depth: list
    calls: int
    seconds: float


def explore(impl, cfg: Config) -> Explored:
    """Every transition of the plan, run where the implementation runs, checked here: each call's
    outcome (and an append's copy list), and the whole state after each job's last call (the
    calls that change nothing run one after another: a change would show there)."""
    t0 = time.perf_counter()
    jobs, transitions, per_depth = plan(cfg)
    results = impl.call_in_process(run_jobs, cfg, jobs)
    assert len(results) == len(jobs)
    calls = sum(len(path) + len(ops) for path, ops in jobs) + len(jobs) * (4 + cfg.num_blocks)
    it = iter(transitions)
    for (path, ops), (outcomes, snap) in zip(jobs, results):
        for (kind, result) in outcomes:
            t = next(it)
            where = snippet(cfg, t.path, t.op)
            name = t.want[1].__name__ if t.want[0] == "err" else None
            if kind != t.want[0] or (kind == "err" and result != name):
                raise AssertionError(f"{t.op[0]}{t.op[1]!r}: {'ok' if kind == 'ok' else result}; expected "
                                     f"{'ok' if t.want[0] == 'ok' else name}\n  reproduce:\n    {where}")
            if t.op[0] == "append" and kind == "ok":
                assert len(result) == int(t.copied), (f"append returned copies {result}; expected {int(t.copied)}"
                                                      f"\n  reproduce:\n    {where}")
        check_snapshot(snap, t.model, cfg.num_blocks, SHAPE, f"after the last call of\n    {where}\n  ")
    return Explored(per_depth, calls, time.perf_counter() - t0)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_reachable_state(impl, name):
    """Every reachable state of the universe, every call from it: outcomes, copy lists, the blocks a
    free gives back and the whole observable state are the block model's."""
    cfg = CONFIGS[name]
    if cfg.thorough_only and settings.get_current_profile_name() != "thorough":
        pytest.skip("a larger universe: the thorough profile runs it")
    got = explore(impl, cfg)
    assert got.states_per_depth == STATES[name], (
        f"{name}: new states per depth {got.states_per_depth}; the exploration pinned reaches {STATES[name]}")


if __name__ == "__main__":
    import reference.parallel_sampling as ref

    class _Ref:
        @staticmethod
        def get(name):
            return getattr(ref, name)

        def call_in_process(self, fn, *args):
            return fn(self, *args)
    for name, cfg in CONFIGS.items():
        e = explore(_Ref(), cfg)
        print(f"{name}: states per depth {e.states_per_depth} = {sum(e.states_per_depth)} states, "
              f"{e.calls:,} calls, {e.seconds:.1f} s in-process")
