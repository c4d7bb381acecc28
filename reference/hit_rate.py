"""Prefix-cache hit rate on a request trace, what it saves, and a cache-aware scheduler (course 03.10).

A *trace* is a list of prompts (each a non-empty list or tuple of token ids, ints in ``[0, 2**32)``)
in the order they are served. The cache is the radix prefix cache of concept ``radix``
(``reference/radix.py``: SGLang's semantics, LRU eviction of whole unlocked leaves); any object
with its contract (``match_prefix``, ``insert``, ``evict``, ``total``) may be passed as ``cache``.

Serving one request (``replay`` and ``simulate`` do exactly this, nothing else touches the cache):

1. ``hit = cache.match_prefix(prompt[:-1]).length``: the longest cached prefix, in whole pages of
   ``block_size`` tokens, of the prompt *without its last token*. The last prompt token is never
   served from cache: its logits are needed, so it is always computed (vLLM and SGLang both cap a
   hit at ``len - 1``). So ``0 <= hit <= len(prompt) - 1`` and ``hit % block_size == 0``.
2. The remaining ``len(prompt) - hit`` tokens are prefilled; then
   ``cache.insert(prompt, slots)`` caches the prompt's whole pages (fresh slot ids; the generated
   tokens are not cached: a later turn of a conversation brings them back inside its prompt).
3. If ``capacity`` is not None and the cache holds more than ``capacity`` tokens,
   ``cache.evict(total - capacity)``: least recently used unlocked leaves go first, whole nodes, so
   it may free more. ``capacity=None`` is unbounded; ``capacity=0`` caches nothing.

A request *hits* when at least one token is served from cache (``hit >= 1``).

Every result is law here: the cache's eviction order, a choice of concept ``radix``, is fixed for
this concept to the reference cache's (LRU over its logical clock), so the hits under a bounded
capacity are determined; a ``cache`` passed in is used as given.

``replay(trace, *, block_size=1, capacity=None, cache=None) -> list[int]``
    the hit of every request, served in trace order.
``hit_rates(trace, hits) -> dict``
    ``requests``, ``prompt_tokens`` (sum of prompt lengths), ``hit_tokens`` (sum of hits),
    ``prefill_tokens`` (``prompt_tokens - hit_tokens``: what is still computed),
    ``token_hit_rate`` (``hit_tokens / prompt_tokens``), ``request_hit_rate`` (the fraction of
    requests with ``hit >= 1``). An empty trace has both rates 0.0. What holds between them:
    ``hit_tokens <= sum of (len - 1) over the requests that hit``, so ``token_hit_rate <= 1 -
    requests / prompt_tokens`` and both rates are 0 together; the token rate may be above or below
    the request rate (one long fully cached prompt among short misses: above; many short hits in a
    long-prompt trace: below). For prompts of one length ``L``: ``token <= request x (L - 1) / L``.

Prefill cost model
------------------
Prefilling ``n`` new tokens after ``k`` cached ones (the new token at position ``p`` attends to
``p + 1`` keys, causal) takes

    prefill_time(n, k) = a + b * n + c * (n * k + n * (n + 1) / 2)        (0 when n == 0)

``a`` is the fixed cost of a forward pass (reading the weights once), ``b`` the per-token cost of
the dense layers (2 x parameters FLOPs per token), ``c`` the cost of one query-key pair in
attention (``QK^T`` and ``PV``: 4 x layers x d_model FLOPs). ``PrefillCost()``'s defaults are an
8B Llama-3-shaped model (32 layers, d_model 4096, 8.0e9 parameters, bf16) on one H100 SXM
(989 TFLOP/s dense bf16, 3.35 TB/s) at 50% of peak FLOP/s:
``a = 16 GB / 3.35 TB/s = 4.8e-3 s``, ``b = 2 x 8.0e9 / 4.9e14 = 3.2e-5 s/token``,
``c = 4 x 32 x 4096 / 4.9e14 = 1.1e-9 s/pair``. An estimate, not a measurement: the constants
are parameters.

``prefill_time(new_tokens, cached_tokens=0, cost=PrefillCost()) -> float``
    the formula above.
``time_saved(prompt_tokens, hit_tokens, cost=PrefillCost()) -> float``
    ``prefill_time(L, 0) - prefill_time(L - h, h)`` for a prompt of ``L`` tokens with ``h`` hits
    (``0 <= h <= L - 1``): ``b * h + c * h * (h + 1) / 2``. ``a`` cancels (a forward pass runs
    anyway, for the last token), and the attention the cached tokens no longer compute among
    themselves is quadratic in ``h``. Tokens saved are ``h`` itself.

Scheduling simulation
---------------------
``simulate(requests, *, policy="fcfs", block_size=1, capacity=None, cost=PrefillCost(),
cache=None) -> dict``. ``requests`` is a list of ``(arrival, prompt)`` pairs (``arrival`` a
finite real >= 0, in seconds). One server prefills one request at a time, never idle while a
request waits. Whenever it is free at time ``now`` it takes, among the requests that have arrived
(``arrival <= now``; if none has, it waits for the next arrival), the request that ``policy``
ranks first:

- ``"fcfs"``: earliest arrival, then lowest index (cache-oblivious);
- ``"lpm"``: longest cached prefix first (SGLang's "longest prefix match"), ties as fcfs. To rank,
  it calls ``match_prefix(prompt[:-1])`` on every waiting request, in index order; like SGLang's
  scheduler these probes are accesses (they refresh the LRU clock of what they match).

It serves the chosen request as above: ``start = now``, ``finish = start + prefill_time(len - hit,
hit)``. Returns ``order`` (indices in service order), and per request in input order ``hits``,
``start``, ``finish``, ``response`` (``finish - arrival``: queueing plus prefill, the time to
first token; decode is not modelled), plus ``mean_response`` (0.0 for no requests) and
``throughput`` (requests per second over ``[first arrival, last finish]``; 0.0 for no requests).

Bad input, checked before anything runs: a trace or request list that is not a list/tuple, a
prompt that is not a non-empty list/tuple of ints in ``[0, 2**32)``, a request that is not an
``(arrival, prompt)`` pair (``TypeError``/``ValueError`` naming ``trace``, ``requests`` or
``arrival``); ``block_size`` not an int >= 1, ``capacity`` not None or an int >= 0; ``hits`` not
one int in ``[0, len - 1]`` per prompt; ``new_tokens``/``cached_tokens``/``prompt_tokens``/
``hit_tokens`` not ints in range; ``cost`` not a ``PrefillCost`` of finite reals (``a > 0``,
``b, c >= 0``); ``policy`` not "fcfs" or "lpm"; a ``cache`` that is not empty (``ValueError``
naming ``cache``). Each message names the argument.
"""
from __future__ import annotations

