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
    ("optimized", "nan = (code & 0x7F) > (((1 << f.exp_bits) - 1) << f.man_bits if f.has_inf else _max_code(f))",
     "127 -> 126"): (
        "equivalent", "the float32 cast path: torch's float8 casts turn every NaN (any payload) into 0x7F/0xFF "
                      "(measured on payloads 0x400000, 0x1, 0x200000, 0x600000, 0x100000, 0x7FFFFF), and "
                      "0x7F & 0x7E = 0x7E is still above e5m2's 0x7C, while for e4m3 0x7F with its sign bit already "
                      "is the canonical NaN; no finite or infinite value casts to 0x7D"),
    ("optimized", "man = c & ((1 << f.man_bits) - 1)", "1 -> 2 (#2)"): (
        "equivalent", "the extra bit is the exponent field's lowest bit, OR-ed into the float64 exponent's lowest "
                      "bit, which (field - bias + 1023) already has: 1023 - bias is even for every format (bias "
                      "1, 7, 15, 127); subnormals have field 0"),
    **{("optimized", line, change): (
        "equivalent", "the decode table's Inf entries: fp8_e5m2 decodes through torch's float8 view, never the "
                      "table, and representable() keeps only the table's finite values, so an Inf entry made "
                      "+-0 (already there) or NaN (dropped like Inf) is never observed")
       for line, change in (
           ('value = torch.where(inf, value.sign() * float("inf"), value)', "* -> /"),
           ("inf = (c & ((1 << (f.bits - 1)) - 1)) == ((1 << f.exp_bits) - 1) << f.man_bits", "1 -> 2"),
           ("inf = (c & ((1 << (f.bits - 1)) - 1)) == ((1 << f.exp_bits) - 1) << f.man_bits", "1 -> 2 (#4)"))},
    ("reference", "man_bits: int = 0", "0 -> 1"): (
        "equivalent", "a default only the integer formats take (int8, int4), whose code paths never read "
                      "man_bits; every float format names its own"),
    ("reference", "emax_elem: int = 0        # MX: the exponent of the element format's largest normal",
     "0 -> -1"): (
        "equivalent", "a default only NVFP4 takes, whose scale is an E4M3 of amax / 6 and never reads emax_elem; "
                      "every MX format names its own"),
}
