#!/usr/bin/env bash
# device_prep.sh — packs into .devcarry/ what bench/device_full_check.sh needs on a machine
# that has none of this project's Debian libraries and no network (.devcarry/ stays under 64 MiB so
# that it travels with the working tree). .gitignore ignores .devcarry/; copy it along.
#   bin/          gemma4c, the kernel C tests and gemm_bench (+ AVX-512 GEMM block-size variants),
#                 built here without MPI and libnuma
#   rt/           their shared libraries and the build host's dynamic loader (glibc travels with them)
#   model/        the bench checkpoint's config and safetensors head  } filled with random bf16
#   gguf.head     the bf16 GGUF's head (llama.cpp's converter wrote it) } by bench/synth_weights.py
#   llama-src.tgz the llama.cpp checkout without docs, models, tests and its GPU backends
# Usage: MODEL=/tmp/g4-bench GGUF=/tmp/g4-bench-bf16.gguf LLAMA_DIR=/tmp/llama.cpp bash bench/device_prep.sh
#        (GGUF: made by bench/compare_llamacpp.sh; its converter venv CONVERT_VENV=/tmp/llama-venv)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-/tmp/g4-bench} GGUF=${GGUF:-/tmp/g4-bench-bf16.gguf} LLAMA_DIR=${LLAMA_DIR:-/tmp/llama.cpp}
CONVERT_VENV=${CONVERT_VENV:-/tmp/llama-venv}
C=.devcarry
rm -rf "$C" && mkdir -p "$C/bin" "$C/rt" "$C/model"
make -j"$(nproc)" BUILD=build-dev HAVE_MPI= NUMA_CFLAGS= LDLIBS="-ljansson -lmicrohttpd -lz -lm -pthread" \
  build-dev/gemma4c build-dev/tests/test_kernels build-dev/tests/test_avx512_matmul \
  build-dev/tests/test_bf16_matmul build-dev/tests/test_quant build-dev/tests/test_model_ops \
  build-dev/tests/test_decode_alloc > /dev/null
# gemm_bench as the library builds its kernels, and the AVX-512 GEMM with other block sizes
for v in "" _kc256:-DG4_AVX512_KC=256 _mc252:-DG4_AVX512_MC=252 _kc256_mc252:"-DG4_AVX512_KC=256 -DG4_AVX512_MC=252"; do
  # shellcheck disable=SC2086
  bash bench/device_cpu_check.sh --build "$C/bin/gemm_bench${v%%:*}" ${v#*:}
done
cp build-dev/gemma4c build-dev/tests/test_{kernels,avx512_matmul,bf16_matmul,quant,model_ops,decode_alloc} "$C/bin/"
strip "$C"/bin/*
for lib in $(ldd "$C"/bin/* 2>/dev/null | awk '$3 ~ /^\// { print $3 }' | sort -u) /lib64/ld-linux-x86-64.so.2; do
  cp -L "$lib" "$C/rt/"
done
cp "$MODEL"/config.json "$MODEL"/generation_config.json "$C/model/"
python3 bench/synth_weights.py head "$C/model/model.safetensors.head" "$MODEL/model.safetensors"
PYTHONPATH="$LLAMA_DIR/gguf-py" "$CONVERT_VENV/bin/python" bench/synth_weights.py head "$C/gguf.head" "$GGUF"
excl=(build docs models media tools/ui examples benches tests .git)
for b in metal et hexagon sycl vulkan cuda opencl cann musa hip webgpu zdnn virtgpu rpc blas; do excl+=("ggml/src/ggml-$b"); done
tar czf "$C/llama-src.tgz" -C "$(dirname "$LLAMA_DIR")" "${excl[@]/#/--exclude=$(basename "$LLAMA_DIR")/}" "$(basename "$LLAMA_DIR")"
du -sh "$C"
