"""Top-k routing and the load-balance statistic (course 06.05): the experts chosen equal the
k largest logits (ties to the lower index) exactly; the gates are within the tolerance rule of the
float64 softmax (renormalised over the chosen experts, or not); Switch's E * sum f_i P_i against
exact counts and its closed forms. The exhaustive tie table is test_exhaustive.py."""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.strategies import DTYPES, generator, seeds
from conformance.tolerance import assert_close_to_oracle
from spec_tests.moe import oracles

LOGIT_DTYPES = ("float32", "bfloat16", "float16", "float64")


@st.composite
def logits_cases(draw):
    experts = draw(st.integers(1, 9))
    return (draw(st.integers(0, 8)), experts, draw(st.integers(1, experts)), draw(st.booleans()),
            draw(st.sampled_from(LOGIT_DTYPES)), draw(st.sampled_from(("normal", "ties", "wide"))), draw(seeds))


def _logits(tokens, experts, dtype, kind, seed):
    g = generator(seed)
    if kind == "ties":
        lg = torch.randint(-1, 2, (tokens, experts), generator=g).double()
    else:
        lg = torch.randn((tokens, experts), generator=g, dtype=torch.float64) * (30 if kind == "wide" else 1)
    return lg.to(DTYPES[dtype])


def _check_route(impl, reference, lg, k, renormalize):
    ids, gates = impl.get("route_topk")(lg, k, renormalize)
    call = f"route_topk(router_logits={tuple(lg.shape)} {str(lg.dtype)[6:]}, k={k}, renormalize={renormalize})"
    assert isinstance(ids, torch.Tensor) and ids.dtype == torch.int64 and tuple(ids.shape) == (lg.shape[0], k), \
        f"{call}: expert_ids must be an int64 tensor of shape {(lg.shape[0], k)}, got {ids!r}"
    want = [oracles.topk(row, k) for row in lg.tolist()]
    for t, row in enumerate(want):
        assert ids[t].tolist() == row, (
            f"{call}: token {t} with logits {lg[t].tolist()} chose experts {ids[t].tolist()}; the k largest, "
            f"largest first, equal logits by the lower index, are {row}")
    oracle = torch.stack([oracles.gates(lg[t], row, renormalize) for t, row in enumerate(want)]) if want else \
        torch.zeros((0, k), dtype=torch.float64)
    _, ref_gates = reference.get("route_topk")(lg, k, renormalize)
    assert_close_to_oracle(gates, ref_gates, oracle, name=f"{call}: gates", inputs=dict(router_logits=lg))
    return ids, gates


@example(case=(3, 5, 2, True, "float32", "normal", 7)).via(
    "mutant:gates_not_renormalized mutant:topk_smallest")
@example(case=(4, 4, 1, False, "float32", "normal", 8)).via("mutant:renormalize_ignored")
@example(case=(6, 4, 2, True, "float32", "ties", 1)).via("mutant:ties_to_highest_index")
@example(case=(2, 3, 3, True, "bfloat16", "wide", 3)).via("boundary: k = E, logits 30x wide in bfloat16")
@given(case=logits_cases())
def test_route_topk_matches_oracle(impl, reference, case):
    """expert_ids (T, k) int64 equal the k largest logits of each token, largest first, equal
    logits by the lower expert index (exactly: a discrete output of exact comparisons); the gates,
    in the compute dtype, are within the tolerance rule of the float64 softmax of the chosen logits
    (renormalize) or of all logits (not)."""
    tokens, experts, k, renormalize, dtype, kind, seed = case
    lg = _logits(tokens, experts, dtype, kind, seed)
    ids, gates = _check_route(impl, reference, lg, k, renormalize)
    want_dtype = torch.float64 if lg.dtype == torch.float64 else torch.float32
    assert gates.dtype == want_dtype, f"gates must be in the compute dtype {want_dtype}, got {gates.dtype}"
    if tokens and renormalize:
        sums = gates.double().sum(dim=1)
        assert torch.allclose(sums, torch.ones_like(sums), atol=1e-6), f"renormalised gates must sum to 1: {sums}"
    if tokens and k > 1:
        assert bool((gates[:, :-1] >= gates[:, 1:]).all()), f"gates must not increase along the choices: {gates}"


@pytest.mark.parametrize("renormalize", (True, False))
def test_route_topk_hand_computed(impl, renormalize):
    """Logits [1, 3, 2, 3] with k = 2: experts 1 and 3 (equal logits, index order), gates 1/2, 1/2
    renormalised, or e^3 / (e + 2 e^3 + e^2) each of the full softmax. k = 3 adds expert 2."""
    lg = torch.tensor([[1.0, 3.0, 2.0, 3.0]])
    ids, gates = impl.get("route_topk")(lg, 2, renormalize)
    assert ids.tolist() == [[1, 3]], f"route_topk([[1, 3, 2, 3]], k=2): experts {ids.tolist()}, expected [[1, 3]]"
    e = torch.tensor(1.0, dtype=torch.float64).exp()
    want = 0.5 if renormalize else float(e**3 / (e + 2 * e**3 + e**2))
    assert torch.allclose(gates.double(), torch.full((1, 2), want, dtype=torch.float64), atol=1e-6), gates
    ids, _ = impl.get("route_topk")(lg, 3, renormalize)
    assert ids.tolist() == [[1, 3, 2]]


