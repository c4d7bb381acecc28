"""The KV tier store (course 07.04-07.06): reload is bitwise equal for every dtype and every tier
a block travels through; the disk tier is one file of raw bytes per block; a faulted transfer
loses nothing and changes nothing; bad input. The LRU orders under random and exhaustive call
sequences are test_state_machine.py and test_exhaustive.py."""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.kv_tiers.model import Model, disk_files, disk_names, expected_files, observe, observe_model, raw
from spec_tests.kv_tiers.strategies import DTYPES, blocks, nan_payload_block


class InjectedFault(RuntimeError):
    """The error a test's fault hook raises mid-copy."""


@pytest.fixture
def stores(impl, tmp_path):
    made = []

    def make(capacities, **kw):
        s = impl.get("KVTierStore")(capacities, directory=tmp_path / f"d{len(made)}", **kw)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def same_bits(got: torch.Tensor, want: torch.Tensor) -> bool:
    return got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape) and raw(got) == raw(want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("via", ["hbm", "host", "disk"])
def test_reload_is_bitwise_equal_for_every_bit_pattern(stores, dtype, via):
    """A block of every special bit pattern of its dtype (NaN payloads of either sign, -0.0,
    infinities, subnormals, all 256 fp8 codes), offloaded to ``via`` and reloaded, comes back bit
    for bit with its dtype and shape; peek before the reload too. Mutants: disk_via_float32."""
    if dtype.is_floating_point:
        block = nan_payload_block(dtype).reshape(-1, 1)
    else:
        block = torch.arange(-4, 4).to(dtype).reshape(2, 4)
    s = stores((1, 1, 1))
    s.put("x", block)
    tier = ("hbm", "host", "disk").index(via)
    if tier:
        s.offload("x", tier)
    assert s.where("x") == tier
    assert same_bits(s.peek("x"), block), f"peek of a {dtype} block in {via} changed its bits"
    got = s.get("x")
    assert same_bits(got, block), f"get of a {dtype} block reloaded from {via}: {raw(got).hex()} != {raw(block).hex()}"
    assert got.is_contiguous() and s.where("x") == 0


@example(block=torch.tensor([0x7FC1, -0x3F], dtype=torch.int16).view(torch.bfloat16), others=[]).via(
    "mutant:disk_via_float32")
@given(block=blocks(), others=st.lists(blocks(max_elements=3), max_size=4))
def test_reload_after_a_trip_through_every_tier(stores, block, others):
    """Any block (any dtype, any shape, empty ones included) pushed down to disk by later puts, then
    reloaded: the same bits, dtype and shape; the caller's tensor is copied at put (changing it
    afterwards changes nothing)."""
    s = stores((1, 1, 8))
    original, block = block, block.clone()     # the example's tensor is shared between runs: scribble on a copy
    s.put("x", block)
    block.reshape(-1).view(torch.uint8).fill_(0x55)     # the caller reuses its buffer
    for i, b in enumerate(others + [torch.zeros(1), torch.zeros(2)]):
        s.put(i, b)
    assert s.where("x") == 2, f"after {len(others) + 2} more puts into capacities (1, 1, 8) the first block is on disk"
    got = s.get("x")
    assert same_bits(got, original), f"{original.dtype} {tuple(original.shape)}: reloaded {raw(got).hex()}, put {raw(original).hex()}"


@given(keys=st.lists(st.integers(0, 9), min_size=1, max_size=12, unique=True), data=st.data())
def test_disk_holds_one_file_of_raw_bytes_per_block(stores, keys, data):
    """The disk tier's directory holds exactly one file per block on disk, each the block's raw
    bytes (row-major), named <n>.kv; nothing else (no temporary file left)."""
    s = stores((1, 2, 4))
    model = Model((1, 2, 4))
    for k in keys:
        b = data.draw(blocks(max_elements=4), label=f"block {k}")
        s.put(k, b)
        model.put(k, b)
    assert disk_files(s) == expected_files(model), "the files are not the disk blocks' raw bytes"
    names = disk_names(s)
    assert all(n.endswith(".kv") and n[:-3].isdigit() for n in names), f"file names {names}: expected <n>.kv"
    assert observe(s, keys) == observe_model(model, keys)


def _ops(s, model, ops):
    for op, key in ops:
        if op == "put":
            b = torch.arange(key + 1, dtype=torch.int16).view(torch.bfloat16)
            s.put(key, b)
            model.put(key, b)
        elif op == "get":
            s.get(key)
            model.get(key)
        else:
            s.offload(key, op)
            model.offload(key, op)


FAULT_OPS = st.sampled_from(["put", "get", "offload1", "offload2"])


@example(prefix=[("put", 0), ("put", 1), ("put", 2), ("put", 3)], op="get", key=0, k=3).via(
    "mutant:fault_half_committed mutant:fault_leaves_partial_file")
@example(prefix=[("put", 0), ("put", 1)], op="put", key=5, k=0).via("mutant:fault_half_committed")
@given(prefix=st.lists(st.tuples(st.just("put"), st.integers(0, 6)), max_size=6, unique_by=lambda t: t[1]),
       op=FAULT_OPS, key=st.integers(0, 6), k=st.integers(0, 8))
def test_a_faulted_transfer_loses_nothing_and_changes_nothing(stores, prefix, op, key, k):
    """After some puts, an operation (put, get, offload) whose k-th transfer faults mid-copy (the
    hook raises after half the bytes are written): the exception comes out of the call, and every
    tier's order, every block's bits, bytes_moved and the files on disk are as before. The hook is
    called once per transfer, with (key, src, dst) in the contract's order; without the fault the
    same operation then succeeds as the model says."""
    s = stores((1, 1, 2))
    model = Model((1, 1, 2))
    _ops(s, model, prefix)
    stored = list(model.blocks)          # what the prefix left (a block may have been dropped)
    if (key in stored) == (op == "put"):
        return
    trial = model.clone()
    b = torch.tensor([1.0, -0.0, float("nan")], dtype=torch.float16)
    if op == "put":
        transfers, _ = trial.put(key, b)
    elif op == "get":
        transfers, _ = trial.get(key)
    else:
        tier = int(op[-1])
        if trial.where(key) >= tier:
            return
        transfers, _ = trial.offload(key, tier)
    calls = []

    def hook(*args):
        calls.append(args)
        if len(calls) == k + 1:
            raise InjectedFault(f"injected at transfer {k}")
    before, files = observe(s, stored + [key]), disk_files(s)
    names = disk_names(s)
    s.fault = hook
    call = {"put": lambda: s.put(key, b), "get": lambda: s.get(key)}.get(op) or (lambda: s.offload(key, int(op[-1])))
    if k < len(transfers):
        with pytest.raises(InjectedFault):
            call()
        assert calls == transfers[:k + 1], f"fault calls {calls}; the transfers of {op}({key!r}) begin {transfers[:k + 1]}"
        after = observe(s, stored + [key])
        assert after == before, f"{op}({key!r}) faulted at transfer {k} ({transfers[k]}) changed the store:\n {before}\n {after}"
        assert disk_files(s) == files and disk_names(s) == names, f"{op}({key!r}) faulted: files {disk_names(s)}, were {names}"
        s.fault = None
        call()
    else:
        call()
        assert calls == transfers, f"fault calls {calls}; the transfers of {op}({key!r}) are {transfers}"
    assert observe(s, stored + [key]) == observe_model(trial, stored + [key])


def test_capacity_zero_tiers_pass_blocks_through(stores):
    """A host of capacity 0 passes a demoted block straight to disk (two transfers); a disk of
    capacity 0 drops what reaches it; offloading into it drops the block itself."""
    s = stores((1, 0, 1))
    s.put("a", torch.ones(2))
    assert s.put("b", torch.ones(3)) == [] and s.order(2) == ["a"] and s.order(1) == []
    assert s.bytes_moved["hbm->host"] == 8 and s.bytes_moved["host->disk"] == 8
    assert s.put("c", torch.ones(1)) == ["a"] and "a" not in s
    t = stores((2, 1, 0))
    t.put("a", torch.ones(1))
    assert t.offload("a", 2) == ["a"] and len(t) == 0 and t.bytes_moved["host->disk"] == 4


def test_get_returns_the_hbm_block_on_the_device(stores):
    """get's result is the block in hbm (contiguous, on the store's device); a block put from a
    non-contiguous view comes back with the view's values."""
    s = stores((2, 1, 1))
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    s.put("t", base.t())
    got = s.get("t")
    assert got.is_contiguous() and got.device == torch.device("cpu") and torch.equal(got, base.t())


def test_hand_trace(stores):
    """docs/kv_tiers.md's trace, capacities (2, 1, 1): put a, b, c -> hbm [b, c], host [a]; put d
    -> hbm [c, d], host [b], disk [a]; get a (disk -> host -> hbm) -> hbm [d, a], host [c], disk [b]
    (b was host's LRU: it went down when c came); offload d to disk -> hbm [a], host [c], disk [d],
    b dropped; offload a (to host, the default) -> host [a], disk [c], d dropped. Mutants:
    demote_to_lru_end, evict_mru, reload_skips_host_count."""
    s = stores((2, 1, 1))
    for k in "abc":
        s.put(k, torch.full((4,), ord(k), dtype=torch.int8))
    assert [s.order(t) for t in range(3)] == [["b", "c"], ["a"], []]
    s.put("d", torch.full((4,), 100, dtype=torch.int8))
    assert [s.order(t) for t in range(3)] == [["c", "d"], ["b"], ["a"]]
    assert torch.equal(s.get("a"), torch.full((4,), ord("a"), dtype=torch.int8))
    assert [s.order(t) for t in range(3)] == [["d", "a"], ["c"], ["b"]]
    assert s.offload("d", 2) == ["b"]
    assert [s.order(t) for t in range(3)] == [["a"], ["c"], ["d"]]
    assert s.bytes_moved == {"hbm->host": 16, "host->disk": 12, "disk->host": 4, "host->hbm": 4}, s.bytes_moved
    assert s.offload("a") == ["d"], "offload's default tier is host: a to host, c to disk, d dropped"
    assert [s.order(t) for t in range(3)] == [[], ["a"], ["c"]]


def test_close_deletes_the_disk_files(impl, tmp_path):
    """close() deletes the disk tier's files; a directory the caller gave stays (empty), one the
    store made (directory=None) goes."""
    given_ = impl.get("KVTierStore")((1, 1, 2), directory=tmp_path / "mine")
    made = impl.get("KVTierStore")((1, 1, 2))
    for s in (given_, made):
        for k in range(4):
            s.put(k, torch.ones(3))
        assert len(list(s.directory.iterdir())) == 2
    folder = made.directory
    given_.close()
    made.close()
    assert (tmp_path / "mine").is_dir() and not any((tmp_path / "mine").iterdir())
    assert not folder.exists()


# --- bad input -------------------------------------------------------------------------------
CAPACITY_BAD = [
    Bad("capacities not a sequence", dict(capacities=3), TypeError, ("capacities",)),
    Bad("capacities a str", dict(capacities="123"), TypeError, ("capacities",)),
    Bad("two capacities", dict(capacities=(1, 2)), ValueError, ("capacities",)),
    Bad("four capacities", dict(capacities=(1, 2, 3, 4)), ValueError, ("capacities",)),
    Bad("hbm capacity zero", dict(capacities=(0, 2, 2)), ValueError, ("capacities",)),
    Bad("negative host capacity", dict(capacities=(1, -1, 2)), ValueError, ("capacities",)),
    Bad("negative disk capacity", dict(capacities=(1, 1, -2)), ValueError, ("capacities",)),
    Bad("float capacity", dict(capacities=(1, 2.0, 2)), TypeError, ("capacities",)),
    Bad("bool capacity", dict(capacities=(True, 2, 2)), TypeError, ("capacities",)),
    Bad("directory an int", dict(directory=5), TypeError, ("directory",)),
    Bad("fault not callable", dict(fault=3), TypeError, ("fault",)),
]


@bad_cases(CAPACITY_BAD)
def test_store_rejects_bad_configuration(impl, bad, tmp_path):
    """capacities three ints, hbm >= 1, host and disk >= 0; directory None, a str or a path; fault
    None or a callable."""
    assert_rejects(impl.get("KVTierStore"), dict(capacities=(1, 2, 2), directory=str(tmp_path / "fresh")), bad)


def test_store_refuses_a_directory_that_is_not_empty(impl, tmp_path):
    """The disk tier owns its directory: an existing file there is refused (ValueError naming
    directory), and left alone; an empty or missing directory is accepted."""
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "precious.bin").write_bytes(b"x")
    assert_rejects(impl.get("KVTierStore"), dict(capacities=(1, 1, 1), directory=tmp_path / "taken"),
                   Bad("directory not empty", {}, ValueError, ("directory",)))
    assert (tmp_path / "taken" / "precious.bin").read_bytes() == b"x"
    (tmp_path / "empty").mkdir()
    impl.get("KVTierStore")((1, 1, 1), directory=tmp_path / "empty").close()


