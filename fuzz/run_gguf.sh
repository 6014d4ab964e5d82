#!/usr/bin/env bash
# Runs the GGUF reader fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan) for a
# bounded time. Usage: fuzz/run_gguf.sh [seconds]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; mkdir -p "$out/corpus-gguf"
# seed: the committed test GGUF (every value type, every supported tensor type)
cp tests/fixtures/quant/tiny.gguf "$out/corpus-gguf/tiny.gguf"
"$out/fuzz_gguf" -max_total_time="$secs" -max_len=32768 "$out/corpus-gguf" 2>&1 | tail -5
