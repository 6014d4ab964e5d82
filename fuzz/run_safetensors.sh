#!/usr/bin/env bash
# Builds the safetensors/config fuzz target with clang (libFuzzer + ASan + UBSan) and runs it
# for a bounded time. Usage: fuzz/run_safetensors.sh [seconds]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; mkdir -p "$out/corpus-safetensors"
clang -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -fsanitize=fuzzer,address,undefined \
  fuzz/fuzz_safetensors.c src/io/safetensors.c src/base/dtype.c src/io/hfconfig.c src/base/error.c \
  -ljansson -lm -o "$out/fuzz_safetensors"
# seeds: the headers of the committed fixtures and their config.json files
for f in tests/fixtures/*/model*.safetensors; do head -c 20000 "$f" > "$out/corpus-safetensors/$(basename "$(dirname "$f")")-$(basename "$f")"; done
cp tests/fixtures/*/config.json "$out/corpus-safetensors/" 2>/dev/null || true
for f in tests/fixtures/*/config.json; do cp "$f" "$out/corpus-safetensors/$(basename "$(dirname "$f")")-config.json"; done
"$out/fuzz_safetensors" -max_total_time="$secs" -max_len=65536 "$out/corpus-safetensors" 2>&1 | tail -5
