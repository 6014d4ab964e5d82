"""The chat output parser (src/chat, `gemma4c parse`) on Gemma 4's protocol: reasoning in
<|channel>thought ... <channel|>, tool calls <|tool_call>call:NAME{ARGS}<tool_call|> in Gemma's
argument dialect, <|tool_response> ending the turn. Every case is checked twice: the whole parse,
and the streamed chunks (the parser fed one token at a time) assembled into the same message.

Tool-call texts come from the model's own chat template (the template renders an assistant
message's tool_calls in exactly the form the model was trained to write), so the expected
arguments are the dicts the template was given; the other cases follow the format as the
template and tokenizer define it."""
import json
import random

import pytest

from conftest import FIXTURES, SHARED, run_g4

M = FIXTURES / "g4-cond-tiny"


def parse(g4_bin, raw, *opts, model=M):
    r = run_g4(g4_bin, "parse", "-m", model, *opts, input=raw.encode())
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def parse_stream(g4_bin, raw, *opts, model=M):
    r = run_g4(g4_bin, "parse", "-m", model, "--stream", *opts, input=raw.encode())
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(l) for l in r.stdout.decode().splitlines()]


def assemble(chunks):
    """What an OpenAI client builds from the chunks: texts concatenated, calls by index."""
    content, reasoning, calls = None, None, {}
    for c in chunks:
        d = c["delta"]
        if d.get("content") is not None:
            content = (content or "") + d["content"]
        if d.get("reasoning_content") is not None:
            reasoning = (reasoning or "") + d["reasoning_content"]
        for tc in d.get("tool_calls") or []:
            e = calls.setdefault(tc["index"], {"id": None, "type": None, "function": {"name": "", "arguments": ""}})
            e["id"] = tc.get("id") or e["id"]
            e["type"] = tc.get("type") or e["type"]
            e["function"]["name"] += tc["function"].get("name") or ""
            e["function"]["arguments"] += tc["function"].get("arguments") or ""
    return content, reasoning, [calls[k] for k in sorted(calls)], chunks[-1]["finish_reason"]


def check(g4_bin, raw, content="", reasoning=None, calls=(), finish=None, opts=()):
    """Whole parse == expectation, and streamed == whole. calls: [(name, arguments dict)]."""
    out = parse(g4_bin, raw, *opts)
    msg = out["message"]
    assert msg["role"] == "assistant"
    got_calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg.get("tool_calls", [])]
    assert got_calls == [(n, a) for n, a in calls], msg
    for c in msg.get("tool_calls", []):
        assert c["type"] == "function" and c["id"]
        assert isinstance(json.loads(c["function"]["arguments"]), dict)
    assert (msg["content"] or "") == content, msg
    if calls and not content:
        assert msg["content"] is None
    assert msg.get("reasoning_content") == reasoning, msg
    assert out["finish_reason"] == (finish or ("tool_calls" if calls else "stop"))

    chunks = parse_stream(g4_bin, raw, *opts)
    s_content, s_reasoning, s_calls, s_finish = assemble(chunks)
    assert (s_content or "") == (msg["content"] or "")
    assert s_reasoning == msg.get("reasoning_content")
    assert s_calls == msg.get("tool_calls", [])
    assert s_finish == out["finish_reason"]
    return msg


