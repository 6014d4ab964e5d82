"""JSON Schema keywords beyond OpenAI's strict subset (prefixItems, allOf, oneOf, \\uXXXX in
patterns): the compiled grammar, walked by `gemma4c grammar` with --check, must accept exactly the
documents the jsonschema package (Draft 2020-12) finds valid — hand-picked instances and mutations
of them (an item dropped or added, a value of another type) — and refuse the rest with a message
naming the keyword and its path."""
import json

import pytest

from conftest import run_g4
from test_grammar import TINY, accepted, serializations, valid, walk

PAIR = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False}
POINT = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
         "required": ["x", "y"], "additionalProperties": False}

CASES = [
    ("prefix-closed", PAIR, [[1, "a"], [1], [], [1, "a", 2], ["a"], [1, 2]]),
    ("prefix-rest", {"type": "array", "prefixItems": [{"const": "x"}], "items": {"type": "integer"},
                     "minItems": 2, "maxItems": 3},
     [["x", 1], ["x"], ["x", 1, 2], ["x", 1, 2, 3], ["y", 1], ["x", "1"]]),
    ("prefix-open", {"type": "array", "prefixItems": [{"type": "boolean"}]}, [[True, "a", None], [], ["a"], [False]]),
    ("prefix-clipped", {"type": "array", "prefixItems": [{"type": "integer"}] * 3, "maxItems": 2},
     [[1, 2], [1], [1, 2, 3], [1, "2"]]),
    ("prefix-min", {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "minItems": 1,
                    "items": False}, [[1], [1, 2], [], [1, 2, 3]]),
    ("allOf-single", {"allOf": [{"type": "integer", "minimum": 3}]}, [3, 2, "3", 100]),
    ("allOf-ref", {"$defs": {"p": POINT}, "allOf": [{"$ref": "#/$defs/p"}]},
     [{"x": 1, "y": 2}, {"x": 1}, {"x": 1, "y": "2"}]),
    ("allOf-merge", {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                               {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     [{"a": 1, "b": "x"}, {"b": "x", "a": 1}, {"a": 1}, {"b": "x"}, {"a": "1", "b": "x"}]),
    ("allOf-closed", {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                                 "additionalProperties": False},
                                {"properties": {"a": {"type": "integer"}}, "required": ["a"]}]},
     [{"a": 1}, {"a": 1, "b": "x"}, {"b": "x"}, {}]),
    ("oneOf-types", {"oneOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}, {"type": "null"}]},
     [1, "ab", "abc", None, 1.5, True]),
    ("oneOf-consts", {"oneOf": [{"const": "a"}, {"const": "b"}, {"enum": [1, 2]}]}, ["a", "b", "c", 1, 3, 2]),
    ("oneOf-objects-arrays", {"$defs": {"p": POINT},
                              "oneOf": [{"$ref": "#/$defs/p"}, {"type": "array", "items": {"type": "integer"}}]},
     [{"x": 1, "y": 2}, [1, 2], [], {"x": 1}, ["a"]]),
    ("pattern-u", {"type": "string", "pattern": "^\\u00e9+[\\u0041-\\u0043]$"}, ["\u00e9A", "\u00e9\u00e9C", "\u00e9D", "A"]),
    ("pattern-u-search", {"type": "string", "pattern": "\\u0041\\u0042"}, ["xABy", "AB", "A B", "ab"]),
]


def mutations(v):
    """Documents near v: each item / property dropped, an item added, each value swapped for
    values of other types (recursively)."""
    others = [None, 1, 1.5, "s", True, [], {}]
    if isinstance(v, list):
        for i in range(len(v)):
            yield v[:i] + v[i + 1:]
            for m in mutations(v[i]):
                yield v[:i] + [m] + v[i + 1:]
        yield v + [0]
        yield v + ["x"]
    elif isinstance(v, dict):
        for k in v:
            yield {kk: x for kk, x in v.items() if kk != k}
            for m in mutations(v[k]):
                yield {**v, k: m}
    for o in others:
        if type(o) is not type(v):
            yield o


def check(g4_bin, tmp_path, name, schema, v):
    want = valid(schema, v)
    for text in serializations(v):
        if "\\u" in text and "pattern" in json.dumps(schema):
            continue  # a patterned string's characters are never \u escapes (docs/structured-outputs.md)
        out = walk(g4_bin, tmp_path, text, schema=schema)
        assert accepted(out) == want, f"{name}: {text!r} accepted={accepted(out)} jsonschema={want}"
    return want


@pytest.mark.parametrize("name,schema,instances", CASES, ids=[c[0] for c in CASES])
def test_instances_and_mutations(g4_bin, tmp_path, name, schema, instances):
    seen, n_valid, n_invalid = set(), 0, 0
    for v in instances:
        for m in [v, *mutations(v)]:
            key = json.dumps(m, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            ok = check(g4_bin, tmp_path, name, schema, m)
            n_valid += ok
            n_invalid += not ok
    assert n_valid and n_invalid, "each case has valid and invalid documents"


def test_merged_object_writes_only_declared_keys(g4_bin, tmp_path):
    """As for any object with properties, the merged allOf writes only the declared keys: a subset
    of what jsonschema allows, never more."""
    schema = CASES[[c[0] for c in CASES].index("allOf-merge")][1]
    doc = {"a": 1, "b": "x", "c": 0}
    assert valid(schema, doc)
    assert not accepted(walk(g4_bin, tmp_path, json.dumps(doc), schema=schema))


@pytest.mark.parametrize("schema,needle", [
    ({"oneOf": [{"const": "a"}, {"enum": ["b", "a"]}]}, "#/oneOf: branches 0 and 1 may both match"),
    ({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}]}, "#/oneOf: branches 0 and 1"),
    ({"oneOf": [{"type": "integer"}, {"const": 1.0}]}, "#/oneOf: branches 0 and 1"),
    ({"oneOf": []}, "#/oneOf must be a non-empty array"),
    ({"anyOf": [{}], "oneOf": [{}]}, "anyOf together with oneOf"),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"a": {"type": "string"}}}]},
     "#/allOf/1/properties/a: allOf describes this property differently"),
    ({"type": "object", "additionalProperties": False,
      "allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}]},
     "#/allOf: required 'a' is not among the properties the branches allow"),
    ({"allOf": [{"type": "object"}, {"minProperties": 1}]}, "#/allOf/1: keyword 'minProperties'"),
    ({"allOf": []}, "#/allOf must be a non-empty array"),
    ({"type": "array", "prefixItems": [{}], "items": False, "minItems": 2}, "minItems 2 needs more items"),
    ({"type": "array", "prefixItems": {}}, "#/prefixItems must be a non-empty array"),
    ({"type": "array", "prefixItems": [{"type": "integer", "multipleOf": 2}]}, "#/prefixItems/0: unsupported keyword 'multipleOf'"),
    ({"type": "string", "pattern": "\\ud83d"}, "#/pattern: \\uD83D is a lone surrogate"),
    ({"type": "string", "pattern": "[\\u00zz]"}, "#/pattern: \\u needs four hex digits"),
])
def test_errors(g4_bin, tmp_path, schema, needle):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(schema))
    r = run_g4(g4_bin, "grammar", "-m", TINY, "--json-schema", f, input=b"{}")
    err = r.stderr.decode()
    assert r.returncode == 2 and needle in err and err.count("\n") == 1, err
