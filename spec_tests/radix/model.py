"""The oracle of `radix`: what a correct cache holds, page by page, with no tree at all.

``cached[(extra_key, prefix)]`` holds the slots of the last page of ``prefix``, for every cached
prefix (a multiple of ``page_size`` tokens long). Two keys that differ inside a page are two
different pages, even where some of their tokens agree. The model knows nothing of node
boundaries, so it checks what holds whatever the tree looks like: the longest cached prefix and
its slots, what ``insert`` returns, that ``evict`` frees cached, unprotected pages from the ends of
cached sequences, the sizes (``protected`` counts the pages on the paths of locked handles).
"""
from __future__ import annotations


class Model:
    def __init__(self, page_size: int):
        self.page = page_size
        self.cached: dict = {}   # (extra_key, prefix tuple) -> slots of its last page
        self.where: dict = {}    # slot -> (extra_key, prefix tuple)
        self.held: dict = {}     # (extra_key, path) -> locks held on the handle of that path

    def pages(self, tokens) -> tuple:
        return tuple(tokens[: len(tokens) - len(tokens) % self.page])

    def match(self, ns, tokens) -> tuple[int, list]:
        key, p = self.pages(tokens), self.page
        n = 0
        while n < len(key) and (ns, key[: n + p]) in self.cached:
            n += p
        return n, [s for k in range(p, n + 1, p) for s in self.cached[(ns, key[:k])]]

    def insert(self, ns, tokens, slots) -> int:
        key, p = self.pages(tokens), self.page
        n, _ = self.match(ns, tokens)
        for k in range(n + p, len(key) + 1, p):
            self.cached[(ns, key[:k])] = tuple(slots[k - p:k])
            for s in slots[k - p:k]:
                self.where[s] = (ns, key[:k])
        return n

    @property
    def tokens(self) -> int:
        return len(self.cached) * self.page

    def alive(self, ns, path: tuple, end_slot) -> bool:
        """Is the node of a handle (the one ending at ``path``, created with ``end_slot``) cached?"""
        return not path or self.cached.get((ns, path), (None,))[-1] == end_slot

    def protected_pages(self) -> set:
        p = self.page
        return {(ns, path[:k]) for (ns, path), n in self.held.items() if n > 0
                for k in range(p, len(path) + 1, p)}

    def evict(self, slots) -> str | None:
        """Drop the pages of ``slots``; a problem (a slot not cached, a page freed in part) or None."""
        freed = set(slots)
        if len(freed) != len(slots):
            return f"a slot is freed twice: {sorted(slots)}"
        for s in slots:
            if s not in self.where:
                return f"slot {s} is not cached"
            entry = self.where[s]
            if not freed.issuperset(self.cached[entry]):
                return f"slot {s} is freed but not the rest of its page {self.cached[entry]}"
        for s in slots:
            entry = self.where.pop(s)
            self.cached.pop(entry, None)
        return None

    def closure_problem(self) -> str | None:
        """A cached prefix whose own prefix is not cached (evict freed a middle, not an end)."""
        for (ns, prefix) in self.cached:
            if len(prefix) > self.page and (ns, prefix[:-self.page]) not in self.cached:
                return f"{prefix!r} (extra_key {ns!r}) is cached but {prefix[:-self.page]!r} is not"
        return None