def render_calls(g4_bin, calls, reasoning=None):
    """The model turn the chat template writes for an assistant message with these tool calls."""
    msg = {"role": "assistant", "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls)]}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    conv = {"messages": [{"role": "user", "content": "hi"}, msg]}
    r = run_g4(g4_bin, "template", "-m", M, input=json.dumps(conv).encode())
    assert r.returncode == 0, r.stderr.decode()
    text = r.stdout.decode()
    turn = text[text.index("<|turn>model\n") + len("<|turn>model\n"):]
    assert turn.endswith("<|tool_response>")
    return turn


# ---------------------------------------------------------------- arguments, via the template

ARGS = [
    {},
    {"city": "Paris"},
    {"city": ""},
    {"q": "a, b: c"},
    {"q": "{braces} and [brackets]"},
    {"q": "}"},
    {"q": "{"},
    {"q": 'he said "hi"'},
    {"q": "it's"},
    {"q": "line1\nline2\n"},
    {"q": "tab\there"},
    {"q": "back\\slash \\n not a newline"},
    {"q": "emoji 🌦️ and 👩‍💻"},
    {"q": "日本語のテキスト"},
    {"q": "Ελληνικά, русский, العربية"},
    {"q": "call:f{a:1}"},
    {"q": "a:b,c:d}"},
    {"q": "  padded  "},
    {"q": "true"},
    {"q": "123"},
    {"n": 0},
    {"n": 42},
    {"n": -7},
    {"n": 9007199254740993},
    {"x": 3.25},
    {"x": -0.5},
    {"x": 1e-07},
    {"x": 1.5e+300},
    {"x": -2.5e-10},
    {"b": True},
    {"b": False},
    {"v": None},
    {"o": {"a": 1, "b": {"c": [1, 2, {"d": "e"}]}}},
    {"l": []},
    {"o": {}},
    {"l": [1, "two", 3.5, True, None, [], {}]},
    {"l": [[1, 2], [3, [4, [5]]]]},
    {"l": [{"name": "a", "v": 1}, {"name": "b", "v": -2}]},
    {"a": 1, "b": "two", "c": [3], "d": {"e": False}},
    {"snake_case": 1, "camelCase": 2, "with-dash": 3, "k9": 4},
    {"deep": {"a": {"b": {"c": {"d": {"e": {"f": "g"}}}}}}},
    {"path": "C:\\Users\\x", "url": "https://example.com/a?b=c&d=e#f"},
    {"code": "def f(x):\n    return {'a': [x, \"y\"]}\n"},
]


@pytest.mark.parametrize("args", ARGS, ids=[f"args{i}" for i in range(len(ARGS))])
def test_arguments_roundtrip(g4_bin, args):
    check(g4_bin, render_calls(g4_bin, [("get_weather", args)]), calls=[("get_weather", args)])


@pytest.mark.parametrize("name", ["f", "get_weather", "tools.search", "my-tool", "ns.sub-tool_v2", "a1"])
def test_tool_names(g4_bin, name):
    check(g4_bin, render_calls(g4_bin, [(name, {"a": 1})]), calls=[(name, {"a": 1})])


@pytest.mark.parametrize("n", [2, 3, 5])
def test_parallel_calls(g4_bin, n):
    calls = [(f"tool_{i}", {"i": i, "s": f"v{i}, {{x}}"}) for i in range(n)]
    msg = check(g4_bin, render_calls(g4_bin, calls), calls=calls)
    assert len({c["id"] for c in msg["tool_calls"]}) == n


@pytest.mark.parametrize("reasoning", ["I should call the tool.", "step 1\nstep 2", "{not: a call}"])
def test_reasoning_then_call(g4_bin, reasoning):
    raw = render_calls(g4_bin, [("get_weather", {"city": "Paris"})], reasoning=reasoning)
    assert raw.startswith("<|channel>thought\n")
    check(g4_bin, raw, reasoning=reasoning, calls=[("get_weather", {"city": "Paris"})])


# ---------------------------------------------------------------- content and reasoning

TEXT_CASES = [
    ("", "", None),
    ("Hello!", "Hello!", None),
    ("two\n\nparagraphs\n", "two\n\nparagraphs\n", None),
    ("emoji 🌦️ 日本語", "emoji 🌦️ 日本語", None),
    ("braces {a:1} and call:f{} are text", "braces {a:1} and call:f{} are text", None),
    ("<|channel>thought\n<channel|>Answer.", "Answer.", None),
    ("<|channel>thought\nLet me think.\n<channel|>Answer.", "Answer.", "Let me think."),
    ("<|channel>thought\nA\n\nB\n<channel|>C", "C", "A\n\nB"),
    ("<|channel>thought\nno newline<channel|>C", "C", "no newline"),
    ("<|channel>thought\nunterminated", "", "unterminated"),
    ("<|channel>thought\nends with newline\n", "", "ends with newline\n"),
    ("<|channel>thou", "", None),
    ("<|channel>thought<channel|>x", "x", None),
    ("<|channel>analysis\nother channel<channel|>x", "x", "analysis\nother channel"),
    ("before<|channel>thought\nmid<channel|>after", "beforeafter", "mid"),
    ("<|channel>thought\n日本語の考え<channel|>答え", "答え", "日本語の考え"),
    ("stray<channel|> close", "stray close", None),
    ('stray <|"|>quote', "stray quote", None),
    ("stray close<tool_call|> tag", "stray close tag", None),
    ("<bos>specials<eos> dropped", "specials dropped", None),
    ("<|channel>thought\nR<channel|>A<|tool_response>ignored", "A", "R"),
    ("text then end<|tool_response>more", "text then end", None),
]


@pytest.mark.parametrize("raw,content,reasoning", TEXT_CASES, ids=[f"text{i}" for i in range(len(TEXT_CASES))])
def test_text_and_reasoning(g4_bin, raw, content, reasoning):
    check(g4_bin, raw, content=content, reasoning=reasoning)


# ---------------------------------------------------------------- calls written by hand

Q = '<|"|>'
CALL_CASES = [
    # (raw, content, reasoning, calls)
    (f"Let me check.<|tool_call>call:get_weather{{city:{Q}Paris{Q}}}<tool_call|><|tool_response>",
     "Let me check.", None, [("get_weather", {"city": "Paris"})]),
    (f"<|channel>thought\nneed weather<channel|>Checking.<|tool_call>call:w{{c:{Q}Oslo{Q}}}<tool_call|>",
     "Checking.", "need weather", [("w", {"c": "Oslo"})]),
    ("<|tool_call>call:f{}<tool_call|>", "", None, [("f", {})]),
    ("<|tool_call>call:f{ a : 1 , b : [ 1 , 2 ] }<tool_call|>", "", None, [("f", {"a": 1, "b": [1, 2]})]),
    ("<|tool_call>call:f{a:1,}<tool_call|>", "", None, [("f", {"a": 1})]),
    (f"<|tool_call>call:f{{{Q}quoted key{Q}:1}}<tool_call|>", "", None, [("f", {"quoted key": 1})]),
    ("<|tool_call>call:f{unit:celsius}<tool_call|>", "", None, [("f", {"unit": "celsius"})]),
    ("<|tool_call>call:f{a:+1,b:.5,c:5.,d:007}<tool_call|>", "", None, [("f", {"a": 1, "b": 0.5, "c": 5.0, "d": 7})]),
    ("<|tool_call>call:f{a:-0,b:1E5,c:-1e-3}<tool_call|>", "", None, [("f", {"a": 0, "b": 1e5, "c": -1e-3})]),
    ("<|tool_call>call:f{a:None,b:null}<tool_call|>", "", None, [("f", {"a": None, "b": None})]),
    (f"<|tool_call>call:f{{s:{Q}{Q}}}<tool_call|>", "", None, [("f", {"s": ""})]),
    (f"<|tool_call>call:a{{x:1}}<tool_call|>\n<|tool_call>call:b{{y:{Q}2{Q}}}<tool_call|>", "\n", None,
     [("a", {"x": 1}), ("b", {"y": "2"})]),
    ("<|tool_call>call:f{a:1}<tool_call|>Done.", "Done.", None, [("f", {"a": 1})]),
    # JSON's quotes where the dialect has <|"|> (a fallback models take): valid JSON strings are taken
    ('<|tool_call>call:f{"k":"a, \\"b\\" {c}\\n",n:"\\u00e9"}<tool_call|>', "", None, [("f", {"k": 'a, "b" {c}\n', "n": "é"})]),
    ("<|tool_call>call:f{a:1}<tool_call|><|tool_response>response:f{}", "", None, [("f", {"a": 1})]),
]


@pytest.mark.parametrize("raw,content,reasoning,calls", CALL_CASES, ids=[f"call{i}" for i in range(len(CALL_CASES))])
def test_calls(g4_bin, raw, content, reasoning, calls):
    check(g4_bin, raw, content=content, reasoning=reasoning, calls=calls)


# ---------------------------------------------------------------- truncated and malformed calls

# A call that never closes (max_tokens inside it) or does not parse is returned as content, its
# text as the model wrote it: nothing the model produced is dropped or half-converted.
BAD_CALLS = [
    "<|tool_call>call:f{a:1",
    f"<|tool_call>call:f{{a:{Q}unterminated string",
    "<|tool_call>call:get_wea",
    "<|tool_call>",
    "<|tool_call>call:f<tool_call|>",
    "<|tool_call>call:{a:1}<tool_call|>",
    "<|tool_call>notcall:f{a:1}<tool_call|>",
    "<|tool_call>call:f{a 1}<tool_call|>",
    "<|tool_call>call:f{a:1}}<tool_call|>",
    "<|tool_call>call:f{a:1,,b:2}<tool_call|>",
    "<|tool_call>call:f{a:}<tool_call|>",
    "<|tool_call>call:f{a:[1,2}<tool_call|>",
    "<|tool_call>call:my tool{a:1}<tool_call|>",
    "<|tool_call>call:f{a:1} trailing<tool_call|>",
    f"<|tool_call>call:f{{a:{Q}x{Q}y}}<tool_call|>",
    "<|tool_call>call:f{:1}<tool_call|>",
    '<|tool_call>call:f{a:"unterminated}<tool_call|>',
    '<|tool_call>call:f{a:"bad \\q escape"}<tool_call|>',
]


@pytest.mark.parametrize("raw", BAD_CALLS, ids=[f"bad{i}" for i in range(len(BAD_CALLS))])
def test_bad_call_is_content(g4_bin, raw):
    check(g4_bin, "Text. " + raw, content="Text. " + raw)


def test_bad_call_then_good_call(g4_bin):
    bad = "<|tool_call>call:f{a 1}<tool_call|>"
    check(g4_bin, bad + "<|tool_call>call:g{b:2}<tool_call|>", content=bad, calls=[("g", {"b": 2})])


def test_call_interrupted_by_tool_response(g4_bin):
    check(g4_bin, "<|tool_call>call:f{a:1<|tool_response>x", content="<|tool_call>call:f{a:1")


def test_other_delimiter_inside_call(g4_bin):
    # only <|"|> and <tool_call|> belong to a call: another delimiter ends it (as content) and
    # then acts as itself, here opening a channel whose text is "}"
    check(g4_bin, f"<|tool_call>call:f{{s:{Q}<|channel>{Q}}}<tool_call|>", content=f"<|tool_call>call:f{{s:{Q}",
          reasoning="}")


def test_call_inside_unclosed_thought(g4_bin):
    check(g4_bin, "<|channel>thought\nhmm\n<|tool_call>call:f{a:1}<tool_call|>", reasoning="hmm\n",
          calls=[("f", {"a": 1})])


# ---------------------------------------------------------------- stop strings

STOP_CASES = [
    ("abcENDdef", ["END"], "abc", None, []),
    ("abcEN", ["END"], "abcEN", None, []),
    ("a\n\nb", ["\n\n"], "a", None, []),
    ("xyz", ["z", "y"], "x", None, []),
    ("<|channel>thought\nEND inside<channel|>okENDno", ["END"], "ok", "END inside", []),
    (f"<|tool_call>call:f{{s:{Q}END{Q}}}<tool_call|>", ["END"], "", None, [("f", {"s": "END"})]),
]


@pytest.mark.parametrize("raw,stops,content,reasoning,calls", STOP_CASES, ids=[f"stop{i}" for i in range(len(STOP_CASES))])
def test_stop_strings(g4_bin, raw, stops, content, reasoning, calls):
    opts = [a for s in stops for a in ("--stop", s)]
    check(g4_bin, raw, content=content, reasoning=reasoning, calls=calls, opts=opts)


# ---------------------------------------------------------------- other tokenizers, fuzz, CLI

@pytest.mark.skipif(not (SHARED / "gemma3-tokenizer").exists(), reason="no Gemma 3 tokenizer")
def test_gemma3_passes_text_through(g4_bin):
    raw = "<start_of_turn>x <|tool_call>call:f{a:1}<tool_call|> {b:2}"
    out = parse(g4_bin, raw, model=SHARED / "gemma3-tokenizer")
    r = run_g4(g4_bin, "detokenize", "-m", SHARED / "gemma3-tokenizer", "--skip-special",
               input=run_g4(g4_bin, "tokenize", "-m", SHARED / "gemma3-tokenizer", input=raw.encode()).stdout)
    assert out == {"message": {"role": "assistant", "content": r.stdout.decode()}, "finish_reason": "stop"}


PIECES = ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", Q, "<|tool_response>", "<bos>", "thought\n",
          "call:", "f", "{", "}", "[", "]", ":", ",", "a", "1", "-2.5e3", "true", "null", " ", "\n", "é", "🌦️",
          "END", "x{y}", "name.v-2"]


