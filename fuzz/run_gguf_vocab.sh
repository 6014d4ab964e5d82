#!/usr/bin/env bash
# Runs the GGUF vocabulary / template fuzz target (built by `make fuzz-build`: libFuzzer + ASan +
# UBSan) for a bounded time. Usage: fuzz/run_gguf_vocab.sh [seconds]   (default 60)
# Seeds: small GGUFs written here with a Gemma 3 ("llama") and a Gemma 4 ("gemma4") vocabulary.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; corpus="$out/corpus-gguf-vocab"; mkdir -p "$corpus"
python3 - "$corpus" <<'PY'
import struct, sys, pathlib
out = pathlib.Path(sys.argv[1])
def s(x): b = x.encode(); return struct.pack("<Q", len(b)) + b
def kv_str(k, v): return s(k) + struct.pack("<I", 8) + s(v)
def kv_strs(k, vs): return s(k) + struct.pack("<IIQ", 9, 8, len(vs)) + b"".join(s(v) for v in vs)
def kv_ints(k, vs): return s(k) + struct.pack("<IIQ", 9, 5, len(vs)) + b"".join(struct.pack("<i", v) for v in vs)
base = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\u2581", " "] + \
       [chr(c) for c in range(97, 123)] + ["\u2581h", "he", "ll", "llo", "\u2581he", "<0x0A>", "<0xC3>"]
for model, arch in (("llama", "gemma3"), ("gemma4", "gemma4")):
    kvs = [kv_str("general.architecture", arch), kv_str("tokenizer.ggml.model", model),
           kv_strs("tokenizer.ggml.tokens", base), kv_ints("tokenizer.ggml.token_type", [3, 3, 3, 2, 4, 4] + [1] * (len(base) - 6)),
           kv_str("tokenizer.chat_template", "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}")]
    if model == "gemma4":
        kvs.append(kv_strs("tokenizer.ggml.merges", ["h e", "l l", "ll o", "\u2581 h"]))
    (out / f"seed-{model}.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))
PY
"$out/fuzz_gguf_vocab" -max_total_time="$secs" -max_len=8192 -rss_limit_mb=2048 -timeout=10 "$corpus" 2>&1 | tail -5
