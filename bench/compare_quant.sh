#!/usr/bin/env bash
# compare_quant.sh — quantized weights side by side: gemma4c on its own packs
# (`gemma4c pack --dtype q8_0|q4_0|q4_k`), gemma4c on llama.cpp's GGUF files of the same checkpoint
# (convert_hf_to_gguf.py --outtype bf16|q8_0, then llama-quantize Q4_0 / Q4_K_M from the bf16 file),
# and llama-bench on those same GGUF files, at equal threads. Same approach as compare_llamacpp.sh:
# llama.cpp is built OUTSIDE the repository, large files stay outside it, rounds alternate the
# engines (per type: llama-bench on the GGUF, gemma4c on the GGUF, gemma4c on the pack; reversed in
# even rounds), and bench/compare_quant_report.py turns the raw outputs into a new file under
# bench/results/. Nothing from llama.cpp is ever copied into the repository.
#
# Usage:  bench/compare_quant.sh            (every preparation step is skipped when its output exists)
# Knobs (environment): THREADS=2 ROUNDS=2 REPS=2 PROMPTS=64,512 NGEN=128 TYPES="q8_0 q4_0 q4_k" (add bf16 for the
#   baseline: HF directory and bf16 GGUF)  MODEL=/tmp/g4-bench QDIR=/tmp/g4-quant (GGUF files and packs) LLAMA_DIR=/tmp/llama.cpp
#   G4_BIN=build/gemma4c G4_REF_PY=<python> (transformers + torch for the converter)
#   OUT=/tmp/g4-quant-compare-DATE RESULTS=bench/results/DATE-compare-quant-COMMIT.md
#   ACCURACY=FILE (markdown from bench/quant_accuracy.py to put in the section; optional)
#   ACTQ8=1: also gemma4c on the GGUF with --act-q8 (int8 activations, as llama.cpp) in every round
#   PACKS=0: skip gemma4c on its own packs (GGUF files only)
#   G4_SRC="what G4_BIN was built from" (when not this working tree)  REPACK=1 (repack existing packs)  DRY=1: prepare everything, then run one round with -p 16 -n 8 --reps 1 (checks the pipeline)
set -euo pipefail

. "$(dirname "$0")/common.sh"
bench_init compare_quant.sh compare-quant 2 2 g4-quant-compare
TYPES=${TYPES:-q8_0 q4_0 q4_k}
QDIR=${QDIR:-/tmp/g4-quant}
ACCURACY=${ACCURACY:-}
if [ "${DRY:-0}" = 1 ]; then ROUNDS=1 REPS=1 PROMPTS=16 NGEN=8; fi

outside_repo "$LLAMA_DIR" "LLAMA_DIR=$LLAMA_DIR is inside the repository; use a path outside it"
outside_repo "$QDIR" "QDIR=$QDIR is inside the repository; large files stay outside it"
need_g4_bin
[ -f "$MODEL/config.json" ] || die "no checkpoint at $MODEL (tools/reference/make_bench_model.py writes one)"
mkdir -p "$OUT" "$QDIR"
LB="$LLAMA_DIR/build/bin"

# 1. llama-bench and llama-quantize (CPU only, native ISA), in the llama.cpp checkout's build dir
if [ ! -x "$LB/llama-bench" ] || [ ! -x "$LB/llama-quantize" ]; then
  [ -f "$LLAMA_DIR/CMakeLists.txt" ] || die "no llama.cpp checkout at $LLAMA_DIR (bench/compare_llamacpp.sh clones one)"
  if [ ! -f "$LLAMA_DIR/build/CMakeCache.txt" ]; then
    cmake -S "$LLAMA_DIR" -B "$LLAMA_DIR/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
      -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF > "$OUT/llama-cmake.log"
  fi
  log "building llama-bench and llama-quantize in $LLAMA_DIR/build"
  cmake --build "$LLAMA_DIR/build" --target llama-bench llama-quantize -j"$(nproc)" > "$OUT/llama-build.log"
