"""The autograd bridge: a call into the other process whose tensor arguments require grad is one
node of the caller's autograd graph.

The forward runs the call remotely (the callee records its own graph and returns a key);
``backward`` sends the output gradients with that key and gets the gradients with respect to the
tensors the caller sent. The peer is duck-typed: anything with ``request(op, body, opts, extra)``
and the ``_capture_sent`` slot of :class:`conformance.wire.Peer`.
"""
from __future__ import annotations

import torch

def grad_inputs(tree) -> list[torch.Tensor]:
    out, seen = [], set()

    def walk(x, depth=0):
        if depth > 4:
            return
        if isinstance(x, torch.Tensor):
            if x.requires_grad and id(x) not in seen:
                seen.add(id(x))
                out.append(x)
        elif type(x) in (list, tuple, set, frozenset):
            for y in x:
                walk(y, depth + 1)
        elif type(x) is dict:
            for y in x.values():
                walk(y, depth + 1)
    walk(tree)
    return out


def flat_tensors(tree) -> list[tuple[list, int]]:
    """Paths (container, index) of the tensors of a result (tuples become lists to be filled)."""
    out = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif type(x) in (list, tuple):
            for y in x:
                walk(y)
        elif type(x) is dict:
            for y in x.values():
                walk(y)
    walk(tree)
    return out


def replace_tensors(tree, new: dict):
    if isinstance(tree, torch.Tensor):
        return new.get(id(tree), tree)
    if type(tree) in (list, tuple):
        return type(tree)(replace_tensors(y, new) for y in tree)
    if type(tree) is dict:
        return {k: replace_tensors(v, new) for k, v in tree.items()}
    return tree


class _Bridge(torch.autograd.Function):
    @staticmethod
    def forward(ctx, state, *inputs):
        peer, target, name, args, kwargs = state["call"]
        opts = {"grad": True, "track": True, **({"own": True} if state["own"] else {})}
        value, more = peer.request("call", (target, name, args, kwargs), opts, extra=True)
        sent = state["sent_ref"].get("tensors", [])
        raw = [t for t in flat_tensors(value) if not any(t is s for s in sent)]  # new tensors only
        outs = [o.detach() for o in raw]
        value = replace_tensors(value, {id(o): n for o, n in zip(raw, outs)})
        mask = more.get("diff", [False] * len(outs))
        state["value"], state["outs"] = value, outs
        ctx.peer, ctx.key, ctx.mask = peer, more.get("key"), mask
        ctx.sent_ids = more.get("inputs", [])
        ctx.input_ids = [id(t) for t in inputs]
        ctx.sent = state["sent_ref"]
        ctx.mark_non_differentiable(*[o for o, m in zip(outs, mask) if not m])
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        if ctx.key is None:
            return (None,) + (None,) * len(ctx.input_ids)
        gin = ctx.peer.request("backward", (ctx.key, [g if m else None for g, m in zip(grads, ctx.mask)]))
        by_id = {}
        sent = ctx.sent.get("tensors", [])
        for idx, g in zip(ctx.sent_ids, gin):
            if idx < len(sent):
                by_id[id(sent[idx])] = g
        return (None,) + tuple(by_id.get(i) for i in ctx.input_ids)


def bridge_call(peer, target, name, args, kwargs, inputs, own: bool = False):
    sent_ref: dict = {}
    state = {"call": (peer, target, name, args, kwargs), "sent_ref": sent_ref, "own": own}
    peer._capture_sent = sent_ref
    try:
        outs = _Bridge.apply(state, *inputs)
    finally:
        peer._capture_sent = None
    value = state["value"]
    if not state["outs"]:
        return value
    return replace_tensors(value, {id(o): n for o, n in zip(state["outs"], outs)})
