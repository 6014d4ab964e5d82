"""Structured outputs under sampling, on the random-weight fixture (issue 26, "What it must show"
item 2): nothing but the grammar's mask makes the output valid, so every output that ends on its
own (finish_reason "stop") must be a valid document.

- 200 seeded requests (temperature 1, seeds 0..199, one choice each) spread over the bounded
  schemas below, written here: each finished output parses and validates with the `jsonschema`
  package (Draft 2020-12, with its format checker; `time` / `date-time`, which jsonschema only
  checks with an optional package, are checked by RFC 3339 regexes and a calendar-exact date check here).
  A healthy share of them must finish ("stop"), so the test can fail.
- tool_choice "required" over tools of our own: every call's arguments validate (jsonschema)
  against that tool's `parameters`.
- GBNF grammars in the request's `grammar` field: every finished output is in the grammar's
  language, judged by a regex (or, for the one non-regular grammar, a recursive-descent
  recognizer) translated by hand from the grammar here, not by the engine.

G4_SEEDED_LONG=N runs N times as many seeds for each part (default 1: the CI size, 200 schema
requests)."""
import calendar
import json
import os
import re
import uuid

import jsonschema
import pytest
import requests

from test_server import NAME, Server

SCALE = int(os.environ.get("G4_SEEDED_LONG", "1"))
N_REQUESTS = 200 * SCALE
MAX_TOKENS = 256
USER = [{"role": "user", "content": "Answer in JSON."}]

# ------------------------------------------------------------------------------------------------
# 24 bounded schemas: every string has a bound (maxLength, pattern, format, enum), every array
# maxItems, so a random walk can finish well inside MAX_TOKENS. (Not here, as unbounded: `format:
# email`, whose local part has no length bound and cannot take maxLength, and additionalProperties
# with a schema, whose key names are unbounded strings: on the random model most such outputs run
# into max_tokens.)
S = {}
S["flat"] = {"type": "object", "properties": {
    "ok": {"type": "boolean"}, "color": {"enum": ["red", "green", "blue"]},
    "n": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["ok", "color", "n"], "additionalProperties": False}
S["nested"] = {"type": "object", "properties": {
    "user": {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "role": {"enum": ["admin", "guest", "dev"]},
        "prefs": {"type": "object", "properties": {"dark": {"type": "boolean"},
                                                   "lang": {"enum": ["en", "fr", "de"]}},
                  "required": ["dark", "lang"], "additionalProperties": False}},
        "required": ["name", "role", "prefs"], "additionalProperties": False},
    "active": {"type": "boolean"}},
    "required": ["user", "active"], "additionalProperties": False}
S["int_ranges"] = {"type": "object", "properties": {
    "neg": {"type": "integer", "minimum": -1000, "exclusiveMaximum": -3},
    "wide": {"type": "integer", "minimum": -99999, "maximum": 123456},
    "tight": {"type": "integer", "exclusiveMinimum": 41, "exclusiveMaximum": 43},
    "big": {"type": "integer", "minimum": 1000000000000, "maximum": 1000000000100}},
    "required": ["neg", "wide", "tight", "big"], "additionalProperties": False}
S["number_bounds"] = {"type": "object", "properties": {
    "p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "t": {"type": "number", "minimum": -40, "maximum": 60},
    "x": {"type": "number", "minimum": 10, "exclusiveMaximum": 11}},
    "required": ["p", "t", "x"], "additionalProperties": False}
S["strings"] = {"type": "object", "properties": {
    "a": {"type": "string", "minLength": 3, "maxLength": 3},
    "b": {"type": "string", "maxLength": 5},
    "c": {"type": "string", "minLength": 2, "maxLength": 10}},
    "required": ["a", "b", "c"], "additionalProperties": False}
