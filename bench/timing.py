"""The one timing helper of every benchmark: CUDA events on a GPU, ``perf_counter`` on the CPU.

``time_ms(fn)`` times calls of ``fn`` one by one: warm-up calls first (compilation, allocator,
caches: at least one, more until ``warmup_ms`` have passed), then up to ``repeats`` timed calls,
fewer when the calls would take more than ``budget_ms`` in all (so a slow reference costs a few
calls and a fast kernel many). On CUDA each call sits between two recorded events; ``flush_l2``
writes a 256 MB buffer before each call (what ``triton.testing.do_bench`` does, so a memory-bound
kernel is measured reading from HBM, not L2), ``sync`` synchronizes before each call (the whole
call's latency, host work and launches included: the samplers' method). On the CPU each call is
timed with ``perf_counter`` and its process CPU time with ``process_time`` (on a shared machine
the wall time includes waiting for a core, the CPU time does not).

``compare(fns)`` times several providers of one case in alternating rounds (provider a, b, c,
then a, b, c again ...), so that a machine that speeds up or slows down during the run moves
them all alike; a provider's ``median_ms`` is the median of its rounds' medians.

A provider may need untimed work before every call (a fresh allocator for each run of a
workload): ``Prepared(before, run)`` times ``run(before())``, ``before()`` outside the clock.

``cuda_graph(fn)`` returns the replay of a CUDA graph of one call of ``fn`` (after two warm-up
calls on a side stream): the launches' host cost taken out.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

L2_FLUSH_BYTES = 256 << 20


@dataclass
class Timing:
    """The timed calls of one provider: every sample (ms), grouped by round."""
    rounds_ms: list[list[float]] = field(default_factory=list)
    cpu_rounds_ms: list[list[float]] = field(default_factory=list)

    @property
    def samples_ms(self) -> list[float]:
        return [t for r in self.rounds_ms for t in r]

    @property
    def median_ms(self) -> float:
        """The median of the rounds' medians (one round: the median of its samples)."""
        return statistics.median(statistics.median(r) for r in self.rounds_ms)

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    @property
    def cpu_median_ms(self) -> float | None:
        rounds = [r for r in self.cpu_rounds_ms if r]
        return statistics.median(statistics.median(r) for r in rounds) if rounds else None

    def to_json(self) -> dict:
        out = dict(median_ms=self.median_ms, min_ms=self.min_ms, calls=len(self.samples_ms),
                   rounds=len(self.rounds_ms))
        if len(self.samples_ms) <= 64:
            out["samples_ms"] = [round(t, 5) for t in self.samples_ms]
        if self.cpu_median_ms is not None:
            out["cpu_median_ms"] = self.cpu_median_ms
        return out


@dataclass(frozen=True)
class Prepared:
    """A call with untimed preparation: each timed call is ``run(before())``, ``before`` untimed."""
    before: Callable[[], object]
    run: Callable[[object], object]

    def __call__(self):
        return self.run(self.before())


def _is_cuda(device) -> bool:
    return str(device).startswith("cuda")


def _sync(device) -> None:
    if _is_cuda(device):
        import torch
        torch.cuda.synchronize()


def time_ms(fn: Callable[[], object], *, device="cpu", warmup_ms: float = 25.0, min_warmup: int = 1,
            budget_ms: float | None = 100.0, repeats: int = 1000, min_repeats: int = 1,
            flush_l2: bool | None = None, sync: bool = False, warm: bool = False) -> Timing:
    """Time calls of ``fn`` (module doc): ``min_warmup`` untimed calls, more until ``warmup_ms``
    have passed; then ``repeats`` timed calls, or as many as fit ``budget_ms`` (at least
    ``min_repeats``; None: no budget). ``warm``: no warm-up (a later round of compare).
    ``flush_l2`` defaults to True on CUDA. Returns a Timing of one round."""
    cuda = _is_cuda(device)
    flush_l2 = cuda if flush_l2 is None else flush_l2
    prepared = isinstance(fn, Prepared)
    est = None
    if not warm and (min_warmup > 0 or warmup_ms > 0):
        t_end = time.perf_counter() + warmup_ms / 1e3
        n = 0
        while n < max(min_warmup, 1) or (time.perf_counter() < t_end and n < 1000):
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            est = (time.perf_counter() - t0) * 1e3       # the last warm-up call's time
            n += 1
    if budget_ms is None:
        n = repeats
    else:
        if est is None:                                   # one call to estimate (not timed)
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            est = (time.perf_counter() - t0) * 1e3
        n = max(min_repeats, min(repeats, int(budget_ms / max(est, 1e-6))))
    n = max(n, 1)
    if cuda:
        import torch
        cache = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device) if flush_l2 else None
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        torch.cuda.synchronize()
        for i in range(n):
            arg = fn.before() if prepared else None
            if cache is not None:
                cache.zero_()
            if sync:
                torch.cuda.synchronize()
            starts[i].record()
            fn.run(arg) if prepared else fn()
            ends[i].record()
        torch.cuda.synchronize()
        return Timing([[s.elapsed_time(e) for s, e in zip(starts, ends)]], [[]])
    wall, cpu = [], []
    for _ in range(n):
        arg = fn.before() if prepared else None
        t0, c0 = time.perf_counter(), time.process_time()
        fn.run(arg) if prepared else fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return Timing([wall], [cpu])


def compare(fns: Mapping[str, Callable[[], object]], *, rounds: int = 1, **options) -> dict[str, Timing]:
    """Time every provider of ``fns`` in ``rounds`` alternating rounds of ``time_ms(fn, **options)``
    (the warm-up in the first round only). Returns provider -> Timing."""
    out = {name: Timing() for name in fns}
    for r in range(rounds):
        for name, fn in fns.items():
            t = time_ms(fn, warm=r > 0, **options)
            out[name].rounds_ms += t.rounds_ms
            out[name].cpu_rounds_ms += t.cpu_rounds_ms
    return out


def cuda_graph(fn: Callable[[], object]) -> Callable[[], object]:
    """The replay of a CUDA graph of one call of ``fn`` (two warm-up calls first, on a side stream,
    as graph capture requires). The returned callable holds ``fn``, and with it every object fn's
    closure holds: a graph keeps only the memory it allocated during capture, not what it reads
    or writes beside that. Before, only ``g.replay`` was returned, so a plan built in a builder
    (``lambda: plan.run(...)``) was freed after capture with its split workspace, and each replay
    wrote into freed memory: on an H100 the paged gate's planted run (a second plan of 11 splits)
    hit an illegal address once the caching allocator had released that memory."""
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()

    def replay(_keep_alive=fn):
        return g.replay()
    return replay