from typing import NamedTuple

from reference._checks import check_int, check_real
from reference.radix import TOKEN_LIMIT, RadixCache, check_ids

__all__ = ["replay", "hit_rates", "prefill_time", "time_saved", "simulate"]
__optional__: list[str] = []

POLICIES = ("fcfs", "lpm")


# (functional form: the annotations stay types under ``from __future__ import annotations``)
PrefillCost = NamedTuple("PrefillCost", [("a", float), ("b", float), ("c", float)])
PrefillCost.__new__.__defaults__ = (4.8e-3, 3.2e-5, 1.1e-9)
PrefillCost.__doc__ = ("The prefill cost model's constants (seconds): ``a`` per forward pass, ``b`` per "
                       "token, ``c`` per attended query-key pair. Defaults: an 8B model on one H100 "
                       "(module docstring).")


# --- argument checks ---------------------------------------------------------------------------
def check_prompt(name: str, prompt) -> tuple:
    """The radix cache's token rule (a list or tuple of ints in [0, 2**32)), and not empty."""
    check_ids(name, prompt, TOKEN_LIMIT)
    if not prompt:
        raise ValueError(f"{name}: a prompt must not be empty (it has at least its last token)")
    return tuple(prompt)


def check_trace(trace) -> list[tuple]:
    if not isinstance(trace, (list, tuple)):
        raise TypeError(f"trace must be a list or tuple of prompts, got {type(trace).__name__}")
    return [check_prompt("trace", p) for p in trace]


