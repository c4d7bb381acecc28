"""Internals of the bundled FlashAttention kernels (optimized/flash_attention.py) that the spec's
strategies rely on: the tile sizes the kernels use off the GPU (under the Triton interpreter),
around whose multiples spec_tests/attention/strategies.py draws lengths and windows. Not the
contract, so never run against a submission."""
from __future__ import annotations

import pytest
import torch

from spec_tests.attention import strategies
from spec_tests.bundled._sm90 import assert_compiles_for_sm90

pytestmark = pytest.mark.concept("flash_attention")


def test_strategy_tiles_are_the_interpreter_tiles():
    """The strategies' TILES / BLOCK_M / BLOCK_N equal the CPU launch configuration: if the
    kernels' interpreter tiles change, the draws must move with them."""
    pytest.importorskip("triton")
    from optimized.flash_attention import bwd_config, fwd_config
    cpu = torch.device("cpu")
    fwd = fwd_config(64, causal=True, device=cpu)
    bwd = bwd_config(64, device=cpu)
    used = {fwd["BLOCK_M"], fwd["BLOCK_N"]} | {c[b] for c in bwd.values() for b in ("BLOCK_M", "BLOCK_N")}
    assert (strategies.BLOCK_M, strategies.BLOCK_N) == (fwd["BLOCK_M"], fwd["BLOCK_N"])
    assert set(strategies.TILES) == used, (strategies.TILES, used)


# --------------------------------------------------- host-descriptor / persistent forward paths
# _flash_forward's config keys HOST_DESC (host-built 4-D TMA descriptors, no descriptor made on the
# device) and PERSISTENT (a fixed number of programs looping over the work items) change how tiles
# are addressed and scheduled, never the arithmetic: out and lse must have the device-descriptor
# path's bits. Cases: (q_heads, kv_heads, q_len, kv_len, causal, window, dtype, head_dim), at the
# interpreter tiles (BLOCK_M 32, BLOCK_N 16) so that the ragged tails, the causal diagonal, the
# masked / unmasked split, GQA and MQA, fully masked rows and BLOCK_D > head_dim all run.
TILES = dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1, WARP_SPEC=False)
HOST_CASES = {
    "mha-causal-37": (2, 2, 37, 37, True, None, torch.float16, 64),
    "gqa-full-100": (4, 2, 100, 100, False, None, torch.bfloat16, 32),
    "gqa-causal-window-100x64-d40": (4, 2, 100, 64, True, 5, torch.float16, 40),  # 36 rows see nothing
    "mqa-full-37x80": (2, 1, 37, 80, False, None, torch.bfloat16, 16),          # whole key tiles: mask-free
}
HOST_MODES = {
    "host": dict(HOST_DESC=True),
    "host-persistent": dict(HOST_DESC=True, PERSISTENT=True),                    # estimated programs per SM
    "host-persistent-3": dict(HOST_DESC=True, PERSISTENT=True, PROGRAMS_PER_SM=3),  # uneven split of items
}
_DEVICE_PATH: dict = {}


def _fa_or_skip(device):
    pytest.importorskip("triton")
    import optimized.flash_attention as fa
    if device == "cpu" and not fa.INTERPRET:
        pytest.skip("the kernels run on CUDA or under TRITON_INTERPRET=1")
    if device == "cuda" and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the kernels need TMA (compute capability >= 9.0)")
    return fa


def _host_case(fa, device, name):
    hq, hkv, n_q, n_k, causal, window, dtype, d = HOST_CASES[name]
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    q, k, v = (torch.randn(2, h, n, d, generator=g).to(dtype).to(device)
               for h, n in ((hq, n_q), (hkv, n_k), (hkv, n_k)))
    args = (q, k, v, None, None, 0, 0, causal, window, 1 / d ** 0.5)
    if name not in _DEVICE_PATH:
        _DEVICE_PATH[name] = fa._flash_forward(*args, dict(TILES))
    return args, _DEVICE_PATH[name]


