"""Routing requests across replicas: round-robin, least-loaded, session affinity, cache-aware
(course 06.07, 07.02-07.03).

The course's claim: a prefix cache hits only on the replica that holds the prefix, so with several
replicas *where* a request goes decides whether it hits. Round-robin, the right answer for a
stateless service, spreads a conversation's turns and a tenant's requests over every replica, so
each replica must cache everything and a turn lands where its history was never seen (07.02);
routing on cache residency (07.03) sends a request to the replica that already holds its prefix,
and must still not pile every request onto one replica (the load cap).

The replicas
------------
``Router(num_replicas, policy="cache_aware", *, block_size=1, capacity=None, load_cap=None)``:
``num_replicas >= 1`` replicas, numbered ``0 .. num_replicas - 1``. Each replica is a radix cache
of concept ``radix`` (``reference/radix.py``'s ``RadixCache(page_size=block_size)``, LRU) and a
*load*: the number of requests routed to it and not yet completed (in flight, queued or running).
``capacity`` (None: unbounded, or an int >= 0) is the most tokens one replica's cache keeps.
``load_cap`` (None: no cap, or an int >= 0) is how far above the least-loaded replica a replica's
load may be for a cache- or session-driven choice to take it: replica ``r`` is *allowed* when
``loads[r] <= min(loads) + load_cap`` (every replica is allowed when ``load_cap`` is None; the
least-loaded replicas always are).

Serving a request on replica ``r`` (``route`` does exactly this once the replica is chosen, and
nothing else touches a cache): ``hit = cache_r.match_prefix(prompt[:-1]).length`` (the longest
cached prefix of the prompt without its last token, whose logits must be computed: concept
``hit_rate``'s rule, a multiple of ``block_size``); ``cache_r.insert(prompt, slots)`` with fresh
slots (the router's view: the prefix is counted as cached from the moment the request is routed,
as SGLang's router inserts into its tree when it selects a worker); if ``capacity`` is not None and
the cache holds more than ``capacity`` tokens, ``cache_r.evict(total - capacity)``. Then
``loads[r] += 1``, ``hit_tokens[r] += hit``, ``prompt_tokens[r] += len(prompt)``,
``requests[r] += 1``.

The policies (``policy``, a str; every tie goes to the lowest replica index)
----------------------------------------------------------------------------
- ``"round_robin"``: replica ``k mod num_replicas`` for the ``k``-th accepted ``route`` call
  (``k`` from 0). A rejected call does not advance ``k``.
- ``"least_loaded"``: the replica with the smallest load; ties to the lowest index.
- ``"session_affinity"``: ``session`` (None, a str or an int) names a conversation. A session
  seen before goes to the replica the session table holds for it if that replica is allowed by
  the load cap; otherwise (a new session, or its replica is over the cap) it goes least-loaded and
  the table now holds that replica for it (the session *moves*). ``session=None`` goes
  least-loaded and is not recorded. The table is never cleared: a session outlives its requests
  (the next turn comes after the previous one completed); ``complete`` leaves it as it is.
- ``"cache_aware"``: every replica is probed, in index order, with
  ``match_prefix(prompt[:-1])`` (probes are accesses: each refreshes the LRU clock of what it
  matched on that replica, as any lookup of ``radix`` does); among the allowed replicas it picks
  the one with the longest match, ties to the smaller load, then to the lowest index. With no
  match anywhere this is the least-loaded replica. (``session`` is ignored.)

Every policy but ``"cache_aware"`` calls ``match_prefix`` on the chosen replica only.

SGLang's router (sgl-project/sglang, ``sgl-router/src/policies/cache_aware.rs``, read at commit
b6f20641) differs, and these facts carried over, not its code: its load cap is a *system-wide*
switch, "imbalanced" when ``max_load - min_load > balance_abs_threshold`` **and** ``max_load >
balance_rel_threshold * min_load`` (defaults 32 and 1.0001), and then every request goes to the
shortest queue; when balanced it takes the worker with the highest match *rate* (matched
characters / request characters, over an approximate per-worker tree of raw text, not the engines'
caches) if that rate exceeds ``cache_threshold`` (default 0.5), else the least-loaded worker of the
smallest tree. Here the cap is per replica, relative to the least-loaded (``loads[r] - min(loads)
<= load_cap``, the absolute threshold alone), the match is in tokens over the replicas' own radix
caches, and no match threshold is applied (a longer match always wins among the allowed).

The step API
------------
``route(request_id, prompt, session=None) -> int``
    chooses a replica by the policy, serves the request there (above) and returns the replica.
    ``request_id`` (an int or a str) names the request until ``complete``; it must not be in
    flight. ``prompt`` is a non-empty list or tuple of token ids (ints in ``[0, 2**32)``).
``complete(request_id) -> int``
    the request has finished: its replica's load drops by one; returns that replica. The caches
    and the session table are unchanged.
``loads``, ``hit_tokens``, ``prompt_tokens``, ``requests``
    properties: lists of ``num_replicas`` ints (copies): the load, the tokens served from cache,
    the prompt tokens and the requests routed, per replica.
``sessions``
    property: a dict (a copy) from each recorded session to its replica.
``caches``
    property: the list of the replicas' radix caches (the objects themselves, to inspect).

The trace simulator
-------------------
``simulate_routing(requests, *, num_replicas, policy="cache_aware", block_size=1, capacity=None,
load_cap=None, cost=ServiceCost()) -> dict``. ``requests`` is a list of ``(arrival, prompt,
output_tokens)`` or ``(arrival, prompt, output_tokens, session)`` tuples (``arrival`` a finite
real >= 0 in seconds, ``output_tokens`` an int >= 0, ``session`` None/str/int; three fields mean
``session=None``). Requests are routed at their arrival, in order of ``(arrival, index)``, by a
``Router`` of those arguments (``request_id`` = the request's index). Before routing a request
arriving at ``t``, every routed request with ``finish <= t`` is completed, in order of ``(finish,
index)``. Each replica serves its requests one at a time, first routed first served:
``start = max(arrival, the replica's previous finish)``, ``finish = start + service`` with

    service = a + b * (len(prompt) - hit) + d * output_tokens

(``ServiceCost(a, b, d)``: ``a`` seconds per request, ``b`` per prefilled token, ``d`` per output
token; the defaults are an 8B model on one H100 at batch 1: ``a = 4.8e-3`` (one forward pass reads
16 GB of weights at 3.35 TB/s), ``b = 3.2e-5`` (2 x 8e9 FLOPs per token at 50 % of 989 TFLOP/s),
``d = 4.8e-3`` (a decode step reads the weights once). A model of queueing, not a measurement: no
batching, so it overstates queueing; the constants are parameters.)

Returns, per request in input order: ``replica``, ``hits``, ``start``, ``finish``, ``queueing``
(``start - arrival``); per replica: ``replica_requests``, ``replica_hit_tokens``,
``replica_prompt_tokens``, ``replica_hit_rate`` (hit / prompt tokens, 0.0 for a replica that got
none); totals: ``hit_tokens``, ``prompt_tokens``, ``token_hit_rate`` (0.0 for no requests),
``mean_queueing``, ``max_queueing``, ``mean_response`` (mean of ``finish - arrival``), ``makespan``
(last finish - first arrival); the means and ``makespan`` are 0.0 for no requests.

The law, and the choices it leaves open
---------------------------------------
Law (any correct router): every property above, call by call, for the given policy; in particular
round-robin cycles, least-loaded takes a replica of smallest load, session affinity keeps a session
on its replica while the cap allows, and cache-aware takes a replica whose cached prefix is the
longest among the allowed. Choices the law of *routing* leaves open but this contract fixes, so
they are law here too (a router is deterministic, and the traces' numbers depend on them): ties
to the lowest index (cache-aware: to the smaller load first), probing every replica in index order
(what an LRU cache under ``capacity`` keeps depends on it), inserting at route time.

Bad input, checked before anything changes (a rejected call changes no load, cache, counter or
table): ``num_replicas`` not an int >= 1; ``policy`` not one of the four names; ``block_size`` not
an int >= 1; ``capacity``/``load_cap`` not None or an int >= 0; ``request_id`` not an int or a str
(``TypeError``), already in flight (``route``) or not in flight (``complete``) (``ValueError``);
``prompt`` not a non-empty list/tuple of ints in ``[0, 2**32)``; ``session`` not None/str/int;
``requests`` not a list/tuple of 3- or 4-field tuples; ``arrival`` not a finite real >= 0;
``output_tokens`` not an int >= 0; ``cost`` not a ``ServiceCost`` of finite reals >= 0. A bool is
not an int here. Each message names the argument.
"""
from __future__ import annotations

