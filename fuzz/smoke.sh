#!/usr/bin/env bash
# Runs every fuzz target (fuzz/run_*.sh, built by `make fuzz-build`) for a few seconds on its seeds:
# what CI runs, so that every target keeps building and its seeds keep passing. A crash, a leak or
# a sanitizer report stops it with a non-zero exit. Usage: fuzz/smoke.sh [seconds per target]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
for run in fuzz/run_*.sh; do
  echo "== $run ($secs s)"
  "$run" "$secs"
done
echo "fuzz smoke: every target ran clean"
