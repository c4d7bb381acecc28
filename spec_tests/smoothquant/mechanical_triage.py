"""Surviving mechanical variants of reference/smoothquant.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gaps the first sample (40 variants) found, closed since (no entry here): the zero-column guard's
``x_max > 0`` as ``>=`` (a dead activation channel with a live weight column gave s = 0; the
strategies now zero x's channel alone too, pinned by an example).
"""

TRIAGE = {
    ("reference", "MAX_IN_FEATURES = (2**31 - 1) // (128 * 128)  # 131071: int32 accumulation cannot overflow",
     "1 -> 2"): ("equivalent", "(2**31 - 2) // 16384 and (2**31 - 1) // 16384 are both 131071"),
    ("reference", "MAX_IN_FEATURES = (2**31 - 1) // (128 * 128)  # 131071: int32 accumulation cannot overflow",
     "// -> /"): ("equivalent", "131071.99994 instead of 131071: an integer in_features is above one exactly when it "
                                "is above the other"),
    ("reference", "first = batches[0]", "0 -> -1"): (
        "equivalent", "first is only the batch every other is compared with: a legal list has one dtype and one in, "
                      "so the result (shape, dtype, values) is the same; an illegal one is rejected either way with "
                      "the same error type naming batches (only which index the message blames may change)"),
    ("reference", "absmax = torch.maximum(absmax, x.abs().amax(dim=0).to(absmax.dtype))",
     "maximum(a, b, ...) -> maximum(b, a, ...)"): (
        "equivalent", "torch.maximum is symmetric, NaN included (either operand's NaN propagates)"),
    ("reference", "if act_absmax.shape[0] != weight.shape[1]:", "0 -> -1"): (
        "equivalent", "act_absmax was checked 1-D just before (check_tensor ndim=1): shape[0] is shape[-1]"),
    ("reference", "if s.shape[0] != weight.shape[1]:", "0 -> -1"): (
        "equivalent", "s was checked 1-D just before (check_tensor ndim=1): shape[0] is shape[-1]"),
}
