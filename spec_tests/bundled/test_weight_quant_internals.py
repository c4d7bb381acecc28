"""optimized/weight_quant.py's launch configurations for the GPU, run under the interpreter.

The cuda branch of ``launch_config`` cannot be reached on a CPU machine through the public call,
so its configurations are asked for directly and run with ``w4a16_matmul_with(config=...)`` on small
shapes: every configuration it returns is legal (BLOCK_K a multiple of 32 dividing the group,
power-of-two tiles, a split of at least 1) and computes x ŵᵀ within the tolerance rule.
"""
from __future__ import annotations

import pytest
import torch

import optimized.weight_quant as wq
from conformance.tolerance import assert_close_to_oracle
from spec_tests.weight_quant.oracles import low_precision_reference, matmul_oracle
from spec_tests.weight_quant.strategies import MatmulCase

pytestmark = pytest.mark.heavy


@pytest.mark.parametrize("m,n,k,group", [(1, 8, 512, 128), (3, 40, 256, 64), (5, 16, 256, 32), (16, 70, 128, 128),
                                          (17, 8, 256, 128), (65, 24, 128, 64), (130, 16, 128, 128)])
def test_gpu_configurations_compute_the_product(m, n, k, group):
    cfg = wq.launch_config(m, n, k, group, "cuda", 132)
    assert cfg["BLOCK_K"] % 32 == 0 and group % cfg["BLOCK_K"] == 0, cfg
    for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps"):
        assert cfg[key] & (cfg[key] - 1) == 0, (key, cfg)
    assert cfg["SPLIT_K"] >= 1 and cfg["DOT"] == (m > 4), cfg
    if not wq.kernel_supports(torch.empty(1, dtype=torch.bfloat16), group):
        pytest.skip("the kernels need a GPU or the Triton interpreter")
    x, packed, scales, zeros = MatmulCase(m, n, k, group, "bfloat16", m + n).build()
    y = wq.w4a16_matmul_with(x, packed, scales, zeros, config=cfg)
    assert_close_to_oracle(y, low_precision_reference(x, packed, scales, zeros), matmul_oracle(x, packed, scales, zeros),
                           name="y", inputs=dict(config=cfg))
