#!/usr/bin/env bash
# H200 call (session 2026-12-01b): the split sort-free sampler after the pass-kernel fix (pivots
# written out, no (BLOCK, PP) tile): per-kernel profile over configs, the sampling spec natively
# with it forced on, then the benchmark.
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
timeout 150 python3 spec_tests/bench/sampling_split_profile.py --json "$OUT/sampling_split_profile.json" \
  --configs '[{}, {"PP": 4}, {"NPASS": 2}, {"NPASS": 4}, {"SPLIT": 8}, {"SPLIT": 32}, {"BLOCK": 512, "num_warps": 4}, {"BLOCK": 2048}]' \
  > "$OUT/sampling_split_profile.log" 2>&1
echo "profile: exit $? at $(el) s"; grep -E "^config|call|_pass|_gather|empty" "$OUT/sampling_split_profile.log" | cut -c1-120
INFERSPEC_SAMPLING_TRITON=1 timeout 150 python3 -m pytest -p no:cacheprovider spec_tests/sampling \
    spec_tests/bundled/test_sampling_sort_free.py -q --no-header -rfE -n 12 -x > "$OUT/sampling_split_pytest.log" 2>&1
echo "sampling spec, split forced: exit $? at $(el) s"; grep -E "passed|failed|^FAILED|^ERROR" "$OUT/sampling_split_pytest.log" | tail -8
timeout 200 python3 spec_tests/bench/sampling_speed.py --device cuda --rounds 15 --json "$OUT/sampling_speed_h200_split.json" \
    > "$OUT/sampling_speed_h200_split.log" 2>&1
echo "sampling bench: exit $? at $(el) s"; grep -E "^\| .*(split|one program|optimized  |transformers)" "$OUT/sampling_speed_h200_split.log" | cut -c1-140
