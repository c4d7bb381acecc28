"""Surviving mechanical variants of reference/kv_quant.py and optimized/kv_quant.py that are not gaps
of the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the
change).

Gaps the first sample found, closed since (no entry here): dequantize_kv's rank-0 check dropped (a
scalar code and scale went through: bad-input row "codes rank 0"); its device check dropped (a
scale on another device failed inside torch with a RuntimeError:
test_dequantize_rejects_a_scale_on_another_device).

The optimized module's dispatch (`if not kernel_supports(q, k_cache) or q.numel() == 0`) picks
between the kernels and the reference's dequantize-then-attend, which compute the same contract:
a variant that sends a call down the other path changes speed, not results (the bench measures
the kernel path through quantized_paged_attention_unchecked, which has no dispatch).
"""
_DISPATCH = "if not quant_kernel_supports(q, k_cache) or q.numel() == 0:"
_OTHER_PATH = ("equivalent", "the call takes the reference's dequantize-then-paged_attention path instead of the "
                             "kernels (or the kernels for an empty batch, a no-op launch): the same contract's "
                             "results, only the speed differs")

_QUANT_SUPPORTS = "if not kernel_supports(q, k_cache):"
_FP8_CUDA = 'if k_cache.dtype == torch.float8_e4m3fn and q.device.type == "cuda":'
_CAPABILITY = "return torch.cuda.get_device_capability(q.device) >= (8, 9)"
_GPU_ONLY = ("outside the contract", "quant_kernel_supports' float8-on-CUDA branch (compute capability >= 8.9): "
                                     "unreachable on a CPU machine, where the device test is False either way")

TRIAGE = {
    ("optimized", _QUANT_SUPPORTS, "not x -> x"): (
        "equivalent", "the dispatch then answers the opposite for paged_attention's kernel test: a call the kernels "
                      "take goes down the reference's dequantize-then-attend path and one they refuse (a float32 q) "
                      "through the kernels, which under the interpreter compute the same contract: results within "
                      "the tolerance rule either way, only the speed differs"),
    ("optimized", _FP8_CUDA, "== -> !="): _GPU_ONLY,
    ("optimized", _CAPABILITY, "9 -> 10"): _GPU_ONLY,
    ("optimized", _CAPABILITY, "9 -> 8"): _GPU_ONLY,
    ("optimized", _DISPATCH, "not x -> x"): _OTHER_PATH,
    ("optimized", _DISPATCH, "== -> !="): _OTHER_PATH,
    ("optimized", _DISPATCH, "or -> and"): _OTHER_PATH,
    ("optimized", _DISPATCH, "quant_kernel_supports(a, b, ...) -> quant_kernel_supports(b, a, ...)"): (
        "equivalent", "quant_kernel_supports(k_cache, q) reads the codes' dtype (float8/int8, never a kernel dtype): "
                      "every call takes the reference path, same results"),
    ("optimized", _DISPATCH, "0 -> 1"): (
        "equivalent", "q with exactly one element (batch 1, one head, head_dim 1) takes the reference path, "
                      "and an empty q the kernels' no-op launch: same results"),
    ("optimized", "out, lse = out[:, 0], lse[:, 0]", "0 -> -1"): (
        "equivalent", "this branch runs for a rank-3 q, unsqueezed to q_len 1, so out[:, -1] is out[:, 0]"),
    ("optimized", "out, lse = out[:, 0], lse[:, 0]", "0 -> -1 (#2)"): (
        "equivalent", "this branch runs for a rank-3 q, unsqueezed to q_len 1, so lse[:, -1] is lse[:, 0]"),
    ("optimized", _CAPABILITY, ">= -> >"): _GPU_ONLY,
    ("optimized", _CAPABILITY, "8 -> 9"): _GPU_ONLY,
    ("optimized", _CAPABILITY, "8 -> 7"): _GPU_ONLY,
    ("optimized", _DISPATCH, "0 -> -1"): _OTHER_PATH,
    ("optimized", _QUANT_SUPPORTS, "kernel_supports(a, b, ...) -> kernel_supports(b, a, ...)"): (
        "equivalent", "kernel_supports(k_cache, q) reads the codes' dtype (float8/int8, never a kernel dtype) and "
                      "answers False: the call takes the reference's dequantize-then-attend path, the same "
                      "contract's results"),
    **{("optimized", "config = config or quant_decode_config(q.shape[-1], q.device)", change): (
        "equivalent", "a tile choice: quant_decode_config is paged_attention's decode_config, whose CPU tiles do not "
                      "depend on head_dim, and None falls back to the same dict; tiles change the launch, not the "
                      "result") for change in ("or -> and", "1 -> 2", "1 -> 0")},
}
