#!/usr/bin/env bash
# mm_speed.sh — images and audio at the 12B's widths, gemma4c beside llama.cpp's mtmd. On the
# "12B-width slice" with the 12B's embedders (tools/reference/make_12b_slice.py --mm: hidden 3840,
# 6 layers, vision 16 px patches merged 3 x 3 -> 6912 -> 3840, audio 640 -> 3840) it measures, on
# one 1280 x 960 JPEG (280 soft tokens at most) and 30 s of 16 kHz audio:
#   gemma4c (build/bench/mm_bench, in one process, median of REPS after a warm-up): the image
#     processor (decode, resize, patches), the vision embedder, the audio feature extractor, the
#     audio embedder, and the time to first token of an image prompt from an empty slot; on the HF
#     checkpoint and on llama.cpp's GGUF + mmproj of it (the same files mtmd reads);
#   llama.cpp (llama-mtmd-cli -n 1 on the same image and clip, REPS runs): what its log reports —
#     the image / audio encode ("slice encoded"), the decode of the soft tokens, the whole prompt's
#     eval — and its soft-token count;
#   through the servers (bench/mm_ttft.py): the time to first token of an image prompt, `gemma4c
#     serve` on the HF checkpoint beside llama-server on the GGUF + mmproj, alternating, a new
#     1280 x 896 JPEG (280 soft tokens in both) each repetition.
# The GGUF and mmproj come from llama.cpp's own convert_hf_to_gguf.py (the config shim of
# tools/reference/make_gemma4_gguf.py); nothing of llama.cpp enters the repository.
#
# Usage:  bench/mm_speed.sh                 (report in bench/out/...; SAVE=1: bench/results/)
# Knobs (environment), besides bench/common.sh's (THREADS G4_BENCH_DATA LLAMA_CPP_DIR G4_REF_PY OUT
#   SAVE RESULTS): REPS=3, SLICE=$G4_BENCH_DATA/g4-12b-mm (written by make_12b_slice.py --mm when
#   missing, ~5 GB, ~10 min), GGUF_DIR=$G4_BENCH_DATA/g4-12b-mm-gguf, LLAMA_BIN=$LLAMA_BUILD_DIR/bin
#   (llama-mtmd-cli), CONVERT_VENV=$G4_BENCH_DATA/llama-venv (llama.cpp's converter requirements),
#   LOCK=FILE: every measurement runs under `flock FILE` (a host shared with other benchmarks),
#   PARTS=embed,ttft: which to run (embed: mm_bench and llama-mtmd-cli; ttft: the servers; PARTS=ttft
#   alone names its report ...-mm-ttft-...), PYTHON=python3 (runs bench/mm_ttft.py: standard library).
set -euo pipefail

. "$(dirname "$0")/common.sh"
PARTS=${PARTS:-embed,ttft}
part() { [[ ",$PARTS," == *",$1,"* ]]; }
if [ "$PARTS" = ttft ]; then bench_init mm_ttft.sh mm 1 3 g4-mm-ttft; else bench_init mm_speed.sh mm 1 3 g4-mm-speed; fi
PYTHON=${PYTHON:-python3}
SLICE=${SLICE:-$G4_BENCH_DATA/g4-12b-mm}
GGUF_DIR=${GGUF_DIR:-$G4_BENCH_DATA/g4-12b-mm-gguf}
LLAMA_BIN=${LLAMA_BIN:-$LLAMA_BUILD_DIR/bin}
CONVERT_VENV=${CONVERT_VENV:-$G4_BENCH_DATA/llama-venv}
LOCK=${LOCK:-}
for p in "$SLICE" "$GGUF_DIR"; do outside_repo "$p" "$p is inside the repository; large files stay outside it"; done
mkdir -p "$OUT"
locked() { if [ -n "$LOCK" ]; then flock "$LOCK" "$@"; else "$@"; fi; }

make -C "$REPO" -s build/bench/mm_bench build/gemma4c
MM_BENCH=$REPO/build/bench/mm_bench

# 1. the checkpoint, and the inputs (a smooth photo-like JPEG with noise, a tone with noise)
if [ ! -f "$SLICE/config.json" ]; then
  need_ref_py
  log "writing the 12B-width slice with its embedders to $SLICE"
  "$REF_PY" "$REPO/tools/reference/make_12b_slice.py" "$SLICE" --mm
