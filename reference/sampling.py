"""Sampling the next token: the specification (course 01.05; chapter 1).

Two functions are the contract:

    sampling_probs(logits, params, *, prompt_tokens=None, output_tokens=None) -> probs (batch, vocab)
    sample(logits, params, generator=None, *, prompt_tokens=None, output_tokens=None,
           uniforms=None) -> tokens (batch,) int64

and, optional (checked when provided), :class:`SamplerPlan`: ``sample`` as ``plan`` (host
metadata, validation) then ``run`` (device only, capturable in a CUDA graph).

``sampling_probs`` returns the exact distribution ``sample`` must draw from; the tests hold every
sampler to it (its support exactly, for any uniforms; its frequencies statistically, with a
generator). How a token is drawn from it is the reference's choice (below).

Pinned order, per row (each row has its own parameters, see :class:`SamplingParams`)::

    x  = logits, upcast to float32 (float64 stays float64)
    1. penalties   seen = tokens in prompt_tokens[r] or output_tokens[r]; c_t = count of t in output_tokens[r]
                   x_t = x_t / r if x_t > 0 else x_t * r        for t in seen   (repetition_penalty r)
                   x_t = x_t - frequency_penalty * c_t - presence_penalty * [c_t > 0]
    2. logit bias  x_t = x_t + logit_bias[t]                    (-inf bans a token)
    3. temperature z_t = (x_t - max_t x_t) / T                  (T = 0: greedy, see below)
    4. top-k       keep t iff #{j : z_j > z_t} < k              (ties at the k-th value are KEPT)
    5. top-p       on the top-k survivors, renormalised: q = softmax(z over survivors);
                   keep t iff sum{q_j : z_j > z_t} < p          (the token that crosses p is KEPT;
                                                                 tied tokens are kept or dropped together)
    6. min-p       keep t iff exp(z_t) >= min_p                 (= q_t >= min_p * max q: relative to
                                                                 the most likely token, after temperature)
    probs = softmax(z over the kept tokens); every other token has probability exactly 0.

top_k = 0 (or >= vocab), top_p = 1 and min_p = 0 disable their stage. ``temperature = 0`` means
greedy: probs is one-hot at argmax of x after steps 1-2, ties broken toward the SMALLEST token id
(torch.argmax's rule); top-k/top-p/min-p are then moot (the argmax survives them all). Only
T == 0 is greedy: any T > 0, however small (1e-6, 1e-38), samples (a tie at the max stays a tie),
and since x - max x <= 0, z never overflows (dividing the raw logits by a tiny T would). A huge T
flattens the kept set toward uniform; nothing clamps T.

Omitted arguments are their documented defaults: ``params`` omitted = None = ``SamplingParams()``
= every field at its default (temperature 1, top_k 0, top_p 1, min_p 0, repetition_penalty 1,
presence/frequency penalties 0, no logit_bias) = plain softmax of the logits;
``prompt_tokens`` / ``output_tokens`` omitted = None = no token seen (the penalties then change
nothing). ``sample`` has no default randomness: it needs ``generator`` or ``uniforms``.

Boundaries: batch 0 is legal (probs (0, vocab), tokens (0,) int64, nothing drawn); vocab >= 1
(vocab 1 gives that token probability 1 under every setting); top_p just above 0 keeps the top
tie group; min_p = 1 keeps exactly the maxima; top_k = 1 keeps every tied maximum.
All three filters keep an upper set of z, so the kept set is always {t : z_t >= v} for one
threshold v per row: a tie is never split. Boundary decisions are made in the compute dtype
(float32 for float16/bfloat16/float32 logits); a token whose decision flips within that rounding
(e.g. sum{q_j : z_j > z_t} equal to p up to float32 error) may go either way.

Penalties follow vLLM and the OpenAI API: the repetition penalty (HF/CTRL style: divide positive
logits, multiply the others) applies to every token seen in the prompt OR the output; the
frequency and presence penalties count only OUTPUT tokens. The caller passes the tokens seen so
far per row: ``prompt_tokens`` / ``output_tokens`` are None, a sequence of ``batch`` token-id
sequences (lists or 1-D integer tensors, ragged allowed), or one 2-D INTEGER tensor (batch, L) (a
float, bool or 3-D tensor is a TypeError); every id in [0, vocab).

The draw (the law). ``sample`` draws one token per row from ``sampling_probs``:
- every token it returns, for any generator or uniforms (u = 0 and u just below 1 included), is an
  int64 id with positive probability under ``sampling_probs``. So a greedy row (T = 0) returns its
  argmax, ties to the SMALLEST id: the one-hot is that row's distribution, so this tie rule is law
  here, not a choice;
- with a ``generator``, the tokens follow ``sampling_probs`` and the rows are independent draws;
  the generator is the only randomness: the same generator state gives the same tokens, each call
  draws afresh from the generator's current state (a decode loop must not repeat itself), and the
  global RNG is never touched;
- with ``uniforms`` (shape (batch,), values in [0, 1)), the tokens are a deterministic function of
  the inputs: the same u always gives the same tokens (a failing draw can be replayed);
- no random number is drawn before validation passes (a rejected call leaves the generator's
  state unchanged), and batch 0 draws nothing.

Choices the law leaves open (the reference's draw; checked only at token-exact: the bundled
implementations, their mutants and a submission that declares ``TOKEN_EXACT = True``; any other
sampler is told "law ✓, token-exact ✗ (<the choice>)", not failed):
- the token for a uniform u is the inverse CDF in token-id order: the smallest t with
  C_t > u * C_{vocab-1}, where C = cumsum(probs) in token-id order (the last token with positive
  probability if rounding leaves none: u = 1 - 2^-40 rounds to 1.0 in float32, and a float32 C may
  end below it). So u = 0 draws the first token with positive probability, a grid of u lands on
  each token in proportion to its probability, and row r's token depends on u_r alone. Other
  lawful uses of u: the inverse CDF in another order (e.g. by descending probability), an
  exponential race whose exponentials are derived from u.
- the generator is consumed exactly as :func:`draw_uniforms` does, once per call after validation:
  ``torch.rand(batch, generator=generator, dtype=torch.float64, device=logits.device)`` (greedy
  rows included; nothing else is drawn), and that draw is used as ``uniforms``: so
  ``sample(..., generator=g)`` == ``sample(..., uniforms=<that draw from a generator in g's
  state>)``, and g ends in the state that draw leaves it in. Lawful draws that differ: vLLM's and
  SGLang's exponential race ``argmax(probs / Exponential(1))`` (the Gumbel-max trick),
  FlashInfer's rejection-based top-k/top-p sampling, ``torch.multinomial`` (transformers'
  ``generate()``), float32 uniforms (``torch.rand``'s default dtype).

Errors: malformed arguments raise TypeError/ValueError naming the argument (``top_p``,
``temperature``, ``logits``, ...); a bad value in a per-row parameter also names its row
(``row r``), a bad per-row bias or token sequence its index (``logit_bias[r]``,
``prompt_tokens[r]``, ``output_tokens[r]``; the FIRST offending row, also for a 2-D token tensor
whose rows are checked at once), and logits with no vocabulary (vocab 0) say
``vocab``. NaN logits ("logits contain NaN (row r)"), +inf logits or a penalty or bias that
overflows to +inf ("logits row r ... +inf"), and a row with every token masked, all -inf after
bias and penalties ("logits row r: every token is masked"), raise ValueError naming the row.
When several logits rows are bad, which of them the error names is left open (a +inf logit that a
-inf bias bans is NaN after the bias, and may be reported as NaN).
Nothing is modified in place and no random number is drawn before validation passes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple

import torch

from reference._checks import FLOAT_DTYPES, check_as_planned, check_tensor, compute_dtype, is_int, is_real

__all__ = ["sampling_probs", "sample"]  # the contract: what an implementation must provide
__optional__ = ["SamplerPlan"]  # checked when an implementation provides them

Rowwise = Any  # a Python number, a sequence of batch numbers, or a 0-d / 1-d tensor


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling parameters. Every field is one value for all rows or one per row
    (a sequence or 1-D tensor of length batch). Defaults disable every stage (plain softmax).

    ``top_k`` is an int (a bool is not); as a tensor it has an integer dtype, even when it holds no
    value (batch 0: ``torch.tensor([])`` is float32 and rejected). Likewise the real-valued fields
    (temperature, top_p, min_p, the penalties) as tensors hold real numbers: a bool or complex
    tensor is a TypeError, also when it holds no value.

    logit_bias: None, a ``{token_id: bias}`` dict for every row, a sequence of ``batch`` such
    dicts (or None), or a dense float tensor of shape (vocab,) or (batch, vocab). Biases are
    finite or -inf (a ban); NaN and +inf are rejected.
    """

    temperature: Rowwise = 1.0
    top_k: Rowwise = 0
    top_p: Rowwise = 1.0
    min_p: Rowwise = 0.0
    repetition_penalty: Rowwise = 1.0
    presence_penalty: Rowwise = 0.0
    frequency_penalty: Rowwise = 0.0
    logit_bias: Any = None


