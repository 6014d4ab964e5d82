"""tool_choice "required" / a named function / "none" through the server, and GBNF's special-token
references. On the random-weight fixture nothing but the grammar makes the output a tool call, so
every choice must come back as calls whose arguments (converted to JSON by src/chat's parser)
satisfy the tool's parameter schema: checked here by a small validator of the schema keywords the
tools use, written from the JSON Schema specification, not from the engine. Then the tool loop
end to end: the forced call, its history rendered as the official template renders it under
jinja2 (tests/fixtures/templates, tools/reference/make_template_goldens.py), the next turn."""
import copy
import json

import pytest
import requests

from conftest import FIXTURES, run_g4
from test_server import MODEL, NAME, Server

USER = [{"role": "user", "content": "What is the weather in Paris?"}]

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 12},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
        "exact": {"type": "boolean"},
    }, "required": ["city", "days"], "additionalProperties": False}}}
FLIGHTS = {"type": "function", "function": {
    "name": "search.flights-v2",
    "parameters": {"type": "object", "properties": {
        "legs": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
            "type": "object", "properties": {"from": {"type": "string", "pattern": "^[A-Z]{3}$"},
                                             "price": {"type": "number"},
                                             "note": {"type": ["string", "null"], "maxLength": 8}},
            "required": ["from", "price", "note"], "additionalProperties": False}},
        "filters": {"type": "object", "properties": {"max": {"type": "integer", "maximum": 3}},
                    "required": ["max"], "additionalProperties": False},
    }, "required": ["legs"], "additionalProperties": False}}}
NOARGS = {"type": "function", "function": {"name": "now"}}
TOOLS = [WEATHER, FLIGHTS, NOARGS]
SCHEMAS = {t["function"]["name"]: t["function"].get("parameters", {"type": "object"}) for t in TOOLS}


def valid(v, s):
    """JSON Schema validation for the keywords above (draft 2020-12 semantics)."""
    import re
    if "enum" in s and v not in s["enum"]:
        return False
    types = s.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        kinds = {"string": isinstance(v, str), "boolean": isinstance(v, bool), "null": v is None,
                 "integer": isinstance(v, int) and not isinstance(v, bool),
                 "number": isinstance(v, (int, float)) and not isinstance(v, bool),
                 "array": isinstance(v, list), "object": isinstance(v, dict)}
        if not any(kinds[t] for t in types):
            return False
    if isinstance(v, str):
        if len(v) < s.get("minLength", 0) or len(v) > s.get("maxLength", 1 << 30):
            return False
        if "pattern" in s and not re.search(s["pattern"], v):
            return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if v < s.get("minimum", float("-inf")) or v > s.get("maximum", float("inf")):
            return False
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0) or len(v) > s.get("maxItems", 1 << 30):
            return False
        if "items" in s and not all(valid(x, s["items"]) for x in v):
            return False
    if isinstance(v, dict):
        props = s.get("properties", {})
        if any(k not in v for k in s.get("required", [])):
            return False
        if s.get("additionalProperties") is False and any(k not in props for k in v):
            return False
        if not all(valid(x, props[k]) for k, x in v.items() if k in props):
            return False
    return True


def test_validator_rejects():
    # the checker itself can fail: schema-breaking arguments are caught
    assert valid({"city": "Paris", "days": 2}, SCHEMAS["get_weather"])
    for bad in ({"city": "Paris"}, {"city": "", "days": 2}, {"city": "P", "days": 8}, {"city": "P", "days": 1.5},
                {"city": "P", "days": 1, "x": 1}, {"city": "P", "days": 1, "unit": "kelvin"},
                {"city": "P", "days": 1, "tags": ["toolong"]}):
        assert not valid(bad, SCHEMAS["get_weather"]), bad
    assert not valid({"legs": [{"from": "cdg", "price": 1, "note": None}]}, SCHEMAS["search.flights-v2"])


@pytest.fixture(scope="module")
def srv(g4_bin):
    s = Server(g4_bin, "--parallel", "4")
    yield s
    s.stop()


def chat(srv, **kw):
    body = {"model": NAME, "messages": USER, "tools": TOOLS, "max_tokens": 400, "temperature": 1.0, **kw}
    return requests.post(srv.url + "/v1/chat/completions", json=body, timeout=300)


def assert_400(resp, param, text=None):
    assert resp.status_code == 400, resp.text
    e = resp.json()["error"]
    assert e["param"] == param and e["type"] == "invalid_request_error", e
    if text:
        assert text in e["message"], e
    return e


def calls_of(choice):
    assert choice["finish_reason"] == "tool_calls", choice
    msg = choice["message"]
    assert msg["content"] is None and msg["tool_calls"], msg
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]]


