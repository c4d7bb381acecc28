"""CUDA graphs of a launch schedule, captured once per key and replayed: ~14 Triton launches
(each ~15-40 us of host time, which the ~0.4 ms of GPU work cannot hide) become one replay. A
graph reads fixed buffers, so the inputs are copied in (the logits: one device copy) and the
outputs cloned out; each captured graph holds its buffers (the logits' size) until dropped. Per
thread and stream, so that concurrent calls never share the fixed buffers."""
from __future__ import annotations

import threading

import torch

_GRAPHS = threading.local()   # per thread: {key: (graph, static inputs, static outputs)}


def replay(key, run, inputs: list, *, keep: int = 8) -> tuple:
    """``run(*inputs)`` (a function of tensors, or None, that launches kernels and returns a tuple
    of tensors) through a CUDA graph: captured on the first call per (thread, stream, ``key``),
    after an eager warm-up run on the static copies of the inputs (it compiles every kernel and
    fills the launch cache); later calls copy ``inputs`` in and replay. ``key`` must tell apart
    everything that changes the launches (shapes, device, configuration, which inputs are None).
    At most ``keep`` graphs per thread: the oldest is dropped."""
    graphs = _GRAPHS.__dict__.setdefault("d", {})
    device = next(t.device for t in inputs if t is not None)
    key = (torch.cuda.current_stream(device).cuda_stream, key)
    entry = graphs.get(key)
    if entry is None:
        static = [None if t is None else t.clone() for t in inputs]
        run(*static)                                     # warm-up: compile, fill the launch cache
        torch.cuda.synchronize(device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = run(*static)
        while len(graphs) >= keep:
            graphs.pop(next(iter(graphs)))
        entry = graphs[key] = (graph, static, outs)
    graph, static, outs = entry
    for dst, src in zip(static, inputs):
        if dst is not None:
            dst.copy_(src)
    graph.replay()
    return tuple(t.clone() for t in outs)
