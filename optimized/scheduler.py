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

Everything else is the reference's own code: the classes here subclass it and override only the
methods these three changes touch. The decisions are the reference's, step for step
(spec_tests/scheduler runs the whole spec on it, block ids included).
"""
from __future__ import annotations

import heapq
from collections import OrderedDict, deque

from reference import scheduler as ref
from reference.scheduler import SchedulerOutput, blocks_for, check_new_request

__all__ = ["Scheduler"]  # the contract: what an implementation must provide
__optional__: list[str] = []


class Request(ref.Request):
    """The reference's request, its tokens kept in one list as they grow."""

    def __init__(self, request_id, prompt: tuple, max_tokens: int):
        super().__init__(request_id, prompt, max_tokens)
        self.all_tokens: list[int] = list(prompt)

    @property
    def tokens(self) -> tuple:
        return tuple(self.all_tokens)

    @property
    def num_tokens(self) -> int:
        return len(self.all_tokens)

    def append(self, token: int) -> None:
        self.output.append(token)
        self.all_tokens.append(token)


class FreeQueue:
    """The free blocks in order (head = next to take), with the three list operations the
    reference's BlockPool uses, each O(1): ``remove`` (a prefix hit revives a free block),
    ``pop(0)`` and ``append``."""

    def __init__(self, blocks):
        self._order = OrderedDict.fromkeys(blocks)

    def __len__(self) -> int:
        return len(self._order)

    def remove(self, block: int) -> None:
        del self._order[block]

    def pop(self, index: int) -> int:
        assert index == 0, "only the head is taken"
        return self._order.popitem(last=False)[0]

    def append(self, block: int) -> None:
        self._order[block] = None


class BlockPool(ref.BlockPool):
    """The reference's pool over a FreeQueue."""

    def __init__(self, num_blocks: int, block_size: int, caching: bool):
        super().__init__(num_blocks, block_size, caching)
        self.free_queue = FreeQueue(range(num_blocks))


class Scheduler(ref.Scheduler):
    """The reference's scheduler with a deque of waiting ids and, without chunked prefill or
    prefix caching, a heap of their token counts (module docstring)."""

    def __init__(self, num_blocks: int, block_size: int, max_num_batched_tokens: int,
                 max_num_seqs: int, *, enable_chunked_prefill: bool = True,
                 enable_prefix_caching: bool = False):
        super().__init__(num_blocks, block_size, max_num_batched_tokens, max_num_seqs,
                         enable_chunked_prefill=enable_chunked_prefill,
                         enable_prefix_caching=enable_prefix_caching)
        self.pool = BlockPool(self.num_blocks, self.block_size, self.enable_prefix_caching)
        self._waiting: deque = deque()    # ids, front first
        self._needs: list = []            # heap of (num_tokens, serial, id) of waiting requests, lazily pruned
        self._pushed = 0

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

    def _preempt(self, req: Request) -> None:
        super()._preempt(req)
        self._push_need(req)

    def _record(self, req: Request, n: int, out: SchedulerOutput) -> None:
        """The reference's, the step's tokens sliced from the request's one list (the reference
        builds ``prompt + output`` for every request in every step)."""
        rid, start = req.request_id, req.num_computed_tokens
        out.num_scheduled_tokens[rid] = n
        out.num_computed_tokens[rid] = start
        out.block_tables[rid] = list(req.blocks)
        out.token_ids[rid] = req.all_tokens[start:start + n]
        req.num_computed_tokens = start + n
        if req.num_computed_tokens == req.num_tokens:
            out.sampling.append(rid)
