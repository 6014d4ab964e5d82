"""The chat protocol through `gemma4c serve` (the official openai client): messages and stream
deltas come from the chat output parser (reasoning_content, tool_calls, finish_reason
"tool_calls"), thinking switched by chat_template_kwargs / reasoning_effort, tool_choice,
logit_bias, n > 1, and every request field either honoured or refused with a 400 naming it.

The tiny fixture's weights are random, so what it writes is not chosen by us: the checks are that
the server's message equals `gemma4c parse` over the very ids it generated (the parser's own
cases are in test_chat_parser.py), and that the fields change what they must."""
import json

import openai
import pytest
import requests

from conftest import FIXTURES, run_g4
from test_chat_parser import assemble
from test_server import NAME, Server

MODEL = FIXTURES / "g4-cond-tiny"
CTX = 512
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def tok_id(g4_bin, piece):
    r = run_g4(g4_bin, "tokenize", "-m", MODEL, input=piece.encode())
    ids = json.loads(r.stdout)
    assert len(ids) == 1, (piece, ids)
    return ids[0]


@pytest.fixture(scope="module")
def srv(g4_bin):
    s = Server(g4_bin, "--parallel", 4, "--ctx", CTX)
    yield s
    assert s.stop() == 0, "".join(s.log)


def post(srv, body, route="/v1/chat/completions"):
    return requests.post(srv.url + route, json={"model": NAME, **body}, timeout=120)


def assert_400(resp, param, text=None):
    assert resp.status_code == 400, resp.text
    e = resp.json()["error"]
    assert e["param"] == param, e
    assert e["type"] == "invalid_request_error"
    if text:
        assert text in e["message"], e
    return e


def parse_ids(g4_bin, ids):
    """`gemma4c parse` over the generated ids."""
    r = run_g4(g4_bin, "parse", "-m", MODEL, "--ids", input=json.dumps(ids).encode())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def same_message(a, b):
    assert (a.get("content") or "") == (b.get("content") or "")
    assert a.get("reasoning_content") == b.get("reasoning_content")
    strip = lambda calls: [(c["function"]["name"], c["function"]["arguments"]) for c in calls or []]
    assert strip(a.get("tool_calls")) == strip(b.get("tool_calls"))


def protocol_bias(g4_bin):
    """Boosts the protocol's tokens and the pieces of a call so that the sampled output is full of
    channels, calls and quotes (what the model writes stays the model's choice)."""
    pieces = ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>']
    return {**{str(tok_id(g4_bin, p)): 5 for p in pieces}, str(tok_id(g4_bin, "<|tool_response>")): 2}


# ---------------------------------------------------------------- the parser in the server

@pytest.mark.parametrize("seed", range(8))
def test_message_is_the_parse_of_its_ids(g4_bin, srv, seed):
    body = {"messages": USER, "tools": TOOLS, "max_tokens": 40, "temperature": 1.0, "seed": seed,
            "logit_bias": protocol_bias(g4_bin), "return_token_ids": True}
    whole = post(srv, body).json()
    ch = whole["choices"][0]
    ref = parse_ids(g4_bin, ch["token_ids"])
    same_message(ch["message"], ref["message"])
    if ch["finish_reason"] != "length":
        assert ch["finish_reason"] == ref["finish_reason"]
    for i, c in enumerate(ch["message"].get("tool_calls") or []):
        assert c["type"] == "function" and c["id"].startswith("call_")
        assert isinstance(json.loads(c["function"]["arguments"]), dict)
    if ch["message"].get("tool_calls"):
        assert ch["finish_reason"] in ("tool_calls", "length")

    # the same request streamed: the deltas assemble to the same message, ids included
    chunks = list(srv.client().chat.completions.create(model=NAME, stream=True, messages=USER, tools=TOOLS,
                                                       max_tokens=40, temperature=1.0, seed=seed,
                                                       logit_bias=body["logit_bias"]))
    content, reasoning, calls, fin = assemble([c.choices[0].model_dump() for c in chunks if c.choices])
    assert (content or "") == (ch["message"]["content"] or "")
    assert reasoning == ch["message"].get("reasoning_content")
    assert calls == (ch["message"].get("tool_calls") or [])
    assert fin == ch["finish_reason"]