class Rows(NamedTuple):
    """:class:`SamplingParams` resolved for a batch: one tensor entry per row on the logits'
    device (float fields in the compute dtype, top_k as int64) plus host copies used to pick code
    paths without a device sync."""

    temperature: torch.Tensor
    top_k: torch.Tensor
    top_p: torch.Tensor
    min_p: torch.Tensor
    repetition_penalty: torch.Tensor
    presence_penalty: torch.Tensor
    frequency_penalty: torch.Tensor
    logit_bias: torch.Tensor | None       # (batch, vocab) in the compute dtype, or None
    host: dict                            # field -> list of Python numbers


# ----------------------------------------------------------------------------- validation
def check_logits(logits) -> None:
    """Type, rank and dtype of ``logits`` (values are checked after penalties and bias)."""
    check_tensor("logits", logits, ndim=2, dims="batch, vocab", dtypes=FLOAT_DTYPES)
    if logits.shape[1] == 0:
        raise ValueError("logits: vocab (dim 1) must be >= 1")


def _per_row(value, name: str, batch: int, *, integer: bool) -> list:
    """One Python number per row from a scalar, a sequence or a tensor; TypeError/ValueError name it."""
    if isinstance(value, torch.Tensor):
        if value.dim() > 1:
            raise ValueError(f"{name} must be a scalar or a 1-D per-row tensor, got shape {tuple(value.shape)}")
        if integer and (value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool):
            raise TypeError(f"{name} must hold integers, got a {value.dtype} tensor")
        if not integer and (value.dtype.is_complex or value.dtype == torch.bool):
            raise TypeError(f"{name} must hold real numbers, got a {value.dtype} tensor")
        value = value.item() if value.dim() == 0 else value.tolist()
    if isinstance(value, (list, tuple)):
        if len(value) != batch:
            raise ValueError(f"{name}: expected one value per row ({batch}), got {len(value)}")
        values = list(value)
    else:
        values = [value] * batch
    for i, v in enumerate(values):
        if integer and not is_int(v):
            raise TypeError(f"{name} must be an int (row {i}), got {v!r}")
        if not integer and not is_real(v):
            raise TypeError(f"{name} must be a real number (row {i}), got {v!r}")
    return values


