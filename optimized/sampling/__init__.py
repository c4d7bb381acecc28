"""Sort-free batched sampling: the contract of reference/sampling.py, computed without sorting the
vocabulary.

Every filter of the pinned order keeps an upper set of the scaled logits z, so a row's kept set is
{t : z_t >= v} for one threshold v per row; each schedule below finds v without a vocab-wide sort,
then draws with the contract's inverse CDF in token-id order and the contract's float64 uniform,
so tokens equal the reference's for the same uniforms up to float32 rounding at a cut or a CDF
step (which the contract leaves open).

On CUDA (float32 compute: float16/bfloat16/float32 logits) the default is the sort-free Triton
sampler: each row's threshold key is found by a pivot search over the float bits of z (nothing
of size vocab written), each full pass split over several programs per row; rows it does not
finish in its fixed number of passes are redone by the one-program-per-row kernel; the whole
schedule replays as one CUDA graph. The sampling spec passes through it natively on the H200
(docs/performance.md). Elsewhere (a CPU, float64 compute) the torch schedule runs: a chunked topk
for small top_k, a bucket select otherwise.

The package, one job per module:

    __init__.py      the contract: ``sample``, ``sampling_probs``, ``SamplerPlan`` (and
                     ``SamplingParams``, re-exported), at the default schedule and configuration
    dispatch.py      the same two functions with keyword-only ``schedule=`` and ``config=``: which
                     schedule runs where (the public way to choose one)
    config.py        every setting of every schedule, as frozen dataclasses passed in
    inputs.py        validation, penalties and logit bias (every schedule's steps 1-2), bad-row errors
    torch_path.py    the torch schedule: topk fast path, bucket-select general path, inverse CDF
    fused_tail.py    the torch fast path's tail as one Triton kernel (on CUDA)
    key_search.py    the Triton device functions both sort-free schedules share (keys, pivots)
    one_program.py   the sort-free Triton schedule with one program per row
    split_row.py     the sort-free Triton schedule with each row split over several programs
    launch_cache.py  relaunching compiled Triton kernels without per-call specialisation
    graph_cache.py   CUDA graphs of a launch schedule, captured once and replayed
    plan.py          ``SamplerPlan``: plan on the host, run on the device with no sync (capturable)

Numbers: docs/sampling.md (python -m bench run --concept sampling)."""
from __future__ import annotations

import torch

from optimized.sampling import dispatch
from optimized.sampling.plan import SamplerPlan  # noqa: F401  (the optional contract name)
from reference.sampling import SamplingParams  # noqa: F401  (vocabulary, re-exported: same names as reference)


def sampling_probs(logits, params: SamplingParams | None = None, *, prompt_tokens=None,
                   output_tokens=None) -> torch.Tensor:
    """Same contract as :func:`reference.sampling.sampling_probs`, computed sort-free (the default
    schedule of :func:`optimized.sampling.dispatch.sampling_probs`)."""
    return dispatch.sampling_probs(logits, params, prompt_tokens=prompt_tokens, output_tokens=output_tokens)


def sample(logits, params: SamplingParams | None = None, generator: torch.Generator | None = None, *,
           prompt_tokens=None, output_tokens=None, uniforms: torch.Tensor | None = None) -> torch.Tensor:
    """Same contract as :func:`reference.sampling.sample`: inverse CDF in token-id order over the
    kept set, one float64 uniform per row (from ``generator`` or ``uniforms``); the default
    schedule of :func:`optimized.sampling.dispatch.sample`."""
    return dispatch.sample(logits, params, generator, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                           uniforms=uniforms)
