"""Surviving mechanical variants of reference/moe.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

The sample of 60 of the 301 reference variants (``--sample 60``, five dev seeds) killed 57; one
survivor was a gap (the device check, untested on a CPU-only machine: closed by
``test_bad_input.py::test_moe_forward_rejects_weights_on_another_device``, "meta" weights); the
other two are below.

The sample of 30 variants of optimized/moe.py (``--mechanical optimized --sample 30``) killed 23;
two survivors were gaps, caught by some seeds only (a skipped row's placeholder expert 1, out of
range with ONE expert and drops; float64 x sent to the kernels): closed by pinned examples of
``test_moe.py::test_matches_oracle`` (one expert with drops; float64); the five others are below.
"""

TRIAGE = {
    ("optimized", 'return x.device.type == "cpu" and INTERPRET', "and -> or"): (
        "equivalent", "on the CPU under the interpreter both read True; the variant differs only for a tensor on a "
                      "device neither cpu nor cuda, which no contract function computes on"),
    ("optimized", 'if device_type != "cuda":', "!= -> =="): (
        "equivalent", "the CPU then takes the GPU's tile sizes: other tiles, the same contract (the kernels mask "
                      "every tile edge); only speed differs"),
    ("optimized", "bm = 16 if n_rows <= 256 else 64", "16 -> 17"): (
        "outside the contract", "the GPU-only branch of launch_config (a CUDA device): never taken on the CPU"),
    ("optimized", "return dict(BLOCK_M=bm, BLOCK_N_UP=64, BLOCK_N_DOWN=64, BLOCK_K_UP=64, BLOCK_K_DOWN=64, num_warps=4,",
     "4 -> 5"): ("outside the contract", "the GPU-only branch of launch_config; the interpreter ignores num_warps"),
    ("optimized", "if n == 0 or d == 0:", "0 -> -1"): (
        "equivalent", "with no row the aligned grid has no tile (max_tiles = min(n, ...) = 0): nothing is launched "
                      "and the zeros are returned all the same"),
    ("reference", "slot = kept.reshape(-1).nonzero()[:, 0]", "0 -> -1"): (
        "equivalent", "nonzero() of a 1-D tensor has one column: [:, -1] is [:, 0]"),
    ("reference", "sel = (expert_of_row == e).nonzero()[:, 0]", "0 -> -1"): (
        "equivalent", "nonzero() of a 1-D tensor has one column: [:, -1] is [:, 0]"),
}
