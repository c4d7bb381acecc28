"""The inferspec harness: load implementations, resolve contract names, run the spec, report.

Public pieces:
    load_implementation   -- a module name or file path -> Implementation
    CONCEPTS              -- the concept registry (id -> Concept)
    assert_close_to_oracle -- the tolerance rule (docs/design.md)

They are imported on first use (PEP 562): ``import conformance`` itself imports nothing heavy, so
``inferspec --help`` and every usage error answer without importing torch.
"""
from __future__ import annotations

import importlib

# public name -> the submodule that defines it
_LAZY = {
    "CONCEPTS": "conformance.registry",
    "Concept": "conformance.registry",
    "concept": "conformance.registry",
    "Implementation": "conformance.implementation",
    "NotImplementedInImpl": "conformance.implementation",
    "load_implementation": "conformance.loader",
    "assert_close_to_oracle": "conformance.tolerance",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'conformance' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups do not come back here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
