"""BranchKV: the K/V of forked sequences, copied on write (course 08.06, through concept paged).

A state machine drives the implementation's ``BranchKV`` with random ``add``, ``fork``, ``append``
and ``free`` calls (and rejected ones: a live id, an unknown or freed one, out of blocks) over
pools of 1 to 6 blocks of 1 to 3 slots, 1 or 2 layers, KV heads and head dims, every K/V value
distinct. After every step it checks, against the abstract model of spec_tests/parallel_sampling/
oracles.py (``Branches``; never the reference):

- ``read(seq)`` of every live sequence gives back exactly the K/V written into it and its
  ancestors, in token order, whatever its siblings wrote, copied or freed since;
- the block structure up to a renaming of block ids: each table's length is ceil(tokens /
  block_size); two tables share a block exactly where the model's share one; ``ref_count`` of
  every block is the number of tables holding it; ``blocks_in_use`` = ``num_blocks -
  num_free_blocks`` = the distinct blocks of the tables;
- ``append`` returns ``[(old last block, its copy)]`` exactly when it writes into a partial last
  block another table holds, else ``[]``; ``free`` gives back exactly the blocks no other table
  holds; a rejected call (a live id, an unknown or freed one, out of blocks) changes nothing.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.stateful import run_as_test
from spec_tests.parallel_sampling.oracles import Branches

SEQS = ("a", "b", "c", 7)
ERRORS = (TypeError, ValueError, KeyError)


class Values:
    """Distinct K/V for every token written: K counts up from 1 (exact in float32), V = -K."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int):
        self.shape, self.next = (layers, kv_heads, head_dim), 1.0

    def tokens(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        layers, heads, dim = self.shape
        size = layers * n * heads * dim
        k = torch.arange(self.next, self.next + size, dtype=torch.float32).reshape(layers, n, heads, dim)
        self.next += size
        return k, -k


def per_token(k: torch.Tensor) -> list:
    """A (layers, n, heads, dim) tensor as n per-token tensors (layers, heads, dim)."""
    return [k[:, i].clone() for i in range(k.shape[1])]


def expected(model: Branches, seq, shape) -> torch.Tensor:
    tokens = model.contents[seq]
    layers, heads, dim = shape
    if not tokens:
        return torch.zeros(layers, 0, heads, dim)
    if not isinstance(tokens[0], torch.Tensor):          # one number per token (layers = heads = dim = 1)
        return torch.tensor(tokens, dtype=torch.float32).reshape(1, len(tokens), 1, 1)
    return torch.stack(tokens, dim=1)


def snapshot(kv, num_blocks: int) -> dict:
    """Everything observable of ``kv``, as plain data (built where the implementation runs, for the
    exhaustive exploration; compared in the judge by :func:`check_snapshot`)."""
    seqs = sorted(kv.sequences(), key=repr)
    out = {"seqs": [], "in_use": kv.blocks_in_use, "free": kv.num_free_blocks,
           "refs": [kv.ref_count(b) for b in range(num_blocks)]}
    for s in seqs:
        k, v = kv.read(s)
        out["seqs"].append((s, list(kv.block_table(s)), kv.num_tokens(s),
                            tuple(k.shape) if isinstance(k, torch.Tensor) else None,
                            k.flatten().tolist() if isinstance(k, torch.Tensor) else k,
                            v.flatten().tolist() if isinstance(v, torch.Tensor) else v))
    return out


def snapshot_where_it_runs(impl, kv, num_blocks: int) -> dict:
    """:func:`snapshot` made where the implementation runs (``impl.call_in_process``): one message
    for a submission instead of one per read."""
    return snapshot(kv, num_blocks)


def check_state(impl, kv, model: Branches, num_blocks: int, shape, where: str) -> None:
    """Every observable of ``kv`` against the model (module doc), blocks up to renaming."""
    check_snapshot(impl.call_in_process(snapshot_where_it_runs, kv, num_blocks), model, num_blocks, shape, where)


def check_snapshot(snap: dict, model: Branches, num_blocks: int, shape, where: str) -> None:
    """A :func:`snapshot` against the model: the K/V read back, the block structure up to renaming,
    ref counts, blocks in use."""
    live = sorted(model.tables, key=repr)
    got_seqs = [rec[0] for rec in snap["seqs"]]
    assert got_seqs == live, f"{where}: sequences() = {got_seqs}; live: {live}"
    rename: dict = {}
    back: dict = {}
    tables = {rec[0]: rec[1] for rec in snap["seqs"]}
    for s, table, n, k_shape, k, v in snap["seqs"]:
        want = model.tables[s]
        assert n == len(model.contents[s]), f"{where}: num_tokens({s!r}) = {n}; it holds {len(model.contents[s])} tokens"
        assert len(table) == len(want), (f"{where}: block_table({s!r}) = {table}: {len(table)} blocks for {n} "
                                         f"tokens of block_size {model.block_size}; expected {len(want)}")
        for j, (x, y) in enumerate(zip(table, want)):
            assert isinstance(x, int) and 0 <= x < num_blocks, f"{where}: block_table({s!r})[{j}] = {x!r}"
            if rename.setdefault(x, y) != y or back.setdefault(y, x) != x:
                raise AssertionError(
                    f"{where}: block_table({s!r})[{j}] = {x}: the tables share blocks where no fork shares them, or "
                    f"do not share a block a fork shares (tables {tables})")
        want_k = expected(model, s, shape)
        assert k_shape == tuple(want_k.shape), f"{where}: read({s!r}) gives K of shape {k_shape}; expected {tuple(want_k.shape)}"
        if k != want_k.flatten().tolist() or v != (-want_k).flatten().tolist():
            got_k, got_v = torch.tensor(k).reshape(want_k.shape), torch.tensor(v).reshape(want_k.shape)
            bad = next(i for i in range(n) if not (torch.equal(got_k[:, i], want_k[:, i]) and torch.equal(got_v[:, i], -want_k[:, i])))
            raise AssertionError(f"{where}: read({s!r}) token {bad}: K {got_k[:, bad].flatten().tolist()}, V "
                                 f"{got_v[:, bad].flatten().tolist()}; written: K {want_k[:, bad].flatten().tolist()} "
                                 f"(and V = -K) -- a copy on write lost it, or another sequence's write reached it")
    in_use = len(rename)
    assert snap["in_use"] == in_use and snap["free"] == num_blocks - in_use, (
        f"{where}: blocks_in_use {snap['in_use']}, num_free_blocks {snap['free']}; the tables hold "
        f"{in_use} distinct blocks of {num_blocks}")
    for b in range(num_blocks):
        holders = sum(t.count(b) for t in tables.values())
        assert snap["refs"][b] == holders, f"{where}: ref_count({b}) = {snap['refs'][b]}; {holders} tables hold it"


def expect_error(fn, error, words, where: str) -> None:
    try:
        fn()
    except error as exc:
        assert all(w in str(exc) for w in words), f"{where}: the {type(exc).__name__} should name {words}; it says: {exc}"
    except Exception as exc:
        raise AssertionError(f"{where}: expected {error.__name__}, got {type(exc).__name__}: {exc}") from exc
    else:
        raise AssertionError(f"{where} was accepted; expected {error.__name__}")


class BranchKVMachine(RuleBasedStateMachine):
    impl = None

    @initialize(num_blocks=st.integers(1, 6), block_size=st.integers(1, 3), layers=st.integers(1, 2),
                kv_heads=st.integers(1, 2), head_dim=st.integers(1, 2))
    def setup(self, num_blocks, block_size, layers, kv_heads, head_dim):
        self.nb, self.shape = num_blocks, (layers, kv_heads, head_dim)
        self.kv = self.impl.get("BranchKV")(num_blocks, block_size, layers=layers, kv_heads=kv_heads, head_dim=head_dim)
        self.model = Branches(block_size)
        self.values = Values(layers, kv_heads, head_dim)
        self.log = [f"kv = BranchKV({num_blocks}, {block_size}, layers={layers}, kv_heads={kv_heads}, head_dim={head_dim})"]

    def where(self, call: str) -> str:
        return "\n    ".join(self.log[:1] + self.log[-8:] + [call + "   # <- this call"])

    def free_blocks(self) -> int:
        return self.nb - self.model.in_use()

    def rejected(self, call: str, fn, error, words) -> None:
        expect_error(fn, error, words, self.where(call))
        check_state(self.impl, self.kv, self.model, self.nb, self.shape, f"after the rejected {call}")
        self.log.append(f"{call}  # rejected")

    @rule(seq=st.sampled_from(SEQS), n=st.integers(0, 4))
    def add(self, seq, n):
        k, v = self.values.tokens(n)
        call = f"kv.add({seq!r}, <{n} tokens>)"
        if seq in self.model.tables:
            self.rejected(call, lambda: self.kv.add(seq, k, v), ValueError, (repr(seq),))
        elif -(-n // self.model.block_size) > self.free_blocks():
            self.rejected(call, lambda: self.kv.add(seq, k, v), ValueError, ("out of blocks",))
        else:
            self.kv.add(seq, k, v)
            self.model.add(seq, per_token(k))
            self.log.append(call)

    @precondition(lambda self: self.model.tables)
    @rule(data=st.data(), child=st.sampled_from(SEQS))
    def fork(self, data, child):
        parent = data.draw(st.sampled_from(sorted(self.model.tables, key=repr)), label="parent")
        call = f"kv.fork({parent!r}, {child!r})"
        if child in self.model.tables:
            self.rejected(call, lambda: self.kv.fork(parent, child), ValueError, (repr(child),))
        else:
            self.kv.fork(parent, child)
            self.model.fork(parent, child)
            self.log.append(call)

    @precondition(lambda self: self.model.tables)
    @rule(data=st.data(), n=st.integers(0, 4))
    def append(self, data, n):
        seq = data.draw(st.sampled_from(sorted(self.model.tables, key=repr)), label="seq")
        k, v = self.values.tokens(n)
        call = f"kv.append({seq!r}, <{n} tokens>)"
        if self.model.need(seq, n) > self.free_blocks():
            self.rejected(call, lambda: self.kv.append(seq, k, v), ValueError, ("out of blocks",))
            return
        before = list(self.kv.block_table(seq))
        copies = [tuple(c) for c in self.kv.append(seq, k, v)]
        copied = self.model.append(seq, per_token(k))
        after = list(self.kv.block_table(seq))
        if copied:
            want = [(before[-1], after[len(before) - 1])]
            assert copies == want and want[0][0] != want[0][1], (
                f"{self.where(call)}\n  -> copies {copies}: it wrote into the shared partial last block "
                f"{before[-1]}, so the copy list is [({before[-1]}, its copy)], the copy at that place of the table "
                f"(table {before} -> {after})")
        else:
            assert copies == [], (f"{self.where(call)}\n  -> copies {copies}; nothing to copy (last block "
                                  f"full, not shared, or nothing appended): []")
        self.log.append(call)

    @precondition(lambda self: self.model.tables)
    @rule(data=st.data())
    def free(self, data):
        seq = data.draw(st.sampled_from(sorted(self.model.tables, key=repr)), label="seq")
        call = f"kv.free({seq!r})"
        own, before = self.model.own_blocks(seq), self.kv.num_free_blocks
        self.kv.free(seq)
        self.model.free(seq)
        assert self.kv.num_free_blocks - before == own, (
            f"{self.where(call)}\n  -> {self.kv.num_free_blocks - before} blocks freed; the sequence alone held {own} "
            "(a block another sequence still holds must stay)")
        self.log.append(call)

    @rule(seq=st.sampled_from(("gone", 99)))
    def unknown(self, seq):
        k, v = self.values.tokens(1)
        for op, fn in (("append", lambda: self.kv.append(seq, k, v)), ("free", lambda: self.kv.free(seq)),
                       ("read", lambda: self.kv.read(seq)), ("fork", lambda: self.kv.fork(seq, "new"))):
            self.rejected(f"kv.{op}({seq!r}, ...)", fn, KeyError, (repr(seq),))

    @invariant()
    def observables(self):
        if hasattr(self, "kv"):
            check_state(self.impl, self.kv, self.model, self.nb, self.shape,
                        "state:\n    " + "\n    ".join(self.log[:1] + self.log[-8:]))


def test_state_machine(impl):
    """Random adds, forks, appends, frees and rejected calls: every sequence reads back its own K/V,
    the block structure and the copy lists are the model's (module doc)."""
    machine = type("BranchKVMachineFor", (BranchKVMachine,), {"impl": impl})
    steps = 50 if settings.get_current_profile_name() == "thorough" else 25
    run_as_test(machine, settings=settings(stateful_step_count=steps, deadline=None))


# --- fixed scenarios --------------------------------------------------------------------------------
def scenario(cls):
    """Pool 6 x 2: "p" holds 3 tokens (one full block, one partial), "q" forked from it, "r" holds 2."""
    kv = cls(6, 2, layers=2, kv_heads=1, head_dim=2)
    values = Values(2, 1, 2)
    kv.add("p", *values.tokens(3))
    kv.fork("p", "q")
    kv.add("r", *values.tokens(2))
    return kv


def state_of(kv) -> tuple:
    seqs = sorted(kv.sequences(), key=repr)
    return (kv.num_free_blocks, tuple((s, tuple(kv.block_table(s)), kv.num_tokens(s),
                                       tuple(t.flatten().tolist() for t in kv.read(s))) for s in seqs),
            tuple(kv.ref_count(b) for b in range(6)))


def test_copy_on_write_copies_every_layer(impl):
    """A write into the shared partial block copies its whole content in every layer (the slots
    already written and the empty ones' positions alike), and the sibling keeps the original."""
    kv = scenario(impl.get("BranchKV"))
    before_p = [t.clone() for t in kv.read("p")]
    new = torch.full((2, 1, 1, 2), 100.0)
    copies = [tuple(c) for c in kv.append("q", new, -new)]
    assert len(copies) == 1, f"append into the shared partial block returned copies {copies}; expected one"
    src, dst = copies[0]
    assert src == kv.block_table("p")[1] and dst == kv.block_table("q")[1] and src != dst, (copies, kv.block_table("p"),
                                                                                           kv.block_table("q"))
    assert kv.block_table("p")[0] == kv.block_table("q")[0], "the full prompt block must stay shared"
    k, v = kv.read("q")
    assert torch.equal(k[:, :3], before_p[0]) and torch.equal(v[:, :3], before_p[1]), (
        "q's first 3 tokens after the copy are not the ones it shared with p: the copy missed a layer or a slot")
    assert torch.equal(k[:, 3:], new) and torch.equal(v[:, 3:], -new)
    after_p = kv.read("p")
    assert torch.equal(after_p[0], before_p[0]) and torch.equal(after_p[1], before_p[1]), "q's write changed p's K/V"


def test_full_shared_block_is_never_copied(impl):
    """A sequence whose shared last block is full gets a new block for its next token: no copy."""
    kv = impl.get("BranchKV")(4, 2)
    kv.add("p", torch.ones(1, 2, 1, 1), torch.ones(1, 2, 1, 1))
    kv.fork("p", "q")
    assert list(kv.append("q", torch.zeros(1, 1, 1, 1), torch.zeros(1, 1, 1, 1))) == []
    assert kv.block_table("q")[0] == kv.block_table("p")[0] and kv.blocks_in_use == 2


def test_free_frees_only_the_branch_own_blocks(impl):
    """Freeing a forked branch gives back only the blocks it alone holds; its sibling reads on."""
    kv = scenario(impl.get("BranchKV"))
    p_before = [t.clone() for t in kv.read("p")]
    one = torch.ones(2, 3, 1, 2)
    kv.append("q", one, one)                  # q: a copy of p's partial block + 1 more block
    free = kv.num_free_blocks
    kv.free("q")
    assert kv.num_free_blocks == free + 2, f"freeing q gave back {kv.num_free_blocks - free} blocks; q alone held 2"
    k, v = kv.read("p")
    assert torch.equal(k, p_before[0]) and torch.equal(v, p_before[1]), "freeing q changed p's K/V"
    kv.free("p")
    assert kv.num_free_blocks == free + 4, "freeing p, the last holder, gives back both its blocks"


# --- bad input --------------------------------------------------------------------------------
def _kv(n=1, dtype=torch.float32, layers=2, heads=1, dim=2):
    return torch.zeros(layers, n, heads, dim, dtype=dtype)


VALID = dict(op="add", args=("s", _kv(), _kv()))
BAD = [
    Bad("add a live seq", dict(op="add", args=("p", _kv(), _kv())), ValueError, ("p",)),
    Bad("add a float seq", dict(op="add", args=(1.5, _kv(), _kv())), TypeError, ("seq",)),
    Bad("add a bool seq", dict(op="add", args=(True, _kv(), _kv())), TypeError, ("seq",)),
    Bad("add out of blocks", dict(op="add", args=("s", _kv(7), _kv(7))), ValueError, ("out of blocks",)),
    Bad("add k not a tensor", dict(op="add", args=("s", [[0.0]], _kv())), TypeError, ("k",)),
    Bad("add v not a tensor", dict(op="add", args=("s", _kv(), None)), TypeError, ("v",)),
    Bad("add k of rank 3", dict(op="add", args=("s", torch.zeros(2, 1, 2), _kv())), ValueError, ("k",)),
    Bad("add k of other layers", dict(op="add", args=("s", _kv(layers=1), _kv(layers=1))), ValueError, ("k",)),
    Bad("add v of other head_dim", dict(op="add", args=("s", _kv(), _kv(dim=3))), ValueError, ("v",)),
    Bad("add k and v of other lengths", dict(op="add", args=("s", _kv(1), _kv(2))), ValueError, ("k", "v")),
    Bad("add k of another dtype", dict(op="add", args=("s", _kv(dtype=torch.float64), _kv(dtype=torch.float64))),
        TypeError, ("k",)),
    Bad("append to an unknown seq", dict(op="append", args=("nobody", _kv(), _kv())), KeyError, ("nobody",)),
    Bad("append out of blocks", dict(op="append", args=("r", _kv(7), _kv(7))), ValueError, ("out of blocks",)),
    Bad("copy-on-write out of blocks", dict(op="append", args=("q", _kv(6), _kv(6))), ValueError, ("out of blocks",)),
    Bad("append k of other kv_heads", dict(op="append", args=("p", _kv(heads=2), _kv(heads=2))), ValueError, ("k",)),
    Bad("append v not a tensor", dict(op="append", args=("p", _kv(), 0.0)), TypeError, ("v",)),
    Bad("fork an unknown parent", dict(op="fork", args=("nobody", "s")), KeyError, ("nobody",)),
    Bad("fork onto a live child", dict(op="fork", args=("p", "r")), ValueError, ("r",)),
    Bad("fork onto a float child", dict(op="fork", args=("p", 2.5)), TypeError, ("child",)),
    Bad("free an unknown seq", dict(op="free", args=("nobody",)), KeyError, ("nobody",)),
    Bad("free a list", dict(op="free", args=(["p"],)), TypeError, ("seq",)),
    Bad("read an unknown seq", dict(op="read", args=("nobody",)), KeyError, ("nobody",)),
    Bad("read a None seq", dict(op="read", args=(None,)), TypeError, ("seq",)),
    Bad("ref_count past the pool", dict(op="ref_count", args=(6,)), ValueError, ("block",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """Unknown or freed ids -> KeyError naming them; a live id, a bad K/V shape, out of blocks (a
    copy-on-write included) -> ValueError; wrong types -> TypeError naming the argument. The
    whole state (tables, lengths, K/V, ref counts) is unchanged afterwards."""
    kv = scenario(impl.get("BranchKV"))
    assert_rejects(lambda op, args: getattr(kv, op)(*args), VALID, bad, state=lambda: state_of(kv))


BAD_POOL = [
    Bad("zero blocks", dict(num_blocks=0), ValueError, ("num_blocks",)),
    Bad("zero block_size", dict(block_size=0), ValueError, ("block_size",)),
    Bad("float num_blocks", dict(num_blocks=4.0), TypeError, ("num_blocks",)),
    Bad("zero layers", dict(layers=0), ValueError, ("layers",)),
    Bad("bool kv_heads", dict(kv_heads=True), TypeError, ("kv_heads",)),
    Bad("zero kv_heads", dict(kv_heads=0), ValueError, ("kv_heads",)),
    Bad("float head_dim", dict(head_dim=2.0), TypeError, ("head_dim",)),
    Bad("zero head_dim", dict(head_dim=0), ValueError, ("head_dim",)),
    Bad("integer dtype", dict(dtype=torch.int32), TypeError, ("dtype",)),
    Bad("dtype a str", dict(dtype="float32"), TypeError, ("dtype",)),
]


@bad_cases(BAD_POOL)
def test_pool_rejects_bad_sizes(impl, bad):
    """Sizes are ints >= 1 (a bool is not one); dtype a floating torch dtype."""
    assert_rejects(impl.get("BranchKV"), dict(num_blocks=4, block_size=2, layers=1, kv_heads=1, head_dim=1,
                                              dtype=torch.float32), bad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_dtypes_round_trip(impl, dtype):
    """K/V of the pool's dtype read back bit for bit, in that dtype."""
    kv = impl.get("BranchKV")(3, 2, layers=1, kv_heads=2, head_dim=3, dtype=dtype)
    k = torch.randn(1, 3, 2, 3, generator=torch.Generator().manual_seed(1)).to(dtype)
    kv.add(0, k, -k)
    got_k, got_v = kv.read(0)
    assert got_k.dtype == dtype and torch.equal(got_k, k) and torch.equal(got_v, -k)
