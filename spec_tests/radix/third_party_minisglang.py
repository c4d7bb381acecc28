"""mini-sglang's radix cache (``python/minisgl/kvcache/radix_cache.py``) as a ``radix`` submission.

The upstream file is fetched, never copied here (``UPSTREAM`` below; ``inferspec upstream`` or
``git show <commit>:<path>`` puts it under ``.upstream/``); without it this module raises
``conformance.upstream.Unavailable`` at import. Its tree logic runs unmodified: ``_tree_walk``
(the walk, the split, the timestamps), ``insert_prefix``, ``lock_handle``, ``evict`` (a heap of
unlocked leaves by timestamp, a parent left childless pushed back), ``_collect_leave_nodes_for_evict``
and the sizes it keeps.

What the adapter stubs (``sys.modules``, before loading the file), and why:
- ``minisgl.core.get_global_ctx``: an object whose ``page_size`` the adapter sets before it
  constructs a cache (upstream reads the engine's global context);
- ``minisgl.utils.align_down``: upstream's one-liner ``(a // b) * b`` (``utils/misc.py``), not
  loaded to spare its other imports;
- ``minisgl.kernel.fast_compare_key``: upstream's C++ kernel (``kernel/csrc/src/radix.cpp``,
  ``std::mismatch`` over two 1-D int tensors) replaced by the pure-Python equivalent: the index
  of the first mismatch over the common length;
- the module's ``time``: a logical clock (``monotonic_ns`` returns 1, 2, 3, ... one tick per
  call) instead of the wall clock, so that runs are reproducible; upstream reads it once per walk
  and once per new node, exactly as before.

What the adapter adds, to speak the contract (none of it changes what upstream decides):
- argument checks (the contract's bad-input errors; upstream asserts or fails in torch);
- ``extra_key``: mini-sglang has no namespaces; the adapter keeps one upstream cache per extra key
  and, when several hold evictable tokens, evicts one node at a time (upstream's ``evict(1)`` pops
  exactly its heap's minimum) from the cache whose least recently used leaf is the oldest (the
  stub clock is shared, so the timestamps compare across caches); ``evict(n)`` beyond the
  evictable size frees what is evictable (upstream asserts ``size <= evictable_size``);
- handles: upstream's ``RadixCacheHandle`` wrapped with its cache; a handle is valid while its
  node is still linked under that cache's root (upstream never checks); ``unlock`` is refused for
  a node that holds no lock taken on it (the contract's rule; upstream's ``lock_handle(unlock=True)``
  only asserts that no count goes negative, like SGLang's ``dec_lock_ref``);
- ``policy``: mini-sglang has one order, least recently used by its timestamps, and no policy to
  plug in; the adapter checks the argument's type and otherwise ignores it.

Where it differs from the reference, legitimately (the choices, docs/radix.md): a walk stamps the
nodes it passes whole; the upper half of a split keeps the old node's timestamp (ours: it is on the
walk's path, so it is touched now); a rejected call costs no clock tick because the clock is not
logical at all; the tie rules are its heap's. The law holds: ``pytest spec_tests/radix --impl
spec_tests/radix/third_party_minisglang.py`` passes every law test but ``test_policy_plugged_in``,
``test_evicted_nodes_leave_the_policy`` and ``test_match_touches_every_node_of_the_path``
(``SPEC_DESELECT``: it has no policy to plug in, and the last states its law under LFU: under
mini-sglang's one order, least recently used, touching the whole path and touching only its last
node evict alike, since a parent becomes a leaf only once its newest child is gone and is then the
oldest leaf either way); the choice tests it fails are those of the
reference's eviction order (the exact ``evict`` lists under LRU, the policy's record at a split,
the logical clock).
"""
from __future__ import annotations

import importlib.util
import itertools
import sys
import types

import torch

from conformance.upstream import locate

__all__ = ["RadixCache"]

