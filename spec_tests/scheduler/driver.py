"""A toy engine that drives a scheduler and checks the law of every step (no reference needed).

``Run(scheduler, cfg)`` plays the engine: ``add`` queues a request, ``step`` calls ``schedule()``,
writes the scheduled tokens into a toy KV store (a dict slot -> token id, slots through the block
tables), runs a toy *model* whose next token is a function of the request's whole token sequence
as read back from the KV store, and calls ``update()`` with the sampled tokens (a request stops
when it samples ``STOP``). So a scheduler that hands a request a block another request still
writes, forgets a preempted request's lost KV, or serves a prefix-cache hit of another prefix
makes the model read wrong tokens -- and the laws below say where first.

The laws of one step (the contract's, for every implementation; ``check_schedule``,
``check_update``):

- budgets: at most ``max_num_batched_tokens`` tokens, each scheduled request >= 1 token, at most
  ``max_num_seqs`` running; a step with unfinished requests schedules something;
- blocks: each scheduled table has ``ceil((computed + scheduled) / block_size)`` ids in
  ``[0, num_blocks)``; a request that stays running keeps its table as a prefix; running
  requests share no block (with prefix caching: only a full block at the same index whose
  prefix their tokens share); blocks held + ``num_free_blocks`` == ``num_blocks``;
- tokens: the computed count of a request that stays running is what it had computed; a newly
  admitted one starts at 0 (a block-aligned hit <= len - 1 with prefix caching); ``token_ids``
  are its tokens at those positions; the KV store holds its tokens at every computed position;
  ``sampling`` is exactly the requests whose computed tokens reach their length;
- policy: running requests are scheduled first, in queue order (a prefix of the running queue
  minus the preempted); the preempted are the newest running requests, newest first, and go to
  the front of waiting; nothing is admitted in a step that preempted; admission takes waiting
  requests from the front in order, skipping (without chunked prefill only) a request whose
  uncomputed tokens exceed the budget left; admitted requests join the end of running;
- update: a request finishes when it has ``max_tokens`` tokens or stopped; the finished leave
  the queues and are the next output's ``finished``;
- no starvation: the steps with unfinished requests never exceed the sum over the requests added
  of ``len(prompt) + max_tokens - 1`` (the oldest running request never loses its progress and
  gains a token every step), and every finished request's tokens equal ``alone(prompt,
  max_tokens)``: its tokens run alone in a big pool.
"""
from __future__ import annotations

from typing import NamedTuple

ERRORS = (TypeError, ValueError, KeyError, RuntimeError)
VOCAB = 4
STOP = 3


class Config(NamedTuple):
    num_blocks: int
    block_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    chunked: bool = True
    prefix: bool = False

    def make(self, cls):
        return cls(self.num_blocks, self.block_size, self.max_num_batched_tokens, self.max_num_seqs,
                   enable_chunked_prefill=self.chunked, enable_prefix_caching=self.prefix)

    def snippet(self) -> str:
        return (f"s = Scheduler({self.num_blocks}, {self.block_size}, {self.max_num_batched_tokens}, "
                f"{self.max_num_seqs}, enable_chunked_prefill={self.chunked}, "
                f"enable_prefix_caching={self.prefix})")


def next_token(seq) -> int:
    """The toy model: the next token is a function of the whole sequence."""
    h = len(seq)
    for t in seq:
        h = (h * 31 + t + 1) % 1_000_003
    return h % VOCAB


def alone(prompt, max_tokens: int) -> list:
    """The request's tokens run alone in a big pool: the toy model until max_tokens or STOP."""
    seq, out = list(prompt), []
    while len(out) < max_tokens:
        t = next_token(seq)
        out.append(t)
        seq.append(t)
        if t == STOP:
            break
    return out