def _check_range(values: list, name: str, ok, rule: str) -> None:
    for i, v in enumerate(values):
        if not ok(v):
            raise ValueError(f"{name} must be {rule}, got {v!r} (row {i})")


def _dense_bias(bias, batch: int, vocab: int, dtype, device) -> torch.Tensor | None:
    """logit_bias as a (batch, vocab) tensor, validated (module doc / SamplingParams)."""
    if bias is None:
        return None
    if isinstance(bias, torch.Tensor):
        if not bias.dtype.is_floating_point:
            raise TypeError(f"logit_bias must be a floating tensor, got {bias.dtype}")
        if bias.shape not in ((vocab,), (batch, vocab)):
            raise ValueError(f"logit_bias must have shape (vocab,) = ({vocab},) or (batch, vocab) = "
                             f"({batch}, {vocab}), got {tuple(bias.shape)}")
        if bool(torch.isnan(bias).any()) or bool(torch.isposinf(bias).any()):
            raise ValueError("logit_bias must be finite or -inf (no NaN, no +inf)")
        return bias.to(device=device, dtype=dtype).expand(batch, vocab)
    if isinstance(bias, Mapping):
        return _dense_bias([bias], 1, vocab, dtype, device).expand(batch, vocab)
    elif isinstance(bias, (list, tuple)):
        if len(bias) != batch:
            raise ValueError(f"logit_bias: expected one dict per row ({batch}), got {len(bias)}")
        per_row = list(bias)
    else:
        raise TypeError(f"logit_bias must be None, a dict, a list of dicts or a tensor, got {type(bias).__name__}")
    dense = torch.zeros(batch, vocab, dtype=torch.float64)
    for r, row in enumerate(per_row):
        if row is None:
            continue
        if not isinstance(row, Mapping):
            raise TypeError(f"logit_bias[{r}] must be a dict {{token_id: bias}} or None, got {type(row).__name__}")
        for t, b in row.items():
            if not is_int(t) or not 0 <= t < vocab:
                raise ValueError(f"logit_bias[{r}]: token id {t!r} is not in [0, {vocab})")
            if not is_real(b) or math.isnan(b) or b == math.inf:
                raise ValueError(f"logit_bias[{r}][{t}] must be finite or -inf, got {b!r}")
            dense[r, t] = b
    return dense.to(device=device, dtype=dtype)