from typing import NamedTuple

from reference._checks import check_int, check_real, is_int
from reference.radix import TOKEN_LIMIT, RadixCache, check_ids

__all__ = ["Router", "simulate_routing"]  # the contract
__optional__: list[str] = []

POLICIES = ("round_robin", "least_loaded", "session_affinity", "cache_aware")

# (functional form: the annotations stay types under ``from __future__ import annotations``)
ServiceCost = NamedTuple("ServiceCost", [("a", float), ("b", float), ("d", float)])
ServiceCost.__new__.__defaults__ = (4.8e-3, 3.2e-5, 4.8e-3)
ServiceCost.__doc__ = ("The service-time model's constants (seconds): ``a`` per request, ``b`` per prefilled "
                       "token, ``d`` per output token. Defaults: an 8B model on one H100 at batch 1.")


# --- argument checks ---------------------------------------------------------------------------
def check_prompt(name: str, prompt) -> tuple:
    check_ids(name, prompt, TOKEN_LIMIT)
    if not prompt:
        raise ValueError(f"{name} must not be empty (it has at least its last token)")
    return tuple(prompt)


def check_session(session) -> None:
    if not (session is None or isinstance(session, str) or is_int(session)):
        raise TypeError(f"session must be None, a str or an int, got {type(session).__name__}")


