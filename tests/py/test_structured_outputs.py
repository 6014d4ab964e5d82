"""response_format through the server: json_schema and json_object constrain the output with the
grammar engine (src/grammar), so even the random-weight fixture answers with JSON that parses and
satisfies the schema; keywords the engine does not implement, and unknown types, are 400s naming
them. Outputs are parsed with Python's json module and validated by the jsonschema package."""
import json

import jsonschema
import pytest
import requests

from test_server import NAME, Server

SCHEMA = {"type": "object",
          "properties": {"ok": {"type": "boolean"}, "color": {"enum": ["red", "green", "blue"]},
                         "n": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["ok", "color", "n"], "additionalProperties": False}


# The newer keywords too: a pair by prefixItems, a tagged value by oneOf of disjoint consts.
RICH = {"type": "object",
        "properties": {"pair": {"type": "array", "prefixItems": [{"type": "integer", "minimum": 0, "maximum": 9},
                                                                 {"enum": ["a", "b"]}], "items": False, "minItems": 2},
                       "tag": {"oneOf": [{"const": "x"}, {"const": "y"}, {"type": "null"}]}},
        "required": ["pair", "tag"], "additionalProperties": {"type": "boolean"}}


def _valid(doc, schema=SCHEMA):
    """Draft 2020-12 validation by the jsonschema package."""
    return jsonschema.Draft202012Validator(schema).is_valid(doc)


@pytest.fixture(scope="module")
def srv(g4_bin):
    s = Server(g4_bin)
    yield s
    s.stop()


def _chat(srv, **kw):
    body = {"model": NAME, "messages": [{"role": "user", "content": "Give me a color."}], **kw}
    return requests.post(srv.url + "/v1/chat/completions", json=body, timeout=120)


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_json_schema_output_satisfies_the_schema(srv, temperature):
    r = _chat(srv, max_tokens=200, temperature=temperature, seed=7, n=3,
              response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA, "strict": True}})
    assert r.status_code == 200, r.text
    for ch in r.json()["choices"]:
        assert ch["finish_reason"] == "stop", ch
        assert _valid(json.loads(ch["message"]["content"])), ch["message"]["content"]


def test_newer_keywords_constrain_the_output(srv):
    r = _chat(srv, max_tokens=200, temperature=1.0, seed=11, n=3,
              response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": RICH}})
    assert r.status_code == 200, r.text
    stopped = 0
    for ch in r.json()["choices"]:
        if ch["finish_reason"] == "stop":
            stopped += 1
            assert _valid(json.loads(ch["message"]["content"]), RICH), ch["message"]["content"]
    assert stopped >= 1


def test_json_schema_streams_the_same_document(srv):
    rf = {"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}}
    whole = _chat(srv, max_tokens=200, temperature=1.0, seed=3, response_format=rf).json()["choices"][0]["message"]["content"]
    r = requests.post(srv.url + "/v1/chat/completions", timeout=120, stream=True,
                      json={"model": NAME, "messages": [{"role": "user", "content": "Give me a color."}], "max_tokens": 200,
                            "temperature": 1.0, "seed": 3, "stream": True, "response_format": rf})
    parts = []
    for line in r.iter_lines():
        if line.startswith(b"data: {"):
            for ch in json.loads(line[6:])["choices"]:
                parts.append(ch["delta"].get("content") or "")
    assert "".join(parts) == whole and _valid(json.loads(whole))


def test_json_object_is_an_object(srv):
    """Any JSON object: when the model ends, the content parses as one."""
    ended = 0
    for seed in range(4):
        r = _chat(srv, max_tokens=300, temperature=1.0, seed=seed, response_format={"type": "json_object"})
        assert r.status_code == 200, r.text
        ch = r.json()["choices"][0]
        if ch["finish_reason"] == "stop":
            ended += 1
            assert isinstance(json.loads(ch["message"]["content"]), dict)
        else:   # cut by max_tokens: still the start of an object
            assert ch["message"]["content"].lstrip().startswith("{")
    assert ended >= 1


@pytest.mark.parametrize("rf,words", [
    ({"type": "json_schema", "json_schema": {"name": "c", "schema": {"type": "object", "properties": {"x": {"type": "number", "multipleOf": 3}}}}}, "multipleOf"),
    ({"type": "json_schema", "json_schema": {"name": "c", "schema": {"oneOf": [{"type": "string"}, {"const": "s"}]}}},
     "#/oneOf: branches 0 and 1 may both match"),
    ({"type": "json_schema", "json_schema": {"name": "c", "schema": {"type": "integer", "enum": ["a", 1.5]}}},
     "#: language is empty"),
    ({"type": "json_schema", "json_schema": {"name": "c", "schema": {"type": "number", "maximum": 0.5}}},
     "#/maximum: 0.5: a fractional bound on type number"),
    ({"type": "json_schema", "json_schema": {"name": "c", "schema": {"enum": ["a"], "format": "date"}}},
     "keyword 'format' next to enum"),
    ({"type": "json_schema", "json_schema": {"name": "c"}}, "schema"),
    ({"type": "yaml"}, "yaml"),
    ({"kind": "json_object"}, "type"),
])
def test_bad_response_formats_are_400s_naming_the_problem(srv, rf, words):
    r = _chat(srv, max_tokens=5, response_format=rf)
    assert r.status_code == 400, r.text
    e = r.json()["error"]
    assert e["param"] == "response_format" and words in e["message"], e


def test_text_format_is_unconstrained(srv):
    r = _chat(srv, max_tokens=5, temperature=0, response_format={"type": "text"})
    assert r.status_code == 200


def test_gbnf_grammar_field_on_every_route(srv):
    """llama-server's `grammar` field: the output follows the GBNF on chat, completions and /generate."""
    r = _chat(srv, max_tokens=20, temperature=1.0, seed=1, n=3, grammar='root ::= "yes" | "no"')
    assert r.status_code == 200, r.text
    assert {ch["message"]["content"] for ch in r.json()["choices"]} <= {"yes", "no"}
    assert all(ch["finish_reason"] == "stop" for ch in r.json()["choices"])
    r = requests.post(srv.url + "/v1/completions", timeout=60,
                      json={"prompt": "Number:", "max_tokens": 20, "temperature": 1.0, "seed": 2, "grammar": "root ::= [0-9]{3}"})
    assert r.status_code == 200, r.text
    text = r.json()["choices"][0]["text"]
    assert len(text) == 3 and text.isdigit(), text
    r = requests.post(srv.url + "/generate", timeout=60,
                      json={"prompt": "Pick:", "max_tokens": 20, "temperature": 1.0, "grammar": 'root ::= "a" "b"* "c"'})
    assert r.status_code == 200, r.text
    t = r.json()["text"]
    assert t.startswith("a") and (t.endswith("c") or r.json()["finish_reason"] == "length") and set(t[1:-1]) <= {"b"}, t


@pytest.mark.parametrize("grammar,words", [("root ::= missing", "missing"), ("root ::= [", "grammar"), (5, "string")])
def test_bad_grammars_are_400s(srv, grammar, words):
    r = _chat(srv, max_tokens=5, grammar=grammar)
    assert r.status_code == 400, r.text
    e = r.json()["error"]
    assert e["param"] == "grammar" and words in e["message"], e


def test_grammar_and_json_response_format_exclude_each_other(srv):
    r = _chat(srv, max_tokens=5, grammar='root ::= "x"', response_format={"type": "json_object"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "grammar"
