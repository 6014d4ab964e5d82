#!/usr/bin/env bash
# compare_batched.sh — batched decode side by side: several sequences decoding together, as a
# server under load runs them. Alternates `gemma4c bench -p 0 -n NGEN --batch B` with llama.cpp's
# `llama-batched-bench -npp 16 -ntg NGEN -npl B` (its S_TG: generated tokens per second over all
# sequences) for every B in BATCHES, ROUNDS rounds, at equal threads, on the same checkpoint and its
# bf16 GGUF; prints a markdown table (median over rounds, and the paired ratio) and writes it to
# $OUT/BATCHED.md and a new file under bench/results/. llama.cpp is built from a checkout OUTSIDE the repository (the target
# llama-batched-bench beside compare_llamacpp.sh's llama-bench); nothing of it enters the repository.
#
# Usage:  bench/compare_batched.sh      (after compare_llamacpp.sh has made the GGUF and the build)
# Knobs (environment): THREADS=2 ROUNDS=2 REPS=2 NGEN_BATCHED=32 BATCHES=1,4,8,16
#   MODEL=/tmp/g4-bench GGUF=/tmp/g4-bench-bf16.gguf LLAMA_DIR=/tmp/llama.cpp G4_BIN=build/gemma4c
#   OUT=/tmp/g4-batched-DATE RESULTS=bench/results/DATE-compare-batched-COMMIT.md
set -euo pipefail

. "$(dirname "$0")/common.sh"
bench_init compare_batched.sh batched 2 2 g4-batched
NGEN=${NGEN_BATCHED:-32}
BATCHES=${BATCHES:-1,4,8,16}
GGUF=${GGUF:-/tmp/g4-bench-bf16.gguf}

outside_repo "$LLAMA_DIR" "LLAMA_DIR=$LLAMA_DIR is inside the repository; use a path outside it"
need_g4_bin
[ -f "$MODEL/config.json" ] || die "no checkpoint at $MODEL (run bench/compare_llamacpp.sh first)"
[ -f "$GGUF" ] || die "no GGUF at $GGUF (run bench/compare_llamacpp.sh first)"
[ -d "$LLAMA_DIR/build" ] || die "no llama.cpp build in $LLAMA_DIR/build (run bench/compare_llamacpp.sh first)"
mkdir -p "$OUT"
if [ ! -x "$LLAMA_DIR/build/bin/llama-batched-bench" ]; then
  log "building llama-batched-bench in $LLAMA_DIR/build"
  cmake --build "$LLAMA_DIR/build" --target llama-batched-bench -j"$(nproc)" > "$OUT/llama-build.log"
fi
record_machine
record_g4_commit

ctx=$(( (16 + NGEN) * ${BATCHES##*,} + 64 ))
for r in $(seq 1 "$ROUNDS"); do
  record_load "$r"
  for b in ${BATCHES//,/ }; do
    log "round $r/$ROUNDS: gemma4c --batch $b"
    "$G4_BIN" bench -m "$MODEL" -p 0 -n "$NGEN" --batch "$b" --reps "$REPS" --threads "$THREADS" --no-peaks \
      2> "$OUT/gemma4c-r$r-b$b.log" | tail -1 > "$OUT/gemma4c-r$r-b$b.json"
  done
  log "round $r/$ROUNDS: llama-batched-bench"
  "$LLAMA_DIR/build/bin/llama-batched-bench" -m "$GGUF" -c "$ctx" -b 2048 -ub 512 -npp 16 -ntg "$NGEN" \
    -npl "$BATCHES" -t "$THREADS" --output-format jsonl 2> "$OUT/llama-r$r.log" | grep '^{' > "$OUT/llama-r$r.jsonl"
done
python3 "$REPO/bench/compare_batched_report.py" "$OUT" | tee "$OUT/BATCHED.md"
write_results "Batched decode side by side with llama.cpp (compare_batched.sh)" "$OUT/BATCHED.md"
log "wrote $RESULTS (raw outputs in $OUT)"