def check_requests(requests) -> list[tuple[float, tuple]]:
    if not isinstance(requests, (list, tuple)):
        raise TypeError(f"requests must be a list or tuple of (arrival, prompt) pairs, got {type(requests).__name__}")
    out = []
    for r in requests:
        if not isinstance(r, (list, tuple)) or len(r) != 2:
            raise TypeError(f"requests must hold (arrival, prompt) pairs, got {r!r}")
        arrival = check_real("arrival", r[0], minimum=0.0)
        out.append((arrival, check_prompt("requests", r[1])))
    return out


def check_cost(cost) -> PrefillCost:
    """A ``PrefillCost`` (any object with attributes ``a``, ``b``, ``c``: an implementation's own
    ``PrefillCost`` type is accepted too) of finite reals, ``a > 0``, ``b, c >= 0``."""
    if not all(hasattr(cost, k) for k in ("a", "b", "c")):
        raise TypeError(f"cost must be a PrefillCost (attributes a, b, c), got {type(cost).__name__}")
    a = check_real("cost.a", cost.a, minimum=0.0)
    if a <= 0:
        raise ValueError(f"cost.a must be > 0 (a forward pass takes time), got {a}")
    check_real("cost.b", cost.b, minimum=0.0)
    check_real("cost.c", cost.c, minimum=0.0)
    return PrefillCost(float(cost.a), float(cost.b), float(cost.c))


def make_cache(cache, block_size: int):
    check_int("block_size", block_size, minimum=1)
    if cache is None:
        return RadixCache(page_size=block_size)
    for method in ("match_prefix", "insert", "evict"):
        if not callable(getattr(cache, method, None)):
            raise TypeError(f"cache must have the radix contract (match_prefix, insert, evict, total), "
                            f"got {type(cache).__name__}")
    if cache.total != 0:
        raise ValueError(f"cache must be empty, it holds {cache.total} tokens")
    if getattr(cache, "page_size", block_size) != block_size:
        raise ValueError(f"cache has page_size {cache.page_size}, block_size is {block_size}")
    return cache


# --- serving one request -----------------------------------------------------------------------
class _Server:
    """The cache and the serving steps of the module docstring."""

    def __init__(self, cache, capacity):
        self.cache, self.capacity, self.next_slot = cache, capacity, 0

    def probe(self, prompt: tuple) -> int:
        """Tokens of ``prompt`` served from cache: never its last one."""
        return self.cache.match_prefix(list(prompt[:-1])).length

    def serve(self, prompt: tuple) -> int:
        hit = self.probe(prompt)
        slots = list(range(self.next_slot, self.next_slot + len(prompt)))
        self.next_slot += len(prompt)
        self.cache.insert(list(prompt), slots)
        if self.capacity is not None and self.cache.total > self.capacity:
            self.cache.evict(self.cache.total - self.capacity)
        return hit


# --- the contract ------------------------------------------------------------------------------
def replay(trace, *, block_size: int = 1, capacity: int | None = None, cache=None) -> list[int]:
    """The tokens served from cache for each prompt of ``trace``, served in order (module doc)."""
    prompts = check_trace(trace)
    check_int("capacity", capacity, minimum=0, allow_none=True)
    server = _Server(make_cache(cache, block_size), capacity)
    return [server.serve(p) for p in prompts]


