"""KV blocks on a storage hierarchy: offload and reload between HBM, host memory and disk, an LRU
per tier, and the arithmetic of reloading a cache against recomputing it (course 07.04-07.06).

``KVTierStore(capacities, *, device="cpu", directory=None, fault=None)``, ``capacities = (hbm, host, disk)``
---------------------------------------------------------------------------------------
Three tiers, ``TIERS = ("hbm", "host", "disk")`` (indices 0, 1, 2), each holding at most its
capacity of blocks (ints; ``hbm >= 1``, ``host, disk >= 0``). A *block* is one ``torch.Tensor``
of any dtype and shape (a KV block: keys and values of some tokens, in bf16, fp8, int8, ...) under
a hashable ``key``. The hierarchy is *exclusive*: a block lives in exactly one tier.

* ``hbm``: tensors on ``device`` (the CPU stands in for the GPU's HBM here; a CUDA device works);
* ``host``: CPU tensors (host DRAM);
* ``disk``: one file per block in ``directory`` (a fresh temporary directory when None; an
  existing one must be empty), holding the block's raw bytes, named ``<n>.kv`` (``n`` a serial
  number); the block's dtype and shape stay in the store's index. ``close()`` deletes the files
  (and the directory, when the store made it).

Every tier keeps its blocks in LRU order. The one rule of movement (a *cascade*): putting a block
into tier t makes it t's most recently used (MRU); while t holds more than its capacity, its least
recently used (LRU) block moves down into tier t + 1 the same way (becoming t + 1's MRU), and
a block pushed out of the disk tier is *dropped* (lost: it must be recomputed). A tier of
capacity 0 passes every block straight through. Each move between adjacent tiers is one
*transfer* of the block's bytes over that link, counted in ``bytes_moved``.

``put(key, block) -> list``
    a new block (a copy of ``block``, made contiguous) into ``hbm`` by the cascade; returns the
    keys dropped, in the order they were dropped.
``get(key) -> Tensor``
    *reload*: the block, bit for bit as it was put (same dtype, shape; contiguous, on ``device``);
    afterwards it is ``hbm``'s MRU. From ``host``: one transfer host -> hbm; from ``disk``: two,
    disk -> host -> hbm (it does not stay in host); then the cascade from ``hbm`` (a block
    reloaded from host frees its slot there first, so the block it displaces from hbm takes it).
    A block already in ``hbm`` only becomes its MRU. Do not modify the returned tensor in place.
``offload(key, tier=1) -> list``
    move a block down to ``tier`` (a lower tier than its own: 1 or 2), one link at a time, then
    the cascade from ``tier``; returns the keys dropped (the block itself, if it is pushed out of
    the disk tier or offloaded into a disk of capacity 0).
``remove(key)``
    forget the block (its file deleted); no transfer.
``peek(key) -> Tensor``
    the block's bits wherever it is, changing nothing (no LRU update, no transfer counted).
``where(key) -> int | None``, ``order(tier) -> list`` (the tier's keys from LRU to MRU),
``len(store)``, ``key in store``, ``bytes_moved -> dict`` (bytes per link, keys ``"hbm->host"``,
``"host->disk"``, ``"disk->host"``, ``"host->hbm"``), ``capacities`` (the tuple given).

**Faults.** ``fault`` (settable at any time as the attribute ``store.fault``) is None or a
callable ``fault(key, src, dst)`` (tier names) that the store calls in the middle of every
transfer, after half of the block's bytes are written to the destination (a temporary file for
the disk). If it raises, the operation stops: it raises that exception and leaves the store
exactly as it was -- every tier's blocks and LRU order, every block's bits, ``bytes_moved``, the
files in the directory (no partial file left). An operation's transfers are staged first and
committed together; a block is never lost to a failed transfer.

Bad input, checked before anything changes (the store left as it was): ``capacities`` not a
sequence of three ints (a bool is not one) -> TypeError, ``hbm < 1`` or a negative one ->
ValueError, naming ``capacities``; ``directory`` not None / str / PathLike -> TypeError, not
empty -> ValueError, naming ``directory``; ``fault`` not None or callable -> TypeError naming
``fault``; ``key`` unhashable -> TypeError naming ``key``; ``put`` of a key already stored ->
ValueError naming ``key``; ``block`` not a tensor -> TypeError naming ``block``; ``get``,
``offload``, ``remove``, ``peek`` of a key not stored -> KeyError naming ``key``; ``tier`` not an
int -> TypeError, not a lower tier than the block's (``offload``) or not in 0..2 (``order``) ->
ValueError naming ``tier``.

Reload or recompute (07.05)
---------------------------
Rebuilding the KV cache of a ``tokens``-token prefix by prefill costs the FLOPs concept ``flops``
counts for that prefill, ``forward_flops(config, batch=1, new_tokens=tokens)`` = a x tokens +
c x tokens^2 (the attention term grows with the square), at ``flops_rate`` FLOP/s; reloading it
moves ``tokens`` x 2 x layers x kv_heads x head_dim x element bytes (``config.dtype``) over a link
of ``bandwidth`` bytes/s after a fixed ``latency`` (seconds):

    reload_seconds(config, tokens, *, bandwidth, latency=0)  = latency + tokens x kv_bytes_per_token / bandwidth
    recompute_seconds(config, tokens, *, flops_rate)          = forward_flops(prefill of tokens) / flops_rate
    crossover_tokens(config, *, bandwidth, flops_rate, latency=0)
        = the smallest n in [1, max_seq_len] with reload_seconds(n) <= recompute_seconds(n), or None

Reload minus recompute is latency + n (kv_bytes_per_token / bandwidth - a / flops_rate) - c n^2 /
flops_rate: concave in n, so once reloading is no slower it stays so for every longer prefix
(the flip happens once). Compared exactly (each float at its binary value). ``tokens`` is an int
in [0, max_seq_len] (0 costs nothing to recompute and ``latency`` to reload); ``bandwidth``,
``flops_rate`` finite reals > 0, ``latency`` >= 0 (TypeError / ValueError naming each; ``config``
not a ModelConfig -> TypeError naming ``config``).

What real systems choose differently is fixed here, and is the contract (checked, not a choice
left open): the hierarchy is exclusive; a block moved down becomes the lower tier's MRU (not its
LRU); a reload from disk passes through host without staying; an operation's transfers happen in
this order -- the block's own trip (link by link), then the cascade's moves from the top tier
down -- which is the order of the ``fault`` calls; the returned lists are in drop order.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections import OrderedDict
from fractions import Fraction
from numbers import Real
from pathlib import Path

import torch

from reference._checks import check_int
from reference.flops import forward_flops
from reference.model import ModelConfig

__all__ = ["KVTierStore", "reload_seconds", "recompute_seconds", "crossover_tokens"]  # the contract
__optional__: list[str] = []

TIERS = ("hbm", "host", "disk")
HBM, HOST, DISK = 0, 1, 2


def _check_key(key):
    try:
        hash(key)
    except TypeError:
        raise TypeError(f"key must be hashable, got {type(key).__name__}") from None
    return key


def _bytes_of(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes, a flat uint8 view (t contiguous)."""
    return t.reshape(-1).view(torch.uint8)


