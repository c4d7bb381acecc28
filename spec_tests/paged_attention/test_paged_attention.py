"""Paged attention (course 03.06-03.08): attention over a block table == attention over the same
keys stored contiguously.

Every case scatters contiguous per-sequence K/V into a pool of blocks in random order (shared
prefix blocks, partial last blocks, spare table columns) and fills every slot no query may see with
NaN (strategies.py). The oracle is plain attention over the contiguous K/V in float64
(oracles.py); the tolerance rule (conformance/tolerance.py) allows 2x the error of the same
contiguous computation in the input dtype plus the rounding floor. So a pass says: right blocks,
right slots, right masking, and nothing outside the visible positions reached the output.

On CPU the optimized implementation runs its Triton kernels under the interpreter, so contexts
here are short (up to ~150 positions, enough to cross many 16-key tiles and many splits); long
contexts (up to 32k) run natively on a GPU (``gpu``).
"""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import example, given, settings

from conformance.badinput import Bad, assert_rejects, assert_rejects_without_data, bad_cases
from conformance.tolerance import assert_close_to_oracle
from spec_tests.paged_attention.oracles import contiguous_oracle
from spec_tests.paged_attention.strategies import BLOCK_SIZES, PagedCase, paged_cases


def _scaled(n: int) -> int:
    """``n`` examples under the dev profile (25 examples), scaled with the loaded profile."""
    return max(1, round(n * settings().max_examples / 25))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN where the other is NaN."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


def _check(impl, case: PagedCase, device, *, rewrite=None, inputs=None, call=None):
    """impl's (out, lse) == the contiguous oracle within the tolerance rule; the inputs are left
    untouched; a query that sees no key gives exactly 0. ``rewrite(x)`` may return other
    arguments holding the same sequences (a padded table, caches that are views); ``inputs``
    replaces ``case.build(device)`` (data the builder does not draw, oracle K/V included);
    ``call`` replaces impl's paged_attention (same signature: the plan/run path)."""
    x = case.build(device) if inputs is None else inputs
    args = x.args if rewrite is None else rewrite(x)
    before = [t.clone() for t in args]
    out, lse = (call or impl.get("paged_attention"))(*args, return_lse=True, **case.kwargs)
    for name, t, b in zip(("q", "k_cache", "v_cache", "block_tables", "seq_lens"), args, before):
        assert _same(t, b), f"paged_attention modified its input {name}"
    ref, ref_lse = contiguous_oracle(x, dtype=x.q.dtype, **case.kwargs)   # same math, same dtype
    oracle, oracle_lse = contiguous_oracle(x, **case.kwargs)              # float64
    inputs = dict(case=case)
    if isinstance(out, torch.Tensor) and out.shape == oracle.shape and out.is_floating_point():
        nan = out.isnan() & ~oracle.to(out.device).isnan()
        if nan.any():
            raise AssertionError(
                f"out is NaN at {tuple(nan.nonzero()[0].tolist())} (batch, [query,] head, dim): in this test "
                "every slot no query may see -- past seq_len in the last block, in blocks wholly left of "
                "the window, in blocks no sequence owns -- holds NaN, so the implementation read one of "
                f"them (or its masking multiplies NaN by 0).\n    case: {case!r}")
    assert_close_to_oracle(out, ref, oracle, name="out", inputs=inputs)
    assert isinstance(lse, torch.Tensor) and lse.dtype == ref_lse.dtype, (
        f"lse must be {ref_lse.dtype} for {x.q.dtype} inputs, got {getattr(lse, 'dtype', type(lse))}")
    assert_close_to_oracle(lse, ref_lse, oracle_lse, name="lse", inputs=inputs)
    blind = torch.isinf(oracle_lse.to(lse.device))
    assert (out[blind] == 0).all(), "a query that sees no key (seq_len 0, or seq_len < q_len) must output exactly 0"
    return out, lse


