"""Numeric bounds (minimum / maximum / exclusiveMinimum / exclusiveMaximum on integer and number)
and enum / const together with the keywords beside them (type, bounds, lengths), judged by the
jsonschema package (Draft 2020-12). The grammar `--print-gbnf` writes for a bounded value is
regular; it is turned into a Python regular expression so that thousands of candidate texts —
every value near each bound, big magnitudes, random ones — are checked against jsonschema, and
the boundary values are also walked through the real matcher (`gemma4c grammar --check`)."""
import json
import random
import re

import pytest

from conftest import run_g4
from test_grammar import TINY, accepted, valid, walk
from test_schema_features import generate, parse_gbnf


def gbnf_of(g4_bin, tmp_path, schema):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(schema))
    r = run_g4(g4_bin, "grammar", "--json-schema", f, "--print-gbnf")
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def to_regex(rules, name="root", depth=0):
    """A Python regex for a non-recursive rule of parse_gbnf's form."""
    assert depth < 50, "recursive rule"

    def atom(a):
        if a[0] == "lit":
            return re.escape(a[1])
        if a[0] == "cls":
            body = "".join(re.escape(chr(lo)) + ("-" + re.escape(chr(hi)) if hi != lo else "") for lo, hi in a[2])
            return "[" + ("^" if a[1] else "") + body + "]"
        if a[0] == "ref":
            return "(?:" + to_regex(rules, a[1], depth + 1) + ")"
        return "(?:" + alts(a[1]) + ")"

    def alts(xs):
        out = []
        for seq in xs:
            s = ""
            for a, lo, hi in seq:
                s += "(?:" + atom(a) + ")" + ("{%d,%s}" % (lo, "" if hi is None else hi) if (lo, hi) != (1, 1) else "")
            out.append(s)
        return "|".join(out)

    return alts(rules[name])


def matcher_of(g4_bin, tmp_path, schema):
    return re.compile(to_regex(parse_gbnf(gbnf_of(g4_bin, tmp_path, schema))))


INT_CASES = [
    ("closed", {"type": "integer", "minimum": -20, "maximum": 345}),
    ("negative", {"type": "integer", "minimum": -1000, "maximum": -7}),
    ("min-only", {"type": "integer", "minimum": 17}),
    ("max-only", {"type": "integer", "maximum": -3}),
    ("exclusive", {"type": "integer", "exclusiveMinimum": -1, "exclusiveMaximum": 100}),
    ("fractional-bounds", {"type": "integer", "minimum": -2.5, "maximum": 7.5}),
    ("exclusive-fractional", {"type": "integer", "exclusiveMinimum": 0.5, "exclusiveMaximum": 3.0}),
    ("tighter-of-two", {"type": "integer", "minimum": 3, "exclusiveMinimum": 3, "maximum": 9, "exclusiveMaximum": 12}),
    ("single", {"type": "integer", "minimum": 42, "maximum": 42}),
    ("zero-crossing", {"type": "integer", "minimum": -1, "maximum": 1}),
    ("big", {"type": "integer", "minimum": -999999999999999, "maximum": 999999999999999}),
    ("big-lower", {"type": "integer", "minimum": 123456789012345}),
    ("big-upper", {"type": "integer", "exclusiveMaximum": -98765432109876}),
    ("uneven-digits", {"type": "integer", "minimum": 98, "maximum": 10203}),
    ("implied-type", {"minimum": 5, "maximum": 9}),
]

