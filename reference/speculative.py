"""Speculative decoding, the verifier: the specification (course 05.08-05.11; chapters 7-8).

One function is the contract::

    verify(target_probs, draft_probs, draft_tokens, *, draft_lens=None, greedy=None,
           uniforms=None, generator=None) -> Verified(tokens, num_accepted)

A cheap draft proposes γ tokens per row; the target model scores all of them in one forward pass,
which gives its next-token distribution p_0 .. p_γ at the γ + 1 positions (p_i is conditioned on
the prompt and the first i drafts). ``verify`` decides which drafts to keep, so that the emitted
tokens are distributed EXACTLY as if the target had generated them one by one.

Shapes (γ is the padded draft length, the same for the whole batch)::

    target_probs  (batch, γ + 1, vocab)  p_i(t); floating (float16/bfloat16/float32/float64)
    draft_probs   (batch, γ, vocab)      q_i(t), the distribution draft i was drawn from; floating;
                  or None: drafts without probabilities (n-gram / prompt lookup, a deterministic
                  proposer): q_i is one-hot on the draft token, so draft i is accepted with
                  probability p_i(x_i)
    draft_tokens  (batch, γ)             x_i, integer
    draft_lens    None (every row has γ drafts) or one int per row (sequence or 1-D integer
                  tensor) in [0, γ]: row r has γ_r drafts. Padding: positions i >= γ_r of
                  draft_tokens / draft_probs and i > γ_r of target_probs are ignored (never read,
                  never validated: any value, e.g. -1 tokens and zero or NaN probabilities).
                  Row r's bonus distribution is target_probs[r, γ_r].
    greedy        None / False (no greedy row), True (every row), or one bool per row (sequence
                  or 1-D bool tensor): the rows decoded at temperature 0.
    uniforms      None or (batch, γ + 1) floating in [0, 1) (cast to float64): uniforms[r, i]
                  for i < γ_r decides draft i; uniforms[r, γ] (the LAST column, whatever γ_r)
                  draws the row's recovered or bonus token. The other entries are unused.
    generator     a torch.Generator on target_probs' device, used when uniforms is None: the
                  uniforms are ``torch.rand(batch, γ + 1, generator=generator, dtype=torch.float64,
                  device=target_probs.device)`` -- one call, the only randomness (greedy rows
                  consume theirs too; nothing else is drawn, the global RNG is never touched).

Returns ``Verified(tokens, num_accepted)``: ``tokens`` (batch, γ + 1) int64 holds row r's emitted
tokens in its first ``num_accepted[r] + 1`` entries (the accepted drafts, then one recovered or
bonus token) and ``PAD`` (-1) after them; ``num_accepted`` (batch,) int64 in [0, γ_r]. Every row
emits exactly ``num_accepted + 1`` tokens.

The rule, pinned (sampled rows). With p, q cast to float64 (exactly), u_i = uniforms[r, i],
v = uniforms[r, γ]; for i = 0, 1, ..., γ_r - 1::

    accept draft x_i  iff  q_i(x_i) > 0  and  u_i * q_i(x_i) < p_i(x_i)
        (probability min(1, p_i(x_i) / q_i(x_i)) for u_i ~ U[0, 1); q_i(x_i) = 0 rejects; the
         strict < means u_i = 0 never accepts a token with p_i(x_i) = 0, and p >= q always
         accepts because u_i * q < q for u_i < 1 in float64)
    at the first rejection (position i): emit inverse_cdf(r_i, v) with the residual
        r_i = max(p_i - q_i, 0) elementwise; if r_i has no positive entry, r_i = p_i instead
    if all γ_r drafts are accepted: emit the bonus token inverse_cdf(p_{γ_r}, v)

``inverse_cdf`` is reference.sampling.inverse_cdf: the smallest t with C_t > v * C_{vocab-1},
C = cumsum in token-id order (float64), so the residual need not be normalised.

The all-zero residual: in exact arithmetic r_i = 0 means p_i <= q_i everywhere, and since both sum
to 1 that means p_i == q_i, where every draft is accepted (u q < q = p): the branch is reachable
only when rounding leaves p_i <= q_i with p_i != q_i. It then draws from p_i: a token of positive
target probability (never a zero-probability token), on an event of probability at most
sum(q_i) - sum(p_i) <= 2 * SUM_TOLERANCE (docs/speculative.md proves it harmless).

Greedy rows: accept draft i iff x_i == argmax p_i (ties to the smallest id, torch.argmax's rule);
at the first mismatch, or after γ_r matches, emit argmax of p at that position. Uniforms and
draft_probs are not used (draft_probs is still validated).

The law and the choices. Any conforming verifier must be lossless and must read the acceptance
columns of ``uniforms`` by the threshold min(1, p/q) -- up to float32 rounding: a uniform within a
relative 2^-21 of the threshold may go either way, a draft of p(x) = 0 or q(x) = 0 is never
accepted (not even by u = 0) -- emit a recovered / bonus token from the residual's / p's support
distributed as the normalised residual / p, and follow an argmax on greedy rows. What this
reference chose where the law leaves it open (checked only for implementations that declare
``TOKEN_EXACT = True``; docs/speculative.md): the emitted token is ``inverse_cdf`` of the last
uniform (vLLM: an exponential race ``argmax(residual / Exp(1))``); the acceptance test is float64
``u * q < p`` (vLLM: float32 ``p / q >= u``); greedy ties go to the smallest id; the generator is
consumed as one ``torch.rand(batch, γ + 1, float64)``.

Validation (before any random number is drawn; a rejected call leaves the generator's state
unchanged): shapes and dtypes; every active distribution (target positions i <= γ_r, draft
positions i < γ_r) finite, >= 0 and summing to 1 within ``SUM_TOLERANCE[dtype]``; active draft
tokens in [0, vocab); draft_lens in [0, γ]; uniforms in [0, 1). Errors are TypeError (wrong kind)
or ValueError (wrong value) whose message starts with the argument's name (and the [row,
position] for values). Inputs are never modified.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from reference._checks import FLOAT_DTYPES, check_as_planned, check_tensor, is_int
from reference.sampling import inverse_cdf

__all__ = ["verify"]  # the contract
__optional__ = ["VerifyPlan"]  # checked when an implementation provides it

PAD = -1  # fills tokens after a row's emitted ones

# |sum(p) - 1| allowed for a distribution of this dtype (the sum is taken in float32 or wider).
SUM_TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}


class Verified(NamedTuple):
    """What :func:`verify` returns (a plain ``(tokens, num_accepted)`` tuple is equivalent)."""
    tokens: torch.Tensor        # (batch, γ + 1) int64: emitted tokens, then PAD
    num_accepted: torch.Tensor  # (batch,) int64


class Inputs(NamedTuple):
    """Validated arguments (shared by reference and optimized)."""
    batch: int
    gamma: int
    vocab: int
    lens: torch.Tensor      # (batch,) int64 on the device
    greedy: torch.Tensor    # (batch,) bool on the device
    active_p: torch.Tensor  # (batch, γ + 1) bool: target positions read
    active_q: torch.Tensor  # (batch, γ) bool: draft positions read
    uniforms: torch.Tensor | None  # (batch, γ + 1) float64 on the device, or None (draw them)


# ----------------------------------------------------------------------------- validation
def _per_row(value, name: str, batch: int, device, *, kind: str) -> torch.Tensor:
    """``draft_lens`` (kind "int") or ``greedy`` (kind "bool") as a (batch,) tensor on device."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 1:
            raise ValueError(f"{name} must be a 1-D per-row tensor, got shape {tuple(value.shape)}")
        ok = value.dtype == torch.bool if kind == "bool" else not (
            value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool)
        if not ok:
            raise TypeError(f"{name} must hold {'bools' if kind == 'bool' else 'integers'}, got {value.dtype}")
        values = value.detach().cpu().tolist()
    elif isinstance(value, (list, tuple)):
        values = list(value)
        for i, v in enumerate(values):
            if (kind == "bool" and not isinstance(v, bool)) or (kind == "int" and not is_int(v)):
                raise TypeError(f"{name}[{i}] must be {'a bool' if kind == 'bool' else 'an int'}, got {v!r}")
    else:
        raise TypeError(f"{name} must be None, a sequence or a 1-D tensor with one value per row, "
                        f"got {type(value).__name__}")
    if len(values) != batch:
        raise ValueError(f"{name}: expected one value per row ({batch}), got {len(values)}")
    dtype = torch.bool if kind == "bool" else torch.int64
    return torch.tensor(values, dtype=dtype).reshape(batch).to(device)


