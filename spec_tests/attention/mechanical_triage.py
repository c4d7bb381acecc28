"""Surviving mechanical variants of reference/attention.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gaps closed since (no entry here): q, k, v on different devices (test_rejects_tensors_on_another_device,
"meta" as the other device; kills reference mech 8); attention_tiled's fully masked rows (0, lse
-inf, never NaN: test_tiled_fully_masked_rows_are_zero_with_lse_minus_inf; kills 101, 122); its
zero block_k (bad-input row "zero block_k"; kills 92); and its default tiles 16 x 16, a choice of
the reference (test_tiled_default_tiles_are_16; kills 37-40).
"""

TRIAGE = {
    ("reference", "m_new = torch.maximum(m, s.amax(dim=-1))", "maximum(a, b, ...) -> maximum(b, a, ...)"): (
        "equivalent", "torch.maximum is symmetric elementwise (NaN from either side included), and both "
                      "operands have the shape and dtype (batch, rows) of the accumulator"),
    ("reference", "scores = torch.matmul(qg, k.unsqueeze(2).transpose(-1, -2)).to(acc) * scale",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(-2, -1) swaps the same two dims as transpose(-1, -2): the same view"),
    ("reference", "s = torch.matmul(qi, kh[:, j0:j0 + block_k].transpose(-1, -2)).to(acc_dtype) * scale",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(-2, -1) swaps the same two dims as transpose(-1, -2): the same view"),
}