# Pinned cases (explicit examples run first, so a planted bug fails fast), each labelled with the
# mutants it catches.
# GQA 2x2, block 4: partial last blocks, a shared first block, several splits, unequal lengths
@example(case=PagedCase((37, 70, 5), 0, 4, 2, 16, 4, None, "float16", 1, shared_blocks=1)).via(
    "mutant:reads_past_seq_len mutant:last_split_wrong_table "
    "mutant:merge_averages_splits mutant:gqa_interleaved_heads "
    "mutant:drops_partial_last_block")
# MQA, padding row (seq_len 0), seq_len 1, a window inside one long sequence (blocks wholly left of
# it hold NaN), bf16
@example(case=PagedCase((0, 1, 64, 33), 0, 8, 1, 32, 16, 5, "bfloat16", 2, spare_cols=2)).via(
    "mutant:reads_left_of_window")
# one long sequence, block 8: many tiles and many splits
@example(case=PagedCase((150,), 0, 4, 1, 16, 8, None, "float16", 3, scale=0.3)).via(
    "mutant:merge_averages_splits")
# the legal boundaries: a table exactly as wide as the longest sequence needs (no spare column),
# scale 0 (every visible key weighs the same: the mean of the values)
@example(case=PagedCase((32, 5), 0, 4, 2, 16, 8, None, "float32", 6, spare_cols=0, scale=0.0)).via(
    "mutant:full_table_rejected mutant:scale_zero_as_default")
# GQA 6:3 with head_dim 20: not a power of two, and not a multiple of kv_heads (a check that
# reads q's heads from the head_dim dimension rejects this legal case)
@example(case=PagedCase((9, 30), 0, 6, 3, 20, 4, None, "float16", 7)).via(
    "boundary: GQA 6:3 with head_dim 20 is legal (a mechanical variant reading q_heads from q.shape[-1] rejects it)")
@settings(max_examples=_scaled(10))
@given(case=paged_cases())
def test_decode_matches_contiguous_oracle(impl, device, case):
    """One decode token per sequence (q rank 3): out and lse == attention over the contiguous
    K/V, for block sizes 1-128, non-contiguous and shared block ids, partial last blocks,
    seq_len 0 and 1, windows, MHA/GQA/MQA; unowned slots are NaN and never reach the output."""
    _check(impl, case, device)


# three draft tokens per sequence over a shared block: causal among themselves
@example(case=PagedCase((40, 3, 17), 3, 4, 2, 16, 8, None, "float16", 4, shared_blocks=1)).via(
    "mutant:spec_queries_see_all")
# seq_len 2 < q_len 4: blind queries; window 9
@example(case=PagedCase((2, 65), 4, 8, 2, 32, 1, 9, "bfloat16", 5)).via(
    "mutant:spec_queries_see_all mutant:reads_left_of_window")
@settings(max_examples=_scaled(5))
@given(case=paged_cases(q_lens=(1, 2, 3, 4), max_len=48, groups=(1, 2, 4)))
def test_speculative_tokens_match_oracle(impl, device, case):
    """A few query tokens per sequence (q rank 4): causal among themselves, bottom-right aligned
    (query i sits at seq_len - q_len + i), so the last one sees the whole sequence."""
    _check(impl, case, device)


# Query rows per KV head (q_len * group) past the strategies' 16: a wide GQA group, a long draft.
MANY_ROWS = (
    # decode with 32 query heads on one KV head (GQA 32:1), a padding row
    PagedCase((21, 0), 0, 32, 1, 16, 8, None, "bfloat16", 61),
    # 40 query tokens x GQA 2 = 80 rows over a 20-token sequence, window 2: queries 0-19 see nothing,
    # query 39 sees keys 17-19 only (the tail: more than a 16-key tile past the start of the table)
    PagedCase((20,), 40, 2, 1, 16, 4, 2, "float16", 62),
    # 32 tokens x GQA 4 = 128 rows (the most one kernel program holds), window 7, seq_len 30 < q_len
    PagedCase((30,), 32, 4, 1, 16, 8, 7, "bfloat16", 63),
)


