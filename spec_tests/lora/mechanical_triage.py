"""Surviving mechanical variants of reference/lora.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

The sample of 60 of the reference's variants (``--sample 60``, five dev seeds) killed 57; two
survivors were gaps (merge_lora's tensor checks of lora_a and lora_b: no bad-input row passed a
non-tensor there; closed by the rows "list lora_a" and "list lora_b"); the third is below.
"""

TRIAGE = {
    ("reference", "if adapter_ids.shape[0] != batch:", "0 -> -1"): (
        "equivalent", "adapter_ids is checked to be 1-D just before: shape[-1] is shape[0]"),
}
