#!/usr/bin/env bash
# Tensor-parallelism measurements on a checkpoint larger than the cache (default /tmp/g4-bench from
# tools/reference/make_bench_model.py): (1) loading a .g4c pack vs the HF directory — load time and
# peak RSS per rank, the rank's shard size beside it; (2) decode and prefill tokens/s for
# TP=2 x 1 thread (threads and MPI backends) vs TP=1 x 2 threads, alternating rounds.
# Usage: bench/tp_compare.sh [MODEL_DIR] [ROUNDS]   (needs build/gemma4c, mpirun, /usr/bin/time)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-/tmp/g4-bench}
ROUNDS=${2:-2}
BIN=${G4_BIN:-build/gemma4c}
OUT=${OUT:-/tmp/g4-tp-compare-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
PACK1="$OUT/model-tp1.g4c" PACK2="$OUT/model-tp2.g4c"
"$BIN" pack -m "$MODEL" -o "$PACK1" --tp 1 2>&1 | tee "$OUT/pack1.txt"
"$BIN" pack -m "$MODEL" -o "$PACK2" --tp 2 2>&1 | tee "$OUT/pack2.txt"
RUN=(run --prompt-ids 2,3,4,5 -n 4 -v --ids --ctx 256)
# one line per rank: the rank, its peak RSS and the load time `run -v` prints
rank_line() { printf 'rank %s: peak RSS %s KB, %s\n' "${OMPI_COMM_WORLD_RANK:-0}" "$(cat "$1.rss")" "$(grep -o '^load [0-9.]* s' "$1.err")"; }
export -f rank_line

echo "== load: time and peak RSS per rank (page cache warm; a pack's segment crc is verified unless G4_PACK_VERIFY=0)"
for verify in 1 0; do
  for src in "$MODEL" "$PACK1" "$PACK2"; do
    np=1; tpargs=(); case "$src" in "$PACK2") np=2;; esac
    [ "$src" = "$MODEL" ] && { echo "-- $src, tp 1 and tp 2, G4_PACK_VERIFY=$verify"; } || echo "-- $src, G4_PACK_VERIFY=$verify"
    for n in $( [ "$src" = "$MODEL" ] && echo 1 2 || echo $np ); do
      G4_PACK_VERIFY=$verify mpirun -np "$n" -x G4_PACK_VERIFY bash -c '
        f='"$OUT"'/r$OMPI_COMM_WORLD_RANK
        /usr/bin/time -f %M -o $f.rss "$@" >/dev/null 2>$f.err; rc=$?; rank_line $f; exit $rc' _ \
        "$BIN" "${RUN[@]}" -m "$src" --tp "$n" --tp-backend mpi | sort
    done
  done
done | tee "$OUT/load.txt"

echo "== speed: TP=1 x 2 threads vs TP=2 x 1 thread (threads backend) vs TP=2 x 1 thread (MPI)"
for r in $(seq "$ROUNDS"); do
  echo "-- round $r, load: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$BIN" bench -m "$PACK1" -p 64 -n 64 --threads 2 --reps 2 --no-peaks | grep -E "^  (pp|tg)" | sed 's/^/tp1x2 /'
  "$BIN" bench -m "$PACK2" -p 64 -n 64 --threads 2 --tp 2 --reps 2 --no-peaks | grep -E "^  (pp|tg)" | sed 's/^/tp2x1 threads /'
  mpirun -np 2 "$BIN" bench -m "$PACK2" -p 64 -n 64 --tp-backend mpi --reps 2 | grep -E "^  (pp|tg)" | sed 's/^/tp2x1 mpi /'
done | tee "$OUT/speed.txt"
rm -f "$PACK1" "$PACK2"
echo "outputs in $OUT"
