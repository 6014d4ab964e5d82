#!/usr/bin/env bash
# Runs the .g4c reader fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan) for a
# bounded time with the header crc rewritten per input (G4_FUZZ_FIXCRC=1), seeded with small
# packs of the fixtures. Usage: fuzz/run_pack.sh [seconds] [gemma4c binary]   (default 60, build/gemma4c)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
bin=${2:-build/gemma4c}
out=build-fuzz; mkdir -p "$out/corpus-pack"
# seeds: the causal fixture (config + weights, no tokenizer so the prefix stays small) packed
# for tp 1, 2 and 4, cut after the directory: the target zero-fills the segments back
if [ -x "$bin" ]; then
  seed_dir="$out/pack-seed-model"; mkdir -p "$seed_dir"
  cp tests/fixtures/g4-causal-tiny/config.json tests/fixtures/g4-causal-tiny/model.safetensors "$seed_dir/"
  for tp in 1 2 4; do
    "$bin" pack -m "$seed_dir" -o "$out/seed$tp.g4c" --tp "$tp" 2>/dev/null || continue
    n=$(python3 -c "import struct,sys; b=open(sys.argv[1],'rb').read(64); print(struct.unpack_from('<Q',b,32)[0]+struct.unpack_from('<Q',b,40)[0])" "$out/seed$tp.g4c")
    head -c "$n" "$out/seed$tp.g4c" > "$out/corpus-pack/causal-tp$tp"
  done
fi
G4_FUZZ_FIXCRC=1 "$out/fuzz_pack" -max_total_time="$secs" -max_len=65536 "$out/corpus-pack" 2>&1 | tail -5
