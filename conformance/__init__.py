"""The inferspec harness: load implementations, resolve contract names, run the spec, report.

Public pieces:
    load_implementation   -- a module name or file path -> Implementation
    CONCEPTS              -- the concept registry (id -> Concept)
    assert_close_to_oracle -- the tolerance rule (docs/design.md)
"""
from conformance.registry import CONCEPTS, Concept, concept
from conformance.loader import Implementation, NotImplementedInImpl, load_implementation
from conformance.tolerance import assert_close_to_oracle

__all__ = [
    "CONCEPTS",
    "Concept",
    "concept",
    "Implementation",
    "NotImplementedInImpl",
    "load_implementation",
    "assert_close_to_oracle",
]
