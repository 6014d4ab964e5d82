#!/usr/bin/env bash
# Runs every C unit test binary in BUILD/tests, C_TEST_JOBS (default 2) at a time; fails if any
# fails. A test's output is shown when it fails (each passing test prints one line).
# Usage: tests/run_c_tests.sh [BUILD]
set -u
build=${1:-build}
jobs=${C_TEST_JOBS:-2}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

run_one() {
  local t=$1 log=$2/$(basename "$1").log
  if "$t" >"$log" 2>&1; then
    echo "ok: $t"
  else
    cat "$log"
    echo "FAILED: $t"
  fi
}
export -f run_one

n=0
for t in "$build"/tests/test_*; do [ -x "$t" ] && n=$((n+1)) && printf '%s\0' "$t"; done > "$logs/list"
xargs -0 -P "$jobs" -I{} bash -c 'run_one "$1" "$2"' _ {} "$logs" < "$logs/list" | tee "$logs/summary"
fail=$(grep -c '^FAILED: ' "$logs/summary")
echo "C test binaries: $((n-fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
