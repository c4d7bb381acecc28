"""The exact enumeration: the distribution a verifier induces, computed with Fractions.

For one :class:`~spec_tests.speculative.strategies.TreeCase` the randomness of speculative
decoding is (a) the draft sequence x ~ q and (b) the verifier's uniforms. (a) is enumerated: every
x in vocab^γ with positive probability. (b) is integrated piecewise: the pinned rule accepts draft
i iff u_i < a_i = min(1, p_i(x_i) / q_i(x_i)) (a threshold) and draws the emitted token by inverse
CDF of v (which cuts [0, 1) into one interval per token of positive weight). So the uniforms'
cube splits into finitely many cells -- "accept the first k drafts, reject draft k (or take the
bonus), emit token t" -- each of exactly known probability

    q(x) * prod_{i<k} a_i * (1 - a_k) * r_k(t) / sum(r_k)       (r_k the residual or the bonus p)

and the verifier is constant on each cell. Evaluating an implementation at one point inside every
cell (``mid``), weighted by the cell's probability, gives the distribution it induces EXACTLY;
two more points near opposite corners of each cell (``low``, ``high``: every coordinate within
2^-20 of the cell's width of its ends) check that it is indeed constant there (a threshold moved
by more than that is seen).

Losslessness (:func:`lossless_violation`) is the statement that the emitted tokens are a prefix of
a sequence drawn from the target: for every emitted prefix s and token t,

    P(emit s + t as a prefix) = p(t | s) * (P(emit s as a prefix) - P(emit exactly s))

(the process continues past s with the probability in brackets, and the next token must then be
distributed as the target's). This is equivalent to: the emitted tokens, completed to length γ + 1
by sampling the target, are distributed as the target's γ + 1 tokens.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import torch

from spec_tests.speculative.strategies import TreeCase

ONE_MINUS = 1.0 - 2.0 ** -53   # the largest float64 below 1
PAD = -1                       # the contract's padding token
POINTS = ("mid", "low", "high")


def accept_prob(p: Fraction, q: Fraction) -> Fraction:
    """min(1, p / q); q = 0 rejects (the pinned rule)."""
    return Fraction(0) if q == 0 else min(Fraction(1), p / q)


def residual(p: tuple, q: tuple) -> tuple:
    """max(p - q, 0) elementwise; p itself when that has no positive entry (the pinned rule;
    in exact arithmetic this happens only when p == q, where nothing is ever rejected)."""
    r = tuple(max(a - b, Fraction(0)) for a, b in zip(p, q))
    return r if any(r) else p


@dataclass(frozen=True)
class Cell:
    drafts: tuple            # x_0 .. x_{γ-1}
    accepted: int            # k
    token: int               # the emitted (recovered or bonus) token
    weight: Fraction         # the cell's probability (draft probability included)
    uniforms: dict           # point name -> γ + 1 floats (acceptance uniforms, then v)

    @property
    def emitted(self) -> tuple:
        return self.drafts[:self.accepted] + (self.token,)


def _inside(lo: Fraction, hi: Fraction, where: str) -> float:
    """A float in [lo, hi): the midpoint, or within 2^-20 of the width of an end."""
    w = hi - lo
    x = {"mid": lo + w / 2, "low": lo + w / 2 ** 20, "high": hi - w / 2 ** 20}[where]
    return min(float(x), ONE_MINUS)


def draft_sequences(case: TreeCase):
    """(x, probability of x under the draft) for every draft sequence of positive probability."""
    if case.q_mode == "none":          # a deterministic proposer: one sequence
        x = ()
        for _ in range(case.gamma):
            q = case.q(x)
            x += (q.index(Fraction(1)),)
        yield x, Fraction(1)
        return
    for x in itertools.product(range(case.vocab), repeat=case.gamma):
        w = Fraction(1)
        for i in range(case.gamma):
            w *= case.q(x[:i])[x[i]]
            if w == 0:
                break
        if w:
            yield x, w


def _stops(case: TreeCase):
    """(x, acceptance probabilities a, k accepted, probability of reaching k, probability of
    stopping there, the distribution then drawn from) for every draft sequence x and every k it
    reaches with positive probability and stops at with positive probability: a rejection at k
    draws from the residual, acceptance of all gamma from p(x) (the bonus)."""
    g = case.gamma
    for x, wx in draft_sequences(case):
        a = [accept_prob(case.p(x[:i])[x[i]], case.q(x[:i])[x[i]]) for i in range(g)]
        for k in range(g + 1):
            reach = wx * math.prod(a[:k], start=Fraction(1))
            if reach == 0:
                break
            stop, dist = (1 - a[k], residual(case.p(x[:k]), case.q(x[:k]))) if k < g else (Fraction(1), case.p(x))
            if stop:
                yield x, a, k, reach, stop, dist


def cdf_cells(dist):
    """(token, its share, the uniform's interval [v_lo, v_hi)) of each token of positive weight,
    in token-id order: the inverse CDF's cells of the (unnormalised, exact) distribution ``dist``."""
    total, lo = sum(dist), Fraction(0)
    for t, w in enumerate(dist):
        if w == 0:
            continue
        yield t, w / total, lo / total, (lo + w) / total
        lo += w


@functools.lru_cache(maxsize=64)
def cells(case: TreeCase) -> tuple[Cell, ...]:
    """Every cell of positive probability (module doc), with its three points."""
    out = []
    g = case.gamma
    for x, a, k, reach, stop, dist in _stops(case):
        for t, share, v_lo, v_hi in cdf_cells(dist):
            points = {}
            for where in POINTS:
                u = [0.5] * (g + 1)
                for i in range(k):
                    u[i] = _inside(Fraction(0), a[i], where) if where != "low" else 0.0
                if k < g:
                    u[k] = _inside(a[k], Fraction(1), where) if where != "high" else ONE_MINUS
                u[g] = _inside(v_lo, v_hi, where)
                points[where] = u
            out.append(Cell(x, k, t, reach * stop * share, points))
    return tuple(out)


def rule_distribution(case: TreeCase) -> dict[tuple, Fraction]:
    """The pinned rule's distribution over emitted sequences (accepted drafts + one token)."""
    dist: dict[tuple, Fraction] = {}
    for c in cells(case):
        dist[c.emitted] = dist.get(c.emitted, Fraction(0)) + c.weight
    return dist


def lossless_violation(case: TreeCase, dist: dict[tuple, Fraction]) -> str | None:
    """Why ``dist`` (emitted sequence -> probability) is not lossless for ``case``'s target, or
    None (module doc: the conditional of each next token given the emitted prefix)."""
    total = sum(dist.values(), Fraction(0))
    if total != 1:
        return f"the emitted sequences' probabilities sum to {total} ({float(total):.6g}), not 1"
    prefix_mass: dict[tuple, Fraction] = {(): Fraction(1)}   # P(emit s as a prefix)
    exact: dict[tuple, Fraction] = {}                         # P(emit exactly s)
    for s, w in dist.items():
        if not 1 <= len(s) <= case.gamma + 1:
            return f"an emitted sequence of length {len(s)} ({s}); expected 1 .. γ + 1 = {case.gamma + 1}"
        exact[s] = exact.get(s, Fraction(0)) + w
        for m in range(1, len(s) + 1):
            prefix_mass[s[:m]] = prefix_mass.get(s[:m], Fraction(0)) + w
    for s in sorted((s for s in prefix_mass if len(s) <= case.gamma), key=lambda s: (len(s), s)):
        go_on = prefix_mass[s] - exact.get(s, Fraction(0))
        p = case.p(s)
        for t in range(case.vocab):
            got, want = prefix_mass.get(s + (t,), Fraction(0)), p[t] * go_on
            if got != want:
                return (f"after emitting {list(s)} (the process continues with probability {go_on} = "
                        f"{float(go_on):.6g}), the next token is {t} with probability {got} = {float(got):.6g}; "
                        f"the target needs p({t} | {list(s)}) x {float(go_on):.6g} = {want} = {float(want):.6g}")
    return None


NAN = float("nan")


def batch(case: TreeCase, cell_list, where: str, device="cpu") -> dict:
    """The verify keyword arguments with one row per cell, evaluated at point ``where``; padded
    positions (case.pad of them) hold NaN probabilities, token -1 and uniform 0.5."""
    g, width, v = case.gamma, case.gamma + case.pad, case.vocab
    n = len(cell_list)
    tp = torch.full((n, width + 1, v), NAN, dtype=torch.float64)
    dp = torch.full((n, width, v), NAN, dtype=torch.float64)
    tok = torch.full((n, width), -1, dtype=torch.int64)
    u = torch.full((n, width + 1), 0.5, dtype=torch.float64)
    rows_p = {}
    for r, c in enumerate(cell_list):
        key = c.drafts
        if key not in rows_p:
            rows_p[key] = ([[float(f) for f in case.p(key[:i])] for i in range(g + 1)],
                           [[float(f) for f in case.q(key[:i])] for i in range(g)])
        ps, qs = rows_p[key]
        tp[r, :g + 1] = torch.tensor(ps, dtype=torch.float64)
        if g:
            dp[r, :g] = torch.tensor(qs, dtype=torch.float64)
            tok[r, :g] = torch.tensor(key, dtype=torch.int64)
        pts = c.uniforms[where]
        u[r, :g] = torch.tensor(pts[:g], dtype=torch.float64)
        u[r, width] = pts[g]
    return dict(target_probs=tp.to(device), draft_probs=None if case.q_mode == "none" else dp.to(device),
                draft_tokens=tok.to(device), draft_lens=[g] * n if case.pad else None, uniforms=u.to(device))


def read_result(result, kw: dict, vocab: int, what: str = "verify") -> list[tuple]:
    """The emitted tokens of every row, after checking the result's form: ``(tokens,
    num_accepted)`` int64 tensors of shapes (batch, γ + 1) and (batch,); 0 <= num_accepted <= γ_r;
    the accepted tokens are the drafts; then one token id in [0, vocab); then PAD (-1)."""
    tokens, accepted = result
    b, width = kw["draft_tokens"].shape
    for name, t, shape in (("tokens", tokens, (b, width + 1)), ("num_accepted", accepted, (b,))):
        assert isinstance(t, torch.Tensor), f"{what}: {name} must be a torch.Tensor, got {type(t).__name__}"
        assert t.dtype == torch.int64, f"{what}: {name} must be int64, got {t.dtype}"
        assert tuple(t.shape) == shape, f"{what}: {name} has shape {tuple(t.shape)}, expected {shape}"
        assert t.device == kw["target_probs"].device, f"{what}: {name} is on {t.device}"
    tokens, accepted = tokens.cpu(), accepted.cpu()
    drafts = kw["draft_tokens"].cpu()
    lens = kw.get("draft_lens")
    lens = [width] * b if lens is None else [int(v) for v in lens]
    out = []
    for r in range(b):
        k = int(accepted[r])
        assert 0 <= k <= lens[r], f"{what}: row {r} accepted {k} drafts; it has γ_r = {lens[r]}"
        row = tokens[r].tolist()
        assert row[:k] == drafts[r, :k].tolist(), (
            f"{what}: row {r} accepted {k} drafts {drafts[r, :k].tolist()} but emitted {row[:k]}")
        assert 0 <= row[k] < vocab, (
            f"{what}: row {r}: after {k} accepted drafts the emitted (recovered or bonus) token is "
            f"{row[k]}, not a token id in [0, {vocab}): every row emits num_accepted + 1 tokens")
        assert all(t == PAD for t in row[k + 1:]), f"{what}: row {r}: {row} has tokens after the emitted ones (PAD = -1)"
        out.append(tuple(row[:k + 1]))
    return out


# ============================================================================= the law
# What ANY correct verifier must do, apart from the reference's choices (docs/speculative.md,
# "Choices the law leaves open"): the uniforms' acceptance columns decide the drafts by the
# threshold min(1, p/q) up to float32 rounding; the emitted (recovered or bonus) token is drawn
# from the residual / bonus distribution by ANY randomness derived from the row's last uniform;
# greedy rows follow an argmax.
F32_SLACK = 2.0 ** -21   # relative: u within this fraction of the threshold a may go either way
LAW_MARGIN = 2.0 ** -20  # absolute: the law's acceptance points keep this far from a threshold


def accept_decisions(p_x: float, q_x: float, u: float) -> frozenset:
    """The acceptance decisions the law admits for one draft with p(x), q(x) (exact float64
    values of the inputs) and uniform u: a zero-probability draft (p(x) = 0 or q(x) = 0) is never
    accepted; p(x) >= q(x) always is; otherwise u < a = p(x)/q(x) accepts and u >= a rejects,
    except within a relative F32_SLACK of a (float32 arithmetic may round either way)."""
    if q_x <= 0 or p_x <= 0:
        return frozenset({False})
    if p_x >= q_x:
        return frozenset({True})
    a = p_x / q_x
    if abs(u - a) <= F32_SLACK * a:
        return frozenset({True, False})
    return frozenset({u < a})


def argmax_set(p: list) -> frozenset:
    """The tokens a greedy row may take as the argmax: every maximum, and values within float32
    rounding of it (a float64 input cast to float32 may tie)."""
    m = max(p)
    return frozenset(t for t, v in enumerate(p) if v >= m - m * F32_SLACK)


def support(weights: list) -> frozenset:
    return frozenset(t for t, w in enumerate(weights) if w > 0)


def row_outcomes(p: list, q: list | None, x: list, u: list, greedy: bool) -> dict:
    """{k: the tokens the law allows as the emitted token after k accepted drafts} for one row:
    p (γ_r + 1 lists), q (γ_r lists, or None: one-hot on the drafts), x (γ_r drafts), u (γ_r
    acceptance uniforms). Residual support: {t: p(t) > q(t)}, or p's support when empty."""
    out: dict = {}
    n = len(x)
    for i in range(n):
        if greedy:
            best = argmax_set(p[i])
            d = frozenset({True}) if best == {x[i]} else frozenset({True, False}) if x[i] in best else frozenset({False})
            if False in d:
                out[i] = best
        else:
            qi = q[i] if q is not None else [float(t == x[i]) for t in range(len(p[i]))]
            d = accept_decisions(p[i][x[i]], qi[x[i]], u[i])
            if False in d:
                res = frozenset(t for t in range(len(p[i])) if p[i][t] > qi[t])
                out[i] = res or support(p[i])
        if True not in d:
            return out
    out[n] = argmax_set(p[n]) if greedy else support(p[n])
    return out


def law_violation(kw: dict, got: list) -> str | None:
    """The first row of a verify call (kw: its arguments; got: read_result's emitted tokens) whose
    result the law does not allow, described; None if every row is allowed."""
    tp = kw["target_probs"].detach().cpu().double()
    dp = kw.get("draft_probs")
    dp = None if dp is None else dp.detach().cpu().double()
    x = kw["draft_tokens"].cpu().tolist()
    u = kw["uniforms"].detach().cpu().double().tolist()
    b, width = kw["draft_tokens"].shape
    lens = kw.get("draft_lens")
    lens = [width] * b if lens is None else [int(v) for v in lens]
    g = kw.get("greedy")
    flags = [bool(g)] * b if g is None or isinstance(g, bool) else [bool(v) for v in g]
    for r in range(b):
        n = lens[r]
        allowed = row_outcomes(tp[r, :n + 1].tolist(), None if dp is None else dp[r, :n].tolist(),
                               x[r][:n], u[r][:n], flags[r])
        k, token = len(got[r]) - 1, got[r][-1]
        if k not in allowed:
            return (f"row {r} ({'greedy' if flags[r] else 'sampled'}, drafts {x[r][:n]}, acceptance uniforms "
                    f"{u[r][:n]}) accepted {k} drafts; the law allows {sorted(allowed)} (the threshold "
                    f"min(1, p/q) up to float32 rounding{'; argmax matching' if flags[r] else ''})")
        if token not in allowed[k]:
            return (f"row {r} ({'greedy' if flags[r] else 'sampled'}, drafts {x[r][:n]}) accepted {k} drafts and "
                    f"emitted token {token}, which the law never emits there: allowed {sorted(allowed[k])} "
                    f"({'the argmax' if flags[r] else 'the residual max(p - q, 0)' if k < n else 'the bonus p'}'s "
                    f"support)")
    return None


@dataclass(frozen=True)
class Group:
    """Draft sequence x and k accepted: the emitted token's exact distribution (normalised
    residual or bonus p) and the acceptance uniforms' law points."""
    drafts: tuple
    accepted: int
    weight: Fraction      # P(x) * P(accept k, then stop)
    dist: tuple           # Fractions over the vocabulary, summing to 1
    points: dict          # "mid" / "low" / "high" -> γ acceptance uniforms (0.5 where unused)


def law_point(lo: Fraction, hi: Fraction, where: str) -> float:
    """A float in [lo, hi) at least LAW_MARGIN (absolute, plus that fraction of the width) from
    both ends: the middle, or near the low / high end (shared with tree_spec's law)."""
    w = hi - lo
    m = LAW_MARGIN + w * LAW_MARGIN
    x = {"mid": lo + w / 2, "low": lo + m, "high": hi - m}[where]
    return min(float(x), ONE_MINUS)


@functools.lru_cache(maxsize=256)
def acceptance_groups(case: TreeCase) -> tuple[Group, ...]:
    """Every (draft sequence, number accepted) of positive probability, with the law's points:
    accepted uniforms in [0, a_i) (low = 0), the rejecting one in [a_k, 1) (high = 1 - 2^-53),
    each at least LAW_MARGIN away from a threshold (float32 rounding cannot flip them)."""
    out = []
    g = case.gamma
    for x, a, k, reach, stop, dist in _stops(case):
        total = sum(dist)
        points = {}
        for where in POINTS:
            u = [0.5] * g
            for i in range(k):
                u[i] = 0.0 if where == "low" else law_point(Fraction(0), a[i], where)
            if k < g:
                u[k] = ONE_MINUS if where == "high" else law_point(a[k], Fraction(1), where)
            points[where] = u
        out.append(Group(x, k, reach * stop, tuple(w / total for w in dist), points))
    return tuple(out)
