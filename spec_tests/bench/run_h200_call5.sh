#!/usr/bin/env bash
# H200 call (session 2026-12-01b): issue 14's six attention shapes incl. the GQA many-short-sequence
# ones (ours vs SDPA cuDNN / FA-2, fwd + bwd, checked first), then the sampling spec natively with
# the sort-free kernel forced on (INFERSPEC_SAMPLING_TRITON=1), and the batch_invariant values tests
# natively (the |x|~200 / eps-0 draws added last session).
#   bash spec_tests/bench/run_h200_call5.sh     # repo root; logs and JSON to $OUT
set -o pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-h200_out}; mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
timeout 240 python3 spec_tests/bench/attention_issue14_shapes.py --out "$OUT/attention_issue14_h200.json" \
    > "$OUT/attention_issue14_h200.log" 2>&1
echo "issue-14 shapes: exit $? at $(el) s"; grep -vE "^ +%|^module|^ *tt\.|^\}" "$OUT/attention_issue14_h200.log" | cut -c1-200 | tail -22
INFERSPEC_SAMPLING_TRITON=1 timeout 200 python3 -m pytest -p no:cacheprovider spec_tests/sampling \
    spec_tests/bundled/test_sampling_sort_free.py -q --no-header -rfE -n 12 > "$OUT/sampling_sortfree_pytest.log" 2>&1
echo "sampling spec, sort-free forced: exit $? at $(el) s"; grep -E "passed|failed|^FAILED|^ERROR" "$OUT/sampling_sortfree_pytest.log" | tail -10
timeout 100 python3 -m pytest -p no:cacheprovider spec_tests/batch_invariant -q --no-header -rfE -n 8 \
    > "$OUT/batch_invariant_pytest.log" 2>&1
echo "batch_invariant native: exit $? at $(el) s"; grep -E "passed|failed|^FAILED" "$OUT/batch_invariant_pytest.log" | tail -6
