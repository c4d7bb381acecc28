#!/usr/bin/env bash
# One call on the H200 (the device machine): benchmark (with the tile sweep when TUNE=1) and the
# native attention spec tests. Logs and JSON go to $OUT (default ./h200_out).
#   bash spec_tests/bench/run_h200.sh            # from the repository root
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
timeout ${BENCH_TIMEOUT:-330} python3 spec_tests/bench/h200_attention.py --out "$OUT/attention_h200.json" \
    ${TUNE:+--tune} ${QUICK:+--quick} 2>&1 | tee "$OUT/bench.log" | grep -v "^  tune" | tail -70
T0=$(date +%s)
timeout ${TEST_TIMEOUT:-220} python3 -m pytest -p no:cacheprovider spec_tests/test_attention.py \
    spec_tests/test_flash_attention.py -q --no-header --maxfail=20 -n ${WORKERS:-8} --no-report \
    2>&1 | tail -150 > "$OUT/pytest.log"
rc=$?
if [ $rc -eq 3 ] || [ $rc -eq 4 ]; then  # no pytest-xdist there: run serially
    timeout ${TEST_TIMEOUT:-220} python3 -m pytest -p no:cacheprovider spec_tests/test_attention.py \
        spec_tests/test_flash_attention.py -q --no-header --maxfail=20 2>&1 | tail -150 > "$OUT/pytest.log"
    rc=$?
fi
echo "pytest exit $rc in $(( $(date +%s) - T0 )) s"
grep -E "passed|failed|error|Error" "$OUT/pytest.log" | tail -25
