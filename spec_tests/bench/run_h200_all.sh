#!/usr/bin/env bash
# One call on the H200 for the whole suite: the sampler timing (with its native correctness
# checks), every spec test natively on CUDA, and the GPU benchmark tests with their floors.
#   bash spec_tests/bench/run_h200_all.sh      # from the repository root; logs/JSON to $OUT
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
timeout ${SAMPLING_TIMEOUT:-200} python3 spec_tests/bench/sampling_speed.py --device cuda \
    --json "$OUT/sampling_speed_cuda.json" 2>&1 | tee "$OUT/sampling_speed.log" | tail -40
T0=$(date +%s)
timeout ${TEST_TIMEOUT:-300} python3 -m pytest -p no:cacheprovider spec_tests -q --no-header \
    --ignore spec_tests/test_suite_power.py --ignore spec_tests/test_harness.py --ignore spec_tests/bench \
    -n ${WORKERS:-8} --no-report 2>&1 | tail -200 > "$OUT/pytest_all.log"
echo "spec tests: exit $? in $(( $(date +%s) - T0 )) s"; grep -E "passed|failed|rror" "$OUT/pytest_all.log" | tail -30
timeout ${BENCH_TIMEOUT:-120} python3 -m pytest -p no:cacheprovider spec_tests/bench/test_bench_flash_attention.py \
    -q --no-header --benchmark-enable -s 2>&1 | tail -40 | tee "$OUT/bench_tests.log"
