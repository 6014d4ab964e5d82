"""/v1/responses (OpenAI's Responses API) through the official `openai` client: a request is the
chat request it translates to (checked against /v1/chat/completions: the same prompt tokens and
the same greedy tokens), output items and usage have the documented shapes, a stream is the
documented event sequence (checked against the client's own event types) and assembles to the
non-streamed response, function tools close the loop with function_call / function_call_output
items, and what is not implemented is a 400 naming the field."""
import json
import typing

import pytest
import requests
from openai.types.responses import ResponseStreamEvent

from test_server import NAME, Server
from test_tool_choice import WEATHER, valid

# the client's event classes by their "type"
EVENTS = {typing.get_args(c.model_fields["type"].annotation)[0]: c
          for c in typing.get_args(typing.get_args(ResponseStreamEvent)[0])}
TOOLS = [{"type": "function", "name": WEATHER["function"]["name"], "description": WEATHER["function"]["description"],
          "parameters": WEATHER["function"]["parameters"]}]
CHAT_TOOLS = [WEATHER]
GREEDY = {"temperature": 0, "max_output_tokens": 6}


@pytest.fixture(scope="module")
def srv(g4_bin):
    s = Server(g4_bin)
    yield s
    assert s.stop() == 0, "".join(s.log)   # a clean exit (under ASan: no leak)


def chat_ids(srv, messages, **kw):
    """(prompt tokens, greedy completion text) of the equivalent chat request."""
    r = requests.post(srv.url + "/v1/chat/completions", timeout=120, json={
        "model": NAME, "messages": messages, "temperature": 0, "max_tokens": 6, **kw}).json()
    return r["usage"]["prompt_tokens"], r["choices"][0]["message"]


def post(srv, body):
    return requests.post(srv.url + "/v1/responses", json={"model": NAME, **body}, timeout=120)


def sse_events(srv, body):
    """The raw stream: each event's `event:` name and its data, validated as the client's types."""
    r = requests.post(srv.url + "/v1/responses", json={"model": NAME, "stream": True, **body}, timeout=120, stream=True)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    r.encoding = "utf-8"
    events, name = [], None
    for line in r.iter_lines(decode_unicode=True):
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: {"):
            data = json.loads(line[6:])
            assert data["type"] == name
            EVENTS[data["type"]].model_validate(data)   # the shape the client's types declare
            events.append(data)
    return events


def test_plain_string_input_is_the_chat_request(srv):
    c = srv.client()
    r = c.responses.create(model=NAME, input="Hello there", instructions="Be brief.", **GREEDY)
    n, msg = chat_ids(srv, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}])
    assert r.object == "response" and r.id.startswith("resp_") and r.model == NAME
    assert r.usage.input_tokens == n and r.usage.output_tokens == 6 and r.usage.total_tokens == n + 6
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert [o.type for o in r.output] == ["message"] and r.output[0].role == "assistant"
    assert r.output_text == msg["content"]
    assert r.instructions == "Be brief." and r.max_output_tokens == 6 and r.store is False


