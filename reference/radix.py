"""A radix prefix cache over token ids (course 03.09-03.11; SGLang's RadixAttention, chapter 6).

The cache remembers, for token sequences whose KV has been computed, the *slots* (indices into the
KV pool) that hold each token's keys and values. A new request asks for the longest cached prefix
of its prompt and prefills only the rest; a finished request inserts its tokens. When the pool
runs low the engine evicts unused entries, least recently used first. SGLang stores this as a
radix tree: each node holds a run of tokens and their slots, a path from the root spells a cached
sequence, and children of a node start with different tokens.

What is observable, and so pinned here, includes the tree's *node boundaries*: eviction frees whole
leaf nodes, and a lock protects whole nodes, so where nodes begin and end decides how many tokens
an ``evict`` frees and which ones. The rules below fix them.

Contract
--------
``RadixCache(page_size=1, policy=None)``. ``page_size >= 1`` tokens form a page, the unit of
caching: every key is cut to a multiple of ``page_size`` (the last partial page is never cached
nor matched). ``policy`` is an eviction policy of ``reference/eviction.py``'s protocol (touch,
copy, remove, priority, victim), one per cache; ``None`` means a fresh ``LRU()``. Token ids are
ints in ``[0, 2**32)``, slots ints in ``[0, 2**63)``. ``extra_key`` is ``None``, a str or an int:
a namespace (a LoRA adapter, a cache salt). Sequences under different extra keys never share
anything.

The tree and its walk. Each node holds a run of ``>= 1`` whole pages with their slots, the locks
taken on it, and an access record (kept by the policy). Children of a node start with different
first pages. A call that walks a key (``match_prefix``, ``insert``) starts at its namespace's root
and follows the child whose first page equals the key's next page; it takes a child's whole run if
the key continues with all of it, and otherwise *stops inside the run*: after the run's pages that
the key matches (at least one) -- because the key ended there or its next page differs. Stopping
inside a run *splits* the node there: a new node takes the matched pages and the child's place,
and the child keeps the rest of its run, under it. The new node holds no lock (the child's locks
stay with the child, below it: the new node is protected exactly when the child is) and starts
with a copy of the child's access record (``policy.copy(child, new)``). The walk's *path* is the
nodes from the root (excluded) to where it stopped; its length is the longest cached prefix of the
key (a multiple of ``page_size``).

Every ``match_prefix`` and ``insert`` call advances a logical clock by one (the first call is time
1; a rejected call does not count) and *touches* every node of its path, root first
(``policy.touch(node, now)``).

``match_prefix(tokens, extra_key=None) -> MatchResult(length, slots, handle)``
    walks ``tokens`` cut to whole pages: ``length`` is the number of tokens matched (a multiple of
    ``page_size``), ``slots`` their slots in order (a sequence of ints: the reference returns a
    list, the optimized an ``array('q')``), ``handle`` the last node of the path: what ``lock``
    takes (for ``length == 0``, a handle that locks nothing).
``insert(tokens, slots, extra_key=None) -> int``
    ``slots`` holds one slot per token (``len(slots) == len(tokens)``). Walks ``tokens`` cut to
    whole pages (``n`` tokens); if the walk matched ``m < n`` tokens, a new leaf holding tokens and
    slots ``[m, n)`` is added under its last node and joins the path. Returns ``m``: how much was
    already cached. The cache keeps its own slots for those, so the caller frees its duplicates
    ``slots[:m]``, and the slots of the cut partial page ``slots[n:]``; slots ``[m, n)`` now belong
    to the cache.
``lock(handle)`` / ``unlock(handle)``
    take / release one lock on ``handle``'s node. A node is *protected* (never evicted) while it
    or a node below it holds a lock: a lock protects the whole path from the root to its handle.
    Locks nest (a node locked twice needs two unlocks); ``unlock`` releases a lock taken on that
    same node (``ValueError`` if it holds none: a lock on a node below does not count). A node
    inserted later under a locked node is not protected.
``evict(n_tokens) -> list[int]``
    frees unprotected leaves until at least ``n_tokens`` tokens are freed or none is left: each
    step evicts the unprotected leaf that ``policy.victim`` picks among all of them (least recently
    used first for LRU); a parent left without children, and unprotected, is a leaf and joins the
    candidates. Returns the freed slots: each evicted node's, in token order, nodes in eviction
    order. Whole nodes are freed, so it may free more than ``n_tokens``; ``evict(0)`` frees nothing.
``total``, ``evictable``, ``protected``
    properties: the number of cached tokens, of those in unprotected nodes, of those in protected
    nodes (``evictable + protected == total``). An unprotected node never has a protected
    descendant, so every evictable token can be freed by ``evict``.

Handles. A handle stays valid while its node is cached, and keeps meaning the same path: a split
puts the new node *above* it. ``lock``/``unlock`` of a handle whose node was evicted, or of another
cache, raises ``ValueError``; of something that is not a handle, ``TypeError``; ``unlock`` of a
handle that holds no lock, ``ValueError``; each message names ``handle``. The empty match's
handle: ``lock``/``unlock`` do nothing.

Where this differs from SGLang (``python/sglang/srt/mem_cache/radix_cache.py``): SGLang stamps the
split-off tail with the current time too (it sets the child's ``last_access_time`` before
splitting), and its new node starts with a fresh record; here only the path is touched and both
halves keep the node's history. SGLang's ``inc_lock_ref``/``dec_lock_ref`` keep one count per node
(the locks on the node and below it, which the optimized tree keeps too) and never check an
unlock; here an unlock must release a lock taken on that node. SGLang's ``insert`` takes the
values and returns the prefix length as here; ``evict`` there calls a callback with each node's
slots instead of returning them.

The law, and the choices it leaves open. Any correct cache gives the same ``match_prefix``
lengths and slots, the same ``insert`` returns, the same sizes, the same node boundaries, accepts
and rejects the same ``lock``/``unlock`` calls, and ``evict`` frees whole unprotected leaves,
children before parents, stopping as soon as ``n_tokens`` are freed (or none is left); under LRU
it never frees a node while a candidate leaf that was not used since before that node's last use
remains -- a node's last use lying between the last walk that passed it whole and the last walk
that touched it at all. Choices the law leaves open (checked only at token-exact, the tests marked
``choice``): the logical clock (one tick per accepted ``match_prefix``/``insert``, none for a
rejected call; mini-sglang stamps with ``time.monotonic_ns``); the upper half of a split is
touched with the walk's path (mini-sglang keeps the old node's stamp for it) and starts with a copy
of the node's policy record (SGLang: a fresh one); ties broken by the policy's ``order`` (the call
order of touches), hence the exact list ``evict`` returns.

Bad input, checked before anything changes (so a rejected call changes nothing, not even the
clock): ``tokens``/``slots`` not a list or tuple, or holding a non-int (``TypeError``), a value out
of range or ``len(slots) != len(tokens)`` (``ValueError``) -- every element is checked, those of
the partial last page that is cut off included; ``extra_key`` not None/str/int
(``TypeError``); ``page_size`` / ``n_tokens`` not an int (``TypeError``) or below 1 / 0
(``ValueError``); a ``policy`` without the protocol's methods (``TypeError``). Each names the
argument. (A bool is neither a token id nor a slot; an implementation may reject it or read it as
0/1, in ``tokens`` and in ``slots``: checking every element's type costs more than the lookup, and
the optimized cache does not.)

This reference is a naive store, on purpose: a flat list of *segments*, one per node, each holding
its whole key from the root (the cached sequence it ends) and the slots of its own run. Matching
scans every segment for the longest common prefix; parents, children and leaves are found by
comparing keys; ``evict`` recomputes the leaves and asks ``policy.victim`` at every step. It is
observably identical to the tree: same results, same node boundaries, same eviction order.
``optimized/radix.py`` is the tree (O(length of the key) per walk, whatever the cache holds).
"""
from __future__ import annotations

