#!/usr/bin/env bash
# `inferspec check` of a correct submission (the reference re-exported from a file), one concept
# at a time: the wall time of each. Usage: docs/results/student_check_times.sh [RUNS]  (default 3)
# Prints one line per concept: the concept, each run's seconds, the median.
set -u
runs=${1:-3}
dir=$(mktemp -d)
for c in $(python3 -c "from conformance.registry import CONCEPTS; print(' '.join(CONCEPTS))"); do
  printf 'from reference.%s import *  # noqa: F401,F403\n' "$c" > "$dir/my_$c.py"
  times=()
  for _ in $(seq "$runs"); do
    s=$(date +%s.%N)
    (cd "$dir" && inferspec check "my_$c.py" --concept "$c" > "$dir/$c.log" 2>&1) || echo "$c: FAILED (log $dir/$c.log)"
    e=$(date +%s.%N)
    times+=("$(awk "BEGIN{printf \"%.1f\", $e - $s}")")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
  echo "$c ${times[*]} median $median"
done
