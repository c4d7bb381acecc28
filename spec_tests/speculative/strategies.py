"""Strategies for the verifier: frozen cases whose repr is valid Python.

``TreeCase``: a target and a draft over a tiny vocabulary (<= 6 tokens, γ <= 3) whose next-token
distributions depend on the prefix, every probability an integer over a power of two (so sums are
exactly 1 in float64 and the enumeration of spec_tests/speculative/oracles.py is exact). The draft
modes cover the pinned corner cases: q == p at every prefix, disjoint supports, q > 0 where p = 0
(any table with zeros), q near p, and drafts without probabilities (a deterministic proposer).

``BatchCase``: a realistic float batch (softmax of random logits, drafts drawn from q, per-row γ,
greedy rows, padding filled with garbage) for the differential and metamorphic tests.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, generator, seeds

Q_MODES = ("table", "equal", "disjoint", "mixture", "none")


def _pick(prefix: tuple, key: int, n: int) -> int:
    """Which of n table entries the prefix uses (key 0 with n = 1: the same at every prefix)."""
    return (key + sum((t + 1) * 7 ** j for j, t in enumerate(prefix))) % n


@dataclass(frozen=True)
class TreeCase:
    """Target p(. | prefix) = p_table[pick(prefix, p_key)] / den for prefixes of length <= γ;
    draft q(. | prefix) for prefixes of length < γ, by ``q_mode``:

    table / disjoint  q_table[pick(prefix, q_key)] / den  (disjoint: q_table lives on the tokens
                      every p_table entry gives 0)
    equal             q = p at every prefix
    mixture           q = (p + q_table[...] / den) / 2: a draft close to the target
    none              draft_probs=None: the draft is the deterministic proposer
                      drafts[pick(prefix, q_key)] (so q is one-hot on it, as the contract says)

    ``pad`` extra padded positions are added to the batch (filled with garbage: NaN
    probabilities, token -1), with draft_lens = γ for every row.
    """

    vocab: int
    gamma: int
    den: int
    p_table: tuple
    q_mode: str = "table"
    q_table: tuple = ()
    p_key: int = 0
    q_key: int = 0
    drafts: tuple = ()
    pad: int = 0

    def p(self, prefix: tuple) -> tuple[Fraction, ...]:
        w = self.p_table[_pick(prefix, self.p_key, len(self.p_table))]
        return tuple(Fraction(v, self.den) for v in w)

    def q(self, prefix: tuple) -> tuple[Fraction, ...]:
        """The draft distribution at ``prefix`` (one-hot on the proposer's token for mode none)."""
        if self.q_mode == "equal":
            return self.p(prefix)
        if self.q_mode == "none":
            x = self.drafts[_pick(prefix, self.q_key, len(self.drafts))]
            return tuple(Fraction(int(t == x)) for t in range(self.vocab))
        w = self.q_table[_pick(prefix, self.q_key, len(self.q_table))]
        q = tuple(Fraction(v, self.den) for v in w)
        if self.q_mode == "mixture":
            return tuple((a + b) / 2 for a, b in zip(self.p(prefix), q))
        return q


@st.composite
def dyadic(draw, vocab: int, den: int, support=None) -> tuple[int, ...]:
    """Integer weights summing to ``den`` on ``support`` (default: every token), zeros allowed
    (coinciding cut points)."""
    support = list(range(vocab)) if support is None else list(support)
    cuts = sorted(draw(st.lists(st.integers(0, den), min_size=len(support) - 1, max_size=len(support) - 1)))
    parts = [b - a for a, b in zip([0] + cuts, cuts + [den])]
    w = [0] * vocab
    for t, c in zip(support, parts):
        w[t] = c
    return tuple(w)


@st.composite
def tree_cases(draw, *, max_vocab: int = 6, max_gamma: int = 3, modes=Q_MODES, max_drafts: int = 64):
    """TreeCases with at most ``max_drafts`` draft sequences to enumerate (vocab ** γ)."""
    gamma = draw(st.integers(0, max_gamma))
    top = max_vocab
    while gamma and top > 1 and top ** gamma > max_drafts:
        top -= 1
    vocab = draw(st.integers(1, top))
    mode = draw(st.sampled_from(modes))
    if mode == "disjoint" and vocab < 2:
        mode = "table"
    den = draw(st.sampled_from((4, 8, 64, 1024)))
    support = None
    if mode == "disjoint":
        split = draw(st.integers(1, vocab - 1))
        order = draw(st.permutations(range(vocab)))
        support, other = sorted(order[:split]), sorted(order[split:])
    n_p = draw(st.integers(1, 3))
    p_table = tuple(draw(dyadic(vocab, den, support)) for _ in range(n_p))
    q_table, drafts = (), ()
    if mode in ("table", "mixture"):
        q_table = tuple(draw(dyadic(vocab, den)) for _ in range(draw(st.integers(1, 3))))
    elif mode == "disjoint":
        q_table = tuple(draw(dyadic(vocab, den, other)) for _ in range(draw(st.integers(1, 2))))
    elif mode == "none":
        drafts = tuple(draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=3)))
    return TreeCase(vocab=vocab, gamma=gamma, den=den, p_table=p_table, q_mode=mode, q_table=q_table,
                    p_key=draw(st.integers(0, 40)), q_key=draw(st.integers(0, 40)), drafts=drafts,
                    pad=draw(st.sampled_from((0, 0, 1))))