def _bits(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


@pytest.mark.parametrize("mode", list(HOST_MODES))
@pytest.mark.parametrize("name", list(HOST_CASES))
def test_host_descriptor_forward_has_the_device_path_bits(device, name, mode):
    """out and lse of the HOST_DESC (and PERSISTENT) forward == those of the device-descriptor
    forward, bit for bit: same masking, fully masked rows (out 0, lse -inf), window, GQA/MQA head
    map, float32 lse."""
    fa = _fa_or_skip(device)
    args, (want_out, want_lse) = _host_case(fa, device, name)
    out, lse = fa._flash_forward(*args, dict(TILES, **HOST_MODES[mode]))
    assert lse.dtype == torch.float32 and out.dtype == want_out.dtype
    assert torch.equal(_bits(out), _bits(want_out)), (
        f"{mode} out differs: max diff {(out.double() - want_out.double()).abs().max():.3e}")
    assert torch.equal(_bits(lse), _bits(want_lse)), f"{mode} lse differs"


def test_host_descriptor_falls_back(device):
    """HOST_DESC takes the device-descriptor kernel where host descriptors do not apply: varlen
    batches (one descriptor per sequence), and tensors TMA cannot address (_host_desc says None)."""
    fa = _fa_or_skip(device)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(n, 2, 16, generator=g).to(torch.float16).to(device) for n in (50, 40, 40))
    cu_q = torch.tensor([0, 20, 50], dtype=torch.int32, device=device)
    cu_k = torch.tensor([0, 25, 40], dtype=torch.int32, device=device)
    args = (q, k, v, cu_q, cu_k, 30, 25, True, None, 0.25)
    want = fa._flash_forward(*args, dict(TILES))
    got = fa._flash_forward(*args, dict(TILES, HOST_DESC=True, PERSISTENT=True))
    assert all(torch.equal(_bits(a), _bits(b)) for a, b in zip(got, want))
    x = torch.zeros(1, 2, 8, 24, dtype=torch.float16, device=device)
    assert fa._host_desc(x, 32, 32) is not None
    assert fa._host_desc(x[..., :20], 32, 32) is not None                # 48-byte rows, 20 columns: fine
    flat = x.view(-1)
    assert fa._host_desc(flat[:320].view(1, 2, 8, 20), 32, 32) is None      # 40-byte rows
    assert fa._host_desc(flat[1:257].view(1, 2, 8, 16), 32, 32) is None     # base 2 bytes off
    assert fa._host_desc(x[..., ::2], 32, 32) is None                      # head_dim stride 2
    assert fa._host_desc(x[:, :, :0], 32, 32) is None                      # empty: TMA needs dims > 0


@pytest.mark.heavy
def test_host_descriptor_kernel_compiles_for_sm90():
    """_fwd_kernel_host (grid and persistent, 4-D bf16 descriptors, the GQA shapes' tile) compiles
    for an H100/H200 (sm_90) without a GPU, and uses the shared memory fwd_shared_bytes says (the
    persistent launch sizes its grid from it): catches what the interpreter accepts and the
    compiler does not."""
    pytest.importorskip("triton")
    code = (
        "from triton.backends.compiler import GPUTarget; from triton.compiler import ASTSource; import triton;"
        "import optimized.flash_attention as m\n"
        "bm, bn, bd, warps, stages = 64, 64, 128, 4, 3\n"
        "desc = lambda rows: f'tensordesc<bf16[1,1,{rows},{bd}]>'\n"
        "sig = dict(desc_q=desc(bm), desc_k=desc(bn), desc_v=desc(bn), desc_o=desc(bm), LSE='*fp32',"
        " **{n: 'i32' for n in 'sl_b sl_h sl_n n_q n_k n_heads n_batch'.split()}, qk_scale='fp32',"
        " left='i32', right='i32', group='i32')\n"
        "for persistent in (False, True):\n"
        "    cx = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd, MASK_FREE=False, WARP_SPEC=False, PERSISTENT=persistent)\n"
        "    k = triton.compile(ASTSource(fn=m._fwd_kernel_host, signature=dict(sig, **{c: 'constexpr' for c in cx}),"
        " constexprs=cx), target=GPUTarget('cuda', 90, 32), options=dict(num_warps=warps, num_stages=stages))\n"
        "    want = m.fwd_shared_bytes(bm, bn, bd, stages, 2, persistent)\n"
        "    assert want - 1024 <= k.metadata.shared <= want, (persistent, k.metadata.shared, want)\n")
    assert_compiles_for_sm90(code)
