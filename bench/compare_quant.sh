#!/usr/bin/env bash
# compare_quant.sh — quantized weights side by side: gemma4c on its own packs
# (`gemma4c pack --dtype q8_0|q4_0|q4_k`), gemma4c on llama.cpp's GGUF files of the same checkpoint
# (llama-quantize Q8_0 / Q4_0 / Q4_K_M from the one bf16 GGUF that compare_llamacpp.sh also uses),
# and llama-bench on those same GGUF files, at equal threads. Same approach as compare_llamacpp.sh:
# llama.cpp's tools are built in a local checkout OUTSIDE the repository, large files stay outside
# it, rounds alternate the engines (per type: llama-bench on the GGUF, gemma4c on the GGUF, gemma4c
# on the pack; reversed in even rounds), and bench/compare_quant_report.py turns the raw outputs into
# $OUT/results.md (SAVE=1: a new file under bench/results/). Nothing from llama.cpp is ever copied
# into the repository.
#
# Usage:  bench/compare_quant.sh            (every preparation step is skipped when its output exists)
#         QUICK=1 TYPES=q4_k bench/compare_quant.sh   (a tiny end-to-end check of the pipeline)
# Knobs (environment), besides bench/common.sh's (THREADS PROMPTS NGEN MODEL GGUF G4_BENCH_DATA
#   LLAMA_CPP_DIR LLAMA_GIT G4_BIN G4_REF_PY QUICK OUT SAVE RESULTS): ROUNDS=2 REPS=2
#   TYPES="q8_0 q4_0 q4_k" (add bf16 for the baseline: HF directory and bf16 GGUF; q5_k: Q5_K_M,
#   iq4_xs: IQ4_XS, q3_k: Q3_K_M, q2_k: Q2_K, iq4_nl: IQ4_NL, q4_1: Q4_1, q5_1: Q5_1, GGUF only —
#   gemma4c pack writes none of them)
#   QDIR=$G4_BENCH_DATA/g4-quant (the quantized GGUF files and packs)
#   ACCURACY=FILE (markdown from bench/quant_accuracy.py to put in the section; optional)
#   ACTQ8=1: also gemma4c on the GGUF with --act-q8 (int8 activations, as llama.cpp) in every round
#   PACKS=0: skip gemma4c on its own packs (GGUF files only)
#   G4_SRC="what G4_BIN was built from" (when not this working tree)  REPACK=1 (repack existing packs)
#   DRY=1: the same as QUICK=1
set -euo pipefail

[ "${DRY:-0}" = 1 ] && QUICK=1
. "$(dirname "$0")/common.sh"
bench_init compare_quant.sh compare-quant 2 2 g4-quant-compare
TYPES=${TYPES:-q8_0 q4_0 q4_k}
QDIR=${QDIR:-$G4_BENCH_DATA/g4-quant}
ACCURACY=${ACCURACY:-}
GGUF_ONLY="q5_k iq4_xs q3_k q2_k iq4_nl q4_1 q5_1"   # types gemma4c pack does not write
gguf_only() { case " $GGUF_ONLY " in *" $1 "*) true;; *) false;; esac; }
for t in $TYPES; do
  case " bf16 q8_0 q4_0 q4_k $GGUF_ONLY " in *" $t "*) ;; *) die "TYPES: unknown type $t (bf16 q8_0 q4_0 q4_k $GGUF_ONLY)";; esac
done

outside_repo "$QDIR" "QDIR=$QDIR is inside the repository; large files stay outside it"
need_g4_bin
mkdir -p "$OUT" "$QDIR"

# 1. llama-bench and llama-quantize from the local llama.cpp checkout (CPU only, native ISA)
llama_tools llama-bench llama-quantize
LB="$LLAMA_BUILD_DIR/bin"

# 2. GGUF files: the bf16 one by llama.cpp's converter (as compare_llamacpp.sh makes it), every
#    other type by llama-quantize from it (its default recipes: Q4_0 and Q4_K_M make token_embd,
#    also the tied LM head, Q6_K; Q4_K_M also keeps some attn_v / ffn_down in Q6_K)
bench_model
bf16_gguf
declare -A GGUF_OF=([bf16]="$GGUF" [q8_0]="$QDIR/g4-bench-q8_0.gguf" [q4_0]="$QDIR/g4-bench-q4_0.gguf" [q4_k]="$QDIR/g4-bench-q4_k_m.gguf"
                    [q5_k]="$QDIR/g4-bench-q5_k_m.gguf" [iq4_xs]="$QDIR/g4-bench-iq4_xs.gguf"
                    [q3_k]="$QDIR/g4-bench-q3_k_m.gguf" [q2_k]="$QDIR/g4-bench-q2_k.gguf" [iq4_nl]="$QDIR/g4-bench-iq4_nl.gguf"
                    [q4_1]="$QDIR/g4-bench-q4_1.gguf" [q5_1]="$QDIR/g4-bench-q5_1.gguf")