NUM_CASES = [
    ("closed", {"type": "number", "minimum": -3, "maximum": 10}),
    ("exclusive", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
    ("min-only", {"type": "number", "minimum": -5}),
    ("exclusive-min-only", {"type": "number", "exclusiveMinimum": 0}),
    ("max-only", {"type": "number", "maximum": -2}),
    ("negative", {"type": "number", "exclusiveMinimum": -30, "maximum": -29}),
    ("single", {"type": "number", "minimum": 7, "maximum": 7}),
    ("big", {"type": "number", "minimum": -99999999999, "exclusiveMaximum": 99999999999}),
    ("with-null", {"type": ["number", "null"], "minimum": 1, "maximum": 2}),
]


def bound_values(schema):
    """Every bound b of the schema gives b-2 .. b+2; plus zero, big magnitudes and the extremes."""
    out = {0, 1, -1, 10 ** 15 - 1, -(10 ** 15 - 1), 10 ** 15, 10 ** 16 - 1, 10 ** 17, -(10 ** 17)}
    for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if k in schema:
            b = int(schema[k] // 1)
            out |= {b + d for d in range(-2, 4)}
            out |= {b * 10, b // 10, -b}
    return sorted(out)


def int_texts(schema, rng):
    vals = bound_values(schema)
    vals += [rng.randint(-10 ** e, 10 ** e) for e in range(1, 17) for _ in range(8)]
    return [str(v) for v in vals]


def num_texts(schema, rng):
    out = []
    for v in bound_values(schema):
        out.append(str(v))
        for f in ("0", "00", "5", "05", "999", "000001", "1"):
            s = "-" if v < 0 else ""
            out += [f"{v}.{f}", f"{s}{abs(v) - 1}.{f}" if abs(v) else f"-0.{f}"]
    out += ["-0", "-0.0", "0.0", "1e1", "1E+2", "-2e0", "0.5e1"]
    out += [f"{rng.uniform(-50, 50):.{rng.randint(1, 6)}f}" for _ in range(200)]
    return out


def canonical(text, schema):
    """Texts the grammar is meant to write for a bounded value: integers without leading zeros or
    '-0'; numbers also with a fraction of at most as many digits as keep 15 significant digits
    near the bounds (docs/structured-outputs.md), and no exponent."""
    m = re.fullmatch(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?", text)
    if not m or (m[1] and m[2] == "0" and not (m[3] or "").strip("0")) or len(m[2]) > 16:
        return False
    bounds = [abs(int(schema[k])) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in schema]
    k = 15 - max(len(str(b)) for b in bounds)
    return m[3] is None or (schema.get("type") != "integer" and len(m[3]) <= k)


def check_exact(schema, rx, texts):
    n_yes = n_no = 0
    for t in texts:
        want = valid(schema, json.loads(t))
        got = rx.fullmatch(t) is not None
        if got:
            assert want, f"the grammar accepts {t}, which jsonschema refuses"
        elif canonical(t, schema):
            assert not want, f"the grammar refuses {t}, which jsonschema accepts"
        n_yes += got
        n_no += not got
    assert n_yes and n_no


@pytest.mark.parametrize("name,schema", INT_CASES, ids=[c[0] for c in INT_CASES])
def test_integer_bounds_exact(g4_bin, tmp_path, name, schema):
    check_exact(schema, matcher_of(g4_bin, tmp_path, schema), int_texts(schema, random.Random(name)))


@pytest.mark.parametrize("name,schema", NUM_CASES, ids=[c[0] for c in NUM_CASES])
def test_number_bounds_exact(g4_bin, tmp_path, name, schema):
    check_exact(schema, matcher_of(g4_bin, tmp_path, schema), num_texts(schema, random.Random(name)))


@pytest.mark.parametrize("name,schema", INT_CASES + NUM_CASES, ids=[c[0] for c in INT_CASES + NUM_CASES])
def test_bounded_random_walks(g4_bin, tmp_path, name, schema):
    """Seeded random sentences of the grammar (each repetition drawn up to its bound) validate."""
    rules = parse_gbnf(gbnf_of(g4_bin, tmp_path, schema))
    rng = random.Random(name)
    for _ in range(300):
        text = generate(rules, rng)
        assert valid(schema, json.loads(text)), f"{name}: the grammar wrote {text}, which jsonschema refuses"


@pytest.mark.parametrize("schema,bound", [
    ({"type": "integer", "minimum": -20, "maximum": 345}, None),
    ({"type": "integer", "exclusiveMinimum": 99, "exclusiveMaximum": 1000}, None),
    ({"type": "number", "minimum": -3, "exclusiveMaximum": 10}, None),
])
def test_boundaries_through_the_matcher(g4_bin, tmp_path, schema, bound):
    """min-1, min, max, max+1 (and fractions beside them) walked token by token with --check."""
    lo = schema.get("minimum", schema.get("exclusiveMinimum"))
    hi = schema.get("maximum", schema.get("exclusiveMaximum"))
    texts = [str(v) for v in (lo - 1, lo, lo + 1, hi - 1, hi, hi + 1)]
    if schema["type"] == "number":
        texts += [f"{lo}.5", f"{hi - 1}.999", f"{hi}.0", f"{hi}.01"]
    for t in texts:
        want = valid(schema, json.loads(t))
        assert accepted(walk(g4_bin, tmp_path, t, schema=schema)) == want, t


ENUM_CASES = [
    ("enum-string-type", {"type": "string", "enum": ["a", 1, "bb", None]}, ["a", "bb", 1, None, "c"]),
    ("enum-integer-type", {"type": "integer", "enum": [1, 1.5, 2.0, "1", True]}, [1, 2.0, 1.5, "1", True, 3]),
    ("enum-type-list", {"type": ["null", "boolean"], "enum": [None, 0, False, "x"]}, [None, False, 0, "x", True]),
    ("enum-bounds", {"enum": [-5, 0, 3, 7, "s"], "minimum": 0, "exclusiveMaximum": 7}, [0, 3, -5, 7, "s", 4]),
    ("enum-lengths", {"enum": ["", "ab", "abc", "\u00e9\u00e9", 5], "minLength": 1, "maxLength": 2},
     ["ab", "\u00e9\u00e9", "", "abc", 5]),
    ("const-type", {"type": "number", "const": 2}, [2, "2", 3]),   # 2.0: another text of the value, not written
    ("const-in-enum", {"enum": [1, "a"], "const": "a"}, ["a", 1]),
]


@pytest.mark.parametrize("name,schema,instances", ENUM_CASES, ids=[c[0] for c in ENUM_CASES])
def test_enum_const_intersection(g4_bin, tmp_path, name, schema, instances):
    n_valid = n_invalid = 0
    for v in instances:
        want = valid(schema, v)
        out = walk(g4_bin, tmp_path, json.dumps(v, ensure_ascii=False), schema=schema)
        assert accepted(out) == want, f"{name}: {v!r} accepted={accepted(out)} jsonschema={want}"
        n_valid += want
        n_invalid += not want
    assert n_valid and n_invalid


@pytest.mark.parametrize("schema,needle", [
    ({"type": "integer", "enum": ["a", 1.5]}, "#: language is empty: no enum value"),
    ({"type": "string", "const": 3}, "#: language is empty: no const value"),
    ({"enum": [1, 2], "const": 3}, "#: language is empty"),
    ({"enum": [1, 9], "maximum": 0}, "#: language is empty"),
    ({"enum": ["a"], "pattern": "a"}, "#: keyword 'pattern' next to enum is not supported"),
    ({"const": {"a": 1}, "properties": {}}, "#: keyword 'properties' next to const is not supported"),
    ({"enum": [1], "anyOf": [{}]}, "#: keyword 'anyOf' next to enum is not supported"),
    ({"type": "number", "minimum": 0.5}, "#/minimum: 0.5: a fractional bound on type number is not supported"),
    ({"type": "number", "exclusiveMinimum": 3, "maximum": 3}, "#: language is empty: no number lies between"),
    ({"type": "number", "maximum": 1e15}, "#/maximum: 1e+15 is beyond"),
    ({"type": "integer", "minimum": 5, "exclusiveMaximum": 5}, "#: no integer lies between"),
    ({"type": "integer", "minimum": "1"}, "#/minimum is not a number"),
])
def test_errors(g4_bin, tmp_path, schema, needle):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(schema))
    r = run_g4(g4_bin, "grammar", "-m", TINY, "--json-schema", f, input=b"1")
    err = r.stderr.decode()
    assert r.returncode == 2 and needle in err and err.count("\n") == 1, err
