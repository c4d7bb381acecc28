"""Speculative decoding keeps the target distribution: the law for any verifier, then the
reference's exact rule, then the generator path as a black box.

The law (any conforming implementation, whatever its randomness and float precision), for a tiny
vocabulary (<= 6) and γ <= 3 with prefix-dependent dyadic target and draft distributions: every
(draft sequence, number accepted) of positive probability is verified in ONE call, in every mode at
once -- sampled rows at three points of each acceptance cell (kept 2^-20 from every threshold, so
float32 arithmetic cannot flip them), greedy rows, rows of a shorter γ_r padded with NaN, drafts
with or without probabilities; each row's acceptance count must be the threshold rule's and its
emitted token in the support of the residual / bonus / argmax (exact); and the emitted tokens of
each acceptance cell, drawn with fresh last-column uniforms, must follow the normalised residual /
bonus distribution (a pooled chi-square, fixed seeds, false-alarm rate 1e-6). With the acceptance
probabilities exact and the token distributions right, the output is lossless.

The reference's choice (``@pytest.mark.choice``, checked at token-exact only): the emitted token
is the inverse CDF of the last uniform and acceptance is float64 ``u * q < p``: then every cell of
the uniforms' cube (spec_tests/speculative/oracles.py) has one output, and the distribution the
implementation induces is known exactly (Fractions) and must be lossless as an identity.

Statistical (the generator path, as a black box): drafts sampled from q, verify(generator=g) on
thousands of rows, chi-square of the emitted sequences against the exact distribution, fixed
seeds, false-alarm rate <= 1e-6 per test.
"""
from __future__ import annotations

import dataclasses
import zlib
from fractions import Fraction

import pytest
import torch
from hypothesis import example, given

from conformance.stats import lumped
from spec_tests.speculative.oracles import (NAN, POINTS, acceptance_groups, batch, cells, draft_sequences,
                                            law_violation, lossless_violation, read_result, rule_distribution)
from spec_tests.speculative.strategies import Q_MODES, TreeCase, tree_cases

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



# ----------------------------------------------------------------------------- the law
LAW_ROWS = 1500       # the sampled rows' budget per case (the acceptance cells share it)
MIN_DRAWS = 12        # fresh draws per acceptance cell whose token is random, at least ...
MAX_DRAWS = 60        # ... and at most


