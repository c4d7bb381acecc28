"""Compile Triton kernels for an H100/H200 (sm_90) without a GPU, in a subprocess: the interpreter
(which the bundled tests run under on a CPU machine) accepts code the compiler rejects (globals,
loop-carried types, specialised constants), so every bundled Triton kernel has such a check."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def assert_compiles_for_sm90(code: str, timeout: float = 300) -> None:
    """Run ``code`` (which calls ``triton.compile(..., target=GPUTarget('cuda', 90, 32))``) in a
    fresh interpreter with the Triton interpreter off, from the repository root; fail with its
    stderr unless it exits 0."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