class KVTierStore:
    """KV blocks on three tiers with an LRU each (module doc)."""

    def __init__(self, capacities, *, device="cpu", directory=None, fault=None):
        if isinstance(capacities, (str, bytes)) or not hasattr(capacities, "__len__") or not hasattr(capacities, "__getitem__"):
            raise TypeError(f"capacities must be a sequence of three ints (hbm, host, disk), got {capacities!r}")
        if len(capacities) != 3:
            raise ValueError(f"capacities must have three entries (hbm, host, disk), got {len(capacities)}")
        for c in capacities:
            check_int("capacities", c, minimum=0)
        if capacities[HBM] < 1:
            raise ValueError(f"capacities: hbm must hold at least one block, got {capacities[HBM]}")
        if directory is not None and not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"directory must be None, a str or a path, got {type(directory).__name__}")
        if directory is not None and Path(directory).exists() and any(Path(directory).iterdir()):
            raise ValueError(f"directory must be empty (the disk tier owns it): {directory}")
        if fault is not None and not callable(fault):
            raise TypeError(f"fault must be None or a callable fault(key, src, dst), got {fault!r}")
        self.capacities = tuple(capacities)
        self.device = torch.device(device)
        self._made_directory = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="kv_tiers_")) if directory is None else Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fault = fault
        # per tier: key -> payload (a tensor; for the disk, the file's name), in LRU -> MRU order
        self._tiers: list[OrderedDict] = [OrderedDict(), OrderedDict(), OrderedDict()]
        self._meta: dict = {}          # key -> (dtype, shape)
        self._serial = 0
        self.bytes_moved = {"hbm->host": 0, "host->disk": 0, "disk->host": 0, "host->hbm": 0}

    # --- queries ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return sum(len(t) for t in self._tiers)

    def __contains__(self, key) -> bool:
        return self.where(key) is not None

    def where(self, key) -> int | None:
        """The tier index holding ``key`` (0 hbm, 1 host, 2 disk), None if not stored."""
        _check_key(key)
        for i, tier in enumerate(self._tiers):
            if key in tier:
                return i
        return None

    def order(self, tier: int) -> list:
        """The keys of ``tier`` from least to most recently used."""
        check_int("tier", tier)
        if not 0 <= tier < len(TIERS):
            raise ValueError(f"tier must be 0 (hbm), 1 (host) or 2 (disk), got {tier}")
        return list(self._tiers[tier])

    def peek(self, key) -> torch.Tensor:
        """The block's bits wherever it is; changes nothing."""
        tier = self._tier_of(key)
        return self._read(key, tier, self._tiers[tier][key])

    # --- operations ---------------------------------------------------------------------------
    def put(self, key, block) -> list:
        """Store a new block in hbm (the cascade); returns the keys dropped."""
        _check_key(key)
        if self.where(key) is not None:
            raise ValueError(f"key {key!r} is already stored (remove it first)")
        if not isinstance(block, torch.Tensor):
            raise TypeError(f"block must be a torch.Tensor, got {type(block).__name__}")
        data = block.detach().to(self.device).contiguous().clone()
        return self._run(key, None, HBM, data, meta=(block.dtype, tuple(block.shape)))

    def get(self, key) -> torch.Tensor:
        """Reload the block into hbm (its MRU) and return it."""
        tier = self._tier_of(key)
        if tier == HBM:
            self._tiers[HBM].move_to_end(key)
        else:
            self._run(key, tier, HBM, None)
        return self._tiers[HBM][key]

    def offload(self, key, tier: int = HOST) -> list:
        """Move the block down to ``tier`` (then the cascade); returns the keys dropped."""
        src = self._tier_of(key)
        check_int("tier", tier)
        if not src < tier < len(TIERS):
            raise ValueError(f"tier must be a lower tier than the block's ({TIERS[src]}): one of "
                             f"{list(range(src + 1, len(TIERS)))}, got {tier}")
        return self._run(key, src, tier, None)

    def remove(self, key) -> None:
        """Forget the block (its file deleted, if on disk)."""
        tier = self._tier_of(key)
        payload = self._tiers[tier].pop(key)
        del self._meta[key]
        if tier == DISK:
            (self.directory / payload).unlink()

    def close(self) -> None:
        """Delete the disk tier's files (and its directory, if the store made it)."""
        for name in self._tiers[DISK].values():
            (self.directory / name).unlink(missing_ok=True)
        self._tiers[DISK].clear()
        if self._made_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    # --- the machinery ------------------------------------------------------------------------
    def _tier_of(self, key) -> int:
        tier = self.where(key)
        if tier is None:
            raise KeyError(f"key {key!r} is not stored")
        return tier

    def _plan(self, key, src, dst):
        """The moves of one operation, simulated on the LRU orders alone: (new orders, the list of
        (key, from tier, to tier) link transfers in the order they happen, the keys dropped)."""
        orders = [list(t) for t in self._tiers]
        transfers, dropped = [], []
        if src is not None:
            orders[src].remove(key)
        # the block travels link by link from src to dst (a reload is one trip up)
        if src is not None and dst < src:
            for t in range(src, dst, -1):
                transfers.append((key, t, t - 1))
        elif src is not None:
            for t in range(src, dst):
                transfers.append((key, t, t + 1))
        orders[dst].append(key)
        for t in range(dst, len(TIERS)):
            while len(orders[t]) > self.capacities[t]:
                victim = orders[t].pop(0)
                if t + 1 == len(TIERS):
                    dropped.append(victim)
                else:
                    transfers.append((victim, t, t + 1))
                    orders[t + 1].append(victim)
        return orders, transfers, dropped

    def _run(self, key, src, dst, data, meta=None) -> list:
        orders, transfers, dropped = self._plan(key, src, dst)
        meta_of = dict(self._meta)
        if meta is not None:
            meta_of[key] = meta
        # stage every transfer: the payload each block will have where it ends up
        current = {k: p for tier in self._tiers for k, p in tier.items()}
        if data is not None:
            current[key] = data
        staged_files = []
        moved = dict(self.bytes_moved)
        try:
            for k, a, b in transfers:
                current[k] = self._copy(k, a, b, current[k], meta_of[k], staged_files)
                moved[f"{TIERS[a]}->{TIERS[b]}"] += self._nbytes(meta_of[k])
        except BaseException:
            for name in staged_files:
                (self.directory / name).unlink(missing_ok=True)
            raise
        # commit
        old_files = set(self._tiers[DISK].values())
        for k in dropped:
            meta_of.pop(k)
        self._tiers = [OrderedDict((k, current[k]) for k in order) for order in orders]
        self._meta = meta_of
        self.bytes_moved = moved
        kept = set(self._tiers[DISK].values())
        for name in staged_files:
            if name in kept:
                os.replace(self.directory / name, self.directory / name.replace(".part", ".kv"))
            else:
                (self.directory / name).unlink(missing_ok=True)
        self._tiers[DISK] = OrderedDict((k, n.replace(".part", ".kv")) for k, n in self._tiers[DISK].items())
        for name in old_files - set(self._tiers[DISK].values()):
            (self.directory / name).unlink(missing_ok=True)
        return dropped

    @staticmethod
    def _nbytes(meta) -> int:
        dtype, shape = meta
        return math.prod(shape) * torch.empty((), dtype=dtype).element_size()

    def _copy(self, key, src: int, dst: int, payload, meta, staged_files: list):
        """One transfer of ``key``'s block from tier ``src`` to ``dst``: half the bytes, the fault
        hook, the rest. Returns the payload in ``dst`` (a tensor, or a staged file's name)."""
        source = self._read(key, src, payload, meta)
        raw = _bytes_of(source)
        half = raw.numel() // 2
        if dst == DISK:
            self._serial += 1
            name = f"{self._serial}.part"
            staged_files.append(name)
            with open(self.directory / name, "wb") as f:
                f.write(raw[:half].cpu().numpy().tobytes())
                self._hook(key, src, dst)
                f.write(raw[half:].cpu().numpy().tobytes())
            return name
        device = self.device if dst == HBM else torch.device("cpu")
        out = torch.empty(meta[1], dtype=meta[0], device=device)
        target = _bytes_of(out)
        target[:half].copy_(raw[:half])
        self._hook(key, src, dst)
        target[half:].copy_(raw[half:])
        return out

    def _hook(self, key, src: int, dst: int) -> None:
        if self.fault is not None:
            self.fault(key, TIERS[src], TIERS[dst])

    def _read(self, key, tier: int, payload, meta=None) -> torch.Tensor:
        if tier != DISK:
            return payload
        dtype, shape = self._meta[key] if meta is None else meta
        data = (self.directory / payload).read_bytes()
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
        return raw.view(dtype).reshape(shape)


