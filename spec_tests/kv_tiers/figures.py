"""The reload-or-recompute numbers of docs/kv_tiers.md, computed by reference/kv_tiers.py: no
measurement, no GPU.

    python -m spec_tests.kv_tiers.figures

The FLOP rate is the H200's best recorded bf16 matmul rate and the HBM line its best recorded copy
bandwidth (read from docs/results/ by spec_tests/roofline/plot.py's ``ceilings``); the host link,
the NVMe and the network bandwidths and the latencies are ASSUMED (stated below), not measured:
this session had no GPU, and bench/kv_tiers_gpu.py measures them on one.
"""
from __future__ import annotations

from reference.kv_tiers import crossover_tokens, recompute_seconds, reload_seconds
from spec_tests.roofline.configs import REAL
from spec_tests.roofline.plot import ceilings

# (name, bytes/s, where the number comes from)
ASSUMED_LINKS = [("PCIe 5.0 x16 host link", 55e9, "assumed: ~64 GB/s per direction nominal, ~55 effective"),
                 ("400 Gb/s network (remote pool)", 50e9, "assumed: 400 Gb/s line rate"),
                 ("NVMe (PCIe 4.0 x4 SSD)", 7e9, "assumed: a fast SSD's sequential read"),
                 ("100 Gb/s network", 12.5e9, "assumed: 100 Gb/s line rate"),
                 ("1 GB/s (a slow disk or shared link)", 1e9, "assumed")]
LATENCIES = (0.0, 1e-4, 1e-3, 1e-2)


def main() -> None:
    roof = ceilings()
    rate, hbm = roof["peak"], roof["bandwidth"]
    print(f"recompute rate {rate / 1e12:.1f} TFLOP/s ({roof['peak_source']}: a matmul ceiling, an upper bound "
          f"of a prefill's rate); HBM copy {hbm / 1e12:.3f} TB/s ({roof['bandwidth_source']})")
    links = [("H200 HBM copy (recorded)", hbm, roof["bandwidth_source"])] + ASSUMED_LINKS
    print("\n| model | link | bandwidth | " + " | ".join(f"latency {lat * 1e3:g} ms" for lat in LATENCIES) + " |")
    print("|---|---|---:|" + "---:|" * len(LATENCIES))
    for name, c in REAL.items():
        for link, bw, _ in links:
            cells = [crossover_tokens(c, bandwidth=bw, flops_rate=rate, latency=lat) for lat in LATENCIES]
            shown = ["never" if x is None else f"{x:,}" for x in cells]
            print(f"| {name} | {link} | {bw / 1e9:,.1f} GB/s | " + " | ".join(shown) + " |")
    c = REAL["Llama-3-8B"]
    print("\nLlama-3-8B, 1,000 and 8,000 tokens:")
    for n in (1000, 8000):
        print(f"  recompute {recompute_seconds(c, n, flops_rate=rate) * 1e3:.2f} ms; reload over "
              + ", ".join(f"{link} {reload_seconds(c, n, bandwidth=bw) * 1e3:.2f} ms" for link, bw, _ in links))


if __name__ == "__main__":
    main()
