"""Expert capacity and which assignments are dropped (course 06.05-06.06): the capacity is
ceil(k T factor / E) exactly (or T without a factor); every assignment's queue position is the
number of earlier assignments to its expert in GShard's order (choice rank first, then token
order) and it is kept iff that is below the capacity. The exhaustive table is test_exhaustive.py."""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.strategies import generator, seeds
from spec_tests.moe import oracles

FACTORS = st.one_of(st.none(), st.sampled_from((0.1, 0.25, 0.5, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 1 / 3, 0.7)),
                    st.floats(0.01, 8.0))


@example(tokens=8, experts=4, k=1, factor=1.25).via("mutant:capacity_floor")
@example(tokens=6, experts=4, k=2, factor=1.0).via("mutant:capacity_ignores_k")
@example(tokens=5, experts=2, k=1, factor=None).via("boundary: no factor, no limit: C = T")
@example(tokens=0, experts=3, k=2, factor=1.0).via("boundary: no token, capacity 0")
@given(tokens=st.integers(0, 100_000), experts=st.integers(1, 256), k=st.integers(1, 8), factor=FACTORS)
def test_expert_capacity(impl, tokens, experts, k, factor):
    """expert_capacity(T, E, k, factor) = ceil(k T factor / E) computed exactly on the float's
    value (a Python int); T when factor is None."""
    k = min(k, experts)
    got = impl.get("expert_capacity")(tokens, experts, k, factor)
    want = oracles.capacity(tokens, experts, k, factor)
    assert type(got) is int and got == want, (
        f"expert_capacity({tokens}, {experts}, {k}, {factor!r}) = {got!r}; ceil(k T factor / E) exactly = {want}")


def test_expert_capacity_hand_computed(impl):
    """Switch's example: 8 tokens, 4 experts, factor 1.25 -> 2.5 -> 3; GShard top-2 with factor 1:
    2 T / E; Mixtral 8 experts top-2 at 1024 tokens: 256."""
    fn = impl.get("expert_capacity")
    assert fn(8, 4, 1, 1.25) == 3
    assert fn(12, 4, 2, 1.0) == 6
    assert fn(1024, 8, 2, 1.0) == 256
    assert fn(1024, 8, 2, None) == 1024


@st.composite
def assignments(draw, max_tokens=12, max_experts=6):
    """(expert_ids (T, k) of distinct experts per token, E, capacity); ``skew``: a token's first
    choice is expert 0 with probability 0.7 (long queues, many drops)."""
    experts = draw(st.integers(1, max_experts))
    k = draw(st.integers(1, min(3, experts)))
    tokens = draw(st.integers(0, max_tokens))
    skew = draw(st.booleans())
    g = generator(draw(seeds))
    rows = []
    for _ in range(tokens):
        perm = torch.randperm(experts, generator=g).tolist()
        if skew and float(torch.rand(1, generator=g)) < 0.7:
            perm.remove(0)
            perm.insert(0, 0)
        rows.append(perm[:k])
    ids = torch.tensor(rows, dtype=torch.int64).reshape(tokens, k)
    return ids.to(draw(st.sampled_from((torch.int64, torch.int32)))), experts, draw(st.integers(0, max_tokens + 1))


def _check_positions(impl, ids, experts, capacity):
    positions, kept = impl.get("dispatch_positions")(ids, experts, capacity)
    call = f"dispatch_positions(expert_ids={ids.tolist()}, num_experts={experts}, capacity={capacity})"
    for name, t, dt in (("positions", positions, torch.int64), ("kept", kept, torch.bool)):
        assert isinstance(t, torch.Tensor) and t.dtype == dt and t.shape == ids.shape, \
            f"{call}: {name} must be a {dt} tensor shaped like expert_ids {tuple(ids.shape)}, got {t!r}"
    want = oracles.positions(ids.tolist(), experts) if ids.shape[0] else []
    assert positions.tolist() == want, (f"{call}: positions {positions.tolist()}; GShard's queue (every first "
                                        f"choice, then every second, tokens in order) gives {want}")
    want_kept = [[p < capacity for p in row] for row in want]
    assert kept.tolist() == want_kept, f"{call}: kept {kept.tolist()}, expected position < capacity: {want_kept}"


@example(case=(torch.tensor([[0, 1], [0, 2], [1, 0]]), 3, 1)).via(
    "mutant:queue_token_major mutant:kept_at_capacity")
@example(case=(torch.tensor([[2], [2], [2], [0]]), 3, 2)).via("mutant:kept_at_capacity")
@example(case=(torch.zeros((0, 2), dtype=torch.int64), 2, 0)).via("boundary: no token")
@given(case=assignments())
def test_dispatch_positions(impl, case):
    """positions = the count of earlier assignments to the same expert in GShard's order; kept =
    position < capacity (int64 and bool, shaped like expert_ids)."""
    _check_positions(impl, *case)


def test_dispatch_positions_leaves_ids(impl):
    """expert_ids is not modified."""
    ids = torch.tensor([[1, 0], [1, 2], [0, 1]], dtype=torch.int32)
    before = ids.clone()
    impl.get("dispatch_positions")(ids, 3, 1)
    assert torch.equal(ids, before), "dispatch_positions modified expert_ids"


@pytest.mark.parametrize("capacity", (0, 1, 2, 100))
def test_dispatch_positions_hand_computed(impl, capacity):
    """Top-2 of 3 tokens [[0, 1], [1, 0], [0, 2]]: first choices 0, 1, 0 take positions 0, 0, 1;
    second choices 1, 0, 2 come after ALL first choices: positions 1, 2, 0."""
    ids = torch.tensor([[0, 1], [1, 0], [0, 2]])
    positions, kept = impl.get("dispatch_positions")(ids, 3, capacity)
    assert positions.tolist() == [[0, 1], [0, 2], [1, 0]], positions.tolist()
    assert kept.tolist() == [[p < capacity for p in row] for row in [[0, 1], [0, 2], [1, 0]]]
