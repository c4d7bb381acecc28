#!/usr/bin/env bash
# GPU-native thorough run (issue 9): the named concepts' spec against the bundled reference and
# optimized implementations, natively on CUDA, under the `thorough` profile (500 examples per
# property), and the third-party must-pass set for the named concepts, side by side.
#   CONCEPTS="attention sampling" bash spec_tests/bench/h200_thorough.sh   # repo root; logs to $OUT
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton, hypothesis; print('torch', torch.__version__, 'triton', triton.__version__, 'hypothesis', hypothesis.__version__)" | tee -a "$OUT/gpu.txt"
DIRS=""; for c in $CONCEPTS; do DIRS="$DIRS spec_tests/$c"; done
K=""; for c in ${THIRD_PARTY:-}; do K="${K:+$K or }$c"; done
T0=$(date +%s)
if [ -n "$K" ]; then
  ( timeout ${TIMEOUT:-540} python3 -m pytest -p no:cacheprovider spec_tests/suite/test_third_party.py \
      --hypothesis-profile=thorough -k "$K" -n ${TP_WORKERS:-2} -rA --tb=short -q --no-header \
      > "$OUT/third_party.log" 2>&1; echo "third-party exit $? in $(( $(date +%s) - T0 )) s" >> "$OUT/third_party.log" ) &
fi
timeout ${TIMEOUT:-540} python3 -m pytest -p no:cacheprovider $DIRS --hypothesis-profile=thorough \
    -n ${WORKERS:-13} -v --tb=short -rfE --no-header --durations=15 > "$OUT/thorough.log" 2>&1
echo "thorough exit $? in $(( $(date +%s) - T0 )) s" | tee -a "$OUT/thorough.log"
wait
grep -E "^(FAILED|ERROR)" "$OUT/thorough.log" | head -40
grep -cE "PASSED" "$OUT/thorough.log"; tail -25 "$OUT/thorough.log"; tail -8 "$OUT/third_party.log" 2>/dev/null
