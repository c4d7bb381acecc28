"""Speculative decoding keeps the target distribution: proven by exact enumeration, then tested
statistically on the generator path.

Exact (any implementation that takes explicit uniforms, i.e. every conforming one): for a tiny
vocabulary (<= 6) and γ <= 3, with prefix-dependent target and draft distributions whose
probabilities are dyadic (sums exactly 1), every draft sequence of positive probability and every
cell of the uniforms' cube (spec_tests/speculative/oracles.py) is evaluated in ONE verify call;
the distribution the implementation induces is then known exactly (Fractions) and must satisfy
losslessness exactly: the next emitted token, given the emitted prefix and that the process goes
on, is distributed as the target's.

Statistical (the generator path, as a black box): drafts sampled from q, verify(generator=g) on
thousands of rows, chi-square of the emitted sequences against the exact distribution, fixed
seeds, false-alarm rate <= 1e-6 per test.
"""
from __future__ import annotations

import pytest
import torch
from fractions import Fraction
from hypothesis import example, given

from conformance.stats import lumped
from spec_tests.speculative.oracles import (POINTS, batch, cells, draft_sequences, lossless_violation,
                                            read_result, rule_distribution)
from spec_tests.speculative.strategies import TreeCase, tree_cases

ALPHA = 1e-6   # per-test false-alarm rate of the chi-square tests


def _all_points(case: TreeCase, cl, device) -> dict:
    """One verify call's arguments: every cell at each of the three points, stacked."""
    parts = [batch(case, cl, where, device) for where in POINTS]
    kw = {}
    for key in parts[0]:
        vals = [p[key] for p in parts]
        if vals[0] is None:
            kw[key] = None
        elif isinstance(vals[0], list):
            kw[key] = sum(vals, [])
        else:
            kw[key] = torch.cat(vals)
    return kw


def _assert_lossless(impl, case: TreeCase, device):
    cl = cells(case)
    rule = rule_distribution(case)
    assert lossless_violation(case, rule) is None, "the oracle's own rule is not lossless (a bug of the oracle)"
    kw = _all_points(case, cl, device)
    got = read_result(impl.get("verify")(**kw), kw, case.vocab)
    n = len(cl)
    mid, low, high = got[:n], got[n:2 * n], got[2 * n:]
    induced: dict[tuple, Fraction] = {}
    for c, e in zip(cl, mid):
        induced[e] = induced.get(e, Fraction(0)) + c.weight
    why = lossless_violation(case, induced)
    moving = next((i for i in range(n) if not mid[i] == low[i] == high[i]), None)
    off_rule = next((i for i in range(n) if mid[i] != cl[i].emitted), None)
    if why is None and moving is None and off_rule is None:
        return
    lines = []
    if why is not None:
        lines.append(f"not lossless: {why}" if moving is None else
                     f"not lossless, evaluated at the middle of every cell of the pinned rule's partition of the "
                     f"uniforms (the emitted tokens also change inside a cell, so the middles are not its exact "
                     f"distribution): {why}")
    elif moving is not None:
        lines.append("not the pinned rule: the emitted tokens change inside a cell of its partition of the uniforms")
    else:
        lines.append("lossless, but not the pinned rule")
    if off_rule is not None:
        c = cl[off_rule]
        lines.append(f"e.g. drafts {list(c.drafts)} with uniforms {c.uniforms['mid']} (acceptance uniforms, then "
                     f"the draw): emitted {list(mid[off_rule])}; the pinned rule accepts {c.accepted} and emits "
                     f"{list(c.emitted)}")
    if moving is not None:
        c = cl[moving]
        lines.append(f"inside the cell 'drafts {list(c.drafts)}, accept {c.accepted}, emit token {c.token}': "
                     f"{list(low[moving])} near its low corner {c.uniforms['low']}, {list(mid[moving])} at its middle, "
                     f"{list(high[moving])} near its high corner {c.uniforms['high']} (an acceptance threshold other "
                     f"than min(1, p/q), or a draw from another distribution than the residual / bonus p)")
    raise AssertionError("\n  ".join(lines) + f"\n  case: {case!r}")


# Corner cases every run: q == p (residual all zero, acceptance certain), disjoint supports,
# q > 0 where p = 0 (with p > 0 where q = 0), drafts without probabilities, padding.
@example(case=TreeCase(vocab=3, gamma=2, den=4, p_table=((1, 2, 1), (0, 3, 1)), q_mode="equal", p_key=1)).via("mutant:bonus_from_q")
@example(case=TreeCase(vocab=4, gamma=2, den=8, p_table=((4, 4, 0, 0), (8, 0, 0, 0)), q_mode="disjoint",
                       q_table=((0, 0, 3, 5),), p_key=3)).via("mutant:recovered_from_q")
@example(case=TreeCase(vocab=3, gamma=3, den=8, p_table=((0, 4, 4), (2, 0, 6)), q_mode="table",
                       q_table=((4, 4, 0), (1, 2, 5)), p_key=2, q_key=5, pad=1)).via("mutant:residual_next_q")
