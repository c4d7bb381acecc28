#!/usr/bin/env bash
# H200 call (session 2026-12-01b): the split sampler with cached launches, no mid-call sync and the
# one-program redo (profile, spec forced natively, benchmark); FlashAttention natively with
# HOST_DESC on by default for n_q <= 4096 (attention + flash_attention specs, bundled internals).
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
timeout 100 python3 spec_tests/bench/sampling_split_profile.py --json "$OUT/sampling_split_profile2.json" \
  --configs '[{}, {"NPASS": 3}, {"SPLIT": 8}]' > "$OUT/sampling_split_profile2.log" 2>&1
echo "profile: exit $? at $(el) s"; grep -E "^config|call|_pass|_gather|_sort_free" "$OUT/sampling_split_profile2.log" | cut -c1-110
INFERSPEC_SAMPLING_TRITON=1 timeout 120 python3 -m pytest -p no:cacheprovider spec_tests/sampling \
    spec_tests/bundled/test_sampling_sort_free.py -q --no-header -rfE -n 12 > "$OUT/sampling_split_pytest2.log" 2>&1
echo "sampling spec, split forced: exit $? at $(el) s"; grep -E "passed|failed|^FAILED|^ERROR" "$OUT/sampling_split_pytest2.log" | tail -8
timeout 200 python3 spec_tests/bench/sampling_speed.py --device cuda --rounds 25 --json "$OUT/sampling_speed_h200_split2.json" \
    > "$OUT/sampling_speed_h200_split2.log" 2>&1
echo "sampling bench: exit $? at $(el) s"; grep -E "^\| .*(split|one program|optimized  |transformers|torch.sort top)" "$OUT/sampling_speed_h200_split2.log" | cut -c1-140
grep -A3 same_as_reference "$OUT/sampling_speed_h200_split2.log" | head -24 | tr -s ' \n' ' '; echo
timeout 200 python3 -m pytest -p no:cacheprovider spec_tests/attention spec_tests/flash_attention \
    spec_tests/bundled/test_flash_attention_internals.py -q --no-header -rfE -n 12 > "$OUT/fa_hostdesc_pytest.log" 2>&1
echo "attention + flash_attention native, HOST_DESC default: exit $? at $(el) s"; grep -E "passed|failed|^FAILED" "$OUT/fa_hostdesc_pytest.log" | tail -6