def test_required_always_calls_a_tool_with_valid_arguments(srv):
    seen = set()
    for seed in range(0, 48, 4):
        r = chat(srv, tool_choice="required", seed=seed, n=4, parallel_tool_calls=False)
        assert r.status_code == 200, r.text
        for ch in r.json()["choices"]:
            calls = calls_of(ch)
            assert len(calls) == 1, calls
            name, args = calls[0]
            assert name in SCHEMAS and valid(args, SCHEMAS[name]), (name, args)
            seen.add(name)
    assert len(seen) == 3, seen   # the choice between the tools is the model's


def test_required_parallel_calls_are_all_valid(srv):
    """Several calls may follow each other; each finished one is valid, and a message ends on
    <|tool_response> or the token limit (the random model takes another call about half the time)."""
    finished = 0
    for seed in range(0, 16, 4):
        r = chat(srv, tool_choice="required", seed=seed, n=4, max_tokens=600)
        for ch in r.json()["choices"]:
            msg = ch["message"]
            assert ch["finish_reason"] in ("tool_calls", "length"), ch
            if ch["finish_reason"] == "tool_calls":
                finished += 1
                assert msg["content"] is None
            for c in msg.get("tool_calls") or []:
                assert valid(json.loads(c["function"]["arguments"]), SCHEMAS[c["function"]["name"]]), c
    assert finished >= 4


@pytest.mark.parametrize("name", ["search.flights-v2", "now"])
def test_named_function_calls_only_that_one(srv, name):
    for seed in range(6):
        r = chat(srv, tool_choice={"type": "function", "function": {"name": name}}, seed=seed, parallel_tool_calls=False)
        assert r.status_code == 200, r.text
        calls = calls_of(r.json()["choices"][0])
        assert len(calls) == 1 and calls[0][0] == name and valid(calls[0][1], SCHEMAS[name]), calls


def test_required_streams_the_same_calls(srv):
    whole = chat(srv, tool_choice="required", seed=11).json()["choices"][0]
    r = requests.post(srv.url + "/v1/chat/completions", timeout=300, stream=True, json={
        "model": NAME, "messages": USER, "tools": TOOLS, "max_tokens": 400, "temperature": 1.0, "seed": 11,
        "tool_choice": "required", "stream": True})
    calls, finish = {}, None
    for line in r.iter_lines():
        if line.startswith(b"data: {"):
            ch = json.loads(line[6:])["choices"][0]
            finish = ch["finish_reason"] or finish
            for tc in ch["delta"].get("tool_calls") or []:
                e = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                e["name"] += tc["function"].get("name") or ""
                e["arguments"] += tc["function"].get("arguments") or ""
    assert finish == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())] == calls_of(whole)


def test_none_never_calls(srv):
    call_id = requests.post(srv.url + "/tokenize", json={"content": "<|tool_call>"}).json()["tokens"]
    assert len(call_id) == 1
    bias = {str(call_id[0]): 100}
    # auto: the biased call token is what greedy picks first
    r = chat(srv, tool_choice="auto", temperature=0, max_tokens=3, logit_bias=bias, return_token_ids=True)
    assert r.json()["choices"][0]["token_ids"][0] == call_id[0]
    # none: banned, whatever the bias
    r = chat(srv, tool_choice="none", temperature=0, max_tokens=8, logit_bias=bias, return_token_ids=True)
    ch = r.json()["choices"][0]
    assert call_id[0] not in ch["token_ids"] and not ch["message"].get("tool_calls")


def test_gbnf_token_references(srv):
    grammar = 'root ::= <|tool_call> "call:now{}" <[%d]> <|tool_response>'
    end_id = requests.post(srv.url + "/tokenize", json={"content": "<tool_call|>"}).json()["tokens"][0]
    for seed in range(3):
        r = requests.post(srv.url + "/v1/chat/completions", timeout=120, json={
            "model": NAME, "messages": USER, "temperature": 1.0, "seed": seed, "grammar": grammar % end_id})
        assert r.status_code == 200, r.text
        assert calls_of(r.json()["choices"][0]) == [("now", {})]
    assert_400(chat(srv, grammar='root ::= <|no_such_token|>'), "grammar", "names no token")
    assert_400(chat(srv, grammar='root ::= <[5000000]>'), "grammar", "outside the vocabulary")
    assert_400(chat(srv, grammar='root ::= !<|tool_call>'), "grammar", "negated")