@pytest.mark.parametrize("case", MANY_ROWS, ids=lambda c: f"q_len{c.q_len}-gqa{c.q_heads // c.kv_heads}")
def test_many_query_rows_per_kv_head(impl, device, case):
    """The contract bounds neither q_len nor the GQA group: every one of q_len x group query rows
    of a KV head is computed, however many (here 32 to 128, past the 16 rows the strategies draw),
    and with q_len > seq_len + window the first q_len - seq_len queries see nothing while the last
    see only the window at the sequence's end -- every key some query can see is read, wherever it
    lies in the table."""
    _check(impl, case, device)


@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_every_block_size(impl, device, block_size):
    """Block sizes 1 to 128: two and a bit blocks, one short of a block, a tile-crossing length,
    a shared first block; and ``return_lse=False`` returns the same out alone."""
    lens = (min(2 * block_size + 3, 203), max(block_size - 1, 1), 37)
    case = PagedCase(lens, 0, 4, 2, 16, block_size, None, ("float16", "bfloat16")[block_size.bit_length() % 2],
                     10 + block_size, shared_blocks=1)
    out, _ = _check(impl, case, device)
    x = case.build(device)
    alone = impl.get("paged_attention")(*x.args, **case.kwargs)
    assert isinstance(alone, torch.Tensor), "return_lse=False must return the output tensor alone"
    assert torch.equal(alone, out), "return_lse=False changed the output"


# ------------------------------------------------------------------------------- defaults
def test_omitted_arguments_mean_the_defaults(impl, device):
    """Omitting ``scale``, ``window`` and ``return_lse`` gives, bit for bit, what passing the
    documented defaults gives (scale=None, window=None, return_lse=False: out alone), and
    ``scale=None`` is exactly ``1/sqrt(head_dim)`` (head_dim 16: 0.25). Three calls: the kernel
    runs under the interpreter on CPU. Mutant: default_scale_unscaled."""
    fn = impl.get("paged_attention")
    x = PagedCase((21, 9), 0, 4, 2, 16, 4, None, "float16", 51, shared_blocks=1).build(device)
    got = fn(*x.args)
    assert isinstance(got, torch.Tensor), f"return_lse omitted must return out alone, got {type(got).__name__}"
    want = fn(*x.args, scale=None, window=None, return_lse=False)
    assert isinstance(want, torch.Tensor) and _same(got, want), (
        "omitting scale, window, return_lse must mean scale=None, window=None, return_lse=False")
    assert _same(got, fn(*x.args, scale=0.25, window=None, return_lse=False)), (
        "scale=None must mean scale = 1/sqrt(head_dim) = 1/sqrt(16) = 0.25")


# ------------------------------------------------------------------------------ bad input
def _valid():
    x = PagedCase((5, 9), 0, 4, 2, 16, 4, None, "float16", 0).build()
    return dict(q=x.q, k_cache=x.k_cache, v_cache=x.v_cache, block_tables=x.block_tables, seq_lens=x.seq_lens)


def _with(**changes):
    """A Bad change computed from the valid arguments (never modifying them in place)."""
    return lambda kw: {**kw, **{k: f(kw) for k, f in changes.items()}}


def _set(t: torch.Tensor, index, value) -> torch.Tensor:
    t = t.clone()
    t[index] = value
    return t


def _huge_sequence_bad_last_block(kw: dict) -> dict:
    """Sequence 0 holds 8192 x 4096 + 1 tokens in blocks of 8192 (every column of its table points
    at the one block of a tiny cache), so its 4097th table column is used, by exactly one token,
    and holds -1. ceil(n / block_size) is 4097 in integers, but n / block_size = 4096 + 2^-13
    rounds to 4096 in float32 (a used-column mask computed in float32 misses that column).
    window 0, so an implementation that misses it reads one key, not 33 M."""
    block_size, width = 8192, 4097
    k_cache = torch.zeros((1, block_size) + tuple(kw["k_cache"].shape[2:]), dtype=kw["k_cache"].dtype)
    table = torch.zeros((2, width), dtype=kw["block_tables"].dtype)
    table[0, width - 1] = -1
    seq_lens = torch.tensor([block_size * (width - 1) + 1, 1], dtype=kw["seq_lens"].dtype)
    return {**kw, "k_cache": k_cache, "v_cache": k_cache.clone(), "block_tables": table, "seq_lens": seq_lens,
            "window": 0}


