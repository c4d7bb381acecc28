"""``SamplerPlan``: the sampler in two steps (reference/sampling.py's contract: plan on the host,
run on the device without a sync, capturable in a CUDA graph).

``plan`` validates with the reference's checks (optimized/sampling/inputs.py's ``validate``), turns
the penalties' token lists into device tensors, copies the per-row parameters to the device once,
and decides everything a host decision is needed for, from the parameters and the logits'
metadata alone:

    all greedy    every row has temperature 0: run is the argmax of the processed logits
    "split"       CUDA, float32 compute (float16/bfloat16/float32 logits): the split-row Triton
                  schedule on a workspace the plan allocates once; rows it does not finish in its
                  search passes are redone by the one-program kernel launched over every row with
                  only those rows active (no sync asks which)
    "one-program" the one-program-per-row kernel (chosen by ``schedule=``)
    "dense"       CUDA, float64 compute (or ``schedule="torch"`` on CUDA): the reference's device
                  steps (sort-based filters, inverse CDF), which make no host decision
    "torch"       the CPU: the same torch schedule as ``sample`` (there is no device to sync with)

``run`` checks the host metadata (the reference's ``check_run_logits`` / ``check_run_randomness``),
applies steps 1-2 from the planned tensors and launches. It never raises for bad logit values:
the Triton schedules ignore a bad row's status, and on the CPU the torch schedule's bad-row
ValueError gives way to the dense steps' (unspecified) tokens.

Tokens equal ``optimized.sampling.sample``'s for the same uniforms: the same schedule, the same
configuration, the same arithmetic (``sample`` on CUDA replays the split schedule as a CUDA graph;
a run launches the same kernels directly, so a caller's graph capture holds them)."""
from __future__ import annotations

import torch

from optimized.sampling import torch_path
from optimized.sampling.config import SamplerConfig, one_program_default, split_default
from optimized.sampling.dispatch import _checked, schedule_for
from optimized.sampling.inputs import apply_steps_1_2, penalty_tensors, validate
from reference.sampling import (SamplingParams, check_bias_bans_no_row, check_run_logits, check_run_randomness, draw_uniforms,
                                inverse_cdf, probs_from_processed)


class SamplerPlan:
    """Same contract as :class:`reference.sampling.SamplerPlan` (its docstring: what plan reads
    and validates, what run checks and what it leaves to the caller's promise).
    ``schedule`` / ``config``: as :func:`optimized.sampling.dispatch.sample`'s (module doc: which
    schedule a plan picks). One run at a time per plan object: its runs share the workspace."""

    def __init__(self, *, schedule: str = "auto", config: SamplerConfig | None = None):
        self._config = _checked(schedule, config)
        self._schedule = schedule
        self._plan: dict | None = None

    def plan(self, logits, params: SamplingParams | None = None, *, prompt_tokens=None,
             output_tokens=None) -> None:
        dtype, rows, prompt, output = validate(logits, params, prompt_tokens, output_tokens)
        check_bias_bans_no_row(rows.logit_bias)
        batch, vocab = logits.shape
        device = logits.device
        if rows.logit_bias is not None:            # a snapshot: the caller may reuse its bias tensor
            rows = rows._replace(logit_bias=rows.logit_bias.contiguous().clone())
        penalty = penalty_tensors(rows, prompt, output, batch, vocab, dtype, device)
        config = self._config
        if batch > 0 and all(t == 0 for t in rows.host["temperature"]):
            kind = "greedy"
        else:
            kind = schedule_for(dtype, device, (batch, vocab), self._schedule, config)
            if kind is None:
                kind = "torch" if device.type == "cpu" else "dense"
        params4 = tuple(getattr(rows, n).contiguous() for n in ("temperature", "top_k", "top_p", "min_p"))
        launch = None
        if kind == "split" and batch > 0:
            from optimized.sampling import one_program, split_row
            split = config.split or split_default(device)
            redo = config.one_program or one_program_default(device)
            launch = (split, split_row.workspace(batch, vocab, device, split),
                      (torch.empty(batch, dtype=torch.bool, device=device),
                       torch.empty(batch, dtype=torch.int32, device=device),
                       torch.empty(batch, dtype=torch.float32, device=device),
                       torch.empty(batch, dtype=torch.int32, device=device),
                       one_program.gather_buffers(batch, redo, device), redo))
        elif kind == "one-program" and batch > 0:
            from optimized.sampling import one_program
            redo = config.one_program or one_program_default(device)
            launch = (redo, one_program.gather_buffers(batch, redo, device))
        self._plan = dict(meta=(tuple(logits.shape), logits.dtype, device), dtype=dtype, rows=rows, penalty=penalty,
                          kind=kind, params=params4, launch=launch)

    def run(self, logits, *, uniforms: torch.Tensor | None = None,
            generator: torch.Generator | None = None) -> torch.Tensor:
        if self._plan is None:
            raise RuntimeError("run before plan: call plan(logits, params, ...) with this batch first")
        p = self._plan
        check_run_logits(p["meta"], logits)
        check_run_randomness(uniforms, generator, logits)
        batch = logits.shape[0]
        if batch == 0:
            return torch.zeros(0, dtype=torch.int64, device=logits.device)
        x = logits.detach()
        x = x if x.dtype == p["dtype"] else x.to(p["dtype"])
        x = apply_steps_1_2(x, p["rows"], p["penalty"])
        u = (uniforms if uniforms.dtype == torch.float64 else uniforms.to(torch.float64)) if uniforms is not None \
            else draw_uniforms(generator, batch, logits.device)
        kind = p["kind"]
        if kind == "greedy":
            return x.argmax(dim=1)
        if kind == "split":
            from optimized.sampling import split_row
            config, ws, redo = p["launch"]
            return split_row.run_tokens(x.contiguous(), p["params"], u.contiguous(), config, ws, redo)
        if kind == "one-program":
            from optimized.sampling import one_program
            config, gathered = p["launch"]
            tok = torch.empty(batch, dtype=torch.int64, device=x.device)
            scratch = torch.empty(3, batch, dtype=torch.int32, device=x.device)
            one_program.launch_rows(x.contiguous(), p["params"], u.contiguous(),
                                    (tok, scratch[0], scratch[1].view(torch.float32), scratch[2]), gathered, None,
                                    config)
            return tok
        if kind == "torch":
            try:
                return torch_path.tokens_or_probs(x, p["rows"], u, self._config.torch_path)
            except ValueError:    # a bad row (the caller's promise broken): unspecified tokens, no error
                pass
        return inverse_cdf(probs_from_processed(x, p["rows"]), u)