def check_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy, uniforms,
                 generator) -> Inputs:
    """Types, shapes, per-row arguments and randomness (module doc); the values of the
    probabilities and tokens are checked by :func:`report_bad_distributions` and
    :func:`report_bad_tokens` at the active positions this returns."""
    a = check_plan_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy)
    return a._replace(uniforms=check_randomness(uniforms, generator, a.batch, a.gamma + 1, target_probs.device))


def check_plan_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy) -> Inputs:
    """Everything of :func:`check_inputs` but the randomness: the tensors' kinds, shapes and
    devices, and the values of ``draft_lens`` and ``greedy`` (read on the host: a device tensor is
    copied). The returned ``lens`` and ``greedy`` are fresh tensors on target_probs' device
    (never the caller's); ``uniforms`` is None."""
    check_tensor("target_probs", target_probs, ndim=3, dims="batch, γ + 1, vocab", dtypes=FLOAT_DTYPES)
    batch, positions, vocab = target_probs.shape
    if positions < 1:
        raise ValueError("target_probs: needs γ + 1 >= 1 positions (dim 1), got 0")
    if vocab < 1:
        raise ValueError("target_probs: vocab (dim 2) must be >= 1, got 0")
    gamma = positions - 1
    device = target_probs.device
    if not isinstance(draft_tokens, torch.Tensor):
        raise TypeError(f"draft_tokens must be a torch.Tensor, got {type(draft_tokens).__name__}")
    if draft_tokens.dtype.is_floating_point or draft_tokens.dtype.is_complex or draft_tokens.dtype == torch.bool:
        raise TypeError(f"draft_tokens must hold integers, got {draft_tokens.dtype}")
    if tuple(draft_tokens.shape) != (batch, gamma):
        raise ValueError(f"draft_tokens must have shape (batch, γ) = ({batch}, {gamma}) to match "
                         f"target_probs {tuple(target_probs.shape)} (γ + 1 positions), got {tuple(draft_tokens.shape)}")
    if draft_probs is not None:
        check_tensor("draft_probs", draft_probs, ndim=3, dims="batch, γ, vocab", dtypes=FLOAT_DTYPES)
        if tuple(draft_probs.shape) != (batch, gamma, vocab):
            raise ValueError(f"draft_probs must have shape (batch, γ, vocab) = ({batch}, {gamma}, {vocab}) "
                             f"to match target_probs {tuple(target_probs.shape)}, got {tuple(draft_probs.shape)}")
    for name, t in (("draft_tokens", draft_tokens), ("draft_probs", draft_probs)):
        if t is not None and t.device != device:
            raise ValueError(f"{name} is on {t.device}, target_probs on {device}: they must match")

    if draft_lens is None:
        lens = torch.full((batch,), gamma, dtype=torch.int64, device=device)
    else:
        lens = _per_row(draft_lens, "draft_lens", batch, device, kind="int")
        if batch and not bool(((lens >= 0) & (lens <= gamma)).all()):
            r = int(((lens < 0) | (lens > gamma)).nonzero()[0])
            raise ValueError(f"draft_lens must be in [0, γ] = [0, {gamma}], got {int(lens[r])} (row {r})")
    if greedy is None or isinstance(greedy, bool):
        greedy_rows = torch.full((batch,), bool(greedy), dtype=torch.bool, device=device)
    else:
        greedy_rows = _per_row(greedy, "greedy", batch, device, kind="bool")

    pos = torch.arange(positions, device=device)
    active_p = pos[None, :] <= lens[:, None]
    active_q = pos[None, :gamma] < lens[:, None]
    return Inputs(batch, gamma, vocab, lens, greedy_rows, active_p, active_q, None)


