"""Speedup floors (optimized vs reference, ratio measured in one run, timed alternately) asserted
by the benchmarks in spec_tests/bench. One dict; each helper adds its keys with a targeted edit.
A floor sits well under the measured ratio (docs/<concept>.md gives the measurement) so that a
noisy machine does not fail it, while a regression to the naive algorithm does."""
FLOORS = {
    # FlashAttention-2 kernel vs reference, H200 (docs/flash_attention.md): floors under the ratio.
    "flash_attention.fwd_causal_b4_h16_n4096_d128": 3.0,
    "flash_attention.bwd_causal_b4_h16_n4096_d128": 1.5,
    # measured 8.4-9.6x (docs/stopping.md); the naive per-token rescan is O(length)
    "stopping.append_4096_tokens_4_stops": 4.0,
    # KV-cache decode vs uncached recompute, 256 new tokens, 2-core CPU (docs/generate.md).
    "generate.kv_cache_speedup_256_tokens": 3.0,
}