def test_tool_response_ends_the_turn(g4_bin, srv):
    # +100 makes greedy pick the token: <|tool_response> first, so the message ends at once
    resp = srv.client().chat.completions.create(model=NAME, messages=USER, max_tokens=20, temperature=0,
                                                logit_bias={str(tok_id(g4_bin, "<|tool_response>")): 100})
    assert resp.choices[0].finish_reason == "stop"
    assert resp.choices[0].message.content == ""
    assert resp.usage.completion_tokens == 1


def test_reasoning_never_leaks_into_content(g4_bin, srv):
    # channel tokens favoured: whatever lies in a thought is reasoning, never content
    seen_reasoning = False
    for seed in range(6):
        r = post(srv, {"messages": USER, "tools": TOOLS, "max_tokens": 30, "temperature": 1.0, "seed": seed,
                       "logit_bias": {str(tok_id(g4_bin, "<|channel>")): 6}, "return_token_ids": True}).json()
        m = r["choices"][0]["message"]
        same_message(m, parse_ids(g4_bin, r["choices"][0]["token_ids"])["message"])
        assert "<|channel>" not in (m["content"] or "") and "thought\n" not in (m["content"] or "")
        seen_reasoning |= bool(m.get("reasoning_content"))
    assert seen_reasoning


# ---------------------------------------------------------------- thinking and tools in the prompt

def prompt_tokens(srv, **kw):
    r = post(srv, {"messages": USER, "max_tokens": 1, **kw})
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens"]


def template_tokens(g4_bin, **vars):
    conv = {"messages": USER, "add_generation_prompt": True, **vars}
    text = run_g4(g4_bin, "template", "-m", MODEL, input=json.dumps(conv).encode()).stdout
    return len(json.loads(run_g4(g4_bin, "tokenize", "-m", MODEL, input=text).stdout))


def test_thinking_switches(g4_bin, srv):
    off = prompt_tokens(srv)
    on = prompt_tokens(srv, chat_template_kwargs={"enable_thinking": True})
    assert off == template_tokens(g4_bin) and on == template_tokens(g4_bin, enable_thinking=True)
    assert on != off
    for effort in ("minimal", "low", "medium", "high"):
        assert prompt_tokens(srv, reasoning_effort=effort) == on
    assert prompt_tokens(srv, reasoning_effort="none") == off
    # an explicit template variable wins over the effort
    assert prompt_tokens(srv, reasoning_effort="high", chat_template_kwargs={"enable_thinking": False}) == off
    assert_400(post(srv, {"messages": USER, "reasoning_effort": "extreme"}), "reasoning_effort")


def test_tool_choice(g4_bin, srv):
    plain = prompt_tokens(srv)
    with_tools = prompt_tokens(srv, tools=TOOLS)
    assert with_tools == template_tokens(g4_bin, tools=TOOLS) and with_tools > plain
    assert prompt_tokens(srv, tools=TOOLS, tool_choice="auto") == with_tools
    assert prompt_tokens(srv, tools=TOOLS, tool_choice="none") == plain
    assert prompt_tokens(srv, tools=TOOLS, parallel_tool_calls=False) == with_tools
    # required / named (constrained to the call syntax): tests/py/test_tool_choice.py
    assert prompt_tokens(srv, tools=TOOLS, tool_choice="required") == with_tools
    assert_400(post(srv, {"messages": USER, "tools": TOOLS, "tool_choice": "sometimes"}), "tool_choice")
    assert_400(post(srv, {"messages": USER, "tools": [{"type": "function"}]}), "tools")
    assert_400(post(srv, {"messages": USER, "tools": TOOLS, "parallel_tool_calls": "yes"}), "parallel_tool_calls")