def check_uniforms_kind(uniforms, batch: int, positions: int) -> None:
    """``uniforms`` is a floating tensor of shape (batch, γ + 1): TypeError / ValueError naming
    it (its values are checked where the caller reads them)."""
    if not isinstance(uniforms, torch.Tensor):
        raise TypeError(f"uniforms must be a torch.Tensor of shape (batch, γ + 1), got {type(uniforms).__name__}")
    if not uniforms.dtype.is_floating_point:
        raise TypeError(f"uniforms must be floating, got {uniforms.dtype}")
    if tuple(uniforms.shape) != (batch, positions):
        raise ValueError(f"uniforms must have shape (batch, γ + 1) = ({batch}, {positions}), "
                         f"got {tuple(uniforms.shape)}")


def check_randomness(uniforms, generator, batch: int, positions: int, device) -> torch.Tensor | None:
    """verify's randomness: ``uniforms`` of shape (batch, γ + 1) in [0, 1) (returned as float64 on
    ``device``), or else a torch.Generator on ``device``'s type (None is returned)."""
    if uniforms is not None:
        check_uniforms_kind(uniforms, batch, positions)
        uniforms = uniforms.to(device=device, dtype=torch.float64)
        if uniforms.numel() and not bool(((uniforms >= 0) & (uniforms < 1)).all()):
            raise ValueError("uniforms must lie in [0, 1)")
    else:
        if generator is None:
            raise ValueError("generator: verify needs an explicit torch.Generator (or explicit uniforms)")
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        if generator.device.type != device.type:
            raise ValueError(f"generator is on {generator.device}, target_probs on {device}: they must match")
    return uniforms