fi
need_ref_py
"$REF_PY" - "$OUT" "$REPS" <<'EOF'
import sys, wave
import numpy as np
from PIL import Image
out = sys.argv[1]
rng = np.random.default_rng(1)
y, x = np.mgrid[0:960, 0:1280].astype(np.float32)
img = np.stack([128 + 100 * np.sin(x / 97 + y / 211), 128 + 90 * np.cos(x / 53 - y / 67), 128 + 80 * np.sin((x + y) / 151)], -1)
Image.fromarray(np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)).save(f"{out}/photo.jpg", quality=90)
t = np.arange(30 * 16000) / 16000
s = 0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 0.5 * t) + 0.05 * rng.standard_normal(t.size)
with wave.open(f"{out}/speech.wav", "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(np.clip(np.round(s * 32767), -32768, 32767).astype("<i2").tobytes())
# the servers' images: 1280 x 896 (960 x 672 after either processor's resize: 280 soft tokens in
# both; mtmd rounds other sizes differently), a new noise each so that no prompt is cached
y, x = np.mgrid[0:896, 0:1280].astype(np.float32)
img = np.stack([128 + 100 * np.sin(x / 97 + y / 211), 128 + 90 * np.cos(x / 53 - y / 67), 128 + 80 * np.sin((x + y) / 151)], -1)
for i in range(int(sys.argv[2]) + 1):
    Image.fromarray(np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)).save(f"{out}/ttft-{i}.jpg", quality=90)
EOF
IMG=$OUT/photo.jpg WAV=$OUT/speech.wav
PROMPT_TEXT="Describe this image."

# 2. llama.cpp's GGUF and mmproj of the slice, by its own converter
TEXT_GGUF=$GGUF_DIR/text-bf16.gguf MMPROJ=$GGUF_DIR/mmproj-f32.gguf
if [ ! -f "$TEXT_GGUF" ] || [ ! -f "$MMPROJ" ]; then
  [ -x "$CONVERT_VENV/bin/python" ] || die "no converter environment at CONVERT_VENV=$CONVERT_VENV (bench/common.sh's bf16_gguf makes one)"
  mkdir -p "$GGUF_DIR"
  "$CONVERT_VENV/bin/python" -c "import sys; sys.path.insert(0, sys.argv[1]); from make_gemma4_gguf import SHIM; open(sys.argv[2], 'w').write(SHIM)" \
    "$REPO/tools/reference" "$OUT/shim.py"
  for args in "--outtype bf16 --outfile $TEXT_GGUF" "--mmproj --outtype f32 --outfile $MMPROJ"; do
    log "converting $SLICE ($args)"
    # shellcheck disable=SC2086
    NO_LOCAL_GGUF=1 PYTHONPATH="$LLAMA_CPP_DIR/gguf-py" "$CONVERT_VENV/bin/python" "$OUT/shim.py" "$LLAMA_CPP_DIR" "$SLICE" $args \
      > "$OUT/convert.log" 2>&1 || { tail -20 "$OUT/convert.log" >&2; die "conversion failed (log: $OUT/convert.log)"; }
  done
fi

record_machine
record_g4_commit
date -u +"%Y-%m-%d %H:%M UTC" > "$OUT/date.txt"

