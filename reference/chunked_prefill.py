"""Chunked prefill, SARATHI-style (course 04.05; chapter 9): a long prompt is cut into chunks that
share each step's token budget with the running decodes, so one long prompt no longer stalls
every other user's stream.

Two halves.

**The model level** -- :func:`chunked_prefill`. Prefilling a prompt of ``n`` tokens in chunks of
at most ``chunk_size`` (``ceil(n / chunk_size)`` forward passes; the last chunk holds what is
left, ``n - (k-1) * chunk_size`` tokens) computes the same function as one forward over the whole
prompt: each chunk's RoPE positions start at the cache's length and its queries attend causally
to every position already cached (the earlier chunks) and to itself, so the K/V written and the
logits of every position are those of one whole prefill -- equal in exact arithmetic, within
the tolerance rule in floating point (the chunks' matrix products round differently).

**The step level** -- :func:`plan_step`, :func:`step_time`, :func:`simulate_serving`. A step of an
engine runs one forward pass over at most ``token_budget`` tokens (vLLM's
``max_num_batched_tokens``). The SARATHI policy builds the step

    1. decode-first: every running decode request gets its 1 token (in the given order) while the
       budget lasts -- a decode is never left out to make room for a prefill (stall-free);
    2. then prefill chunks, first come first served: the oldest prefilling request gets
       ``min(remaining prompt tokens, budget left, chunk_size)`` tokens, then the next, ... until
       the budget or the prefills run out.

So ``sum(plan.values()) = min(token_budget, D + sum_i min(r_i, chunk_size))`` for ``D`` decodes
and remaining prompt tokens ``r_i``: the budget is never exceeded and never left idle while there
is work. A small budget keeps every step short (low TPOT for the decodes that share it) but
spreads a prompt over many steps (higher TTFT); a large one the reverse (docs/chunked_prefill.md
plots the curve).

The cost of a step (:func:`step_time`, a roofline): a forward pass reads every weight once
(``weights`` seconds) and computes ``per_token`` seconds of matrix products per token; whichever
is longer bounds the step, plus a fixed ``overhead`` (scheduling, launches):

    step_time(n) = overhead + max(weights, per_token * n)          for a step of n >= 1 tokens

``StepCost()``'s defaults are hit_rate's 8B Llama-3-shaped model on one H100 SXM: weights
``16 GB / 3.35 TB/s = 4.8e-3 s``, ``per_token = 2 x 8.0e9 FLOP / 4.9e14 FLOP/s = 3.2e-5 s``
(50 % of the 989 TFLOP/s dense bf16 peak), overhead 0: steps up to 150 tokens cost the same.
An estimate, not a measurement. Attention's cost (which grows with the context) and KV reads are
left out (the page says what this cannot see).

:func:`simulate_serving` runs a workload of ``(arrival, prompt_len, output_len)`` requests through
:func:`plan_step` under that cost and returns every output token's time, and each request's
TTFT/TPOT by :func:`reference.metrics.request_metrics`. Its model, stated in full:

    - the clock starts at the first arrival; steps run back to back; when nothing is running or
      waiting, the clock jumps to the next arrival;
    - at the start of a step, every request with ``arrival <= now`` joins the prefill queue, in
      arrival order (ties: workload order) -- FCFS is arrival order;
    - the step's plan is ``plan_step(decoding, [(id, remaining), ...], token_budget,
      chunk_size)``; it ends ``step_time(tokens)`` later, and every token is emitted at the end;
    - a scheduled decode emits one output token; a prefill whose last prompt token was scheduled
      emits the request's first output token (the logits of its last prompt position) and joins
      the end of the decoding list; a request is done after ``output_len`` tokens;
    - memory is unlimited: no KV budget, no preemption, no cap on running requests.

Choices the law leaves open (checked at token-exact only, ``@pytest.mark.choice``):
    - when the decodes alone exceed the budget, the first ``token_budget`` of them in the given
      order run (vLLM v1: the running queue's order); the law is only that ``min(D, budget)``
      decodes run, one token each, and no prefill token;
    - the plan's order: the dict lists the decodes first (given order), then the prefill chunks
      (FCFS order) -- the batch's order;
    - model level: the logits of *every* prompt position are returned (not only the last), and
      with no ``cache`` a new one of the model's ``max_seq_len`` is made.
The law: the K/V and logits of a whole prefill; the plan's token counts (decode-first, FCFS
greedy fill, capped by ``chunk_size``, work-conserving, within the budget); the simulation's
token times under the stated model.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import torch

from reference._checks import check_int, check_real, check_tensor, is_int
from reference.kv_bytes import KVCache
from reference.metrics import RequestMetrics, request_metrics

__all__ = ["chunked_prefill", "plan_step", "step_time", "simulate_serving"]  # the contract
__optional__: list[str] = []  # checked when an implementation provides them


# (functional form: the annotations stay types under ``from __future__ import annotations``)
StepCost = NamedTuple("StepCost", [("weights", float), ("per_token", float), ("overhead", float)])
StepCost.__new__.__defaults__ = (4.8e-3, 3.2e-5, 0.0)
StepCost.__doc__ = ("The step cost model's constants (seconds): ``weights`` to read the weights once, "
                    "``per_token`` of compute per token, ``overhead`` per step. step_time(n) = overhead + "
                    "max(weights, per_token * n). Defaults: an 8B model on one H100 (module docstring).")


@dataclass(frozen=True)
class Simulation:
    """What :func:`simulate_serving` returns. ``token_times[i]``: the emission times of request ``i``'s
    ``output_len`` tokens (workload order); ``metrics[i]``: ``request_metrics(arrival_i,
    token_times[i])``; ``step_tokens[s]``: the tokens step ``s`` ran; ``step_ends[s]``: when it
    ended."""

    token_times: tuple[tuple[float, ...], ...]
    metrics: tuple[RequestMetrics, ...]
    step_tokens: tuple[int, ...]
    step_ends: tuple[float, ...]


# --- the model level ---------------------------------------------------------------------------
KV_CACHE_ATTRIBUTES = ("k", "v", "lengths", "seq_len", "max_seq_len", "append")   # a KVCache's interface


def check_prompt(model, tokens, cache) -> None:
    """The whole prompt is checked before the first chunk runs, so that a bad token in a later
    chunk cannot leave the earlier chunks in the cache."""
    check_tensor("tokens", tokens, ndim=2, dims="batch, seq")
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must be an integer tensor, got {tokens.dtype}")
    if tokens.numel() == 0:
        raise ValueError(f"tokens must be non-empty (a prompt of at least one token), got shape {tuple(tokens.shape)}")
    vocab = model.config.vocab_size
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= vocab:
        raise ValueError(f"tokens: ids must be in [0, {vocab}), got values in [{lo}, {hi}]")
    start = 0
    if cache is not None:
        if not all(hasattr(cache, name) for name in KV_CACHE_ATTRIBUTES):   # what it has, not its class:
            raise TypeError(f"cache must be a KVCache (see model.new_cache), got {type(cache).__name__}")  # the model's own may be a proxy
        start = cache.seq_len
        if start + tokens.shape[1] > cache.max_seq_len:
            raise ValueError(f"cache: {tokens.shape[1]} prompt tokens after {start} cached exceed its "
                             f"max_seq_len={cache.max_seq_len}")
    if start + tokens.shape[1] > model.config.max_seq_len:
        raise ValueError(f"tokens: positions up to {start + tokens.shape[1] - 1} exceed the model's "
                         f"max_seq_len={model.config.max_seq_len}")


@torch.no_grad()
def chunked_prefill(model, tokens: torch.Tensor, chunk_size: int,
                    cache: KVCache | None = None) -> tuple[torch.Tensor, KVCache]:
    """Prefill ``tokens`` into ``cache`` in chunks of at most ``chunk_size`` tokens.

    Args:
        model: a :class:`reference.model.Transformer` (``model(tokens, cache)`` appends to the
            cache; ``model.config``; ``model.new_cache(batch)``).
        tokens: int (batch, n), n >= 1, ids in [0, vocab_size); not modified.
        chunk_size: an int >= 1. Chunks are ``tokens[:, 0:c], tokens[:, c:2c], ...``; the last
            holds what is left (a prompt that is not a multiple of ``c`` ends in a shorter chunk),
            and ``c >= n`` is one forward over the whole prompt.
        cache: a KV cache from ``model.new_cache(batch)`` that may already hold a prefix (the
            prompt then continues it: positions start at ``cache.seq_len``); None (the default)
            makes a new one of the model's ``max_seq_len``.

    Returns:
        ``(logits, cache)``: the logits of *every* prompt position, (batch, n, vocab) in the
        model's dtype (``logits[:, -1]`` predicts the first output token), and the cache, now
        holding ``cache.seq_len + n`` positions (the one passed in, appended to in place).
        Both equal one whole prefill's, ``model(tokens, cache)``, within the tolerance rule.

    Raises TypeError/ValueError naming the argument, before any chunk runs (the cache is then
    unchanged): ``tokens`` not a 2-d integer tensor, empty, with an id outside the vocabulary
    (in any chunk), or reaching past the model's ``max_seq_len``; ``chunk_size`` not an int >= 1
    (a bool is not an int); ``cache`` not a KVCache, or without room for the prompt, or of the
    wrong shape or dtype for the model (the model rejects it at the first chunk, before it
    appends).
    """
    check_int("chunk_size", chunk_size, minimum=1)
    check_prompt(model, tokens, cache)
    if cache is None:
        cache = model.new_cache(tokens.shape[0])
    n = tokens.shape[1]
    logits = []
    for begin in range(0, n, chunk_size):
        chunk = tokens[:, begin:begin + chunk_size]
        logits.append(model(chunk, cache=cache))     # positions cache.seq_len, ...
    return torch.cat(logits, dim=1), cache


# --- the step level ----------------------------------------------------------------------------
def _is_id(x) -> bool:
    return is_int(x) or isinstance(x, str)


def check_plan_inputs(decodes, prefills, token_budget, chunk_size) -> list[tuple]:
    check_int("token_budget", token_budget, minimum=1)
    check_int("chunk_size", chunk_size, minimum=1, allow_none=True)
    if not isinstance(decodes, (list, tuple)):
        raise TypeError(f"decodes must be a list or tuple of request ids, got {type(decodes).__name__}")
    if not isinstance(prefills, (list, tuple)):
        raise TypeError(f"prefills must be a list or tuple of (request_id, remaining) pairs, "
                        f"got {type(prefills).__name__}")
    for rid in decodes:
        if not _is_id(rid):
            raise TypeError(f"decodes: a request id must be an int or a str, got {rid!r}")
    pairs = []
    for item in prefills:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise TypeError(f"prefills must hold (request_id, remaining) pairs, got {item!r}")
        rid, remaining = item
        if not _is_id(rid):
            raise TypeError(f"prefills: a request id must be an int or a str, got {rid!r}")
        if not is_int(remaining):
            raise TypeError(f"prefills: remaining tokens of {rid!r} must be an int, got {remaining!r}")
        if remaining < 0:
            raise ValueError(f"prefills: remaining tokens of {rid!r} must be >= 0, got {remaining}")
        pairs.append((rid, remaining))
    if len(set(decodes)) != len(decodes):
        raise ValueError(f"decodes: duplicate request ids in {list(decodes)!r}")
    ids = [rid for rid, _ in pairs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"prefills: duplicate request ids in {ids!r}")
    both = set(decodes) & set(ids)
    if both:
        raise ValueError(f"prefills: request ids {sorted(map(repr, both))} are also in decodes")
    return pairs


def plan_step(decodes: Sequence, prefills: Sequence[tuple], token_budget: int,
              chunk_size: int | None = None) -> dict:
    """The tokens each request runs this step, SARATHI's decode-first, stall-free policy.

    Args:
        decodes: the running decode requests' ids (ints or strs), in running order; each needs 1.
        prefills: ``(request_id, remaining)`` pairs of the prefilling requests in FCFS order
            (oldest first), ``remaining`` the prompt tokens not yet computed (an int >= 0; 0 is
            legal and gets nothing).
        token_budget: the most tokens of the step, an int >= 1.
        chunk_size: the most prompt tokens one request gets in a step, an int >= 1; None (the
            default): no cap but the budget.

    Returns:
        ``{request_id: tokens}`` with every scheduled request (tokens >= 1) and no other: first
        the decodes, 1 token each, in the given order, while the budget lasts; then each prefill
        in FCFS order gets ``min(remaining, budget left, chunk_size)`` tokens. The total is
        ``min(token_budget, len(decodes) + sum(min(remaining, chunk_size)))``: at most the
        budget, and no budget is left idle while a request could use it. No prefill token is
        scheduled while a decode waits. (Choices: which decodes run when they alone exceed the
        budget -- the first ones; the dict's order -- decodes, then prefills.)

    Raises TypeError/ValueError naming the argument: ``token_budget`` not an int >= 1,
    ``chunk_size`` not None or an int >= 1, ``decodes``/``prefills`` not a list or tuple, an id
    that is not an int or str (a bool is not an int), a pair that is not ``(id, remaining)``, a
    ``remaining`` that is not an int >= 0, a duplicate id (naming the list it is in; an id in
    both lists names ``prefills``). The inputs are never modified.
    """
    pairs = check_plan_inputs(decodes, prefills, token_budget, chunk_size)
    plan, budget = {}, token_budget
    for rid in decodes:                          # 1. decode-first: never stalled by a prefill
        if budget == 0:
            break
        plan[rid] = 1
        budget -= 1
    for rid, remaining in pairs:                 # 2. prefill chunks, first come first served
        if budget == 0:
            break
        n = min(remaining, budget)
        if chunk_size is not None:
            n = min(n, chunk_size)
        if n > 0:
            plan[rid] = n
            budget -= n
    return plan


def check_cost(cost) -> StepCost:
    """A ``StepCost`` (any object with attributes ``weights``, ``per_token``, ``overhead``) of
    finite reals >= 0."""
    if not all(hasattr(cost, k) for k in StepCost._fields):
        raise TypeError(f"cost must be a StepCost (attributes weights, per_token, overhead), got {type(cost).__name__}")
    return StepCost(*(check_real(f"cost.{k}", getattr(cost, k), minimum=0.0) for k in StepCost._fields))


def step_time(tokens: int, cost: StepCost = StepCost()) -> float:
    """Seconds of a step of ``tokens`` tokens: ``cost.overhead + max(cost.weights, cost.per_token
    * tokens)`` (module doc). ``tokens`` an int >= 1; ``cost`` a StepCost of finite reals >= 0
    (TypeError/ValueError naming ``tokens`` or the field, ``cost.weights`` ...)."""
    check_int("tokens", tokens, minimum=1)
    cost = check_cost(cost)
    return cost.overhead + max(cost.weights, cost.per_token * tokens)


def check_workload(workload) -> list[tuple[float, int, int]]:
    if not isinstance(workload, (list, tuple)):
        raise TypeError(f"workload must be a list or tuple of (arrival, prompt_len, output_len), "
                        f"got {type(workload).__name__}")
    if len(workload) == 0:
        raise ValueError("workload must hold at least one request")
    out = []
    for item in workload:
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise TypeError(f"workload must hold (arrival, prompt_len, output_len) triples, got {item!r}")
        arrival = check_real("arrival", item[0], minimum=0.0)
        out.append((arrival, check_int("prompt_len", item[1], minimum=1),
                    check_int("output_len", item[2], minimum=1)))
    return out


def simulate_serving(workload: Sequence[tuple], token_budget: int, *, chunk_size: int | None = None,
             cost: StepCost = StepCost()) -> Simulation:
    """Run ``workload`` through :func:`plan_step` under :func:`step_time` (the model of the module
    doc) and return a :class:`Simulation`.

    Args:
        workload: ``(arrival, prompt_len, output_len)`` triples: arrival a finite real >= 0
            (seconds), prompt_len and output_len ints >= 1 (output_len counts the first token).
        token_budget, chunk_size: as in :func:`plan_step`.
        cost: a :class:`StepCost` (default: the 8B-on-H100 estimate).

    A request alone (arriving at an idle engine, ``chunk_size`` None, budget B, prompt P) gets
    its first token ``sum of step_time over its k = ceil(P / B) chunks`` after arrival (``k - 1``
    chunks of B and one of ``P - (k - 1) B``), and then one token per ``step_time(1)``.

    Raises TypeError/ValueError naming the argument (``workload``, ``arrival``, ``prompt_len``,
    ``output_len``, ``token_budget``, ``chunk_size``, ``cost.<field>``) before anything runs.
    """
    requests = check_workload(workload)
    check_int("token_budget", token_budget, minimum=1)
    check_int("chunk_size", chunk_size, minimum=1, allow_none=True)
    cost = check_cost(cost)
    arrivals = deque(sorted(range(len(requests)), key=lambda i: (requests[i][0], i)))
    remaining = [p for _, p, _ in requests]           # prompt tokens not yet computed
    times: list[list[float]] = [[] for _ in requests]
    prefilling: list[int] = []                        # FCFS
    decoding: list[int] = []                          # in the order they started decoding
    step_tokens, step_ends = [], []
    now = requests[arrivals[0]][0]
    while arrivals or prefilling or decoding:
        if not prefilling and not decoding:
            now = max(now, requests[arrivals[0]][0])  # idle: jump to the next arrival
        while arrivals and requests[arrivals[0]][0] <= now:
            prefilling.append(arrivals.popleft())
        plan = plan_step(decoding, [(i, remaining[i]) for i in prefilling], token_budget, chunk_size)
        tokens = sum(plan.values())
        now += step_time(tokens, cost)
        step_tokens.append(tokens)
        step_ends.append(now)
        for i in [i for i in decoding if i in plan]:  # each decode emits one token
            times[i].append(now)
            if len(times[i]) == requests[i][2]:
                decoding.remove(i)
        for i in [i for i in prefilling if i in plan]:
            remaining[i] -= plan[i]
            if remaining[i] == 0:                     # the last chunk: the first output token
                prefilling.remove(i)
                times[i].append(now)
                if requests[i][2] > 1:
                    decoding.append(i)
    token_times = tuple(tuple(t) for t in times)
    metrics = tuple(request_metrics(a, t) for (a, _, _), t in zip(requests, token_times))
    return Simulation(token_times=token_times, metrics=metrics, step_tokens=tuple(step_tokens),
                      step_ends=tuple(step_ends))
