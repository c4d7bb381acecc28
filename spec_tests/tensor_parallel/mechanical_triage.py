"""Surviving mechanical variants of reference/tensor_parallel.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

The first sample (60 variants, seeds 1-5) killed 54; of the six survivors, three were gaps and are
now killed by new tests (a model whose config is not a ModelConfig; world_size 2 without a process
group; new_cache's sizes), three are below.
"""

TRIAGE = {
    ("reference", 'check_int("world_size", world_size, minimum=1)', "1 -> 0"): (
        "equivalent", "in _check_rank a world_size of 0 then fails the next check, rank < world_size, for every rank "
                      ">= 0 with a ValueError whose message names world_size (\"rank must be in [0, world_size=0)\")"),
    ("reference", 'k = F.linear(x, w[p + "self_attn.k_proj.weight"]).view(batch, seq, hkv, hd).transpose(1, 2)',
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(1, 2) and transpose(2, 1) are the same permutation"),
    ("reference", 'check_int("batch", batch, minimum=1)', "1 -> 0"): (
        "equivalent", "new_cache's batch of 0 is then rejected by KVCache's own check, a ValueError naming batch"),
}