def test_tool_round_trip_messages_accepted(srv):
    # an assistant turn with tool_calls and the tool's answer render through the template
    msgs = USER + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]
    r = srv.client().chat.completions.create(model=NAME, messages=msgs, tools=TOOLS, max_tokens=4, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")


# ---------------------------------------------------------------- logit_bias, n, stop

def test_logit_bias_greedy(g4_bin, srv):
    c = srv.client()
    base = c.completions.create(model=NAME, prompt="Once upon a time", max_tokens=4, temperature=0,
                                extra_body={"return_token_ids": True, "ignore_eos": True})
    first = base.choices[0].token_ids[0]
    forced = 1000 if first != 1000 else 999
    r = c.completions.create(model=NAME, prompt="Once upon a time", max_tokens=4, temperature=0,
                             logit_bias={str(forced): 100}, extra_body={"return_token_ids": True, "ignore_eos": True})
    assert r.choices[0].token_ids == [forced] * 4
    r = c.completions.create(model=NAME, prompt="Once upon a time", max_tokens=1, temperature=0,
                             logit_bias={str(first): -100}, extra_body={"return_token_ids": True, "ignore_eos": True})
    assert r.choices[0].token_ids[0] != first
    # chat goes through the same generation path
    r = post(srv, {"messages": USER, "max_tokens": 3, "temperature": 0, "logit_bias": {str(forced): 100},
                   "return_token_ids": True, "ignore_eos": True}).json()
    assert r["choices"][0]["token_ids"] == [forced] * 3


def test_logit_bias_refused(srv):
    for bad in ("garbage", [1, 2], {"abc": 1}, {"-1": 1}, {"99999999": 1}, {"5": 101}, {"5": -100.5}, {"5": "x"}):
        assert_400(post(srv, {"messages": USER, "logit_bias": bad}), "logit_bias")
        assert_400(post(srv, {"prompt": "x", "logit_bias": bad}, "/v1/completions"), "logit_bias")


def test_n_choices(srv):
    c = srv.client()
    kw = dict(model=NAME, prompt="Once upon a time", max_tokens=6, temperature=1.0,
              extra_body={"return_token_ids": True, "ignore_eos": True})
    many = c.completions.create(n=3, seed=40, **kw)
    assert [ch.index for ch in many.choices] == [0, 1, 2]
    for i in range(3):   # choice i is the request alone with seed + i
        alone = c.completions.create(n=1, seed=40 + i, **kw)
        assert many.choices[i].token_ids == alone.choices[0].token_ids
    assert many.usage.completion_tokens == 18

    chat = c.chat.completions.create(model=NAME, messages=USER, n=2, seed=7, max_tokens=8, temperature=1.0)
    assert len(chat.choices) == 2
    chunks = list(c.chat.completions.create(model=NAME, messages=USER, n=2, seed=7, max_tokens=8, temperature=1.0,
                                            stream=True))
    for i in range(2):
        content, reasoning, calls, fin = assemble([ch.choices[0].model_dump() for ch in chunks
                                                   if ch.choices and ch.choices[0].index == i])
        assert (content or "") == (chat.choices[i].message.content or "")
        assert fin == chat.choices[i].finish_reason


def test_stop_and_max_completion_tokens(srv):
    c = srv.client()
    base = c.chat.completions.create(model=NAME, messages=USER, max_completion_tokens=12, temperature=0)
    assert base.usage.completion_tokens <= 12
    text = base.choices[0].message.content
    if len(text) > 4:
        stop = text[2:4]
        for s in (stop, [stop, "@@never@@"]):
            r = c.chat.completions.create(model=NAME, messages=USER, max_completion_tokens=12, temperature=0, stop=s)
            assert r.choices[0].message.content == text[:text.index(stop)]
            assert r.choices[0].finish_reason == "stop"


# ---------------------------------------------------------------- nothing silently ignored

def test_unsupported_fields_are_400(srv):
    # json_object / json_schema are implemented (test_structured_outputs.py); a schema-less one is not valid
    assert_400(post(srv, {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {}}}),
               "response_format")
    assert post(srv, {"messages": USER, "max_tokens": 1, "response_format": {"type": "text"}}).status_code == 200
    assert_400(post(srv, {"messages": USER, "frobnicate": 1}), "frobnicate", "Unrecognized")
    assert_400(post(srv, {"messages": USER, "functions": []}), "functions")
    assert_400(post(srv, {"messages": USER, "stream_options": "usage"}), "stream_options")
    assert_400(post(srv, {"messages": USER, "stream_options": {"include_usage": 1}}), "stream_options")
    assert_400(post(srv, {"prompt": "x", "suffix": "y"}, "/v1/completions"), "suffix")
    assert_400(post(srv, {"prompt": "x", "best_of": 3}, "/v1/completions"), "best_of")
    assert post(srv, {"prompt": "x", "max_tokens": 1, "best_of": 1}, "/v1/completions").status_code == 200
    assert_400(post(srv, {"prompt": "x", "tools": TOOLS}, "/v1/completions"), "tools")
    assert_400(requests.post(srv.url + "/generate", json={"prompt": "x", "messages": []}, timeout=30), "messages")


