#!/usr/bin/env bash
# Runs every C unit test binary in BUILD/tests; fails if any fails.
set -u
build=${1:-build}
fail=0; n=0
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  n=$((n+1))
  if ! "$t"; then echo "FAILED: $t"; fail=$((fail+1)); fi
done
echo "C test binaries: $((n-fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