def check_request_id(request_id) -> None:
    if not (isinstance(request_id, str) or is_int(request_id)):
        raise TypeError(f"request_id must be an int or a str, got {type(request_id).__name__}")


def check_policy(policy) -> str:
    if not isinstance(policy, str):
        raise TypeError(f"policy must be a str, one of {POLICIES}, got {type(policy).__name__}")
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    return policy


def check_cost(cost) -> ServiceCost:
    if not all(hasattr(cost, k) for k in ("a", "b", "d")):
        raise TypeError(f"cost must be a ServiceCost (attributes a, b, d), got {type(cost).__name__}")
    return ServiceCost(*(check_real(f"cost.{k}", getattr(cost, k), minimum=0.0) for k in ("a", "b", "d")))


def check_requests(requests) -> list[tuple]:
    if not isinstance(requests, (list, tuple)):
        raise TypeError(f"requests must be a list or tuple of (arrival, prompt, output_tokens[, session]) "
                        f"tuples, got {type(requests).__name__}")
    out = []
    for r in requests:
        if not isinstance(r, (list, tuple)) or len(r) not in (3, 4):
            raise TypeError(f"requests must hold (arrival, prompt, output_tokens[, session]) tuples, got {r!r}")
        arrival = check_real("arrival", r[0], minimum=0.0)
        prompt = check_prompt("prompt", r[1])
        out_tokens = check_int("output_tokens", r[2], minimum=0)
        session = r[3] if len(r) == 4 else None
        check_session(session)
        out.append((arrival, prompt, out_tokens, session))
    return out


# --- the router --------------------------------------------------------------------------------
class Router:
    """Routes requests over ``num_replicas`` replicas, each a radix cache and a load (the module
    docstring is the contract)."""

    def __init__(self, num_replicas: int, policy: str = "cache_aware", *, block_size: int = 1,
                 capacity: int | None = None, load_cap: int | None = None):
        n = check_int("num_replicas", num_replicas, minimum=1)
        self.policy = check_policy(policy)
        self.block_size = check_int("block_size", block_size, minimum=1)
        self.capacity = check_int("capacity", capacity, minimum=0, allow_none=True)
        self.load_cap = check_int("load_cap", load_cap, minimum=0, allow_none=True)
        self._caches = [RadixCache(page_size=block_size) for _ in range(n)]
        self._loads = [0] * n
        self._hits = [0] * n
        self._prompt = [0] * n
        self._requests = [0] * n
        self._next_slot = [0] * n
        self._sessions: dict = {}
        self._in_flight: dict = {}   # request_id -> replica
        self._turn = 0               # round-robin's k

    # -- observables ---------------------------------------------------------------------------
    @property
    def loads(self) -> list[int]:
        """Requests in flight, per replica."""
        return list(self._loads)

    @property
    def hit_tokens(self) -> list[int]:
        """Prompt tokens served from cache, per replica."""
        return list(self._hits)

    @property
    def prompt_tokens(self) -> list[int]:
        """Prompt tokens routed, per replica."""
        return list(self._prompt)

    @property
    def requests(self) -> list[int]:
        """Requests routed, per replica."""
        return list(self._requests)

    @property
    def sessions(self) -> dict:
        """The session table: session -> replica."""
        return dict(self._sessions)

    @property
    def caches(self) -> list:
        """The replicas' radix caches."""
        return list(self._caches)

    # -- the policies --------------------------------------------------------------------------
    def _least_loaded(self) -> int:
        return min(range(len(self._loads)), key=lambda r: self._loads[r])   # min keeps the first of equals

    def _allowed(self, r: int) -> bool:
        return self.load_cap is None or self._loads[r] <= min(self._loads) + self.load_cap

    def _choose(self, prompt: tuple, session) -> int:
        if self.policy == "round_robin":
            return self._turn % len(self._caches)
        if self.policy == "least_loaded":
            return self._least_loaded()
        if self.policy == "session_affinity":
            r = self._sessions.get(session) if session is not None else None
            if r is not None and self._allowed(r):
                return r
            return self._least_loaded()
        match = [c.match_prefix(list(prompt[:-1])).length for c in self._caches]
        allowed = [r for r in range(len(self._caches)) if self._allowed(r)]
        return min(allowed, key=lambda r: (-match[r], self._loads[r], r))

    def _serve(self, r: int, prompt: tuple) -> int:
        cache = self._caches[r]
        hit = cache.match_prefix(list(prompt[:-1])).length
        slots = list(range(self._next_slot[r], self._next_slot[r] + len(prompt)))
        self._next_slot[r] += len(prompt)
        cache.insert(list(prompt), slots)
        if self.capacity is not None and cache.total > self.capacity:
            cache.evict(cache.total - self.capacity)
        return hit

    # -- the step API --------------------------------------------------------------------------
    def route(self, request_id, prompt, session=None) -> int:
        """Choose a replica for the request by the policy, serve it there, return the replica."""
        check_request_id(request_id)
        prompt = check_prompt("prompt", prompt)
        check_session(session)
        if request_id in self._in_flight:
            raise ValueError(f"request_id {request_id!r} is already in flight (complete it first)")
        r = self._choose(prompt, session)
        self._turn += 1
        if self.policy == "session_affinity" and session is not None:
            self._sessions[session] = r
        hit = self._serve(r, prompt)
        self._in_flight[request_id] = (r, session)
        self._loads[r] += 1
        self._hits[r] += hit
        self._prompt[r] += len(prompt)
        self._requests[r] += 1
        return r

    def complete(self, request_id) -> int:
        """The request finished: its replica's load drops by one; returns the replica."""
        check_request_id(request_id)
        if request_id not in self._in_flight:
            raise ValueError(f"request_id {request_id!r} is not in flight")
        r, session = self._in_flight.pop(request_id)
        self._loads[r] -= 1
        return r


