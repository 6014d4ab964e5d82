#!/usr/bin/env bash
# Runs the chat output parser fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan)
# for a bounded time. Usage: fuzz/run_chat_parser.sh [seconds]   (default 60)
# Seeds: a thought, calls, a malformed and a truncated call, as ids of the fixture's vocabulary
# (one id per character, specials as their ids) in the target's two-bytes-per-id form.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; corpus="$out/corpus-chat-parser"; mkdir -p "$corpus"
python3 - "$corpus" <<'PY'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1])
tj = json.loads(pathlib.Path("tests/fixtures/g4-cond-tiny/tokenizer.json").read_text())
vocab = tj["model"]["vocab"]
vocab = dict(vocab) if isinstance(vocab, dict) else {p[0]: i for i, p in enumerate(vocab)}
special = {a["content"]: a["id"] for a in tj["added_tokens"]}
seeds = ['<|channel>thought\nLet me think.\n<channel|>Sure.',
         '<|tool_call>call:get_weather{city:<|"|>Paris, {FR}<|"|>,n:-1.5e3,l:[true,null]}<tool_call|><|tool_response>',
         'x<|tool_call>call:f{a 1}<tool_call|>ab<|tool_call>call:g{']
pat = "(" + "|".join(map(re.escape, sorted(special, key=len, reverse=True))) + ")"
for n, text in enumerate(seeds):
    ids = []
    for part in re.split(pat, text):
        if part in special:
            ids.append(special[part])
        else:
            ids += [vocab[c] for c in part.replace(" ", "\u2581") if c in vocab]
    data = bytes([1]) + b"".join(bytes([(i >> 8) & 0x7f, i & 0xff]) for i in ids)
    (out / f"seed-{n}").write_bytes(data)
PY
"$out/fuzz_chat_parser" -max_total_time="$secs" -max_len=4096 -rss_limit_mb=2048 -timeout=10 "$corpus" 2>&1 | tail -5
