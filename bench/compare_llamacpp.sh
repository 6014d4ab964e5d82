#!/usr/bin/env bash
# compare_llamacpp.sh — side-by-side CPU benchmark of gemma4c against llama.cpp on the
# same random-weight Gemma 4 unified checkpoint at equal threads. Builds llama.cpp (llama-bench
# only) from a checkout OUTSIDE this repository, converts the checkpoint with llama.cpp's own
# convert_hf_to_gguf.py to a bf16 GGUF, then alternates `llama-bench` and `gemma4c bench`
# (pp64, pp512, tg128) for ROUNDS rounds and writes a new file under bench/results/ (median over
# rounds) via bench/compare_report.py. Nothing from llama.cpp is ever copied into the repository.
#
# Usage:  bench/compare_llamacpp.sh            (every step is skipped when its output exists)
# Knobs (environment): THREADS=2 ROUNDS=3 REPS=3 PROMPTS=64,512 NGEN=128
#   MODEL=/tmp/g4-bench GGUF=/tmp/g4-bench-bf16.gguf LLAMA_DIR=/tmp/llama.cpp
#   LLAMA_GIT=<clone url or local mirror> G4_BIN=build/gemma4c G4_ARGS="--prefill-chunk 64"
#   G4_REF_PY=<python> (transformers with gemma4_unified and torch; makes MODEL, lends torch to the converter)
#   CONVERT_VENV=/tmp/llama-venv (llama.cpp's converter requirements) OUT=/tmp/g4-compare-DATE
#   RESULTS=bench/results/DATE-compare-llamacpp-COMMIT.md
#   BF16=auto|1|0: also run `gemma4c bench --prefill-bf16 -n 0` in every round (the opt-in bf16
#   prefill against the same llama-bench prompts; auto: where the CPU has AVX512-BF16 or AMX-BF16)
set -euo pipefail

. "$(dirname "$0")/common.sh"
bench_init compare_llamacpp.sh compare 3 3 g4-compare
GGUF=${GGUF:-/tmp/g4-bench-bf16.gguf}
LLAMA_GIT=${LLAMA_GIT:-https://github.com/ggml-org/llama.cpp}
G4_ARGS=${G4_ARGS:-}
CONVERT_VENV=${CONVERT_VENV:-/tmp/llama-venv}

outside_repo "$LLAMA_DIR" "LLAMA_DIR=$LLAMA_DIR is inside the repository; use a path outside it"
for p in "$MODEL" "$GGUF"; do
  outside_repo "$p" "$p is inside the repository; large files stay outside it"
done
need_g4_bin
mkdir -p "$OUT"

# 1. llama.cpp checkout + llama-bench (CPU only, native ISA, no CURL)
if [ ! -x "$LLAMA_DIR/build/bin/llama-bench" ]; then
  if [ ! -f "$LLAMA_DIR/CMakeLists.txt" ]; then
    log "cloning $LLAMA_GIT into $LLAMA_DIR"
    git clone --depth 1 "$LLAMA_GIT" "$LLAMA_DIR"
  fi
  log "building llama-bench in $LLAMA_DIR/build"
  cmake -S "$LLAMA_DIR" -B "$LLAMA_DIR/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF > "$OUT/llama-cmake.log"
  cmake --build "$LLAMA_DIR/build" --target llama-bench -j"$(nproc)" > "$OUT/llama-build.log"
fi
LLAMA_BENCH="$LLAMA_DIR/build/bin/llama-bench"

# 2. the random-weight checkpoint (transformers save_pretrained)
if [ ! -f "$MODEL/config.json" ]; then
  log "writing the benchmark checkpoint to $MODEL"
  need_ref_py
  "$REF_PY" "$REPO/tools/reference/make_bench_model.py" "$MODEL"
fi

# 3. bf16 GGUF with llama.cpp's own converter, in a venv with its pinned requirements
#    (transformers 4.57.6 does not know gemma4_unified, so the converter reads config.json as
#    written; a transformers 5.x AutoConfig re-serializes it without global_head_dim and the
#    converter stops with KeyError: 'global_head_dim').
if [ ! -f "$GGUF" ]; then
  if [ ! -x "$CONVERT_VENV/bin/python" ]; then
    log "creating $CONVERT_VENV with llama.cpp's converter requirements"
    python3 -m venv "$CONVERT_VENV"
    # Its pinned requirements minus torch (whose CPU wheel index, download.pytorch.org, may be
    # unreachable); torch then comes from REF_PY's environment through a .pth file, which Python
    # appends AFTER the venv's own site-packages, so the venv's transformers/numpy pins win.
    REQ="$LLAMA_DIR/requirements"
    grep -hv -E '^[[:space:]]*(#|-r|--|torch)' "$REQ/requirements-convert_hf_to_gguf.txt" \
      "$REQ/requirements-convert_legacy_llama.txt" | grep -v '^[[:space:]]*$' > "$OUT/convert-reqs.txt"
    "$CONVERT_VENV/bin/pip" install -q -r "$OUT/convert-reqs.txt"
    if ! "$CONVERT_VENV/bin/python" -c 'import torch' 2>/dev/null; then
      need_ref_py
      TORCH_SITE=$("$REF_PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
      SITE=$("$CONVERT_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
      echo "$TORCH_SITE" > "$SITE/zz-torch-from-ref-py.pth"
    fi
  fi
  log "converting $MODEL -> $GGUF (bf16)"
  "$CONVERT_VENV/bin/python" "$LLAMA_DIR/convert_hf_to_gguf.py" "$MODEL" --outtype bf16 --outfile "$GGUF" \
    > "$OUT/convert.log" 2>&1 || { tail -20 "$OUT/convert.log" >&2; die "conversion failed (log: $OUT/convert.log)"; }
fi

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
printf '%q ' "${LLAMA_CMD[@]}" > "$OUT/llama-cmd.txt"
printf '%q ' "${G4_CMD[@]}" > "$OUT/gemma4c-cmd.txt"
rm -f "$OUT"/gemma4c-bf16-r*.txt "$OUT/gemma4c-bf16-cmd.txt"
[ "$BF16" = 1 ] && printf '%q ' "${G4_BF16_CMD[@]}" > "$OUT/gemma4c-bf16-cmd.txt"
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
# ABBA order (llama.cpp first in odd rounds, gemma4c first in even ones) so slow drift in the
# machine's state (other tenants, page cache, clocks) does not favour one engine.
for r in $(seq 1 "$ROUNDS"); do
  record_load "$r"
  if [ $((r % 2)) -eq 1 ]; then run_llama "$r"; run_g4 "$r"; run_g4_bf16 "$r"
  else run_g4_bf16 "$r"; run_g4 "$r"; run_llama "$r"; fi
done
uptime > "$OUT/uptime.txt"

# 5. the table, in a new file under bench/results/
python3 "$REPO/bench/compare_report.py" "$OUT" > "$OUT/RESULTS.md"
write_results "gemma4c vs llama.cpp, bf16, side by side (compare_llamacpp.sh)" "$OUT/RESULTS.md"
log "wrote $RESULTS (raw outputs in $OUT)"
cat "$RESULTS"