def blocks_for(n: int, bs: int) -> int:
    return -(-n // bs)


class Step(NamedTuple):
    """What a step's output said (block tables kept apart: their ids are a choice)."""
    scheduled: list       # [(id, n)] in output order
    computed: dict
    token_ids: dict
    sampling: list
    preempted: list
    finished_before: list
    finished: list        # update's return
    tables: dict


class Run:
    """One engine run over a scheduler (module docstring)."""

    def __init__(self, sched, cfg: Config, check: bool = True):
        self.s, self.cfg, self.check = sched, cfg, check
        self.kv: dict = {}          # slot -> token id
        self.prompts: dict = {}     # id -> prompt (live and finished)
        self.max_tokens: dict = {}
        self.out: dict = {}         # id -> generated tokens
        self.live: set = set()
        self.tables: dict = {}      # running id -> its last table
        self.computed: dict = {}    # running id -> computed tokens after the last step
        self.finished_last: list = []
        self.busy_steps = 0
        self.work = 0               # sum of len(prompt) + max_tokens - 1 over the added requests
        self.log: list = []         # lines of Python that replay the run

    def tokens(self, rid) -> list:
        return list(self.prompts[rid]) + self.out[rid]

    # -- calls --------------------------------------------------------------------------------
    def add(self, rid, prompt, max_tokens):
        """``add_request``; returns ("ok", None) or ("err", type)."""
        try:
            self.s.add_request(rid, prompt, max_tokens)
        except ERRORS as exc:
            self.log.append(f"s.add_request({rid!r}, {prompt!r}, {max_tokens!r})  # -> {type(exc).__name__}")
            return ("err", type(exc))
        self.log.append(f"s.add_request({rid!r}, {prompt!r}, {max_tokens!r})")
        self.prompts[rid], self.max_tokens[rid], self.out[rid] = list(prompt), max_tokens, []
        self.live.add(rid)
        self.work += len(prompt) + max_tokens - 1
        return ("ok", None)

    def state(self) -> tuple:
        return (list(self.s.waiting), list(self.s.running), self.s.num_free_blocks,
                bool(self.s.has_unfinished_requests()))

    def step(self) -> Step:
        pre_waiting, pre_running, _, busy = self.state()
        o = self.s.schedule()
        self.log.append("o = s.schedule()")
        st = Step([(k, v) for k, v in dict(o.num_scheduled_tokens).items()], dict(o.num_computed_tokens),
                  {k: list(v) for k, v in dict(o.token_ids).items()}, list(o.sampling), list(o.preempted),
                  list(o.finished), [], {k: list(v) for k, v in dict(o.block_tables).items()})
        if self.check:
            self.check_schedule(st, pre_waiting, pre_running, busy)
        # the toy engine: write the scheduled tokens' KV, sample from what the KV store holds
        bs = self.cfg.block_size
        for rid, n in st.scheduled:
            table, c = st.tables[rid], st.computed[rid]
            for p, t in zip(range(c, c + n), st.token_ids[rid]):
                self.kv[table[p // bs] * bs + p % bs] = t
        sampled, stopped = {}, []
        for rid in st.sampling:
            table, length = st.tables[rid], len(self.tokens(rid))
            seq = [self.kv.get(table[p // bs] * bs + p % bs) for p in range(length)]
            t = next_token([x if x is not None else -1 for x in seq])
            sampled[rid] = t
            if t == STOP:
                stopped.append(rid)
        finished = list(self.s.update(o, sampled, stopped))
        self.last_update = (sampled, stopped)
        self.log.append(f"s.update(o, {sampled!r}, {stopped!r})  # -> {finished!r}")
        st = st._replace(finished=finished)
        if busy:
            self.busy_steps += 1
        for rid, t in sampled.items():
            self.out[rid].append(t)
        if self.check:
            self.check_update(st, sampled, stopped)
        for rid in finished:
            self.live.discard(rid)
        self.finished_last = finished
        return st

    # -- the laws of a step ----------------------------------------------------------------------
    def fail(self, msg: str):
        raise AssertionError(msg + "\n  reproduce:\n    " + "\n    ".join([self.cfg.snippet()] + self.log))

    def check_schedule(self, st: Step, pre_waiting, pre_running, busy):
        cfg, bs, nb = self.cfg, self.cfg.block_size, self.cfg.num_blocks
        ids = [rid for rid, _ in st.scheduled]
        total = sum(n for _, n in st.scheduled)
        if total > cfg.max_num_batched_tokens:
            self.fail(f"the step schedules {total} tokens {st.scheduled}; max_num_batched_tokens is "
                      f"{cfg.max_num_batched_tokens}")
        if busy and not ids:
            self.fail("the step schedules nothing although requests are unfinished")
        empty = [rid for rid, n in st.scheduled if n < 1]
        if empty:
            self.fail(f"the step schedules {empty} with no token ({st.scheduled}): a request in "
                      f"num_scheduled_tokens is given at least one")
        if sorted(map(repr, st.finished_before)) != sorted(map(repr, self.finished_last)):
            self.fail(f"output.finished = {st.finished_before}; the previous update finished {self.finished_last}")
        waiting, running, free, _ = self.state()
        if len(running) > cfg.max_num_seqs:
            self.fail(f"{len(running)} requests run {running}; max_num_seqs is {cfg.max_num_seqs}")
        # preemption: the newest running requests, newest first, to the front of waiting
        k = len(st.preempted)
        if st.preempted != list(reversed(pre_running))[:k]:
            self.fail(f"preempted {st.preempted}; the newest running requests (end of {pre_running}) "
                      f"are preempted first")
        kept = pre_running[:len(pre_running) - k]
        n_run = sum(1 for rid in ids if rid in pre_running)
        if ids[:n_run] != kept[:n_run]:
            self.fail(f"scheduled {ids}: the running requests {kept} are scheduled first, in queue order")
        admitted = ids[n_run:]
        if k and admitted:
            self.fail(f"admitted {admitted} in a step that preempted {st.preempted}")
        if running != kept + admitted:
            self.fail(f"running is {running} after the step; expected {kept + admitted} (the running "
                      f"requests not preempted, then the admitted ones in order)")
        # FCFS admission: the front of waiting, in order; skipped only without chunked prefill
        budget = cfg.max_num_batched_tokens - sum(n for rid, n in st.scheduled if rid in pre_running)
        rest = list(pre_waiting)
        for rid in admitted:
            if rid not in rest:
                self.fail(f"{rid!r} admitted but it was not waiting ({pre_waiting})")
            for skipped in rest[:rest.index(rid)]:
                # passing it is lawful only if its uncomputed tokens exceed the budget left; they
                # are all its tokens without a prefix-cache hit (with one, the hit is the engine's)
                if cfg.chunked or len(self.tokens(skipped)) <= budget:
                    self.fail(f"{rid!r} admitted before {skipped!r}, which waited ahead of it (FCFS; "
                              f"only without chunked prefill a request whose tokens exceed the budget "
                              f"left, {budget}, is passed)")
            rest = rest[rest.index(rid) + 1:]
            budget -= dict(st.scheduled)[rid]
        expected_waiting = list(reversed(st.preempted)) + [r for r in pre_waiting if r not in admitted]
        if waiting != expected_waiting:
            self.fail(f"waiting is {waiting} after the step; expected {expected_waiting} (the preempted "
                      f"{st.preempted} at its front, newest first... then the requests not admitted)")
        # tokens and blocks of every scheduled request
        for rid, n in st.scheduled:
            toks, c, table = self.tokens(rid), st.computed[rid], st.tables[rid]
            if n < 1:
                self.fail(f"{rid!r} scheduled with {n} tokens")
            if rid in pre_running:
                if c != self.computed[rid]:
                    self.fail(f"{rid!r} has {c} computed tokens; it had {self.computed[rid]} after the last step")
                if table[:len(self.tables[rid])] != self.tables[rid]:
                    self.fail(f"{rid!r}'s block table {table} does not extend its table {self.tables[rid]}")
            elif c != 0 and not (cfg.prefix and c % bs == 0 and c <= len(toks) - 1):
                self.fail(f"{rid!r} admitted with {c} computed tokens; it starts at 0"
                          + (" or at a block-aligned hit < its length" if cfg.prefix else ""))
            if c + n > len(toks):
                self.fail(f"{rid!r}: {c} computed + {n} scheduled tokens exceed its {len(toks)} tokens")
            if st.token_ids[rid] != toks[c:c + n]:
                self.fail(f"token_ids[{rid!r}] = {st.token_ids[rid]}; its tokens at {c}..{c + n} are {toks[c:c + n]}")
            if len(table) != blocks_for(c + n, bs) or not all(isinstance(b, int) and 0 <= b < nb for b in table):
                self.fail(f"{rid!r} holds {c + n} tokens in the block table {table}; it needs "
                          f"{blocks_for(c + n, bs)} block ids in [0, {nb})")
            for p in range(c):
                got = self.kv.get(table[p // bs] * bs + p % bs)
                if got != toks[p]:
                    self.fail(f"{rid!r} has {c} computed tokens, but its position {p} (block {table[p // bs]}) "
                              f"holds token {got}, not its token {toks[p]}: KV lost or overwritten")
            self.tables[rid], self.computed[rid] = table, c + n
        for rid in list(self.tables):
            if rid not in running:
                del self.tables[rid], self.computed[rid]
        held: dict = {}
        for rid in running:
            if rid not in self.tables:
                self.fail(f"{rid!r} runs but was not scheduled when it was admitted")
            for i, b in enumerate(self.tables[rid]):
                if b in held:
                    other, j = held[b]
                    shared = (cfg.prefix and i == j and (i + 1) * bs <= min(self.computed[rid], self.computed[other])
                              and self.tokens(rid)[:(i + 1) * bs] == self.tokens(other)[:(i + 1) * bs])
                    if not shared:
                        self.fail(f"block {b} is held by {other!r} (index {j}) and {rid!r} (index {i})")
                held[b] = (rid, i)
        if len(held) + free != nb:
            self.fail(f"{len(held)} blocks held by running requests + {free} free != num_blocks {nb}")
        sampling = [rid for rid, n in st.scheduled if st.computed[rid] + n == len(self.tokens(rid))]
        if st.sampling != sampling:
            self.fail(f"sampling = {st.sampling}; the requests whose computed tokens reach their length: {sampling}")

    def check_update(self, st: Step, sampled: dict, stopped: list):
        done = [rid for rid in st.sampling if rid in stopped or len(self.out[rid]) >= self.max_tokens[rid]]
        if st.finished != done:
            self.fail(f"update returned {st.finished}; finished (max_tokens reached or stopped): {done}")
        waiting, running, _, unfinished = self.state()
        for rid in done:
            if rid in waiting or rid in running:
                self.fail(f"{rid!r} finished but is still queued")
            if self.out[rid] != alone(self.prompts[rid], self.max_tokens[rid]):
                self.fail(f"{rid!r} produced {self.out[rid]}; run alone it produces "
                          f"{alone(self.prompts[rid], self.max_tokens[rid])}")
        for rid in done:
            self.tables.pop(rid, None)
            self.computed.pop(rid, None)
        if unfinished != bool(waiting or running):
            self.fail(f"has_unfinished_requests() = {unfinished} with waiting {waiting}, running {running}")
        if self.busy_steps > self.work:
            self.fail(f"{self.busy_steps} steps with unfinished requests, more than the {self.work} tokens "
                      f"the requests added can need: a request starves")


def compare(got: Step, want: Step, got_state, want_state, where: str, blocks: bool = False) -> None:
    """The implementation's step equals the reference's (block ids only when ``blocks``)."""
    for field in ("scheduled", "computed", "token_ids", "sampling", "preempted", "finished_before", "finished"):
        g, w = getattr(got, field), getattr(want, field)
        if field in ("computed", "token_ids"):
            g, w = sorted(g.items(), key=repr), sorted(w.items(), key=repr)
        assert g == w, f"{where}: {field} = {g}; the reference: {w}"
    if blocks:
        assert got.tables == want.tables, f"{where}: block_tables = {got.tables}; the reference: {want.tables}"
    assert got_state == want_state, (f"{where}: (waiting, running, num_free_blocks, has_unfinished) = "
                                     f"{got_state}; the reference: {want_state}")
