"""The measurements use public APIs only: no file of bench/ imports a private name or reaches
into a module for one (optimized/'s, reference/'s, or anyone's). A benchmark that needs a kernel
without its checks calls the public, keyword-only entry the kernel module offers for it
(optimized.flash_attention.flash_forward / flash_backward, paged_attention_unchecked,
decode_attention_unchecked, matmul_tiled, speculative.verify_with), so that a refactoring of a
kernel's internals cannot silently break or bypass its benchmark.

The same check by hand: a grep of bench/ for "import" followed by a space and an underscore, or
for a dot followed by an underscore and a letter, finds nothing.
"""
from __future__ import annotations

import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
PRIVATE = re.compile("import" + r" _|\." + "_[a-z]")


def test_no_private_names_in_bench():
    hits = []
    for path in sorted(BENCH.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if PRIVATE.search(line):
                hits.append(f"{path.relative_to(BENCH.parent)}:{n}: {line.strip()}")
    assert not hits, "private names used by the benchmarks:\n" + "\n".join(hits)


def test_the_pattern_catches_what_it_should():
    u = "_"
    for line in (f"from optimized import {u}sampling_split", f"fa.{u}flash_forward(q)", f"import optimized.{u}x as y",
                 f"from optimized.batch_invariant import {u}decode_kernels"):
        assert PRIVATE.search(line), line
    for line in ("fa.flash_forward(q, k, v, causal=True)", "x.__class__", "import torch"):
        assert not PRIVATE.search(line), line
