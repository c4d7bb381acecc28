"""Steps 1-2 of the pinned order for every schedule: validation (the reference's own checks, so
every error and its message are the reference's), penalties and logit bias, batched; and the
reference's errors for a bad row (NaN, +inf, every token masked) found later by a schedule."""
from __future__ import annotations

import math

import torch

from reference._checks import compute_dtype
from reference.sampling import Rows, SamplingParams, check_logits, check_sampling_inputs

_FLOAT_FIELDS = ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")


def _plain_scalar_rows(logits, params):
    """The common case -- every field one plain Python number, in range, no logit_bias, no seen
    tokens -- resolved without the reference's per-row Python loops (~0.5-1 ms at batch 256,
    more than the GPU sampler itself): the same Rows the reference's validation builds (same
    float32 rounding of the values, one host-to-device copy per dtype). Anything else -- a
    per-row value, a tensor, a bad value -- returns None and the reference's validation runs (so
    every error and its message stay the reference's)."""
    if params is None:
        params = SamplingParams()
    try:
        values = [getattr(params, n) for n in _FLOAT_FIELDS]
        top_k = params.top_k
        if params.logit_bias is not None:
            return None
    except AttributeError:
        return None
    if type(top_k) is not int or any(type(v) not in (int, float) for v in values):
        return None
    temperature, top_p, min_p, repetition, presence, frequency = values
    if not (math.isfinite(temperature) and temperature >= 0 and top_k >= 0 and 0 < top_p <= 1
            and 0 <= min_p <= 1 and math.isfinite(repetition) and repetition > 0
            and math.isfinite(presence) and math.isfinite(frequency)):
        return None
    batch = logits.shape[0]
    dtype = compute_dtype(logits.dtype)
    floats = torch.tensor(values, dtype=dtype)[:, None].expand(len(values), batch).contiguous().to(logits.device)
    top_k_rows = torch.full((batch,), top_k, dtype=torch.int64).to(logits.device)
    f = dict(zip(_FLOAT_FIELDS, floats.unbind(0)))
    host = {n: [v] * batch for n, v in zip(_FLOAT_FIELDS, values)}
    host["top_k"] = [top_k] * batch
    rows = Rows(f["temperature"], top_k_rows, f["top_p"], f["min_p"], f["repetition_penalty"],
                f["presence_penalty"], f["frequency_penalty"], None, host)
    return dtype, rows, None, None


def validate(logits, params, prompt_tokens, output_tokens):
    """The reference's validation (its checks, so every error and message is the reference's),
    with the plain-scalar fast path: returns (dtype, rows, prompt, output) as
    :func:`reference.sampling.check_sampling_inputs` does. Reads no logit value."""
    plain = None
    if prompt_tokens is None and output_tokens is None:
        check_logits(logits)
        plain = _plain_scalar_rows(logits, params)
    return plain or check_sampling_inputs(logits, params, prompt_tokens, output_tokens)


def penalty_tensors(rows: Rows, prompt, output, batch: int, vocab: int, dtype, device):
    """Step 1's device tensors (seen, counts, present), each (batch, vocab), from the validated
    token lists; None when no penalty changes anything (no seen token, or every penalty at its
    neutral value): the host decides from the parameters alone."""
    h = rows.host
    seen_tokens = prompt is not None or output is not None       # checked first: the common case
    penalised = seen_tokens and (any(v != 1 for v in h["repetition_penalty"]) or any(   # skips the
        v != 0 for v in h["presence_penalty"] + h["frequency_penalty"]))              # per-row scan
    if not penalised:
        return None
    seen = torch.zeros(batch, vocab + 1, dtype=torch.bool, device=device)
    counts = torch.zeros(batch, vocab + 1, dtype=dtype, device=device)
    if prompt is not None:
        seen.scatter_(1, _padded(prompt, vocab, device), True)
    if output is not None:
        ids = _padded(output, vocab, device)
        counts.scatter_add_(1, ids, torch.ones(ids.shape, dtype=dtype, device=device))
    counts = counts[:, :vocab]
    present = counts > 0
    return seen[:, :vocab] | present, counts, present


def apply_steps_1_2(x: torch.Tensor, rows: Rows, penalty) -> torch.Tensor:
    """Penalties (``penalty``: :func:`penalty_tensors`' result or None) and logit bias on x in
    the compute dtype, batched, device ops only (a plan's run calls it too)."""
    if penalty is not None:
        seen, counts, present = penalty
        repetition = rows.repetition_penalty[:, None]
        x = torch.where(seen, torch.where(x > 0, x / repetition, x * repetition), x)
        x = x - rows.frequency_penalty[:, None] * counts - rows.presence_penalty[:, None] * present.to(x.dtype)
    if rows.logit_bias is not None:
        x = x + rows.logit_bias
    return x


def prepare(logits, params, prompt_tokens, output_tokens):
    """Validate (shared checks of the reference) and apply penalties and bias, batched. Returns
    (x, rows): x in the compute dtype, rows the resolved per-row parameters."""
    dtype, rows, prompt, output = validate(logits, params, prompt_tokens, output_tokens)
    batch, vocab = logits.shape
    x = logits.detach()
    x = x if x.dtype == dtype else x.to(dtype)
    return apply_steps_1_2(x, rows, penalty_tensors(rows, prompt, output, batch, vocab, dtype, x.device)), rows


def _padded(lists, vocab, device):
    """Ragged token lists -> (batch, L) int64 padded with ``vocab`` (a dropped extra column)."""
    lengths = {len(t) for t in lists}
    if len(lengths) == 1 and 0 not in lengths:
        return torch.stack(lists).to(device)
    width = max(lengths | {1})
    out = torch.full((len(lists), width), vocab, dtype=torch.int64)
    for r, t in enumerate(lists):
        out[r, :len(t)] = t
    return out.to(device)


def raise_bad_rows(kind: torch.Tensor) -> None:
    """``kind`` per row: 0 fine, 1 NaN, 2 +inf, 3 all -inf (the reference's messages)."""
    bad = (kind == 1).nonzero()
    if bad.numel():
        raise ValueError(f"logits contain NaN (row {int(bad[0])})")
    bad = (kind == 2).nonzero()
    if bad.numel():
        raise ValueError(f"logits row {int(bad[0])} is +inf after penalties and logit_bias "
                         "(+inf logits, or a penalty/bias overflowed)")
    bad = (kind == 3).nonzero()
    if bad.numel():
        raise ValueError(f"logits row {int(bad[0])}: every token is masked (all -inf after "
                         "logit_bias and penalties); nothing can be sampled")


def row_status(m: torch.Tensor) -> torch.Tensor:
    """From each row's max (NaN propagates into it): 0 fine, 1 NaN, 2 +inf, 3 all -inf."""
    return (torch.isnan(m).to(torch.int8) + 2 * torch.isposinf(m).to(torch.int8)
            + 3 * torch.isneginf(m).to(torch.int8))