@example(case=TreeCase(vocab=4, gamma=3, den=8, p_table=((1, 3, 4, 0), (0, 0, 2, 6), (8, 0, 0, 0)), q_mode="none",
                       drafts=(2, 0, 3), p_key=1, q_key=2)).via("mutant:recovered_from_p")
@example(case=TreeCase(vocab=2, gamma=3, den=1024, p_table=((1000, 24), (3, 1021)), q_mode="mixture",
                       q_table=((0, 1024),), p_key=7)).via("mutant:one_uniform_all_positions")
@given(case=tree_cases())
def test_lossless_by_exact_enumeration(impl, device, case):
    """For every draft sequence x ~ q and every cell of the uniforms (accept k drafts, reject the
    next or take the bonus, emit token t) the implementation is evaluated at the cell's middle
    and near two opposite corners: constant on each cell; the induced distribution (exact
    Fractions) is lossless; and equal to the pinned rule's."""
    _assert_lossless(impl, case, device)


# ----------------------------------------------------------------------------- statistical
CHI_CASES = {
    # prefix-dependent target and draft, q > 0 where p = 0 and p > 0 where q = 0
    "prefix-dependent": TreeCase(vocab=4, gamma=3, den=16, p_table=((6, 5, 0, 5), (2, 2, 10, 2), (0, 8, 4, 4)),
                                 q_mode="table", q_table=((4, 4, 4, 4), (1, 9, 6, 0)), p_key=3, q_key=1),
    # a draft close to the target: long accepted runs, bonus tokens
    "close draft": TreeCase(vocab=5, gamma=3, den=64, p_table=((20, 20, 12, 8, 4), (4, 8, 12, 20, 20)),
                            q_mode="mixture", q_table=((16, 16, 16, 8, 8),), p_key=1, q_key=2),
    # drafts without probabilities (a deterministic proposer)
    "no draft probs": TreeCase(vocab=4, gamma=3, den=16, p_table=((8, 4, 2, 2), (1, 9, 3, 3)), q_mode="none",
                               drafts=(0, 1, 3), p_key=2, q_key=1),
}
N_ROWS = 4000


@pytest.mark.parametrize("name", list(CHI_CASES))
def test_generator_draws_chi_square(impl, device, name):
    """The generator path as a black box: 4,000 draft sequences drawn from q (their own seeded
    float64 uniforms), verified with a seeded torch.Generator; no emitted sequence the pinned rule
    gives probability 0 (exact), then a chi-square test of the emitted sequences against the rule's
    exact distribution (lossless: test_lossless_by_exact_enumeration), cells lumped to expect >= 5.
    Fails iff p-value < 1e-6 (fixed seeds: it always passes or always fails)."""
    from scipy import stats
    case = CHI_CASES[name]
    seqs = list(draft_sequences(case))
    weights = torch.tensor([float(w) for _, w in seqs], dtype=torch.float64)
    g = torch.Generator().manual_seed(20240601)
    pick = (weights.cumsum(0)[None, :] <= torch.rand(N_ROWS, 1, generator=g, dtype=torch.float64)).sum(1)
    pick = pick.clamp(max=len(seqs) - 1)
    cl = [next(c for c in cells(case) if c.drafts == seqs[i][0]) for i in range(len(seqs))]  # one cell per x
    kw = batch(case, cl, "mid")
    kw = {k: (v[pick].to(device) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    del kw["uniforms"]
    if kw.get("draft_lens") is not None:
        kw["draft_lens"] = [case.gamma] * N_ROWS
    gen = torch.Generator(device=device).manual_seed(7)
    got = read_result(impl.get("verify")(**kw, generator=gen), kw, case.vocab)
    rule = rule_distribution(case)
    counts: dict[tuple, int] = {}
    for e in got:
        counts[e] = counts.get(e, 0) + 1
    impossible = sorted(e for e in counts if e not in rule)
    assert not impossible, (f"{name}: emitted {[list(e) for e in impossible[:5]]} "
                            f"({sum(counts[e] for e in impossible)} of {N_ROWS} rows), which the pinned rule never "
                            f"emits (probability 0)")
    keys = sorted(rule)
    obs, exp = lumped([counts.get(k, 0) for k in keys], [float(rule[k]) * N_ROWS for k in keys])
    if len(exp) < 2:
        return
    pvalue = stats.chisquare(obs, exp).pvalue
    worst = max(keys, key=lambda k: abs(counts.get(k, 0) - float(rule[k]) * N_ROWS) / max(1.0, float(rule[k]) * N_ROWS) ** 0.5)
    assert pvalue >= ALPHA, (f"{name}: chi-square p-value {pvalue:.3g} < {ALPHA:g}; e.g. {list(worst)} emitted "
                             f"{counts.get(worst, 0)} times, expected {float(rule[worst]) * N_ROWS:.1f}")