def report_bad_distributions(name: str, sums: torch.Tensor, mins: torch.Tensor, active: torch.Tensor,
                             dtype: torch.dtype) -> None:
    """Raise ValueError for the first active position (row-major) whose total ``sums`` or
    smallest entry ``mins`` (both (batch, n), NaN where the row holds NaN) is not a probability
    vector's: not finite, a negative entry, or a total off 1 by more than SUM_TOLERANCE[dtype]."""
    tol = SUM_TOLERANCE[dtype]
    finite = torch.isfinite(sums) & torch.isfinite(mins)
    ok = finite & (mins >= 0) & ((sums - 1).abs() <= tol)
    bad = active & ~ok
    if not bool(bad.any()):
        return
    r, i = (int(v) for v in bad.nonzero()[0])
    s, m = float(sums[r, i]), float(mins[r, i])
    if not bool(finite[r, i]):
        raise ValueError(f"{name}[{r}, {i}] is not a probability vector: it holds NaN or inf")
    if m < 0:
        raise ValueError(f"{name}[{r}, {i}] has a negative entry ({m:g}): probabilities are >= 0")
    raise ValueError(f"{name}[{r}, {i}] sums to {s:.8g}, not 1 (tolerance {tol:g} for {dtype})")


def report_bad_tokens(draft_tokens: torch.Tensor, active: torch.Tensor, vocab: int) -> None:
    """ValueError for the first active draft token outside [0, vocab)."""
    bad = active & ((draft_tokens < 0) | (draft_tokens >= vocab))
    if bool(bad.any()):
        r, i = (int(v) for v in bad.nonzero()[0])
        raise ValueError(f"draft_tokens[{r}, {i}] = {int(draft_tokens[r, i])} is not a token id in [0, {vocab})")


def draw(generator: torch.Generator, batch: int, gamma: int, device) -> torch.Tensor:
    """The contract's consumption of ``generator``: one call, (batch, γ + 1) float64 U[0, 1)."""
    return torch.rand(batch, gamma + 1, generator=generator, dtype=torch.float64, device=device)


# ----------------------------------------------------------------------------- the rule
def _draw(weights: torch.Tensor, v: float) -> int:
    """reference.sampling.inverse_cdf on one row of float64 weights."""
    return int(inverse_cdf(weights[None], torch.tensor([v], dtype=torch.float64, device=weights.device))[0])


