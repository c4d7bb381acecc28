"""The radix tree (same contract as reference/radix.py, whose docstring is the contract: the walk,
the splits, the clock, locks, eviction order, bad input).

The reference scans every cached sequence for each lookup. Here a lookup walks one path: at each
node a dict gives the child by its first page, and the child's whole run is compared at once.
Tokens are packed once per call into a ``bytes`` of unsigned 32-bit ints (``struct.pack``, which
also checks them: anything it cannot pack is re-checked by the reference's checker for the
error message), so comparing a run is one ``memcmp`` of a slice, and where a run differs, a
binary search over slices finds the first differing token. Each node keeps its slots packed as
int64 ``bytes``; a match joins them into an ``array('q')`` (no Python int is created per slot).
A lookup costs O(path depth + key length / memcmp speed), independent of how many sequences are
cached (docs/radix.md measures it from 100 to 10,000 sequences).

Locks keep running totals (``total``, ``protected``) and the set of unprotected leaves up to
date, so sizes are O(1) and ``evict`` starts from the candidate leaves: a heap ordered by
``policy.priority`` (SGLang's scheme), parents pushed as they become unprotected leaves.
"""
from __future__ import annotations

import struct
from array import array
from heapq import heapify, heappop, heappush

from reference._checks import check_int
from reference.radix import (SLOT_LIMIT, TOKEN_LIMIT, MatchResult, check_extra_key, check_ids,
                             check_policy, check_slots)
from optimized.eviction import LRU

__all__ = ["RadixCache"]

_pack = struct.pack


def _plain_ints(values) -> bool:
    """Every element is an int (a bool and an int subclass count; ``struct`` would pack a numpy int or a
    0-d tensor through ``__index__``, so those must go to the checker). ``sum`` over exact ints runs in
    C and stays an int; one numpy int, tensor or float in the list makes it another type, one string or
    None a TypeError -- half the cost of looking at every element's type, which was 70 % of a match."""
    try:
        return type(sum(values)) is int
    except TypeError:
        return False


class _Node:
    __slots__ = ("key", "slots", "children", "parent", "lock", "held")

    def __init__(self, key: bytes, slots: bytes, parent):
        self.key = key            # the run's tokens, 4 bytes each
        self.slots = slots        # the run's slots, 8 bytes each
        self.children: dict = {}  # first page (bytes) -> child
        self.parent = parent      # None once evicted
        self.lock = 0             # locks held on this node and below it (protected if > 0)
        self.held = 0             # locks held on this node

    def __repr__(self) -> str:
        tokens = list(struct.unpack(f"{len(self.key) // 4}I", self.key))
        return f"<node {tokens} lock={self.lock} held={self.held}>"


class _Root(_Node):
    __slots__ = ("owner", "namespace")

    def __init__(self, owner, namespace):
        super().__init__(b"", b"", None)
        self.owner, self.namespace = owner, namespace


