# bench/common.sh — what the side-by-side drivers (compare_llamacpp.sh, compare_quant.sh) share:
# the knobs both take, logging, the checks that keep llama.cpp and large files outside the
# repository, and the machine / commit / load records their reports read. Sourced, never run.

# bench_init SCRIPT LOG_TAG ROUNDS REPS OUT_STEM: REPO and the common knobs (the environment's
# values win over these defaults). THREADS=2 PROMPTS=64,512 NGEN=128 MODEL=/tmp/g4-bench
# LLAMA_DIR=/tmp/llama.cpp G4_BIN=build/gemma4c REF_PY=$G4_REF_PY (a Python with transformers
# and torch; needed only by the steps that make or convert a checkpoint)
# OUT=/tmp/OUT_STEM-DATE RESULTS=bench/results/DATE-SCRIPT-COMMIT.md (a new file per run)
bench_init() {
  BENCH_SCRIPT=$1 BENCH_TAG=$2
  REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  THREADS=${THREADS:-2}
  ROUNDS=${ROUNDS:-$3}
  REPS=${REPS:-$4}
  PROMPTS=${PROMPTS:-64,512}
  NGEN=${NGEN:-128}
  MODEL=${MODEL:-/tmp/g4-bench}
  LLAMA_DIR=${LLAMA_DIR:-/tmp/llama.cpp}
  G4_BIN=${G4_BIN:-$REPO/build/gemma4c}
  REF_PY=${REF_PY:-${G4_REF_PY:-}}
  OUT=${OUT:-/tmp/$5-$(date -u +%Y%m%d-%H%M%S)}
  local tag=${1%.sh}
  RESULTS=${RESULTS:-$REPO/bench/results/$(date -u +%Y-%m-%d)-${tag//_/-}-$(git -C "$REPO" rev-parse --short=7 HEAD 2>/dev/null || echo unknown).md}
}

# need_ref_py: stops unless REF_PY (or G4_REF_PY) names a Python with transformers and torch
need_ref_py() {
  [ -n "$REF_PY" ] || die "set G4_REF_PY (or REF_PY) to a Python with transformers and torch"
}

# write_results TITLE BODY: a new results file, RESULTS, headed by TITLE, the CPU (lscpu's model
# name, CPUs, SIMD flags), the run's date and the commits, then BODY (its leading '# ' title line dropped)
write_results() {
  mkdir -p "$(dirname "$RESULTS")"
  local cpu ncpu simd
  cpu=$(sed -n 's/^Model name: *//p' "$OUT/lscpu.txt" 2>/dev/null | head -1)
  ncpu=$(sed -n 's/^CPU(s): *//p' "$OUT/lscpu.txt" 2>/dev/null | head -1)
  simd=$(grep -owE 'avx2|fma|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')
  {
    echo "# $1"
    echo
    echo "- CPU: ${cpu:-unknown}, ${ncpu:-?} CPUs; SIMD: ${simd:-none listed}"
    echo "- date: $(cat "$OUT/date.txt" 2>/dev/null || date -u +"%Y-%m-%d %H:%M UTC")"
    echo "- gemma4c commit: $(cat "$OUT/gemma4c-commit.txt" 2>/dev/null || echo unknown)"
    [ -f "$OUT/llama-commit.txt" ] && echo "- llama.cpp commit: $(cat "$OUT/llama-commit.txt")"
    echo
    awk 'NR == 1 && /^# / { skip = 1; next } skip && /^$/ { skip = 0; next } { skip = 0; print }' "$2"
  } > "$RESULTS"
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

# lscpu and llama.cpp's commit (git, else the checkout's COMMIT file, else "unknown") into OUT
record_machine() {
  lscpu > "$OUT/lscpu.txt"
  git -C "$LLAMA_DIR" rev-parse HEAD > "$OUT/llama-commit.txt" 2>/dev/null || cat "$LLAMA_DIR/COMMIT" > "$OUT/llama-commit.txt" 2>/dev/null ||
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