fi

# 2. GGUF files: llama.cpp's converter (with make_gemma4_gguf.py's config shim) for bf16 and Q8_0,
#    llama-quantize from the bf16 file for Q4_0 and Q4_K_M (its default recipe: token_embd, which is
#    also the tied LM head, becomes Q6_K; Q4_K_M also keeps some attn_v/ffn_down in Q6_K)
convert() {  # outtype file
  [ -f "$2" ] && return
  log "converting $MODEL -> $2 ($1)"
  "$REF_PY" - "$LLAMA_DIR" "$MODEL" "$1" "$2" > "$OUT/convert-$1.log" 2>&1 <<EOF || { tail -20 "$OUT/convert-$1.log" >&2; die "conversion failed"; }
import os, pathlib, subprocess, sys, tempfile
sys.path.insert(0, "$REPO/tools/reference")
from make_gemma4_gguf import SHIM
lc, model, outtype, out = sys.argv[1:5]
with tempfile.TemporaryDirectory() as tmp:
    shim = pathlib.Path(tmp) / "shim.py"
    shim.write_text(SHIM)
    env = dict(os.environ, NO_LOCAL_GGUF="1", PYTHONPATH=str(pathlib.Path(lc) / "gguf-py"))
    sys.exit(subprocess.run([sys.executable, str(shim), lc, model, "--outtype", outtype, "--outfile", out], env=env).returncode)
EOF
}
convert bf16 "$QDIR/g4-bench-bf16.gguf"
declare -A GGUF=([bf16]="$QDIR/g4-bench-bf16.gguf" [q8_0]="$QDIR/g4-bench-q8_0.gguf" [q4_0]="$QDIR/g4-bench-q4_0.gguf" [q4_k]="$QDIR/g4-bench-q4_k_m.gguf")
declare -A LQ=([q4_0]=Q4_0 [q4_k]=Q4_K_M)
for t in $TYPES; do
  f=${GGUF[$t]}
  [ -f "$f" ] && continue
  if [ "$t" = q8_0 ] || [ "$t" = bf16 ]; then convert "$t" "$f"; continue; fi
  log "llama-quantize ${LQ[$t]} -> $f"
  "$LB/llama-quantize" "$QDIR/g4-bench-bf16.gguf" "$f" "${LQ[$t]}" "$THREADS" > "$QDIR/quantize-$t.log" 2>&1 ||
    { tail -20 "$QDIR/quantize-$t.log" >&2; die "llama-quantize failed"; }
done

# 3. our packs (tp 1); REPACK=1 rewrites existing ones (q4_k takes ~2 min on 2 cores). TYPES may
#    include bf16: then "pack" is the HF directory itself (the baseline), "GGUF" the converter's bf16 file.
pack_of() { if [ "$1" = bf16 ]; then echo "$MODEL"; else echo "$QDIR/g4-bench-$1.g4c"; fi; }
for t in $TYPES; do
  [ "$t" = bf16 ] && continue
  [ "${PACKS:-1}" = 0 ] && continue
  p="$QDIR/g4-bench-$t.g4c"
  if [ ! -f "$p" ] || [ "${REPACK:-0}" = 1 ]; then
    log "gemma4c pack --dtype $t -> $p"
    "$G4_BIN" pack -m "$MODEL" -o "$p" --dtype "$t" > "$OUT/pack-$t.log" 2>&1 || { cat "$OUT/pack-$t.log" >&2; die "pack failed"; }
  fi
done

# 4. what each file holds (tensor types), for the report
for t in $TYPES; do
  "$REF_PY" - "${GGUF[$t]}" > "$OUT/gguf-types-$t.txt" <<'EOF' || true