def resolve_params(params: SamplingParams | None, batch: int, vocab: int, dtype: torch.dtype,
                   device) -> Rows:
    """Validate ``params`` for a (batch, vocab) problem; errors name the field (and the row)."""
    if params is None:
        params = SamplingParams()
    fields = {}
    for name, integer in (("temperature", False), ("top_k", True), ("top_p", False), ("min_p", False),
                          ("repetition_penalty", False), ("presence_penalty", False),
                          ("frequency_penalty", False)):
        if not hasattr(params, name):
            raise TypeError(f"params must be a SamplingParams (missing {name!r}), got {type(params).__name__}")
        fields[name] = _per_row(getattr(params, name), name, batch, integer=integer)
    _check_range(fields["temperature"], "temperature", lambda v: math.isfinite(v) and v >= 0,
                 "finite and >= 0 (0 means greedy)")
    _check_range(fields["top_k"], "top_k", lambda v: v >= 0, ">= 0 (0 disables)")
    _check_range(fields["top_p"], "top_p", lambda v: 0 < v <= 1, "in (0, 1] (1 disables)")
    _check_range(fields["min_p"], "min_p", lambda v: 0 <= v <= 1, "in [0, 1] (0 disables)")
    _check_range(fields["repetition_penalty"], "repetition_penalty", lambda v: math.isfinite(v) and v > 0,
                 "finite and > 0 (1 disables)")
    for name in ("presence_penalty", "frequency_penalty"):
        _check_range(fields[name], name, math.isfinite, "finite (0 disables)")
    bias = _dense_bias(getattr(params, "logit_bias", None), batch, vocab, dtype, device)

    names = ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")
    floats = torch.tensor([fields[n] for n in names], dtype=dtype).reshape(len(names), batch).to(device)
    top_k = torch.tensor(fields["top_k"], dtype=torch.int64).to(device)
    f = dict(zip(names, floats.unbind(0)))                  # one transfer for all float fields
    return Rows(f["temperature"], top_k, f["top_p"], f["min_p"], f["repetition_penalty"],
                f["presence_penalty"], f["frequency_penalty"], bias, fields)


def token_lists(tokens, name: str, batch: int, vocab: int) -> list[torch.Tensor] | None:
    """``prompt_tokens`` / ``output_tokens`` as ``batch`` 1-D int64 CPU tensors, validated.
    A 2-D integer tensor (batch, L) is ``batch`` rows of L tokens each (no padding value)."""
    if tokens is None:
        return None
    if isinstance(tokens, torch.Tensor) and tokens.dim() == 2 and not (
            tokens.dtype.is_floating_point or tokens.dtype == torch.bool):
        if tokens.shape[0] != batch:
            raise ValueError(f"{name}: expected one token sequence per row ({batch}), got {tokens.shape[0]}")
        ids = tokens.detach().to("cpu", torch.int64)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
            bad = int(((ids < 0) | (ids >= vocab)).any(1).nonzero()[0])
            raise ValueError(f"{name}[{bad}]: token ids must be in [0, {vocab})")
        return list(ids.unbind(0))
    if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__len__"):
        raise TypeError(f"{name} must be None or a sequence of {batch} token-id sequences, got {type(tokens).__name__}")
    if len(tokens) != batch:
        raise ValueError(f"{name}: expected one token sequence per row ({batch}), got {len(tokens)}")
    rows = []
    for r, row in enumerate(tokens):
        if isinstance(row, torch.Tensor):
            if row.dtype.is_floating_point or row.dtype == torch.bool or row.dim() != 1:
                raise TypeError(f"{name}[{r}] must be a 1-D integer sequence, got {row.dtype} shape {tuple(row.shape)}")
            ids = row.detach().to("cpu", torch.int64)
        else:
            row = list(row)
            if not all(is_int(v) for v in row):
                raise TypeError(f"{name}[{r}] must hold ints, got {row[:5]!r}...")
            ids = torch.tensor(row, dtype=torch.int64).reshape(-1)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
            raise ValueError(f"{name}[{r}]: token ids must be in [0, {vocab}), got min {int(ids.min())} max {int(ids.max())}")
        rows.append(ids)
    return rows