class RadixCache:
    """A radix tree of token pages (module docstring)."""

    def __init__(self, page_size: int = 1, policy=None):
        self.page_size = check_int("page_size", page_size, minimum=1)
        if policy is None:
            policy = LRU()
        check_policy(policy)
        self.policy = policy
        self._page_bytes = 4 * page_size  # bytes per page of packed tokens
        self._roots: dict = {}           # extra_key -> _Root (dropped when it has no child)
        self._empty = _Root(self, None)  # the handle of an empty match (never in _roots)
        self._leaves: set = set()        # unprotected leaves: the eviction candidates
        self._clock = 0
        self._total = 0
        self._protected = 0

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def total(self) -> int:
        """Cached tokens."""
        return self._total

    @property
    def protected(self) -> int:
        """Cached tokens in locked nodes."""
        return self._protected

    @property
    def evictable(self) -> int:
        """Cached tokens in unlocked nodes."""
        return self._total - self._protected

    # -- packing (and checking) ----------------------------------------------------------------
    def _tokens(self, tokens) -> bytes:
        """``tokens`` cut to whole pages, packed 4 bytes per token (``struct`` packs anything with
        ``__index__``: a numpy int or a 0-d tensor must reach the checker, which rejects it)."""
        if isinstance(tokens, (list, tuple)) and _plain_ints(tokens):
            try:
                packed = _pack("%dI" % len(tokens), *tokens)
            except struct.error:
                packed = None
            if packed is not None:
                cut = len(packed) % self._page_bytes
                return packed[:-cut] if cut else packed
        check_ids("tokens", tokens, TOKEN_LIMIT)
        raise AssertionError("unreachable: struct rejected tokens the checker accepts")

    @staticmethod
    def _slots(slots, n_tokens: int) -> bytes:
        if isinstance(slots, (list, tuple)) and len(slots) == n_tokens and _plain_ints(slots):
            try:
                packed = _pack("%dq" % n_tokens, *slots)
            except struct.error:
                packed = None
            if packed is not None and (not slots or min(slots) >= 0):
                return packed
        check_slots(slots, n_tokens)
        check_ids("slots", slots, SLOT_LIMIT)
        raise AssertionError("unreachable: struct rejected slots the checker accepts")

    # -- the walk ------------------------------------------------------------------------------
    def _walk(self, root: _Root, q: bytes):
        """(last node, bytes matched, path) of ``q``, splitting the node the walk stops inside."""
        page = self._page_bytes
        node, pos, end, path = root, 0, len(q), []
        while pos < end:
            child = node.children.get(q[pos:pos + page])
            if child is None:
                break
            k = child.key
            if q[pos:pos + len(k)] == k:
                path.append(child)
                node = child
                pos += len(k)
                continue
            m = _common(k, q, pos)  # tokens in common, as bytes: at least the first page
            m -= m % page           # whole pages only
            node = self._split(child, m)
            path.append(node)
            pos += m
            break
        return node, pos, path

    def _split(self, child: _Node, m: int) -> _Node:
        """Cut ``child``'s run after ``m`` bytes: a new node above it takes the first part."""
        k = child.key
        parent = child.parent
        new = _Node(k[:m], child.slots[:2 * m], parent)
        new.lock = child.lock  # the locks below it; it holds none itself
        new.children[k[m:m + self._page_bytes]] = child
        parent.children[k[:self._page_bytes]] = new
        child.key, child.slots, child.parent = k[m:], child.slots[2 * m:], new
        self.policy.copy(child, new)
        return new

    # -- the contract --------------------------------------------------------------------------
    def match_prefix(self, tokens, extra_key=None) -> MatchResult:
        """The longest cached prefix of ``tokens`` (whole pages): its length, slots and handle."""
        q = self._tokens(tokens)
        if not (extra_key is None or type(extra_key) is str):
            check_extra_key(extra_key)
        self._clock += 1
        root = self._roots.get(extra_key)
        if root is None:
            return MatchResult(0, array("q"), self._empty)
        node, pos, path = self._walk(root, q)
        touch, now = self.policy.touch, self._clock
        for nd in path:
            touch(nd, now)
        if not path:
            return MatchResult(0, array("q"), self._empty)
        slots = array("q")
        slots.frombytes(b"".join([nd.slots for nd in path]))
        return MatchResult(pos >> 2, slots, node)

    def insert(self, tokens, slots, extra_key=None) -> int:
        """Cache ``tokens`` (whole pages) with their ``slots``; returns how many were cached already."""
        q = self._tokens(tokens)
        s = self._slots(slots, len(tokens))
        check_extra_key(extra_key)
        self._clock += 1
        root = self._roots.get(extra_key)
        if root is None:
            root = self._roots[extra_key] = _Root(self, extra_key)
        node, pos, path = self._walk(root, q)
        if pos < len(q):
            leaf = _Node(q[pos:], s[2 * pos:2 * len(q)], node)
            node.children[q[pos:pos + self._page_bytes]] = leaf
            self._leaves.discard(node)   # it has a child now
            self._leaves.add(leaf)
            self._total += (len(q) - pos) >> 2
            path.append(leaf)
        elif not root.children:
            del self._roots[extra_key]   # nothing cached under this key (an empty insert)
        touch, now = self.policy.touch, self._clock
        for nd in path:
            touch(nd, now)
        return pos >> 2

    def _node(self, handle):
        """The node of a valid handle, or None for the empty match's handle."""
        if handle is self._empty:
            return None
        if not isinstance(handle, _Node) or isinstance(handle, _Root):
            raise TypeError(f"handle must be a handle returned by match_prefix, got {type(handle).__name__}")
        top = handle
        while top.parent is not None:
            top = top.parent
        if not (isinstance(top, _Root) and top.owner is self and self._roots.get(top.namespace) is top):
            raise ValueError("handle is not in this cache: its node was evicted, or it belongs to another cache")
        return handle

    def lock(self, handle) -> None:
        """Take a lock on ``handle``'s node: it and the path above it are protected."""
        node = self._node(handle)
        if node is None:
            return
        node.held += 1
        while node.parent is not None:
            if node.lock == 0:
                self._protected += len(node.key) >> 2
                self._leaves.discard(node)
            node.lock += 1
            node = node.parent

    def unlock(self, handle) -> None:
        """Release a lock taken on ``handle``'s node."""
        node = self._node(handle)
        if node is None:
            return
        if node.held == 0:
            raise ValueError("handle holds no lock: unlock without a matching lock")
        node.held -= 1
        while node.parent is not None:
            node.lock -= 1
            if node.lock == 0:
                self._protected -= len(node.key) >> 2
                if not node.children:
                    self._leaves.add(node)
            node = node.parent

    def evict(self, n_tokens: int) -> list[int]:
        """Free unprotected leaves, in the policy's order, until ``n_tokens`` tokens are freed or
        none is left; returns the freed slots."""
        check_int("n_tokens", n_tokens, minimum=0)
        if n_tokens == 0 or not self._leaves:
            return []
        priority, page = self.policy.priority, self._page_bytes
        heap = [(priority(nd), i, nd) for i, nd in enumerate(self._leaves)]
        heapify(heap)
        count, freed, n = len(heap), [], 0
        while n < n_tokens and heap:
            nd = heappop(heap)[2]
            parent = nd.parent
            del parent.children[nd.key[:page]]
            self._leaves.discard(nd)
            self.policy.remove(nd)
            nd.parent = None
            n += len(nd.key) >> 2
            freed.append(nd.slots)
            if not parent.children:
                if isinstance(parent, _Root):
                    del self._roots[parent.namespace]
                elif parent.lock == 0:
                    self._leaves.add(parent)
                    heappush(heap, (priority(parent), count, parent))
                    count += 1
        self._total -= n
        out = array("q")
        out.frombytes(b"".join(freed))
        return out.tolist()


def _common(a: bytes, q: bytes, pos: int) -> int:
    """The length, in bytes (whole 4-byte tokens), of the common prefix of ``a`` and ``q[pos:]``."""
    lo, hi = 0, min(len(a), len(q) - pos) >> 2   # a[:4 * lo] matches; a[:4 * (hi + 1)] does not
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if a[:4 * mid] == q[pos:pos + 4 * mid]:
            lo = mid
        else:
            hi = mid - 1
    return 4 * lo