# --- reload or recompute (07.05) -------------------------------------------------------------
def _positive(name: str, value, *, zero_ok: bool = False) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    exact = Fraction(value)
    if exact < 0 or (exact == 0 and not zero_ok):
        raise ValueError(f"{name} must be {'>= 0' if zero_ok else '> 0'}, got {value}")
    return exact


def _check_config(config) -> ModelConfig:
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a reference.model.ModelConfig, got {type(config).__name__}")
    return config


def _kv_bytes_per_token(c: ModelConfig) -> int:
    return 2 * c.n_layers * c.n_kv_heads * c.head_dim * torch.empty((), dtype=c.dtype).element_size()


def _tokens(c: ModelConfig, tokens) -> int:
    check_int("tokens", tokens, minimum=0)
    if tokens > c.max_seq_len:
        raise ValueError(f"tokens must be <= the model's max_seq_len={c.max_seq_len}, got {tokens}")
    return tokens


def _reload(c, tokens: int, bandwidth: Fraction, latency: Fraction) -> Fraction:
    return latency + tokens * _kv_bytes_per_token(c) / bandwidth


def _recompute(c, tokens: int, rate: Fraction) -> Fraction:
    return Fraction(forward_flops(c, batch=1, new_tokens=tokens), 1) / rate if tokens else Fraction(0)


