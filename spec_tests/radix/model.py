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


# -- the tree, node by node ---------------------------------------------------------------------
class Node:
    """A node of the contract's tree: its run of tokens and their slots, the locks taken on it,
    and when it was used. ``lo``/``hi`` bound the time of its last use as any correct cache may
    count it: a walk that passes a node whole uses it (``lo = hi = now``); a walk that stops
    inside a run splits it, and the new upper half was used *now* by our count (it is on the walk's
    path) but keeps the old time by another's (mini-sglang stamps only nodes it passes whole):
    ``lo`` = the old node's, ``hi`` = now. ``rec`` is the record the contract's policy protocol
    keeps (hits, last, order): touched along every path, copied at a split."""
    __slots__ = ("run", "slots", "children", "parent", "held", "lo", "hi", "rec", "alive", "ns")

    def __init__(self, ns, run: tuple, slots: tuple, parent):
        self.ns, self.run, self.slots, self.parent = ns, run, slots, parent
        self.children: dict = {}
        self.held = 0
        self.lo = self.hi = 0
        self.rec = None
        self.alive = True

    def __repr__(self) -> str:
        return f"<node {list(self.run)} slots {list(self.slots)} held={self.held}>"


class Tree:
    """The radix tree of the contract (reference/radix.py's docstring), written out as a tree: the
    node boundaries, the locks and the times of use, for the laws of ``evict`` that any correct
    implementation obeys whatever its eviction order. ``evict_problem`` follows the slots that the
    implementation freed (not its own choice), so the model stays in the implementation's state
    even where a legitimate implementation evicts another leaf than the reference would."""

    def __init__(self, page_size: int):
        self.page = page_size
        self.roots: dict = {}
        self.calls = 0    # the policy protocol's touch/copy counter (records' order)

    def pages(self, tokens) -> tuple:
        return tuple(tokens[: len(tokens) - len(tokens) % self.page])

    def root(self, ns) -> Node:
        if ns not in self.roots:
            self.roots[ns] = Node(ns, (), (), None)
        return self.roots[ns]

    def nodes(self):
        stack = [c for r in self.roots.values() for c in r.children.values()]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(n.children.values())

    def _split(self, child: Node, c: int, now: int) -> Node:
        p = self.page
        head = Node(child.ns, child.run[:c], child.slots[:c], child.parent)
        head.parent.children[child.run[:p]] = head
        child.run, child.slots, child.parent = child.run[c:], child.slots[c:], head
        head.children[child.run[:p]] = child
        head.lo, head.hi = child.lo, now
        head.rec = (child.rec[0], child.rec[1], self.calls)   # policy.copy(child, head)
        self.calls += 1
        return head

    def walk(self, ns, key: tuple, now: int) -> list:
        p, node, pos, path = self.page, self.root(ns), 0, []
        while pos < len(key):
            child = node.children.get(key[pos:pos + p])
            if child is None:
                break
            c = 0
            while c < len(child.run) and pos + c < len(key) and child.run[c] == key[pos + c]:
                c += 1
            c -= c % p
            if c < len(child.run):
                path.append(self._split(child, c, now))
                break
            child.lo = child.hi = now
            path.append(child)
            pos += c
            node = child
        return path

    def _touch(self, path: list, now: int) -> None:
        for n in path:
            hits = n.rec[0] if n.rec else 0
            n.rec = (hits + 1, now, self.calls)
            self.calls += 1

    def match(self, ns, tokens, now: int):
        """(length, slots, node or None) of ``match_prefix`` at time ``now``."""
        path = self.walk(ns, self.pages(tokens), now)
        self._touch(path, now)
        slots = [s for n in path for s in n.slots]
        return len(slots), slots, (path[-1] if path else None)

    def insert(self, ns, tokens, slots, now: int) -> int:
        key = self.pages(tokens)
        path = self.walk(ns, key, now)
        m = sum(len(n.run) for n in path)
        if m < len(key):
            parent = path[-1] if path else self.root(ns)
            leaf = Node(ns, key[m:], tuple(slots[m:len(key)]), parent)
            parent.children[leaf.run[:self.page]] = leaf
            leaf.lo = leaf.hi = now
            path.append(leaf)
        self._touch(path, now)
        return m

    def protected(self, node: Node) -> bool:
        return node.held > 0 or any(self.protected(c) for c in node.children.values())

    def sizes(self) -> tuple:
        total = prot = 0
        for n in self.nodes():
            total += len(n.slots)
            prot += len(n.slots) if self.protected(n) else 0
        return total, total - prot, prot

    def candidates(self) -> list:
        return [n for n in self.nodes() if not n.children and not self.protected(n)]

    def remove(self, node: Node) -> None:
        del node.parent.children[node.run[:self.page]]
        node.alive = False

    def evict_problem(self, n: int, freed: list, lru: bool) -> str | None:
        """Check ``evict(n) -> freed`` against the law and apply it; a problem, or None.

        The law: ``freed`` is whole nodes, each in token order; each, when its turn comes, is an
        unprotected leaf (its children freed before it); it stops as soon as ``n`` tokens are
        freed, and frees ``n`` unless no unprotected leaf is left. Under LRU (``lru``) each freed
        node was used no later than every other candidate leaf at its turn could have been:
        never a node ``F`` while a candidate ``M`` with ``M.hi < F.lo`` remains (``M`` untouched
        since before ``F``'s last use by any count)."""
        owner = {s: nd for nd in self.nodes() for s in nd.slots}
        seq, i = [], 0
        while i < len(freed):
            nd = owner.get(freed[i])
            if nd is None or any(nd is x for x in seq):
                return f"slot {freed[i]} is not cached (or freed twice)"
            if list(freed[i:i + len(nd.slots)]) != list(nd.slots):
                return (f"the freed slots {freed[i:i + len(nd.slots)]} are not the whole node "
                        f"{nd!r} in token order (whole nodes are freed)")
            seq.append(nd)
            i += len(nd.slots)
        done = 0
        for nd in seq:
            if done >= n:
                return f"{done} tokens were freed, at least {n}, and it went on to free {nd!r}"
            cands = self.candidates()
            if not any(nd is c for c in cands):
                why = "protected (locked, or above a lock)" if self.protected(nd) else "not a leaf"
                return f"it freed {nd!r}, which was {why} at its turn"
            if lru:
                older = [c for c in cands if c.hi < nd.lo]
                if older:
                    return (f"least recently used first: it freed {nd!r} (last used at time {nd.lo}) "
                            f"while {older[0]!r} was unused since time {older[0].hi}")
            self.remove(nd)
            done += len(nd.slots)
        if done < n and self.candidates():
            return f"it freed {done} < {n} tokens while {self.candidates()[0]!r} was still evictable"
        return None

    def key(self, relabel=None, now: int | None = None) -> tuple:
        """A canonical key of the state: per namespace, the tree's shape with runs (tokens mapped
        by ``relabel``), locks, and the ranks of the nodes' times and records' orders (with
        ``now``: the times' ages ``now - t`` instead of their ranks, for a policy that adds to
        them); not the slots."""
        relabel = relabel or {}
        nodes = list(self.nodes())
        times = sorted({t for n in nodes for t in (n.lo, n.hi, n.rec[1])})
        orders = sorted(n.rec[2] for n in nodes)
        age = (lambda t: now - t) if now is not None else times.index

        def enc(n: Node) -> tuple:
            kids = sorted(enc(c) for c in n.children.values())
            run = tuple(relabel.get(t, t) for t in n.run)
            rec = (n.rec[0], age(n.rec[1]), orders.index(n.rec[2]))
            return (run, n.held, age(n.lo), age(n.hi), rec, tuple(kids))

        return tuple(sorted((repr(ns), tuple(sorted(enc(c) for c in r.children.values())))
                            for ns, r in self.roots.items() if r.children))
