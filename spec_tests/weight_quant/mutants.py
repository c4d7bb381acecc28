"""Planted bugs of `weight_quant` (each must make a weight_quant test fail).

Reference mutants patch reference/weight_quant.py (quantize, pack, GPTQ); kernel mutants patch the
real Triton source of optimized/_weight_quant_triton.py or its launcher, so the bug runs in the
same kernel code (under the interpreter on CPU)."""
from conformance.declarations import Patch

KERNEL = "optimized/_weight_quant_triton.py"

MUTANTS = [
    Patch("round_half_away",
          "Rounding is floor(x + 0.5) (half away from zero for positives, half up for negatives) instead of "
          "round-half-to-even: every exact midpoint of the grid may land on the odd neighbour.",
          "    return (torch.round(w / scale.double()) + zero)",
          "    return (torch.floor(w / scale.double() + 0.5) + zero)"),
    Patch("scale_from_max_not_absmax",
          "The symmetric scale is taken from the group's largest value, not its largest magnitude: a group "
          "whose biggest weight is negative is clipped.",
          "        scale = (wg.abs().amax(dim=-1) / qmax).to(torch.float32)",
          "        scale = (wg.amax(dim=-1).clamp(min=0) / qmax).to(torch.float32)"),
    Patch("scale_over_maxq_symmetric",
          "The symmetric scale divides by 2^bits - 1 (15) instead of 2^(bits-1) - 1 (7): half the step, "
          "so the group's largest weights fall outside the code range and are clamped.",
          "        qmax = (1 << (bits - 1)) - 1\n        scale",
          "        qmax = (1 << bits) - 1\n        scale"),
    Patch("asym_range_without_zero",
          "The asymmetric range is [w_min, w_max] without widening it to hold 0: for an all-positive group "
          "the zero point -w_min/s is negative, clamps to 0, and the top of the group is clipped.",
          "        lo = wg.amin(dim=-1).clamp(max=0.0)",
          "        lo = wg.amin(dim=-1)"),
    Patch("zero_point_truncated",
          "The asymmetric zero point is truncated (int(-lo / s)) instead of rounded to nearest.",
          "        zero = torch.round(-lo / scale.double()).clamp(0, maxq).to(torch.int64)",
          "        zero = torch.trunc(-lo / scale.double()).clamp(0, maxq).to(torch.int64)"),
    Patch("pack_high_nibble_first",
          "pack_int4 puts element 2i in the HIGH nibble (torchao's tinygemm input order) instead of the "
          "contract's low nibble.",
          "    return codes[..., 0::2] | (codes[..., 1::2] << 4)",
          "    return (codes[..., 0::2] << 4) | codes[..., 1::2]"),
    Patch("gptq_scale_from_original_weights",
          "GPTQ computes each group's scale and zero from the ORIGINAL weights instead of the weights as "
          "updated by the error feedback when the group starts.",
          "            scales[:, g], zeros[:, g] = group_params(work[:, j:j + group], bits, symmetric)",
          "            scales[:, g], zeros[:, g] = group_params(w.detach().to(torch.float32).double()[:, j:j + group], "
          "bits, symmetric)"),
    Patch("gptq_error_not_divided_by_diagonal",
          "GPTQ feeds the raw rounding error w - q forward instead of (w - q) / U[j, j] (the OBS update's "
          "division by the inverse Hessian's diagonal is lost).",
          "        err = (work[:, j] - (codes[:, j] - z).double() * s.double()) / u[j, j]",
          "        err = (work[:, j] - (codes[:, j] - z).double() * s.double())"),
    Patch("gptq_absolute_damping",
          "GPTQ adds damp itself (0.01) to the diagonal instead of damp x mean(diag H).",
          "    diag += damp * float(diag.mean())",
          "    diag += damp"),
    Patch("kernel_nibbles_swapped",
          "The kernel takes the even column's code from the high nibble and the odd column's from the low.",
          "        low = (packed & 0xF).to(tl.float32)           # codes of columns k0 + 2j\n"
          "        high = (packed >> 4).to(tl.float32)           # codes of columns k0 + 2j + 1\n",
          "        low = (packed >> 4).to(tl.float32)           # codes of columns k0 + 2j\n"
          "        high = (packed & 0xF).to(tl.float32)           # codes of columns k0 + 2j + 1\n", file=KERNEL),
    Patch("kernel_zero_not_subtracted",
          "The GEMV-style path applies the scale but forgets the zero point's term s * z * sum(x).",
          "            acc += s[None, :] * (dot - z[None, :] * x_sum[:, None])",
          "            acc += s[None, :] * dot", file=KERNEL),
    Patch("kernel_group_index_off",
          "The kernel computes the group of a tile from the packed byte index (k0 / 2) instead of the "
          "column k0: from the middle of the row on it reads the wrong group's scale and zero.",
          "        g = k0 // GROUP\n",
          "        g = (k0 // 2) // GROUP\n", file=KERNEL),
    Patch("kernel_scale_before_zero",
          "The tensor-core path dequantises as u * s - z instead of (u - z) * s.",
          "            w = ((tl.interleave(low, high) - z[:, None]) * s[:, None]).to(X.dtype.element_ty)",
          "            w = (tl.interleave(low, high) * s[:, None] - z[:, None]).to(X.dtype.element_ty)", file=KERNEL),
    Patch("kernel_last_split_dropped",
          "The launcher counts the K splits with a floor instead of a ceiling: when the tiles do not divide "
          "evenly the last, partial split is never launched.",
          "    split = -(-tiles // per_split)\n",
          "    split = max(1, tiles // per_split)\n", module="optimized"),
]
