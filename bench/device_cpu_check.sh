#!/usr/bin/env bash
# device_cpu_check.sh — the prefill kernels' speed on a CPU with AVX-512 / AVX512-BF16 / AMX (the bf16
# prefill's speedup over exact), in one short run that needs nothing but a
# C compiler — for a machine that has none of this project's
# Debian libraries. Builds bench/gemm_bench from the kernel sources alone, then times on one core,
# weights streamed from DRAM in 2 MiB pages, T activation rows:
#   the exact GEMM on every path this CPU has (avx2, avx512), and
#   the --prefill-bf16 matmul (GEMM_XBF16=1) on avx512bf16 and amx,
# and prints each bf16 path's speedup over the best exact one. ~1 minute.
# Usage: bash bench/device_cpu_check.sh [T] [N K]   (default 64, 12288 1536: the bench model's
#        gate+up at hidden 1536; the 12B's is 30720 3840). With OUT set, the log goes to $OUT too.
#        GEMM_BENCH=path uses a gemm_bench built elsewhere (bench/device_prep.sh); SWEEPS=n (5);
#        ISAS="avx512:0 amx:1" picks the paths (isa:GEMM_XBF16), default all four.
#        bash bench/device_cpu_check.sh --build PATH [CFLAGS...]: only builds gemm_bench to PATH.
set -uo pipefail
cd "$(dirname "$0")/.."
build_gemm_bench() {   # PATH [CFLAGS...]: the kernels at -O3, as the library builds them
  local out=$1
  shift
  cc -std=c11 -D_GNU_SOURCE -O3 -pthread -Iinclude -Isrc "$@" bench/gemm_bench.c src/kernels/dispatch.c \
    src/kernels/cpu/*.c src/bench/roofline.c src/base/*.c src/base/dtype.c src/convert/quantize.c -o "$out" -lm ||
    { echo "device_cpu_check: build failed" >&2; exit 1; }
}
if [ "${1:-}" = --build ]; then shift; build_gemm_bench "$@"; exit 0; fi
T=${1:-64} N=${2:-12288} K=${3:-1536} SWEEPS=${SWEEPS:-5}
BIN=${GEMM_BENCH:-$(mktemp -d)/gemm_bench}
LOG=${OUT:-$(mktemp -d)}/device_cpu_check.txt RUN=$(mktemp)
[ -n "${GEMM_BENCH:-}" ] || build_gemm_bench "$BIN"
{
  echo "# $(date -u +'%Y-%m-%d %H:%M UTC') $(git rev-parse --short HEAD 2>/dev/null) T=$T N=$N K=$K"
  grep -m1 'model name' /proc/cpuinfo
  echo "flags: $(grep -o -w -E 'avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  for run in ${ISAS:-avx2:0 avx512:0 avx512bf16:1 amx:1}; do
    isa=${run%:*} x=${run#*:}
    GEMM_XBF16=$x "$BIN" "$T" "$N" "$K" "$SWEEPS" "$isa" 2>&1
  done
} | tee "$RUN"
# speedups: each bf16 line's GFLOP/s over the best exact line's
awk '/GFLOP\/s/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "GFLOP/s") g = $i
                  if ($2 == "xbf16") bf[$1] = g; else if (g > best) { best = g; bname = $1 } }
     END { if (!best) { print "no exact GEMM ran"; exit 1 }
           for (p in bf) printf "%s --prefill-bf16: %.2fx the exact %s GEMM (%.1f vs %.1f GFLOP/s, one core)\n", p, bf[p] / best, bname, bf[p], best
           if (!length(bf)) print "no bf16 path on this CPU: nothing to compare" }' "$RUN" | tee -a "$RUN"
cat "$RUN" >> "$LOG"   # this run, appended to earlier ones
