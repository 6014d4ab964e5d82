#!/usr/bin/env bash
# compare_llamacpp.sh — side-by-side CPU benchmark of gemma4c against llama.cpp on the
# same random-weight Gemma 4 unified checkpoint at equal threads. Builds llama-bench in a local
# llama.cpp checkout OUTSIDE this repository (LLAMA_CPP_DIR), converts the checkpoint with
# llama.cpp's own convert_hf_to_gguf.py to a bf16 GGUF, then alternates `llama-bench` and
# `gemma4c bench` (pp64, pp512, tg128) for ROUNDS rounds and writes the report (median over
# rounds) via bench/compare_report.py to $OUT/results.md, or with SAVE=1 to a new file under
# bench/results/. Nothing from llama.cpp is ever copied into the repository.
#
# Usage:  LLAMA_CPP_DIR=~/src/llama.cpp bench/compare_llamacpp.sh   (every step is skipped when its output exists)
#         QUICK=1 bench/compare_llamacpp.sh                          (a tiny end-to-end check of the pipeline)
# Knobs (environment), besides bench/common.sh's (THREADS PROMPTS NGEN MODEL GGUF G4_BENCH_DATA
#   LLAMA_CPP_DIR LLAMA_GIT G4_BIN G4_REF_PY QUICK OUT SAVE RESULTS): ROUNDS=3 REPS=3
#   G4_ARGS="--prefill-chunk 64" (added to gemma4c's command)
#   CONVERT_VENV=$G4_BENCH_DATA/llama-venv (llama.cpp's converter requirements; torch from G4_REF_PY)
#   BF16=auto|1|0: also run `gemma4c bench --prefill-bf16 -n 0` in every round (the opt-in bf16
#   prefill against the same llama-bench prompts; auto: where the CPU has AVX512-BF16 or AMX-BF16)
#   G4_BIN_BASE=<a baseline gemma4c binary, e.g. a build of the code before a change>: also run
#   `$G4_BIN_BASE bench` with gemma4c's arguments in every round, the three engines' order changing
#   from round to round; the report adds the baseline's ratio to llama.cpp and after/before
set -euo pipefail

. "$(dirname "$0")/common.sh"
bench_init compare_llamacpp.sh compare 3 3 g4-compare
G4_ARGS=${G4_ARGS:-}

for p in "$MODEL" "$GGUF"; do
  outside_repo "$p" "$p is inside the repository; large files stay outside it"
done
need_g4_bin
G4_BIN_BASE=${G4_BIN_BASE:-}
[ -z "$G4_BIN_BASE" ] || [ -x "$G4_BIN_BASE" ] || die "no baseline gemma4c binary at G4_BIN_BASE=$G4_BIN_BASE"
mkdir -p "$OUT"

# 1. llama-bench from the local llama.cpp checkout (CPU only, native ISA)
llama_tools llama-bench
LLAMA_BENCH="$LLAMA_BUILD_DIR/bin/llama-bench"

# 2. the random-weight checkpoint, 3. its bf16 GGUF by llama.cpp's own converter
bench_model
bf16_gguf

# 4. alternate the two engines, ROUNDS times, equal threads
record_machine
record_g4_commit
LLAMA_CMD=("$LLAMA_BENCH" -m "$GGUF" -p "$PROMPTS" -n "$NGEN" -t "$THREADS" -r "$REPS" -o json)
# shellcheck disable=SC2206
G4_CMD=("$G4_BIN" bench -m "$MODEL" -p "$PROMPTS" -n "$NGEN" --threads "$THREADS" --reps "$REPS" $G4_ARGS)
BF16=${BF16:-auto}
if [ "$BF16" = auto ]; then
  if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then BF16=1; else BF16=0; fi
fi
G4_BF16_CMD=("${G4_CMD[@]}" --prefill-bf16)
for i in "${!G4_BF16_CMD[@]}"; do   # prompts only: decode is the exact mode's
  [ "${G4_BF16_CMD[$i]}" = -n ] && G4_BF16_CMD[$((i + 1))]=0
