#!/usr/bin/env bash
# Runs the request-parsing fuzz target (built by `make fuzz-build`: libFuzzer + ASan + UBSan) for a
# bounded time. Usage: fuzz/run_openai_request.sh [seconds]   (default 60)
# Seeds: one request per route (the first byte picks it), with the fields the server implements.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
out=build-fuzz; corpus="$out/corpus-openai-request"; mkdir -p "$corpus"
python3 - "$corpus" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
tool = {"type": "function", "function": {"name": "get_weather", "description": "d",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
seeds = [
    (0, {"model": "g4-cond-tiny", "messages": [{"role": "system", "content": "Be brief."},
         {"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "max_tokens": 4, "temperature": 0.7,
         "top_p": 0.9, "seed": 3, "stop": ["\n"], "logprobs": True, "top_logprobs": 2, "n": 2, "stream": True,
         "stream_options": {"include_usage": True}, "logit_bias": {"5": -100}}),
    (0, {"messages": [{"role": "user", "content": "weather?"}, {"role": "assistant", "content": None, "tool_calls": [
         {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "sunny"}], "tools": [tool], "tool_choice": "auto"}),
    (0, {"messages": [{"role": "user", "content": "json"}], "response_format": {"type": "json_schema", "json_schema":
         {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}}),
    (1, {"prompt": "The quick brown fox", "max_tokens": 8, "echo": False, "logprobs": 2, "stop": "fox",
         "ignore_eos": True, "return_token_ids": True}),
    (1, {"prompt": [2, 100, 200], "max_tokens": 2, "grammar": "root ::= \"yes\" | \"no\""}),
    (2, {"prompt": "hi", "max_tokens": 3, "temperature": 0}),
    (3, {"content": "Hello world", "add_special": True}),
    (4, {"tokens": [2, 100, 200, 300]}),
    (5, {"model": "g4-cond-tiny", "instructions": "Be brief.", "input": [
         {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
         {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
         {"type": "function_call_output", "call_id": "c1", "output": "sunny"}],
         "tools": [{"type": "function", "name": "get_weather", "parameters": tool["function"]["parameters"]}],
         "tool_choice": "required", "reasoning": {"effort": "low"}, "max_output_tokens": 8, "stream": True}),
    (5, {"input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}}),
]
for i, (route, body) in enumerate(seeds):
    (out / f"seed-{i}").write_bytes(bytes([route]) + json.dumps(body).encode())
PY
"$out/fuzz_openai_request" -max_total_time="$secs" -max_len=4096 -rss_limit_mb=4096 -timeout=20 \
  -dict=fuzz/tokenizer_json.dict "$corpus" 2>&1 | grep -vE '^"|Uses:|dictionary' | tail -8
