"""`gemma4c grammar`: JSON Schema, json_object and GBNF grammars walked token by token over candidate
documents. Instances are serialized with Python's json module and judged by the jsonschema package
(Draft 2020-12), never by hand-typed masks: a valid instance must be allowed token
by token and end where the grammar accepts; an invalid one must be refused, at the token holding
the first byte no valid document can have there, where that byte is known by construction. Every
walk runs with --check: each step's mask over the whole vocabulary against a direct simulation of
every token. The tiny fixture's 512-token byte-fallback vocabulary runs everywhere; the real
262,144-token Gemma vocabulary where ../shared/data has it (also for the mask-speed figure)."""
import json
import re

import jsonschema
import pytest

from conftest import FIXTURES, SHARED, run_g4

TINY = FIXTURES / "g4-causal-tiny"
GEMMA = SHARED / "gemma3-tokenizer"
needs_gemma = pytest.mark.skipif(not (GEMMA / "tokenizer.json").exists(), reason="no ../shared/data/gemma3-tokenizer")


def walk(g4_bin, tmp_path, text, *, schema=None, gbnf=None, json_object=False, model=TINY, extra=(), check=True):
    if schema is not None:
        f = tmp_path / "schema.json"
        f.write_text(json.dumps(schema))
        args = ["--json-schema", f]
    elif gbnf is not None:
        f = tmp_path / "g.gbnf"
        f.write_text(gbnf)
        args = ["--gbnf", f]
    else:
        args = ["--json-object"]
    r = run_g4(g4_bin, "grammar", "-m", model, *args, *(["--check"] if check else []), *extra, input=text.encode())
    assert r.returncode == 0, r.stderr.decode()
    out = json.loads(r.stdout)
    assert out.get("check_mismatches", 0) == 0
    return out


def accepted(out):
    return out["rejected_at"] < 0 and out["accepts_end"]


# ---------------------------------------------------------------- the reference validator

# The grammar's formats are the RFC 3339 / RFC 4122 shapes (docs/structured-outputs.md): stricter than
# jsonschema's format checker (which takes any "a@b" as an email and skips time without an extra
# package), so a format is judged by jsonschema and by these shapes together.
FORMATS = {"date": r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
           "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
           "time": r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)",
           "email": r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9-]+(\.[a-zA-Z0-9-]+)+"}
FORMATS["date-time"] = FORMATS["date"] + "T" + FORMATS["time"]


def formats_ok(s, v):
    """A top-level string format (the cases below) has the grammar's exact shape."""
    return not (isinstance(s, dict) and "format" in s and isinstance(v, str)) or re.fullmatch(FORMATS[s["format"]], v) is not None


def valid(s, v):
    """Draft 2020-12 validation by the jsonschema package, with format assertions on."""
    cls = jsonschema.Draft202012Validator
    return cls(s, format_checker=cls.FORMAT_CHECKER).is_valid(v) and formats_ok(s, v)


PERSON = {"type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
                         "nick": {"type": "string"}},
          "required": ["name", "age"], "additionalProperties": False}
TREE = {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                               "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                           "required": ["v", "kids"], "additionalProperties": False}},
        "$ref": "#/$defs/node"}

