#!/usr/bin/env bash
# Runs the safetensors/config fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan)
# for a bounded time. Usage: fuzz/run_safetensors.sh [seconds]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; mkdir -p "$out/corpus-safetensors"
# seeds: the headers of the committed fixtures and their config.json files
for f in tests/fixtures/*/model*.safetensors; do head -c 20000 "$f" > "$out/corpus-safetensors/$(basename "$(dirname "$f")")-$(basename "$f")"; done
cp tests/fixtures/*/config.json "$out/corpus-safetensors/" 2>/dev/null || true
for f in tests/fixtures/*/config.json; do cp "$f" "$out/corpus-safetensors/$(basename "$(dirname "$f")")-config.json"; done
"$out/fuzz_safetensors" -max_total_time="$secs" -max_len=65536 "$out/corpus-safetensors" 2>&1 | tail -5
