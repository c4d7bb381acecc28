"""Surviving mechanical variants of reference/paged.py and optimized/paged.py that are not gaps of
the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the
change).

Gaps closed since (no entry here): ``num_tokens`` (and any read that takes a sequence id) must
check the id's type before the lookup -- a float, list or None id is a ``TypeError`` naming
``seq``, not a ``KeyError`` (optimized mech 1; bad-input rows "length of a float seq", "length of
a list seq", "table of a float seq", "slots of a None seq" in test_allocator.py).
"""

TRIAGE = {
    ("optimized", "taken.reverse()", "drop `taken.reverse()`"): (
        "equivalent", "the variant still takes exactly the top k free blocks, only in another order within "
                      "one call; which free block a call takes is open by the contract ('implementations may "
                      "choose any free block') and every test of the concept compares ids up to a consistent "
                      "renaming (only spec_tests/bundled/ pins the bundled allocators' LIFO ids)"),
    ("reference", "return self.free_blocks.pop(0)", "0 -> -1"): (
        "equivalent", "which free block is taken is open by the contract (block ids are compared up to a "
                      "renaming, a bijection kept across the whole run); pop(-1) is another consistent choice"),
    ("reference", "self.free_blocks.insert(0, block)", "0 -> 1"): (
        "equivalent", "the order of the free list is the block choice the contract leaves open; inserting at 1 "
                      "keeps every freed block free and every used one used"),
    ("reference", "self.free_blocks.insert(0, block)", "0 -> -1"): (
        "equivalent", "the order of the free list is the block choice the contract leaves open; inserting before "
                      "the last keeps every freed block free and every used one used"),
}