def test_documented_no_ops_accepted(srv):
    r = post(srv, {"messages": USER, "max_tokens": 1, "user": "u-1", "metadata": {"k": "v"}, "store": False})
    assert r.status_code == 200, r.text
    assert_400(post(srv, {"messages": USER, "user": 5}), "user")
    assert_400(post(srv, {"messages": USER, "metadata": "x"}), "metadata")


def test_media_parts_are_400(srv):
    img = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    e = assert_400(post(srv, {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, img]}]}),
                   "messages")
    assert "takes no images" in e["message"]   # a text-only model; images: test_multimodal_server.py
    aud = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    e = assert_400(post(srv, {"messages": [{"role": "user", "content": [aud]}]}), "messages")
    assert "takes no audio" in e["message"]
    ok = post(srv, {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 1})
    assert ok.status_code == 200, ok.text
    with pytest.raises(openai.BadRequestError):
        srv.client().chat.completions.create(model=NAME, max_tokens=1, messages=[{"role": "user", "content": [img]}])


# ---------------------------------------------------------------- /tokenize, /detokenize, /v1/models/{id}

def test_tokenize_detokenize(g4_bin, srv):
    text = "Hello world <|tool_call>call:f{}<tool_call|> é"
    want = json.loads(run_g4(g4_bin, "tokenize", "-m", MODEL, input=text.encode()).stdout)
    r = requests.post(srv.url + "/tokenize", json={"content": text}, timeout=30)
    assert r.status_code == 200 and r.json() == {"tokens": want}
    with_bos = requests.post(srv.url + "/tokenize", json={"content": text, "add_special": True}, timeout=30).json()
    assert with_bos["tokens"] == json.loads(run_g4(g4_bin, "tokenize", "-m", MODEL, "--bos", input=text.encode()).stdout)
    pieces = requests.post(srv.url + "/tokenize", json={"content": text, "with_pieces": True}, timeout=30).json()
    assert [p["id"] for p in pieces["tokens"]] == want
    assert "".join(p["piece"] for p in pieces["tokens"] if isinstance(p["piece"], str)) == text
    back = requests.post(srv.url + "/detokenize", json={"tokens": want}, timeout=30)
    assert back.status_code == 200 and back.json() == {"content": text}
    assert_400(requests.post(srv.url + "/tokenize", json={"content": 5}, timeout=30), "content")
    assert_400(requests.post(srv.url + "/tokenize", json={"content": "x", "parse": 1}, timeout=30), "parse")
    assert_400(requests.post(srv.url + "/detokenize", json={"tokens": [1, -1]}, timeout=30), "tokens")
    assert_400(requests.post(srv.url + "/detokenize", json={"tokens": "1"}, timeout=30), "tokens")
    assert requests.get(srv.url + "/tokenize", timeout=30).status_code == 405


def test_model_by_id(srv):
    m = srv.client().models.retrieve(NAME)
    assert m.id == NAME and m.object == "model"
    r = requests.get(srv.url + "/v1/models/other", timeout=30)
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    assert requests.post(srv.url + f"/v1/models/{NAME}", timeout=30).status_code == 405


def test_stream_stop_string_held_back(srv):
    c = srv.client()
    base = c.chat.completions.create(model=NAME, messages=USER, max_tokens=16, temperature=0).choices[0].message.content
    if len(base) < 6:
        pytest.skip("the fixture's greedy reply is too short to cut")
    stop = base[3:6]
    whole = c.chat.completions.create(model=NAME, messages=USER, max_tokens=16, temperature=0, stop=stop)
    chunks = list(c.chat.completions.create(model=NAME, messages=USER, max_tokens=16, temperature=0, stop=stop,
                                            stream=True, logprobs=True))
    content, _, _, fin = assemble([ch.choices[0].model_dump() for ch in chunks if ch.choices])
    assert content == whole.choices[0].message.content == base[:base.index(stop)]
    assert fin == "stop"
    n_lp = sum(len(ch.choices[0].logprobs.content) for ch in chunks if ch.choices and ch.choices[0].logprobs)
    assert n_lp == whole.usage.completion_tokens
