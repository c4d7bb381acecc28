"""Independent sampling oracle: the pinned definition written per row, in float64, sort-free.

Each filter is computed from its definition: top-k keeps t iff #{j : z_j > z_t} < k; top-p keeps
t iff the renormalised mass of the survivors strictly above z_t is < p; min-p keeps exp(z_t) >=
min_p. The counts and masses "strictly above z_t" come from a (vocab x vocab) comparison
(``gt[t, j] = z_j > z_t``) for vocabularies up to ``BRUTE_MAX``, never by sorting; above that
(the realistic-vocabulary and structure tests) from a float64 ``searchsorted`` on the sorted
values with suffix sums, which is still the definition (everything strictly greater), not the
reference's exclusive-cumsum-at-tie-leaders.

The oracle also says when a case is *ambiguous*: a decision that float32 rounding of the
implementation could flip (two processed logits closer than the rounding error but not equal, a
top-p mass or a min-p ratio within rounding of its threshold). Tests skip such cases
(``assume``): the contract leaves them to the implementation. ``ambiguous_rows`` says it per row,
for the tests on large batches, which compare the clear rows only.
"""
from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass

import torch

from conformance.strategies import DTYPES
from spec_tests.sampling.strategies import SamplingCase

REL = 2e-7      # relative rounding budget per processed logit (about 3 float32 ulps)
BRUTE_MAX = 256  # vocabularies up to this use the (vocab x vocab) comparison


@dataclass
class SamplingOracle:
    probs: torch.Tensor         # (batch, vocab) float64
    keep: torch.Tensor          # (batch, vocab) bool: the kept set (before underflow)
    ambiguous: str | None       # why the case is ambiguous, or None
    ambiguous_rows: tuple = ()  # per row: True where a decision of that row is ambiguous
    z_tol: tuple = ()           # per row: the rounding budget of z = (x - max x) / T (0 if greedy)


def _greater_than(z: torch.Tensor, chunk: int = 1024):
    """Yield (rows, gt) with gt[i, j] = z_j > z_rows[i], in row chunks (sort-free)."""
    for s in range(0, z.numel(), chunk):
        yield slice(s, s + chunk), z[None, :] > z[s:s + chunk, None]


def _count_above(z: torch.Tensor) -> torch.Tensor:
    """#{j : z_j > z_t} for every t."""
    if z.numel() <= BRUTE_MAX:
        out = torch.zeros(z.numel(), dtype=torch.int64)
        for rows, gt in _greater_than(z):
            out[rows] = gt.sum(1)
        return out
    zs = torch.sort(z).values
    return z.numel() - torch.searchsorted(zs, z, right=True)


