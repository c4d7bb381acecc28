#!/usr/bin/env bash
# H200 call: batch_invariant natively under thorough (after the small-M tile change and the test
# fixes) + its full benchmark, the regression-gate proof (machine baseline first), and the D=256
# attention tile sweep.   bash spec_tests/bench/run_h200_call3.sh   # repo root; logs to $OUT
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
python3 -m pytest -p no:cacheprovider spec_tests/batch_invariant spec_tests/bundled/test_batch_invariant_internals.py \
    --hypothesis-profile=thorough -q --no-header -rfE -s -n 4 > "$OUT/batch_invariant_pytest.log" 2>&1
echo "batch_invariant native thorough: exit $? at $(el) s"; grep -E "passed|failed|^FAILED|without the mode|diverge|witness" "$OUT/batch_invariant_pytest.log" | tail -12
timeout 150 python3 spec_tests/bench/batch_invariant_h200.py --out "$OUT/batch_invariant_h200.json" > "$OUT/batch_invariant_h200.log" 2>&1
echo "batch_invariant bench: exit $? at $(el) s"; tail -32 "$OUT/batch_invariant_h200.log" | cut -c1-250
timeout 200 python3 spec_tests/bench/gate_proof.py --out "$OUT/gate_proof.json" > "$OUT/gate_proof.log" 2>&1
echo "gate proof: exit $? at $(el) s"; grep -E "FAIL at|PASS$|gate_proved|missed_10|slowdown|\[FAIL\]" "$OUT/gate_proof.log" | cut -c1-220 | tail -30
timeout 240 python3 spec_tests/bench/attention_d256_sweep.py --out "$OUT/attention_d256_sweep.json" > "$OUT/attention_d256_sweep.log" 2>&1
echo "d256 sweep: exit $? at $(el) s"; grep -E "peers|best" "$OUT/attention_d256_sweep.log"
