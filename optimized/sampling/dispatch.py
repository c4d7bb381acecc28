"""Which schedule computes a call, as arguments: :func:`sample` and :func:`sampling_probs` are the
contract's functions plus two keyword-only arguments, ``schedule`` (one of
:data:`optimized.sampling.config.SCHEDULES`) and ``config`` (a
:class:`optimized.sampling.config.SamplerConfig`; None: every default). optimized.sampling's own
``sample`` / ``sampling_probs`` call them with the defaults; a benchmark or a test that wants one
schedule calls them here, e.g. ``dispatch.sample(x, params, generator, schedule="one-program")``.

Every schedule validates first (the reference's checks, optimized/sampling/inputs.py), draws the
contract's uniforms after validation, and raises the reference's error for a bad row; a call
rejected after the draw leaves the generator as it found it."""
from __future__ import annotations

import math
import os

import torch

from optimized.sampling import torch_path
from optimized.sampling.config import DEFAULT, SCHEDULES, SamplerConfig
from optimized.sampling.inputs import prepare, raise_bad_rows
from reference.sampling import Rows, SamplingParams, check_generator, check_logits, check_uniforms, draw_uniforms


def _checked(schedule, config) -> SamplerConfig:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(map(repr, SCHEDULES))}, got {schedule!r}")
    if config is None:
        return DEFAULT
    if not isinstance(config, SamplerConfig):
        raise TypeError(f"config must be an optimized.sampling.config.SamplerConfig or None, got {type(config).__name__}")
    return config


def interpreter_on() -> bool:
    """Whether Triton runs kernels on CPU tensors through its interpreter (TRITON_INTERPRET=1, which
    Triton itself reads when a kernel module is imported; the test harness sets it when there is
    no GPU). Asked at each call, never cached at import."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def triton_schedule(x: torch.Tensor, schedule: str, config: SamplerConfig = DEFAULT) -> str | None:
    """The Triton schedule that computes processed logits ``x`` ("split" or "one-program"), or None
    for the torch schedule (config.py's SCHEDULES comment says which runs where)."""
    return schedule_for(x.dtype, x.device, tuple(x.shape), schedule, config)


def schedule_for(dtype: torch.dtype, device, shape: tuple, schedule: str, config: SamplerConfig = DEFAULT) -> str | None:
    """:func:`triton_schedule` from metadata alone (the compute ``dtype``, the device and the
    (batch, vocab) shape of the processed logits): what a plan decides before any logit exists."""
    if dtype != torch.float32 or schedule == "torch":
        return None
    if torch.device(device).type == "cuda":
        return "split" if schedule == "auto" else schedule
    if (schedule != "auto" and interpreter_on() and shape[0] <= config.interpreter_max_rows
            and shape[1] <= config.interpreter_max_vocab):
        return schedule
    return None


def _sort_free(x: torch.Tensor, rows: Rows, u: torch.Tensor | None, schedule: str, config: SamplerConfig):
    """A Triton schedule: tokens (u given) or dense probabilities (u None)."""
    params = (rows.temperature, rows.top_k, rows.top_p, rows.min_p)
    if schedule == "split":
        from optimized.sampling import split_row
        result = split_row.sort_free(x, *params, u, config=config.split, redo_config=config.one_program)
    else:
        from optimized.sampling import one_program
        result = one_program.sort_free(x, *params, u, config=config.one_program)
    if bool(result.status.any()):                        # the one device sync
        raise_bad_rows(result.status)
    if u is not None:
        return result.tokens
    t = rows.temperature
    z = (x - result.row_max[:, None]) / torch.where(t > 0, t, torch.ones_like(t))[:, None]
    keep = ((0.0 - z).view(torch.int32) <= result.threshold[:, None]) & (torch.exp(z) >= rows.min_p[:, None])
    probs = torch.softmax(torch.where(keep, z, -math.inf), dim=1)
    if any(v == 0 for v in rows.host["temperature"]):
        greedy = torch.zeros_like(x).scatter_(1, x.argmax(dim=1, keepdim=True), 1.0)
        probs = torch.where((t == 0)[:, None], greedy, probs)
    return probs


def sampling_probs(logits, params: SamplingParams | None = None, *, prompt_tokens=None, output_tokens=None,
                   schedule: str = "auto", config: SamplerConfig | None = None) -> torch.Tensor:
    """:func:`reference.sampling.sampling_probs`'s contract, computed by ``schedule`` with
    ``config`` (module doc)."""
    config = _checked(schedule, config)
    x, rows = prepare(logits, params, prompt_tokens, output_tokens)
    if x.shape[0] == 0:
        return x.clone()
    chosen = triton_schedule(x, schedule, config)
    if chosen is not None:
        return _sort_free(x, rows, None, chosen, config)
    return torch_path.tokens_or_probs(x, rows, None, config.torch_path)


def sample(logits, params: SamplingParams | None = None, generator: torch.Generator | None = None, *,
           prompt_tokens=None, output_tokens=None, uniforms: torch.Tensor | None = None,
           schedule: str = "auto", config: SamplerConfig | None = None) -> torch.Tensor:
    """:func:`reference.sampling.sample`'s contract (inverse CDF in token-id order over the kept
    set, one float64 uniform per row from ``generator`` or ``uniforms``), computed by
    ``schedule`` with ``config`` (module doc)."""
    config = _checked(schedule, config)
    check_logits(logits)
    batch = logits.shape[0]
    if uniforms is not None:
        uniforms = check_uniforms(uniforms, batch, logits.device)
    check_generator(generator, uniforms, logits.device)
    x, rows = prepare(logits, params, prompt_tokens, output_tokens)
    if batch == 0:
        return torch.zeros(0, dtype=torch.int64, device=logits.device)
    state = None
    if uniforms is None:
        state = generator.get_state()
        u = draw_uniforms(generator, batch, logits.device)
    else:
        u = uniforms
    try:
        chosen = triton_schedule(x, schedule, config)
        if chosen is not None:
            return _sort_free(x, rows, u, chosen, config)
        return torch_path.tokens_or_probs(x, rows, u, config.torch_path)
    except ValueError:
        if state is not None:       # a rejected call leaves the generator as it found it
            generator.set_state(state)
        raise
