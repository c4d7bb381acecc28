"""Tensor parallelism (course 06.02): the properties that define it.

The sharded model runs on real torch.distributed process groups: world 1 in the implementation's
process (no group: the contract calls no collective there), worlds 2 and 4 on a pool of 4 forked
gloo ranks started once and reused by every example (spec_tests/tensor_parallel/pool.py), each
rank's ``ProcessGroup`` calls logged.

Laws: (1) the sharded model's logits (prefill, then decode steps through each rank's own KV
cache) equal the unsharded model's within the tolerance rule of a float64 oracle, for every head
split the contract allows, and every rank returns the same logits bit for bit; (2) each forward
hands 2 x n_layers all-reduces of (batch, seq, dim) to torch.distributed, so the bytes
all-reduced per token equal ``2 x n_layers x dim x element_bytes`` (0 at world 1), and nothing
else moves data; (3) the weight shards are exact: concatenated over the ranks they give the
weight bit for bit; (4) each rank's cache holds only its KV heads; (5) bad input is rejected
before any collective. The exhaustive head/rank sweep is test_exhaustive.py.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from types import SimpleNamespace

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.strategies import DTYPES
from conformance.tolerance import assert_close_to_oracle
from spec_tests.tensor_parallel import oracles, pool, runs
from spec_tests.tensor_parallel.strategies import TPCase, tp_cases

# n_heads, n_kv_heads, head_dim, hidden_dim, n_layers, vocab, dtype, seed, batch, prompt, decode, world
SPLIT4 = TPCase(8, 4, 4, 16, 2, 40, "float32", 7, 2, 4, 2, 4)        # KV heads split, one per rank
REPLICATED = TPCase(4, 2, 4, 8, 2, 40, "float32", 3, 1, 5, 1, 4)     # p = 4 > K = 2: KV heads replicated
MQA2 = TPCase(4, 1, 8, 12, 1, 16, "bfloat16", 11, 2, 3, 2, 2)        # one KV head on both ranks
DENSE2 = TPCase(2, 2, 8, 8, 2, 16, "float32", 5, 1, 3, 0, 2)


def _model(reference, case: TPCase, dtype=None):
    m = reference.of("model")
    cfg = case.config(m.get("ModelConfig"), **({"dtype": dtype} if dtype is not None else {}))
    return m.get("Transformer")(cfg, seed=case.seed)


def _ok(outs) -> None:
    for rank, out in enumerate(outs):
        assert out["error"] is None, f"rank {rank} of the sharded model failed:\n{out['error']}"


def _per_forward(log) -> list[list]:
    """The log cut at the job's "forward" events: each forward's ProcessGroup calls."""
    out = []
    for entry in log:
        if entry[0] == "forward":
            out.append([])
        elif out:
            out[-1].append(entry)
    return out


# --- law (1): sharded == unsharded ----------------------------------------------------------------------
@example(case=SPLIT4).via("mutant:no_allreduce_after_mlp mutant:allreduce_includes_residual "
                          "mutant:row_shard_takes_rows mutant:o_proj_column_sharded mutant:cache_all_kv_heads")
@example(case=REPLICATED).via("mutant:replicated_kv_head_by_modulo")
@example(case=MQA2).via("boundary: MQA, the one KV head replicated on both ranks, bf16, decode steps")
@given(case=tp_cases())
@settings(max_examples=12)
def test_sharded_logits_equal_unsharded(impl, reference, case):
    """The sharded model's logits for a prefill and each decode step equal the unsharded model's
    within the tolerance rule (float64 oracle); every rank returns the same logits bit for bit;
    each rank's cache holds only its KV heads."""
    outs = impl.call_in_process(runs.forward, case)
    _ok(outs)
    tokens = case.tokens()
    want = oracles.unsharded_logits(_model(reference, case), tokens)
    oracle = oracles.unsharded_logits(_model(reference, case, torch.float64), tokens)
    mine = outs[0]["result"]["logits"]
    assert len(mine) == len(tokens), f"{len(mine)} forwards returned, {len(tokens)} made"
    for step, (got, ref, orc) in enumerate(zip(mine, want, oracle)):
        what = "prefill" if step == 0 else f"decode step {step}"
        assert_close_to_oracle(got, ref, orc, name=f"{what} logits of the {case.world}-way sharded model (rank 0)",
                               inputs={"tokens": tokens[step]})
    for rank, out in enumerate(outs[1:], start=1):
        for step, (a, b) in enumerate(zip(mine, out["result"]["logits"])):
            assert a.shape == b.shape and torch.equal(a, b), (
                f"rank {rank}'s logits of forward {step} differ from rank 0's: after the all-reduce every "
                "rank holds the same activations, so every rank must return the same logits")
    for rank, out in enumerate(outs):
        _, kv = oracles.expected_heads(case.n_heads, case.n_kv_heads, rank, case.world)
        shape = out["result"]["cache_shape"]
        assert shape[2] == len(kv), (
            f"rank {rank}'s cache holds {shape[2]} KV heads; of {case.n_kv_heads} split {case.world} ways it holds "
            f"{len(kv)} (KV heads {kv})")


