#!/usr/bin/env bash
# Runs the chat-template (Jinja) fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan)
# for a bounded time. Usage: fuzz/run_jinja.sh [seconds] [extra libFuzzer flags]  (default 60 s)
# Seeds: the Gemma 3 / Gemma 4 templates in ../shared/data, tests/fixtures/templates/*.jinja and
# the templates of tests/c/test_jinja.c's tables.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}; shift || true
out=build-fuzz; corpus="$out/corpus-jinja"; mkdir -p "$corpus"
shared=../shared/data
for f in "$shared"/gemma4-chat-templates/*.jinja tests/fixtures/templates/*.jinja; do
  [ -f "$f" ] && cp "$f" "$corpus/seed-$(basename "$f")"
done
if [ -f "$shared/gemma3-tokenizer/tokenizer_config.json" ]; then
  python3 -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["chat_template"])' \
    "$shared/gemma3-tokenizer/tokenizer_config.json" > "$corpus/seed-gemma3.jinja"
fi
python3 - "$corpus" <<'PY'
import re, sys, pathlib
out = pathlib.Path(sys.argv[1])
src = pathlib.Path("tests/c/test_jinja.c").read_text()
for i, m in enumerate(re.finditer(r'^    \{"((?:[^"\\]|\\.)*)",$', src, re.M)):
    t = bytes(m.group(1), "utf-8").decode("unicode_escape").encode("latin-1")
    (out / f"seed-unit-{i}.jinja").write_bytes(t)
PY
"$out/fuzz_jinja" -max_total_time="$secs" -max_len=20000 -rss_limit_mb=2048 -timeout=10 \
  -dict=fuzz/jinja.dict -artifact_prefix="$out/" "$@" "$corpus" 2>&1 | tail -5
