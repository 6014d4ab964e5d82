#!/usr/bin/env bash
# Runs the generation_config.json / tokenizer_config.json / chat_template.json fuzz target (built by
# `make fuzz-build`: libFuzzer + ASan + UBSan) for a bounded time.
# Usage: fuzz/run_model_config.sh [seconds]   (default 60)
# Seeds: the tiny fixture's files (the first byte picks which file the rest is).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; corpus="$out/corpus-model-config"; mkdir -p "$corpus"
python3 - "$corpus" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
fx = pathlib.Path("tests/fixtures/g4-cond-tiny")
tmpl = (fx / "chat_template.jinja").read_text()
cfg = json.loads((fx / "tokenizer_config.json").read_text())
(out / "seed-gen").write_bytes(b"\0" + (fx / "generation_config.json").read_bytes())
(out / "seed-gen-list").write_bytes(b"\0" + json.dumps({"eos_token_id": [1, 106], "suppress_tokens": [0, 3],
                                                       "temperature": 0.5, "top_k": 40, "do_sample": True}).encode())
(out / "seed-tok").write_bytes(b"\1" + json.dumps({**cfg, "chat_template": tmpl}).encode())
(out / "seed-ct").write_bytes(b"\2" + json.dumps({"chat_template": tmpl}).encode())
(out / "seed-small").write_bytes(b"\1" + json.dumps({"bos_token": "<bos>", "eos_token": {"content": "<eos>"},
    "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"}).encode())
PY
"$out/fuzz_model_config" -max_total_time="$secs" -max_len=16384 -rss_limit_mb=4096 -timeout=20 \
  -dict=fuzz/jinja.dict "$corpus" 2>&1 | grep -vE '^"|Uses:|dictionary' | tail -8
