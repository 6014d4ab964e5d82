#!/usr/bin/env bash
# Runs the image decoding fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan) for a
# bounded time. Usage: fuzz/run_image.sh [seconds]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; mkdir -p "$out/corpus-image"
# seeds: the committed test images of every format under 40 KB
find tests/fixtures/media -maxdepth 1 -type f \( -name '*.png' -o -name '*.jpg' -o -name '*.webp' -o -name '*.gif' \) \
  -size -40k -exec cp {} "$out/corpus-image/" \;
"$out/fuzz_image" -max_total_time="$secs" -max_len=40960 -rss_limit_mb=1024 "$out/corpus-image" 2>&1 | tail -5