def test_fuzz_streamed_equals_whole(g4_bin):
    rng = random.Random(1234)
    for _ in range(150):
        raw = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40)))
        opts = ["--stop", "END"] if rng.random() < 0.3 else []
        out = parse(g4_bin, raw, *opts)
        msg = out["message"]
        for c in msg.get("tool_calls", []):
            assert isinstance(json.loads(c["function"]["arguments"]), dict)
        content, reasoning, calls, fin = assemble(parse_stream(g4_bin, raw, *opts))
        assert (content or "") == (msg["content"] or ""), raw
        assert reasoning == msg.get("reasoning_content"), raw
        assert calls == msg.get("tool_calls", []), raw
        assert fin == out["finish_reason"], raw


def test_parse_ids(g4_bin):
    raw = f"<|channel>thought\nR<channel|>A<|tool_call>call:f{{s:{Q}x{Q}}}<tool_call|>"
    ids = run_g4(g4_bin, "tokenize", "-m", M, input=raw.encode()).stdout
    r = run_g4(g4_bin, "parse", "-m", M, "--ids", input=ids)
    assert r.returncode == 0 and json.loads(r.stdout) == parse(g4_bin, raw)
    assert run_g4(g4_bin, "parse", "-m", M, "--ids", input=b"[1, -3]").returncode == 2
    assert run_g4(g4_bin, "parse", "-m", M, "--ids", input=b"hello").returncode == 2


def test_parse_usage_errors(g4_bin):
    assert run_g4(g4_bin, "parse").returncode == 2
    assert run_g4(g4_bin, "parse", "-m", M, "--bogus").returncode == 2
    r = run_g4(g4_bin, "parse", "--help")
    assert r.returncode == 0 and b"--stream" in r.stdout