def hit_rates(trace, hits) -> dict:
    """Token- and request-level hit rates of ``trace`` given each prompt's ``hits``."""
    prompts = check_trace(trace)
    if not isinstance(hits, (list, tuple)) or len(hits) != len(prompts):
        raise ValueError(f"hits must be a list with one int per prompt ({len(prompts)}), got {hits!r}")
    for h, p in zip(hits, prompts):
        check_int("hits", h, minimum=0)
        if h > len(p) - 1:
            raise ValueError(f"hits must be <= len(prompt) - 1 = {len(p) - 1}, got {h}")
    prompt_tokens = sum(len(p) for p in prompts)
    hit_tokens = sum(hits)
    hit_requests = sum(1 for h in hits if h >= 1)
    return {
        "requests": len(prompts),
        "prompt_tokens": prompt_tokens,
        "hit_tokens": hit_tokens,
        "prefill_tokens": prompt_tokens - hit_tokens,
        "token_hit_rate": hit_tokens / prompt_tokens if prompts else 0.0,
        "request_hit_rate": hit_requests / len(prompts) if prompts else 0.0,
    }


def prefill_time(new_tokens: int, cached_tokens: int = 0, cost: PrefillCost = PrefillCost()) -> float:
    """Seconds to prefill ``new_tokens`` after ``cached_tokens`` cached ones (module doc formula)."""
    n = check_int("new_tokens", new_tokens, minimum=0)
    k = check_int("cached_tokens", cached_tokens, minimum=0)
    a, b, c = check_cost(cost)
    if n == 0:
        return 0.0
    return a + b * n + c * (n * k + n * (n + 1) / 2)


def time_saved(prompt_tokens: int, hit_tokens: int, cost: PrefillCost = PrefillCost()) -> float:
    """Prefill seconds saved by serving ``hit_tokens`` of a ``prompt_tokens`` prompt from cache."""
    L = check_int("prompt_tokens", prompt_tokens, minimum=1)
    h = check_int("hit_tokens", hit_tokens, minimum=0)
    if h > L - 1:
        raise ValueError(f"hit_tokens must be <= prompt_tokens - 1 = {L - 1}, got {h}")
    cost = check_cost(cost)
    return prefill_time(L, 0, cost) - prefill_time(L - h, h, cost)


def simulate(requests, *, policy: str = "fcfs", block_size: int = 1, capacity: int | None = None,
             cost: PrefillCost = PrefillCost(), cache=None) -> dict:
    """One server, one prefill at a time, waiting requests ranked by ``policy`` (module doc)."""
    reqs = check_requests(requests)
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    check_int("capacity", capacity, minimum=0, allow_none=True)
    cost = check_cost(cost)
    server = _Server(make_cache(cache, block_size), capacity)
    n = len(reqs)
    hits, start, finish = [0] * n, [0.0] * n, [0.0] * n
    pending = list(range(n))
    order = []
    now = 0.0
    while pending:
        arrived = [i for i in pending if reqs[i][0] <= now]
        if not arrived:
            now = min(reqs[i][0] for i in pending)
            continue
        by_arrival = sorted(arrived, key=lambda i: (reqs[i][0], i))
        if policy == "fcfs":
            pick = by_arrival[0]
        else:
            match = {i: server.probe(reqs[i][1]) for i in sorted(arrived)}
            pick = min(by_arrival, key=lambda i: -match[i])   # min keeps the first of equals
        prompt = reqs[pick][1]
        hit = server.serve(prompt)
        hits[pick], start[pick] = hit, now
        now = finish[pick] = now + prefill_time(len(prompt) - hit, hit, cost)
        pending.remove(pick)
        order.append(pick)
    response = [finish[i] - reqs[i][0] for i in range(n)]
    span = max(finish, default=0.0) - min((r[0] for r in reqs), default=0.0)
    return {
        "order": order, "hits": hits, "start": start, "finish": finish, "response": response,
        "mean_response": sum(response) / n if n else 0.0,
        "throughput": n / span if n else 0.0,
    }
