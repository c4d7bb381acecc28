"""Scheduler (course 04.04): the CPU cost of one step as the waiting queue grows, 10 -> 10,000.

A step is ``schedule()`` + ``update()`` (the engine's model is not run: the scheduler counts only).
The workloads keep the queue at its size: the running requests never finish (``max_tokens``
large), so every step decodes them and tries the waiting queue's front.

- ``seqs-bound``: chunked prefill (the default), ``max_num_seqs`` = 64 requests running, the
  other N wait: admission stops at the ``max_num_seqs`` check.
- ``budget-bound``: the 64 running decodes take the whole token budget (64): the waiting queue is
  not looked at.
- ``skip-scan``: chunked prefill off, 64 short requests decode, every waiting prompt is longer than
  the budget left: vLLM v1 (and this reference) *skip* each one, so a step looks at the whole
  waiting queue: O(N) by the policy, not by the data structure.

``python -m bench.cases.scheduler [--out docs/results/scheduler_step_cost.json]`` prints the
microseconds per step (median of 5 rounds of 200 steps) per workload and queue size;
``python -m bench run --concept scheduler`` times the same steps through the runner.
"""
from __future__ import annotations

import json
import platform
import statistics
import sys
import time

from bench.runner import Case, P
from reference import scheduler as ref

try:
    from optimized import scheduler as fast
except ImportError:  # no optimized counterpart
    fast = None

SIZES = (10, 100, 1000, 10_000)
RUNNING = 64
WORKLOADS = ("seqs-bound", "budget-bound", "skip-scan")


def build(module, workload: str, n_waiting: int):
    """A scheduler in its steady state: ``RUNNING`` requests decoding, ``n_waiting`` waiting."""
    many = 10 * (RUNNING + n_waiting)
    if workload == "seqs-bound":
        s = module.Scheduler(200_000, 16, 2048, RUNNING)
        requests = [([7] * 32, 1_000_000)] * (RUNNING + n_waiting)
    elif workload == "budget-bound":
        s = module.Scheduler(200_000, 16, RUNNING, many)
        requests = [([7], 1_000_000)] * (RUNNING + n_waiting)
    else:
        s = module.Scheduler(200_000, 16, 512, many, enable_chunked_prefill=False)
        requests = [([7] * 4, 500)] * RUNNING + [([9] * 500, 1)] * n_waiting   # 500 > 512 - 64
    for i, (prompt, max_tokens) in enumerate(requests):
        s.add_request(i, prompt, max_tokens)
    while len(s.running) < RUNNING:   # admit and prefill the running ones
        step(s)
    step(s)
    assert len(s.running) == RUNNING and len(s.waiting) == n_waiting, (len(s.running), len(s.waiting))
    return s


def step(s) -> None:
    o = s.schedule()
    s.update(o, {rid: 1 for rid in o.sampling})


def per_step_us(module, workload: str, n: int, steps: int = 200, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        s = build(module, workload, n)
        t0 = time.perf_counter()
        for _ in range(steps):
            step(s)
        times.append((time.perf_counter() - t0) / steps * 1e6)
        assert len(s.waiting) == n
    return statistics.median(times)


def curve(module) -> dict:
    return {w: {n: round(per_step_us(module, w, n), 2) for n in SIZES} for w in WORKLOADS}


CASES = [
    Case(f"step, {w}, {n} waiting", dict(workload=w, waiting=n),
         tuple(P(p) for p in (("optimized", "reference") if fast else ("reference",))),
         metric="ms", devices=("cpu",), tags=("smoke",) if n == 10 else ())
    for w in WORKLOADS for n in SIZES
]


def setup(case, device):
    return case.params["workload"], case.params["waiting"]


def check(problem, case, device) -> dict:
    return dict(ok=True, what="the spec (spec_tests/scheduler) proves the steps equal")


def _builder(module):
    def make(problem, case, device):
        s = build(module, *problem)
        return lambda: step(s)
    return make


BUILDERS = {"reference": _builder(ref)}
if fast is not None:
    BUILDERS["optimized"] = _builder(fast)


if __name__ == "__main__":
    out = {"command": "python -m bench.cases.scheduler --out docs/results/scheduler_step_cost.json",
           "machine": f"{platform.processor() or platform.machine()}, python {platform.python_version()}",
           "unit": "microseconds per step (schedule + update), median of 5 rounds of 200 steps",
           "running": RUNNING, "sizes": list(SIZES)}
    for name, module in (("reference", ref), ("optimized", fast)):
        if module is not None:
            out[name] = curve(module)
            print(name, json.dumps(out[name]))
    if "--out" in sys.argv:
        with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
            json.dump(out, f, indent=1)