# ----------------------------------------------------------------------------- float batches
@dataclass(frozen=True)
class BatchCase:
    """A batch of ``batch`` rows, padded draft length ``gamma``, over ``vocab`` tokens.

    p = softmax(scale * randn); q = softmax(scale * randn of p + noise * randn): noise 0 is
    q == p exactly. Drafts are drawn from q (float64 inverse CDF), so acceptances happen.
    lens: per-row γ_r (empty: all γ); greedy: per-row flags (empty: none); no_q: draft_probs
    None; garbage: inactive positions hold NaN probabilities and token -1; edges: some uniforms
    are exactly 0 or the largest float64 below 1.
    """

    batch: int
    gamma: int
    vocab: int
    dtype: str
    seed: int
    scale: float = 2.0
    noise: float = 1.0
    lens: tuple = ()
    greedy: tuple = ()
    no_q: bool = False
    garbage: bool = False
    edges: bool = False

    def tensors(self, device="cpu") -> dict:
        """The keyword arguments of a verify call (uniforms included)."""
        g = generator(self.seed)
        b, n, v = self.batch, self.gamma, self.vocab
        logits = torch.randn(b, n + 1, v, generator=g, dtype=torch.float64) * self.scale
        p = torch.softmax(logits, dim=2)
        q = torch.softmax(logits[:, :n] + self.noise * torch.randn(b, n, v, generator=g, dtype=torch.float64), dim=2)
        dt = DTYPES[self.dtype]
        p, q = p.to(dt), q.to(dt)
        c = q.to(torch.float64).cumsum(2)
        draw_u = torch.rand(b, n, 1, generator=g, dtype=torch.float64) * c[:, :, -1:]
        tokens = (c <= draw_u).sum(2).clamp(max=v - 1)
        u = torch.rand(b, n + 1, generator=g, dtype=torch.float64)
        if self.edges:
            pick = torch.rand(b, n + 1, generator=g)
            u = torch.where(pick < 0.15, torch.zeros_like(u), u)
            u = torch.where(pick > 0.85, torch.full_like(u, 1 - 2.0 ** -53), u)
        lens = torch.tensor(self.lens, dtype=torch.int64) if self.lens else torch.full((b,), n, dtype=torch.int64)
        if self.garbage:
            pos = torch.arange(n + 1)
            p = p.masked_fill((pos[None, :] > lens[:, None])[:, :, None], math.nan)
            q = q.masked_fill((pos[None, :n] >= lens[:, None])[:, :, None], math.nan)
            tokens = tokens.masked_fill(pos[None, :n] >= lens[:, None], -1)
        return dict(target_probs=p.to(device), draft_probs=None if self.no_q else q.to(device),
                    draft_tokens=tokens.to(device),
                    draft_lens=list(self.lens) if self.lens else None,
                    greedy=list(self.greedy) if self.greedy else None, uniforms=u.to(device))

    def with_(self, **changes) -> "BatchCase":
        return replace(self, **changes)


@st.composite
def batch_cases(draw, *, max_batch: int = 6, max_gamma: int = 5, max_vocab: int = 40,
                dtypes=("float32", "float64", "bfloat16", "float16"), greedy: bool = True):
    batch = draw(st.integers(1, max_batch))
    gamma = draw(st.integers(0, max_gamma))
    lens = ()
    if draw(st.booleans()):
        lens = tuple(draw(st.lists(st.integers(0, gamma), min_size=batch, max_size=batch)))
    flags = ()
    if greedy and draw(st.booleans()):
        flags = tuple(draw(st.lists(st.booleans(), min_size=batch, max_size=batch)))
    return BatchCase(batch=batch, gamma=gamma, vocab=draw(st.integers(1, max_vocab)),
                     dtype=draw(st.sampled_from(dtypes)), seed=draw(seeds),
                     scale=draw(st.sampled_from((0.5, 2.0, 5.0))),
                     noise=draw(st.sampled_from((0.0, 0.3, 1.0, 3.0))), lens=lens, greedy=flags,
                     no_q=draw(st.booleans()), garbage=draw(st.booleans()), edges=draw(st.booleans()))
