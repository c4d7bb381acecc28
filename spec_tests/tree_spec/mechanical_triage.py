"""Surviving mechanical variants of reference/tree_spec.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""

TRIAGE = {
    ("reference", 'raise ValueError(f"{name}[{i}] is not a probability vector: it holds NaN or inf")',
     "drop `raise ValueError(f'{name}[{i}] is not a probability vector: `"): (
        "equivalent", "a non-finite row still fails the next checks (a -inf is negative; NaN/inf make the sum "
                      "nan/inf, 'sums to nan/inf, not 1'): a ValueError naming the argument, all the contract asks"),
    ("reference", "ok_depth = [0] + [-1] * (len(parents) - 1)   # depth of node i if its whole path is kept, else -1",
     "0 -> 1"): (
        "equivalent", "every kept depth shifts by one; depths are only compared with each other and with >= 0, "
                      "which the root passes either way"),
}