from typing import NamedTuple

from reference._checks import check_int, is_int
from reference.eviction import LRU, is_policy

__all__ = ["RadixCache"]  # the contract: what an implementation must provide
__optional__: list[str] = []

TOKEN_LIMIT = 2**32  # token ids are unsigned 32-bit ints
SLOT_LIMIT = 2**63   # slots index a KV pool: int64


# (functional form: the annotations stay types under ``from __future__ import annotations``)
MatchResult = NamedTuple("MatchResult", [("length", int), ("slots", list), ("handle", object)])
MatchResult.__doc__ = "What ``match_prefix`` returns: the matched length, the slots of those tokens, the handle."


def check_ids(name: str, values, limit: int) -> None:
    """``values`` is a list or tuple of ints in ``[0, limit)``; ``TypeError``/``ValueError`` naming ``name``."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list or tuple of ints, got {type(values).__name__}")
    for v in values:
        if not is_int(v):
            raise TypeError(f"{name} must hold ints, got {v!r}")
        if not 0 <= v < limit:
            raise ValueError(f"{name} must hold ints in [0, 2**{limit.bit_length() - 1}), got {v}")


def check_slots(slots, n_tokens: int) -> None:
    check_ids("slots", slots, SLOT_LIMIT)
    if len(slots) != n_tokens:
        raise ValueError(f"slots must hold one slot per token: {len(slots)} slots for {n_tokens} tokens")


def check_extra_key(extra_key) -> None:
    if not (extra_key is None or isinstance(extra_key, str) or is_int(extra_key)):
        raise TypeError(f"extra_key must be None, a str or an int, got {type(extra_key).__name__}")


def check_policy(policy) -> None:
    if not is_policy(policy):
        raise TypeError(f"policy must have the methods touch, copy, remove, priority and victim "
                        f"(reference/eviction.py), got {type(policy).__name__}")


def common_prefix_length(a, b) -> int:
    """The number of leading elements ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class _Segment:
    """One node, flattened: ``key`` is its whole path from the namespace root (the cached sequence
    that ends with this node's run), ``key[start:]`` its run, ``slots`` the run's slots."""

    def __init__(self, namespace, key: tuple, start: int, slots: list):
        self.namespace, self.key, self.start, self.slots = namespace, key, start, slots
        self.held = 0  # locks taken on this node (lock(handle) of this node)

    def __repr__(self) -> str:
        return f"<node {self.namespace!r}:{list(self.key[self.start:])} after {self.start} held={self.held}>"


