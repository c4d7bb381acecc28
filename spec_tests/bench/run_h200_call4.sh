#!/usr/bin/env bash
# H200 call: FlashAttention natively after the D=256 config change (spec, then the shipped D=256
# timing against SDPA's cuDNN and FA2), the speculative verifier's Triton draw natively (spec +
# bundled tests, then the benchmark: reference, torch path, Triton path), and the thorough run of
# speculative, drafts and tree_spec with the time left.
#   bash spec_tests/bench/run_h200_call4.sh     # repo root; logs and JSON to $OUT
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
timeout 200 python3 -m pytest -p no:cacheprovider spec_tests/flash_attention spec_tests/bundled/test_flash_attention_internals.py \
    -q --no-header -rfE -n 12 > "$OUT/flash_attention_pytest.log" 2>&1
echo "flash_attention native (dev): exit $? at $(el) s"; grep -E "passed|failed|^FAILED" "$OUT/flash_attention_pytest.log" | tail -8
timeout 90 python3 spec_tests/bench/attention_d256_sweep.py --shipped-only --out "$OUT/attention_d256_shipped.json" > "$OUT/attention_d256_shipped.log" 2>&1
echo "d256 shipped: exit $? at $(el) s"; cut -c1-200 "$OUT/attention_d256_shipped.log" | grep -vE "^ +%|^module|^ *tt\.|^\}" | tail -12
timeout 120 python3 -m pytest -p no:cacheprovider spec_tests/speculative spec_tests/bundled/test_speculative_triton.py \
    spec_tests/bundled/test_speculative_internals.py -q --no-header -rfE -n 6 > "$OUT/speculative_pytest.log" 2>&1
echo "speculative native (dev): exit $? at $(el) s"; grep -E "passed|failed|^FAILED|Warn" "$OUT/speculative_pytest.log" | tail -8
SPEC_JSON="$OUT/speculative_speed_h200.json" timeout 150 python3 spec_tests/bench/speculative_speed.py --device cuda --rounds 3 \
    > "$OUT/speculative_speed.log" 2>&1
echo "speculative bench: exit $? at $(el) s"; tail -16 "$OUT/speculative_speed.log" | cut -c1-220
LEFT=$(( ${BUDGET:-560} - $(el) ))
if [ $LEFT -gt 60 ]; then
  timeout $LEFT python3 -m pytest -p no:cacheprovider spec_tests/speculative spec_tests/drafts spec_tests/tree_spec \
      --hypothesis-profile=thorough -n 14 -v --tb=short -rfE --no-header --durations=8 > "$OUT/thorough3.log" 2>&1
  echo "thorough speculative drafts tree_spec: exit $? at $(el) s"; grep -E "^(FAILED|ERROR)" "$OUT/thorough3.log" | head; tail -12 "$OUT/thorough3.log"
fi
