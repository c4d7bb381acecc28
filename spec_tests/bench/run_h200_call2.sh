#!/usr/bin/env bash
# One H200 call for issues 13 and 14 (and 9's remaining concepts): batch_invariant natively (spec
# + bundled internals), the decode-attention benchmark, the matmul tile probe, the regression-gate
# proof, then the thorough run of the named concepts with whatever time is left.
#   bash spec_tests/bench/run_h200_call2.sh     # repo root; logs and JSON to $OUT
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
python3 -m pytest -p no:cacheprovider spec_tests/batch_invariant spec_tests/bundled/test_batch_invariant_internals.py \
    -q --no-header -rfE -s -n 4 > "$OUT/batch_invariant_pytest.log" 2>&1
echo "batch_invariant native: exit $? at $(el) s"; tail -3 "$OUT/batch_invariant_pytest.log"
timeout 150 python3 spec_tests/bench/batch_invariant_h200.py --only decode --out "$OUT/decode.json" > "$OUT/decode.log" 2>&1
echo "decode bench: exit $? at $(el) s"; tail -30 "$OUT/decode.log"
timeout 120 python3 spec_tests/bench/bi_tile_probe.py --out "$OUT/bi_tile_probe.json" > "$OUT/bi_tile_probe.log" 2>&1
echo "tile probe: exit $? at $(el) s"; cat "$OUT/bi_tile_probe.log" | cut -c1-400
timeout 150 python3 spec_tests/bench/gate_proof.py --out "$OUT/gate_proof.json" > "$OUT/gate_proof.log" 2>&1
echo "gate proof: exit $? at $(el) s"; tail -12 "$OUT/gate_proof.log" | cut -c1-300
LEFT=$(( ${BUDGET:-570} - $(el) ))
if [ -n "${CONCEPTS:-}" ] && [ $LEFT -gt 60 ]; then
  DIRS=""; for c in $CONCEPTS; do DIRS="$DIRS spec_tests/$c"; done
  timeout $LEFT python3 -m pytest -p no:cacheprovider $DIRS --hypothesis-profile=thorough -n 14 -v \
      --tb=short -rfE --no-header --durations=10 > "$OUT/thorough2.log" 2>&1
  echo "thorough ($CONCEPTS): exit $? at $(el) s"; grep -E "^(FAILED|ERROR)" "$OUT/thorough2.log" | head -20
  tail -14 "$OUT/thorough2.log"
fi
