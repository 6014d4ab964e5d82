#!/usr/bin/env bash
# Installs everything gemma4c needs to build and test on a fresh Debian/Ubuntu machine:
# the C toolchain and libraries (apt) and the Python test tools (pip). Run as root or with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential pkg-config libjansson-dev libmicrohttpd-dev libcmocka-dev \
  python3 python3-pip >/dev/null
python3 -m pip install -q --disable-pip-version-check -r tests/requirements.txt