class RadixCache:
    """A prefix cache with SGLang's radix-tree semantics: match_prefix, insert, lock, unlock,
    evict and the sizes total, evictable, protected (the module docstring is the contract; this
    reference is a naive store)."""

    def __init__(self, page_size: int = 1, policy=None):
        self.page_size = check_int("page_size", page_size, minimum=1)
        if policy is None:
            policy = LRU()
        check_policy(policy)
        self.policy = policy
        self._segments: list[_Segment] = []   # every node of every namespace
        self._empty = _Segment(None, (), 0, [])  # the handle of an empty match
        self._clock = 0

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def total(self) -> int:
        """Cached tokens."""
        return sum(len(s.slots) for s in self._segments)

    @property
    def protected(self) -> int:
        """Cached tokens in protected nodes (holding a lock, or above a node that holds one)."""
        return sum(len(s.slots) for s in self._segments if self._is_protected(s))

    @property
    def evictable(self) -> int:
        """Cached tokens in unprotected nodes."""
        return sum(len(s.slots) for s in self._segments if not self._is_protected(s))

    # -- the walk, by brute force --------------------------------------------------------------
    def _pages(self, tokens) -> tuple:
        return tuple(tokens[: len(tokens) - len(tokens) % self.page_size])

    def _in(self, namespace) -> list[_Segment]:
        return [s for s in self._segments if s.namespace == namespace]

    def _walk(self, namespace, key: tuple) -> list[_Segment]:
        """The path of ``key`` (root first), after splitting the node it stops inside."""
        segments = self._in(namespace)
        common = [common_prefix_length(s.key, key) for s in segments]
        best = max(common, default=0)
        m = best - best % self.page_size  # the longest cached prefix, in whole pages
        # on the path: every segment whose whole key starts ``key`` and ends by ``m``
        path = [s for s, c in zip(segments, common) if c >= len(s.key) and len(s.key) <= m]
        for s, c in zip(segments, common):
            if s.start < m < len(s.key) and c >= m:   # the walk stops inside this segment's run
                path.append(self._split(s, m))
        return sorted(path, key=lambda s: s.start)

    def _split(self, segment: _Segment, m: int) -> _Segment:
        """Cut ``segment`` at path length ``m``: a new segment takes the run before ``m``."""
        cut = m - segment.start
        head = _Segment(segment.namespace, segment.key[:m], segment.start, segment.slots[:cut])
        segment.start, segment.slots = m, segment.slots[cut:]
        self._segments.append(head)
        self.policy.copy(segment, head)
        return head

    def _touch(self, path: list[_Segment]) -> None:
        for s in path:
            self.policy.touch(s, self._clock)

    # -- the contract --------------------------------------------------------------------------
    def match_prefix(self, tokens, extra_key=None) -> MatchResult:
        """The longest cached prefix of ``tokens`` (whole pages): its length, slots and handle."""
        check_ids("tokens", tokens, TOKEN_LIMIT)
        check_extra_key(extra_key)
        self._clock += 1
        path = self._walk(extra_key, self._pages(tokens))
        self._touch(path)
        slots = [slot for s in path for slot in s.slots]
        return MatchResult(len(slots), slots, path[-1] if path else self._empty)

    def insert(self, tokens, slots, extra_key=None) -> int:
        """Cache ``tokens`` (whole pages) with their ``slots``; returns how many were cached already."""
        check_ids("tokens", tokens, TOKEN_LIMIT)
        check_slots(slots, len(tokens))
        check_extra_key(extra_key)
        self._clock += 1
        key = self._pages(tokens)
        path = self._walk(extra_key, key)
        m = sum(len(s.slots) for s in path)
        if m < len(key):
            leaf = _Segment(extra_key, key, m, list(slots[m:len(key)]))
            self._segments.append(leaf)
            path.append(leaf)
        self._touch(path)
        return m

    def _segment(self, handle) -> _Segment | None:
        """The segment of a valid handle, or None for the empty match's handle."""
        if handle is self._empty:
            return None
        if not isinstance(handle, _Segment):
            raise TypeError(f"handle must be a handle returned by match_prefix, got {type(handle).__name__}")
        if not any(s is handle for s in self._segments):
            raise ValueError("handle is not in this cache: its node was evicted, or it belongs to another cache")
        return handle

    def lock(self, handle) -> None:
        """Take a lock on ``handle``'s node: it and the path above it are protected."""
        segment = self._segment(handle)
        if segment is not None:
            segment.held += 1

    def unlock(self, handle) -> None:
        """Release a lock taken on ``handle``'s node."""
        segment = self._segment(handle)
        if segment is not None:
            if segment.held == 0:
                raise ValueError("handle holds no lock: unlock without a matching lock")
            segment.held -= 1

    def _is_protected(self, segment: _Segment) -> bool:
        """A lock is held on the segment or on a segment below it (whose key extends its key)."""
        n = len(segment.key)
        return any(t.held > 0 and len(t.key) >= n and t.key[:n] == segment.key
                   for t in self._in(segment.namespace))

    def _has_child(self, segment: _Segment) -> bool:
        n = len(segment.key)
        return any(t.start == n and t.key[:n] == segment.key for t in self._in(segment.namespace))

    def evict(self, n_tokens: int) -> list[int]:
        """Free unprotected leaves, in the policy's order, until ``n_tokens`` tokens are freed or
        none is left; returns the freed slots."""
        check_int("n_tokens", n_tokens, minimum=0)
        freed: list[int] = []
        while len(freed) < n_tokens:
            leaves = [s for s in self._segments if not self._is_protected(s) and not self._has_child(s)]
            if not leaves:
                break
            victim = self.policy.victim(leaves)
            self._segments = [s for s in self._segments if s is not victim]
            self.policy.remove(victim)
            freed += victim.slots
        return freed
