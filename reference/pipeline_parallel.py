"""Pipeline parallelism: stages, micro-batches, the bubble (course 06.03).

Split the model by layer: ``p`` stages, stage s holding a contiguous block of decoder layers
(:func:`partition_layers`; stage 0 also the embedding, stage p-1 also the final norm and lm_head).
The activations (batch, seq, dim) flow stage to stage by point-to-point send/recv: one tensor per
micro-batch per stage boundary, never a collective.

**Micro-batches and the bubble.** A batch split into ``m`` micro-batches lets stage s work on
micro-batch j while stage s+1 works on j-1. With every step of every stage taking one unit (the
forward of one micro-batch on one stage: ``t_f``; a backward ``t_b``), the last stage starts
after p-1 units and the pipeline needs m + p - 1 units where p x m units of work are done, so each
stage idles (p-1) of its (m+p-1) units::

    bubble_fraction(p, m) = (p - 1) / (m + p - 1)

-- 1/2 for p = 2, m = 1 (one stage always waits), 1/9 for p = 2, m = 8, -> 0 as m grows. The same
fraction holds for forward-only schedules (inference) and for training schedules with a
backward per micro-batch (makespan (m + p - 1)(t_f + t_b)). :func:`simulate_schedule` runs any
schedule step by step in exact arithmetic (``fractions.Fraction``) and measures it.

**Schedules** (:func:`pipeline_schedule`): for each stage, its ordered list of steps ``("F", j)``
/ ``("B", j)``.

    gpipe  every forward, micro-batch 0..m-1, then (training) every backward 0..m-1 (GPipe;
           torch.distributed.pipelining's ScheduleGPipe order): stage s stashes the activations
           of all m micro-batches.
    1f1b   (training) stage s runs w = min(p - 1 - s, m) warm-up forwards, then alternates one
           forward and one backward (F_{w+i}, B_i) for i < m - w, then the m - w ... m-1 backwards
           left (PipeDream-Flush / Megatron's non-interleaved 1F1B): the same bubble as GPipe,
           but stage s never holds more than min(p - s, m) micro-batches' activations.

1F1B is a *training* schedule: its point is to run backwards early and free activations. An
inference pipeline has no backward, so with ``training=False`` (the default) both kinds are the
forward-only order F_0 .. F_{m-1} on every stage -- the same steps, the same bubble. (The course
outline, 06.03, names the bubble and no training schedule; this is where 1F1B would differ.)

**The forward on real processes** (:func:`pipeline_forward`): every rank of a group of ``p``
calls it with the full model and the same tokens; the rank at group rank s runs stage s. Stage s,
for each micro-batch j in order: receive its activations from stage s-1 (stage 0: embed the
micro-batch's tokens), run its layers -- the model's own modules ``model.model.embed_tokens``,
``model.model.layers[i]``, ``model.model.norm``, ``model.lm_head``, positions 0..seq-1, no KV
cache -- then start sending the result to stage s+1 (``isend``: the stage moves on to j+1 while
it travels); every send is waited for before returning. The last stage returns the logits
(batch, seq, vocab) of the whole batch, micro-batches concatenated in order; the other stages
return None. Sent activations are in the model's dtype, bit for bit what the stage computed, so
the output equals running the model on each micro-batch (the tolerance rule against the unsplit
model: a micro-batch is a smaller matmul). **Bytes** sent across the p-1 boundaries::

    pipeline_bytes = (p - 1) x batch x seq x dim x element_bytes

-- dim x element_bytes per token per boundary, against tensor parallelism's 2 x n_layers x dim x
element_bytes per token in all-reduces (reference/tensor_parallel.py): why PP is the split across
nodes where TP's collectives are too expensive. ``p = 1`` is the unsplit model: no process group
needed, nothing sent.

Bad input (TypeError/ValueError naming the argument, before any send): counts not ints (bools
included) or < 1; ``n_stages`` > ``n_layers`` (a stage without a layer) naming ``n_stages``;
``n_microbatches`` > batch naming ``n_microbatches``; ``stage`` outside [0, n_stages); an unknown
``kind``; a schedule that is not one list of ("F"/"B", micro-batch) steps per stage, where a
stage misses or repeats a micro-batch's forward, has backwards for some micro-batches only, puts
a backward before its forward, or that deadlocks (naming ``schedule``); times not positive reals;
for :func:`pipeline_forward`, ``n_stages`` > 1 without an initialised process group of
``n_stages`` ranks with this process at rank ``stage``, and tokens as the model rejects them.

Choices the law leaves open (the reference's): when ``n_layers`` is not a multiple of ``p`` the
first ``n_layers % p`` stages get one layer more (vLLM gives the extras to the stages before the
last); micro-batch sizes differ by at most one, the larger first (``torch.tensor_split``); GPipe's
backwards in micro-batch order 0..m-1.
"""
from __future__ import annotations

