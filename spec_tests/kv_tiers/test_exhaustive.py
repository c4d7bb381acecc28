"""Every short call sequence of a tiny universe (bounded-exhaustive exploration of the LRU orders).

The universe: three keys with fixed blocks of different dtypes and sizes (key 0: two bf16 NaNs with
payloads; key 1: three fp8 E5M2 codes; key 2: one int64), capacities (1, 1, 1), (2, 1, 1),
(1, 0, 1) and (1, 2, 0) (thorough: also (2, 2, 1) and (3, 1, 2)). From every state, every legal
call: ``put`` of each absent key, ``get`` (a reload, or an LRU touch in hbm) and ``remove`` of each
stored key, ``offload`` of each stored key to each lower tier. Breadth-first over states,
deduplicated by the state the model reaches (every tier's keys in LRU order; the bytes moved are
compared along each path, not merged), until no call reaches a new state: the exploration closes,
so every call is tried from every reachable state. Each call is run on a fresh store replaying the path that first reached
its state, and checked against the model (spec_tests/kv_tiers/model.py): the orders, every
block's bits, ``bytes_moved``, the dropped keys, the fault hook's calls (one per transfer, in the
contract's order) and the files on disk; then, for every transfer k of that call, the same call
with the hook raising at transfer k, on a fresh replay: it raises, and the store is exactly as
before the call. The new states reached per depth are pinned (``STATES``): 34, 52, 13 and 25
reachable states, closed at depth 4, 5, 3 and 4 (228, 408, 75 and 186 calls, each also faulted at
every one of its transfers).
"""
from __future__ import annotations

import torch
from hypothesis import settings

from spec_tests.kv_tiers.model import Model, disk_files, expected_files, observe, observe_model, raw

CAPACITIES = [(1, 1, 1), (2, 1, 1), (1, 0, 1), (1, 2, 0)]
THOROUGH = [(2, 2, 1), (3, 1, 2)]
BLOCKS = {0: torch.tensor([0x7FC1, -0x7F], dtype=torch.int16).view(torch.bfloat16),
          1: torch.tensor([0x7D, 0xFF, 0x80], dtype=torch.uint8).view(torch.float8_e5m2),
          2: torch.tensor([-(2**62)], dtype=torch.int64)}
# new states reached at each depth from the empty store, per capacities, until closure (measured)
STATES = {(1, 1, 1): [3, 12, 18, 0], (2, 1, 1): [3, 12, 18, 18, 0], (1, 0, 1): [3, 9, 0], (1, 2, 0): [3, 9, 12, 0]}


class Fault(RuntimeError):
    pass


def universe() -> list:
    return CAPACITIES + (THOROUGH if settings.get_current_profile_name() == "thorough" else [])


def calls(model: Model):
    out = [("put", k) for k in BLOCKS if k not in model.blocks]
    for k in sorted(model.blocks):
        out += [("get", k), ("remove", k)] + [("offload", k, t) for t in range(model.where(k) + 1, 3)]
    return out


def apply_model(model: Model, call):
    if call[0] == "put":
        return model.put(call[1], BLOCKS[call[1]])
    if call[0] == "get":
        return model.get(call[1])
    if call[0] == "offload":
        return model.offload(call[1], call[2])
    model.remove(call[1])
    return [], []


def apply_store(store, call):
    if call[0] == "put":
        return store.put(call[1], BLOCKS[call[1]])
    if call[0] == "get":
        return store.get(call[1])
    if call[0] == "offload":
        return store.offload(call[1], call[2])
    return store.remove(call[1])


def show(call) -> str:
    return f"{call[0]}({', '.join(map(repr, call[1:]))})"


def replay(make, path):
    store = make()
    for call in path:
        apply_store(store, call)
    return store


def check_call(make, path, call, transfers, dropped, trial, where) -> None:
    store = replay(make, path)
    hooked = []
    store.fault = lambda *a: hooked.append(a)
    try:
        out = apply_store(store, call)
        assert hooked == transfers, f"{where}: transfers {hooked}; the contract's {transfers}"
        if call[0] in ("put", "offload"):
            assert list(out) == dropped, f"{where} returned {out!r}; dropped {dropped}"
        if call[0] == "get":
            assert raw(out) == raw(BLOCKS[call[1]]) and out.dtype == BLOCKS[call[1]].dtype, f"{where}: the bits reloaded"
        orders = [store.order(t) for t in range(3)]
        assert orders == trial.tiers, f"{where}: orders {orders}; the model {trial.tiers}"
        assert observe(store, list(BLOCKS)) == observe_model(trial, list(BLOCKS)), f"{where}: bits or bytes_moved differ"
        assert disk_files(store) == expected_files(trial), f"{where}: the files are not the disk blocks"
    finally:
        store.close()


def check_faults(make, path, call, transfers, where) -> None:
    for k in range(len(transfers)):
        store = replay(make, path)
        before, files = observe(store, list(BLOCKS)), disk_files(store)
        count = [0]

        def hook(*a, k=k):
            count[0] += 1
            if count[0] == k + 1:
                raise Fault(k)
        store.fault = hook
        try:
            try:
                apply_store(store, call)
            except Fault:
                pass
            else:
                raise AssertionError(f"{where}: the fault at transfer {k} did not come out")
            assert observe(store, list(BLOCKS)) == before and disk_files(store) == files, (
                f"{where}, faulted at transfer {k} {transfers[k]}: the store changed")
        finally:
            store.close()


def test_every_short_sequence_follows_the_model(impl, tmp_path):
    """Every call from every state reached within the depth (module docstring), faulted at each of
    its transfers too: the store as the model says, or unchanged after a fault."""
    counts = {}
    serial = [0]
    for caps in universe():
        def make(caps=caps):
            serial[0] += 1
            return impl.get("KVTierStore")(caps, directory=tmp_path / f"x{serial[0]}")
        frontier = [((), Model(caps))]
        seen = {Model(caps).state()[0]}
        per_depth = []
        while frontier:
            new = []
            for path, model in frontier:
                for call in calls(model):
                    trial = model.clone()
                    transfers, dropped = apply_model(trial, call)
                    where = f"KVTierStore({caps}) after {[show(c) for c in path]}: {show(call)}"
                    check_call(make, path, call, transfers, dropped, trial, where)
                    check_faults(make, path, call, transfers, where)
                    key = trial.state()[0]
                    if key not in seen:
                        seen.add(key)
                        new.append((path + (call,), trial))
            per_depth.append(len(new))
            frontier = new
        counts[caps] = per_depth
    assert all(counts[c] == STATES[c] for c in STATES), f"new states per depth {counts}; pinned {STATES}"