def _verify_row(p: torch.Tensor, q: torch.Tensor | None, x: list[int], u: list[float], v: float,
                greedy: bool) -> tuple[int, int]:
    """One row with n = len(x) drafts: (number accepted, emitted token). p (n + 1, vocab) and q
    (n, vocab, or None: one-hot on the drafts) float64; u the n acceptance uniforms; v the draw."""
    n = len(x)
    for i in range(n):
        if greedy:
            accepted = x[i] == int(p[i].argmax())
        else:
            pi = float(p[i, x[i]])
            qi = float(q[i, x[i]]) if q is not None else 1.0
            accepted = qi > 0 and u[i] * qi < pi
        if not accepted:
            if greedy:
                return i, int(p[i].argmax())
            qrow = q[i] if q is not None else torch.nn.functional.one_hot(
                torch.tensor(x[i]), p.shape[1]).to(torch.float64)
            residual = (p[i] - qrow).clamp(min=0)
            if not bool((residual > 0).any()):   # only through rounding (module doc)
                residual = p[i]
            return i, _draw(residual, v)
    if greedy:
        return n, int(p[n].argmax())
    return n, _draw(p[n], v)


def verify(target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_tokens: torch.Tensor, *,
           draft_lens=None, greedy=None, uniforms: torch.Tensor | None = None,
           generator: torch.Generator | None = None) -> Verified:
    """Verify γ drafted tokens per row against the target (module doc: shapes, the rule, padding).

    Returns ``Verified(tokens, num_accepted)``: tokens (batch, γ + 1) int64 (accepted drafts, one
    recovered or bonus token, then PAD = -1), num_accepted (batch,) int64. Given the same
    uniforms the result is a deterministic function of the inputs; with a generator it consumes
    exactly ``torch.rand(batch, γ + 1, dtype=float64)``.
    """
    a = check_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy, uniforms, generator)
    p = target_probs.detach().to("cpu", torch.float64)
    q = None if draft_probs is None else draft_probs.detach().to("cpu", torch.float64)
    report_bad_distributions("target_probs", p.sum(dim=2), p.amin(dim=2), a.active_p.cpu(), target_probs.dtype)
    if q is not None:
        report_bad_distributions("draft_probs", q.sum(dim=2), q.amin(dim=2), a.active_q.cpu(), draft_probs.dtype)
    report_bad_tokens(draft_tokens, a.active_q, a.vocab)
    u = a.uniforms if a.uniforms is not None else draw(generator, a.batch, a.gamma, target_probs.device)

    u, lens, greedy_rows = u.tolist(), a.lens.tolist(), a.greedy.tolist()
    drafts = draft_tokens.tolist()
    tokens, num_accepted = [], []
    for r in range(a.batch):
        n = lens[r]
        x = drafts[r][:n]
        k, token = _verify_row(p[r, :n + 1], None if q is None else q[r, :n], x, u[r][:n], u[r][a.gamma],
                               greedy_rows[r])
        tokens.append(x[:k] + [token] + [PAD] * (a.gamma - k))
        num_accepted.append(k)
    device = target_probs.device
    return Verified(torch.tensor(tokens, dtype=torch.int64).reshape(a.batch, a.gamma + 1).to(device),
                    torch.tensor(num_accepted, dtype=torch.int64).to(device))


