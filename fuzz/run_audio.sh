#!/usr/bin/env bash
# Runs the audio decoding fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan) for a
# bounded time. Usage: fuzz/run_audio.sh [seconds]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; mkdir -p "$out/corpus-audio"
# seeds: the committed test clips
cp tests/fixtures/multimodal/*.wav "$out/corpus-audio/"
"$out/fuzz_audio" -max_total_time="$secs" -max_len=16384 -rss_limit_mb=1024 "$out/corpus-audio" 2>&1 | tail -5
