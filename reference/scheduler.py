"""The scheduler of a continuous-batching engine (course 04.04; vLLM v1's ``Scheduler``, chapter 4).

Continuous (iteration-level) batching decides *every step* which requests run and how many of
their tokens are computed. The scheduler keeps two queues of request ids, **waiting** and
**running**, a pool of ``num_blocks`` KV blocks of ``block_size`` token slots, and two budgets per
step: at most ``max_num_batched_tokens`` tokens and at most ``max_num_seqs`` running requests. It
counts; it never runs a model. The engine calls ``schedule()``, runs the model on what it was
given, and reports the sampled tokens with ``update()``.

A request has ``num_tokens = len(prompt) + len(output)`` tokens and ``num_computed_tokens`` of them
have their KV in its blocks. While it holds ``n`` computed-or-scheduled tokens it holds exactly
``ceil(n / block_size)`` blocks (with prefix caching, some of them shared with other requests).
A step that brings its computed tokens to ``num_tokens`` makes the model *sample* its next token;
a step that ends inside its prompt (a prefill chunk) samples nothing.

The policy (vLLM v1's ``Scheduler.schedule``, FCFS)
--------------------------------------------------
One step, with ``budget = max_num_batched_tokens``:

1. **Running first**, in queue order, while the budget is positive: the request is given
   ``n = min(num_tokens - num_computed_tokens, budget)`` tokens (a decode is ``n = 1``; a request
   in the middle of a chunked prefill gets its next chunk). If the pool cannot give it the blocks
   for ``num_computed_tokens + n`` tokens, the **newest running request** (the end of the running
   queue) is *preempted* -- repeatedly, until the blocks fit -- and if that newest request is the
   one being scheduled, it is preempted itself and the running phase ends. Preemption is by
   **recompute**: the request frees all its blocks, goes to the **front** of the waiting queue
   with ``num_computed_tokens = 0`` and keeps its generated tokens, which are recomputed with the
   prompt when it is admitted again (and then it samples the token it would have sampled next).
2. **Then waiting**, FCFS from the front, only if nothing was preempted in this step, while the
   budget is positive and fewer than ``max_num_seqs`` requests run: the front request's
   ``num_tokens - hit`` uncomputed tokens (``hit``: its prefix-cache hit, below; 0 without prefix
   caching) are scheduled, cut to the budget (**chunked prefill**). Without chunked prefill a
   request whose uncomputed tokens exceed the remaining budget is *skipped* this step (it keeps its
   place at the front; later requests may be admitted past it, as vLLM v1 does). A request whose
   blocks do not fit the free pool stops the admission (it waits at the front; nothing is
   preempted for a waiting request). An admitted request moves to the end of the running queue.

A step therefore schedules at most ``max_num_batched_tokens`` tokens, never more than
``max_num_seqs`` requests run, the blocks in use never exceed ``num_blocks``, and the oldest
running request always makes progress -- so, since every request fits the pool alone (checked at
``add_request``), every request finishes: no starvation.

Prefix caching (``enable_prefix_caching=True``; vLLM v1's block pool, as ``reference/prefix_cache.py``)
------------------------------------------------------------------------------------------------
A *full* block is keyed by the whole token prefix it ends (prompt and generated tokens alike).
It becomes cached when the step that computes its last token is updated (``update()``: the engine
has written its KV); a key already cached keeps its block. (vLLM v1 caches it when the step is
scheduled, so a request admitted later in the same step can hit a block whose KV that step
writes -- correct there because its forward pass writes each layer's KV of the whole batch before
attention reads it. Caching at ``update`` asks nothing of the engine's order; a hit is one step
later at most.) A request being admitted (its ``num_computed_tokens`` is 0) takes the blocks of
the longest cached block-aligned prefix of its tokens, capped at ``num_tokens - 1`` tokens (the
last token is always computed: its logits are needed), and starts with that many computed tokens.
A freed block keeps its key until it is reused; the free queue is least-recently-freed first
(a request's blocks are freed last block first), a fresh block is taken from its head and loses
its key then, and a hit on a free block takes it off the queue. A hit block's refcount counts the
requests that hold it; it returns to the free queue when the last holder frees it.

Why recompute and not swap
--------------------------
Recompute is the only preemption mode. vLLM v0 could also *swap* a preempted request's blocks to
a CPU pool; vLLM v1 dropped swap: recompute needs no second pool or copy schedule, a recomputed
prefix is often a prefix-cache hit, and the engine's outputs are the same either way (the law
tested here: a preempted request produces the tokens it would have produced unpreempted). A swap
mode would add a CPU pool and swap-in/out lists to the output and nothing to the law.

Contract
--------
``Scheduler(num_blocks, block_size, max_num_batched_tokens, max_num_seqs, *,
enable_chunked_prefill=True, enable_prefix_caching=False)``

``add_request(request_id, prompt, max_tokens) -> None``
    queues a request at the end of waiting. ``request_id`` an int or str, not the id of a waiting
    or running request; ``prompt`` a non-empty list or tuple of int token ids >= 0; ``max_tokens``
    an int >= 1, the most tokens it generates (it finishes when it has that many, or when the
    engine says it stopped). The KV of a request never holds more than
    ``len(prompt) + max_tokens - 1`` tokens (the last sampled token is never computed); a request
    whose ``ceil((len(prompt) + max_tokens - 1) / block_size)`` exceeds ``num_blocks`` could never
    run, and is rejected (``ValueError`` naming ``prompt``: longer than the whole pool); without
    chunked prefill a request whose ``len(prompt) + max_tokens - 1`` exceeds
    ``max_num_batched_tokens`` could never be recomputed in one step, and is rejected too (vLLM
    asks ``max_num_batched_tokens >= max_model_len`` for the same reason).
``schedule() -> SchedulerOutput``
    one step of the policy above. ``num_scheduled_tokens``: request id -> tokens this step
    (running requests in queue order, then the newly admitted ones in admission order; only
    requests with at least one token); ``num_computed_tokens``: id -> computed tokens before this
    step (after the prefix-cache hit for a newly admitted one); ``block_tables``: id -> its block
    ids after this step's allocation; ``token_ids``: id -> the ids of the tokens scheduled
    (positions ``num_computed_tokens .. + num_scheduled_tokens``); ``sampling``: the ids whose
    computed tokens reach their length this step (in scheduling order); ``preempted``: ids
    preempted this step (in preemption order: newest first); ``finished``: ids that finished
    since the previous ``schedule()``. The scheduled tokens count as computed from now on.
``update(output, sampled, stopped=()) -> list``
    after the engine ran ``output`` (the last ``schedule()``'s, each output is updated once):
    ``sampled`` maps every id of ``output.sampling`` -- and no other -- to the int token (>= 0) it
    produced; ``stopped`` holds ids of ``sampled`` that hit a stop condition (the engine's stop
    strings / EOS). Each sampled token is appended to its request; a request finishes when it has
    ``max_tokens`` tokens or is in ``stopped``: it leaves running, frees its blocks, and its id is
    returned (in scheduling order) and reported in the next output's ``finished``.
``has_unfinished_requests() -> bool``; ``num_free_blocks`` (property: blocks that an allocation
can take, cached-free ones included); ``waiting``, ``running`` (properties: lists of ids, queue
order; copies).

The law and the reference's choices
-----------------------------------
Law (every implementation of this contract): everything above -- which requests are scheduled,
how many tokens, in which order, who is preempted, the queues' order, what samples and finishes,
the prefix-cache hit lengths (given the least-recently-freed eviction above), the number of free
blocks, the bounds. Block ids are the engine's business up to a consistent renaming: a block table
has ``ceil(n / block_size)`` ids in ``[0, num_blocks)``; two running requests share a block only
when prefix caching made it a hit of both (a full block of the same prefix); a request keeps its
table's prefix from step to step.

Choices the law leaves open (checked only at token-exact):

- *which free block an allocation takes*: the reference's pool is one free queue, blocks
  ``0 .. num_blocks - 1`` at first; a block is taken from its head, freed blocks join its tail,
  a request's last block first (vLLM v1's ``FreeKVCacheBlockQueue``). With prefix caching this
  order is also the eviction order, so it is law *as an eviction order*; the ids are the choice.

Bad input. Every check runs before any state changes, so a call that raises leaves the queues,
the pool and every request exactly as they were: sizes and budgets are ints >= 1 (``TypeError``
/ ``ValueError`` naming ``num_blocks``, ``block_size``, ``max_num_batched_tokens``,
``max_num_seqs``); the flags are bools (``TypeError`` naming them); a ``request_id`` that is not
an int or str (a bool is not an int anywhere here) is a ``TypeError``, one that is waiting or
running a ``ValueError`` (naming ``request_id``: duplicate); ``prompt`` (``TypeError``: not a
list/tuple, a non-int token; ``ValueError``: empty, a negative token, longer than the whole pool
or, without chunked prefill, than the token budget) and ``max_tokens`` (``TypeError`` / ``ValueError``
< 1) are named; ``update`` with an ``output`` that is not the last ``schedule()``'s pending one
(``ValueError`` naming ``output``), ``sampled`` that is not a dict, misses or adds an id, or holds
a token that is not an int >= 0 (``TypeError`` / ``ValueError`` naming ``sampled``), ``stopped``
with an id that did not sample (``ValueError`` naming ``stopped``). ``schedule()`` while an
output waits for its ``update()`` is a ``RuntimeError`` (the engine forgot a step).

This reference is plain on purpose: queues are Python lists (``pop(0)``/``insert(0, ...)``), a
block's key is the whole token prefix, a refcount is a list entry, a request's tokens are rebuilt
as ``prompt + output`` where they are needed. Its step cost does not grow with the waiting queue
while admission stops at its front (a full ``max_num_seqs``, an empty budget, blocks that do not
fit); without chunked prefill a step that passes every waiting request looks at each one, as
vLLM v1 does: O(waiting). ``optimized/scheduler.py`` skips that scan when no waiting request can
fit (docs/scheduler.md, "Measured numbers").
"""
from __future__ import annotations