# 3. gemma4c (the HF checkpoint, then the GGUF + mmproj; the chat turn mtmd-cli renders for -p with
# its built-in "gemma" template: the slice's own template is no format mtmd-cli knows without --jinja),
# then 4. llama.cpp's mtmd on the same files (image, then audio, REPS runs each): two measurement
# blocks, each under LOCK once
G4_PROMPT=$'<start_of_turn>user\n<|image|>'"$PROMPT_TEXT"$'<end_of_turn>\n<start_of_turn>model\n'
MTMD=$LLAMA_BIN/llama-mtmd-cli
export MM_BENCH SLICE TEXT_GGUF MMPROJ IMG WAV G4_PROMPT PROMPT_TEXT REPS THREADS OUT MTMD
if part embed; then
  [ -x "$MTMD" ] || die "no llama-mtmd-cli in LLAMA_BIN=$LLAMA_BIN"
  "$MTMD" --version > "$OUT/mtmd-version.txt" 2>&1 || true
  log "gemma4c on $SLICE and on $TEXT_GGUF + mmproj"
  locked timeout 295 bash -c '
    "$MM_BENCH" -m "$SLICE" --image "$IMG" --audio "$WAV" -p "$G4_PROMPT" --reps "$REPS" --threads "$THREADS" > "$OUT/g4-hf.json" &&
    "$MM_BENCH" -m "$TEXT_GGUF" --mmproj "$MMPROJ" --image "$IMG" --audio "$WAV" -p "$G4_PROMPT" --reps "$REPS" \
      --threads "$THREADS" > "$OUT/g4-gguf.json"'
  log "llama-mtmd-cli, image and audio, $REPS runs each"
  locked timeout 295 bash -c '
    for r in $(seq 1 "$REPS"); do
      for kind in image audio; do
        media=$IMG; [ $kind = audio ] && media=$WAV
        "$MTMD" -m "$TEXT_GGUF" --mmproj "$MMPROJ" --$kind "$media" -p "$PROMPT_TEXT" -n 1 --temp 0 -t "$THREADS" -c 4096 \
          --chat-template gemma \
          > "$OUT/mtmd-$kind-$r.log" 2>&1 || echo "exit $?" >> "$OUT/mtmd-$kind-$r.log"
      done
    done' || log "llama-mtmd-cli: the block ended early (exit $?)"
fi

# 5. time to first token through the servers (mm_ttft.py takes LOCK itself, for its whole block)
if part ttft; then
  [ -x "$LLAMA_BIN/llama-server" ] || die "no llama-server in LLAMA_BIN=$LLAMA_BIN"
  log "time to first token of an image prompt: gemma4c serve beside llama-server, $REPS repetitions"
  ttft_images=()
  for i in $(seq 0 "$REPS"); do ttft_images+=(--image "$OUT/ttft-$i.jpg"); done
  "$PYTHON" "$REPO/bench/mm_ttft.py" --g4-bin "$REPO/build/gemma4c" -m "$SLICE" --llama-server "$LLAMA_BIN/llama-server" \
    --gguf "$TEXT_GGUF" --mmproj "$MMPROJ" --threads "$THREADS" --reps "$REPS" "${ttft_images[@]}" ${LOCK:+--lock "$LOCK"} \
    --out "$OUT/ttft" --md "$OUT/ttft.md" > "$OUT/ttft.json"
fi

# 6. the report
shown="THREADS=$THREADS REPS=$REPS${PARTS:+ PARTS=$PARTS} bench/mm_speed.sh"
{
  if part embed; then
    "$REF_PY" "$REPO/bench/mm_speed_report.py" "$OUT" "$REPS" "$THREADS"
    echo
  else
    echo "# Time to first token of an image prompt at the 12B's widths: gemma4c serve and llama-server"
    echo
  fi
  if part ttft; then
    if part embed; then echo "## Time to first token of an image prompt, through the servers"; echo; fi
    echo "The 12B-width slice (\`make_12b_slice.py --mm\`: hidden 3840, 6 layers, the 12B's embedders): \`gemma4c serve\`"
    echo "on its HF directory, llama-server (mtmd) on the GGUF + mmproj llama.cpp's converter made of it, both loaded,"
    echo "asked in turn (\`bench/mm_ttft.py\`): one user turn, a 1280 x 896 JPEG then \"Describe this image.\","
    echo "\`max_tokens: 1\`, streamed, \`enable_thinking: false\`; a new image each repetition (the same to both),"
    echo "llama-server told \`cache_prompt: false\`; seconds."
    echo
    cat "$OUT/ttft.md"
    echo
  fi
  echo "Command: \`$shown\` (raw outputs: g4-hf.json, g4-gguf.json, mtmd-*.log, ttft/)."
} > "$OUT/results-body.md"
if part embed; then title="Multimodal speed at the 12B's widths"; else title="Image prompt, time to first token at the 12B's widths"; fi
write_results "$title" "$OUT/results-body.md"
log "report: $RESULTS"
cat "$RESULTS"