S["pattern"] = {"type": "object", "properties": {
    "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
    "hex": {"type": "string", "pattern": "^#[0-9a-f]{6}$"},
    "ver": {"type": "string", "pattern": "^v(0|[1-9][0-9]?)\\.[0-9]{1,2}(-(rc|beta)[0-9])?$"}},
    "required": ["code", "hex", "ver"], "additionalProperties": False}
S["format_date_uuid"] = {"type": "object", "properties": {
    "day": {"type": "string", "format": "date"}, "id": {"type": "string", "format": "uuid"}},
    "required": ["day", "id"], "additionalProperties": False}
S["format_times"] = {"type": "object", "properties": {
    "at": {"type": "string", "format": "time"}, "when": {"type": "string", "format": "date-time"}},
    "required": ["at", "when"], "additionalProperties": False}
S["int_array"] = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99},
                  "minItems": 2, "maxItems": 5}
S["object_array"] = {"type": "object", "properties": {
    "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
        "type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}[0-9]{2}$"},
                                         "qty": {"type": "integer", "minimum": 1, "maximum": 20}},
        "required": ["sku", "qty"], "additionalProperties": False}}},
    "required": ["items"], "additionalProperties": False}
S["anyof"] = {"type": "object", "properties": {
    "v": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "integer", "minimum": 0, "maximum": 5},
                    {"type": "null"}]},
    "w": {"anyOf": [{"enum": ["a", "b"]}, {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}]}},
    "required": ["v", "w"], "additionalProperties": False}
S["ref_defs"] = {"$defs": {
    "point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
                                               "y": {"type": "integer", "minimum": -9, "maximum": 9}},
              "required": ["x", "y"], "additionalProperties": False}},
    "type": "object", "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"}},
    "required": ["from", "to"], "additionalProperties": False}
S["recursive_ref"] = {"$defs": {
    "node": {"type": "object", "properties": {
        "v": {"type": "integer", "minimum": 0, "maximum": 9},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["v"], "additionalProperties": False}},
    "$ref": "#/$defs/node"}
S["const"] = {"type": "object", "properties": {
    "kind": {"const": "event"}, "version": {"const": 2}, "meta": {"const": {"a": [1, None, True]}},
    "flag": {"type": "boolean"}},
    "required": ["kind", "version", "meta", "flag"], "additionalProperties": False}
S["optional_subset"] = {"type": "object", "properties": {
    "a": {"type": "integer", "minimum": 0, "maximum": 3}, "b": {"type": "boolean"},
    "c": {"enum": ["x", "y"]}, "d": {"type": "null"}, "e": {"type": "string", "maxLength": 3}},
    "required": ["b", "d"], "additionalProperties": False}
S["prefix_items"] = {"type": "array", "prefixItems": [
    {"type": "integer", "minimum": 1, "maximum": 12}, {"enum": ["am", "pm"]},
    {"type": "string", "pattern": "^[a-z]{1,3}$"}], "items": False, "minItems": 2}
S["prefix_then_items"] = {"type": "array", "prefixItems": [{"const": "head"}],
                          "items": {"type": "integer", "minimum": -5, "maximum": 5}, "minItems": 1, "maxItems": 4}
S["oneof"] = {"type": "object", "properties": {
    "shape": {"oneOf": [
        {"type": "object",
         "properties": {"kind": {"const": "circle"}, "r": {"type": "integer", "minimum": 1, "maximum": 9}},
         "required": ["kind", "r"], "additionalProperties": False},
        {"type": "string", "enum": ["square", "triangle"]},
        {"type": "null"}]}},
    "required": ["shape"], "additionalProperties": False}
S["enum_mixed"] = {"type": "object", "properties": {
    "e": {"enum": [1, 2.5, "two", None, True, [1, "a"], {"k": "v"}]},
    "f": {"type": "string", "enum": ["a", 1, "b"]}},
    "required": ["e", "f"], "additionalProperties": False}
S["type_list"] = {"type": "object", "properties": {
    "note": {"type": ["string", "null"], "maxLength": 6},
    "count": {"type": ["integer", "boolean"], "minimum": 0, "maximum": 100}},
    "required": ["note", "count"], "additionalProperties": False}
# characters JSON escapes, inside a patterned string (written as \" \\ \n)
S["escaped_pattern"] = {"type": "object", "properties": {
    "s": {"type": "string", "pattern": "^[\"\\\\\na-c]{1,4}$"}, "t": {"enum": ["q\"", "b\\", "n\n", "u\u00e9"]}},
    "required": ["s", "t"], "additionalProperties": False}
S["allof_merge"] = {"allOf": [
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 5}}, "required": ["a"]},
    {"type": "object", "properties": {"b": {"enum": ["p", "q"]}, "c": {"type": "boolean"}}, "required": ["b"]}]}
