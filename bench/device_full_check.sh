#!/usr/bin/env bash
# device_full_check.sh — kernel paths and the side-by-side on a CPU (AVX-512, AVX512-BF16, AMX
# where it has them), in one run of about 3-4 minutes, from what bench/device_prep.sh packed into
# .devcarry/ (binaries run through the carried loader and libraries):
#   1. correctness on every kernel path this CPU has: the kernel C tests (their hardware cases run
#      here) and the golden and --prefill-bf16 tests (each G4_CPU_ISA), while llama.cpp builds
#      and the weights files are written (bench/synth_weights.py: random bf16, speed only)
#   2. the prefill GEMM alone per path, one core (bench/device_cpu_check.sh)
#   3. gemma4c bench exact and --prefill-bf16 against llama-bench on the same bf16 weights, all
#      cores, ABBA order over two rounds
# Usage: copy the working tree with .devcarry/ to the machine, run "bash bench/device_full_check.sh". Output in
# $OUT (else /tmp/g4-device): summary.txt, machine.txt, tests.txt, gemm.txt, bench.txt, build.txt.
# ISAS="avx512:0 amx:1" picks the GEMM paths; QUICK=1 runs only the bf16 mode against llama.cpp.
# AB="VAR=value ..." (environment settings the binaries read) times the AMX GEMM and, with QUICK,
# the bf16 bench again under each setting, interleaved with the default; CHUNK2=N adds a bf16
# bench at that chunk. gemma4c bench runs with --profile (its forward time by phase on stderr).
set -u
cd "$(dirname "$0")/.."
C=$PWD/.devcarry O=${OUT:-/tmp/g4-device} W=/tmp/g4-wrap
NT=${THREADS:-$(nproc)} REPS=${REPS:-3}
mkdir -p "$O" "$W"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$O/summary.txt"; }
for b in "$C"/bin/*; do
  printf '#!/bin/sh\nexec %s/rt/ld-linux-x86-64.so.2 --library-path %s/rt %s "$@"\n' "$C" "$C" "$b" > "$W/${b##*/}"
  chmod +x "$W/${b##*/}"
done
{ lscpu; free -g; uname -a; cat /proc/meminfo | grep -i huge; } > "$O/machine.txt" 2>&1
log "$(git rev-parse --short HEAD 2>/dev/null) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc);" \
    "flags: $(grep -o -w -E 'avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"

# llama.cpp (native build for this CPU) and the two weights files, behind the tests
(
  mkdir -p /tmp/ll && tar xzf "$C/llama-src.tgz" -C /tmp/ll && cd /tmp/ll/llama.cpp &&
  cmake -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF > /dev/null &&
  cmake --build build --target llama-bench -j"$(nproc)" 2>&1 | tail -3
  echo "llama.cpp build rc=$?"
) > "$O/build.txt" 2>&1 &
LLAMA_JOB=$!
(
  mkdir -p /tmp/g4m && cp "$C"/model/*.json /tmp/g4m/ &&
  python3 bench/synth_weights.py fill "$C/model/model.safetensors.head" /tmp/g4m/model.safetensors &&
  python3 bench/synth_weights.py fill "$C/gguf.head" /tmp/g4m.gguf
  echo "weights rc=$?"
) > "$O/synth.txt" 2>&1 &
SYNTH_JOB=$!

# 1. correctness
for t in test_kernels test_avx512_matmul test_bf16_matmul test_quant test_model_ops test_decode_alloc; do
  timeout 120 "$W/$t" >> "$O/tests.txt" 2>&1
  log "C test $t rc=$?"
done
XDIST=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 8")
G4_BIN=$W/gemma4c timeout 240 python3 -m pytest -q -p no:cacheprovider $XDIST \
  tests/py/test_goldens.py tests/py/test_prefill_bf16.py >> "$O/tests.txt" 2>&1
log "pytest goldens + prefill_bf16 rc=$?: $(tail -1 "$O/tests.txt")"
wait $SYNTH_JOB; cat "$O/synth.txt" >> "$O/build.txt"; rm -f "$O/synth.txt"
wait $LLAMA_JOB; log "$(tail -1 "$O/build.txt" | tr '\n' ' ') $(grep -c 'rc=0' "$O/build.txt") of 2 set-up steps ok"

# 2. the GEMM alone, one core (the machine quiet now): each path (ISAS), and with VARIANTS=1 the
#    AVX-512 GEMM's block-size variants (bench/device_prep.sh)
for shape in "64 12288 1536" "256 12288 1536" "512 30720 3840"; do
  # shellcheck disable=SC2086
  GEMM_BENCH=$W/gemm_bench SWEEPS=3 ISAS=${ISAS:-avx512:0 avx512bf16:1 amx:1} OUT=$O timeout 150 \
    bash bench/device_cpu_check.sh $shape > /dev/null 2>&1
done
mv "$O/device_cpu_check.txt" "$O/gemm.txt" 2>/dev/null
[ -n "${AB:-}" ] && for shape in "64 12288 1536" "256 12288 1536" "512 30720 3840"; do
  # shellcheck disable=SC2086
  for v in "" $AB; do echo "amx ${v:-default} $(env $v GEMM_XBF16=1 timeout 60 "$W/gemm_bench" $shape 3 amx 2>&1)"; done
done >> "$O/gemm.txt"
[ -n "${VARIANTS:-}" ] && for v in "" _kc256 _mc252 _kc256_mc252; do
  for shape in "64 12288 1536" "256 12288 1536"; do
    # shellcheck disable=SC2086
    echo "gemm_bench$v $(timeout 60 "$W/gemm_bench$v" $shape 3 avx512 2>&1)" >> "$O/gemm.txt"
  done
done
log "GEMM: $(grep -E -- '--prefill-bf16:|^gemm_bench|^amx ' "$O/gemm.txt" | tr '\n' ';')"

# 3. end to end, all cores, ABBA; --profile splits gemma4c's forward time by phase
G4=("$W/gemma4c" bench -m /tmp/g4m -p 64,512 -n 32 --threads "$NT" --reps "$REPS" --profile)
LB=(/tmp/ll/llama.cpp/build/bin/llama-bench -m /tmp/g4m.gguf -p 64,512 -n 32 -t "$NT" -r "$REPS")
g4() { echo "## gemma4c $*"; timeout 150 "${G4[@]}" "$@" 2>&1; }
lb() { echo "## llama-bench"; timeout 150 "${LB[@]}" 2>&1; }
if [ -n "${QUICK:-}" ]; then   # the bf16 mode against llama.cpp only (a short lease)
  ab() { for v in ${AB:-}; do echo "## AB $v"; env "$v" timeout 150 "${G4[@]}" --prefill-bf16 --no-peaks 2>&1; done; }
  c2() { [ -n "${CHUNK2:-}" ] && g4 --prefill-bf16 --no-peaks --prefill-chunk "$CHUNK2"; }
  { g4 --prefill-bf16; ab; lb; c2; lb; g4 --prefill-bf16 --no-peaks; ab; c2; g4 --no-peaks; } >> "$O/bench.txt"
else
  { g4; g4 --prefill-bf16 --no-peaks; lb; lb; g4 --prefill-bf16 --no-peaks; g4 --no-peaks; } >> "$O/bench.txt"
fi
log "bench:"; grep -E '^## |^  (pp|tg)[0-9]|\| +(pp|tg)[0-9]|profile: multi' "$O/bench.txt" | tee -a "$O/summary.txt"
