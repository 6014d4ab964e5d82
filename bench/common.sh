# bench/common.sh — what the side-by-side drivers (compare_llamacpp.sh, compare_quant.sh) share:
# the knobs both take, logging, the checks that keep llama.cpp and large files outside the
# repository, and the machine / commit / load records their reports read. Sourced, never run.

# bench_init SCRIPT LOG_TAG ROUNDS REPS OUT_STEM: REPO and the common knobs (the environment's
# values win over these defaults). THREADS=2 PROMPTS=64,512 NGEN=128 MODEL=/tmp/g4-bench
# LLAMA_DIR=/tmp/llama.cpp G4_BIN=build/gemma4c REF_PY=/opt/refenv/bin/python
# OUT=/tmp/OUT_STEM-DATE RESULTS=bench/RESULTS.md
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
  REF_PY=${REF_PY:-/opt/refenv/bin/python}
  OUT=${OUT:-/tmp/$5-$(date -u +%Y%m%d-%H%M%S)}
  RESULTS=${RESULTS:-$REPO/bench/RESULTS.md}
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
