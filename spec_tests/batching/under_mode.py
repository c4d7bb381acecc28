"""The batching tests' model runs, made where the implementation runs (``impl.call_in_process``).

Two reasons. ``forward_batch`` appends to the caches it is given, so it must run where the caches
live (a submission's worker: a cache sent there by value would come back unchanged). And the
bitwise property holds under ``batch_invariant.invariant_mode()``, which patches torch's kernels
in the process that enters it: the reference's mode is entered here, in the implementation's
process, around the implementation's calls and the alone runs they are compared with. The
functions return tensors and lists; the comparisons stay in the tests.
"""
from __future__ import annotations

import contextlib

import torch

from conformance.strategies import generator

_MODELS: dict = {}          # (shape, dtype) -> model, per process


def model(shape, dtype=None):
    """The reference model of ``shape`` (built once per process; the weights come from the seed)."""
    key = (shape, str(dtype))
    if key not in _MODELS:
        _MODELS[key] = shape.model(dtype)
    return _MODELS[key]


def _mode(invariant: bool):
    if not invariant:
        return contextlib.nullcontext()
    from reference.batch_invariant import invariant_mode
    return invariant_mode()


def row_tokens(shape, row) -> torch.Tensor:
    """The tokens of a ragged row ``(prefix, new, seed)``: prefix + new + 1 ids."""
    prefix, new, seed = row
    return torch.randint(0, shape.vocab_size, (prefix + new + 1,), generator=generator(seed))


@torch.no_grad()
def ragged(impl, shape, rows, invariant: bool, dtype=None) -> dict:
    """Two rounds of ``forward_batch`` over ragged rows: caches prefilled with each row's prefix
    (by the model alone), round 1 the row's ``new`` tokens, round 2 one more token each. Also the
    same tokens alone through ``model(tokens, cache)`` (per row: prefix, new, one more). Under the
    reference's invariant_mode() when ``invariant``."""
    forward_batch = impl.get("forward_batch")
    m = model(shape, dtype)
    toks = [row_tokens(shape, r) for r in rows]
    with _mode(invariant):
        caches, alone1, alone2 = [], [], []
        for (prefix, new, _), t in zip(rows, toks):
            c, ca = m.new_cache(1), m.new_cache(1)
            if prefix:
                m(t[None, :prefix], c)
                m(t[None, :prefix], ca)
            caches.append(c)
            alone1.append(m(t[None, prefix:prefix + new], ca)[0])
            alone2.append(m(t[None, prefix + new:], ca)[0])
        got1 = forward_batch(m, [t[p:p + n] for (p, n, _), t in zip(rows, toks)], caches)
        lens1 = [c.seq_len for c in caches]
        got2 = forward_batch(m, [t[p + n:] for (p, n, _), t in zip(rows, toks)], caches)
        lens2 = [c.seq_len for c in caches]
    return dict(got1=[g.clone() for g in got1], got2=[g.clone() for g in got2], alone1=alone1,
                alone2=alone2, lens1=lens1, lens2=lens2, tokens=toks)


@torch.no_grad()
def runs(impl, case, kind: str, invariant: bool, dtype=None) -> dict:
    """The implementation's run of ``case`` (``kind`` "continuous" or "static") and its run_alone of
    every request, under the reference's invariant_mode() when ``invariant``."""
    m = model(case.model, dtype)
    reqs = case.request_objects()
    name = {"continuous": "run_continuous", "static": "run_static"}[kind]
    with _mode(invariant):
        run = impl.get(name)(m, reqs, case.limit)
        alone = [impl.get("run_alone")(m, r) for r in reqs]
    return dict(tokens=[list(t) for t in run.tokens], logits=[l.clone() for l in run.logits],
                timeline=[tuple(s) for s in run.timeline], start=list(run.start), finish=list(run.finish),
                alone_tokens=[list(a.tokens[0]) for a in alone], alone_logits=[a.logits[0].clone() for a in alone])


class ListCache:
    """A KV cache that is not a KVCache: per layer, lists of appended chunks, concatenated on
    append. ``forward_batch`` must work with any object of this interface (the engine hands it
    paged views)."""

    def __init__(self, layers: int):
        self.k, self.v = [[] for _ in range(layers)], [[] for _ in range(layers)]

    @property
    def seq_len(self) -> int:
        return sum(x.shape[2] for x in self.k[0])

    def append(self, layer, k, v):
        self.k[layer].append(k.clone())
        self.v[layer].append(v.clone())
        return torch.cat(self.k[layer], dim=2), torch.cat(self.v[layer], dim=2)


@torch.no_grad()
def ragged_list_cache(impl, shape, rows) -> dict:
    """``ragged`` with ListCache caches for forward_batch (prefilled by replaying the prefix's K/V
    from a KVCache the model filled), under no mode."""
    forward_batch = impl.get("forward_batch")
    m = model(shape)
    toks = [row_tokens(shape, r) for r in rows]
    caches = []
    for (prefix, _, _), t in zip(rows, toks):
        c = ListCache(shape.n_layers)
        if prefix:
            kv = m.new_cache(1)
            m(t[None, :prefix], kv)
            for layer in range(shape.n_layers):
                c.append(layer, kv.k[layer, :, :, :prefix], kv.v[layer, :, :, :prefix])
        caches.append(c)
    got1 = forward_batch(m, [t[p:p + n] for (p, n, _), t in zip(rows, toks)], caches)
    got2 = forward_batch(m, [t[p + n:] for (p, n, _), t in zip(rows, toks)], caches)
    return dict(got1=[g.clone() for g in got1], got2=[g.clone() for g in got2],
                lens=[c.seq_len for c in caches])
