"""The KV tier store as a state machine (course 07.04-07.06).

Hypothesis drives the implementation's ``KVTierStore`` and the model (spec_tests/kv_tiers/model.py)
with the same random calls -- ``put`` of new keys (blocks of every dtype, random bits), ``get`` of
stored keys (a reload from any tier), ``offload`` to a lower tier, ``remove``; faulted calls (the
fault hook raises at a drawn transfer); rejected calls (a key put twice, a missing key, a tier that
is not lower) -- on capacities of 1 to 3 blocks of hbm and 0 to 3 of host and disk. After every
step:

- every tier's keys in LRU order equal the model's, and no tier holds more than its capacity;
- every stored block's bits (``peek``) equal what was put; ``get``'s result too;
- ``bytes_moved`` per link equals the model's count; the keys ``put``/``offload`` drop are the model's;
- the fault hook was called once per transfer, in the model's order; a faulted call and a rejected
  call changed nothing (orders, bits, bytes, files);
- the directory holds exactly the disk blocks' bytes, one file each.
"""
from __future__ import annotations

import itertools

from hypothesis import Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conformance.stateful import run_as_test
from spec_tests.kv_tiers.model import Model, disk_files, expected_files, observe, raw
from spec_tests.kv_tiers.strategies import blocks

KEYS = st.sampled_from([0, 1, 2, 3, 4, "a", "b", (1, 2)])
_FOLDERS = itertools.count()


class InjectedFault(RuntimeError):
    pass


