"""Every choice the optimized sampler makes, as values passed in: one frozen dataclass per schedule
and :class:`SamplerConfig`, which bundles them. Nothing here reads the environment or changes at
run time. The contract functions of optimized.sampling use the defaults; a benchmark or a test
that wants another schedule or another setting passes ``schedule=`` and ``config=`` to
:func:`optimized.sampling.dispatch.sample` / :func:`optimized.sampling.dispatch.sampling_probs`.

Importing this module imports neither Triton nor a kernel."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

# "auto": the split Triton schedule on CUDA for float32 compute, the torch schedule elsewhere.
# "torch": the torch schedule (torch_path.py), on every device.
# "split" / "one-program": that Triton schedule (split_row.py / one_program.py) on CUDA for float32
# compute, and on CPU tensors when the Triton interpreter is on (TRITON_INTERPRET=1) and the batch
# fits SamplerConfig's interpreter limits; anything else (float64 compute, a CPU without the
# interpreter, a larger batch) takes the torch schedule.
SCHEDULES = ("auto", "torch", "split", "one-program")


@dataclass(frozen=True)
class TorchPathConfig:
    """The torch schedule (optimized/sampling/torch_path.py)."""
    fast_path_max_k: int = 256          # rows with 1 <= top_k <= this (and top_k < vocab) take the topk fast path
    topk_chunk: int | None = None       # the fast path's topk through chunk maxima: chunks of this many
                                        # logits (None: sqrt(vocab / k); 0: one plain torch.topk)
    fused_tail: bool | str = "auto"     # the fast path's tail as one Triton kernel (fused_tail.py):
                                        # "auto" = on CUDA, True = wherever Triton runs, False = never
    fused_tail_max_candidates: int = 128  # the fused tail takes batches whose largest top_k + 1 <= this
    buckets: int = 1024                 # the general path's histogram of z
    row_block: int = 64                 # CPU: rows per block of the general path (bounds its temporaries)
    cdf_chunk: int = 256                # the draw's two-level inverse CDF: chunk length

    def __post_init__(self):
        if self.fused_tail not in ("auto", True, False):
            raise ValueError(f"fused_tail must be 'auto', True or False, got {self.fused_tail!r}")


@dataclass(frozen=True)
class OneProgramConfig:
    """The one-program-per-row Triton schedule (optimized/sampling/one_program.py); the CUDA
    launch configuration (bench/cases/sampling.py times it against the others)."""
    block: int = 1024                   # logits per block of a pass (at most the vocabulary's next power of 2)
    pivots: int = 8                     # pivots per search pass (a power of 2)
    num_warps: int = 8
    gather_cap: int = 1024              # a search gathers its candidates once <= this many tokens are
                                        # left (a power of 2)


# Under the interpreter (CPU) the gather cap is small, so that the tests run both the row passes and
# the gathered finish.
ONE_PROGRAM_INTERPRETER = OneProgramConfig(gather_cap=16)


@dataclass(frozen=True)
class SplitConfig:
    """The split-row Triton schedule (optimized/sampling/split_row.py): each row split over
    ``programs_per_row`` programs per full pass (the chunk length is rounded up to whole blocks);
    ``search_passes`` search passes are launched with no sync; a row still searching after them is
    redone by the one-program kernel.

    H200, 256 x 128,256 fp32 (docs/performance.md): 4 pivots with 5 passes beat 8 with 4 on every
    workload; the CUDA graph beat eager launches in 7 of 8 workload-runs (by 15-23 % when the host
    was loaded), although it copies the logits; it keeps one copy per cached shape. Block 256 with
    2 warps vs 512 with 4: 5-20 % faster in two runs, 5-13 % slower in the third (the one with the
    sampling spec passed natively at this config): within the run-to-run noise of a host-bound
    call. The first pass (max, flags; a plain reduction) runs at its own block, 1024 / 8 warps:
    0.11 ms at 256 / 2 (sampling_split_profile5.log) against 0.09 ms in the final profile
    (profile6.log) and 0.05 ms in an earlier one where every kernel ran at 1024 / 8 (profile.log,
    docs/results/)."""
    programs_per_row: int = 16
    block: int = 256                    # logits per block of a chunk's pass
    pivots: int = 4                     # pivots per search pass: 4 or 8 (the pass kernel writes them out)
    num_warps: int = 2
    gather_cap: int = 2048              # a search gathers once <= this many candidates are left (a power of 2)
    search_passes: int = 5
    cuda_graph: bool = True             # on CUDA, replay the launches as one captured CUDA graph
    scan_block: int = 1024              # the first pass (max, flags): its own block and warps
    scan_warps: int = 8
    cache_launches: bool = True         # on CUDA, relaunch each compiled kernel directly
                                        # (launch_cache.py); False: plain kernel[grid](...) launches,
                                        # and no CUDA graph

    def __post_init__(self):
        if self.pivots not in (4, 8):
            raise ValueError(f"pivots must be 4 or 8 (the pass kernel's written-out pivots), got {self.pivots}")


# Off CUDA (the interpreter): small chunks and gather cap, so that a few-hundred-token row takes
# several passes, gathers, finishes on the row, and sometimes needs the one-program redo.
SPLIT_INTERPRETER = SplitConfig(programs_per_row=4, block=32, gather_cap=16, search_passes=3,
                                scan_block=64, scan_warps=4)


def one_program_default(device) -> OneProgramConfig:
    """The one-program schedule's configuration for tensors on ``device``."""
    return OneProgramConfig() if torch.device(device).type == "cuda" else ONE_PROGRAM_INTERPRETER


def split_default(device) -> SplitConfig:
    """The split-row schedule's configuration for tensors on ``device``."""
    return SplitConfig() if torch.device(device).type == "cuda" else SPLIT_INTERPRETER


@dataclass(frozen=True)
class SamplerConfig:
    """Every setting of every schedule, one object (the schedule itself is dispatch's
    ``schedule=`` argument). ``split`` / ``one_program`` None: that schedule's default for the
    logits' device (:func:`split_default`, :func:`one_program_default`)."""
    torch_path: TorchPathConfig = field(default_factory=TorchPathConfig)
    split: SplitConfig | None = None
    one_program: OneProgramConfig | None = None
    interpreter_max_rows: int = 64       # off CUDA a Triton schedule runs (interpreted, one program
    interpreter_max_vocab: int = 4096    # at a time) only for batches up to this many rows x tokens


DEFAULT = SamplerConfig()