# --- law (2): the bytes all-reduced ---------------------------------------------------------------------
@example(case=SPLIT4).via("mutant:no_allreduce_after_mlp mutant:allreduce_in_float32")
@example(case=MQA2).via("mutant:allreduce_in_float32")
@given(case=tp_cases(worlds=(2, 4), dtypes=("float32", "bfloat16")))
@settings(max_examples=6)
def test_bytes_allreduced_per_token(impl, reference, case):
    """Each forward hands torch.distributed 2 x n_layers all-reduces (SUM), each of the (batch,
    seq, dim) partial output in the model's dtype: bytes per token = 2 x n_layers x dim x
    element_bytes = allreduce_bytes_per_token(config, world); no other ProcessGroup call moves data."""
    outs = impl.call_in_process(runs.forward, case)
    _ok(outs)
    el = DTYPES[case.dtype].itemsize
    dim = case.n_heads * case.head_dim
    per_token = oracles.allreduce_bytes(case.n_layers, dim, el, case.world)
    for rank, out in enumerate(outs):
        forwards = _per_forward(out["log"])
        assert len(forwards) == len(case.tokens()), f"rank {rank}: {len(forwards)} forwards logged"
        for i, (calls, tokens) in enumerate(zip(forwards, case.tokens())):
            other = [c for c in calls if c[0] != "allreduce"]
            assert not other, (f"rank {rank}, forward {i}: ProcessGroup calls besides all_reduce: "
                               f"{[(c[0], c[2]) for c in other][:4]}")
            assert len(calls) == 2 * case.n_layers, (
                f"rank {rank}, forward {i}: {len(calls)} all-reduces for {case.n_layers} layer(s); the contract: "
                "one after o_proj and one after down_proj, 2 per layer")
            moved = sum(nbytes for c in calls for _, _, nbytes in c[2])
            want = per_token * tokens.numel()
            assert moved == want, (
                f"rank {rank}, forward {i} of {tuple(tokens.shape)} tokens: {moved} bytes all-reduced; "
                f"2 x {case.n_layers} layers x dim {dim} x {el} B x {tokens.numel()} tokens = {want} "
                f"(all-reduces of {[c[2][0][:2] for c in calls][:2]})")
    cfg = case.config(reference.of("model").get("ModelConfig"))
    got = impl.get("allreduce_bytes_per_token")(cfg, case.world)
    assert got == per_token, f"allreduce_bytes_per_token(config, {case.world}) = {got!r}, counted {per_token}"


@example(layers=2, heads=4, head_dim=8, world=1, dtype="bfloat16").via("mutant:world_one_pays_allreduce")
@example(layers=3, heads=4, head_dim=8, world=2, dtype="float32").via(
    "mutant:one_allreduce_per_layer mutant:allreduce_bytes_ring_factor")
@given(layers=st.integers(1, 96), heads=st.sampled_from([1, 4, 8, 64]), head_dim=st.sampled_from([2, 64, 128]),
       world=st.sampled_from([1, 2, 4, 8]), dtype=st.sampled_from(["float16", "bfloat16", "float32", "float64"]))