class TierMachine(RuleBasedStateMachine):
    impl = None
    tmp = None

    @initialize(caps=st.tuples(st.integers(1, 3), st.integers(0, 3), st.integers(0, 3)))
    def setup(self, caps):
        self.config = f"KVTierStore({caps})"
        self.store = self.impl.get("KVTierStore")(caps, directory=self.tmp / f"sm{next(_FOLDERS)}")
        self.model = Model(caps)
        self.calls: list = []
        self.log: list[str] = []
        self.seen: set = set()
        self.store.fault = self.record

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()

    def record(self, *args):
        self.calls.append(args)

    def where(self, call: str) -> str:
        return f"{self.config}, after {self.log[-8:]}: {call}"

    def run(self, call: str, fn, expected_transfers):
        self.calls = []
        out = fn()
        assert self.calls == expected_transfers, (f"{self.where(call)}: transfers (the fault hook's calls) {self.calls}; "
                                                  f"the contract's: {expected_transfers}")
        self.log.append(call)
        return out

    @rule(key=KEYS, block=blocks(max_elements=4))
    def put(self, key, block):
        if key in self.model.blocks:
            return self.rejected(f"put({key!r}, ...)", lambda: self.store.put(key, block), ValueError)
        self.seen.add(key)
        trial = self.model.clone()
        transfers, dropped = trial.put(key, block)
        got = self.run(f"put({key!r}, {block.dtype} {tuple(block.shape)})", lambda: self.store.put(key, block), transfers)
        assert list(got) == dropped, f"{self.where('put')} returned {got!r}; dropped: {dropped}"
        self.model = trial

    @precondition(lambda self: self.model.blocks)
    @rule(data=st.data())
    def get(self, data):
        key = data.draw(st.sampled_from(sorted(self.model.blocks, key=repr)), label="stored key")
        trial = self.model.clone()
        transfers, _ = trial.get(key)
        got = self.run(f"get({key!r})", lambda: self.store.get(key), transfers)
        dtype, shape, bits = trial.blocks[key]
        assert got.dtype == dtype and tuple(got.shape) == shape and raw(got) == bits, (
            f"{self.where(f'get({key!r})')}: {got.dtype} {tuple(got.shape)} {raw(got).hex()}; put: {dtype} {shape} {bits.hex()}")
        self.model = trial

    @precondition(lambda self: any(self.model.where(k) < 2 for k in self.model.blocks))
    @rule(data=st.data())
    def offload(self, data):
        key = data.draw(st.sampled_from(sorted((k for k in self.model.blocks if self.model.where(k) < 2), key=repr)),
                        label="key above disk")
        tier = data.draw(st.integers(self.model.where(key) + 1, 2), label="tier")
        trial = self.model.clone()
        transfers, dropped = trial.offload(key, tier)
        got = self.run(f"offload({key!r}, {tier})", lambda: self.store.offload(key, tier), transfers)
        assert list(got) == dropped, f"{self.where(f'offload({key!r}, {tier})')} returned {got!r}; dropped: {dropped}"
        self.model = trial

    @precondition(lambda self: self.model.blocks)
    @rule(data=st.data())
    def remove(self, data):
        key = data.draw(st.sampled_from(sorted(self.model.blocks, key=repr)), label="stored key")
        self.run(f"remove({key!r})", lambda: self.store.remove(key), [])
        self.model.remove(key)

    @precondition(lambda self: self.model.blocks)
    @rule(data=st.data(), k=st.integers(0, 5))
    def faulted(self, data, k):
        """A get or offload whose k-th transfer faults mid-copy: it raises, nothing changes."""
        key = data.draw(st.sampled_from(sorted(self.model.blocks, key=repr)), label="stored key")
        src = self.model.where(key)
        targets = ([0] if src > 0 else []) + list(range(src + 1, 3))     # a reload, or an offload down
        tier = data.draw(st.sampled_from(targets), label="to tier (0: a reload)")
        trial = self.model.clone()
        transfers, _ = trial.get(key) if tier == 0 else trial.offload(key, tier)
        if k >= len(transfers):
            return
        call = f"get({key!r})" if tier == 0 else f"offload({key!r}, {tier})"
        calls = []

        def hook(*args):
            calls.append(args)
            if len(calls) == k + 1:
                raise InjectedFault(call)
        before, files = observe(self.store, self.seen), disk_files(self.store)
        self.store.fault = hook
        try:
            (self.store.get(key) if tier == 0 else self.store.offload(key, tier))
        except InjectedFault:
            pass
        else:
            raise AssertionError(f"{self.where(call)} with transfer {k} ({transfers[k]}) faulting did not raise the fault")
        finally:
            self.store.fault = self.record
        assert calls == transfers[:k + 1], f"{self.where(call)}: fault calls {calls}; the transfers begin {transfers[:k + 1]}"
        assert observe(self.store, self.seen) == before and disk_files(self.store) == files, (
            f"{self.where(call)} faulted at transfer {k} {transfers[k]} and changed the store")
        self.log.append(f"{call} (faulted at transfer {k})")

    def rejected(self, call: str, fn, error) -> None:
        before, files = observe(self.store, self.seen), disk_files(self.store)
        try:
            fn()
        except error:
            pass
        except Exception as exc:
            raise AssertionError(f"{self.where(call)}: expected {error.__name__}, got {type(exc).__name__}: {exc}") from exc
        else:
            raise AssertionError(f"{self.where(call)} was accepted; expected {error.__name__}")
        assert observe(self.store, self.seen) == before and disk_files(self.store) == files, (
            f"{self.where(call)}: the rejected call changed the store")
        self.log.append(f"{call} (rejected)")

    @rule(key=KEYS)
    def get_missing(self, key):
        if key not in self.model.blocks:
            self.rejected(f"get({key!r}) of a missing key", lambda: self.store.get(key), KeyError)

    @precondition(lambda self: self.model.blocks)
    @rule(data=st.data())
    def offload_not_down(self, data):
        key = data.draw(st.sampled_from(sorted(self.model.blocks, key=repr)), label="stored key")
        tier = data.draw(st.integers(0, self.model.where(key)), label="tier not below")
        self.rejected(f"offload({key!r}, {tier}) from tier {self.model.where(key)}",
                      lambda: self.store.offload(key, tier), ValueError)

    @invariant()
    def same_as_the_model(self):
        if not hasattr(self, "store"):
            return
        orders = [self.store.order(t) for t in range(3)]
        assert orders == self.model.tiers, f"{self.where('order(0..2)')} = {orders}; the model: {self.model.tiers}"
        for t, cap in enumerate(self.model.capacities):
            assert len(orders[t]) <= cap, f"{self.where('capacity')}: tier {t} holds {len(orders[t])} > {cap}"
        assert len(self.store) == len(self.model.blocks)
        for key in self.seen:
            assert self.store.where(key) == self.model.where(key), f"{self.where(f'where({key!r})')}"
            if key in self.model.blocks:
                b = self.store.peek(key)
                dtype, shape, bits = self.model.blocks[key]
                assert b.dtype == dtype and tuple(b.shape) == shape and raw(b) == bits, (
                    f"{self.where(f'peek({key!r})')}: bits changed")
        assert dict(self.store.bytes_moved) == self.model.moved, (
            f"{self.where('bytes_moved')} = {self.store.bytes_moved}; the model: {self.model.moved}")
        assert disk_files(self.store) == expected_files(self.model), f"{self.where('the directory')}: files are not the disk blocks' bytes"


def test_state_machine(impl, tmp_path):
    """Random puts, reloads, offloads, removes, faulted and rejected calls: every observable as the model's."""
    machine = type("TierMachineFor", (TierMachine,), {"impl": impl, "tmp": tmp_path})
    steps = 60 if settings.get_current_profile_name() == "thorough" else 25
    phases = tuple(p for p in settings().phases if p is not Phase.explain)
    run_as_test(machine, settings=settings(stateful_step_count=steps, phases=phases))
