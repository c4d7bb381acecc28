"""The scheduler with a step cost that does not grow with the waiting queue (same contract as
``reference/scheduler.py``, whose docstring states it; same names and signatures).

What changes, and why (docs/scheduler.md, "Measured numbers"):

- the waiting queue is a ``deque`` (the reference's list pays a shift per ``pop(0)``/``insert(0)``);
- without chunked prefill and without prefix caching a waiting request needs all its tokens, so
  a heap of the waiting requests' token counts says at once when *every* waiting request exceeds
  the budget left: the step skips them all without looking (the reference, like vLLM v1, looks at
  each one: O(waiting) per step). When one may fit, the step scans as the reference does;
- a request keeps its tokens in one list (the reference rebuilds ``prompt + output`` per use);
- the free queue is an ordered dict (a prefix hit on a free block leaves it in O(1)).

The decisions are the reference's, step for step (spec_tests/scheduler runs the whole spec on it,
block ids included).
"""
from __future__ import annotations

import heapq
from collections import OrderedDict, deque

from reference._checks import check_int, is_int
from reference.scheduler import SchedulerOutput, blocks_for, check_bool, check_new_request, check_prompt, check_request_id

__all__ = ["Scheduler"]  # the contract: what an implementation must provide
__optional__: list[str] = []


class Request:
    """One request's state: its tokens, how many are computed, its blocks."""

    def __init__(self, request_id, prompt: tuple, max_tokens: int):
        self.request_id = request_id
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.output: list[int] = []
        self.all_tokens: list[int] = list(prompt)
        self.num_computed_tokens = 0
        self.blocks: list[int] = []

    @property
    def tokens(self) -> tuple:
        return tuple(self.all_tokens)

    @property
    def num_tokens(self) -> int:
        return len(self.all_tokens)

    def append(self, token: int) -> None:
        self.output.append(token)
        self.all_tokens.append(token)


class BlockPool:
    """The KV blocks: a free queue (least recently freed at the head), refcounts, and -- with
    prefix caching -- the key of each cached full block (the whole token prefix it ends)."""

    def __init__(self, num_blocks: int, block_size: int, caching: bool):
        self.block_size = block_size
        self.caching = caching
        self.free_queue = OrderedDict.fromkeys(range(num_blocks))  # head = next to take
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
                del self.free_queue[b]
            self.refs[b] += 1

    def take(self) -> int:
        b, _ = self.free_queue.popitem(last=False)
        key = self.block_key.pop(b, None)
        if key is not None:  # evicted: its slot is reused
            del self.cache[key]
        self.refs[b] = 1
        return b

    def free(self, blocks: list[int]) -> None:
        for b in reversed(blocks):  # the last block first: the chain is evicted from its end
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_queue[b] = None

    def cache_full_blocks(self, request: Request, n_tokens: int) -> None:
        """The first ``n_tokens`` tokens of ``request`` are computed: cache its full blocks."""
        if not self.caching:
            return
        tokens = tuple(request.all_tokens[:n_tokens])
        for i in range(n_tokens // self.block_size):
            b, key = request.blocks[i], tokens[:(i + 1) * self.block_size]
            if b in self.block_key or key in self.cache:
                continue
            self.cache[key] = b
            self.block_key[b] = key


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
        self._waiting: deque = deque()    # ids, front first
        self._needs: list = []            # heap of (num_tokens, serial, id) of waiting requests, lazily pruned
        self._pushed = 0
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
        self._push_need(self.requests[request_id])

    # -- the waiting requests' token counts --------------------------------------------------
    def _push_need(self, req: Request) -> None:
        """Only without chunked prefill and prefix caching is a request's need its token count."""
        if not self.enable_chunked_prefill and not self.enable_prefix_caching:
            self._pushed += 1  # a tie-breaker: ids of different types do not compare
            heapq.heappush(self._needs, (req.num_tokens, self._pushed, req.request_id))

    def _min_need(self) -> int:
        """The fewest tokens a waiting request needs (entries of requests no longer waiting, or
        waiting with another count, are dropped as they surface)."""
        while self._needs:
            n, _, rid = self._needs[0]
            req = self.requests.get(rid)
            if req is not None and req.num_computed_tokens == 0 and not req.blocks \
                    and req.num_tokens == n:
                return n
            heapq.heappop(self._needs)
        return 1 << 62

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
                if not self.enable_chunked_prefill and not self.enable_prefix_caching \
                        and self._min_need() > budget:
                    break  # every waiting request would be skipped: skip them all at once
                req = self.requests[self._waiting[0]]
                hits = self.pool.hits(req.tokens) if self.enable_prefix_caching else []
                hit_tokens = len(hits) * self.block_size
                n = req.num_tokens - hit_tokens
                if not self.enable_chunked_prefill and n > budget:
                    skipped.append(self._waiting.popleft())  # waits; later requests may pass it
                    continue
                n = min(n, budget)
                new = blocks_for(hit_tokens + n, self.block_size) - len(hits)
                if not self.pool.can_take(new, hits):
                    break  # no preemption for a waiting request
                self.pool.take_hits(hits)
                req.blocks = hits + [self.pool.take() for _ in range(new)]
                req.num_computed_tokens = hit_tokens
                self._waiting.popleft()
                self._running.append(req.request_id)
                self._record(req, n, out)
                budget -= n
            self._waiting.extendleft(reversed(skipped))

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
        self._waiting.appendleft(req.request_id)
        self._push_need(req)

    def _record(self, req: Request, n: int, out: SchedulerOutput) -> None:
        rid, start = req.request_id, req.num_computed_tokens
        out.num_scheduled_tokens[rid] = n
        out.num_computed_tokens[rid] = start
        out.block_tables[rid] = list(req.blocks)
        out.token_ids[rid] = req.all_tokens[start:start + n]
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