def test_message_items_are_the_chat_messages(srv):
    items = [{"role": "developer", "content": "Answer in French."},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
             {"role": "assistant", "content": [{"type": "output_text", "text": "Bonjour"}]},
             {"role": "user", "content": "How are you?"}]
    r = srv.client().responses.create(model=NAME, input=items, **GREEDY)
    n, msg = chat_ids(srv, [{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Hi"},
                            {"role": "assistant", "content": "Bonjour"}, {"role": "user", "content": "How are you?"}])
    assert r.usage.input_tokens == n and r.output_text == msg["content"]


def test_reasoning_effort_is_thinking(srv):
    c = srv.client()
    off = c.responses.create(model=NAME, input="Hi", **GREEDY).usage.input_tokens
    on = c.responses.create(model=NAME, input="Hi", reasoning={"effort": "high"}, **GREEDY).usage.input_tokens
    n, _ = chat_ids(srv, [{"role": "user", "content": "Hi"}], reasoning_effort="high")
    assert on == n and on != off


def test_function_tool_loop(srv):
    c = srv.client()
    r = c.responses.create(model=NAME, input="Weather in Paris?", tools=TOOLS, tool_choice="required",
                           parallel_tool_calls=False, temperature=1.0, max_output_tokens=300, extra_body={"seed": 3})
    assert r.status == "completed"
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id.startswith("call_")
    args = json.loads(calls[0].arguments)
    assert valid(args, WEATHER["function"]["parameters"])
    assert r.tools[0].name == "get_weather" and r.tool_choice == "required"
    # the call and its output go back as items; the prompt is the chat request's with that history
    follow = [{"role": "user", "content": "Weather in Paris?"}, calls[0].model_dump(exclude_none=True),
              {"type": "function_call_output", "call_id": calls[0].call_id, "output": "21 C"}]
    r2 = c.responses.create(model=NAME, input=follow, tools=TOOLS, **GREEDY)
    n, msg = chat_ids(srv, [{"role": "user", "content": "Weather in Paris?"},
                            {"role": "assistant", "content": None, "tool_calls": [
                                {"id": calls[0].call_id, "type": "function",
                                 "function": {"name": "get_weather", "arguments": calls[0].arguments}}]},
                            {"role": "tool", "tool_call_id": calls[0].call_id, "content": "21 C"}], tools=CHAT_TOOLS)
    assert r2.usage.input_tokens == n
    # named: {"type": "function", "name": ...}
    r3 = c.responses.create(model=NAME, input="Weather?", tools=TOOLS, tool_choice={"type": "function", "name": "get_weather"},
                            parallel_tool_calls=False, temperature=1.0, max_output_tokens=300, extra_body={"seed": 4})
    assert [o.type for o in r3.output] == ["function_call"] and r3.output[0].name == "get_weather"


def _assembled(events):
    """Text and arguments per output index, from the delta events alone."""
    out = {}
    for e in events:
        if e["type"] in ("response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta"):
            out[e["output_index"]] = out.get(e["output_index"], "") + e["delta"]
    return out


def _item_text(item):
    if item["type"] == "function_call":
        return item["arguments"]
    return "".join(p["text"] for p in item["content"])


def check_sequence(events):
    """The documented order: created, in_progress, then per item added -> (part added) -> deltas ->
    done events -> item done, then completed / incomplete; sequence numbers 0, 1, 2, ..."""
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[0]["response"]["status"] == "in_progress" and events[0]["response"]["output"] == []
    last = events[-1]
    assert last["type"] in ("response.completed", "response.incomplete")
    final = last["response"]
    items = [e for e in events if e["type"] == "response.output_item.done"]
    assert [e["item"] for e in items] == final["output"]
    assert [e["output_index"] for e in events if e["type"] == "response.output_item.added"] == list(range(len(final["output"])))
    open_index = None
    for e in events[2:-1]:
        if e["type"] == "response.output_item.added":
            assert open_index is None
            open_index = e["output_index"]
        elif e["type"] == "response.output_item.done":
            assert e["output_index"] == open_index
            open_index = None
        else:
            assert e["output_index"] == open_index, e
    assembled = _assembled(events)
    for i, item in enumerate(final["output"]):
        assert assembled.get(i, "") == _item_text(item)
    return final


def test_stream_event_sequence_text(srv):
    body = {"input": "Tell me a story", "temperature": 1.0, "seed": 9, "max_output_tokens": 12}
    events = sse_events(srv, body)
    final = check_sequence(events)
    whole = post(srv, body).json()
    assert [_item_text(o) for o in final["output"]] == [_item_text(o) for o in whole["output"]]
    counts = lambda u: (u["input_tokens"], u["output_tokens"], u["total_tokens"], u["output_tokens_details"])
    assert counts(final["usage"]) == counts(whole["usage"]) and final["status"] == whole["status"] == "incomplete"
    types = [e["type"] for e in events]
    assert types[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert types[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]


def test_stream_reasoning_then_message(srv):
    """A grammar (the chat route's extension) makes the random model think, then answer: a
    reasoning item with reasoning_text deltas, then a message."""
    grammar = 'root ::= <|channel> "thought\\n" [a-z ]{3,12} <channel|> [a-z]{2,6}'
    body = {"input": "Think first", "temperature": 1.0, "seed": 1, "max_output_tokens": 60, "grammar": grammar}
    events = sse_events(srv, body)
    final = check_sequence(events)
    assert final["status"] == "completed"
    assert [o["type"] for o in final["output"]] == ["reasoning", "message"]
    assert any(e["type"] == "response.reasoning_text.delta" for e in events)
    assert any(e["type"] == "response.reasoning_text.done" for e in events)
    r = srv.client().responses.create(model=NAME, input=body["input"], temperature=1.0, max_output_tokens=60,
                                      extra_body={"seed": 1, "grammar": grammar})
    assert [o.type for o in r.output] == ["reasoning", "message"]
    assert r.output[0].content[0].type == "reasoning_text" and r.output[0].content[0].text == _item_text(final["output"][0])
    assert r.output_text == _item_text(final["output"][1])


def test_stream_function_call_and_client_helper(srv):
    body = {"input": "Weather?", "tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False,
            "temperature": 1.0, "seed": 5, "max_output_tokens": 300}
    events = sse_events(srv, body)
    final = check_sequence(events)
    assert final["status"] == "completed" and [o["type"] for o in final["output"]] == ["function_call"]
    types = [e["type"] for e in events]
    assert types == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.function_call_arguments.delta", "response.function_call_arguments.done",
                     "response.output_item.done", "response.completed"]
    done = events[4]
    assert done["arguments"] == final["output"][0]["arguments"] and done["name"] == "get_weather"
    # the client's streaming helper accumulates the same response
    c = srv.client()
    kw = {k: v for k, v in body.items() if k != "seed"}
    kw["extra_body"] = {"seed": body["seed"]}
    with c.responses.stream(model=NAME, **kw) as stream:
        seen = [ev.type for ev in stream]
        got = stream.get_final_response()
    assert seen == types
    assert got.output[0].arguments == final["output"][0]["arguments"]
    # and create(stream=True) yields the same events
    assert [ev.type for ev in c.responses.create(model=NAME, stream=True, **kw)] == types


def test_json_schema_text_format(srv):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["ok", "n"], "additionalProperties": False}
    r = srv.client().responses.create(model=NAME, input="JSON please", temperature=1.0, max_output_tokens=100,
                                      text={"format": {"type": "json_schema", "name": "x", "schema": schema, "strict": True}})
    assert r.status == "completed"
    doc = json.loads(r.output_text)
    assert set(doc) == {"ok", "n"} and isinstance(doc["ok"], bool) and 0 <= doc["n"] <= 9
    assert r.text.format.type == "json_schema"
    r = srv.client().responses.create(model=NAME, input="JSON", temperature=1.0, max_output_tokens=200, extra_body={"seed": 2},
                                      text={"format": {"type": "json_object"}})
    if r.status == "completed":
        assert isinstance(json.loads(r.output_text), dict)