S["matrix"] = {"type": "array", "minItems": 1, "maxItems": 3, "items": {
    "type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "number", "minimum": -1, "maximum": 1}}}
S["scalar_root"] = {"anyOf": [{"type": "integer", "minimum": 100, "maximum": 199}, {"type": "boolean"},
                              {"type": "string", "format": "date"}]}
NAMES = sorted(S)
assert len(NAMES) >= 20

TIME_RE = re.compile(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([zZ]|[+-]([01]\d|2[0-3]):[0-5]\d)")
DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _time_ok(s):
    return TIME_RE.fullmatch(s) is not None


def _date_time_ok(s):
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})[Tt](.*)", s)
    if not m or not _time_ok(m.group(2)):
        return False
    return _date_ok(m.group(1))


def _date_ok(s):
    """RFC 3339 full-date, calendar-exact; years 0000..9999 (Python's datetime starts at year 1)."""
    if not DATE_RE.fullmatch(s):
        return False
    y, m, d = int(s[:4]), int(s[5:7]), int(s[8:])
    return 1 <= m <= 12 and 1 <= d <= calendar.monthrange(2000 if calendar.isleap(y) else 2001, m)[1]


def _uuid_ok(s):
    try:
        return re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", s) is not None and bool(uuid.UUID(s))
    except ValueError:
        return False


FORMATS = jsonschema.FormatChecker()
for _name, _fn in (("time", _time_ok), ("date-time", _date_time_ok), ("date", _date_ok), ("uuid", _uuid_ok)):
    FORMATS.checks(_name)(lambda v, fn=_fn: not isinstance(v, str) or fn(v))   # formats judge strings only


def schema_errors(doc, schema):
    """Draft 2020-12 validation (formats asserted): the list of error messages, empty if valid."""
    v = jsonschema.Draft202012Validator(schema, format_checker=FORMATS)
    return [e.message for e in v.iter_errors(doc)]


def test_the_checker_can_fail():
    """The validation used below rejects documents that break each kind of keyword."""
    bad = [("flat", {"ok": True, "color": "pink", "n": 1}),
           ("int_ranges", {"neg": -3, "wide": 0, "tight": 42, "big": 1000000000000}),
           ("number_bounds", {"p": 0, "t": 0, "x": 10}), ("strings", {"a": "ab", "b": "", "c": "xx"}),
           ("pattern", {"code": "AB-12", "hex": "#000000", "ver": "v1.0"}),
           ("format_date_uuid", {"day": "2023-02-29", "id": "123e4567-e89b-12d3-a456-426614174000"}),
           ("format_date_uuid", {"day": "2024-02-29", "id": "123e4567-e89b-12d3-a456-42661417400"}),
           ("format_date_uuid", {"day": "1900-02-29", "id": "123e4567-e89b-12d3-a456-426614174000"}),
           ("format_date_uuid", {"day": "2024-04-31", "id": "123e4567-e89b-12d3-a456-426614174000"}),
           ("format_times", {"at": "24:00:00Z", "when": "2024-01-01T00:00:00Z"}),
           ("format_times", {"at": "10:00:00Z", "when": "2024-01-01 00:00:00Z"}),
           ("int_array", [1]), ("prefix_items", [1, "am", "x", 4]),
           ("const", {"kind": "event", "version": 2, "meta": {"a": [1, None]}, "flag": True}),
           ("oneof", {"shape": "circle"}), ("optional_subset", {"b": True}),
           ("escaped_pattern", {"s": "d", "t": "n\n"}),
           ("allof_merge", {"a": 1, "b": "r"}), ("recursive_ref", {"v": 1, "kids": [{"v": 10}]}),
           ("scalar_root", 200), ("enum_mixed", {"e": [1], "f": "a"})]
    for name, doc in bad:
        assert schema_errors(doc, S[name]), (name, doc)
    good = [("flat", {"ok": True, "color": "red", "n": 1}),
            ("format_date_uuid", {"day": "2024-02-29", "id": "123e4567-e89b-12d3-a456-426614174000"}),
            ("format_times", {"at": "23:59:60.5+01:00", "when": "0000-02-29t00:00:00z"}), ("scalar_root", "1999-12-31"),
            ("allof_merge", {"a": 1, "b": "p"}), ("recursive_ref", {"v": 1, "kids": [{"v": 2, "kids": []}]})]
    for name, doc in good:
        assert not schema_errors(doc, S[name]), (name, doc)


@pytest.fixture(scope="module")
def srv(g4_bin):
    s = Server(g4_bin, "--parallel", "4")
    yield s
    assert s.stop() == 0, "".join(s.log)


def post(srv, body):
    r = requests.post(srv.url + "/v1/chat/completions", timeout=300,
                      json={"model": NAME, "messages": USER, "temperature": 1.0, **body})
    assert r.status_code == 200, (body, r.text)
    return r.json()


# Request k (seed k) takes schema NAMES[k % len(NAMES)]: 200 requests, 8 or 9 per schema.
@pytest.mark.parametrize("name", NAMES)
def test_seeded_schema_outputs_validate(srv, name):
    seeds = [k for k in range(N_REQUESTS) if NAMES[k % len(NAMES)] == name]
    rf = {"type": "json_schema", "json_schema": {"name": name, "schema": S[name], "strict": True}}
    stopped, bad, texts = 0, [], set()
    for seed in seeds:
        ch = post(srv, {"seed": seed, "max_tokens": MAX_TOKENS, "response_format": rf})["choices"][0]
        text = ch["message"]["content"]
        texts.add(text)
        assert ch["finish_reason"] in ("stop", "length"), ch
        if ch["finish_reason"] != "stop":
            continue
        stopped += 1
        try:
            doc = json.loads(text)
        except ValueError as e:
            bad.append((seed, text, f"not JSON: {e}"))
            continue
        errs = schema_errors(doc, S[name])
        if errs:
            bad.append((seed, text, errs))
    assert not bad, f"schema {name}: {json.dumps(S[name])}\ninvalid outputs (seed, text, errors): {bad}"
    # the random walk must mostly finish inside MAX_TOKENS, or the check above proves little
    print(f"{name}: {stopped}/{len(seeds)} finished")
    assert stopped >= len(seeds) * 3 // 4, f"{name}: only {stopped}/{len(seeds)} finished"
    # and the seeds must matter: sampled walks, not one document repeated
    assert len(texts) >= 3, f"{name}: the seeds gave only {len(texts)} distinct outputs: {texts}"


# ------------------------------------------------------------------------------------------------
# tool_choice "required"
TOOLS = [
    {"type": "function", "function": {"name": "book_room", "parameters": {
        "type": "object", "properties": {
            "room": {"type": "string", "pattern": "^[A-D][0-9]{3}$"},
            "day": {"type": "string", "format": "date"},
            "hours": {"type": "integer", "minimum": 1, "maximum": 8},
            "guests": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 6}, "maxItems": 3},
            "kind": {"enum": ["meeting", "call", "focus"]}},
        "required": ["room", "day", "hours"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "set_thermostat", "parameters": {
        "type": "object", "properties": {
            "target": {"type": "number", "minimum": 10, "maximum": 30},
            "mode": {"anyOf": [{"const": "auto"}, {"type": "object", "properties": {
                "fan": {"type": "integer", "minimum": 0, "maximum": 3}, "eco": {"type": "boolean"}},
                "required": ["fan"], "additionalProperties": False}]},
            "zones": {"type": "array", "prefixItems": [{"enum": ["up", "down"]}], "items": {"type": "null"},
                      "maxItems": 2}},
        "required": ["target", "mode"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "log_event", "parameters": {
        "$defs": {"tag": {"type": "string", "maxLength": 4}},
        "type": "object", "properties": {
            "level": {"enum": ["info", "warn", "error"]},
            "code": {"type": "integer", "minimum": -50, "maximum": 50},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "minItems": 1, "maxItems": 2},
            "note": {"type": ["string", "null"], "maxLength": 5}},
        "required": ["level", "code", "tags", "note"], "additionalProperties": False}}},
]
TOOL_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def test_required_tool_calls_validate(srv):
    seen, calls_checked = set(), 0
    for seed in range(0, 48 * SCALE, 4):
        r = post(srv, {"seed": seed, "n": 4, "max_tokens": 400, "tools": TOOLS, "tool_choice": "required",
                       "parallel_tool_calls": False})
        for ch in r["choices"]:
            assert ch["finish_reason"] == "tool_calls", ch
            tcs = ch["message"]["tool_calls"]
            assert ch["message"]["content"] is None and len(tcs) == 1, ch
            name, args = tcs[0]["function"]["name"], json.loads(tcs[0]["function"]["arguments"])
            assert name in TOOL_SCHEMAS, name
            errs = schema_errors(args, TOOL_SCHEMAS[name])
            assert not errs, (seed, name, args, errs)
            seen.add(name)
            calls_checked += 1
    assert calls_checked == 48 * SCALE and seen == set(TOOL_SCHEMAS), seen


def test_required_parallel_tool_calls_validate(srv):
    """Several calls per message: each one validates; a message ends on the calls or the limit."""
    finished = 0
    for seed in range(100, 100 + 16 * SCALE, 4):
        r = post(srv, {"seed": seed, "n": 4, "max_tokens": 600, "tools": TOOLS, "tool_choice": "required"})
        for ch in r["choices"]:
            assert ch["finish_reason"] in ("tool_calls", "length"), ch
            finished += ch["finish_reason"] == "tool_calls"
            for tc in ch["message"].get("tool_calls") or []:
                name, args = tc["function"]["name"], json.loads(tc["function"]["arguments"])
                assert not schema_errors(args, TOOL_SCHEMAS[name]), (seed, name, args)
    print(f"parallel: {finished}/{16 * SCALE} finished")
    assert finished >= 8 * SCALE


# ------------------------------------------------------------------------------------------------
# GBNF: each grammar beside a recognizer written by hand from it (Python regexes, fullmatch).
GRAMMARS = {
    "yes_no_number": (r'root ::= ("yes" | "no") " " [0-9]{1,3}',
                      r"(?:yes|no) [0-9]{1,3}"),
    "int_list": ('root ::= "[" item ("," " "? item){0,4} "]"\nitem ::= "-"? [1-9] [0-9]? | "0"',
                 r"\[(?:-?[1-9][0-9]?|0)(?:, ?(?:-?[1-9][0-9]?|0)){0,4}\]"),
    "email_like": ('root ::= user "@" host "." tld\nuser ::= [a-z] [a-z0-9._]{0,7}\n'
                   'host ::= [a-z]{2,6}\ntld ::= "com" | "org" | "io"  # a comment',
                   r"[a-z][a-z0-9._]{0,7}@[a-z]{2,6}\.(?:com|org|io)"),
    "key_values": ('root ::= pair (";" pair){0,3}\npair ::= key "=" value\nkey ::= [A-Z] [a-z]{0,4}\n'
                   'value ::= [0-9]{1,4} | "\\"" [^"\\n]{0,6} "\\"" | ("true" | "false")',
                   r'[A-Z][a-z]{0,4}=(?:[0-9]{1,4}|"[^"\n]{0,6}"|true|false)'
                   r'(?:;[A-Z][a-z]{0,4}=(?:[0-9]{1,4}|"[^"\n]{0,6}"|true|false)){0,3}'),
    "unicode": ('root ::= [α-ω]{2,4} " " ("é" | "ü" | "\\u00f1")? [^\\n!]{0,5} "!"',
                r"[α-ω]{2,4} (?:é|ü|ñ)?[^\n!]{0,5}!"),
    "lines": ('root ::= line ("\\n" line){0,2}\nline ::= ("- " | "* ") [a-z ]{1,8}',
              r"(?:- |\* )[a-z ]{1,8}(?:\n(?:- |\* )[a-z ]{1,8}){0,2}"),
    "hex_color": ('root ::= "#" h h h (h h h)?\nh ::= [0-9a-fA-F]', r"#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?"),
}

# One context-free grammar (nested brackets to any depth), judged by a recursive-descent parser.
EXPR_GBNF = 'root ::= expr\nexpr ::= term (("+" | "*") term){0,2}\nterm ::= [0-9] | "(" expr ")"'


def expr_ok(s):
    pos = 0

    def term():
        nonlocal pos
        if pos < len(s) and s[pos].isdigit() and s[pos] in "0123456789":
            pos += 1
            return True
        if pos < len(s) and s[pos] == "(":
            pos += 1
            if not expr() or pos >= len(s) or s[pos] != ")":
                return False
            pos += 1
            return True
        return False

    def expr():
        nonlocal pos
        if not term():
            return False
        for _ in range(2):
            if pos < len(s) and s[pos] in "+*":
                pos += 1
                if not term():
                    return False
            else:
                break
        return True

    return expr() and pos == len(s)


def test_grammar_recognizers_can_fail():
    for name, bad in [("yes_no_number", "yes 1234"), ("int_list", "[01]"), ("email_like", "a@b.com"),
                      ("key_values", "a=1"), ("unicode", "α !"), ("lines", "- ab\n"), ("hex_color", "#abcd")]:
        assert not re.fullmatch(GRAMMARS[name][1], bad), (name, bad)
    assert expr_ok("((1+2)*3)+4") and not expr_ok("1+2+3+4") and not expr_ok("(1") and not expr_ok("٣")


@pytest.mark.parametrize("name", sorted(GRAMMARS) + ["expr"])
def test_seeded_gbnf_outputs_are_in_the_language(srv, name):
    gbnf, check = (EXPR_GBNF, expr_ok) if name == "expr" else \
        (GRAMMARS[name][0], lambda t, rx=GRAMMARS[name][1]: re.fullmatch(rx, t) is not None)
    stopped, bad, n_req = 0, [], 6 * SCALE
    for seed in range(n_req):
        r = post(srv, {"seed": 1000 + seed, "n": 2, "max_tokens": 128, "grammar": gbnf})
        for ch in r["choices"]:
            assert ch["finish_reason"] in ("stop", "length"), ch
            if ch["finish_reason"] == "stop":
                stopped += 1
                if not check(ch["message"]["content"]):
                    bad.append((1000 + seed, ch["message"]["content"]))
    print(f"{name}: {stopped}/{2 * n_req} finished")
    assert not bad, f"grammar {name}: {gbnf!r}\noutputs outside the language (seed, text): {bad}"
    assert stopped >= n_req, f"{name}: only {stopped}/{2 * n_req} finished"