# (id, schema, instances): each instance is judged by valid(), serialized three ways
SCHEMA_CASES = [
    ("string", {"type": "string"}, ["", "hello", "tab\tquote\"back\\slash", "é ü 日本", 5, None]),
    ("integer", {"type": "integer"}, [0, -7, 123456789, 1.5, "3", True]),
    ("number", {"type": "number"}, [0, -2.5, 1e-07, 3.25e+20, "x", None]),
    ("boolean", {"type": "boolean"}, [True, False, 0, "true"]),
    ("null", {"type": "null"}, [None, 0, "null"]),
    ("int-range", {"type": "integer", "minimum": -20, "maximum": 345}, [-20, -21, -1, 0, 9, 10, 99, 100, 345, 346, 1000]),
    ("int-min-only", {"type": "integer", "minimum": 17}, [17, 16, 18, 99, 100, 123456, -5, 0]),
    ("int-max-only", {"type": "integer", "maximum": -3}, [-3, -2, -4, -100, 0, 5]),
    ("int-exclusive", {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}, [0, 1, 9, 10]),
    ("minLength", {"type": "string", "minLength": 2}, ["", "a", "ab", "abcdef"]),
    ("maxLength", {"type": "string", "maxLength": 3}, ["", "abc", "abcd", "\u00e9\u00e9\u00e9"]),
    ("lengths", {"type": "string", "minLength": 1, "maxLength": 2}, ["", "x", "xy", "xyz"]),
    ("pattern-anchored", {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"}, ["AB-123", "AB-12", "ab-123", "AB-1234", "XY-000"]),
    ("pattern-search", {"type": "string", "pattern": "cat|dog"}, ["a cat", "dogs", "bird", "concatenate"]),
    ("pattern-groups", {"type": "string", "pattern": "^(ab)+c?$"}, ["ab", "ababc", "abc", "aba", "c"]),
    ("format-date", {"type": "string", "format": "date"}, ["2024-02-29", "2024-2-29", "2024-00-10", "1999-12-31",
                                                      "2023-02-29", "1900-02-29", "2000-02-29", "2024-06-31", "2024-11-30"]),
    ("format-time", {"type": "string", "format": "time"}, ["12:30:00Z", "23:59:59.123+05:30", "24:00:00Z", "12:30Z"]),
    ("format-date-time", {"type": "string", "format": "date-time"}, ["2024-01-02T03:04:05Z", "2024-01-02 03:04:05Z"]),
    ("format-uuid", {"type": "string", "format": "uuid"}, ["123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000"]),
    ("format-email", {"type": "string", "format": "email"}, ["a.b@example.com", "no-at-sign.com", "x@y"]),
    ("enum", {"enum": ["red", "green", 3, None, {"a": [1]}]}, ["red", "green", "blue", 3, 4, None, {"a": [1]}, {"a": [2]}]),
    ("const", {"const": {"k": "v", "n": 1}}, [{"k": "v", "n": 1}, {"k": "v", "n": 2}, "k"]),
    ("anyOf", {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}, [5, "a", "ab", None]),
    ("type-list", {"type": ["string", "null"]}, ["s", None, 1]),
    ("array-items", {"type": "array", "items": {"type": "integer"}}, [[], [1, 2, 3], [1, "2"], {}]),
    ("array-min-max", {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3},
     [[], [True], [True, False, True], [True, False, True, False]]),
    ("array-any", {"type": "array"}, [[1, "a", None, {"b": [True]}], "x"]),
    ("array-empty-only", {"type": "array", "maxItems": 0}, [[], [1]]),
    ("object-person", PERSON, [{"name": "Ada", "age": 36}, {"name": "Ada", "age": 36, "nick": "A"},
                               {"name": "Ada"}, {"name": "Ada", "age": 200}, {"name": "Ada", "age": 36, "x": 1},
                               {"name": 1, "age": 3}]),
    ("object-all-optional", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                             "additionalProperties": False},
     [{}, {"a": 1}, {"b": 2}, {"a": 1, "b": 2}, {"c": 3}]),
    ("object-closed-empty", {"type": "object", "additionalProperties": False}, [{}, {"a": 1}]),
    ("object-any", {"type": "object"}, [{}, {"x": [1, {"y": None}]}, [], "o"]),
    ("object-additional-schema", {"type": "object", "additionalProperties": {"type": "integer"}},
     [{"a": 1, "b": 2}, {"a": "1"}, {}]),
    ("nested", {"type": "object", "properties": {"p": PERSON, "tags": {"type": "array", "items": {"type": "string"}}},
                "required": ["p", "tags"], "additionalProperties": False},
     [{"p": {"name": "B", "age": 1}, "tags": ["x", "y"]}, {"p": {"name": "B"}, "tags": []}, {"p": {"name": "B", "age": 1}}]),
    ("ref-recursive", TREE, [{"v": 1, "kids": []}, {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3, "kids": []}]}]},
                             {"v": 1, "kids": [{"v": 2}]}, {"v": "1", "kids": []}]),
    ("ref-definitions", {"definitions": {"id": {"type": "integer", "minimum": 1}}, "type": "array",
                         "items": {"$ref": "#/definitions/id"}}, [[1, 2], [0], []]),
    ("no-type", {}, [1, "a", None, [1], {"a": {}}]),
    ("int-negative-range", {"type": "integer", "minimum": -150, "maximum": -100}, [-150, -100, -99, -151, -125, 0]),
    ("array-of-objects", {"type": "array", "items": PERSON, "minItems": 1},
     [[{"name": "a", "age": 1}], [], [{"name": "a"}], [{"name": "a", "age": 1}, {"name": "b", "age": 2}]]),
    ("pattern-unicode", {"type": "string", "pattern": "^[\u03b1-\u03c9]+$"}, ["\u03b1\u03b2\u03b3", "abc", ""]),
    ("annotations", {"type": "string", "title": "T", "description": "D", "default": "x", "examples": ["y"]}, ["z", 1]),
]


