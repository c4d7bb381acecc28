"""Surviving mechanical variants of reference/formats.py and optimized/formats.py that are not gaps
of the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gap the first sample found, closed since (no entry here): ``dequantize_blocks`` rejecting 1-d codes
(``codes.dim() < 2``): test_blocks.py now dequantises a 1-d tensor of every block format.
"""

_NVFP4_RECHECK = ("equivalent", "quantize_blocks' early tensor_scale > 0 check: the NVFP4 path checks the float32 value "
                                 "again (0 < s < inf) before anything is computed, with the same ValueError naming "
                                 "tensor_scale (the call has no state)")

TRIAGE = {
    ("reference", "if tensor_scale <= 0:", "<= -> <"): _NVFP4_RECHECK,
    ("reference", 'raise ValueError(f"tensor_scale must be > 0, got {tensor_scale}")',
     'drop `raise ValueError(f"tensor_scale must be > 0, got {tensor_sca`'): _NVFP4_RECHECK,
    ("reference", 'raise ValueError(f"x\'s amax {tensor_scale * NVFP4_RANGE:g} is beyond a float32 tensor scale\'s range '
                  '(amax / 2688 > 3.4e38)")',
     'drop `raise ValueError(f"x\'s amax {tensor_scale * NVFP4_RANGE:g} i`'): (
        "equivalent", "without it the tensor scale is inf, every block scale decodes to NaN, and encoding the "
                      "elements into E2M1 (no NaN) raises the ValueError naming x that the bad-input row asks for; the "
                      "call has no state"),
    ("reference", "return torch.uint8 if self.bits <= 8 else torch.int32", "8 -> 9"): (
        "equivalent", "no format has 9 bits: every format is 4, 8 or 16 bits wide, on the same side of 8 and of 9"),
    ("optimized", "return (top << f.man_bits) | ((1 << f.man_bits) - 1)", "- -> +"): (
        "equivalent", "this branch is E2M1's only (no Inf, no NaN), where m = 1: (3 << 1) | 1 and (3 << 1) | 3 "
                      "are both 7, the largest code"),
    ("optimized", "sign = (c >> (f.bits - 1)) << 63", "63 -> 62"): (
        "equivalent", "the decode table reads the sign only as `sign != 0`; any nonzero shift of a set sign bit "
                      "is nonzero"),
    ("reference", "e = torch.where(q > 0, _exponent(torch.where(q > 0, q, 1.0)), float(emin)).clamp(min=emin)",
     "0 -> -1 (#2)"): (
        "equivalent", "q >= 0 always, so only q == 0 changes (its e becomes -1 clamped); a zero is subnormal "
                      "(q < 2^emin), and the subnormal branch never reads e"),
}