@pytest.mark.parametrize("body,param,text", [
    ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id", "stores no responses"),
    ({"input": "x", "store": True}, "store", "stores no responses"),
    ({"input": "x", "conversation": "c"}, "conversation", None),
    ({"input": "x", "background": True}, "background", None),
    ({"input": "x", "include": ["reasoning.encrypted_content"]}, "include", None),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools", "only function tools"),
    ({"input": "x", "tools": [{"type": "function"}]}, "tools", None),
    ({"input": "x", "tool_choice": {"type": "web_search"}}, "tool_choice", None),
    ({"input": "x", "tool_choice": "required"}, "tool_choice", "needs 'tools'"),
    ({"input": "x", "reasoning": {"summary": "auto"}}, "reasoning", "reasoning.summary"),
    ({"input": "x", "reasoning": {"effort": "extreme"}}, "reasoning", None),
    ({"input": "x", "text": {"verbosity": "low"}}, "text", "text.verbosity"),
    ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text", "yaml"),
    ({"input": "x", "truncation": "auto"}, "truncation", None),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens", None),
    ({"input": "x", "frobnicate": 1}, "frobnicate", "Unrecognized"),
    ({}, "input", "required"),
    ({"input": []}, "input", None),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input", "item_reference"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input", "role"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]}, "input", "image"),
    ({"input": [{"type": "function_call", "name": "f"}]}, "input", "call_id"),
])
def test_unsupported_is_400_naming_it(srv, body, param, text):
    r = post(srv, body)
    assert r.status_code == 400, r.text
    e = r.json()["error"]
    assert e["param"] == param and e["type"] == "invalid_request_error", e
    if text:
        assert text in e["message"], e


def test_cached_tokens_from_the_prompt_cache(srv):
    """The same conversation again: the prompt cache supplies its prefix, counted as chat counts it."""
    c = srv.client()
    # reuse comes in whole prefill chunks (64 tokens): a prompt of several
    items = [{"role": "user", "content": "A long question about the weather in Paris in spring. " * 20}]
    c.responses.create(model=NAME, input=items, **GREEDY)
    again = c.responses.create(model=NAME, input=items, **GREEDY)
    r = requests.post(srv.url + "/v1/chat/completions", timeout=120, json={
        "model": NAME, "messages": items, "temperature": 0, "max_tokens": 6}).json()
    assert again.usage.input_tokens_details.cached_tokens == r["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert again.usage.input_tokens_details.cached_tokens < again.usage.input_tokens


def test_image_and_audio_parts_are_chat_media(g4_bin):
    """input_image (a data: URL) and input_audio parts are chat's image_url / input_audio parts:
    the same prompt tokens and greedy tokens as /v1/chat/completions on the multimodal fixture."""
    from test_multimodal_server import JPEG, MODEL as MM, audio_part, data_url
    s = Server(g4_bin, "--ctx", 512, "--max-soft-tokens", 70, model_dir=MM)
    try:
        url = data_url(JPEG, "image/jpeg")
        audio = audio_part()
        parts = [{"type": "input_text", "text": "Describe"}, {"type": "input_image", "image_url": url, "detail": "auto"}, audio]
        chat_parts = [{"type": "text", "text": "Describe"}, {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}, audio]
        r = post(s, {"input": [{"role": "user", "content": parts}], "temperature": 0, "max_output_tokens": 6})
        assert r.status_code == 200, r.text
        c = requests.post(s.url + "/v1/chat/completions", timeout=120, json={
            "model": NAME, "messages": [{"role": "user", "content": chat_parts}], "temperature": 0, "max_tokens": 6}).json()
        assert r.json()["usage"]["input_tokens"] == c["usage"]["prompt_tokens"] > 100   # the soft tokens counted
        assert r.json()["output"][0]["content"][0]["text"] == c["choices"][0]["message"]["content"]
        e = post(s, {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}).json()["error"]
        assert e["param"] == "input" and "image_url" in e["message"]
        e = post(s, {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": url, "detail": "high"}]}]}).json()["error"]
        assert e["param"] == "input" and "detail" in e["message"]
    finally:
        assert s.stop() == 0, "".join(s.log)