def serializations(v):
    yield json.dumps(v)
    yield json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    yield json.dumps(v, indent=2)


@pytest.mark.parametrize("name,schema,instances", SCHEMA_CASES, ids=[c[0] for c in SCHEMA_CASES])
def test_schema_instances(g4_bin, tmp_path, name, schema, instances):
    n_valid = n_invalid = 0
    for v in instances:
        want = valid(schema, v)
        for text in serializations(v):
            if "\\u" in text and "pattern" in json.dumps(schema):
                continue  # a patterned string's characters are never \u escapes (docs/structured-outputs.md)
            out = walk(g4_bin, tmp_path, text, schema=schema)
            assert accepted(out) == want, f"{name}: {text!r} accepted={accepted(out)} valid={want}"
            if want:
                assert all(t["allowed"] for t in out["tokens"])
        n_valid += want
        n_invalid += not want
    assert n_valid and (n_invalid or schema == {}), "each case has valid and invalid instances"


def rejected_token(out):
    assert out["rejected_at"] >= 0, out
    return out["tokens"][out["rejected_at"]]


# (schema, valid document, the bad text spliced in at the marked place): the document up to the
# splice is a valid prefix, and the bad text's first byte cannot follow it
SPLICES = [
    (PERSON, {"name": "Ada", "age": 36}, "age", '"old"'),
    (PERSON, {"name": "Ada", "age": 36}, "age", "-1"),
    (PERSON, {"name": "Ada", "age": 36}, "name", "null"),
    ({"type": "array", "items": {"type": "integer"}, "maxItems": 2}, [1, 2], None, ", 3]"),
    ({"enum": ["red", "green"]}, "red", None, None),
]


@pytest.mark.parametrize("case", range(len(SPLICES)))
def test_rejected_at_the_right_token(g4_bin, tmp_path, case):
    schema, doc, key, bad = SPLICES[case]
    text = json.dumps(doc)
    if key is not None:
        # replace the key's value: the break is the value's first byte
        start = text.index(f'"{key}": ') + len(key) + 4
        end = start + len(json.dumps(doc[key]))
        text, brk = text[:start] + bad + text[end:], start
    elif bad is not None:
        brk = len(text) - 1  # before the closing bracket
        text = text[:brk] + bad
    else:
        text, brk = '"blue"', 1
    assert not valid(schema, json.loads(text))
    tok = rejected_token(walk(g4_bin, tmp_path, text, schema=schema))
    assert tok["offset"] <= brk < tok["offset"] + tok["len"], (text, brk, tok)