# --- the trace simulator -----------------------------------------------------------------------
def simulate_routing(requests, *, num_replicas: int, policy: str = "cache_aware", block_size: int = 1,
                     capacity: int | None = None, load_cap: int | None = None,
                     cost: ServiceCost = ServiceCost()) -> dict:
    """Route a trace of requests at their arrivals and serve each replica's queue in order (module doc)."""
    reqs = check_requests(requests)
    cost = check_cost(cost)
    router = Router(num_replicas, policy, block_size=block_size, capacity=capacity, load_cap=load_cap)
    n = len(reqs)
    replica, hits, start, finish = [0] * n, [0] * n, [0.0] * n, [0.0] * n
    free = [0.0] * num_replicas
    running: list[int] = []   # routed, not completed
    for i in sorted(range(n), key=lambda i: (reqs[i][0], i)):
        arrival, prompt, out_tokens, session = reqs[i]
        for j in sorted((j for j in running if finish[j] <= arrival), key=lambda j: (finish[j], j)):
            router.complete(j)
            running.remove(j)
        before = router.hit_tokens
        r = router.route(i, prompt, session)
        hit = router.hit_tokens[r] - before[r]
        replica[i], hits[i] = r, hit
        start[i] = max(arrival, free[r])
        finish[i] = free[r] = start[i] + cost.a + cost.b * (len(prompt) - hit) + cost.d * out_tokens
        running.append(i)
    queueing = [start[i] - reqs[i][0] for i in range(n)]
    prompt_tokens, hit_tokens = router.prompt_tokens, router.hit_tokens
    return {
        "replica": replica, "hits": hits, "start": start, "finish": finish, "queueing": queueing,
        "replica_requests": router.requests,
        "replica_hit_tokens": hit_tokens,
        "replica_prompt_tokens": prompt_tokens,
        "replica_hit_rate": [h / p if p else 0.0 for h, p in zip(hit_tokens, prompt_tokens)],
        "hit_tokens": sum(hit_tokens),
        "prompt_tokens": sum(prompt_tokens),
        "token_hit_rate": sum(hit_tokens) / sum(prompt_tokens) if n else 0.0,
        "mean_queueing": sum(queueing) / n if n else 0.0,
        "max_queueing": max(queueing, default=0.0),
        "mean_response": sum(finish[i] - reqs[i][0] for i in range(n)) / n if n else 0.0,
        "makespan": max(finish, default=0.0) - min((r[0] for r in reqs), default=0.0),
    }
