"""Bounded-exhaustive head splits: every (n_heads, n_kv_heads, world) of a small domain.

(1) ``head_shard`` on every n_heads <= 12, n_kv_heads dividing it, world <= 8 and every rank
(1,260 calls, 280 of them allowed; the counts are asserted): the oracle's ranges where the contract
splits, a ValueError naming the right argument where it does not; the allowed splits partition
the query heads, and a KV head is held by exactly max(1, p/K) ranks.

(2) The sharded model on real gloo groups of 2 and 4 ranks for every n_heads in {1, 2, 3, 4, 6, 8}
with every n_kv_heads dividing it and a hidden size that does or does not divide (32
constructions a world, one pool job each): where the contract allows the split the logits equal
the unsharded model's (tolerance rule) and each rank's cache holds its KV heads; elsewhere every
rank raises a ValueError naming a reason that holds (n_heads, n_kv_heads or hidden_dim).
"""
from __future__ import annotations

import re

import pytest
import torch

from conformance.tolerance import assert_close_to_oracle
from spec_tests.tensor_parallel import oracles, runs

DOMAIN = [(h, k, p) for h in range(1, 13) for k in range(1, h + 1) if h % k == 0 for p in range(1, 9)]
CALLS, ALLOWED = 1260, 280


def _names(message: str, word: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", message, re.IGNORECASE) is not None


def _reasons(n_heads, n_kv, world, hidden=None) -> list[str]:
    why = []
    if n_heads % world:
        why.append("n_heads")
    if n_kv % world and world % n_kv:
        why.append("n_kv_heads")
    if hidden is not None and hidden % world:
        why.append("hidden_dim")
    return why


def test_head_shard_exhaustive(impl):
    """head_shard(H, K, r, p) for every H <= 12, K | H, p <= 8, r < p: the oracle's ranges or a
    ValueError naming n_heads / n_kv_heads; allowed splits partition the query heads, every query
    head's KV head is on its rank, and each KV head is on max(1, p/K) ranks."""
    results = iter(impl.call_in_process(runs.head_shards, DOMAIN))
    calls = allowed = 0
    for h, k, p in DOMAIN:
        held = {}
        qs = []
        for r in range(p):
            calls += 1
            got = next(results)
            want = oracles.expected_heads(h, k, r, p)
            call = f"head_shard(n_heads={h}, n_kv_heads={k}, rank={r}, world_size={p})"
            if want is None:
                assert got[0] == "error" and got[1] == "ValueError", (
                    f"{call}: expected a ValueError ({', '.join(_reasons(h, k, p))} does not divide), got {got}")
                assert any(_names(got[2], w) for w in _reasons(h, k, p)), (
                    f"{call} raised {got[2]!r}; it should name {_reasons(h, k, p)}")
                continue
            allowed += 1
            assert got[0] == "ok", f"{call}: an allowed split raised {got[1]}: {got[2]}"
            q, kv = got[1], got[2]
            assert q == want[0] and kv == want[1], f"{call} = ({q}, {kv}); expected ({want[0]}, {want[1]})"
            qs += q
            for head in kv:
                held[head] = held.get(head, 0) + 1
            assert all(qh // (h // k) in kv for qh in q), f"({h}, {k}, {r}, {p}): a query head's KV head is elsewhere"
        if oracles.expected_heads(h, k, 0, p) is not None:
            assert qs == list(range(h)), f"({h}, {k}, p={p}): query heads {qs} do not partition range({h})"
            assert held == {head: max(1, p // k) for head in range(k)}, f"({h}, {k}, p={p}): KV heads held {held}"
    assert (calls, allowed) == (CALLS, ALLOWED)


CONFIGS = [(h, k, hidden, 100 + i) for i, (h, k) in enumerate((h, k) for h in (1, 2, 3, 4, 6, 8)
                                                              for k in range(1, h + 1) if h % k == 0)
           for hidden in (8, 6)]


@pytest.mark.parametrize("world", [2, 4])
def test_every_split_the_contract_allows(impl, reference, world):
    """One pool job a world: every config of CONFIGS built and run on each rank; allowed splits
    match the unsharded model, the others raise a ValueError with a true reason on every rank."""
    outs = impl.call_in_process(runs.sweep, world, CONFIGS)
    for rank, out in enumerate(outs):
        assert out["error"] is None, f"rank {rank} failed (or hung) during the sweep:\n{out['error']}"
    M = reference.of("model")
    tokens = torch.arange(5).remainder(16)[None]
    for i, (h, k, hidden, seed) in enumerate(CONFIGS):
        why = _reasons(h, k, world, hidden)
        cfg = M.get("ModelConfig")(vocab_size=16, dim=h * 2, n_layers=1, n_heads=h, n_kv_heads=k, head_dim=2,
                                    hidden_dim=hidden, max_seq_len=8)
        for rank, out in enumerate(outs):
            got = out["result"][i]
            where = f"world {world}, rank {rank}, n_heads={h}, n_kv_heads={k}, hidden_dim={hidden}"
            if why:
                assert got[0] == "error" and got[1] == "ValueError", (
                    f"{where}: the split is not allowed ({', '.join(why)} does not divide); expected a ValueError, "
                    f"got {got[0]} {got[1] if got[0] == 'error' else ''}")
                assert any(_names(got[2], w) for w in why), f"{where}: the error should name {why}: {got[2]}"
                continue
            assert got[0] == "logits", f"{where}: an allowed split raised {got[1]}: {got[2]}"
            model = M.get("Transformer")(cfg, seed=seed)
            oracle = M.get("Transformer")(cfg.replace(dtype=torch.float64), seed=seed)
            with torch.no_grad():
                assert_close_to_oracle(got[1], model(tokens), oracle(tokens), name=f"{where}: logits")
            _, kv = oracles.expected_heads(h, k, rank, world)
            assert got[2][2] == len(kv), f"{where}: the cache holds {got[2][2]} KV heads, expected {len(kv)}"