BAD = [
    Bad("q not a tensor", _with(q=lambda kw: kw["q"].tolist()), TypeError, ("q",)),
    Bad("q rank 2", _with(q=lambda kw: kw["q"][:, 0]), ValueError, ("q",)),
    Bad("q rank 5", _with(q=lambda kw: kw["q"][:, None, None]), ValueError, ("q",)),
    Bad("integer q", _with(q=lambda kw: kw["q"].long()), TypeError, ("q",)),
    Bad("k_cache rank 3", _with(k_cache=lambda kw: kw["k_cache"][0]), ValueError, ("k_cache",)),
    # both rank 3 (then the shapes agree, and only the rank check names k_cache)
    Bad("caches rank 3", _with(k_cache=lambda kw: kw["k_cache"][0], v_cache=lambda kw: kw["v_cache"][0]),
        ValueError, ("k_cache",)),
    Bad("k_cache not a tensor", _with(k_cache=lambda kw: kw["k_cache"].tolist()), TypeError, ("k_cache",)),
    Bad("caches float32, q float16", _with(k_cache=lambda kw: kw["k_cache"].float(),
                                           v_cache=lambda kw: kw["v_cache"].float()), TypeError, ("k_cache",)),
    Bad("v_cache dtype differs", _with(v_cache=lambda kw: kw["v_cache"].float()), TypeError, ("v_cache",)),
    Bad("v_cache shape differs", _with(v_cache=lambda kw: kw["v_cache"][:-1]), ValueError, ("v_cache",)),
    Bad("zero block_size", _with(k_cache=lambda kw: kw["k_cache"][:, :0], v_cache=lambda kw: kw["v_cache"][:, :0]),
        ValueError, ("k_cache",)),
    Bad("heads not a multiple", _with(q=lambda kw: kw["q"][:, :3]), ValueError, ("heads",)),
    Bad("zero kv heads", _with(k_cache=lambda kw: kw["k_cache"][:, :, :0], v_cache=lambda kw: kw["v_cache"][:, :, :0]),
        ValueError, ("heads",)),
    Bad("head_dim differs", _with(q=lambda kw: kw["q"][..., :8]), ValueError, ("head_dim",)),
    Bad("float block_tables", _with(block_tables=lambda kw: kw["block_tables"].float()), TypeError, ("block_tables",)),
    Bad("block_tables rank 1", _with(block_tables=lambda kw: kw["block_tables"][0]), ValueError, ("block_tables",)),
    Bad("block_tables rows != batch", _with(block_tables=lambda kw: kw["block_tables"][:1]), ValueError,
        ("block_tables",)),
    Bad("float seq_lens", _with(seq_lens=lambda kw: kw["seq_lens"].float()), TypeError, ("seq_lens",)),
    Bad("seq_lens rank 2", _with(seq_lens=lambda kw: kw["seq_lens"][None]), ValueError, ("seq_lens",)),
    Bad("seq_lens length != batch", _with(seq_lens=lambda kw: kw["seq_lens"][:1]), ValueError, ("seq_lens",)),
    Bad("negative seq_len", _with(seq_lens=lambda kw: _set(kw["seq_lens"], 1, -1)), ValueError, ("seq_lens",)),
    Bad("table too short for seq_len",
        _with(seq_lens=lambda kw: _set(kw["seq_lens"], 1, kw["block_tables"].shape[1] * kw["k_cache"].shape[1] + 1)),
        ValueError, ("block_tables", "seq_lens")),
    Bad("block id >= num_blocks", _with(block_tables=lambda kw: _set(kw["block_tables"], (1, 2), kw["k_cache"].shape[0])),
        ValueError, ("block_tables",)),
    Bad("negative block id", _with(block_tables=lambda kw: _set(kw["block_tables"], (0, 1), -1)), ValueError,
        ("block_tables",)),
    Bad("negative block id of a 33,554,433-token sequence", _huge_sequence_bad_last_block, ValueError,
        ("block_tables",)),
    Bad("negative window", dict(window=-1), ValueError, ("window",)),
    Bad("float window", dict(window=2.5), TypeError, ("window",)),
    Bad("bool window", dict(window=True), TypeError, ("window",)),
    Bad("nan scale", dict(scale=math.nan), ValueError, ("scale",)),
    Bad("string scale", dict(scale="0.25"), TypeError, ("scale",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """Malformed shapes, dtypes, lengths and block ids raise TypeError/ValueError naming the
    argument (the table's too-short row names block_tables and seq_lens), before anything is
    computed and without modifying an argument. A used block id must lie in [0, num_blocks)."""
    assert_rejects(impl.get("paged_attention"), _valid, bad)


def _valid_no_sequences():
    """A valid call with batch 0: no sequence, so nothing to compute (q (0, 4, 16), a table of no
    rows, no lengths) over the same caches."""
    kw = _valid()
    return dict(kw, q=kw["q"][:0], block_tables=kw["block_tables"][:0], seq_lens=kw["seq_lens"][:0])


# the rows of BAD that make sense without a sequence
BAD_NO_SEQUENCES = [b for b in BAD if b.id in (
    "q rank 2", "integer q", "caches float32, q float16", "v_cache shape differs", "zero block_size",
    "heads not a multiple", "zero kv heads", "head_dim differs", "float block_tables", "float seq_lens",
    "negative window", "float window", "bool window", "nan scale", "string scale")]


@bad_cases(BAD_NO_SEQUENCES)
def test_rejects_bad_input_without_sequences(impl, bad):
    """The checks do not depend on there being work: with batch 0 (an empty decode step) every
    bad argument is still rejected, TypeError/ValueError naming it, as with sequences (an
    implementation that leaves a check to the attention it runs per sequence misses it here)."""
    assert_rejects(impl.get("paged_attention"), _valid_no_sequences, bad)


# Another device, reachable on a CPU-only machine: "meta" tensors (shapes, no data). Not in the
# BAD table: its no-change check (conformance.badinput.assert_rejects) reads every argument's data,
# which a meta tensor has none of; so the rows are parametrized as "moved", not "bad", and listed
# by hand in docs/paged_attention.md (the generated bad-input table reads "bad" tables only).
ANOTHER_DEVICE = [
    Bad("caches on another device", _with(k_cache=lambda kw: kw["k_cache"].to("meta"),
                                          v_cache=lambda kw: kw["v_cache"].to("meta")), ValueError, ("k_cache",)),
    Bad("v_cache on another device", _with(v_cache=lambda kw: kw["v_cache"].to("meta")), ValueError, ("v_cache",)),
    Bad("block_tables on another device", _with(block_tables=lambda kw: kw["block_tables"].to("meta")),
        ValueError, ("block_tables",)),
    Bad("seq_lens on another device", _with(seq_lens=lambda kw: kw["seq_lens"].to("meta")), ValueError,
        ("seq_lens",)),
]


@pytest.mark.parametrize("moved", ANOTHER_DEVICE, ids=[b.id for b in ANOTHER_DEVICE])
def test_rejects_arguments_on_another_device(impl, moved):
    """A cache, block table or seq_lens on another device than q raises ValueError naming it (the
    module doc), before anything is read: here the other device is "meta", whose tensors hold no
    data, so an implementation that does not check reaches a copy or a kernel that fails otherwise."""
    assert_rejects_without_data(impl.get("paged_attention"), moved.apply(_valid()), moved)


def test_unused_table_entries_are_ignored(impl, device):
    """Entries past a sequence's ceil(seq_len / block_size) blocks are neither read nor validated:
    padding them with -1 (as engines do) or with num_blocks changes nothing. (The blocks just
    outside the pool are NaN: reading them fails the comparison instead of crashing.)"""
    def pad(x):
        num_blocks, block_size = x.k_cache.shape[:2]
        table = x.block_tables.clone()
        for b, n in enumerate(x.seq_lens.tolist()):
            table[b, -(-n // block_size):] = num_blocks if b % 2 else -1
        return x.q, x.k_cache, x.v_cache, table, x.seq_lens

    _check(impl, PagedCase((13, 0, 8), 0, 4, 2, 16, 4, None, "float16", 31, spare_cols=2), device,
           rewrite=pad)


def test_caches_may_be_views_of_one_kv_buffer(impl, device):
    """k_cache and v_cache as the two halves of one (num_blocks, 2, block_size, kv_heads,
    head_dim) buffer (strided views, as engines that allocate K and V together pass them) give
    the same result as separate contiguous caches."""
    def interleave(x):
        kv = torch.stack([x.k_cache, x.v_cache], dim=1)
        return x.q, kv[:, 0], kv[:, 1], x.block_tables, x.seq_lens

    _check(impl, PagedCase((21, 40), 0, 4, 2, 16, 8, None, "bfloat16", 41, shared_blocks=1), device,
           rewrite=interleave)


def test_inputs_of_any_strides(impl, device):
    """q and the caches may be views whose last dimension is not contiguous (every other element
    of a wider buffer, whose other elements are NaN): the same result as contiguous inputs.
    Nothing in the contract asks for contiguity; a kernel that assumes unit stride must copy."""
    def spread(t):
        return torch.stack([t, torch.full_like(t, math.nan)], dim=-1)[..., 0]

    def strided(x):
        q, k, v = spread(x.q), spread(x.k_cache), spread(x.v_cache)
        assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 2
        return q, k, v, x.block_tables, x.seq_lens

    _check(impl, PagedCase((21, 7), 0, 4, 2, 16, 4, None, "float16", 43, shared_blocks=1), device,
           rewrite=strided)
    _check(impl, PagedCase((30, 3), 2, 4, 1, 16, 8, 9, "bfloat16", 44), device, rewrite=strided)


def test_inputs_with_a_broadcast_last_dimension(impl, device):
    """q and the caches may be broadcast views whose last dimension has stride 0 (``expand`` of one
    value per row: every head_dim entry is the same memory cell): the same result as contiguous
    inputs holding those values. A kernel that assumes unit stride must copy every other stride,
    0 included."""
    def bcast(t):
        return t[..., :1].expand(t.shape)

    for case in (PagedCase((21, 7), 0, 4, 2, 16, 4, None, "float16", 45, shared_blocks=1),
                 PagedCase((30, 3), 2, 4, 1, 16, 8, 9, "bfloat16", 46)):
        x = case.build(device)
        y = dataclasses.replace(x, q=bcast(x.q), k_cache=bcast(x.k_cache), v_cache=bcast(x.v_cache),
                                k=tuple(bcast(t) for t in x.k), v=tuple(bcast(t) for t in x.v))
        assert y.q.stride(-1) == y.k_cache.stride(-1) == y.v_cache.stride(-1) == 0
        _check(impl, case, device, inputs=y)


# ------------------------------------------------------------------------- GPU, natively
LONG = (
    PagedCase((4097, 1, 1000, 2048, 0, 333), 0, 32, 8, 128, 16, None, "bfloat16", 101, shared_blocks=7),
    PagedCase((32768,), 0, 32, 8, 128, 16, None, "bfloat16", 102),
    PagedCase((5000, 129, 4095), 0, 16, 2, 64, 1, None, "float16", 103, shared_blocks=50),
    PagedCase((8191, 777), 0, 8, 8, 256, 128, 1000, "float16", 104),
    PagedCase((3000, 64, 12), 4, 64, 8, 128, 32, None, "bfloat16", 105, shared_blocks=1),
    PagedCase((2000, 17), 8, 16, 1, 96, 64, 300, "bfloat16", 106),
)


@pytest.mark.gpu
@pytest.mark.parametrize("case", LONG, ids=lambda c: f"lens{max(c.seq_lens)}-bs{c.block_size}-d{c.head_dim}")
def test_long_contexts_gpu(impl, device, case):
    """Long contexts natively (up to 32k positions, hundreds of tiles, tens of splits), D 64 to
    256, block sizes 1 to 128, GQA 1 to 16, windows, speculative tokens."""
    _check(impl, case, device)
