#!/usr/bin/env bash
# Builds the GGUF reader fuzz target with clang (libFuzzer + ASan + UBSan) and runs it for a
# bounded time. Usage: fuzz/run_gguf.sh [seconds]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; mkdir -p "$out/corpus-gguf"
clang -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined fuzz/fuzz_gguf.c src/io/gguf.c src/io/safetensors.c src/base/dtype.c \
  src/base/error.c -ljansson -lm -o "$out/fuzz_gguf"
# seed: the committed test GGUF (every value type, every supported tensor type)
cp tests/fixtures/quant/tiny.gguf "$out/corpus-gguf/tiny.gguf"
"$out/fuzz_gguf" -max_total_time="$secs" -max_len=32768 "$out/corpus-gguf" 2>&1 | tail -5
