#!/usr/bin/env bash
# Runs the grammar-engine fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan) for a
# bounded time. Usage: fuzz/run_grammar.sh [seconds] [extra libFuzzer flags]  (default 60 s)
# Seeds: the GBNF grammars and JSON Schemas of tests/py/test_grammar.py's tables and
# tests/fixtures/grammar (first byte 0: GBNF, 1: JSON Schema, 2: an OpenAI tools array).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}; shift || true
out=build-fuzz; corpus="$out/corpus-grammar"; mkdir -p "$corpus"
for f in tests/fixtures/grammar/*.schema.json; do
  { printf '\001'; cat "$f"; } > "$corpus/seed-$(basename "$f")"
done
printf '\000root ::= "a" [b-d]+ "x"? | "q"{2,3}\n' > "$corpus/seed-gbnf-1"
printf '\000root ::= "{" ws ( s ":" ws s ws )? "}"\ns ::= "\\"" [^"\\\\]* "\\""\nws ::= | " "\n' > "$corpus/seed-gbnf-2"
printf '\001{"enum": ["a", 1, null, {"k": [true]}]}' > "$corpus/seed-enum"
printf '\001{"type": "string", "pattern": "^[a-c]{2}(x|yz)*$"}' > "$corpus/seed-pattern"
printf '\001{"type": "number", "exclusiveMinimum": -30, "maximum": 120}' > "$corpus/seed-number-range"
printf '\001{"type": "integer", "minimum": -98765, "exclusiveMaximum": 4321}' > "$corpus/seed-int-range"
printf '\001{"type": ["string", "integer"], "enum": ["ab", 3, 7.5, null], "maxLength": 2, "minimum": 1}' > "$corpus/seed-enum-type"
printf '\000root ::= <|tool_call> "call:f{}" <[13]>\n' > "$corpus/seed-tokref"
printf '\002[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"enum": [1, "x"]}}, "required": ["a"]}}}]' > "$corpus/seed-tools"
"$out/fuzz_grammar" -max_total_time="$secs" -max_len=2048 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$out/" "$@" "$corpus" 2>&1 | tail -5