# ------------------------------------------------------------------- plan once, run many
class VerifyPlan:
    """``verify`` in two steps, the way engines call it (FlashInfer's ``plan()`` then ``run()``):
    ``plan`` once per batch layout on the host, ``run`` once per step on the device, capturable
    in a CUDA graph and replayed after the tensors' values were updated in place.

    ``plan(target_probs, draft_probs, draft_tokens, *, draft_lens=None, greedy=None)`` reads the
    host-side metadata of the batch -- the shapes, dtypes and devices of the three tensors
    (``draft_probs`` None or a tensor), and the *values* of ``draft_lens`` and ``greedy`` (host
    sequences, or device tensors, which the plan copies to the host: a sync at plan time) -- and
    validates it completely: every error of ``verify`` that does not need the values of the
    probabilities or the tokens, with the same type naming the same argument (kinds, ranks,
    shapes, devices, vocab 0, ``draft_lens`` in [0, γ], one bool per row for ``greedy``). The
    values of the three tensors are not read: they may be the empty buffers a graph will fill.
    ``draft_lens`` and ``greedy`` are fixed by the plan: a run uses the values they had at plan
    time, whatever the caller's tensors hold since (plan again for another step's lengths or
    greedy rows). A plan that raises leaves the object as it was: its previous plan, if any,
    still runs.

    ``run(target_probs, draft_probs, draft_tokens, *, uniforms=None, generator=None) ->
    Verified`` is ``verify(target_probs, draft_probs, draft_tokens, draft_lens=<planned>,
    greedy=<planned>, uniforms=uniforms, generator=generator)`` on the tensors' values *at the
    time of the run*: the same rule, the same tokens for the same uniforms, the generator
    consumed the same way, fresh result tensors. It reads no tensor value on the host (no
    device-to-host copy, no sync) and checks only what the host knows without one: a run before
    any plan is a RuntimeError naming ``plan``; a tensor whose shape, dtype or device differs
    from the planned one is a TypeError (a dtype, a non-tensor, ``draft_probs`` None against a
    planned tensor or the reverse) or ValueError (a shape, a device) naming the argument;
    ``uniforms``: a floating tensor (TypeError) of shape (batch, γ + 1) on the planned device
    (ValueError: a run copies nothing between devices, unlike ``verify``); without uniforms a
    torch.Generator (TypeError) on the planned device's type (ValueError), None being a
    ValueError naming ``generator``. What it cannot check without a sync is the caller's
    promise, unchecked: every active distribution a probability vector (finite, >= 0, summing
    to 1), every active draft token in [0, vocab), the uniforms in [0, 1). Breaking it gives an
    unspecified result of the right shapes and dtypes (an out-of-range token is read as some
    token of the vocabulary), never an error.

    The plain way, below (:func:`verify_batch`): the module doc's rule for every row and
    position at once, on the device, in float64 -- acceptance by one gather, the number accepted
    by a cumulative product, each row's one distribution at its first rejection (or bonus) by
    ``torch.where``, and the inverse CDF in token order.
    """

    def __init__(self):
        self._plan: dict | None = None

    def plan(self, target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_tokens: torch.Tensor, *,
             draft_lens=None, greedy=None) -> None:
        a = check_plan_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy)
        self._plan = dict(meta=run_metadata(target_probs, draft_probs, draft_tokens), inputs=a)

    def run(self, target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_tokens: torch.Tensor, *,
            uniforms: torch.Tensor | None = None, generator: torch.Generator | None = None) -> Verified:
        if self._plan is None:
            raise RuntimeError("run before plan: call plan(...) with this batch's metadata first")
        a = self._plan["inputs"]
        check_run_arguments(self._plan["meta"], target_probs, draft_probs, draft_tokens, uniforms, generator)
        u = (uniforms.to(torch.float64) if uniforms is not None
             else draw(generator, a.batch, a.gamma, target_probs.device))
        return verify_batch(target_probs, draft_probs, draft_tokens, a, u)


RUN_ARGS = ("target_probs", "draft_probs", "draft_tokens")


def run_metadata(*tensors) -> tuple:
    """What a run may not change: each tensor's (shape, dtype, device), or None (draft_probs None),
    in RUN_ARGS order."""
    return tuple(None if t is None else (tuple(t.shape), t.dtype, t.device) for t in tensors)


def check_run_arguments(planned: tuple, target_probs, draft_probs, draft_tokens, uniforms, generator) -> None:
    """VerifyPlan.run's checks (its doc): the tensors against the plan's metadata, then the
    randomness; host-side metadata only, no tensor value is read."""
    for name, meta, t in zip(RUN_ARGS, planned, (target_probs, draft_probs, draft_tokens)):
        if meta is None:
            if t is not None:
                raise TypeError(f"{name} must be None, as planned, got a {type(t).__name__} (plan again)")
            continue
        check_as_planned(name, t, meta)
    (batch, positions, _), _, device = planned[0]
    if uniforms is not None:
        check_uniforms_kind(uniforms, batch, positions)
        if uniforms.device != device:
            raise ValueError(f"uniforms must be on the planned device {device}, got {uniforms.device}")
    else:
        if generator is None:
            raise ValueError("generator: run needs an explicit torch.Generator (or explicit uniforms)")
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        if generator.device.type != device.type:
            raise ValueError(f"generator is on {generator.device}, the plan on {device}: they must match")