import collections, sys
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
c = collections.Counter(t.tensor_type.name for t in r.tensors if len(t.shape) >= 2 or t.tensor_type.name not in ("F32",))
emb = [t.tensor_type.name for t in r.tensors if t.name == "token_embd.weight"]
print(", ".join(f"{n} x{k}" for n, k in sorted(c.items())) + f"; token_embd (tied LM head) {emb[0] if emb else '?'}")
EOF
done
ls -l "$QDIR" > "$OUT/files.txt"

# 5. rounds
record_machine
if [ -n "${G4_SRC:-}" ]; then   # G4_BIN was built elsewhere, e.g. from `git archive HEAD` of this repo
  echo "$G4_SRC" > "$OUT/gemma4c-commit.txt"; : > "$OUT/gemma4c-dirty.txt"
else
  record_g4_commit
fi
date -u +"%Y-%m-%d %H:%M UTC" > "$OUT/date.txt"
echo "$TYPES" > "$OUT/types.txt"
LLAMA_ARGS=(-p "$PROMPTS" -n "$NGEN" -t "$THREADS" -r "$REPS" -o json)
G4_ARGS=(-p "$PROMPTS" -n "$NGEN" --threads "$THREADS" --reps "$REPS")
{ printf '%q ' "$LB/llama-bench" -m '<GGUF>' "${LLAMA_ARGS[@]}"; echo; printf '%q ' "$G4_BIN" bench -m '<GGUF or .g4c>' "${G4_ARGS[@]}"; echo; } > "$OUT/cmds.txt"
run_llama() {  # type round
  log "round $2: llama-bench ${GGUF[$1]}"
  "$LB/llama-bench" -m "${GGUF[$1]}" "${LLAMA_ARGS[@]}" > "$OUT/llama-$1-r$2.json" 2> "$OUT/llama-$1-r$2.log" ||
    { tail -20 "$OUT/llama-$1-r$2.log" >&2; die "llama-bench failed"; }
}
run_g4() {  # kind(gguf|pack|aq8) type round; aq8 = the GGUF with --act-q8
  local m=${GGUF[$2]} extra=(); [ "$1" = pack ] && m=$(pack_of "$2"); [ "$1" = aq8 ] && extra=(--act-q8)
  [ "$1" = pack ] && [ "${PACKS:-1}" = 0 ] && return
  [ "$1" = aq8 ] && [ "${ACTQ8:-0}" != 1 ] && return
  log "round $3: gemma4c bench $m ${extra[*]}"
  "$G4_BIN" bench -m "$m" "${G4_ARGS[@]}" "${extra[@]}" > "$OUT/g4$1-$2-r$3.txt" 2> "$OUT/g4$1-$2-r$3.log" ||
    { tail -20 "$OUT/g4$1-$2-r$3.log" >&2; die "gemma4c bench failed"; }
  grep -E '^  (pp|tg)' "$OUT/g4$1-$2-r$3.txt" | sed 's/reps:.*//' >&2 || true
}
for r in $(seq 1 "$ROUNDS"); do
  record_load "$r"
  for t in $TYPES; do
    if [ $((r % 2)) -eq 1 ]; then run_llama "$t" "$r"; run_g4 gguf "$t" "$r"; run_g4 aq8 "$t" "$r"; run_g4 pack "$t" "$r"
    else run_g4 pack "$t" "$r"; run_g4 aq8 "$t" "$r"; run_g4 gguf "$t" "$r"; run_llama "$t" "$r"; fi
  done
done
uptime > "$OUT/uptime.txt"

# 6. the report, in a new file under bench/results/
python3 "$REPO/bench/compare_quant_report.py" "$OUT" ${ACCURACY:+--accuracy "$ACCURACY"} > "$OUT/section.md"
if [ "${DRY:-0}" = 1 ]; then log "dry run: report in $OUT/section.md (bench/results/ untouched)"; cat "$OUT/section.md"; exit 0; fi
write_results "Quantized weights side by side with llama.cpp (compare_quant.sh)" "$OUT/section.md"
log "wrote $RESULTS (raw outputs in $OUT)"
cat "$OUT/section.md"
