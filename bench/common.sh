# shellcheck shell=bash
# bench/common.sh — what the side-by-side drivers (compare_llamacpp.sh, compare_quant.sh,
# compare_batched.sh) share: the knobs they take, logging, the checks that keep llama.cpp and large
# files outside the repository, building llama.cpp's tools from a local checkout, the one bf16 GGUF
# conversion, and the machine / commit / load records their reports read. Sourced, never run.

# bench_init SCRIPT LOG_TAG ROUNDS REPS OUT_STEM: REPO and the common knobs (the environment's
# values win over these defaults):
#   THREADS=2 PROMPTS=64,512 NGEN=128 G4_BIN=build/gemma4c
#   G4_BENCH_DATA=${TMPDIR:-/tmp}: where the large files live (outside the repository):
#     MODEL=$G4_BENCH_DATA/g4-bench (the random-weight checkpoint), GGUF=$G4_BENCH_DATA/g4-bench-bf16.gguf
#   LLAMA_CPP_DIR: a local llama.cpp checkout (default ../llama.cpp beside the repository; LLAMA_DIR
#     is the older name); LLAMA_GIT=URL clones one there when it is missing, and nothing else does
#   LLAMA_BUILD_DIR=$LLAMA_CPP_DIR/build: llama.cpp's build directory (its tools in bin/); name
#     another one to compare against a build configured differently (e.g. without AMX, or AVX2 only)
#   REF_PY=$G4_REF_PY (a Python with transformers and torch; only the steps that make or convert a
#     checkpoint need it)
#   QUICK=1: a tiny configuration that checks the pipeline end to end (ROUNDS=2 REPS=1 PROMPTS=16
#     NGEN=8 unless set), never a measurement
#   OUT=bench/out/OUT_STEM-DATE (raw outputs; bench/out/ is git-ignored)
#   results: $OUT/results.md; SAVE=1 writes bench/results/DATE-SCRIPT-COMMIT.md instead (a new
#     file per run), RESULTS=FILE any other file
bench_init() {
  BENCH_SCRIPT=$1 BENCH_TAG=$2
  REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  QUICK=${QUICK:-0}
  if [ "$QUICK" = 1 ]; then
    ROUNDS=${ROUNDS:-2} REPS=${REPS:-1} PROMPTS=${PROMPTS:-16} NGEN=${NGEN:-8}
  fi
  THREADS=${THREADS:-2}
  ROUNDS=${ROUNDS:-$3}
  REPS=${REPS:-$4}
  PROMPTS=${PROMPTS:-64,512}
  NGEN=${NGEN:-128}
  G4_BENCH_DATA=${G4_BENCH_DATA:-${TMPDIR:-/tmp}}
  MODEL=${MODEL:-$G4_BENCH_DATA/g4-bench}
  GGUF=${GGUF:-$G4_BENCH_DATA/g4-bench-bf16.gguf}
  LLAMA_CPP_DIR=${LLAMA_CPP_DIR:-${LLAMA_DIR:-$(dirname "$REPO")/llama.cpp}}
  LLAMA_GIT=${LLAMA_GIT:-}
  LLAMA_BUILD_DIR=${LLAMA_BUILD_DIR:-$LLAMA_CPP_DIR/build}
  G4_BIN=${G4_BIN:-$REPO/build/gemma4c}
  REF_PY=${REF_PY:-${G4_REF_PY:-}}
  OUT=${OUT:-$REPO/bench/out/$5-$(date -u +%Y%m%d-%H%M%S)}
  local tag=${1%.sh}
  if [ -z "${RESULTS:-}" ]; then
    if [ "${SAVE:-0}" = 1 ]; then
      [ "$QUICK" = 1 ] && die "QUICK=1 checks the pipeline; its figures do not belong in bench/results/ (drop SAVE=1)"
      RESULTS=$REPO/bench/results/$(date -u +%Y-%m-%d)-${tag//_/-}-$(git -C "$REPO" rev-parse --short=7 HEAD 2>/dev/null || echo unknown).md
    else
      RESULTS=$OUT/results.md
    fi
  fi
  outside_repo "$LLAMA_CPP_DIR" "LLAMA_CPP_DIR=$LLAMA_CPP_DIR is inside the repository; use a path outside it"
}

# need_ref_py: stops unless REF_PY (or G4_REF_PY) names a Python with transformers and torch
need_ref_py() {
  [ -n "$REF_PY" ] || die "set G4_REF_PY (or REF_PY) to a Python with transformers and torch"
  "$REF_PY" -c 'import torch, transformers' 2>/dev/null ||
    die "G4_REF_PY=$REF_PY cannot import torch and transformers (tools/reference/README.md says how to make one)"
}

# write_results TITLE BODY: the results file, RESULTS, headed by TITLE, the CPU (lscpu's model
# name, CPUs, SIMD flags), the run's date and the commits, then BODY (its leading '# ' title line dropped)
write_results() {
  mkdir -p "$(dirname "$RESULTS")"
  local cpu ncpu simd fam
  cpu=$(sed -n 's/^Model name: *//p' "$OUT/lscpu.txt" 2>/dev/null | head -1)
  # family / model: the core generation where a hypervisor hides the model name
  fam=$(awk -F': *' '/^CPU family:/ { f = $2 } /^Model:/ { m = $2 } END { if (f != "") print "family " f " model " m }' "$OUT/lscpu.txt" 2>/dev/null)
  [ -n "$fam" ] && cpu="$cpu ($fam)"
  ncpu=$(sed -n 's/^CPU(s): *//p' "$OUT/lscpu.txt" 2>/dev/null | head -1)
  simd=$(grep -owE 'avx2|fma|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')
  {
    echo "# $1"
    echo
    echo "- CPU: ${cpu:-unknown}, ${ncpu:-?} CPUs; SIMD: ${simd:-none listed}"
    echo "- date: $(cat "$OUT/date.txt" 2>/dev/null || date -u +"%Y-%m-%d %H:%M UTC")"
    echo "- gemma4c commit: $(cat "$OUT/gemma4c-commit.txt" 2>/dev/null || echo unknown)"
    [ -f "$OUT/llama-commit.txt" ] && echo "- llama.cpp commit: $(cat "$OUT/llama-commit.txt")"
    [ "$QUICK" = 1 ] && echo "- QUICK=1: a pipeline check at a tiny configuration, not a measurement"
    echo
    awk 'NR == 1 && /^# / { skip = 1; next } skip && /^$/ { skip = 0; next } { skip = 0; print }' "$2"
  } > "$RESULTS"
}

# show_cmd ARG...: the command as a shell would read it, with paths inside the repository made
# relative to it and the knobs' paths outside it named by the knob (OUT, QDIR, MODEL, ...): a report
# names no checkout's or machine's location
show_cmd() {
  local s v val
  s=$(printf '%q ' "$@" | sed "s|$REPO/||g")
  # longest value first, so that a path inside another knob's (a build inside LLAMA_CPP_DIR) keeps its own name
  for v in $(for v in OUT QDIR MODEL GGUF LLAMA_CPP_DIR LLAMA_BUILD_DIR LLAMA_BATCHED_BENCH G4_BENCH_DATA; do
               val=${!v:-}; [ -n "$val" ] && [ "${val#"$REPO"}" = "$val" ] && echo "${#val} $v"; done | sort -rn | cut -d' ' -f2); do
    s=${s//"${!v}"/$v}
  done
  printf '%s' "$s"
}

log() { echo "[$BENCH_TAG $(date -u +%H:%M:%S)] $*" >&2; }
die() { echo "$BENCH_SCRIPT: $*" >&2; exit 1; }

# outside_repo PATH MESSAGE: stops with MESSAGE when PATH lies inside the repository
outside_repo() {
  case "$(realpath -m "$1")/" in "$REPO"/*) die "$2";; esac
}

need_g4_bin() {
  [ -x "$G4_BIN" ] || die "no gemma4c binary at $G4_BIN (run make, or set G4_BIN)"
}

# llama_tools TARGET...: builds the llama.cpp tools named (llama-bench, llama-quantize,
# llama-batched-bench) that are not built yet, CPU only at the native ISA, in LLAMA_BUILD_DIR.
# The checkout is taken as it is; it is cloned (LLAMA_GIT) only when asked for.
llama_tools() {
  local missing=() t
  for t in "$@"; do [ -x "$LLAMA_BUILD_DIR/bin/$t" ] || missing+=("$t"); done
  [ ${#missing[@]} = 0 ] && return 0
  if [ ! -f "$LLAMA_CPP_DIR/CMakeLists.txt" ]; then
    [ -n "$LLAMA_GIT" ] || die "no llama.cpp checkout at LLAMA_CPP_DIR=$LLAMA_CPP_DIR: set LLAMA_CPP_DIR to one (or LLAMA_GIT=URL to clone one there)"
    log "cloning $LLAMA_GIT into $LLAMA_CPP_DIR"
    git clone --depth 1 "$LLAMA_GIT" "$LLAMA_CPP_DIR"
  fi
  if [ ! -f "$LLAMA_BUILD_DIR/CMakeCache.txt" ]; then
    log "configuring llama.cpp in $LLAMA_BUILD_DIR"
    cmake -S "$LLAMA_CPP_DIR" -B "$LLAMA_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF > "$OUT/llama-cmake.log" 2>&1 ||
      { tail -20 "$OUT/llama-cmake.log" >&2; die "cmake failed (log: $OUT/llama-cmake.log)"; }
  fi
  log "building ${missing[*]} in $LLAMA_BUILD_DIR"
  cmake --build "$LLAMA_BUILD_DIR" --target "${missing[@]}" -j"$(nproc)" > "$OUT/llama-build.log" 2>&1 ||
    { tail -20 "$OUT/llama-build.log" >&2; die "building ${missing[*]} failed (log: $OUT/llama-build.log)"; }
}

# bf16_gguf: the bench checkpoint as a bf16 GGUF, GGUF, made once by llama.cpp's own
# convert_hf_to_gguf.py in a virtual environment with its pinned requirements (CONVERT_VENV,
# default $G4_BENCH_DATA/llama-venv). Every other GGUF type is llama-quantize'd from this file.
bf16_gguf() {
  [ -f "$GGUF" ] && return 0
  outside_repo "$GGUF" "GGUF=$GGUF is inside the repository; large files stay outside it"
  [ -f "$LLAMA_CPP_DIR/convert_hf_to_gguf.py" ] || die "no convert_hf_to_gguf.py in LLAMA_CPP_DIR=$LLAMA_CPP_DIR"
  local venv=${CONVERT_VENV:-$G4_BENCH_DATA/llama-venv}
  if [ ! -x "$venv/bin/python" ]; then
    log "creating $venv with llama.cpp's converter requirements"
    python3 -m venv "$venv"
    # Its pinned requirements minus torch (whose CPU wheel index may be unreachable); torch then
    # comes from REF_PY's environment through a .pth file, which Python appends AFTER the venv's
    # own site-packages, so the venv's transformers/numpy pins win. (The converter must read
    # config.json as written: a transformers 5.x AutoConfig re-serializes it without
    # global_head_dim and the converter stops with KeyError: 'global_head_dim'.)
    local req="$LLAMA_CPP_DIR/requirements"
    grep -hv -E '^[[:space:]]*(#|-r|--|torch)' "$req/requirements-convert_hf_to_gguf.txt" \
      "$req/requirements-convert_legacy_llama.txt" | grep -v '^[[:space:]]*$' > "$OUT/convert-reqs.txt"
    "$venv/bin/pip" install -q -r "$OUT/convert-reqs.txt"
  fi
  if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    need_ref_py
    local torch_site site
    torch_site=$("$REF_PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$torch_site" > "$site/zz-torch-from-ref-py.pth"
  fi
  log "converting $MODEL -> $GGUF (bf16)"
  "$venv/bin/python" "$LLAMA_CPP_DIR/convert_hf_to_gguf.py" "$MODEL" --outtype bf16 --outfile "$GGUF" \
    > "$OUT/convert.log" 2>&1 || { tail -20 "$OUT/convert.log" >&2; die "conversion failed (log: $OUT/convert.log)"; }
}

# bench_model: the random-weight checkpoint at MODEL, written by make_bench_model.py if missing
bench_model() {
  [ -f "$MODEL/config.json" ] && return 0
  [ -f "$MODEL" ] && return 0   # a GGUF or .g4c file, taken as it is
  outside_repo "$MODEL" "MODEL=$MODEL is inside the repository; large files stay outside it"
  need_ref_py
  log "writing the benchmark checkpoint to $MODEL"
  "$REF_PY" "$REPO/tools/reference/make_bench_model.py" "$MODEL"
}

# lscpu and llama.cpp's commit (git, else the checkout's COMMIT file, else "unknown") into OUT
record_machine() {
  lscpu > "$OUT/lscpu.txt"
  git -C "$LLAMA_CPP_DIR" rev-parse HEAD > "$OUT/llama-commit.txt" 2>/dev/null || cat "$LLAMA_CPP_DIR/COMMIT" > "$OUT/llama-commit.txt" 2>/dev/null ||
    echo unknown > "$OUT/llama-commit.txt"
}

# gemma4c's commit and its uncommitted source changes into OUT
record_g4_commit() {
  git -C "$REPO" rev-parse HEAD > "$OUT/gemma4c-commit.txt"
  git -C "$REPO" status --porcelain --untracked-files=no -- src include Makefile | head -50 > "$OUT/gemma4c-dirty.txt" || true
}

# record_load ROUND: the 1/5/15-minute load averages at the start of a round
record_load() {
  cut -d' ' -f1-3 /proc/loadavg > "$OUT/load-r$1.txt"
}
