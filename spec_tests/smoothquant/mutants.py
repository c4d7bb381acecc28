"""Planted bugs of `smoothquant` (each must make a smoothquant test fail): one-line slips a careful
engineer makes when writing SmoothQuant and W8A8."""
from conformance.declarations import Patch

MUTANTS = [
    # smoothing
    Patch("alpha_swapped",
          "The exponents of eq. 4 swapped: s = max|X|^(1-alpha) / max|W|^alpha (equal at alpha 0.5 only).",
          "    s = x_max.pow(alpha) / w_max.pow(1.0 - alpha)\n",
          "    s = x_max.pow(1.0 - alpha) / w_max.pow(alpha)\n"),
    Patch("weight_absmax_per_output_channel",
          "max|W_j| taken over the wrong axis of the (out, in) weight: one value per output channel "
          "(the nn.Linear layout confused with (in, out)).",
          "    w_max = weight.to(dtype).abs().amax(dim=0)",
          "    w_max = weight.to(dtype).abs().amax(dim=1)"),
    Patch("zero_guard_missing",
          "No guard for zero columns: s_j = 0 / m or m / 0 (0, inf or nan) for a dead channel.",
          "    return torch.where((x_max > 0) & (w_max > 0), s, torch.ones_like(s))\n",
          "    return s\n"),
    Patch("smooth_multiplies_x",
          "The migration multiplies both sides by s (X diag(s), W diag(s)) instead of dividing X.",
          "    x_smooth = (x.to(compute_dtype(x.dtype)) / s.to(",
          "    x_smooth = (x.to(compute_dtype(x.dtype)) * s.to("),
    Patch("smooth_divides_weight_rows",
          "W' scales the rows of W (output channels, s broadcast as a column) instead of its columns: "
          "wrong unless out == in, where it silently changes the product.",
          "    w_smooth = (weight.to(compute_dtype(weight.dtype)) * s.to(compute_dtype(weight.dtype))).to(weight.dtype)",
          "    w_smooth = (weight.to(compute_dtype(weight.dtype)) * s.to(compute_dtype(weight.dtype))[:weight.shape[0], None]).to(weight.dtype)"),
    # calibration
    Patch("calibration_keeps_last_batch",
          "The running absmax is overwritten by each batch instead of maxed with it.",
          "            absmax = torch.maximum(absmax, x.abs().amax(dim=0).to(absmax.dtype))\n",
          "            absmax = x.abs().amax(dim=0).to(absmax.dtype)\n"),
    Patch("calibration_max_not_absmax",
          "Calibration keeps max(x), not max(|x|): a channel whose outliers are negative is missed.",
          "            absmax = torch.maximum(absmax, x.abs().amax(dim=0).to(absmax.dtype))\n",
          "            absmax = torch.maximum(absmax, x.amax(dim=0).to(absmax.dtype))\n"),
    # INT8
    Patch("round_half_away",
          "Rounds half away from zero (C's round) instead of half to even.",
          "    return torch.clamp(torch.round(t / scale), -QMAX, QMAX).to(torch.int8)\n",
          "    r = t / scale\n"
          "    return torch.clamp(torch.sign(r) * torch.floor(r.abs() + 0.5), -QMAX, QMAX).to(torch.int8)\n"),
    Patch("round_half_up",
          "Rounds with floor(x + 0.5): half up, not half to even.",
          "    return torch.clamp(torch.round(t / scale), -QMAX, QMAX).to(torch.int8)\n",
          "    return torch.clamp(torch.floor(t / scale + 0.5), -QMAX, QMAX).to(torch.int8)\n"),
    Patch("scale_over_128",
          "scale = absmax / 128 (the int8 range taken as 256 levels): the absmax element needs code 128.",
          "    return torch.where(absmax > 0, absmax / QMAX, torch.ones_like(absmax))\n",
          "    return torch.where(absmax > 0, absmax / 128, torch.ones_like(absmax))\n"),
    Patch("no_saturation",
          "No clamp: a value beyond 127 * scale (a static scale) wraps around in the int8 cast.",
          "    return torch.clamp(torch.round(t / scale), -QMAX, QMAX).to(torch.int8)\n",
          "    return torch.round(t / scale).to(torch.int8)\n"),
    Patch("per_tensor_scale_from_max",
          "The per-tensor scale from max(x), not max(|x|): negative outliers are clipped.",
          "        x_scale = _scale_of(xc.abs().max() if xc.numel() else xc.new_zeros(()))\n",
          "        x_scale = _scale_of(xc.max() if xc.numel() else xc.new_zeros(()))\n"),
    Patch("weight_scale_per_input_channel",
          "Per-channel weight scales taken per input channel (columns of (out, in)) instead of per "
          "output channel (rows): the scale cannot be pulled out of the matmul's sum.",
          "        w_scale = _scale_of(wc.abs().amax(dim=1, keepdim=True))\n",
          "        w_scale = _scale_of(wc.abs().amax(dim=0, keepdim=True))\n"),
    # the product
    Patch("float32_accumulation",
          "The int8 matmul accumulates in float32 (a GPU GEMM without an int path): inexact past 2**24.",
          "    return torch.matmul(x_q.to(torch.int32), w_q.to(torch.int32).T)\n",
          "    return torch.matmul(x_q.to(torch.float32), w_q.to(torch.float32).T).to(torch.int32)\n"),
    Patch("rescale_transposed",
          "The rescale multiplies by w_scale as returned, (out, 1), not transposed: it broadcasts along "
          "the tokens (silently wrong when tokens == out, a shape error otherwise).",
          "    y = acc.to(x_scale.dtype) * x_scale * w_scale.reshape(-1)\n",
          "    y = acc.to(x_scale.dtype) * x_scale * w_scale\n"),
]