def test_allreduce_bytes_per_token_closed_form(impl, reference, layers, heads, head_dim, world, dtype):
    """allreduce_bytes_per_token(config, world, dtype) = 2 x layers x dim x element_bytes (the
    dtype defaulting to the config's), 0 at world 1, an int; independent of the heads' split."""
    cfg = reference.of("model").get("ModelConfig")(dim=heads * head_dim, n_layers=layers, n_heads=heads,
                                                   n_kv_heads=1, dtype=DTYPES[dtype])
    want = oracles.allreduce_bytes(layers, heads * head_dim, DTYPES[dtype].itemsize, world)
    fn = impl.get("allreduce_bytes_per_token")
    for got in (fn(cfg, world), fn(cfg, world, DTYPES[dtype]), fn(cfg.replace(dtype=torch.float64), world, DTYPES[dtype])):
        assert isinstance(got, int) and not isinstance(got, bool) and got == want, (
            f"allreduce_bytes_per_token({layers} layers, dim {heads * head_dim}, {dtype}, world {world}) = {got!r}; "
            f"expected {want}")


def test_hand_computed_bytes(impl, reference):
    """docs/tensor_parallel.md's numbers: a Llama-3-70B shape (80 layers, dim 8192, bf16) all-reduces
    2 x 80 x 8192 x 2 = 2,621,440 B (2.5 MiB) per token at any world > 1; Llama-3-8B (32 layers,
    dim 4096) 524,288 B (512 KiB)."""
    MC = reference.of("model").get("ModelConfig")
    fn = impl.get("allreduce_bytes_per_token")
    big = MC(vocab_size=8, dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, hidden_dim=16, dtype=torch.bfloat16)
    small = MC(vocab_size=8, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, hidden_dim=16, dtype=torch.bfloat16)
    assert fn(big, 8) == 2_621_440 and fn(big, 2) == 2_621_440
    assert fn(small, 4) == 524_288
    assert fn(small, 1) == 0


# --- law (3): exact shards ------------------------------------------------------------------------------
@example(out=6, inn=4, world=2, dtype="float32").via("mutant:row_shard_takes_rows")
@example(out=4, inn=8, world=4, dtype="bfloat16").via("mutant:row_shard_takes_rows")
@given(out=st.integers(1, 12), inn=st.integers(1, 12), world=st.integers(1, 6),
       dtype=st.sampled_from(["float16", "bfloat16", "float32", "float64"]))
