"""Speculative decoding verifier, batched: the contract of reference/speculative.py with no Python
loop over rows or positions, token for token equal to the reference given the same uniforms.

The reference walks each row position by position; here every decision is a tensor op over the
batch:

* only the drafted tokens' probabilities are read for acceptance: p_i(x_i) and q_i(x_i) by one
  ``gather`` each ((batch, γ) values, cast to float64), ``accept = (q > 0) & (u q < p)`` for the
  whole batch; greedy rows compare x_i with the argmax of their own positions only;
* the number accepted is the length of the leading run of accepts (a cumulative product);
* each row then needs ONE distribution, at its first rejection or its bonus position: those
  (batch, vocab) rows are gathered, the residual ``max(p - q, 0)`` is formed in float64 in place
  (the same elementwise float64 operations as the reference, so the same bits), and the token is
  found by the reference's inverse CDF with a binary search (``searchsorted``) on the cumulative
  sum instead of a vocab-wide comparison;
* the validation makes one pass each for the totals and the minima of the probabilities in
  their own dtype (float32 accumulation), instead of a float64 copy.

On CUDA (by default: ``VerifyConfig.draw`` "auto") the per-row draw of step 2 runs in one Triton
program per row instead (optimized/_speculative_triton.py): the float64 weights and their total,
the inverse-CDF token in a second pass, the argmax for greedy rows. It sums in a different order
than torch.cumsum, so it certifies each token by a rounding margin and flags the rows it cannot
certify (and empty residuals); exactly those rows are redrawn by a second kernel in the
contract's sequential order (``redraw_flagged``), on the device, so the tokens stay the
reference's and nothing is read on the host.

Plan once, run many: :class:`VerifyPlan` (the contract's optional name) decides on the host what
the one-call path decides per call (the greedy rows, the draw's path); its ``run`` reads no value
on the host and can be captured in a CUDA graph. :func:`verify` is the validation of every value,
then a plan and its run. ``python -m bench run --concept
speculative`` on a GPU checks both paths against the reference, token for token, and times them.

Every choice is an argument: :func:`verify` is the contract's function with the defaults;
:func:`verify_with` is the same call plus a keyword-only ``config`` (a frozen
:class:`VerifyConfig`: the draw's path, the kernel's block over the vocabulary, the CPU
validation's chunk size), and :func:`verify_traced` returns, with the result, a
:class:`DrawTrace` saying which path drew the tokens and which rows the kernel flagged. Nothing
is read from the environment at import; whether the Triton interpreter is on (TRITON_INTERPRET)
is asked at each call.

Numbers: docs/speculative.md (bench/cases/speculative.py).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch

from optimized._scratch import scratch

from reference.speculative import (  # noqa: F401  (Verified, PAD: same names as the reference)
    PAD,
    Inputs,
    Verified,
    check_inputs,
    check_plan_inputs,
    check_run_arguments,
    draw,
    report_bad_distributions,
    report_bad_tokens,
    run_metadata,
)

__all__ = ["verify", "VerifyPlan"]   # the contract; verify_with, verify_traced, VerifyConfig, DrawTrace are public too

# Step 2's path: "auto" = the Triton kernel (optimized/_speculative_triton.py) on CUDA when Triton
# imports and builds; a failure to build or launch is warned about once, recorded, and the torch
# ops draw from then on. "triton" = the kernel on CUDA, and on CPU tensors when the Triton
# interpreter is on (TRITON_INTERPRET=1); errors are raised; elsewhere the torch ops draw.
# "torch" = the torch ops, on every device.
DRAW_PATHS = ("auto", "triton", "torch")


@dataclass(frozen=True)
class VerifyConfig:
    """Every choice the optimized verifier makes, as one value (the defaults are :func:`verify`'s)."""
    draw: str = "auto"                    # step 2's path: one of DRAW_PATHS (comment above)
    block_v: int = 1024                   # the Triton draw: tokens one program reads per step (a power
                                          # of 2; capped at max(16, the vocabulary's next power of 2))
    validation_chunk_bytes: int = 2 << 20  # CPU validation: rows per chunk so that a chunk stays in
                                           # cache between its two passes (sum, minimum)

    def __post_init__(self):
        if self.draw not in DRAW_PATHS:
            raise ValueError(f"draw must be one of {', '.join(map(repr, DRAW_PATHS))}, got {self.draw!r}")
        if not (isinstance(self.block_v, int) and self.block_v >= 1 and self.block_v & (self.block_v - 1) == 0):
            raise ValueError(f"block_v must be a power of 2, got {self.block_v!r}")
        if not (isinstance(self.validation_chunk_bytes, int) and self.validation_chunk_bytes >= 1):
            raise ValueError(f"validation_chunk_bytes must be a positive int, got {self.validation_chunk_bytes!r}")


DEFAULT = VerifyConfig()


class DrawTrace(NamedTuple):
    """How step 2 drew the emitted tokens of one call (:func:`verify_traced`)."""
    path: str | None              # "triton" (the kernel ran), "torch", or None (an empty batch: no draw)
    flags: torch.Tensor | None    # path "triton": the kernel's (batch,) int8 flags, 1 = not certified
    redrawn: int                  # rows the exact kernel redrew after the first (the flagged ones), in one call


# The Triton draw's first build or launch failure under draw "auto": the torch ops draw from then
# on (warned once). A record, not a switch: nothing sets it but that failure.
_triton_draw_failure: list[Exception] = []


def _interpreter_on() -> bool:
    """Whether Triton runs kernels on CPU tensors (TRITON_INTERPRET=1); asked at each call."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def _sums_mins(probs: torch.Tensor, chunk_bytes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position: the total (float32 accumulation, float64 for float64) and the smallest entry;
    both NaN where a NaN is present (sum and amin propagate it). On the CPU the two passes run
    chunk by chunk of rows (about ``chunk_bytes`` each), so that the second reads the chunk from
    cache, not memory."""
    acc = torch.float64 if probs.dtype == torch.float64 else torch.float32
    per_row = max(1, probs[0].numel() * probs.element_size()) if probs.shape[0] else 1
    step = max(1, chunk_bytes // per_row) if probs.device.type == "cpu" else probs.shape[0]
    sums, mins = [], []
    for chunk in probs.split(max(1, step)) if probs.shape[0] else [probs]:
        sums.append(chunk.sum(dim=2, dtype=acc) if chunk.dtype != acc else chunk.sum(dim=2))
        mins.append(chunk.amin(dim=2) if chunk.shape[2] else chunk.sum(dim=2))
    return torch.cat(sums), torch.cat(mins).to(acc)


def _inverse_cdf(cdf: torch.Tensor, weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """reference.sampling.inverse_cdf of float64 (batch, vocab) ``weights`` >= 0 given their
    cumulative sum ``cdf``: the smallest t with C_t > v * C_last. C is non-decreasing, so the count
    of C_t <= target is a binary search."""
    target = v * cdf[:, -1]
    idx = torch.searchsorted(cdf, target[:, None], right=True).squeeze(1)
    vocab = weights.shape[1]
    over = idx >= vocab            # only when v * C_last rounds up to C_last (subnormal totals)
    if bool(over.any()):
        last = vocab - 1 - (weights.flip(1) > 0).to(torch.int8).argmax(dim=1)
        idx = torch.where(over, last, idx)
    return idx


def _scratch(name: str, shape, dtype, device) -> torch.Tensor:
    """optimized._scratch.scratch, in this module's namespace."""
    return scratch("speculative." + name, shape, dtype, device)


def _rows64(name: str, flat: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """flat[index] as a float64 scratch tensor (index_select copies whole rows)."""
    shape = (index.numel(), flat.shape[1])
    out = _scratch(name + "64", shape, torch.float64, flat.device)
    if flat.dtype == torch.float64:
        return torch.index_select(flat, 0, index, out=out)
    return out.copy_(torch.index_select(flat, 0, index, out=_scratch(name, shape, flat.dtype, flat.device)))


def _draw_torch(p: torch.Tensor, q: torch.Tensor | None, x: torch.Tensor, rows: torch.Tensor,
                k: torch.Tensor, rejected: torch.Tensor, v: torch.Tensor,
                greedy: torch.Tensor | None, scratch_prefix: str = "") -> torch.Tensor:
    """The emitted token of the batch rows ``rows`` ((n,) int64 ids; every row, or the subset the
    Triton kernel flagged), the reference's token for token: each row's one float64
    distribution -- the residual max(p_k - q_k, 0) where ``rejected`` (p_k when it has no
    positive entry), else the bonus p_k -- drawn by the inverse CDF with ``v``; rows where
    ``greedy`` (None: no greedy row) take the argmax of p_k. k, rejected, v, greedy: (n,), one per
    entry of ``rows``; p (B, γ + 1, V), q (B, γ, V) or None, x (B, γ) are the whole batch.
    ``scratch_prefix`` prefixes the names of the CPU scratch buffers (a subset keeps its own)."""
    g, vocab = p.shape[1] - 1, p.shape[2]
    n = rows.numel()
    weights = _rows64(scratch_prefix + "p", p.reshape(-1, vocab), rows * (g + 1) + k)   # (n, vocab) float64
    if greedy is not None:
        greedy_token = weights.argmax(dim=1)
    if g > 0 and bool(rejected.any()):
        if q is not None:          # residual max(p - q, 0); bonus rows subtract 0
            qk = _rows64(scratch_prefix + "q", q.reshape(-1, vocab), rows * g + k.clamp(max=g - 1))
            if not bool(rejected.all()):
                qk.index_fill_(0, (~rejected).nonzero().squeeze(1), 0.0)
            weights.sub_(qk).clamp_(min=0)
        else:                      # p - one_hot(x): only the drafted entry changes
            ri = rejected.nonzero().squeeze(1)
            at = (ri, x[rows[ri], k[ri]])
            weights[at] = (weights[at] - 1).clamp(min=0)
    # The CDF is the contract's sequential float64 sum, which torch.cumsum is on the CPU; on CUDA it
    # is a parallel scan whose last bits depend on the shape, and a token can hang on them (a row
    # of tiny entries after a large one: spec_tests/speculative's pinned case "the CDF is summed in
    # token order"). So CUDA rows are drawn on the CPU: this path runs there only as the fallback
    # of a failed Triton build or when asked for (draw "torch").
    device = p.device
    if weights.is_cuda:
        weights, v = weights.cpu(), v.cpu()
    cdf = _scratch(scratch_prefix + "cdf", (n, vocab), torch.float64, weights.device)
    torch.cumsum(weights, dim=1, out=cdf)
    empty = cdf[:, -1] == 0        # a residual with no positive entry (only through rounding):
    if bool(empty.any()):          # those rows draw from p (reference doc)
        ei = empty.nonzero().squeeze(1)
        weights[ei] = p[rows[ei.to(device)], k[ei.to(device)]].to(torch.float64).to(weights.device)
        cdf[ei] = torch.cumsum(weights[ei], dim=1)
    token = _inverse_cdf(cdf, weights, v).to(device)
    if greedy is not None:
        token = torch.where(greedy, greedy_token, token)
    return token


def _use_triton(device: torch.device, draw_path: str, *, plan: bool = False) -> bool:
    """Whether step 2 runs the Triton kernels for tensors on ``device`` (DRAW_PATHS' comment). A
    :class:`VerifyPlan` (``plan``) also takes them under "auto" on CPU tensors when the Triton
    interpreter is on, so that the spec's runs on the CPU check the path a GPU runs (the one-call
    verify keeps the torch ops there: its lossless tests verify thousands of rows per call)."""
    if draw_path == "torch" or (draw_path == "auto" and _triton_draw_failure):
        return False
    if device.type == "cuda":
        return True
    return (draw_path == "triton" or plan) and _interpreter_on()


def _draw_triton(p, q, x, k, lens, greedy, v, config: VerifyConfig):
    """Step 2 by optimized/_speculative_triton.py: ``draw_rows`` (every row, in blocks), then
    ``redraw_flagged`` (the rows it flags -- not certified equal to the reference's draw: module
    doc there -- drawn again by one program each, summing one float64 weight after another in
    token order, the contract's order; the programs of unflagged rows exit at once). Both are
    launched without reading a value on the host: no sync, capturable in a CUDA graph. Returns
    (tokens, the first kernel's flags), or None when a kernel fails to build or launch under
    draw "auto": the caller takes the torch path, now and from then on (with a warning); under
    draw "triton" the error is raised."""
    try:
        from optimized._speculative_triton import draw_rows, redraw_flagged
        token, flag = draw_rows(p, q, x, k, lens, greedy, v, block_v=config.block_v)
        redraw_flagged(p, q, x, k, lens, v, token, flag)
    except Exception as exc:
        if config.draw != "auto":
            raise
        _triton_draw_failure.append(exc)
        warnings.warn(f"optimized.speculative: the Triton draw failed ({exc!r}); using torch ops instead",
                      RuntimeWarning, stacklevel=4)
        return None
    return token, flag


def verify(target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_tokens: torch.Tensor, *,
           draft_lens=None, greedy=None, uniforms: torch.Tensor | None = None,
           generator: torch.Generator | None = None) -> Verified:
    """Same contract as :func:`reference.speculative.verify`."""
    return _verify(target_probs, draft_probs, draft_tokens, draft_lens, greedy, uniforms, generator, DEFAULT)[0]


def verify_with(target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_tokens: torch.Tensor, *,
                draft_lens=None, greedy=None, uniforms: torch.Tensor | None = None,
                generator: torch.Generator | None = None, config: VerifyConfig | None = None) -> Verified:
    """:func:`verify` with every choice given by ``config`` (a :class:`VerifyConfig`; None: the
    defaults, i.e. :func:`verify` itself). Same tokens and counts whichever path draws them; for the
    benchmarks that time the two draw paths side by side (``VerifyConfig(draw="triton")`` against
    ``VerifyConfig(draw="torch")``)."""
    return _verify(target_probs, draft_probs, draft_tokens, draft_lens, greedy, uniforms, generator,
                   _checked(config))[0]


def verify_traced(target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_tokens: torch.Tensor, *,
                  draft_lens=None, greedy=None, uniforms: torch.Tensor | None = None,
                  generator: torch.Generator | None = None,
                  config: VerifyConfig | None = None) -> tuple[Verified, DrawTrace]:
    """:func:`verify_with`, and how step 2 ran (a :class:`DrawTrace`): which path drew the tokens,
    the kernel's flags and how many rows the torch ops redrew. For tests that must know that the
    kernel ran (an explicit ``draw="triton"`` falls back to torch off CUDA without the interpreter)."""
    result, trace = _verify(target_probs, draft_probs, draft_tokens, draft_lens, greedy, uniforms, generator,
                            _checked(config))
    if trace.flags is not None:
        trace = trace._replace(redrawn=int(trace.flags.sum()))
    return result, trace


def _checked(config) -> VerifyConfig:
    if config is None:
        return DEFAULT
    if not isinstance(config, VerifyConfig):
        raise TypeError(f"config must be an optimized.speculative.VerifyConfig or None, got {type(config).__name__}")
    return config


def _verify(target_probs, draft_probs, draft_tokens, draft_lens, greedy, uniforms, generator,
            config: VerifyConfig) -> tuple[Verified, DrawTrace]:
    """The contract's verify with ``config``'s choices; the result and how step 2 ran: the
    validation of every value (a sync: the contract's errors), then one plan and its run."""
    a = check_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy, uniforms, generator)
    chunk = config.validation_chunk_bytes
    report_bad_distributions("target_probs", *_sums_mins(target_probs, chunk), a.active_p, target_probs.dtype)
    if draft_probs is not None:
        report_bad_distributions("draft_probs", *_sums_mins(draft_probs, chunk), a.active_q, draft_probs.dtype)
    report_bad_tokens(draft_tokens, a.active_q, a.vocab)
    u = a.uniforms if a.uniforms is not None else draw(generator, a.batch, a.gamma, target_probs.device)
    planned = _Planned.make(a, target_probs, draft_probs, draft_tokens, config,
                            _use_triton(target_probs.device, config.draw))
    return _run(planned, target_probs, draft_probs, draft_tokens, u)


class _Planned(NamedTuple):
    """What a plan decides once on the host (VerifyPlan): the run's metadata to compare, the
    validated per-row arguments, the greedy rows as a device index, the draw's path."""
    meta: tuple
    inputs: Inputs
    greedy_rows: torch.Tensor     # (n_greedy,) int64 on the device: the rows decoded greedily
    n_greedy: int
    triton: bool                  # step 2 by the Triton kernels (else the torch ops)
    config: VerifyConfig
    cols: torch.Tensor            # arange(γ + 1) on the device
    rows: torch.Tensor            # arange(batch) on the device

    @staticmethod
    def make(a: Inputs, target_probs, draft_probs, draft_tokens, config: VerifyConfig, triton: bool) -> "_Planned":
        device = target_probs.device
        greedy_rows = a.greedy.nonzero().squeeze(1)     # a sync, at plan time
        return _Planned(run_metadata(target_probs, draft_probs, draft_tokens), a, greedy_rows,
                        greedy_rows.numel(), triton, config, torch.arange(a.gamma + 1, device=device),
                        torch.arange(a.batch, device=device))


def _run(pl: _Planned, target_probs, draft_probs, draft_tokens, u) -> tuple[Verified, DrawTrace]:
    """The device's half of verify on a plan: no value is read on the host where step 2 runs the
    Triton kernels (every branch below is on the plan's host data); ``u`` the (batch, γ + 1)
    float64 uniforms. Returns the result and how step 2 ran (``redrawn`` left 0: counting the
    flagged rows would be a sync; verify_traced counts them)."""
    a = pl.inputs
    b, g = a.batch, a.gamma
    device = target_probs.device
    if b == 0:
        return (Verified(torch.full((0, g + 1), PAD, dtype=torch.int64, device=device),
                         torch.zeros(0, dtype=torch.int64, device=device)), DrawTrace(None, None, 0))
    p, q = target_probs.detach(), None if draft_probs is None else draft_probs.detach()
    # padding -> a harmless id; an out-of-range active token (a run's unchecked promise) -> some id
    x = torch.where(a.active_q, draft_tokens.to(torch.int64), 0).clamp_(0, a.vocab - 1)
    rows, gi = pl.rows, pl.greedy_rows

    # 1. acceptance of every draft at once, then the leading run of accepts
    if g > 0:
        if pl.n_greedy == b:       # every row greedy: the argmax of every position
            accept = x == p[:, :g].argmax(dim=2)
        else:
            px = p[:, :g].gather(2, x[:, :, None]).squeeze(2).to(torch.float64)
            if q is not None:
                qx = q.gather(2, x[:, :, None]).squeeze(2).to(torch.float64)
                accept = (qx > 0) & (u[:, :g] * qx < px)
            else:                  # q one-hot on x: q(x) = 1
                accept = u[:, :g] < px
            if pl.n_greedy:
                accept.index_copy_(0, gi, x.index_select(0, gi) == p.index_select(0, gi)[:, :g].argmax(dim=2))
        accept &= a.active_q
        k = accept.to(torch.int64).cumprod(dim=1).sum(dim=1)
    else:
        k = torch.zeros(b, dtype=torch.int64, device=device)

    # 2. one distribution per row: the residual at the first rejection, or the bonus p; its token
    drawn = _draw_triton(p, q, x, k, a.lens, a.greedy, u[:, g], pl.config) if pl.triton else None
    if drawn is not None:
        token, flags = drawn
        trace = DrawTrace("triton", flags, 0)
    else:
        token = _draw_torch(p, q, x, rows, k, k < a.lens, u[:, g], a.greedy if pl.n_greedy else None)
        trace = DrawTrace("torch", None, 0)

    # 3. accepted drafts, the emitted token, PAD
    tokens = torch.full((b, g + 1), PAD, dtype=torch.int64, device=device)
    tokens[:, :g] = torch.where(pl.cols[None, :g] < k[:, None], x, PAD)
    tokens.scatter_(1, k[:, None], token[:, None])
    return Verified(tokens, k), trace


class VerifyPlan:
    """reference.speculative.VerifyPlan (the contract: plan once on the host, run many times on
    the device) on the batched verifier. ``plan`` validates (reading ``draft_lens`` and
    ``greedy``), decides on the host what ``verify`` decides per call from values -- which rows
    are greedy (a device index for their argmax; none: no argmax at all; all: no acceptance
    test), the draw's path -- and keeps the aranges a run needs; ``run`` compares the tensors'
    metadata with the plan's and launches: torch ops and the two Triton kernels, no value read
    on the host, no sync, capturable in a CUDA graph (on CUDA, and on CPU tensors under the
    Triton interpreter; elsewhere the torch ops draw, which branch on values -- free on the CPU).
    ``config`` (a :class:`VerifyConfig`, default the defaults) as for :func:`verify_with`;
    ``VerifyConfig(draw="torch")`` on CUDA draws on the CPU (a sync: for comparisons only)."""

    def __init__(self, config: VerifyConfig | None = None):
        self._config = _checked(config)
        self._plan: _Planned | None = None

    def plan(self, target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_tokens: torch.Tensor, *,
             draft_lens=None, greedy=None) -> None:
        a = check_plan_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy)
        self._plan = _Planned.make(a, target_probs, draft_probs, draft_tokens, self._config,
                                   _use_triton(target_probs.device, self._config.draw, plan=True))

    def run(self, target_probs: torch.Tensor, draft_probs: torch.Tensor | None, draft_tokens: torch.Tensor, *,
            uniforms: torch.Tensor | None = None, generator: torch.Generator | None = None) -> Verified:
        pl = self._plan
        if pl is None:
            raise RuntimeError("run before plan: call plan(...) with this batch's metadata first")
        check_run_arguments(pl.meta, target_probs, draft_probs, draft_tokens, uniforms, generator)
        a = pl.inputs
        u = (uniforms.to(torch.float64) if uniforms is not None
             else draw(generator, a.batch, a.gamma, target_probs.device))
        return _run(pl, target_probs, draft_probs, draft_tokens, u)[0]
