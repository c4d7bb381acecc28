"""Planted bugs of `roofline` (each must make a roofline test fail): the slips of 02.04-02.06."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("ridge_inverted", "The ridge point as bandwidth / peak (bytes per FLOP) instead of peak / bandwidth.",
          "    return _result(p / b, peak_flops, bandwidth)\n",
          "    return _result(b / p, peak_flops, bandwidth)\n"),
    Patch("attainable_max", "The roofline as the higher ceiling, max(P, I x B): every kernel 'attains' the peak "
          "or more.",
          "    return _result(min(p, i * b), intensity, peak_flops, bandwidth)\n",
          "    return _result(max(p, i * b), intensity, peak_flops, bandwidth)\n"),
    Patch("ridge_counts_as_memory", "A kernel exactly at the ridge called memory-bound (I x B <= P): it reaches "
          "the peak, so it is compute-bound.",
          '    return "memory" if i * b < p else "compute"\n',
          '    return "memory" if i * b <= p else "compute"\n'),
    Patch("time_adds", "The roofline time as the sum of the compute and the memory times, as if a kernel never "
          "overlapped its loads with its arithmetic.",
          "    return _result(max(f / p, m / b), flops, bytes_moved, peak_flops, bandwidth)\n",
          "    return _result(f / p + m / b, flops, bytes_moved, peak_flops, bandwidth)\n"),
    Patch("fraction_of_peak", "The fraction of the roofline measured against the peak FLOP/s whatever the "
          "intensity: a memory-bound kernel at full bandwidth scores a few percent.",
          "    return _result(a / min(p, i * b), achieved_flops, intensity, peak_flops, bandwidth)\n",
          "    return _result(a / p, achieved_flops, intensity, peak_flops, bandwidth)\n"),
    Patch("decode_ignores_batch", "The decode step's intensity taken at batch 1 whatever the batch: batching "
          "never changes the regime.",
          "    step = dict(batch=batch, new_tokens=1, context=context)\n",
          "    step = dict(batch=1, new_tokens=1, context=context)\n"),
    Patch("batch_ignores_kv", "The rule of thumb 'decode turns compute-bound at batch = ridge / intensity(1)': "
          "every byte counted as a weight read once per step, the per-sequence KV cache and embedding rows "
          "forgotten (never None, too small at any context).",
          "    per_seq = forward_bytes(config, batch=2, **step) - one   # a sequence's embedding row and KV cache\n",
          "    per_seq = 0   # every byte a weight, read once per step\n"),
    Patch("batch_floor_plus_one", "The ceiling written as floor + 1: one too many when the ridge is reached at an "
          "exact batch.",
          "    return math.ceil(p * shared / gain)\n",
          "    return math.floor(p * shared / gain) + 1\n"),
]