def test_shards_concatenate_to_the_weight(impl, out, inn, world, dtype):
    """column_shard(W, r, p) is W's rows [r out/p, (r+1) out/p) and row_shard(W, r, p) its columns
    [r in/p, (r+1) in/p): concatenated over r (dim 0, resp. 1) they give W bit for bit, each
    contiguous; a split dimension that p does not divide is a ValueError naming ``weight``."""
    w = torch.randn(out * world, inn * world, generator=torch.Generator().manual_seed(out * 31 + inn)).to(DTYPES[dtype])
    before = w.clone()
    for name, dim in (("column_shard", 0), ("row_shard", 1)):
        fn = impl.get(name)
        shards = [fn(w, r, world) for r in range(world)]
        for r, s in enumerate(shards):
            want = w.narrow(dim, r * w.shape[dim] // world, w.shape[dim] // world)
            assert isinstance(s, torch.Tensor) and s.dtype == w.dtype and s.shape == want.shape, (
                f"{name}(W {tuple(w.shape)}, {r}, {world}): got {getattr(s, 'shape', s)}, expected {tuple(want.shape)}")
            assert torch.equal(s, want), f"{name}(W {tuple(w.shape)}, {r}, {world}) is not W's slice {r} along dim {dim}"
            assert s.is_contiguous(), f"{name} returned a non-contiguous shard"
        assert torch.equal(torch.cat(shards, dim=dim), w)
    assert torch.equal(w, before), "a shard function modified the weight"
    if world > 1:
        for name, bad in (("column_shard", torch.zeros(world + 1, world)), ("row_shard", torch.zeros(world, world + 1))):
            with pytest.raises(ValueError, match=r"(?i)\bweight\b"):
                impl.get(name)(bad, 0, world)


def _reassembled(case: TPCase, shards: list[dict], full: dict) -> None:
    """Every rank's shard_state_dict against the full state dict: the oracle's slices, and the
    split weights concatenated over the ranks give the full ones bit for bit."""
    hd, p = case.head_dim, case.world
    for rank, sd in enumerate(shards):
        assert set(sd) == set(full), f"rank {rank}: names {sorted(set(sd) ^ set(full))[:4]} differ from the model's"
        q, kv = oracles.expected_heads(case.n_heads, case.n_kv_heads, rank, p)
        rows = lambda heads: torch.cat([torch.arange(h * hd, (h + 1) * hd) for h in heads])  # noqa: E731
        for name, t in full.items():
            kind = name.split(".")[-2]
            want = {"q_proj": lambda: t[rows(q)], "k_proj": lambda: t[rows(kv)], "v_proj": lambda: t[rows(kv)],
                    "o_proj": lambda: t[:, rows(q)],
                    "gate_proj": lambda: t.chunk(p, 0)[rank], "up_proj": lambda: t.chunk(p, 0)[rank],
                    "down_proj": lambda: t.chunk(p, 1)[rank]}.get(kind, lambda: t)()
            got = sd[name]
            assert isinstance(got, torch.Tensor) and got.shape == want.shape and torch.equal(got, want), (
                f"rank {rank} of {p}: {name} is not its shard (query heads {q}, KV heads {kv}): got "
                f"{tuple(getattr(got, 'shape', ()))}, expected {tuple(want.shape)}")
    for name, t in full.items():
        kind = name.split(".")[-2]
        dim = {"q_proj": 0, "gate_proj": 0, "up_proj": 0, "o_proj": 1, "down_proj": 1}.get(kind)
        if kind in ("k_proj", "v_proj") and case.n_kv_heads % p == 0:
            dim = 0
        if dim is not None:
            assert torch.equal(torch.cat([sd[name] for sd in shards], dim=dim), t), (
                f"{name}: the {p} shards concatenated along dim {dim} are not the weight")


@example(case=REPLICATED).via("mutant:replicated_kv_head_by_modulo")
@example(case=SPLIT4).via("mutant:o_proj_column_sharded mutant:row_shard_takes_rows")
@given(case=tp_cases(worlds=(1, 2, 4, 8), decode=False))
@settings(max_examples=20)
def test_shard_state_dict_is_exact(impl, reference, case):
    """shard_state_dict gives each rank the model's names with its slices: q_proj/o_proj by its
    query heads, k_proj/v_proj by its KV heads (split, or the one replicated head), gate/up by
    rows, down by columns, the rest whole; the split weights reassemble bit for bit."""
    full, shards, unchanged = impl.call_in_process(runs.state_dict_shards, case)
    _reassembled(case, shards, full)
    assert unchanged, "shard_state_dict modified the model"


@pytest.mark.choice("shards are contiguous copies, never views of the full weight")
def test_shards_are_copies(impl, reference):
    """A rank keeps only its shard: shard_state_dict's tensors (the replicated ones included) and
    column_shard/row_shard's share no storage with the full weights (checked where the
    implementation runs)."""
    views = impl.call_in_process(runs.aliasing, SPLIT4)
    assert not views, f"views of the full weights: {views[:4]}"


# --- world 1: the unsharded model, no process group -----------------------------------------------------
@pytest.mark.choice("world 1 runs the unsharded model's float operations in its order")
def test_world_one_is_the_model_bit_for_bit(impl, reference):
    """At world 1 (no process group initialised) the logits are the unsharded model's bit for bit."""
    case = TPCase(4, 2, 8, 24, 2, 40, "float32", 21, 2, 4, 2, 1)
    out = impl.call_in_process(runs.world_one, case)
    assert out["error"] is None, f"world 1 failed:\n{out['error']}"
    want = oracles.unsharded_logits(_model(reference, case), case.tokens())
    for step, (got, ref) in enumerate(zip(out["result"]["logits"], want)):
        assert torch.equal(got, ref), f"forward {step}: world-1 logits differ from the unsharded model's bits"


def test_world_one_needs_no_process_group(impl, reference):
    """World 1 calls no collective: it runs in a process where torch.distributed was never
    initialised and equals the unsharded model within the tolerance rule."""
    case = TPCase(4, 4, 4, 8, 1, 16, "bfloat16", 2, 1, 4, 1, 1)
    out = impl.call_in_process(runs.world_one, case)
    assert out["error"] is None, (f"world_size=1 failed in a process without a process group (it must call no "
                                  f"collective):\n{out['error']}")
    tokens = case.tokens()
    want = oracles.unsharded_logits(_model(reference, case), tokens)
    oracle = oracles.unsharded_logits(_model(reference, case, torch.float64), tokens)
    for step, (got, ref, orc) in enumerate(zip(out["result"]["logits"], want, oracle)):
        assert_close_to_oracle(got, ref, orc, name=f"world-1 logits of forward {step}")


# --- law (5): errors that need a process group ----------------------------------------------------------
@pytest.mark.parametrize("what,word", [("rank", "rank"), ("world", "world_size"), ("cache", "cache")])
def test_rejects_a_mismatched_group_or_cache(impl, what, word):
    """On a real 2-rank group: a ``rank`` that is not this process's rank of the group, a
    ``world_size`` the group does not have (ValueError naming them, at construction), a cache of
    every KV head (the implementation's world-1 cache; ValueError naming ``cache``, before any
    collective)."""
    outs = impl.call_in_process(runs.bad, 2, what)
    for rank, out in enumerate(outs):
        assert out["error"] is None, f"rank {rank} failed otherwise (or hung):\n{out['error']}"
        got = out["result"]
        assert got is not None, f"rank {rank}: the bad {what} was accepted; expected a ValueError naming {word!r}"
        assert got["type"] == "ValueError" and pool_names(got["message"], word), (
            f"rank {rank}: bad {what}: expected a ValueError naming {word!r}, got {got['type']}: {got['message']}")


def pool_names(message: str, word: str) -> bool:
    import re
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", message, re.IGNORECASE) is not None


# --- bad input ------------------------------------------------------------------------------------------
SHARD_BAD = [
    Bad("1-d weight", dict(weight=torch.zeros(8)), ValueError, ("weight",)),
    Bad("list weight", dict(weight=[[0.0] * 4] * 8), TypeError, ("weight",)),
    Bad("rank past world", dict(rank=2), ValueError, ("rank",)),
    Bad("negative rank", dict(rank=-1), ValueError, ("rank",)),
    Bad("bool rank", dict(rank=True), TypeError, ("rank",)),
    Bad("float rank", dict(rank=1.0), TypeError, ("rank",)),
    Bad("zero world_size", dict(world_size=0, rank=0), ValueError, ("world_size",)),
    Bad("float world_size", dict(world_size=2.0), TypeError, ("world_size",)),
    Bad("bool world_size", dict(world_size=True, rank=0), TypeError, ("world_size",)),
    Bad("split dim not divisible", dict(weight=torch.zeros(6, 6), world_size=4), ValueError, ("weight",)),
]


@bad_cases(SHARD_BAD)
def test_column_shard_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("column_shard"), dict(weight=torch.zeros(8, 4), rank=1, world_size=2), bad)