def check_processed(x: torch.Tensor) -> None:
    """After penalties and bias: NaN, +inf or a fully masked row is an error naming the row."""
    bad = torch.isnan(x).any(dim=1)
    if bool(bad.any()):
        raise ValueError(f"logits contain NaN (row {int(bad.nonzero()[0])})")
    bad = torch.isposinf(x).any(dim=1)
    if bool(bad.any()):
        raise ValueError(f"logits row {int(bad.nonzero()[0])} is +inf after penalties and logit_bias "
                         "(+inf logits, or a penalty/bias overflowed)")
    dead = torch.isneginf(x).all(dim=1)
    if bool(dead.any()):
        raise ValueError(f"logits row {int(dead.nonzero()[0])}: every token is masked (all -inf after "
                         "logit_bias and penalties); nothing can be sampled")


# ----------------------------------------------------------------------------- steps 1-2
def apply_penalties(x: torch.Tensor, rows: Rows, prompt: list | None, output: list | None) -> torch.Tensor:
    """Step 1 (module doc). Returns a new tensor; x is not modified."""
    return penalise(x, rows, *seen_and_counts(prompt, output, *x.shape, x.dtype, x.device))


def seen_and_counts(prompt: list | None, output: list | None, batch: int, vocab: int, dtype,
                    device) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 1's inputs from the validated token lists: ``seen`` (batch, vocab) bool (prompt or
    output) and ``counts`` (batch, vocab) in ``dtype`` (output only), on ``device``."""
    seen = torch.zeros(batch, vocab, dtype=torch.bool)
    counts = torch.zeros(batch, vocab, dtype=torch.int64)
    for r in range(batch):
        if prompt is not None:
            seen[r, prompt[r]] = True
        if output is not None:
            counts[r] = torch.bincount(output[r], minlength=vocab)
    return (seen | (counts > 0)).to(device), counts.to(device, dtype)


def penalise(x: torch.Tensor, rows: Rows, seen: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Step 1 on the device, from :func:`seen_and_counts`' tensors (no host work: a run's step)."""
    rp = rows.repetition_penalty[:, None]
    x = torch.where(seen, torch.where(x > 0, x / rp, x * rp), x)
    return x - rows.frequency_penalty[:, None] * counts - rows.presence_penalty[:, None] * (counts > 0).to(x.dtype)


def apply_logit_bias(x: torch.Tensor, rows: Rows) -> torch.Tensor:
    """Step 2: add the dense bias (-inf bans a token)."""
    return x if rows.logit_bias is None else x + rows.logit_bias


def check_sampling_inputs(logits, params, prompt_tokens=None, output_tokens=None):
    """Validate logits, per-row parameters and seen tokens (shared by every implementation):
    returns ``(dtype, rows, prompt, output)`` with ``dtype`` the compute dtype."""
    check_logits(logits)
    batch, vocab = logits.shape
    dtype = compute_dtype(logits.dtype)
    rows = resolve_params(params, batch, vocab, dtype, logits.device)
    prompt = token_lists(prompt_tokens, "prompt_tokens", batch, vocab)
    output = token_lists(output_tokens, "output_tokens", batch, vocab)
    return dtype, rows, prompt, output


def processed_logits(logits, params, prompt_tokens=None, output_tokens=None) -> tuple[torch.Tensor, Rows]:
    """Validate everything and apply steps 1-2: returns ``(x, rows)``, x in the compute dtype."""
    dtype, rows, prompt, output = check_sampling_inputs(logits, params, prompt_tokens, output_tokens)
    x = logits.detach().to(dtype)
    if bool(torch.isnan(x).any()):
        raise ValueError(f"logits contain NaN (row {int(torch.isnan(x).any(1).nonzero()[0])})")
    x = apply_penalties(x, rows, prompt, output)
    x = apply_logit_bias(x, rows)
    check_processed(x)
    return x, rows