def test_end_only_where_accepting(g4_bin, tmp_path):
    """A valid document's strict prefixes never accept the end; the whole document does."""
    doc = json.dumps({"name": "Ada", "age": 36})
    for cut in range(len(doc)):
        out = walk(g4_bin, tmp_path, doc[:cut], schema=PERSON)
        assert out["rejected_at"] < 0 and not out["accepts_end"], doc[:cut]
    out = walk(g4_bin, tmp_path, doc, schema=PERSON)
    assert out["accepts_end"] and out["n_allowed_end"] >= 1


def test_whitespace_is_bounded(g4_bin, tmp_path):
    ok = '{"a":\n' + " " * 20 + "1}"
    assert accepted(walk(g4_bin, tmp_path, ok, json_object=True))
    assert not accepted(walk(g4_bin, tmp_path, '{"a":\n' + " " * 21 + "1}", json_object=True))
    assert not accepted(walk(g4_bin, tmp_path, '{"a":  1}', json_object=True))


@pytest.mark.parametrize("doc,ok", [('{}', True), ('{"a": [1, {"b": null}], "c": "d"}', True), ('[]', False),
                                    ('{"a": 1,}', False), ('"x"', False), ('{"a" 1}', False)])
def test_json_object(g4_bin, tmp_path, doc, ok):
    assert accepted(walk(g4_bin, tmp_path, doc, json_object=True)) == ok


# llama.cpp's grammars/json.gbnf
JSON_GBNF = r'''
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
'''


@pytest.mark.parametrize("doc,ok", [('{"a": 1, "b": [true, null, "x\\n"]}', True), ('{"a":{"b":{}}}', True),
                                    ('{"a": 1.5e3}', True), ('[1]', False), ('{"a": tru}', False),
                                    ('{"a": "\x01"}', False)])
def test_gbnf_llama_json(g4_bin, tmp_path, doc, ok):
    assert accepted(walk(g4_bin, tmp_path, doc, gbnf=JSON_GBNF)) == ok


GBNF_CASES = [
    ('root ::= "yes" | "no"', ["yes", "no"], ["maybe", "ye", "yesno"]),
    ('root ::= [a-c]+ "!"?', ["a", "abcabc!", "c!"], ["", "d", "a!!"]),
    ('root ::= ("ab" | "c"){2,3}', ["abc", "cab", "ababab", "ccc"], ["ab", "cccc", "abcabc"]),
    ('root ::= [^x-z]* "z"', ["z", "abz", "\u00e9\u00e9z"], ["xz", "a"]),
    ('root ::= "a"{3}', ["aaa"], ["aa", "aaaa"]),
    ('root ::= "[" item ("," item)* "]"\nitem ::= [0-9]+ | root  # nested lists', ["[1]", "[1,[2,[3]],4]"], ["[]", "[1,]", "[[1]"]),
    ('root ::= "\\u00e9\\x41\\n\\t\\\\" [\\]\\-]', ["\u00e9A\n\t\\]", "\u00e9A\n\t\\-"], ["\u00e9A\n\t\\x"]),
    ('root ::= . .?', ["a", "\u65e5\u672c"], ["", "abc"]),
]


@pytest.mark.parametrize("case", range(len(GBNF_CASES)))
def test_gbnf_cases(g4_bin, tmp_path, case):
    src, good, bad = GBNF_CASES[case]
    for doc in good:
        assert accepted(walk(g4_bin, tmp_path, doc, gbnf=src)), (src, doc)
    for doc in bad:
        assert not accepted(walk(g4_bin, tmp_path, doc, gbnf=src)), (src, doc)


