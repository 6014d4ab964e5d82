#!/usr/bin/env bash
# compare_batched.sh — batched decode side by side: several sequences decoding together, as a
# server under load runs them. For every B in BATCHES and ROUNDS rounds, `gemma4c bench -p 0 -n NGEN
# --batch B` and llama.cpp's `llama-batched-bench -npp 16 -ntg NGEN -npl B` (its S_TG: generated
# tokens per second over all sequences) run back to back at equal threads on the same checkpoint and
# its bf16 GGUF, gemma4c first in odd rounds and llama.cpp first in even ones, so that a shared
# host's drift favours neither. gemma4c bench measures the read bandwidth before each run; the report
# (bench/compare_batched_report.py) gives both engines' tokens/s, the paired ratio and each engine's
# fraction of that round's bandwidth roofline (a step reads the weights once for all B sequences).
# llama-batched-bench is built in a local llama.cpp checkout OUTSIDE the repository; nothing of it
# enters the repository.
#
# Usage:  bench/compare_batched.sh      (the checkpoint and its bf16 GGUF are made as compare_llamacpp.sh makes them)
#         QUICK=1 bench/compare_batched.sh   (a tiny end-to-end check: BATCHES=1,2, 8 tokens, 1 rep, 2 rounds)
# Knobs (environment), besides bench/common.sh's (THREADS MODEL GGUF G4_BENCH_DATA LLAMA_CPP_DIR
#   LLAMA_GIT G4_BIN G4_REF_PY QUICK OUT SAVE RESULTS): ROUNDS=2 REPS=2 NGEN_BATCHED=32 BATCHES=1,4,8,16
#   LLAMA_BATCHED_BENCH=PATH (a llama-batched-bench built elsewhere, e.g. without AMX, to compare
#   with gemma4c's avx2 / avx512 paths; default: built in LLAMA_CPP_DIR/build)
#   G4_CPU_ISA=avx2|avx512|... (gemma4c's kernel path, recorded in the commands)
#   G4_FLAGS="--act-q8" (more gemma4c bench flags, recorded in the commands)
#   Quantized weights: MODEL=path/to/file.gguf GGUF=path/to/file.gguf (both engines on the one file)
set -euo pipefail

. "$(dirname "$0")/common.sh"
bench_init compare_batched.sh batched 2 2 g4-batched
if [ "$QUICK" = 1 ]; then NGEN_BATCHED=${NGEN_BATCHED:-8} BATCHES=${BATCHES:-1,2}; fi
NGEN=${NGEN_BATCHED:-32}
BATCHES=${BATCHES:-1,4,8,16}

need_g4_bin
mkdir -p "$OUT"
[ -n "${LLAMA_BATCHED_BENCH:-}" ] || llama_tools llama-batched-bench
bench_model
bf16_gguf
record_machine
record_g4_commit
date -u +"%Y-%m-%d %H:%M UTC" > "$OUT/date.txt"
LBB=${LLAMA_BATCHED_BENCH:-$LLAMA_CPP_DIR/build/bin/llama-batched-bench}
[ -x "$LBB" ] || die "no llama-batched-bench at $LBB"
read -r -a G4_EXTRA <<< "${G4_FLAGS:-}"
{ echo "${G4_CPU_ISA:+G4_CPU_ISA=$G4_CPU_ISA }$(show_cmd "$G4_BIN" bench -m "$MODEL" -p 0 -n "$NGEN")--batch B $(show_cmd --reps "$REPS" --threads "$THREADS" ${G4_EXTRA[@]+"${G4_EXTRA[@]}"})"
  echo "$(show_cmd "$LBB" -m "$GGUF")-c CTX $(show_cmd -b 2048 -ub 512 -npp 16 -ntg "$NGEN")-npl B $(show_cmd -t "$THREADS" --output-format jsonl)   # CTX = (16 + $NGEN) x B + 64"
} > "$OUT/cmds.txt"

run_g4() {  # round batch
  log "round $1/$ROUNDS: gemma4c --batch $2"
  "$G4_BIN" bench -m "$MODEL" -p 0 -n "$NGEN" --batch "$2" --reps "$REPS" --threads "$THREADS" ${G4_EXTRA[@]+"${G4_EXTRA[@]}"} \
    > "$OUT/gemma4c-r$1-b$2.txt" 2> "$OUT/gemma4c-r$1-b$2.log" ||
    { tail -20 "$OUT/gemma4c-r$1-b$2.log" >&2; die "gemma4c bench failed (log: $OUT/gemma4c-r$1-b$2.log)"; }
  tail -1 "$OUT/gemma4c-r$1-b$2.txt" > "$OUT/gemma4c-r$1-b$2.json"
}
run_llama() {  # round batch
  log "round $1/$ROUNDS: llama-batched-bench -npl $2"
  "$LBB" -m "$GGUF" -c $(((16 + NGEN) * $2 + 64)) -b 2048 -ub 512 -npp 16 -ntg "$NGEN" -npl "$2" -t "$THREADS" \
    --output-format jsonl > "$OUT/llama-r$1-b$2.txt" 2> "$OUT/llama-r$1-b$2.log" ||
    { tail -20 "$OUT/llama-r$1-b$2.log" >&2; die "llama-batched-bench failed (log: $OUT/llama-r$1-b$2.log)"; }
  grep '^{' "$OUT/llama-r$1-b$2.txt" > "$OUT/llama-r$1-b$2.jsonl" || die "no JSON line from llama-batched-bench (output: $OUT/llama-r$1-b$2.txt)"
}
for r in $(seq 1 "$ROUNDS"); do
  record_load "$r"
  for b in ${BATCHES//,/ }; do
    if [ $((r % 2)) -eq 1 ]; then run_g4 "$r" "$b"; run_llama "$r" "$b"
    else run_llama "$r" "$b"; run_g4 "$r" "$b"; fi
  done
done
uptime > "$OUT/uptime.txt"
python3 "$REPO/bench/compare_batched_report.py" "$OUT" > "$OUT/report.md"
write_results "Batched decode side by side with llama.cpp (compare_batched.sh)" "$OUT/report.md"
log "wrote $RESULTS (raw outputs in $OUT)"
cat "$RESULTS"