declare -A LQ=([q8_0]=Q8_0 [q4_0]=Q4_0 [q4_k]=Q4_K_M [q5_k]=Q5_K_M [iq4_xs]=IQ4_XS [q3_k]=Q3_K_M [q2_k]=Q2_K [iq4_nl]=IQ4_NL
               [q4_1]=Q4_1 [q5_1]=Q5_1)
for t in $TYPES; do
  f=${GGUF_OF[$t]}
  [ -f "$f" ] && continue
  log "llama-quantize ${LQ[$t]} -> $f"
  "$LB/llama-quantize" "$GGUF" "$f" "${LQ[$t]}" "$THREADS" > "$OUT/quantize-$t.log" 2>&1 ||
    { tail -20 "$OUT/quantize-$t.log" >&2; rm -f "$f"; die "llama-quantize failed (log: $OUT/quantize-$t.log)"; }
done

# 3. our packs (tp 1); REPACK=1 rewrites existing ones (q4_k takes ~2 min on 2 cores). TYPES may
#    include bf16: then "pack" is the HF directory itself (the baseline), "GGUF" the converter's bf16 file.
pack_of() { if [ "$1" = bf16 ]; then echo "$MODEL"; else echo "$QDIR/g4-bench-$1.g4c"; fi; }
for t in $TYPES; do
  [ "$t" = bf16 ] && continue
  gguf_only "$t" && continue
  [ "${PACKS:-1}" = 0 ] && continue
  p="$QDIR/g4-bench-$t.g4c"
  if [ ! -f "$p" ] || [ "${REPACK:-0}" = 1 ]; then
    log "gemma4c pack --dtype $t -> $p"
    "$G4_BIN" pack -m "$MODEL" -o "$p" --dtype "$t" > "$OUT/pack-$t.log" 2>&1 || { cat "$OUT/pack-$t.log" >&2; die "pack failed"; }
  fi
done

# 4. what each file holds (tensor types, read from the GGUF header by bench/common.py), and the
#    files' sizes under the report's names, for the report
for t in $TYPES; do
  python3 "$REPO/bench/common.py" gguf-types "${GGUF_OF[$t]}" > "$OUT/gguf-types-$t.txt" ||
    die "cannot list the tensor types of ${GGUF_OF[$t]}"
  pack=$(pack_of "$t")
  echo "$t $(stat -L -c %s "${GGUF_OF[$t]}") $([ -f "$pack" ] && stat -L -c %s "$pack" || echo 0)"
done > "$OUT/sizes.txt"

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
{ echo "$(show_cmd "$LB/llama-bench")-m GGUF $(show_cmd "${LLAMA_ARGS[@]}")"
  echo "$(show_cmd "$G4_BIN" bench)-m GGUF_OR_G4C $(show_cmd "${G4_ARGS[@]}")"; } > "$OUT/cmds.txt"
run_llama() {  # type round
  log "round $2: llama-bench ${GGUF_OF[$1]}"
  "$LB/llama-bench" -m "${GGUF_OF[$1]}" "${LLAMA_ARGS[@]}" > "$OUT/llama-$1-r$2.json" 2> "$OUT/llama-$1-r$2.log" ||
    { rc=$?; tail -20 "$OUT/llama-$1-r$2.log" >&2; die "llama-bench failed on ${GGUF_OF[$1]} (exit $rc; log: $OUT/llama-$1-r$2.log)"; }
}
run_g4() {  # kind(gguf|pack|aq8) type round; aq8 = the GGUF with --act-q8
  local m=${GGUF_OF[$2]} extra=(); [ "$1" = pack ] && m=$(pack_of "$2"); [ "$1" = aq8 ] && extra=(--act-q8)
  [ "$1" = pack ] && { [ "${PACKS:-1}" = 0 ] || gguf_only "$2"; } && return
  [ "$1" = aq8 ] && [ "${ACTQ8:-0}" != 1 ] && return
  log "round $3: gemma4c bench $m ${extra[*]}"
  "$G4_BIN" bench -m "$m" "${G4_ARGS[@]}" "${extra[@]}" > "$OUT/g4$1-$2-r$3.txt" 2> "$OUT/g4$1-$2-r$3.log" ||
    { rc=$?; tail -20 "$OUT/g4$1-$2-r$3.log" >&2; die "gemma4c bench failed on $m (exit $rc; log: $OUT/g4$1-$2-r$3.log)"; }
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

# 6. the report: $OUT/results.md, or with SAVE=1 a new file under bench/results/
python3 "$REPO/bench/compare_quant_report.py" "$OUT" ${ACCURACY:+--accuracy "$ACCURACY"} > "$OUT/section.md"
write_results "Quantized weights side by side with llama.cpp (compare_quant.sh)" "$OUT/section.md"
log "wrote $RESULTS (raw outputs in $OUT)"
cat "$RESULTS"