def _mass_above(z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """sum{w_j : z_j > z_t} for every t (float64)."""
    if z.numel() <= BRUTE_MAX:
        out = torch.zeros(z.numel(), dtype=torch.float64)
        for rows, gt in _greater_than(z):
            out[rows] = gt.to(torch.float64) @ w
        return out
    zs, order = torch.sort(z)
    suffix = torch.cat([torch.flip(torch.cumsum(torch.flip(w[order], [0]), 0), [0]),
                        torch.zeros(1, dtype=torch.float64)])          # suffix[i] = sum_{i' >= i}
    return suffix[torch.searchsorted(zs, z, right=True)]


@functools.lru_cache(maxsize=512)
def sampling_oracle(case: SamplingCase) -> SamplingOracle:
    """The distribution of ``case`` by the definition (module doc of reference/sampling.py)."""
    logits = case.logits(dtype=DTYPES[case.dtype]).to(torch.float64)
    biases = case.bias_dicts()
    prompts, outputs = case.prompt_tokens, case.output_tokens
    probs = torch.zeros(case.batch, case.vocab, dtype=torch.float64)
    keep_all = torch.zeros(case.batch, case.vocab, dtype=torch.bool)
    reasons, z_tol = [], []
    for r in range(case.batch):
        reason, tol = _row(case, r, logits[r].clone(), biases, prompts, outputs, probs, keep_all)
        reasons.append(reason)
        z_tol.append(tol)
    why = next((w for w in reasons if w), None)
    return SamplingOracle(probs, keep_all, why, tuple(w is not None for w in reasons), tuple(z_tol))


def _row(case, r, x, biases, prompts, outputs, probs, keep_all) -> tuple[str | None, float]:
    """Fill probs[r] and keep_all[r]; return (why row r is ambiguous or None, its z budget)."""
    why = None
    mag = x.abs().clone()
    seen = set(prompts[r] if prompts else []) | set(outputs[r] if outputs else [])
    counts = Counter(outputs[r] if outputs else [])
    rp, pres, freq = (case.row(n, r) for n in ("repetition_penalty", "presence_penalty", "frequency_penalty"))
    for t in seen:
        x[t] = x[t] / rp if x[t] > 0 else x[t] * rp
        c = counts.get(t, 0)
        x[t] = x[t] - freq * c - pres * (1 if c else 0)
        mag[t] += abs(freq) * c + abs(pres)
    for t, b in (biases[r] if biases else {}).items():
        x[t] = x[t] + b
        mag[t] += abs(b) if math.isfinite(b) else 0.0
    finite = torch.isfinite(x)
    m = float(x[finite].max())
    err = REL * (1.0 + mag + abs(m))                # rounding budget of each processed logit
    tol_x = float(err[finite].max())
    temp = case.row("temperature", r)
    if temp == 0:
        first = int(torch.nonzero(x == m)[0])
        probs[r, first] = 1.0
        keep_all[r, first] = True
        if bool(((x < m) & (x >= m - err - REL * (1.0 + 2 * abs(m)))).any()):
            why = f"row {r}: a logit within rounding of the max (greedy)"
        return why, 0.0
    z = (x - m) / temp
    tol_z = 2 * tol_x / temp       # covers z = x / T - max(x / T) too (transformers', vLLM's order)
    e = torch.exp(z)
    vocab = case.vocab
    k, p, mp = case.row("top_k", r), case.row("top_p", r), case.row("min_p", r)
    keep_k = torch.ones(vocab, dtype=torch.bool)
    if 0 < k < vocab:
        keep_k = _count_above(z) < k                 # #{j : z_j > z_t} < k
        why = why or _straddles(x, keep_k, finite, err, f"row {r}: a near-tie across the top-k cut")
    keep_m = e >= mp
    keep_p = torch.ones(vocab, dtype=torch.bool)
    if p < 1:
        ek = torch.where(keep_k, e, torch.zeros_like(e))
        above = _mass_above(z, ek) / ek.sum()        # mass strictly above z_t
        keep_p = above < p
        # within rounding of p: |above - p| <= 1e-5 + 2 tol_z, and p inside the range the mass can
        # reach when every z moves by tol_z (its odds change by at most exp(2 tol_z): a mass of
        # exactly 0 or 1 stays put even when a temperature just above 0 makes tol_z large)
        g = math.exp(min(2 * tol_z, 700.0))
        lo, hi = above / (above + (1 - above) * g), above * g / (above * g + (1 - above))
        slack = 1e-5 + min(tol_z, 1e-5)
        near = (keep_k & keep_m & ((above - p).abs() <= 1e-5 + 2 * tol_z)   # only where min-p keeps it
                & (lo - slack <= p) & (p <= hi + slack) & (above > 0))    # nothing above: 0 < p exactly
        if bool(near.any()):
            why = why or f"row {r}: a top-p mass within rounding of p"
    if mp > 0:
        near = keep_k & keep_p & finite & (z != 0) & ((z - math.log(mp)).abs() <= tol_z + 1e-6)  # z = 0 is exact
        if bool(near.any()):
            why = why or f"row {r}: a min-p ratio within rounding of min_p"
    keep = keep_k & keep_p & keep_m & finite
    why = why or _straddles(x, keep, finite, err, f"row {r}: a near-tie across the final cut")
    w = torch.where(keep, e, torch.zeros_like(e))
    probs[r] = w / w.sum()
    keep_all[r] = keep
    return why, tol_z


def _straddles(x, keep, finite, err, why):
    """``why`` if the lowest kept and the highest dropped finite logit are distinct but closer
    than their two rounding budgets (rounding could reorder them or merge them into a tie)."""
    dropped = finite & ~keep
    if not bool(dropped.any()) or not bool(keep.any()):
        return None
    a = torch.where(keep, x, torch.full_like(x, math.inf)).argmin()
    b = torch.where(dropped, x, torch.full_like(x, -math.inf)).argmax()
    gap = float(x[a] - x[b])
    return why if 0 < gap <= float(err[a] + err[b]) else None


def step_clearance(vocab: int) -> float:
    """How far a uniform must be from every step of the float64 oracle CDF for its inverse-CDF
    token to be decided: 1e-6 plus a bound on float32 cumsum rounding over ``vocab`` terms
    (4 sqrt(vocab) ulps of 1)."""
    return 1e-6 + 4 * math.sqrt(vocab) * 2.0 ** -24


def assert_clear_of_rounding(logits: torch.Tensor, params, uniforms: torch.Tensor | None = None) -> None:
    """For a FIXED-input comparison of two samplers whose float32 arithmetic differs (another exp,
    another summation order: their bits change with the code and with the CPU's vector width):
    every decision of every row is clear of rounding (the oracle says no row is ambiguous) and,
    given ``uniforms``, each is clear of every step of the oracle's CDF. Then the two samplers must
    agree exactly, on any CPU. ``params``: a SamplingParams of the four filters with scalar or
    per-row list fields (no penalties or bias)."""
    b, vocab = logits.shape
    fields = {}
    for name in ("temperature", "top_k", "top_p", "min_p"):
        value = getattr(params, name)
        values = list(value) if isinstance(value, (list, tuple)) else [value] * b
        fields[name] = tuple(int(v) if name == "top_k" else float(v) for v in values)
    assert params.logit_bias is None and (params.repetition_penalty, params.presence_penalty,
                                          params.frequency_penalty) == (1.0, 0.0, 0.0), "filters only"
    case = SamplingCase(b, vocab, "float32", 0, kind="explicit",
                        values=tuple(logits.detach().cpu().double().flatten().tolist()), **fields)
    oracle = sampling_oracle(case)
    assert oracle.ambiguous is None, f"fixed inputs not clear of rounding: {oracle.ambiguous}"
    if uniforms is not None:
        u = uniforms.detach().cpu().double()
        near = (oracle.probs.cumsum(dim=1) - u[:, None]).abs().min(dim=1).values
        rows = (near <= step_clearance(vocab)).nonzero().flatten().tolist()
        assert not rows, f"fixed uniforms within rounding of a CDF step in rows {rows}"