def cumsum_in_order(weights: torch.Tensor) -> torch.Tensor:
    """The cumulative sum along dim 1 in token order, one float64 addition after another (the
    contract's C). torch.cumsum is that loop on the CPU; on a GPU it is a parallel scan whose last
    bits can differ (a token can hang on them: spec_tests/speculative's pinned case "the CDF is
    summed in token order"), so there the additions are made one token at a time, for every row
    at once: slow, and plain (the optimized verifier certifies a faster order instead)."""
    if weights.device.type == "cpu":
        return torch.cumsum(weights, dim=1)
    c = torch.empty_like(weights)
    total = torch.zeros_like(weights[:, 0])
    for t in range(weights.shape[1]):
        total = total + weights[:, t]
        c[:, t] = total
    return c


def inverse_cdf_in_order(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """reference.sampling.inverse_cdf (its formula, line for line) with C = :func:`cumsum_in_order`:
    the smallest t with C_t > v * C_last, at most the last positive weight's id."""
    c = cumsum_in_order(weights)
    target = v.to(weights.dtype) * c[:, -1]
    idx = (c <= target[:, None]).sum(dim=1)
    last = weights.shape[1] - 1 - (weights.flip(1) > 0).to(torch.int8).argmax(dim=1)
    return torch.minimum(idx, last)


def verify_batch(target_probs, draft_probs, draft_tokens, a: Inputs, u: torch.Tensor) -> Verified:
    """The module doc's rule for the whole batch at once, on the device, reading no value on the
    host (VerifyPlan.run): ``a`` the planned Inputs (lens, greedy rows, active positions), ``u``
    the (batch, γ + 1) float64 uniforms. The same float64 operations as :func:`verify`'s row walk,
    so the same tokens; padding (and a broken promise) never raises: inactive draft tokens are
    read as token 0 and out-of-range ones clamped into the vocabulary, and ``torch.where``
    keeps whatever the padding holds out of every active result."""
    b, g, vocab = a.batch, a.gamma, a.vocab
    device = target_probs.device
    rows = torch.arange(b, device=device)
    p = target_probs.detach().to(torch.float64)                                   # (b, γ + 1, vocab)
    x = torch.where(a.active_q, draft_tokens.to(torch.int64), 0).clamp(0, vocab - 1)   # (b, γ)
    if draft_probs is None:                        # q one-hot on the drafts
        q = torch.nn.functional.one_hot(x, vocab).to(torch.float64)
    else:
        q = draft_probs.detach().to(torch.float64)                                # (b, γ, vocab)
    argmax = p.argmax(dim=2)                       # greedy rows (ties to the smallest id)

    # acceptance of every draft, then the leading run of accepts
    px = p[:, :g].gather(2, x[:, :, None]).squeeze(2)
    qx = q.gather(2, x[:, :, None]).squeeze(2)
    sampled = (qx > 0) & (u[:, :g] * qx < px)
    accept = torch.where(a.greedy[:, None], x == argmax[:, :g], sampled) & a.active_q
    k = accept.to(torch.int64).cumprod(dim=1).sum(dim=1)

    # each row's one distribution: the residual at its first rejection, else the bonus p
    pk = p[rows, k]                                                               # (b, vocab)
    rejected = k < a.lens
    qk = q[rows, k.clamp(max=g - 1)] if g else torch.zeros_like(pk)
    weights = torch.where(rejected[:, None], (pk - qk).clamp(min=0), pk)
    weights = torch.where((weights > 0).any(dim=1, keepdim=True), weights, pk)    # an empty residual: p
    token = torch.where(a.greedy, argmax[rows, k], inverse_cdf_in_order(weights, u[:, g]))

    cols = torch.arange(g + 1, device=device)
    tokens = torch.full((b, g + 1), PAD, dtype=torch.int64, device=device)
    tokens[:, :g] = torch.where(cols[None, :g] < k[:, None], x, PAD)
    tokens.scatter_(1, k[:, None], token[:, None])
    return Verified(tokens, k)