from dataclasses import dataclass, field

from reference._checks import check_int, is_int

__all__ = ["Scheduler"]  # the contract: what an implementation must provide
__optional__: list[str] = []


@dataclass
class SchedulerOutput:
    """What one ``schedule()`` step decided (plain data; see the module docstring)."""
    num_scheduled_tokens: dict = field(default_factory=dict)  # id -> tokens this step
    num_computed_tokens: dict = field(default_factory=dict)   # id -> computed before this step
    block_tables: dict = field(default_factory=dict)          # id -> block ids after this step
    token_ids: dict = field(default_factory=dict)             # id -> the scheduled tokens' ids
    sampling: list = field(default_factory=list)              # ids that sample this step
    preempted: list = field(default_factory=list)             # ids preempted this step
    finished: list = field(default_factory=list)              # ids finished since the last step
    step: int = 0                                             # 1 for the first schedule()

    @property
    def total_num_scheduled_tokens(self) -> int:
        return sum(self.num_scheduled_tokens.values())


class Request:
    """One request's state: its tokens, how many are computed, its blocks."""

    def __init__(self, request_id, prompt: tuple, max_tokens: int):
        self.request_id = request_id
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.output: list[int] = []
        self.num_computed_tokens = 0
        self.blocks: list[int] = []

    @property
    def tokens(self) -> tuple:
        return self.prompt + tuple(self.output)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt) + len(self.output)

    def append(self, token: int) -> None:
        """The token sampled for it this step joins its output."""
        self.output.append(token)