def _loaded(impl, tmp_path):
    """(2, 1, 1): hbm [c, d], host [b], disk [a]."""
    s = impl.get("KVTierStore")((2, 1, 1), directory=tmp_path / "bad")
    for k in "abcd":
        s.put(k, torch.full((2,), ord(k), dtype=torch.int16))
    return s


def _state(s):
    return observe(s, list("abcdz")), disk_files(s)


CALL_BAD = [
    Bad("put an existing key", dict(op="put", key="a"), ValueError, ("key",)),
    Bad("put an unhashable key", dict(op="put", key=["a"]), TypeError, ("key",)),
    Bad("put a list block", dict(op="put", key="z", block=[1, 2]), TypeError, ("block",)),
    Bad("put a None block", dict(op="put", key="z", block=None), TypeError, ("block",)),
    Bad("get a missing key", dict(op="get", key="z"), KeyError, ("key",)),
    Bad("get an unhashable key", dict(op="get", key={}), TypeError, ("key",)),
    Bad("peek a missing key", dict(op="peek", key="z"), KeyError, ("key",)),
    Bad("remove a missing key", dict(op="remove", key="z"), KeyError, ("key",)),
    Bad("offload a missing key", dict(op="offload", key="z"), KeyError, ("key",)),
    Bad("offload to its own tier", dict(op="offload", key="b", tier=1), ValueError, ("tier",)),
    Bad("offload up", dict(op="offload", key="a", tier=1), ValueError, ("tier",)),
    Bad("offload to tier 3", dict(op="offload", key="c", tier=3), ValueError, ("tier",)),
    Bad("offload to tier -1", dict(op="offload", key="c", tier=-1), ValueError, ("tier",)),
    Bad("offload to a float tier", dict(op="offload", key="c", tier=1.0), TypeError, ("tier",)),
    Bad("offload to a bool tier", dict(op="offload", key="c", tier=True), TypeError, ("tier",)),
    Bad("order of tier 3", dict(op="order", tier=3), ValueError, ("tier",)),
    Bad("order of tier -1", dict(op="order", tier=-1), ValueError, ("tier",)),
    Bad("order of a str tier", dict(op="order", tier="hbm"), TypeError, ("tier",)),
]


@bad_cases(CALL_BAD)
def test_calls_reject_bad_input_and_change_nothing(impl, bad, tmp_path):
    """Each bad call raises the error named and leaves the store as it was (orders, bits, bytes
    moved, files)."""
    s = _loaded(impl, tmp_path)

    def call(op, key=None, block=torch.ones(1), tier=None):
        if op == "put":
            return s.put(key, block)
        if op == "offload":
            return s.offload(key, tier if tier is not None else 1)
        if op == "order":
            return s.order(tier)
        return getattr(s, op)(key)
    try:
        assert_rejects(call, dict(op="get", key="a"), bad, state=lambda: _state(s))
    finally:
        s.close()
