"""Brute-force oracles of the prefix cache."""
from __future__ import annotations


def common_blocks(a, b, block_size: int) -> int:
    """Full blocks of the longest common block-aligned prefix of token lists ``a`` and ``b``."""
    n = 0
    while (n + 1) * block_size <= min(len(a), len(b)) and \
            list(a[n * block_size:(n + 1) * block_size]) == list(b[n * block_size:(n + 1) * block_size]):
        n += 1
    return n


def hit_bound(tokens, extra_key, computed, block_size: int) -> int:
    """An upper bound on the hit blocks of ``tokens``: the longest block-aligned common prefix with
    any sequence ever computed under the same extra key (``computed``: (tokens, extra_key,
    computed token count) triples), capped so that the last token is not a hit."""
    best = 0
    for other, key, n in computed:
        if key == extra_key:
            best = max(best, common_blocks(tokens, list(other)[:n], block_size))
    return min(best, (len(tokens) - 1) // block_size)


def resident_hits(tokens, extra_key, resident: dict, block_size: int) -> list:
    """The exact hits: ``resident`` maps each cached block to the (extra_key, prefix tuple) it ends.
    Walk the prompt's full blocks (all but the last token) while each prefix is resident."""
    where = {v: b for b, v in resident.items()}
    hits = []
    for i in range((len(tokens) - 1) // block_size):
        b = where.get((extra_key, tuple(tokens[:(i + 1) * block_size])))
        if b is None:
            break
        hits.append(b)
    return hits


ERRORS = (TypeError, ValueError, KeyError)


def call(c, op: str, args: tuple) -> tuple:
    """``c.op(*args)`` as ``("ok", result)`` or ``("err", exception type)``."""
    try:
        out = getattr(c, op)(*args)
    except ERRORS as exc:
        return ("err", type(exc))
    if op == "lookup" and isinstance(out, tuple):
        out = list(out)
    return ("ok", out)


def observe_all(c, num_blocks: int, seq_ids) -> tuple:
    """Every observable of a prefix cache (the shape of ``LawModel.observed``): free queue, free
    count, the block table of each id of ``seq_ids`` that is live (``block_table`` of one that is
    not raises ``KeyError``), ref counts, ``is_cached``, stats."""
    tables = {}
    for s in seq_ids:
        try:
            tables[s] = c.block_table(s)
        except KeyError:
            pass
    return (c.free_queue_order(), c.num_free_blocks, tables,
            [c.ref_count(b) for b in range(num_blocks)], [c.is_cached(b) for b in range(num_blocks)],
            c.stats())


def run_law(cls, num_blocks: int, block_size: int, calls, policy=None) -> LawModel:
    """Drive ``cls(num_blocks, block_size)`` through ``calls`` ((op, args) pairs) beside a
    ``LawModel``: every result and every observable checked after every call."""
    c, m = cls(num_blocks, block_size), LawModel(num_blocks, block_size, policy)
    ids = sorted({args[0] for op, args in calls if op != "lookup"}, key=repr)
    done = []
    for op, args in calls:
        out = call(c, op, args)
        try:
            m.step(op, tuple(args), out, observe_all(c, num_blocks, ids))
        except AssertionError as exc:
            steps = "\n    ".join(done + [f"c.{op}{tuple(args)!r}  # <- here"])
            raise AssertionError(f"{exc}\n  calls:\n    c = PrefixCache({num_blocks}, {block_size})"
                                 f"\n    {steps}") from None
        done.append(f"c.{op}{tuple(args)!r}  # -> {out[1] if out[0] == 'ok' else out[1].__name__}")
    return m


class LawModel:
    """The law of the prefix cache, apart from the reference's choices: a brute-force model that
    follows an implementation step by step and checks that each step is *lawful*.

    The law fixes everything but one thing: which block keeps a key when the same full block
    (the same extra key and prefix) is computed more than once. Engines differ there, legitimately:
    the reference keeps the first block cached and leaves the duplicate uncached, nano-vllm moves
    the key to the newest block, vLLM keeps both. So the model learns the set of cached blocks
    from the implementation (``is_cached``) at the one step where it may change by choice --
    ``mark_computed`` -- and checks that the choice is one the law allows:

    - a cached block holds computed KV: the full block of the (extra key, prefix) it stands for,
      written by ``mark_computed`` of a sequence whose table holds it at that place (so a
      partial block, a block past ``n_tokens`` or a reused block is never cached);
    - ``mark_computed(seq, n)`` may only add ``seq``'s own blocks ``i < n // block_size`` under
      their own keys, or drop *another* holder of the same key; a key cached before stays cached,
      and each block computed for the first time (past the prefix served from the cache and
      past earlier ``mark_computed`` calls) leaves its key cached;
    - nothing else changes the cached set but reuse: ``allocate`` hands out misses from the free
      queue's head, and a handed-out block is no longer cached; ``free`` and ``lookup`` change
      nothing cached;
    - the hits of a prompt are exactly as long as the longest run of its block keys that have a
      cached holder (capped so that the last token is computed), and hit ``i`` is *some* holder
      of key ``i`` (which one is the choice);
    - everything else is determined: ref counts (+1 per table holding a block), the free queue
      (ref-count-0 blocks; a revived hit leaves it, misses are popped from its head, ``free``
      appends a table's blocks that reach 0 from its last to its first), the stats, and which
      calls are rejected. Where the choice of holder decides whether an allocation fits (one
      holder free, another in use), either outcome is lawful.

    ``policy="first"`` adds the reference's choice (checked only at token-exact level): the
    first block cached keeps its key, a duplicate is never cached, and a key evicted from its
    holder is cached again by the next ``mark_computed`` that covers a block holding it.
    """

    def __init__(self, num_blocks: int, block_size: int, policy: str | None = None):
        self.nb, self.bs, self.policy = num_blocks, block_size, policy
        self.queue = list(range(num_blocks))
        self.refs = [0] * num_blocks
        self.content: dict = {}   # block -> (extra_key, prefix) whose KV it holds (full, computed)
        self.cached: set = set()  # blocks the implementation says are cached (each has content)
        self.tables: dict = {}    # seq -> block table
        self.prompts: dict = {}   # seq -> (tokens tuple, extra_key)
        self.water: dict = {}     # seq -> full blocks computed so far (hits, then mark_computed)
        self.stats = {"requests": 0, "query_tokens": 0, "hit_tokens": 0}

    # --- derived ------------------------------------------------------------------------------
    def key(self, tokens, extra_key, i: int):
        return (extra_key, tuple(tokens[:(i + 1) * self.bs]))

    def holders(self, key) -> list:
        return sorted(b for b in self.cached if self.content[b] == key)

    def hit_keys(self, tokens, extra_key) -> list:
        keys = []
        for i in range((len(tokens) - 1) // self.bs):
            k = self.key(tokens, extra_key, i)
            if not self.holders(k):
                break
            keys.append(k)
        return keys

    def observed(self) -> tuple:
        """What ``observe`` of a lawful implementation in this state returns."""
        return (list(self.queue), len(self.queue), {s: list(t) for s, t in self.tables.items()},
                list(self.refs), [b in self.cached for b in range(self.nb)], dict(self.stats))

    def state_key(self, perms=((),)) -> tuple:
        """A canonical key of the state, for exploration: sequence ids forgotten (live sequences as
        a sorted tuple), tokens relabelled by each permutation in ``perms`` (a tuple mapping token
        ``t`` to ``perm[t]``; ``()`` is the identity) and the smallest kept; stats left out
        (they never change behaviour)."""
        best = None
        for perm in perms:
            rl = (lambda ts: tuple(perm[t] for t in ts)) if perm else tuple
            seqs = tuple(sorted((rl(self.prompts[s][0]), repr(self.prompts[s][1]),
                                 tuple(self.tables[s]), self.water[s]) for s in self.tables))
            held = {b for t in self.tables.values() for b in t} | self.cached
            content = tuple(sorted((b, repr(self.content[b][0]), rl(self.content[b][1]))
                                   for b in held if b in self.content))
            k = (tuple(self.queue), tuple(sorted(self.cached)), content, seqs)
            best = k if best is None or k < best else best
        return best

    # --- one step -----------------------------------------------------------------------------
    def clone(self) -> "LawModel":
        new = LawModel.__new__(LawModel)
        new.__dict__.update(self.__dict__)
        new.queue, new.refs, new.content, new.cached = list(self.queue), list(self.refs), dict(self.content), set(self.cached)
        new.tables = {s: list(t) for s, t in self.tables.items()}
        new.prompts, new.water, new.stats = dict(self.prompts), dict(self.water), dict(self.stats)
        return new

    def step(self, op: str, args: tuple, outcome: tuple, seen) -> bool:
        """Check one call: ``outcome`` is ``("ok", result)`` or ``("err", exception type)``;
        ``seen`` is the implementation's observation after it (``observe``), or None where the
        caller checks later that nothing changed. Advances the model; returns whether the model's
        state changed. Raises AssertionError naming the broken law."""
        call = f"{op}{args!r}"
        changed = self._step(call, op, args, outcome, seen)
        self.compare(call, seen)
        return changed

    def _step(self, call: str, op: str, args: tuple, outcome: tuple, seen) -> bool:
        ok, got = outcome
        if op == "lookup":
            tokens, extra_key = args
            keys = self.hit_keys(tokens, extra_key)
            assert ok == "ok", f"{call} raised {got.__name__}; a lookup of a valid prompt never fails"
            self.check_hits(call, list(got) if isinstance(got, (list, tuple)) else got, keys)
            return False
        if op == "free":
            (seq,) = args
            if seq not in self.tables:
                assert ok == "err" and issubclass(got, KeyError), f"{call} of a seq not live: expected KeyError, got {outcome}"
                return False
            assert ok == "ok", f"{call} of a live seq raised {got.__name__}"
            table = self.tables.pop(seq)
            del self.prompts[seq], self.water[seq]
            for b in reversed(table):
                self.refs[b] -= 1
                if self.refs[b] == 0:
                    self.queue.append(b)
            return True
        if op == "mark_computed":
            seq, n = args
            if seq not in self.tables:
                assert ok == "err" and issubclass(got, KeyError), f"{call} of a seq not live: expected KeyError, got {outcome}"
                return False
            tokens, extra_key = self.prompts[seq]
            if not 0 <= n <= len(tokens):
                assert ok == "err" and issubclass(got, ValueError), f"{call}: n_tokens outside [0, {len(tokens)}]: expected ValueError, got {outcome}"
                return False
            assert ok == "ok" and got is None, f"{call} returned {outcome}; expected None"
            return self.mark(call, seq, n, seen)
        if op == "allocate":
            return self.allocate(call, args, outcome, seen)
        raise ValueError(op)

    def check_hits(self, call: str, got, keys: list) -> None:
        assert isinstance(got, list) and len(got) == len(keys), (
            f"{call} returned {got!r}: expected {len(keys)} hit blocks (the longest run of the "
            f"prompt's block keys that are cached, at most len - 1 tokens; cached: "
            f"{ {b: self.content[b] for b in sorted(self.cached)} })")
        for i, (b, k) in enumerate(zip(got, keys)):
            hs = self.holders(k)
            assert b in hs, (f"{call}: hit {i} is block {b!r}, which does not hold the cached prefix "
                             f"{k} (its holders: {hs}; block {b!r} holds {self.content.get(b)})")
            if self.policy == "first":
                assert b == hs[0], f"{call}: hit {i} is block {b}; the reference serves {hs[0]}"

    def allocate(self, call: str, args: tuple, outcome: tuple, seen) -> bool:
        seq, tokens, extra_key = args
        ok, got = outcome
        if seq in self.tables:
            assert ok == "err" and issubclass(got, ValueError), f"{call} of a live seq: expected ValueError, got {outcome}"
            return False
        keys = self.hit_keys(tokens, extra_key)
        need = -(-len(tokens) // self.bs) - len(keys)
        some_free = sum(1 for k in keys if any(self.refs[b] == 0 for b in self.holders(k)))
        all_free = sum(1 for k in keys if all(self.refs[b] == 0 for b in self.holders(k)))
        free = len(self.queue)
        if ok == "err":
            assert issubclass(got, ValueError) and need + some_free > free, (
                f"{call} raised {got.__name__}; it fits: {need} misses + at most {some_free} revived "
                f"cached blocks <= {free} free")
            return False
        assert need + all_free <= free, (
            f"{call} succeeded; it cannot fit: {need} misses + {all_free} revived cached blocks > "
            f"{free} free (expected ValueError, out of blocks)")
        assert got == len(keys) * self.bs, (
            f"{call} returned {got!r}; expected {len(keys) * self.bs} hit tokens (cached: "
            f"{ {b: self.content[b] for b in sorted(self.cached)} })")
        assert seen is not None and seq in seen[2], f"{call} succeeded but block_table({seq!r}) is missing"
        table = seen[2][seq]
        assert len(table) == len(keys) + need, f"{call}: table {table}; expected {len(keys) + need} blocks"
        self.check_hits(f"{call} (its block table {table})", table[:len(keys)], keys)
        revived = [b for b in table[:len(keys)] if self.refs[b] == 0]
        rest = [b for b in self.queue if b not in revived]
        assert table[len(keys):] == rest[:need], (
            f"{call}: table {table}; its {need} misses must be the free queue's head {rest[:need]} "
            f"(free queue {self.queue}, less the revived hits {revived})")
        self.queue = rest[need:]
        for b in table[len(keys):]:
            self.content.pop(b, None)          # reused: its old KV is overwritten
            self.cached.discard(b)
        for b in table:
            self.refs[b] += 1
        self.tables[seq] = list(table)
        self.prompts[seq] = (tuple(tokens), extra_key)
        self.water[seq] = len(keys)
        self.stats["requests"] += 1
        self.stats["query_tokens"] += len(tokens)
        self.stats["hit_tokens"] += len(keys) * self.bs
        return True

    def mark(self, call: str, seq, n: int, seen) -> bool:
        tokens, extra_key = self.prompts[seq]
        table, e = self.tables[seq], n // self.bs
        cands = {}
        for i in range(e):
            k = self.key(tokens, extra_key, i)
            self.content[table[i]] = k
            cands[k] = (table[i], i >= self.water[seq])
        now = set(self.cached) if seen is None else {b for b in range(self.nb) if seen[4][b]}
        stray = sorted(b for b in now if b not in self.content)
        assert not stray, (f"{call}: blocks {stray} are cached but hold no computed full block "
                           f"(cached: {sorted(now)}; computed: {self.content})")
        before = {b: self.content[b] for b in self.cached}
        for b in sorted(now | self.cached):
            k = self.content[b]
            old = {x for x, kx in before.items() if kx == k}
            new = {x for x in now if self.content[x] == k}
            if k not in cands:
                assert new == old, (f"{call}: the holders of {k} changed from {sorted(old)} to "
                                    f"{sorted(new)}; this call computed no block of that prefix")
                continue
            b_new, first_time = cands[k]
            assert new <= old | {b_new}, (f"{call}: {k} is now held by {sorted(new)}; only "
                                          f"{sorted(old | {b_new})} may hold it")
            assert new or not old, f"{call}: {k} was cached by {sorted(old)} and is not any more"
            if self.policy == "first":
                want = old or {b_new}
                assert new == want, (f"{call}: {k} is held by {sorted(new)}; the reference keeps "
                                     f"{sorted(want)} (the first block cached keeps its key)")
        for k, (b_new, first_time) in cands.items():
            if first_time:
                assert any(self.content[x] == k for x in now), (
                    f"{call}: block {b_new} now holds {k}, computed for the first time, but no block "
                    f"holding it is cached (cached: {sorted(now)})")
            elif self.policy == "first" and not any(self.content[x] == k for x in now):
                raise AssertionError(f"{call}: {k} is not cached; the reference caches it again in "
                                     f"block {b_new}")
        self.cached = now
        self.water[seq] = max(self.water[seq], e)
        return e > 0

    def compare(self, call: str, seen) -> None:
        """The implementation's observation ``seen`` (``observe``) is this state's; None: not looked."""
        if seen is None:
            return
        want = self.observed()
        names = ("free_queue_order()", "num_free_blocks", "block tables", "ref counts",
                 "is_cached", "stats()")
        for name, g, w in zip(names, seen, want):
            assert g == w, f"after {call}: {name} is {g!r}; the law says {w!r}"