def _law_rows(case: TreeCase):
    """The law's rows for one case, every mode in one batch: (γ_r, drafts, greedy, acceptance
    uniforms, group or None). Sampled rows: each (drafts, k accepted) group of the case and of its
    shorter γ_r = γ - 1 and 0 (padding rows), at its mid / low / high law points in turn, 3 rows
    if the emitted token is certain, else ``draws`` rows; greedy rows: one per draft sequence."""
    gammas = sorted({case.gamma, max(case.gamma - 1, 0), 0}, reverse=True)
    groups = [(gr, grp) for gr in gammas for grp in acceptance_groups(dataclasses.replace(case, gamma=gr))]
    random_groups = sum(1 for _, grp in groups if sum(1 for w in grp.dist if w) > 1)
    draws = max(MIN_DRAWS, min(MAX_DRAWS, LAW_ROWS // max(1, random_groups)))
    rows = []
    for gr, grp in groups:
        n = draws if sum(1 for w in grp.dist if w) > 1 else 3
        for j in range(n):
            rows.append((gr, grp.drafts, False, grp.points[POINTS[j % 3]], grp))
    for x, _ in draft_sequences(case):
        rows.append((case.gamma, x, True, [0.5] * case.gamma, None))
    return rows


def _law_batch(case: TreeCase, rows, device) -> dict:
    """verify's arguments for the law's rows: padded to γ + case.pad (NaN probabilities, token
    -1), draft_lens and greedy per row, the last uniform column fresh from a seed of the case."""
    width, v = case.gamma + case.pad, case.vocab
    n = len(rows)
    tp = torch.full((n, width + 1, v), NAN, dtype=torch.float64)
    dp = torch.full((n, width, v), NAN, dtype=torch.float64)
    tok = torch.full((n, width), -1, dtype=torch.int64)
    gen = torch.Generator().manual_seed(zlib.crc32(repr(case).encode()))
    u = torch.rand(n, width + 1, generator=gen, dtype=torch.float64)
    for r, (gr, x, greedy, ua, _) in enumerate(rows):
        tp[r, :gr + 1] = torch.tensor([[float(f) for f in case.p(x[:i])] for i in range(gr + 1)], dtype=torch.float64)
        if gr:
            dp[r, :gr] = torch.tensor([[float(f) for f in case.q(x[:i])] for i in range(gr)], dtype=torch.float64)
            tok[r, :gr] = torch.tensor(x, dtype=torch.int64)
            if not greedy:
                u[r, :gr] = torch.tensor(ua, dtype=torch.float64)
    return dict(target_probs=tp.to(device), draft_probs=None if case.q_mode == "none" else dp.to(device),
                draft_tokens=tok.to(device), draft_lens=[row[0] for row in rows],
                greedy=[row[2] for row in rows], uniforms=u.to(device))


def assert_law(verify, case: TreeCase, device) -> None:
    """The law for one case (module doc): exact acceptance counts and supports on every row, then
    a pooled chi-square of each acceptance cell's emitted tokens against its exact distribution."""
    from scipy import stats
    rows = _law_rows(case)
    kw = _law_batch(case, rows, device)
    got = read_result(verify(**kw), kw, case.vocab)
    why = law_violation(kw, got)
    assert why is None, f"not the law: {why}\n  case: {case!r}"
    counts: dict = {}
    for (gr, x, greedy, _, grp), e in zip(rows, got):
        if grp is not None and sum(1 for w in grp.dist if w) > 1:
            assert len(e) == grp.accepted + 1, f"row with drafts {list(x)}: accepted {len(e) - 1}, the rule {grp.accepted}"
            c = counts.setdefault(id(grp), (grp, [0] * case.vocab))[1]
            c[e[-1]] += 1
    stat, dof, worst = 0.0, 0, None
    for grp, c in counts.values():
        n = sum(c)
        obs, exp = lumped(c, [float(w) * n for w in grp.dist])
        if len(exp) < 2:
            continue
        part = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
        stat, dof = stat + part, dof + len(exp) - 1
        if worst is None or part / (len(exp) - 1) > worst[0]:
            worst = (part / (len(exp) - 1), grp, c, n)
    if not dof:
        return
    pvalue = float(stats.chi2.sf(stat, dof))
    if pvalue < ALPHA:
        _, grp, c, n = worst
        raise AssertionError(
            f"the emitted tokens do not follow the {'residual max(p - q, 0)' if grp.accepted < len(grp.drafts) else 'bonus p'} "
            f"distribution: pooled chi-square {stat:.1f} on {dof} degrees of freedom, p-value {pvalue:.3g} < {ALPHA:g}; "
            f"worst cell: drafts {list(grp.drafts)}, {grp.accepted} accepted, emitted tokens counted {c} in {n} draws, "
            f"expected {[round(float(w) * n, 1) for w in grp.dist]}\n  case: {case!r}")


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
def test_lossless_law(impl, device, case):
    """Any verifier (module doc): every draft sequence and acceptance cell, sampled / greedy /
    padded rows in one call: the threshold rule's acceptance counts (float32 rounding admitted
    within 2^-21 of a threshold, never reached here), emitted tokens in the allowed support, and each
    cell's tokens distributed as its normalised residual / bonus p (pooled chi-square, p >= 1e-6,
    fixed seeds)."""
    assert_law(impl.get("verify"), case, device)


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
@pytest.mark.choice("the emitted token is the inverse CDF of the last uniform; acceptance is float64 u * q < p")
def test_lossless_by_exact_enumeration(impl, device, case):
    """For every draft sequence x ~ q and every cell of the uniforms (accept k drafts, reject the
    next or take the bonus, emit token t) the implementation is evaluated at the cell's middle
    and near two opposite corners: constant on each cell; the induced distribution (exact
    Fractions) is lossless; and equal to the pinned rule's."""
    _assert_lossless(impl, case, device)


# ----------------------------------------------------------------------------- every mode, exhaustively
def sweep_cases(mode: str) -> list[TreeCase]:
    """The bounded-exhaustive sweep of one draft mode: every γ in 0..3 and vocabulary 2 and 3,
    fixed prefix-dependent tables with zeros (q > 0 where p = 0 and p > 0 where q = 0), padded by
    one position when γ is odd. Every draft sequence and acceptance cell of each is enumerated."""
    tables = {2: dict(p=((5, 3), (1, 7), (8, 0)), q=((2, 6), (7, 1)), sup=((8, 0), (3, 5)), dis=((0, 8),),
                      drafts=(1, 0)),
              3: dict(p=((4, 3, 1), (0, 5, 3), (2, 0, 6)), q=((1, 1, 6), (3, 5, 0)), sup=((5, 3, 0), (2, 6, 0)),
                      dis=((0, 0, 8),), drafts=(2, 0, 1))}
    out = []
    for vocab, t in tables.items():
        for gamma in range(4):
            common = dict(vocab=vocab, gamma=gamma, den=8, q_mode=mode, p_key=1, q_key=2, pad=gamma % 2)
            if mode == "disjoint":
                out.append(TreeCase(p_table=t["sup"], q_table=t["dis"], **common))
            elif mode == "none":
                out.append(TreeCase(p_table=t["p"], drafts=t["drafts"], **common))
            else:
                out.append(TreeCase(p_table=t["p"], q_table=t["q"] if mode in ("table", "mixture") else (), **common))
    return out


@pytest.mark.parametrize("mode", Q_MODES)
def test_lossless_law_every_mode(impl, device, mode):
    """Bounded-exhaustive: for each draft mode (independent tables, q == p, disjoint supports,
    q near p, no draft probabilities), every γ in 0..3 and vocabulary 2 and 3
    (:func:`sweep_cases`), the law of test_lossless_law: sampled, greedy and padded rows of every
    draft sequence and acceptance cell in one call per case."""
    for case in sweep_cases(mode):
        assert_law(impl.get("verify"), case, device)


@pytest.mark.parametrize("mode", Q_MODES)
@pytest.mark.choice("the emitted token is the inverse CDF of the last uniform; acceptance is float64 u * q < p")
def test_lossless_exact_every_mode(impl, device, mode):
    """The same sweep through the exact enumeration (every cell of the uniforms' cube, exact
    Fractions, the pinned rule's tokens)."""
    for case in sweep_cases(mode):
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