# ----------------------------------------------------------------------------- steps 3-6
def scale_temperature(x: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """Step 3: z = (x - rowmax) / T, so max z = 0 exactly. Greedy rows (T = 0) get T = 1 here;
    :func:`probs_from_processed` replaces them by a one-hot."""
    t = torch.where(temperature > 0, temperature, torch.ones_like(temperature))
    return (x - x.amax(dim=1, keepdim=True)) / t[:, None]


def top_k_mask(z: torch.Tensor, top_k: torch.Tensor) -> torch.Tensor:
    """Step 4: keep z >= the k-th largest value (ties kept); k = 0 or k >= vocab keeps all."""
    vocab = z.shape[1]
    k = torch.where((top_k > 0) & (top_k < vocab), top_k, torch.full_like(top_k, vocab))
    sorted_z = torch.sort(z, dim=1, descending=True).values
    kth = sorted_z.gather(1, (k - 1)[:, None])
    return z >= kth


def top_p_mask(z: torch.Tensor, survivors: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Step 5: on the survivors, renormalised, keep t iff the mass strictly above z_t is < p.

    Sort descending; the exclusive cumulative sum at the FIRST token of a tie group is the mass
    strictly above the group; v = the smallest z kept that way; keep z >= v (whole tie groups).
    """
    zs = torch.where(survivors, z, torch.full_like(z, -math.inf))
    q = torch.softmax(zs, dim=1)
    z_sorted, order = torch.sort(zs, dim=1, descending=True, stable=True)
    q_sorted = q.gather(1, order)
    cum = torch.cumsum(q_sorted, dim=1)
    above = torch.cat([torch.zeros_like(cum[:, :1]), cum[:, :-1]], dim=1)   # mass before position i
    kept_sorted = (above < top_p[:, None]) | (top_p[:, None] >= 1)
    v = torch.where(kept_sorted, z_sorted, torch.full_like(z_sorted, math.inf)).amin(dim=1, keepdim=True)
    return survivors & (z >= v)


def min_p_mask(z: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    """Step 6: keep exp(z) >= min_p (z's max is 0, so this is p_t >= min_p * p_max)."""
    return torch.exp(z) >= min_p[:, None]


def masked_softmax(z: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return torch.softmax(torch.where(keep, z, torch.full_like(z, -math.inf)), dim=1)


def greedy_probs(x: torch.Tensor) -> torch.Tensor:
    """One-hot at argmax (the smallest token id among the maxima)."""
    return torch.nn.functional.one_hot(x.argmax(dim=1), x.shape[1]).to(x.dtype)


def probs_from_processed(x: torch.Tensor, rows: Rows) -> torch.Tensor:
    """Steps 3-6 on processed logits x (after penalties and bias)."""
    z = scale_temperature(x, rows.temperature)
    keep = top_k_mask(z, rows.top_k)
    keep = top_p_mask(z, keep, rows.top_p)
    keep = keep & min_p_mask(z, rows.min_p)
    probs = masked_softmax(z, keep)
    greedy = (rows.temperature == 0)[:, None]
    return torch.where(greedy, greedy_probs(x), probs)


def sampling_probs(logits, params: SamplingParams | None = None, *, prompt_tokens=None,
                   output_tokens=None) -> torch.Tensor:
    """The exact distribution :func:`sample` draws from (module doc: the pinned order).

    Args:
        logits: (batch, vocab) float16/bfloat16/float32/float64; never modified.
        params: :class:`SamplingParams` (scalar or per-row fields); None = defaults.
        prompt_tokens, output_tokens: None or ``batch`` token-id sequences (for the penalties).
    Returns:
        probs (batch, vocab) in float32 (float64 for float64 logits), rows summing to 1, exactly 0
        outside the kept set.
    """
    x, rows = processed_logits(logits, params, prompt_tokens, output_tokens)
    if x.shape[0] == 0:
        return x.clone()
    return probs_from_processed(x, rows)


# ----------------------------------------------------------------------------- sampling
def check_uniforms(uniforms, batch: int, device) -> torch.Tensor:
    if not isinstance(uniforms, torch.Tensor):
        raise TypeError(f"uniforms must be a torch.Tensor of shape ({batch},), got {type(uniforms).__name__}")
    if not uniforms.dtype.is_floating_point:
        raise TypeError(f"uniforms must be floating, got {uniforms.dtype}")
    if uniforms.shape != (batch,):
        raise ValueError(f"uniforms must have shape (batch,) = ({batch},), got {tuple(uniforms.shape)}")
    if batch and not bool(((uniforms >= 0) & (uniforms < 1)).all()):
        raise ValueError("uniforms must lie in [0, 1)")
    return uniforms.to(device=device, dtype=torch.float64)


def check_generator(generator, uniforms, device) -> None:
    if uniforms is not None:
        return
    if generator is None:
        raise ValueError("generator: sample needs an explicit torch.Generator (or explicit uniforms)")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if generator.device.type != torch.device(device).type:
        raise ValueError(f"generator is on {generator.device}, logits on {device}: they must match")


def draw_uniforms(generator: torch.Generator, batch: int, device) -> torch.Tensor:
    """One float64 U[0, 1) per row from ``generator`` (the only randomness :func:`sample` uses)."""
    return torch.rand(batch, generator=generator, dtype=torch.float64, device=device)


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The smallest t with cumsum(probs)_t > u * total (module doc); int64 (batch,)."""
    c = torch.cumsum(probs, dim=1)
    target = u.to(probs.dtype) * c[:, -1]
    idx = (c <= target[:, None]).sum(dim=1)
    last = probs.shape[1] - 1 - (probs.flip(1) > 0).to(torch.int8).argmax(dim=1)
    return torch.minimum(idx, last)


def sample(logits, params: SamplingParams | None = None, generator: torch.Generator | None = None, *,
           prompt_tokens=None, output_tokens=None, uniforms: torch.Tensor | None = None) -> torch.Tensor:
    """Draw one token per row from :func:`sampling_probs` (the reference: inverse CDF in token-id order).

    ``generator`` (a torch.Generator on the logits' device) is the randomness; ``uniforms`` (shape
    (batch,), values in [0, 1)) replaces it, making the result a deterministic function of the
    inputs. Returns int64 token ids (batch,). Validation happens before any random number is
    drawn, so a rejected call leaves the generator's state unchanged. The reference's choices
    (module doc): one float64 uniform per row from ``generator``, and the inverse CDF of u in
    token-id order.
    """
    check_logits(logits)
    batch = logits.shape[0]
    if uniforms is not None:
        uniforms = check_uniforms(uniforms, batch, logits.device)
    check_generator(generator, uniforms, logits.device)
    probs = sampling_probs(logits, params, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    if batch == 0:
        return torch.zeros(0, dtype=torch.int64, device=logits.device)
    u = uniforms if uniforms is not None else draw_uniforms(generator, batch, logits.device)
    return inverse_cdf(probs, u)


# ------------------------------------------------------------------- plan once, run many
class SamplerPlan:
    """``sample`` in two steps, the way engines call it (FlashInfer's ``plan()`` then ``run()``):
    ``plan`` once per decode step's batch on the host, ``run`` on the device, capturable in a CUDA
    graph and replayed after the logits were written in place.

    ``plan(logits, params=None, *, prompt_tokens=None, output_tokens=None)`` reads on the host:
    the logits' shape, dtype and device -- never their values (they may be the empty buffer a
    CUDA graph will fill) --, every value of ``params`` (the per-row fields and ``logit_bias``,
    a dense bias tensor included: its values are copied at plan time) and the token ids of
    ``prompt_tokens`` / ``output_tokens``, which it turns into device tensors (here the per-row
    ``seen`` mask and output ``counts`` of step 1). It validates completely: every error of
    ``sample`` that does not need the logits' values, with the same error type naming the same
    argument (``logits``' type, rank, dtype and vocab; every ``params`` field, ``logit_bias``,
    ``prompt_tokens``, ``output_tokens``; and a row whose ``logit_bias`` bans every token, which
    ``sample`` rejects as "every token is masked" naming the row, whatever the logits hold). A
    plan that raises leaves the object as it was (its previous plan, if any, still runs).
    Nothing is drawn at plan time.

    ``run(logits, *, uniforms=None, generator=None)`` is ``sample(logits, params, generator,
    prompt_tokens=, output_tokens=, uniforms=)`` with the planned params and tokens, on the
    logits' values *at the time of the run*: the same int64 tokens (batch,) for the same
    uniforms, and with a generator the same draw (one ``torch.rand(batch, float64)``, the
    reference's choice). It reads no tensor value on the host (no device-to-host copy, no sync)
    and allocates only on the device, so it can be captured and replayed. It checks what the host
    knows without a sync: a run before any plan is a RuntimeError naming ``plan``; ``logits``
    whose shape, dtype or device differ from the planned ones is a TypeError (not a tensor, a
    dtype) or ValueError (a shape, a device) naming ``logits``; ``uniforms`` not a floating
    tensor (TypeError), or not of shape (batch,) on the logits' device (ValueError), names
    ``uniforms``; without uniforms, a missing generator (ValueError), one that is not a
    torch.Generator (TypeError) or one on another device type (ValueError) names ``generator``.

    What ``sample`` checks by reading values, ``run`` cannot check without a sync, so it is the
    caller's promise, unchecked: every uniform in [0, 1), and logits that ``sample`` would accept
    -- no NaN, no +inf, nor a penalty or bias overflowing to +inf, and no row with every token
    -inf after the bias (``sample`` raises ValueError naming the row for each). Breaking the
    promise gives an unspecified result (any int64 tensor of shape (batch,), not necessarily
    token ids), never an error.

    The plain way, below: ``sample``'s own steps with the host work moved to the plan. Steps 1-2
    from the planned ``seen``/``counts`` and dense bias; steps 3-6 are device ops that make no
    host decision (:func:`probs_from_processed`: every row through every filter, greedy rows
    replaced by their one-hot); the draw is :func:`inverse_cdf`.
    """

    def __init__(self):
        self._plan: dict | None = None

    def plan(self, logits, params: SamplingParams | None = None, *, prompt_tokens=None,
             output_tokens=None) -> None:
        dtype, rows, prompt, output = check_sampling_inputs(logits, params, prompt_tokens, output_tokens)
        check_bias_bans_no_row(rows.logit_bias)
        batch, vocab = logits.shape
        if rows.logit_bias is not None:           # a snapshot: the caller may reuse its bias tensor
            rows = rows._replace(logit_bias=rows.logit_bias.clone())
        seen, counts = seen_and_counts(prompt, output, batch, vocab, dtype, logits.device)
        self._plan = dict(meta=(tuple(logits.shape), logits.dtype, logits.device), dtype=dtype, rows=rows,
                          seen=seen, counts=counts)

    def run(self, logits, *, uniforms: torch.Tensor | None = None,
            generator: torch.Generator | None = None) -> torch.Tensor:
        if self._plan is None:
            raise RuntimeError("run before plan: call plan(logits, params, ...) with this batch first")
        p = self._plan
        check_run_logits(p["meta"], logits)
        check_run_randomness(uniforms, generator, logits)
        batch = logits.shape[0]
        rows = p["rows"]
        x = penalise(logits.detach().to(p["dtype"]), rows, p["seen"], p["counts"])
        x = apply_logit_bias(x, rows)
        if batch == 0:                            # nothing drawn
            return torch.empty(0, dtype=torch.int64, device=logits.device)
        probs = probs_from_processed(x, rows)
        u = uniforms.to(torch.float64) if uniforms is not None else draw_uniforms(generator, batch, logits.device)
        return inverse_cdf(probs, u)


def check_bias_bans_no_row(bias: torch.Tensor | None) -> None:
    """A plan's check of what ``sample`` finds after the bias without reading a logit: a row whose
    bias bans every token (-inf everywhere) is masked whatever the logits hold; the same
    ValueError as :func:`check_processed`, naming the first such row."""
    if bias is None:
        return
    dead = torch.isneginf(bias).all(dim=1)
    if bool(dead.any()):
        raise ValueError(f"logits row {int(dead.nonzero()[0])}: every token is masked (all -inf after "
                         "logit_bias and penalties); nothing can be sampled")


def check_run_logits(planned: tuple, logits) -> None:
    """``logits`` has the planned (shape, dtype, device): TypeError (not a tensor, another dtype)
    or ValueError (another shape or device) naming ``logits``; host metadata only."""
    check_as_planned("logits", logits, planned, "batch, vocab")


def check_run_randomness(uniforms, generator, logits) -> None:
    """A run's randomness, host metadata only (the values of ``uniforms`` are the caller's
    promise): uniforms a floating (batch,) tensor on the logits' device, else a torch.Generator on
    the logits' device type; TypeError / ValueError naming ``uniforms`` or ``generator``."""
    if uniforms is None:
        check_generator(generator, None, logits.device)
        return
    batch = logits.shape[0]
    if not isinstance(uniforms, torch.Tensor):
        raise TypeError(f"uniforms must be a torch.Tensor of shape ({batch},), got {type(uniforms).__name__}")
    if not uniforms.dtype.is_floating_point:
        raise TypeError(f"uniforms must be floating, got {uniforms.dtype}")
    if tuple(uniforms.shape) != (batch,):
        raise ValueError(f"uniforms must have shape (batch,) = ({batch},), got {tuple(uniforms.shape)}")
    if uniforms.device != logits.device:
        raise ValueError(f"uniforms must be on the logits' device {logits.device}, got {uniforms.device} "
                         "(a copy from another device would sync)")