UPSTREAM = ("sgl-project/mini-sglang", "20fcd7f3c6a1898a61139fae1c97cc7a40bd8d66",
            ("python/minisgl/kvcache/radix_cache.py", "python/minisgl/kvcache/base.py"))

# mini-sglang has one eviction order (least recently used, by its timestamps) and no policy to plug
# in: the laws that the order follows a plugged-in LFU/Hybrid policy are outside what it offers
# (test_match_touches_every_node_of_the_path states its law under LFU; under LRU alone touching
# the path and touching its last node evict alike).
SPEC_DESELECT = ("test_policy_plugged_in", "test_evicted_nodes_leave_the_policy",
                 "test_match_touches_every_node_of_the_path")

_ROOT = locate(*UPSTREAM) / "python" / "minisgl"

# -- the stubs (module docstring) ----------------------------------------------------------------
_CTX = types.SimpleNamespace(page_size=1)
_TICKS = itertools.count(1)


def _fast_compare_key(x: torch.Tensor, y: torch.Tensor) -> int:
    """Pure-Python stand-in for the C++ kernel: the index of the first mismatch (common length)."""
    a, b = x.tolist(), y.tolist()
    n = 0
    for p, q in zip(a, b):
        if p != q:
            break
        n += 1
    return n


def _module(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


def _load(name: str, path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _load_upstream() -> types.ModuleType:
    """Install the stubs (they stay: upstream imports the kernel lazily, in ``get_match_len``) and
    load the two upstream files as ``minisgl.kvcache.base`` / ``.radix_cache``."""
    sys.modules["minisgl"] = _module("minisgl", __path__=[])
    sys.modules["minisgl.core"] = _module("minisgl.core", get_global_ctx=lambda: _CTX)
    sys.modules["minisgl.utils"] = _module("minisgl.utils", align_down=lambda a, b: (a // b) * b)
    sys.modules["minisgl.kernel"] = _module("minisgl.kernel", fast_compare_key=_fast_compare_key)
    sys.modules["minisgl.kvcache"] = _module("minisgl.kvcache", __path__=[str(_ROOT / "kvcache")])
    _load("minisgl.kvcache.base", _ROOT / "kvcache" / "base.py")
    mod = _load("minisgl.kvcache.radix_cache", _ROOT / "kvcache" / "radix_cache.py")
    mod.time = types.SimpleNamespace(monotonic_ns=lambda: next(_TICKS))
    return mod


_UP = _load_upstream()


# -- the contract's checks -----------------------------------------------------------------------
def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_ids(name: str, values, limit: int) -> None:
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list or tuple of ints, got {type(values).__name__}")
    for v in values:
        if not _is_int(v):
            raise TypeError(f"{name} must hold ints, got {v!r}")
        if not 0 <= v < limit:
            raise ValueError(f"{name} must hold ints in [0, {limit}), got {v}")


def _check_extra_key(extra_key) -> None:
    if not (extra_key is None or isinstance(extra_key, str) or _is_int(extra_key)):
        raise TypeError(f"extra_key must be None, a str or an int, got {type(extra_key).__name__}")


class _Handle:
    __slots__ = ("owner", "cache", "up")

    def __init__(self, owner, cache, up):
        self.owner, self.cache, self.up = owner, cache, up


class RadixCache:
    """The contract's RadixCache over one upstream ``RadixPrefixCache`` per extra key."""

    def __init__(self, page_size: int = 1, policy=None):
        if not _is_int(page_size):
            raise TypeError(f"page_size must be an int, got {type(page_size).__name__}")
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        if policy is not None and not all(callable(getattr(policy, m, None))
                                          for m in ("touch", "copy", "remove", "priority", "victim")):
            raise TypeError(f"policy must have the eviction protocol's methods, got {type(policy).__name__}")
        self.page_size = page_size
        self._caches: dict = {}
        self._held: dict = {}     # upstream node -> locks taken on it through this adapter
        self._empty = _Handle(self, None, None)

    def _cache(self, extra_key, create: bool):
        cache = self._caches.get(extra_key)
        if cache is None and create:
            _CTX.page_size = self.page_size
            cache = self._caches[extra_key] = _UP.RadixPrefixCache(torch.device("cpu"))
        return cache

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def evictable(self) -> int:
        return sum(c.size_info.evictable_size for c in self._caches.values())

    @property
    def protected(self) -> int:
        return sum(c.size_info.protected_size for c in self._caches.values())

    @property
    def total(self) -> int:
        return self.evictable + self.protected

    # -- match and insert ----------------------------------------------------------------------
    def match_prefix(self, tokens, extra_key=None):
        _check_ids("tokens", tokens, 2**32)
        _check_extra_key(extra_key)
        from reference.radix import MatchResult  # the contract's vocabulary (a NamedTuple)
        cache = self._cache(extra_key, create=False)
        if cache is None:
            return MatchResult(0, [], self._empty)
        handle = cache.match_prefix(torch.tensor(list(tokens), dtype=torch.int64)).cuda_handle
        if handle.cached_len == 0:
            return MatchResult(0, [], self._empty)
        return MatchResult(handle.cached_len, handle.get_matched_indices().tolist(), _Handle(self, cache, handle))

    def insert(self, tokens, slots, extra_key=None) -> int:
        _check_ids("tokens", tokens, 2**32)
        _check_ids("slots", slots, 2**63)
        if len(slots) != len(tokens):
            raise ValueError(f"slots must hold one slot per token: {len(slots)} slots for {len(tokens)} tokens")
        _check_extra_key(extra_key)
        cache = self._cache(extra_key, create=True)
        result = cache.insert_prefix(torch.tensor(list(tokens), dtype=torch.int64),
                                     torch.tensor(list(slots), dtype=torch.int64))
        return result.cached_len

    # -- locks ---------------------------------------------------------------------------------
    def _node(self, handle):
        if not isinstance(handle, _Handle):
            raise TypeError(f"handle must be a handle returned by match_prefix, got {type(handle).__name__}")
        if handle is self._empty:
            return None
        if handle.owner is not self:
            raise ValueError("handle belongs to another cache")
        node = handle.up.node
        while not node.is_root():   # still linked under this cache's root?
            parent = node.parent
            if parent.children.get(handle.cache.key_fn(node._key)) is not node:
                raise ValueError("handle's node was evicted")
            node = parent
        if node is not handle.cache.root_node:
            raise ValueError("handle's node was evicted")
        return handle.up.node

    def lock(self, handle) -> None:
        node = self._node(handle)
        if node is not None:
            handle.cache.lock_handle(handle.up)
            self._held[node] = self._held.get(node, 0) + 1

    def unlock(self, handle) -> None:
        node = self._node(handle)
        if node is not None:
            if self._held.get(node, 0) == 0:
                raise ValueError("handle holds no lock: unlock without a matching lock")
            self._held[node] -= 1
            handle.cache.lock_handle(handle.up, unlock=True)

    # -- evict ---------------------------------------------------------------------------------
    def evict(self, n_tokens: int) -> list[int]:
        if not _is_int(n_tokens):
            raise TypeError(f"n_tokens must be an int, got {type(n_tokens).__name__}")
        if n_tokens < 0:
            raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
        freed: list[int] = []
        while len(freed) < n_tokens:
            live = [c for c in self._caches.values() if c.size_info.evictable_size > 0]
            if not live:
                break
            if len(live) == 1:
                cache = live[0]
                want = min(n_tokens - len(freed), cache.size_info.evictable_size)
            else:   # one node at a time, from the cache with the oldest leaf
                cache = min(live, key=lambda c: min(c._collect_leave_nodes_for_evict()).timestamp)
                want = 1
            freed += cache.evict(want).tolist()
        return freed