@pytest.mark.parametrize("body,param,text", [
    ({"tool_choice": "required", "tools": []}, "tool_choice", "needs 'tools'"),
    ({"tool_choice": "required", "tools": None}, "tool_choice", "needs 'tools'"),
    ({"tool_choice": {"type": "function", "function": {"name": "missing"}}}, "tool_choice", "no function named 'missing'"),
    ({"tool_choice": {"type": "function"}}, "tool_choice", "named tool_choice"),
    ({"tool_choice": {"type": "tool", "function": {"name": "now"}}}, "tool_choice", "named tool_choice"),
    ({"tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice", "exclude"),
    ({"tool_choice": "required", "grammar": "root ::= \"x\""}, "grammar", "required tool_choice"),
    ({"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "number", "multipleOf": 2}}}}}]}, "tool_choice", "multipleOf"),
    ({"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "array"}}}]}, "tool_choice", "must be an object schema"),
    ({"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "a b"}}]}, "tool_choice", "cannot be written"),
])
def test_bad_tool_choice_is_400(srv, body, param, text):
    assert_400(chat(srv, **body), param, text)


# ---------------------------------------------------------------- the tool loop end to end

GOLDENS = {c["name"]: c for c in json.loads((FIXTURES / "templates" / "gemma4-31B-it.json").read_text())["cases"]}


def prompt_ids(srv, text):
    """The ids of a rendered prompt as the server tokenizes it (special-token text as the tokens)."""
    return requests.post(srv.url + "/tokenize", json={"content": text}, timeout=60).json()["tokens"]


def assert_prompt_is(srv, chat_body, text):
    """The server rendered exactly `text` for chat_body: the same number of prompt tokens, and the
    same greedy continuation as /v1/completions over the tokens of `text`."""
    ids = prompt_ids(srv, text)
    greedy = {"temperature": 0, "max_tokens": 6, "ignore_eos": True, "return_token_ids": True}
    r = requests.post(srv.url + "/v1/chat/completions", timeout=120, json={"model": NAME, **chat_body, **greedy}).json()
    ref = requests.post(srv.url + "/v1/completions", timeout=120, json={"model": NAME, "prompt": ids, **greedy}).json()
    assert r["usage"]["prompt_tokens"] == len(ids)
    assert r["choices"][0]["token_ids"] == ref["choices"][0]["token_ids"]
    return r


@pytest.mark.parametrize("case", ["g4_tool_call_and_response", "g4_tool_response_then_answer",
                                  "g4_tool_call_dict_args", "g4_nested_tool_args", "g4_reasoning_with_tool_calls"])
def test_tool_history_renders_as_the_reference(srv, case):
    """History with tool calls sent as OpenAI clients send it (arguments as JSON text) renders as
    the official template renders it under jinja2 with the arguments as mappings (the golden)."""
    c = copy.deepcopy(GOLDENS[case])
    inp = c["input"]
    for m in inp["messages"]:
        for tc in m.get("tool_calls") or []:
            assert isinstance(tc["function"]["arguments"], dict)
            tc["function"]["arguments"] = json.dumps(tc["function"]["arguments"])
    body = {"messages": inp["messages"], "tools": inp["tools"]}
    if "enable_thinking" in inp:
        body["chat_template_kwargs"] = {"enable_thinking": inp["enable_thinking"]}
    assert_prompt_is(srv, body, c["expected"])


def test_tool_loop_end_to_end(g4_bin, srv):
    """tool_choice forces a call; the call and the tool's result go back as the next request's
    history (the assistant message exactly as the client returned it); the next turn answers."""
    client = srv.client()
    tools = [WEATHER]   # bounded strings: a random model closes them
    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    r1 = client.chat.completions.create(model=NAME, messages=msgs, tools=tools, parallel_tool_calls=False, seed=5,
                                        tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                        temperature=1.0, max_tokens=300)
    assert r1.choices[0].finish_reason == "tool_calls"
    call = r1.choices[0].message.tool_calls[0]
    args = json.loads(call.function.arguments)
    assert call.function.name == "get_weather" and valid(args, tools[0]["function"]["parameters"])
    history = msgs + [r1.choices[0].message.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": call.id, "content": "21 C, clear"}]
    # the reference: the template (tested byte for byte against jinja2) over the same history, the
    # arguments given as the mapping transformers' apply_chat_template expects
    conv = {"messages": msgs + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": args}}]},
        history[-1]], "tools": tools, "add_generation_prompt": True}
    text = run_g4(g4_bin, "template", "-m", MODEL, input=json.dumps(conv).encode()).stdout.decode()
    assert text.endswith("<tool_call|><|tool_response>response:get_weather{value:<|\"|>21 C, clear<|\"|>}<tool_response|>")
    assert "<|tool_call>call:get_weather{city:<|\"|>" in text
    assert_prompt_is(srv, {"messages": history, "tools": tools}, text)
    r2 = client.chat.completions.create(model=NAME, messages=history, tools=tools, temperature=0, max_tokens=8)
    assert r2.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert r2.usage.prompt_tokens == len(prompt_ids(srv, text))
