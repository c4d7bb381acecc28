#!/usr/bin/env bash
# H200 call (session 2026-12-01b): the split sort-free sampler final defaults (BLOCK 256, 2 warps, PP 4, NPASS 5, CUDA graph, first pass at 1024 / 8 warps), the
# CUDA default: the sampling spec natively with NO environment override (the default path), the
# benchmark (default vs torch path vs one-program vs eager split vs peers), and the profile.
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
timeout 150 python3 -m pytest -p no:cacheprovider spec_tests/sampling spec_tests/bundled/test_sampling_*.py \
    -q --no-header -rfE -n 12 > "$OUT/sampling_default_pytest.log" 2>&1
echo "sampling spec, CUDA default (split + graph): exit $? at $(el) s"; grep -E "passed|failed|^FAILED|^ERROR" "$OUT/sampling_default_pytest.log" | tail -8
timeout 220 python3 spec_tests/bench/sampling_speed.py --device cuda --rounds 25 --json "$OUT/sampling_speed_h200.json" \
    > "$OUT/sampling_speed_h200.log" 2>&1
echo "sampling bench: exit $? at $(el) s"; grep -E "^\| .*(split|one program|optimized  |torch path|transformers|torch.sort top)" "$OUT/sampling_speed_h200.log" | cut -c1-150
grep -A3 same_as_reference "$OUT/sampling_speed_h200.log" | head -24 | tr -s ' \n' ' '; echo
grep -A30 "^targets" "$OUT/sampling_speed_h200.log" | tr -s ' \n' ' '; echo
timeout 80 python3 spec_tests/bench/sampling_split_profile.py --json "$OUT/sampling_split_profile6.json" \
  --configs '[{}]' > "$OUT/sampling_split_profile6.log" 2>&1
echo "profile: exit $? at $(el) s"; grep -E "^config|call" "$OUT/sampling_split_profile6.log" | cut -c1-130
