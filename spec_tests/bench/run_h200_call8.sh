#!/usr/bin/env bash
# H200 call (session 2026-12-01b): (1) the split sampler with logit-space thresholds (no division
# per element when counting): profile over configs, the sampling spec natively with it forced, the
# benchmark; (2) issue 14's attention shapes with the host-descriptor / persistent forward variants
# (each checked, bits compared with the device-descriptor kernel) and the bundled FA internals.
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
timeout 150 python3 spec_tests/bench/sampling_split_profile.py --json "$OUT/sampling_split_profile.json" \
  --configs '[{}, {"BLOCK": 512, "num_warps": 4}, {"BLOCK": 512, "num_warps": 4, "SPLIT": 8}, {"BLOCK": 512, "num_warps": 4, "PP": 4}, {"BLOCK": 512, "num_warps": 4, "CAP": 4096}, {"BLOCK": 256, "num_warps": 2}, {"BLOCK": 2048, "num_warps": 8, "SPLIT": 8}]' \
  > "$OUT/sampling_split_profile.log" 2>&1
echo "profile: exit $? at $(el) s"; grep -E "^config|call|_pass|_gather" "$OUT/sampling_split_profile.log" | cut -c1-110
INFERSPEC_SAMPLING_TRITON=1 timeout 120 python3 -m pytest -p no:cacheprovider spec_tests/sampling \
    spec_tests/bundled/test_sampling_sort_free.py -q --no-header -rfE -n 12 -x > "$OUT/sampling_split_pytest.log" 2>&1
echo "sampling spec, split forced: exit $? at $(el) s"; grep -E "passed|failed|^FAILED|^ERROR" "$OUT/sampling_split_pytest.log" | tail -8
timeout 240 python3 spec_tests/bench/attention_issue14_shapes.py --out "$OUT/attention_issue14_h200_host.json" \
    > "$OUT/attention_issue14_h200_host.log" 2>&1
echo "issue-14 shapes + host descriptors: exit $? at $(el) s"; grep -vE "^ +%|^module|^ *tt\.|^\}" "$OUT/attention_issue14_h200_host.log" | cut -c1-220 | tail -16
timeout 100 python3 -m pytest -p no:cacheprovider spec_tests/bundled/test_flash_attention_internals.py -q --no-header -rfE -n 8 \
    > "$OUT/fa_internals_pytest.log" 2>&1
echo "FA internals native: exit $? at $(el) s"; grep -E "passed|failed|^FAILED" "$OUT/fa_internals_pytest.log" | tail -6
