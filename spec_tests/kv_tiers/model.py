"""A model of the KV tier store (independent of reference/kv_tiers.py): three lists in LRU -> MRU
order and the cascade, written out; what each operation should transfer and drop; the bytes each
block holds (a copy taken at ``put``), for bitwise comparison.

The contract (reference/kv_tiers.py's docstring): putting a block into tier t appends it to t's
list; while t is over capacity its first (LRU) block moves to the end of t + 1's list (dropped past
the disk); a reload removes the block from its tier first and travels up link by link (disk ->
host -> hbm); an offload travels down link by link to its target tier; an operation's transfers are
the block's own trip, then the cascade's moves from the top tier down.
"""
from __future__ import annotations

import copy

import torch

TIERS = ("hbm", "host", "disk")
LINKS = ("hbm->host", "host->disk", "disk->host", "host->hbm")


def raw(t: torch.Tensor) -> bytes:
    """A tensor's bytes (row-major), dtype-agnostic: its bit pattern."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


class Model:
    def __init__(self, capacities):
        self.capacities = tuple(capacities)
        self.tiers: list[list] = [[], [], []]
        self.blocks: dict = {}            # key -> (dtype, shape, bytes)
        self.moved = dict.fromkeys(LINKS, 0)
        self._sizes: dict = {}

    def clone(self) -> "Model":
        return copy.deepcopy(self)

    def where(self, key):
        for i, t in enumerate(self.tiers):
            if key in t:
                return i
        return None

    def _cascade(self, top: int, transfers: list, dropped: list) -> None:
        for t in range(top, 3):
            while len(self.tiers[t]) > self.capacities[t]:
                victim = self.tiers[t].pop(0)
                if t == 2:
                    dropped.append(victim)
                    del self.blocks[victim]
                else:
                    transfers.append((victim, TIERS[t], TIERS[t + 1]))
                    self.tiers[t + 1].append(victim)

    def _begin(self) -> None:
        """Remember every block's size before an operation (a dropped block's bytes still count)."""
        self._sizes = {k: len(v[2]) for k, v in self.blocks.items()}

    def _apply(self, transfers, dropped):
        for key, src, dst in transfers:
            self.moved[f"{src}->{dst}"] += self._sizes[key]
        return transfers, dropped

    def put(self, key, block: torch.Tensor):
        """-> (transfers, dropped)."""
        self.blocks[key] = (block.dtype, tuple(block.shape), raw(block))
        self._begin()
        self.tiers[0].append(key)
        transfers, dropped = [], []
        self._cascade(0, transfers, dropped)
        return self._apply(transfers, dropped)

    def get(self, key):
        self._begin()
        src = self.where(key)
        self.tiers[src].remove(key)
        transfers = [(key, TIERS[t], TIERS[t - 1]) for t in range(src, 0, -1)]
        self.tiers[0].append(key)
        dropped: list = []
        if src:
            self._cascade(0, transfers, dropped)
        return self._apply(transfers, dropped)

    def offload(self, key, tier: int):
        self._begin()
        src = self.where(key)
        self.tiers[src].remove(key)
        transfers = [(key, TIERS[t], TIERS[t + 1]) for t in range(src, tier)]
        self.tiers[tier].append(key)
        dropped: list = []
        self._cascade(tier, transfers, dropped)
        return self._apply(transfers, dropped)

    def remove(self, key) -> None:
        self.tiers[self.where(key)].remove(key)
        del self.blocks[key]

    def state(self) -> tuple:
        """Everything observable, canonical: the orders, each block's (dtype, shape, bits), the bytes moved."""
        return (tuple(tuple(t) for t in self.tiers),
                tuple(sorted((repr(k), str(v[0]), v[1], v[2]) for k, v in self.blocks.items())),
                tuple(self.moved[link] for link in LINKS))


def observe(store, keys) -> tuple:
    """The same observables read from a store through its contract (peek changes nothing)."""
    orders = tuple(tuple(store.order(t)) for t in range(3))
    blocks = []
    for k in keys:
        if k in store:
            b = store.peek(k)
            blocks.append((repr(k), str(b.dtype), tuple(b.shape), raw(b)))
    moved = dict(store.bytes_moved)
    return orders, tuple(sorted(blocks)), tuple(moved.get(link) for link in LINKS)


def observe_model(model: Model, keys=None) -> tuple:
    """``observe``'s tuple for the model (``keys``: the keys to show, default every stored one)."""
    keys = list(model.blocks) if keys is None else keys
    blocks = tuple(sorted((repr(k), str(model.blocks[k][0]), model.blocks[k][1], model.blocks[k][2])
                          for k in keys if k in model.blocks))
    return tuple(tuple(t) for t in model.tiers), blocks, tuple(model.moved[link] for link in LINKS)


def disk_files(store) -> list[bytes]:
    """The contents of the files in the store's directory, sorted."""
    return sorted(p.read_bytes() for p in store.directory.iterdir())


def disk_names(store) -> list[str]:
    return sorted(p.name for p in store.directory.iterdir())


def expected_files(model: Model) -> list[bytes]:
    return sorted(model.blocks[k][2] for k in model.tiers[2])