@bad_cases(SHARD_BAD)
def test_row_shard_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("row_shard"), dict(weight=torch.zeros(4, 8), rank=1, world_size=2), bad)


HEAD_BAD = [
    Bad("heads not split evenly", dict(n_heads=6, n_kv_heads=6, world_size=4), ValueError, ("n_heads",)),
    Bad("kv heads neither divide nor are divided", dict(n_heads=6, n_kv_heads=3), ValueError, ("n_kv_heads",)),
    Bad("kv heads not dividing heads", dict(n_kv_heads=4), ValueError, ("n_kv_heads",)),
    Bad("zero heads", dict(n_heads=0), ValueError, ("n_heads",)),
    Bad("zero kv heads", dict(n_kv_heads=0), ValueError, ("n_kv_heads",)),
    Bad("bool heads", dict(n_heads=True), TypeError, ("n_heads",)),
    Bad("float kv heads", dict(n_kv_heads=2.0), TypeError, ("n_kv_heads",)),
    Bad("rank past world", dict(rank=2), ValueError, ("rank",)),
    Bad("zero world_size", dict(world_size=0, rank=0), ValueError, ("world_size",)),
    Bad("bool rank", dict(rank=False), TypeError, ("rank",)),
]


@bad_cases(HEAD_BAD)
def test_head_shard_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("head_shard"), dict(n_heads=6, n_kv_heads=2, rank=1, world_size=2), bad)