from fractions import Fraction
from numbers import Real

import torch
import torch.distributed as dist

from reference._checks import check_int, check_tensor
from reference.kv_bytes import element_bytes
from reference.model import rope_cos_sin

__all__ = ["partition_layers", "microbatch_sizes", "bubble_fraction", "pipeline_schedule", "simulate_schedule",
           "pipeline_bytes", "pipeline_forward"]  # the contract
__optional__: list[str] = []  # checked when an implementation provides them

KINDS = ("gpipe", "1f1b")


def partition_layers(n_layers: int, n_stages: int) -> list[tuple[int, int]]:
    """The layers of each stage: ``n_stages`` pairs ``(start, stop)``, contiguous, in order,
    covering ``range(n_layers)``, sizes ``n_layers // n_stages`` plus one for the first
    ``n_layers % n_stages`` stages. ``n_stages`` > ``n_layers`` (a stage with no layer):
    ValueError naming ``n_stages``."""
    check_int("n_layers", n_layers, minimum=1)
    check_int("n_stages", n_stages, minimum=1)
    if n_stages > n_layers:
        raise ValueError(f"n_stages ({n_stages}) exceeds n_layers ({n_layers}): a stage would hold no layer")
    base, extra = divmod(n_layers, n_stages)
    out, start = [], 0
    for s in range(n_stages):
        stop = start + base + (1 if s < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def microbatch_sizes(batch: int, n_microbatches: int) -> list[int]:
    """The sizes of ``n_microbatches`` micro-batches of a batch of ``batch`` sequences: as equal
    as possible, the first ``batch % n_microbatches`` one larger (``torch.tensor_split``'s).
    ``n_microbatches`` > ``batch`` (an empty micro-batch): ValueError naming ``n_microbatches``."""
    check_int("batch", batch, minimum=1)
    check_int("n_microbatches", n_microbatches, minimum=1)
    if n_microbatches > batch:
        raise ValueError(f"n_microbatches ({n_microbatches}) exceeds the batch ({batch}): a micro-batch would be empty")
    base, extra = divmod(batch, n_microbatches)
    return [base + (1 if j < extra else 0) for j in range(n_microbatches)]


def bubble_fraction(n_stages: int, n_microbatches: int) -> Fraction:
    """The idle fraction of a pipeline of ``n_stages`` equal stages and ``n_microbatches``
    micro-batches: ``Fraction(n_stages - 1, n_microbatches + n_stages - 1)`` (exact; 0 for one
    stage)."""
    check_int("n_stages", n_stages, minimum=1)
    check_int("n_microbatches", n_microbatches, minimum=1)
    return Fraction(n_stages - 1, n_microbatches + n_stages - 1)


def pipeline_schedule(n_stages: int, n_microbatches: int, kind: str = "gpipe", *, training: bool = False) -> list[list[tuple[str, int]]]:
    """Each stage's ordered steps, ``("F", j)`` the forward and ``("B", j)`` the backward of
    micro-batch j (module doc): ``kind`` "gpipe" or "1f1b"; ``training`` False (inference, the
    default): forwards only, F_0..F_{m-1} on every stage for both kinds. An unknown ``kind``:
    ValueError naming it; ``training`` not a bool: TypeError naming it."""
    check_int("n_stages", n_stages, minimum=1)
    check_int("n_microbatches", n_microbatches, minimum=1)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not isinstance(training, bool):
        raise TypeError(f"training must be a bool, got {training!r}")
    p, m = n_stages, n_microbatches
    forwards = [("F", j) for j in range(m)]
    if not training:
        return [list(forwards) for _ in range(p)]
    if kind == "gpipe":
        return [forwards + [("B", j) for j in range(m)] for _ in range(p)]
    out = []
    for s in range(p):
        warmup = min(p - 1 - s, m)
        steps = [("F", j) for j in range(warmup)]
        for i in range(m - warmup):
            steps += [("F", warmup + i), ("B", i)]
        steps += [("B", j) for j in range(m - warmup, m)]
        out.append(steps)
    return out


def _time(name: str, value, p: int) -> list[Fraction]:
    values = list(value) if isinstance(value, (list, tuple)) else [value] * p
    if len(values) != p:
        raise ValueError(f"{name} must be one positive time or one per stage ({p}), got {len(values)}")
    out = []
    for v in values:
        if not isinstance(v, Real) or isinstance(v, bool):
            raise TypeError(f"{name} must be a positive real (or one per stage), got {v!r}")
        f = Fraction(v)
        if f <= 0:
            raise ValueError(f"{name} must be > 0, got {v!r}")
        out.append(f)
    return out


def _check_schedule(schedule) -> tuple[int, int, bool]:
    """(p, m, training) of a well-formed schedule, else TypeError/ValueError naming ``schedule``."""
    if not isinstance(schedule, (list, tuple)) or not schedule:
        raise TypeError(f"schedule must be a non-empty list of per-stage step lists, got {type(schedule).__name__}")
    m, training = None, None
    for s, steps in enumerate(schedule):
        if not isinstance(steps, (list, tuple)):
            raise TypeError(f"schedule: stage {s}'s steps must be a list, got {type(steps).__name__}")
        seen = {"F": [], "B": []}
        for step in steps:
            if (not isinstance(step, (list, tuple)) or len(step) != 2 or step[0] not in seen
                    or not isinstance(step[1], int) or isinstance(step[1], bool) or step[1] < 0):
                raise ValueError(f"schedule: stage {s} has the step {step!r}; a step is ('F' or 'B', micro-batch >= 0)")
            if step[0] == "B" and step[1] not in seen["F"]:
                raise ValueError(f"schedule: stage {s} runs B{step[1]} before F{step[1]}")
            seen[step[0]].append(step[1])
        n = len(seen["F"])
        if sorted(seen["F"]) != list(range(n)) or n == 0:
            raise ValueError(f"schedule: stage {s}'s forwards {seen['F']} are not micro-batches 0..m-1 once each")
        has_b = bool(seen["B"])
        if has_b and sorted(seen["B"]) != list(range(n)):
            raise ValueError(f"schedule: stage {s}'s backwards {seen['B']} are not micro-batches 0..m-1 once each")
        if m is None:
            m, training = n, has_b
        elif (n, has_b) != (m, training):
            raise ValueError(f"schedule: stage {s} has {n} micro-batches{' with' if has_b else ' without'} backwards, "
                             f"stage 0 {m}{' with' if training else ' without'}")
    return len(schedule), m, training


def simulate_schedule(schedule, t_forward=1, t_backward=1) -> dict:
    """Run ``schedule`` (one list of steps per stage, as :func:`pipeline_schedule` gives) step by
    step: each stage runs its steps in its order, one at a time, each as soon as it may -- F(s, j)
    after F(s-1, j) ended, B(s, j) after B(s+1, j) ended (and its own F(s, j)); sending costs
    nothing. ``t_forward`` / ``t_backward``: the time of one step, a positive real or one per
    stage. Exact arithmetic: every time is a ``Fraction``. Returns a dict::

        steps           per stage, [(kind, j, start, end), ...] in its order
        makespan        the end of the last step
        busy            per stage, the sum of its steps' times
        bubble          1 - sum(busy) / (p x makespan): the idle fraction
        peak_in_flight  per stage, the most micro-batches forwarded and not yet backwarded at
                        once (the activations a training stage stashes; m for forward-only)

    A malformed schedule, or one whose orders wait on each other forever (deadlock): ValueError
    naming ``schedule``."""
    p, m, training = _check_schedule(schedule)
    tf, tb = _time("t_forward", t_forward, p), _time("t_backward", t_backward, p)
    end: dict[tuple[str, int, int], Fraction] = {}
    done = [[] for _ in range(p)]
    free = [Fraction(0)] * p
    nxt = [0] * p
    remaining = sum(len(steps) for steps in schedule)
    while remaining:
        progressed = False
        for s in range(p):
            while nxt[s] < len(schedule[s]):
                kind, j = schedule[s][nxt[s]]
                deps = [("F", s - 1, j)] if kind == "F" and s > 0 else []
                if kind == "B":
                    deps = [("F", s, j)] + ([("B", s + 1, j)] if s < p - 1 else [])
                if any(d not in end for d in deps):
                    break
                start = max([free[s]] + [end[d] for d in deps])
                stop = start + (tf[s] if kind == "F" else tb[s])
                end[(kind, s, j)] = stop
                done[s].append((kind, j, start, stop))
                free[s] = stop
                nxt[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = {s: schedule[s][nxt[s]] for s in range(p) if nxt[s] < len(schedule[s])}
            raise ValueError(f"schedule deadlocks: every stage waits on another (next steps {stuck})")
    makespan = max(free)
    busy = [sum((e - b for _, _, b, e in steps), Fraction(0)) for steps in done]
    peak = []
    for steps in schedule:
        held = top = 0
        for kind, _ in steps:
            held += 1 if kind == "F" else -1
            top = max(top, held)
        peak.append(top)
    return {"steps": done, "makespan": makespan, "busy": busy,
            "bubble": 1 - sum(busy, Fraction(0)) / (p * makespan), "peak_in_flight": peak}


def pipeline_bytes(config, batch: int, seq_len: int, n_stages: int, dtype: torch.dtype | None = None) -> int:
    """Bytes of activations a forward of ``batch`` x ``seq_len`` tokens sends between stages:
    ``(n_stages - 1) x batch x seq_len x config.dim x element_bytes(dtype)`` (one (batch, seq,
    dim) tensor per boundary, however it is split into micro-batches; the logits are not sent).
    ``dtype`` defaults to ``config.dtype``. An int; 0 for one stage."""
    if not all(hasattr(config, f) for f in ("dim", "dtype", "n_layers")):
        raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
    check_int("batch", batch, minimum=1)
    check_int("seq_len", seq_len, minimum=1)
    check_int("n_stages", n_stages, minimum=1)
    dtype = config.dtype if dtype is None else dtype
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    return (n_stages - 1) * batch * seq_len * config.dim * element_bytes(dtype)


@torch.no_grad()
def pipeline_forward(model, tokens: torch.Tensor, n_microbatches: int, stage: int, n_stages: int, *, group=None):
    """This rank's stage of a forward of ``tokens`` (batch, seq) through ``model`` (a reference
    Transformer, the whole model on every rank) split into ``n_stages`` stages and
    ``n_microbatches`` micro-batches (module doc: order of steps, sends, bytes). Every rank of
    ``group`` (None: the default group; its rank ``stage``, its size ``n_stages``) calls it with
    the same arguments but ``stage``. Returns the logits (batch, seq, vocab) on the last stage,
    None on the others; ``n_stages`` 1 needs no process group. Bad input as the module doc says,
    raised before anything is sent."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(model, "model") or not hasattr(model, "lm_head"):
        raise TypeError(f"model must be a reference Transformer, got {type(model).__name__}")
    check_int("n_stages", n_stages, minimum=1)
    check_int("stage", stage, minimum=0)
    if stage >= n_stages:
        raise ValueError(f"stage must be in [0, n_stages={n_stages}), got {stage}")
    layers = partition_layers(config.n_layers, n_stages)[stage]
    check_tensor("tokens", tokens, ndim=2, dims="batch, seq")
    check_int("n_microbatches", n_microbatches, minimum=1)
    sizes = microbatch_sizes(tokens.shape[0], n_microbatches)
    model.check_inputs(tokens, None)
    if n_stages > 1:
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError(f"n_stages={n_stages} needs an initialised torch.distributed process group")
        if dist.get_world_size(group) != n_stages:
            raise ValueError(f"n_stages={n_stages} but the process group has {dist.get_world_size(group)} ranks")
        if dist.get_rank(group) != stage:
            raise ValueError(f"stage={stage} but this process is rank {dist.get_rank(group)} of the process group")
    seq = tokens.shape[1]
    cos, sin = rope_cos_sin(torch.arange(seq, device=tokens.device), config.head_dim, config.rope_theta, model.dtype)
    first, last = stage == 0, stage == n_stages - 1
    sends, logits = [], []
    for micro in torch.split(tokens, sizes, dim=0):
        if first:
            h = model.model.embed_tokens(micro)
        else:
            h = torch.empty(micro.shape[0], seq, config.dim, dtype=model.dtype, device=tokens.device)
            dist.irecv(h, group=group, group_src=stage - 1).wait()
        for i in range(*layers):
            h = model.model.layers[i](h, cos, sin, None, i, model.attention_fn)
        if last:
            logits.append(model.lm_head(model.model.norm(h)))
        else:
            h = h.contiguous()
            sends.append((dist.isend(h, group=group, group_dst=stage + 1), h))
    for work, _ in sends:
        work.wait()
    return torch.cat(logits, dim=0) if last else None