def test_route_topk_defaults_to_renormalize(impl):
    """renormalize defaults to True (Mixtral's gates)."""
    lg = torch.tensor([[0.5, 2.0, -1.0, 1.0]])
    _, gates = impl.get("route_topk")(lg, 2)
    assert torch.allclose(gates.sum(dim=1).double(), torch.ones(1, dtype=torch.float64), atol=1e-6), gates


def test_route_topk_leaves_logits(impl):
    """The logits are not modified (bit for bit)."""
    lg = _logits(5, 6, "bfloat16", "normal", 3)
    before = lg.clone()
    impl.get("route_topk")(lg, 3)
    assert torch.equal(lg, before), "route_topk modified router_logits"


# --- the load-balance statistic ---------------------------------------------------------------
@example(case=(6, 4, 2, True, "float32", "normal", 5)).via("mutant:balance_f_over_tokens_only")
@example(case=(6, 4, 1, True, "float32", "normal", 4)).via("mutant:balance_without_num_experts")
@example(case=(5, 3, 1, True, "float32", "ties", 2)).via("boundary: ties decide f (the lower index)")
@given(case=logits_cases())
def test_load_balance_loss_matches_oracle(impl, reference, case):
    """load_balance_loss = E * sum_i f_i P_i (f: the fraction of the T k top-k choices, ties to the
    lower index; P: the mean softmax), within the tolerance rule of the float64 value; a 0-d tensor
    in the compute dtype."""
    tokens, experts, k, _, dtype, kind, seed = case
    lg = _logits(max(1, tokens), experts, dtype, kind, seed)
    got = impl.get("load_balance_loss")(lg, k)
    want_dtype = torch.float64 if lg.dtype == torch.float64 else torch.float32
    assert isinstance(got, torch.Tensor) and got.dim() == 0 and got.dtype == want_dtype, \
        f"load_balance_loss must return a 0-d {want_dtype} tensor, got {got!r}"
    oracle = torch.tensor(oracles.load_balance(lg, k), dtype=torch.float64)
    assert_close_to_oracle(got, reference.get("load_balance_loss")(lg, k), oracle,
                           name=f"load_balance_loss(router_logits={tuple(lg.shape)}, k={k})", inputs=dict(router_logits=lg))


@given(experts=st.integers(1, 8), k=st.integers(1, 8), scale=st.sampled_from((0.0, 1.0, 5.0)))
def test_load_balance_closed_forms(impl, experts, k, scale):
    """E tokens, token t's logits peaked at expert t (a circulant, so every expert chooses and is
    chosen alike): f and P uniform, the statistic 1. One expert taking every token with
    probability ~1 (logit +60): E * 1 * 1 = E (k = 1). Equal logits: P uniform, so 1 whatever f."""
    k = min(k, experts)
    base = torch.tensor([scale * (experts - i) for i in range(experts)], dtype=torch.float64)
    lg = torch.stack([base.roll(t) for t in range(experts)])
    got = float(impl.get("load_balance_loss")(lg, k))
    assert abs(got - 1.0) < 1e-9, f"balanced routing (circulant logits, E={experts}, k={k}): {got}, expected 1"
    lg = torch.zeros((5, experts), dtype=torch.float64)
    lg[:, 0] = 60.0
    got = float(impl.get("load_balance_loss")(lg, 1))
    assert abs(got - experts) < 1e-9 * experts, f"every token to expert 0 with probability 1: {got}, expected E={experts}"
    got = float(impl.get("load_balance_loss")(torch.zeros((3, experts)), k))
    assert abs(got - 1.0) < 1e-6, f"equal logits (P uniform): {got}, expected 1"


def test_load_balance_hand_computed(impl):
    """Two experts, three tokens with probabilities (0.8, 0.2), (0.6, 0.4), (0.3, 0.7) (logits
    their logs): top-1 sends 2 tokens to expert 0, 1 to expert 1: f = (2/3, 1/3), P = (17/30,
    13/30): 2 (2/3 17/30 + 1/3 13/30) = 94/90. With k = 2 both experts get every token:
    f = (1/2, 1/2), statistic 1. Default k is 1."""
    lg = torch.tensor([[0.8, 0.2], [0.6, 0.4], [0.3, 0.7]], dtype=torch.float64).log()
    fn = impl.get("load_balance_loss")
    assert abs(float(fn(lg, 1)) - 94 / 90) < 1e-12, float(fn(lg, 1))
    assert abs(float(fn(lg)) - 94 / 90) < 1e-12, "k defaults to 1"
    assert abs(float(fn(lg, 2)) - 1.0) < 1e-12, float(fn(lg, 2))
