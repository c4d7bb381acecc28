"""Planted bugs of `speculative` (placeholder, filled below)."""
from conformance.mutants import Patch

MUTANTS = []