def _config(**changes):
    from reference.model import ModelConfig
    return ModelConfig(**{**dict(vocab_size=16, dim=16, n_layers=1, n_heads=4, n_kv_heads=2, hidden_dim=8,
                                 max_seq_len=8), **changes})


BYTES_BAD = [
    Bad("config not a config", dict(config=(2, 16)), TypeError, ("config",)),
    Bad("zero world_size", dict(world_size=0), ValueError, ("world_size",)),
    Bad("bool world_size", dict(world_size=True), TypeError, ("world_size",)),
    Bad("str dtype", dict(dtype="bfloat16"), TypeError, ("dtype",)),
]


@bad_cases(BYTES_BAD)
def test_allreduce_bytes_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("allreduce_bytes_per_token"), dict(config=_config(), world_size=2, dtype=None), bad)


def _state_dict_bad() -> list[Bad]:
    def drop(kw):
        sd = dict(kw["state_dict"])
        sd.pop("model.layers.0.mlp.up_proj.weight")
        return {**kw, "state_dict": sd}

    def reshape(kw):
        sd = dict(kw["state_dict"])
        sd["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(4, 16)
        return {**kw, "state_dict": sd}

    def extra(kw):
        return {**kw, "state_dict": {**kw["state_dict"], "model.layers.0.self_attn.rotary.inv_freq": torch.zeros(4)}}

    return [
        Bad("missing name", drop, ValueError, ("state_dict",)),
        Bad("wrong shape", reshape, ValueError, ("state_dict",)),
        Bad("unexpected name", extra, ValueError, ("state_dict",)),
        Bad("not a dict", lambda kw: {**kw, "state_dict": list(kw["state_dict"].values())}, TypeError, ("state_dict",)),
        Bad("config not a config", dict(config="llama"), TypeError, ("config",)),
        Bad("hidden not divisible", lambda kw: {**kw, "world_size": 4, "rank": 0,
                                                "config": _config(n_kv_heads=4, hidden_dim=6)}, ValueError, ("hidden_dim",)),
        Bad("heads not divisible", lambda kw: {**kw, "world_size": 4, "rank": 0,
                                               "config": _config(n_heads=2, n_kv_heads=2, dim=16)}, ValueError, ("n_heads",)),
        Bad("rank past world", dict(rank=2), ValueError, ("rank",)),
        Bad("bool world_size", dict(world_size=True), TypeError, ("world_size",)),
    ]


@bad_cases(_state_dict_bad())
def test_shard_state_dict_rejects_bad_input(impl, reference, bad):
    from reference.model import Transformer
    model = Transformer(_config(), seed=0)
    assert_rejects(impl.get("shard_state_dict"), lambda: dict(state_dict=model.state_dict(), config=model.config,
                                                              rank=1, world_size=2), bad)


CONSTRUCT_BAD = [
    Bad("model not a model", dict(model=_config()), TypeError, ("model",)),
    Bad("model whose config is not a config", dict(model=SimpleNamespace(config="llama", state_dict=dict)),
        TypeError, ("config",)),
    Bad("world_size 2 without a process group", dict(world_size=2), ValueError, ("world_size",)),
    Bad("rank past world", dict(rank=1), ValueError, ("rank",)),
    Bad("zero world_size", dict(world_size=0), ValueError, ("world_size",)),
    Bad("bool world_size", dict(world_size=True), TypeError, ("world_size",)),
    Bad("str rank", dict(rank="0"), TypeError, ("rank",)),
]


@bad_cases(CONSTRUCT_BAD)
def test_constructor_rejects_bad_input(impl, bad):
    from reference.model import Transformer
    model = Transformer(_config(), seed=0)
    assert_rejects(impl.get("TensorParallelTransformer"), dict(model=model, rank=0, world_size=1), bad)


def test_new_cache_holds_this_ranks_heads(impl):
    """new_cache(batch, max_seq_len=None): a KVCache of (layers, batch, local KV heads, max_seq_len,
    head_dim) in the model's dtype, max_seq_len defaulting to the config's; 1 is legal for both."""
    from reference.model import Transformer
    model = Transformer(_config(dtype=torch.bfloat16), seed=0)
    tp = impl.get("TensorParallelTransformer")(model, 0, 1)
    for args, want in (((1, 1), (1, 1, 2, 1, 4)), ((3,), (1, 3, 2, 8, 4)), ((2, 5), (1, 2, 2, 5, 4))):
        cache = tp.new_cache(*args)
        assert tuple(cache.k.shape) == want and cache.k.dtype == torch.bfloat16 and cache.seq_len == 0, (
            f"new_cache{args}: k {tuple(cache.k.shape)} {cache.k.dtype}, expected {want} bfloat16, empty")
    cache = tp.new_cache(1, 1)
    assert tp(torch.tensor([[3]]), cache=cache).shape == (1, 1, 16) and cache.seq_len == 1


@bad_cases([Bad("zero batch", dict(batch=0), ValueError, ("batch",)),
            Bad("bool batch", dict(batch=True), TypeError, ("batch",)),
            Bad("zero max_seq_len", dict(max_seq_len=0), ValueError, ("max_seq_len",)),
            Bad("float max_seq_len", dict(max_seq_len=4.0), TypeError, ("max_seq_len",))])
def test_new_cache_rejects_bad_input(impl, bad):
    from reference.model import Transformer
    tp = impl.get("TensorParallelTransformer")(Transformer(_config(), seed=0), 0, 1)
    assert_rejects(tp.new_cache, dict(batch=1, max_seq_len=4), bad)


_TP: list = []     # the sharded model while a bad-input test runs (its own cache class makes the bad caches)


def _forward_bad() -> list[Bad]:
    return [
        Bad("float tokens", dict(tokens=torch.zeros(1, 3)), TypeError, ("tokens",)),
        Bad("1-d tokens", dict(tokens=torch.zeros(3, dtype=torch.long)), ValueError, ("tokens",)),
        Bad("empty tokens", dict(tokens=torch.zeros(1, 0, dtype=torch.long)), ValueError, ("tokens",)),
        Bad("id past vocab", dict(tokens=torch.tensor([[1, 16]])), ValueError, ("tokens",)),
        Bad("negative id", dict(tokens=torch.tensor([[-1, 2]])), ValueError, ("tokens",)),
        Bad("past max_seq_len", dict(tokens=torch.zeros(1, 9, dtype=torch.long)), ValueError, ("max_seq_len",)),
        Bad("cache not a cache", dict(cache="cache"), TypeError, ("cache",)),
        Bad("cache of another batch", lambda kw: {**kw, "cache": _TP[-1].new_cache(2, 8)}, ValueError, ("cache",)),
        Bad("cache too full", lambda kw: {**kw, "tokens": torch.zeros(1, 7, dtype=torch.long)}, ValueError, ("cache",)),
    ]


@bad_cases(_forward_bad())
def test_forward_rejects_bad_input(impl, bad):
    """World 1 (every rank checks the same way before its first collective). A rejected call
    leaves the cache as it was."""
    from reference.model import Transformer
    model = Transformer(_config(), seed=0)
    tp = impl.get("TensorParallelTransformer")(model, 0, 1)
    cache = tp.new_cache(1, 8)
    tp(torch.tensor([[1, 2]]), cache=cache)                    # 2 positions cached: 7 more do not fit
    state = lambda: (cache.seq_len, cache.k.clone(), cache.v.clone())  # noqa: E731
    before = state()
    _TP.append(tp)
    try:
        assert_rejects(tp, dict(tokens=torch.tensor([[3]]), cache=cache), bad)
    finally:   # emptied again: `inferspec docs` renders this row the same whether or not the test ran
        _TP.clear()
    after = state()
    assert before[0] == after[0] and torch.equal(before[1], after[1]) and torch.equal(before[2], after[2]), (
        f"bad input {bad.id!r}: the rejected forward changed the cache")


def test_pool_runs_are_real_process_groups(impl):
    """The harness itself: the pool's ranks are distinct processes of one gloo group (so the
    properties above are about real collectives, not a simulation)."""
    impl.get("TensorParallelTransformer")
    outs = impl.call_in_process(runs.whoami, 4)
    pids = {o["result"]["pid"] for o in outs}
    assert len(pids) == 4 and all(o["result"]["backend"] == "gloo" for o in outs), outs
    assert [o["result"]["rank"] for o in outs] == [0, 1, 2, 3]
    assert pool.SIZE == 4