done
show_cmd "${LLAMA_CMD[@]}" > "$OUT/llama-cmd.txt"
show_cmd "${G4_CMD[@]}" > "$OUT/gemma4c-cmd.txt"
rm -f "$OUT"/gemma4c-bf16-r*.txt "$OUT/gemma4c-bf16-cmd.txt"
[ "$BF16" = 1 ] && show_cmd "${G4_BF16_CMD[@]}" > "$OUT/gemma4c-bf16-cmd.txt"
G4_BASE_CMD=("$G4_BIN_BASE" "${G4_CMD[@]:1}")   # the same arguments as gemma4c's
rm -f "$OUT"/gemma4c-base-r*.txt "$OUT/gemma4c-base-cmd.txt"
[ -n "$G4_BIN_BASE" ] && show_cmd "${G4_BASE_CMD[@]}" > "$OUT/gemma4c-base-cmd.txt"
date -u +"%Y-%m-%d %H:%M UTC" > "$OUT/date.txt"
run_llama() {
  log "round $1/$ROUNDS: llama-bench"
  "${LLAMA_CMD[@]}" > "$OUT/llama-r$1.json" 2> "$OUT/llama-r$1.log" ||
    { tail -20 "$OUT/llama-r$1.log" >&2; die "llama-bench failed (log: $OUT/llama-r$1.log)"; }
}
run_g4() {
  log "round $1/$ROUNDS: gemma4c bench"
  "${G4_CMD[@]}" > "$OUT/gemma4c-r$1.txt" 2> "$OUT/gemma4c-r$1.log" ||
    { tail -20 "$OUT/gemma4c-r$1.log" >&2; die "gemma4c bench failed (log: $OUT/gemma4c-r$1.log)"; }
  grep -v '^{' "$OUT/gemma4c-r$1.txt" | grep -E '^  (pp|tg)' >&2 || true
}
run_g4_bf16() {
  [ "$BF16" = 1 ] || return 0
  log "round $1/$ROUNDS: gemma4c bench --prefill-bf16"
  "${G4_BF16_CMD[@]}" > "$OUT/gemma4c-bf16-r$1.txt" 2> "$OUT/gemma4c-bf16-r$1.log" ||
    { tail -20 "$OUT/gemma4c-bf16-r$1.log" >&2; die "gemma4c bench --prefill-bf16 failed (log: $OUT/gemma4c-bf16-r$1.log)"; }
  grep -v '^{' "$OUT/gemma4c-bf16-r$1.txt" | grep -E '^  pp' >&2 || true
}
run_g4_base() {
  log "round $1/$ROUNDS: gemma4c bench (baseline $G4_BIN_BASE)"
  "${G4_BASE_CMD[@]}" > "$OUT/gemma4c-base-r$1.txt" 2> "$OUT/gemma4c-base-r$1.log" ||
    { tail -20 "$OUT/gemma4c-base-r$1.log" >&2; die "baseline gemma4c bench failed (log: $OUT/gemma4c-base-r$1.log)"; }
  grep -v '^{' "$OUT/gemma4c-base-r$1.txt" | grep -E '^  (pp|tg)' >&2 || true
}
# ABBA order (llama.cpp first in odd rounds, gemma4c first in even ones) so slow drift in the
# machine's state (other tenants, page cache, clocks) does not favour one engine.
# With a baseline (G4_BIN_BASE) the three engines (L llama.cpp, G gemma4c and its bf16 prefill,
# B baseline) go LGB, GBL, BLG, then the mirror images BGL, GLB, LBG, and again: every 3 rounds
# each engine runs once in each position; every 6, each follows each other one equally often.
for r in $(seq 1 "$ROUNDS"); do
  record_load "$r"
  if [ -n "$G4_BIN_BASE" ]; then
    order=(LGB GBL BLG BGL GLB LBG)
    o=${order[$(((r - 1) % 6))]}
    for e in ${o:0:1} ${o:1:1} ${o:2:1}; do
      case $e in L) run_llama "$r";; G) run_g4 "$r"; run_g4_bf16 "$r";; B) run_g4_base "$r";; esac
    done
  elif [ $((r % 2)) -eq 1 ]; then run_llama "$r"; run_g4 "$r"; run_g4_bf16 "$r"
  else run_g4_bf16 "$r"; run_g4 "$r"; run_llama "$r"; fi
done
uptime > "$OUT/uptime.txt"

# 5. the table: $OUT/results.md, or with SAVE=1 a new file under bench/results/
python3 "$REPO/bench/compare_report.py" "$OUT" > "$OUT/report.md"
write_results "gemma4c vs llama.cpp, bf16, side by side (compare_llamacpp.sh)" "$OUT/report.md"
log "wrote $RESULTS (raw outputs in $OUT)"
cat "$RESULTS"
