#!/usr/bin/env bash
# Runs the tokenizer.json fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan) for a
# bounded time. Usage: fuzz/run_tokenizer_json.sh [seconds]   (default 60)
# Seeds: the small tokenizers of tests/fixtures/tokenizer/synthetic.jsonl.gz, and the inputs that
# once crashed it (fuzz/seeds/tokenizer_json/).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; corpus="$out/corpus-tokenizer-json"; mkdir -p "$corpus"
python3 - "$corpus" <<'PY'
import gzip, json, sys, pathlib
out = pathlib.Path(sys.argv[1])
with gzip.open("tests/fixtures/tokenizer/synthetic.jsonl.gz", "rt", encoding="utf-8") as f:
    for line in f:
        r = json.loads(line)
        # the seeds keep the structure but only a slice of the byte tokens, to stay small
        d = json.loads(r["tokenizer_json"])
        d["model"]["vocab"] = {k: v for k, v in d["model"]["vocab"].items() if not k.startswith("<0x") or k in ("<0x41>", "<0xC3>", "<0xA9>")}
        (out / ("seed-" + r["name"] + ".json")).write_text(json.dumps(d, ensure_ascii=False))
        (out / ("seed-pretty-" + r["name"] + ".json")).write_text(json.dumps(d, ensure_ascii=False, indent=1))
PY
cp fuzz/seeds/tokenizer_json/* "$corpus/"
"$out/fuzz_tokenizer_json" -max_total_time="$secs" -max_len=16384 -rss_limit_mb=4096 \
  -dict=fuzz/tokenizer_json.dict "$corpus" 2>&1 | grep -vE '^"|Uses:|dictionary' | tail -8