def blocks_for(n_tokens: int, block_size: int) -> int:
    """Blocks that hold ``n_tokens`` tokens: ceil(n_tokens / block_size)."""
    return -(-n_tokens // block_size)


def check_request_id(request_id) -> None:
    if not (is_int(request_id) or isinstance(request_id, str)):
        raise TypeError(f"request_id must be an int or a str, got {request_id!r}")


def check_prompt(prompt) -> tuple:
    if not isinstance(prompt, (list, tuple)):
        raise TypeError(f"prompt must be a list or tuple of int token ids, got {type(prompt).__name__}")
    if not prompt:
        raise ValueError("prompt must not be empty")
    for t in prompt:
        if not is_int(t):
            raise TypeError(f"prompt must hold int token ids, got {t!r}")
        if t < 0:
            raise ValueError(f"prompt token ids must be >= 0, got {t}")
    return tuple(prompt)


def check_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


class BlockPool:
    """The KV blocks: a free queue (least recently freed at the head), refcounts, and -- with
    prefix caching -- the key of each cached full block (the whole token prefix it ends)."""

    def __init__(self, num_blocks: int, block_size: int, caching: bool):
        self.block_size = block_size
        self.caching = caching
        self.free_queue = list(range(num_blocks))  # head = next to take
        self.refs = [0] * num_blocks
        self.cache: dict = {}      # key -> block
        self.block_key: dict = {}  # block -> key

    def hits(self, tokens: tuple) -> list[int]:
        """Cached blocks of the longest block-aligned prefix of ``tokens``, at most len - 1 tokens."""
        if not self.caching:
            return []
        hits = []
        for i in range((len(tokens) - 1) // self.block_size):
            block = self.cache.get(tokens[:(i + 1) * self.block_size])
            if block is None:
                break
            hits.append(block)
        return hits

    def can_take(self, n_new: int, hits: list[int]) -> bool:
        revived = sum(1 for b in hits if self.refs[b] == 0)
        return n_new + revived <= len(self.free_queue)

    def take_hits(self, hits: list[int]) -> None:
        for b in hits:
            if self.refs[b] == 0:
                self.free_queue.remove(b)
            self.refs[b] += 1

    def take(self) -> int:
        b = self.free_queue.pop(0)
        key = self.block_key.pop(b, None)
        if key is not None:  # evicted: its slot is reused
            del self.cache[key]
        self.refs[b] = 1
        return b

    def free(self, blocks: list[int]) -> None:
        for b in reversed(blocks):  # the last block first: the chain is evicted from its end
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_queue.append(b)

    def cache_full_blocks(self, request: Request, n_tokens: int) -> None:
        """The first ``n_tokens`` tokens of ``request`` are computed: cache its full blocks."""
        if not self.caching:
            return
        tokens = request.tokens
        for i in range(n_tokens // self.block_size):
            b, key = request.blocks[i], tokens[:(i + 1) * self.block_size]
            if b in self.block_key or key in self.cache:
                continue
            self.cache[key] = b
            self.block_key[b] = key


def check_new_request(scheduler, request_id, prompt, max_tokens) -> list:
    """``add_request``'s checks against ``scheduler``'s queues and sizes (contract above); returns
    the prompt as a list. Nothing is changed: an error leaves the queues as they were."""
    check_request_id(request_id)
    if request_id in scheduler.requests:
        raise ValueError(f"request_id {request_id!r} is a duplicate: it is already waiting or running")
    prompt = check_prompt(prompt)
    check_int("max_tokens", max_tokens, minimum=1)
    longest = len(prompt) + max_tokens - 1  # the most tokens its KV ever holds
    if blocks_for(longest, scheduler.block_size) > scheduler.num_blocks:
        raise ValueError(f"prompt of {len(prompt)} tokens with max_tokens={max_tokens} needs "
                         f"{blocks_for(longest, scheduler.block_size)} blocks: longer than the whole "
                         f"pool of {scheduler.num_blocks} blocks")
    if not scheduler.enable_chunked_prefill and longest > scheduler.max_num_batched_tokens:
        raise ValueError(f"prompt of {len(prompt)} tokens with max_tokens={max_tokens} may need "
                         f"{longest} tokens in one step: longer than max_num_batched_tokens="
                         f"{scheduler.max_num_batched_tokens} without chunked prefill")
    return prompt


class Scheduler:
    """Waiting and running queues over a KV block pool, FCFS, running first, preemption of the
    newest by recompute (module docstring: the policy and the contract)."""

    def __init__(self, num_blocks: int, block_size: int, max_num_batched_tokens: int,
                 max_num_seqs: int, *, enable_chunked_prefill: bool = True,
                 enable_prefix_caching: bool = False):
        self.num_blocks = check_int("num_blocks", num_blocks, minimum=1)
        self.block_size = check_int("block_size", block_size, minimum=1)
        self.max_num_batched_tokens = check_int("max_num_batched_tokens", max_num_batched_tokens, minimum=1)
        self.max_num_seqs = check_int("max_num_seqs", max_num_seqs, minimum=1)
        self.enable_chunked_prefill = check_bool("enable_chunked_prefill", enable_chunked_prefill)
        self.enable_prefix_caching = check_bool("enable_prefix_caching", enable_prefix_caching)
        self.pool = BlockPool(num_blocks, block_size, enable_prefix_caching)
        self.requests: dict = {}          # id -> Request (waiting or running)
        self._waiting: list = []          # ids, front first
        self._running: list = []          # ids, oldest admission first
        self._finished_since_last: list = []
        self._pending: SchedulerOutput | None = None
        self._steps = 0

    # -- observables ------------------------------------------------------------------------
    @property
    def waiting(self) -> list:
        return list(self._waiting)

    @property
    def running(self) -> list:
        return list(self._running)

    @property
    def num_free_blocks(self) -> int:
        return len(self.pool.free_queue)

    def has_unfinished_requests(self) -> bool:
        return bool(self._waiting or self._running)

    # -- requests ---------------------------------------------------------------------------
    def add_request(self, request_id, prompt, max_tokens: int) -> None:
        prompt = check_new_request(self, request_id, prompt, max_tokens)
        self.requests[request_id] = Request(request_id, prompt, max_tokens)
        self._waiting.append(request_id)

    # -- one step ---------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        if self._pending is not None:
            raise RuntimeError("schedule() called again before update() of the previous output")
        self._steps += 1
        out = SchedulerOutput(step=self._steps, finished=self._finished_since_last)
        self._finished_since_last = []
        budget = self.max_num_batched_tokens

        # 1. running requests first, in queue order
        i = 0
        while i < len(self._running) and budget > 0:
            req = self.requests[self._running[i]]
            n = min(req.num_tokens - req.num_computed_tokens, budget)
            if not self._allocate_or_preempt(req, n, out):
                break  # req preempted itself
            self._record(req, n, out)
            budget -= n
            i += 1

        # 2. then waiting, FCFS, unless this step preempted
        if not out.preempted:
            skipped = []
            while self._waiting and budget > 0 and len(self._running) < self.max_num_seqs:
                req = self.requests[self._waiting[0]]
                hits = self.pool.hits(req.tokens)
                hit_tokens = len(hits) * self.block_size
                n = req.num_tokens - hit_tokens
                if not self.enable_chunked_prefill and n > budget:
                    skipped.append(self._waiting.pop(0))  # waits; later requests may pass it
                    continue
                n = min(n, budget)
                new = blocks_for(hit_tokens + n, self.block_size) - len(hits)
                if not self.pool.can_take(new, hits):
                    break  # no preemption for a waiting request
                self.pool.take_hits(hits)
                req.blocks = hits + [self.pool.take() for _ in range(new)]
                req.num_computed_tokens = hit_tokens
                self._waiting.pop(0)
                self._running.append(req.request_id)
                self._record(req, n, out)
                budget -= n
            self._waiting[0:0] = skipped

        self._pending = out
        return out

    def _allocate_or_preempt(self, req: Request, n: int, out: SchedulerOutput) -> bool:
        """Blocks for ``req``'s next ``n`` tokens, preempting the newest running request until
        they fit. False if ``req`` itself was preempted."""
        while True:
            new = blocks_for(req.num_computed_tokens + n, self.block_size) - len(req.blocks)
            if new <= self.num_free_blocks:
                req.blocks += [self.pool.take() for _ in range(new)]
                return True
            victim = self.requests[self._running.pop()]  # the newest running request
            self._preempt(victim)
            out.preempted.append(victim.request_id)
            if victim is req:
                return False

    def _preempt(self, req: Request) -> None:
        """Preemption by recompute: free the blocks, back to the front of waiting, 0 computed."""
        self.pool.free(req.blocks)
        req.blocks = []
        req.num_computed_tokens = 0
        self._waiting.insert(0, req.request_id)

    def _record(self, req: Request, n: int, out: SchedulerOutput) -> None:
        rid, start = req.request_id, req.num_computed_tokens
        out.num_scheduled_tokens[rid] = n
        out.num_computed_tokens[rid] = start
        out.block_tables[rid] = list(req.blocks)
        out.token_ids[rid] = list(req.tokens[start:start + n])
        req.num_computed_tokens = start + n
        if req.num_computed_tokens == req.num_tokens:
            out.sampling.append(rid)

    # -- after the engine ran the step ------------------------------------------------------
    def update(self, output, sampled, stopped=()) -> list:
        if self._pending is None or output != self._pending:
            raise ValueError("output must be the SchedulerOutput of the last schedule() "
                             "(each output is updated once, in order)")
        if not isinstance(sampled, dict):
            raise TypeError(f"sampled must be a dict of request id -> token id, got {type(sampled).__name__}")
        expected = self._pending.sampling
        if set(sampled) != set(expected):
            raise ValueError(f"sampled must have exactly the ids that sample this step {expected!r}, "
                             f"got {sorted(map(repr, sampled))}")
        for rid, token in sampled.items():
            if not is_int(token):
                raise TypeError(f"sampled[{rid!r}] must be an int token id, got {token!r}")
            if token < 0:
                raise ValueError(f"sampled[{rid!r}] must be >= 0, got {token}")
        if isinstance(stopped, (str, bytes)) or not hasattr(stopped, "__iter__"):
            raise TypeError(f"stopped must be a collection of request ids, got {stopped!r}")
        stopped = list(stopped)
        for rid in stopped:
            if rid not in sampled:
                raise ValueError(f"stopped: {rid!r} did not sample this step")

        for rid in output.num_scheduled_tokens:  # the step's KV is computed: cache its full blocks
            req = self.requests[rid]
            self.pool.cache_full_blocks(req, req.num_computed_tokens)
        finished = []
        for rid in expected:
            req = self.requests[rid]
            req.append(sampled[rid])
            if len(req.output) >= req.max_tokens or rid in stopped:
                finished.append(rid)
        for rid in finished:
            req = self.requests.pop(rid)
            self._running.remove(rid)
            self.pool.free(req.blocks)
            req.blocks = []
        self._finished_since_last += finished
        self._pending = None
        return finished