@pytest.mark.parametrize("schema,needle", [
    ({"type": "string", "contentMediaType": "text/html"}, "unsupported keyword 'contentMediaType'"),
    ({"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}, "#/properties/a: unsupported keyword 'multipleOf'"),
    ({"type": "array", "prefixItems": []}, "#/prefixItems must be a non-empty array"),
    ({"type": "object", "patternProperties": {}}, "unsupported keyword 'patternProperties'"),
    ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, "#/allOf/0: keyword 'type' in allOf of several schemas"),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, "#/oneOf: branches 0 and 1 may both match"),
    ({"type": "string", "pattern": "\\u12"}, "#/pattern: \\u needs four hex digits"),
    ({"type": "number", "maximum": 3.5}, "#/maximum: 3.5: a fractional bound on type number"),
    ({"type": "string", "format": "ipv4"}, "unsupported format 'ipv4'"),
    ({"type": "string", "pattern": "a\\1"}, "escape \\1 is not supported"),
    ({"type": "object", "properties": {"\u00e9": {}}, "additionalProperties": True},
     "#/additionalProperties: a schema next to a property name with characters JSON escapes or non-ASCII"),
])
def test_schema_errors(g4_bin, tmp_path, schema, needle):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(schema))
    r = run_g4(g4_bin, "grammar", "-m", TINY, "--json-schema", f, input=b"{}")
    assert r.returncode == 2
    err = r.stderr.decode()
    assert needle in err and err.count("\n") == 1, err


@pytest.mark.parametrize("src,needle", [("root ::= x", "'x' is used but never defined"),
                                        ("root ::= root \"a\" | \"b\"", "left-recursive"),
                                        ("root ::= \"a", "unterminated string literal at line 1")])
def test_gbnf_errors(g4_bin, tmp_path, src, needle):
    f = tmp_path / "g.gbnf"
    f.write_text(src)
    r = run_g4(g4_bin, "grammar", "-m", TINY, "--gbnf", f, input=b"")
    assert r.returncode == 2 and needle in r.stderr.decode(), r.stderr.decode()


def test_usage_errors(g4_bin, tmp_path):
    r = run_g4(g4_bin, "grammar", "-m", TINY, input=b"")
    assert r.returncode == 2 and "exactly one of" in r.stderr.decode()
    r = run_g4(g4_bin, "grammar", "-m", TINY, "--gbnf", tmp_path / "missing.gbnf", input=b"")
    assert r.returncode == 2 and "missing.gbnf" in r.stderr.decode()
    assert run_g4(g4_bin, "grammar", "--help").returncode == 0


def test_print_gbnf(g4_bin, tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(PERSON))
    r = run_g4(g4_bin, "grammar", "--json-schema", f, "--print-gbnf")
    assert r.returncode == 0 and b"root ::=" in r.stdout


@needs_gemma
@pytest.mark.slow
@pytest.mark.parametrize("name", ["object-person", "nested", "string", "ref-recursive", "format-email", "maxLength"])
def test_gemma_vocab(g4_bin, tmp_path, name):
    """The real vocabulary (byte-fallback pieces, '▁' spaces, special tokens), masks checked whole."""
    _, schema, instances = next(c for c in SCHEMA_CASES if c[0] == name)
    for v in instances[:3]:
        text = json.dumps(v, indent=2, ensure_ascii=False)
        out = walk(g4_bin, tmp_path, text, schema=schema, model=GEMMA)
        assert accepted(out) == valid(schema, v), text


@needs_gemma
def test_gemma_mask_speed(g4_bin, tmp_path):
    """The mask costs a decode step little: the median step well under a millisecond, every step
    bounded (loose bounds: the figure to quote comes from the command in docs/structured-outputs.md)."""
    schema = {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "bio": {"type": "string"}}, "required": ["name", "age", "tags", "bio"],
        "additionalProperties": False}
    doc = {"name": "Ada Lovelace", "age": 36, "tags": ["math", "poetry"],
           "bio": "English mathematician and writer, chiefly known for her work on the Analytical Engine. " * 3}
    out = walk(g4_bin, tmp_path, json.dumps(doc, indent=2), schema=schema, model=GEMMA, extra=["--bench"], check=False)
    assert accepted(out)
    assert out["mask_us_median"] < 5000 and out["mask_us_max"] < 200000, out
