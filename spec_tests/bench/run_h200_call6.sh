#!/usr/bin/env bash
# H200 call (session 2026-12-01b): the split sort-free sampler (optimized/_sampling_split.py)
# natively: the sampling spec + bundled sort-free tests with the kernel forced on, then the
# benchmark (split default, its config sweep, one-program-per-row, default path, transformers).
#   bash spec_tests/bench/run_h200_call6.sh     # repo root; logs and JSON to $OUT
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
INFERSPEC_SAMPLING_TRITON=1 timeout 200 python3 -m pytest -p no:cacheprovider spec_tests/sampling \
    spec_tests/bundled/test_sampling_sort_free.py -q --no-header -rfE -n 12 -x > "$OUT/sampling_split_pytest.log" 2>&1
echo "sampling spec, split sort-free forced: exit $? at $(el) s"; grep -E "passed|failed|^FAILED|^ERROR|Error" "$OUT/sampling_split_pytest.log" | tail -12
timeout 300 python3 spec_tests/bench/sampling_speed.py --device cuda --rounds 20 --json "$OUT/sampling_speed_h200_split.json" \
    > "$OUT/sampling_speed_h200_split.log" 2>&1
echo "sampling bench: exit $? at $(el) s"; grep -E "^\| |targets|le_0_6|x_transformers|same_as|Error|error" "$OUT/sampling_speed_h200_split.log" | cut -c1-160 | tail -80
