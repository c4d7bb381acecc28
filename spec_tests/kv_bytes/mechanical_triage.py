"""Surviving mechanical variants of reference/kv_bytes.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""
_CHECK = '_positive_int("free_bytes", free_bytes, allow_zero=True)'
_DIV = ("return free_bytes // kv_bytes_per_token(layers=layers, kv_heads=kv_heads, head_dim=head_dim, "
        "dtype=dtype)")

TRIAGE = {
    ("reference", _CHECK, 'drop `_positive_int("free_bytes", free_bytes, allow_zero=True)`'): (
        "outside the contract", "max_context_tokens is a helper of the docs, not in __all__: no contract name calls it"),
    ("reference", _CHECK, "_positive_int(a, b, ...) -> _positive_int(b, a, ...)"): (
        "outside the contract", "max_context_tokens is a helper of the docs, not in __all__: no contract name calls it"),
    ("reference", _DIV, "// -> /"): (
        "outside the contract", "max_context_tokens is a helper of the docs, not in __all__: no contract name calls it"),
    ("reference", "element_bytes(dtype)", "drop `element_bytes(dtype)`"): (
        "equivalent", "torch.zeros then rejects a non-dtype itself, with a TypeError naming dtype"),
}