def reload_seconds(config: ModelConfig, tokens: int, *, bandwidth: float, latency: float = 0.0) -> float:
    """Seconds to reload the KV cache of ``tokens`` tokens: ``latency + tokens x 2 x layers x
    kv_heads x head_dim x element bytes / bandwidth`` (a float)."""
    c = _check_config(config)
    n = _tokens(c, tokens)
    return float(_reload(c, n, _positive("bandwidth", bandwidth), _positive("latency", latency, zero_ok=True)))


def recompute_seconds(config: ModelConfig, tokens: int, *, flops_rate: float) -> float:
    """Seconds to rebuild it by prefill: ``forward_flops(config, batch=1, new_tokens=tokens) /
    flops_rate`` (0 for 0 tokens; a float)."""
    c = _check_config(config)
    n = _tokens(c, tokens)
    return float(_recompute(c, n, _positive("flops_rate", flops_rate)))


def crossover_tokens(config: ModelConfig, *, bandwidth: float, flops_rate: float, latency: float = 0.0) -> int | None:
    """The shortest prefix (1 to max_seq_len tokens) whose reload is no slower than its recompute,
    or None; compared exactly. Past it, reloading stays no slower (module doc)."""
    c = _check_config(config)
    bw = _positive("bandwidth", bandwidth)
    rate = _positive("flops_rate", flops_rate)
    lat = _positive("latency", latency, zero_ok=True)

    def reload_wins(n: int) -> bool:
        return _reload(c, n, bw, lat) <= _recompute(c, n, rate)

    if not reload_wins(c.max_seq_len):
        return None
    lo, hi = 0, c.max_seq_len          # reload loses at lo (or lo = 0), wins at hi: bisect the one flip
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reload_wins(mid):
            hi = mid
        else:
            lo = mid
    return hi
