"""JSON Schema keywords beyond OpenAI's strict subset (prefixItems, allOf, oneOf, \\uXXXX in
patterns): the compiled grammar, walked by `gemma4c grammar` with --check, must accept exactly the
documents the jsonschema package (Draft 2020-12) finds valid — hand-picked instances and mutations
of them (an item dropped or added, a value of another type) — and refuse the rest with a message
naming the keyword and its path."""
import json

import pytest

from conftest import run_g4
import test_grammar
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
    ("additional-schema", {"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"type": "null"}},
                           "required": ["a"], "additionalProperties": {"type": "string"}},
     [{"a": 1}, {"a": 1, "b": "x"}, {"a": 1, "ab": None, "abc": "y", "": "z"}, {"a": 1, "b": 2},
      {"a": 1, "ab": "x"}, {"a": 1, "a\u00e9": "x"}, {"b": "x"}]),
    ("additional-true", {"type": "object", "properties": {"k": {"const": 0}}, "additionalProperties": True},
     [{"k": 0, "kk": [1, {"x": None}]}, {"k": 1}, {"k": 0, "k2": 5}, {}]),
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
    ({"type": "string", "anyOf": [{"maxLength": 2}, {"pattern": "x"}]}, "#: keyword 'type' next to anyOf is not supported"),
    ({"oneOf": [{"const": 1}, {"const": 2}], "minimum": 2}, "#: keyword 'minimum' next to oneOf is not supported"),
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


# ---------------------------------------------------------------- random walks of the grammar

def parse_gbnf(src):
    """The GBNF that `--print-gbnf` writes, as {rule: alternatives}; an alternative is a list of
    (atom, min, max) with atom ('lit', text) | ('cls', negated, ranges) | ('ref', name) | ('grp', alts)."""
    def esc(s, i):
        c = s[i + 1]
        n = {"x": 2, "u": 4, "U": 8}.get(c)
        if n:
            return chr(int(s[i + 2:i + 2 + n], 16)), i + 2 + n
        return {"n": "\n", "t": "\t", "r": "\r"}.get(c, c), i + 2

    def alts(s, i):
        out, seq = [], []
        while i < len(s):
            c = s[i]
            if c in " \t":
                i += 1
            elif c == "|":
                out.append(seq)
                seq, i = [], i + 1
            elif c == ")":
                break
            elif c in "*+?{":
                atom, _, _ = seq.pop()
                if c == "{":
                    j = s.index("}", i)
                    lo, _, hi = s[i + 1:j].partition(",")
                    lo, hi = int(lo), (int(hi) if hi else (int(lo) if "," not in s[i + 1:j] else None))
                    i = j + 1
                else:
                    lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                    i += 1
                seq.append((atom, lo, hi))
            elif c == "(":
                a, i = alts(s, i + 1)
                seq.append((("grp", a), 1, 1))
                i += 1
            elif c == '"':
                text, i = "", i + 1
                while s[i] != '"':
                    if s[i] == "\\":
                        ch, i = esc(s, i)
                    else:
                        ch, i = s[i], i + 1
                    text += ch
                seq.append((("lit", text), 1, 1))
                i += 1
            elif c == "[":
                i += 1
                neg = s[i] == "^"
                i += neg
                ranges = []
                while s[i] != "]":
                    lo, i = esc(s, i) if s[i] == "\\" else (s[i], i + 1)
                    hi = lo
                    if s[i] == "-" and s[i + 1] != "]":
                        hi, i = esc(s, i + 1) if s[i + 1] == "\\" else (s[i + 1], i + 2)
                    ranges.append((ord(lo), ord(hi)))
                seq.append((("cls", neg, ranges), 1, 1))
                i += 1
            else:
                j = i
                while j < len(s) and (s[j].isalnum() or s[j] in "_-"):
                    j += 1
                seq.append((("ref", s[i:j]), 1, 1))
                i = j
        out.append(seq)
        return out, i

    rules = {}
    for line in src.splitlines():
        if "::=" in line:
            name, _, body = line.partition("::=")
            rules[name.strip()] = alts(body.strip(), 0)[0]
    return rules


def generate(rules, rng, start="root", limit=10):
    """A random sentence of the grammar: repetitions and alternatives drawn at random, the
    simplest ones once the walk is `limit` rules deep so that recursive grammars end."""
    pool = "aZ09 _-.:@\u00e9\u65e5\"\\/\n\t"

    def refs(seq):
        return sum(1 + (refs(sum(a[1], [])) if a[0] == "grp" else 0) for a, _, _ in seq if a[0] in ("ref", "grp"))

    def atom(a, d):
        kind = a[0]
        if kind == "lit":
            return a[1]
        if kind == "cls":
            _, neg, ranges = a
            inside = lambda cp: any(lo <= cp <= hi for lo, hi in ranges)
            if neg:
                return rng.choice([ch for ch in pool if not inside(ord(ch))])
            lo, hi = rng.choice(ranges)
            cp = rng.randint(lo, min(hi, lo + 200))
            return chr(cp if not 0xD800 <= cp <= 0xDFFF else lo)
        return alt(rules[a[1]] if kind == "ref" else a[1], d + 1)

    def alt(alts, d):
        seq = rng.choice(alts) if d < limit else min(alts, key=refs)
        out = []
        for a, lo, hi in seq:
            top = lo if d >= limit else (hi if hi is not None and hi <= lo + 3 else lo + 3)
            out.extend(atom(a, d) for _ in range(rng.randint(lo, top)))
        return "".join(out)

    return alt(rules[start], 0)


WALK_SCHEMAS = [c[:2] for c in CASES] + [c[:2] for c in test_grammar.SCHEMA_CASES]


@pytest.mark.parametrize("name,schema", WALK_SCHEMAS, ids=[c[0] for c in WALK_SCHEMAS])
def test_random_walks_are_valid(g4_bin, tmp_path, name, schema):
    """Documents drawn from the compiled grammar (seeded) all parse as JSON and validate; a few
    are walked back through the matcher, which must accept them."""
    import random
    f = tmp_path / "s.json"
    f.write_text(json.dumps(schema))
    r = run_g4(g4_bin, "grammar", "--json-schema", f, "--print-gbnf")
    assert r.returncode == 0, r.stderr.decode()
    rules = parse_gbnf(r.stdout.decode())
    rng = random.Random(name)
    for k in range(40):
        text = generate(rules, rng)
        doc = json.loads(text)
        assert valid(schema, doc), f"{name}: the grammar wrote {text!r}, which jsonschema refuses"
        if k < 2:
            assert accepted(walk(g4_bin, tmp_path, text, schema=schema)), text
