"""The decode numbers of docs/roofline.md, computed by reference/roofline.py on the real shapes of
spec_tests/roofline/configs.py and the H200's measured roof (read from docs/results by plot.py):
no measurement, no GPU.

    python -m spec_tests.roofline.figures

Prints, per model: the intensity of a batch-1 decode step at contexts 0 to 32k, the bound
max(2/e, 2H/(Ke)), the batch where decode turns compute-bound at each context, and the shortest
context from which no batch does.
"""
from __future__ import annotations

from fractions import Fraction

from reference.flops import forward_bytes, forward_flops
from reference.roofline import compute_bound_batch, ridge_point
from spec_tests.roofline.configs import REAL
from spec_tests.roofline.plot import ceilings

CONTEXTS = (0, 128, 512, 1024, 2048, 4096, 8191, 32767)


def never_from(c, peak, bandwidth) -> int | None:
    """The shortest context from which no batch is compute-bound (a bisection: the answer is None
    from some context on and stays None)."""
    if compute_bound_batch(c, context=c.max_seq_len - 1, peak_flops=peak, bandwidth=bandwidth) is not None:
        return None
    lo, hi = 0, c.max_seq_len - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if compute_bound_batch(c, context=mid, peak_flops=peak, bandwidth=bandwidth) is None:
            hi = mid
        else:
            lo = mid
    return hi


def table(peak, bandwidth) -> list[str]:
    lines = [f"ridge {float(ridge_point(peak, bandwidth)):.1f} FLOPs/byte", "",
             "| model | context | batch-1 FLOPs/byte | bound max(2/e, 2H/(Ke)) | compute-bound from batch |",
             "|---|---:|---:|---:|---:|"]
    for name, c in REAL.items():
        bound = max(Fraction(2, 2), Fraction(2 * c.n_heads, c.n_kv_heads * 2))
        for n in CONTEXTS:
            if n >= c.max_seq_len:
                continue
            step = dict(batch=1, new_tokens=1, context=n)
            ai = forward_flops(c, **step) / forward_bytes(c, **step)
            b = compute_bound_batch(c, context=n, peak_flops=peak, bandwidth=bandwidth)
            lines.append(f"| {name} | {n:,} | {ai:.3f} | {float(bound):g} | {'never' if b is None else f'{b:,}'} |")
        lines.append(f"| {name} | never from context | | | {never_from(c, peak, bandwidth)} |")
    return lines


def main() -> None:
    roof = ceilings()
    print(f"H200 measured roof: {roof['peak'] / 1e12:.1f} TFLOP/s ({roof['peak_source']}), "
          f"{roof['bandwidth'] / 1e12:.3f} TB/s ({roof['bandwidth_source']})")
    print("\n".join(table(roof["peak"], roof["bandwidth"])))
    print("\nIllustrative device 800 TFLOP/s, 4 TB/s (exact):")
    print("\n".join(table(800 * 10**12, 4 * 10**12)))


if __name__ == "__main__":
    main()
