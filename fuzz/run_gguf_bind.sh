#!/usr/bin/env bash
# Runs the GGUF model-binding fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan) for
# a bounded time. Usage: fuzz/run_gguf_bind.sh [seconds]   (default 60)
# Seeds: the committed tiny Gemma 4 GGUFs (bf16 and q8_0).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; corpus="$out/corpus-gguf-bind"; mkdir -p "$corpus"
cp tests/fixtures/g4-gguf/causal-q8_0.gguf tests/fixtures/g4-gguf/causal-bf16.gguf "$corpus/"
"$out/fuzz_gguf_bind" -max_total_time="$secs" -max_len=600000 -rss_limit_mb=4096 -timeout=20 "$corpus" 2>&1 | \
  grep -vE '^"|Uses:|dictionary' | tail -8
