"""`gemma4c run --json-schema FILE | --grammar FILE | --json-object`: the grammar engine constrains
run's output, so even the random-weight fixture (where nothing but the mask makes output valid)
prints JSON that parses and satisfies the schema, for several seeds; a bad schema or grammar file
is exit 2 naming the option, the file and the problem."""
import json
import re

import pytest

from conftest import FIXTURES, run_g4

M = FIXTURES / "g4-cond-tiny"

SCHEMAS = {
    "color": {"type": "object",
              "properties": {"ok": {"type": "boolean"}, "color": {"enum": ["red", "green", "blue"]},
                             "n": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["ok", "color", "n"], "additionalProperties": False},
    "tags": {"type": "object",
             "properties": {"name": {"type": "string", "maxLength": 12},
                            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
                            "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
             "required": ["name", "tags", "zip"], "additionalProperties": False},
    "list": {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "maxItems": 4},
}


def validate(doc, s):
    """The schema keywords SCHEMAS use, checked as JSON Schema defines them (no validator
    package is a test dependency). Raises AssertionError naming what is wrong."""
    if "enum" in s:
        assert doc in s["enum"], (doc, s["enum"])
        return
    t = s["type"]
    if t == "object":
        assert isinstance(doc, dict), doc
        assert set(s["required"]) <= set(doc), doc
        if s.get("additionalProperties") is False:
            assert set(doc) <= set(s["properties"]), doc
        for k, v in doc.items():
            validate(v, s["properties"][k])
    elif t == "array":
        assert isinstance(doc, list), doc
        assert s.get("minItems", 0) <= len(doc) <= s.get("maxItems", 1 << 30), doc
        for v in doc:
            validate(v, s["items"])
    elif t == "integer":
        assert isinstance(doc, int) and not isinstance(doc, bool), doc
        assert s.get("minimum", -1e18) <= doc <= s.get("maximum", 1e18), doc
    elif t == "string":
        assert isinstance(doc, str) and len(doc) <= s.get("maxLength", 1 << 30), doc
        assert re.search(s.get("pattern", ""), doc), doc
    elif t == "boolean":
        assert isinstance(doc, bool), doc


def run(g4_bin, *args):
    return run_g4(g4_bin, "run", "-m", M, "-p", "Answer in JSON.", "--threads", 1, *args)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_json_schema_output_validates_over_seeds(g4_bin, tmp_path, name):
    f = tmp_path / "schema.json"
    f.write_text(json.dumps(SCHEMAS[name]))
    outs = set()
    for seed in range(5):
        r = run(g4_bin, "--json-schema", f, "--temp", 1, "--seed", seed, "-n", 400)
        assert r.returncode == 0, r.stderr.decode()
        text = r.stdout.decode()
        validate(json.loads(text), SCHEMAS[name])
        outs.add(text)
    assert len(outs) > 1   # the seeds sample different documents: the mask, not one fixed path


def test_greedy_and_chat_and_ids(g4_bin, tmp_path):
    f = tmp_path / "schema.json"
    f.write_text(json.dumps(SCHEMAS["color"]))
    r = run(g4_bin, "--json-schema", f, "-n", 400, "--chat")
    assert r.returncode == 0, r.stderr.decode()
    validate(json.loads(r.stdout), SCHEMAS["color"])
    ids = run(g4_bin, "--json-schema", f, "-n", 400, "--chat", "--ids")
    d = run_g4(g4_bin, "detokenize", "-m", M, "--skip-special", input=ids.stdout)
    assert d.stdout + b"\n" == r.stdout   # --ids gives the same constrained tokens


def test_json_object(g4_bin):
    ended = 0
    for seed in range(6):
        r = run(g4_bin, "--json-object", "--chat", "--temp", 1, "--seed", seed, "-n", 400)
        assert r.returncode == 0, r.stderr.decode()
        try:
            doc = json.loads(r.stdout)
        except json.JSONDecodeError:   # cut by -n: still the start of an object
            assert r.stdout.lstrip().startswith(b"{")
            continue
        ended += 1
        assert isinstance(doc, dict)
    assert ended >= 1


def test_gbnf_grammar(g4_bin, tmp_path):
    f = tmp_path / "g.gbnf"
    f.write_text('root ::= answer " " num\nanswer ::= "yes" | "no"\nnum ::= [1-9] [0-9]?\n')
    for seed in range(4):
        r = run(g4_bin, "--grammar", f, "--temp", 1, "--seed", seed, "-n", 50)
        assert r.returncode == 0, r.stderr.decode()
        assert re.fullmatch(rb"(yes|no) [1-9][0-9]?\n", r.stdout), r.stdout


@pytest.mark.parametrize("opt,text,words", [
    ("--json-schema", '{"type": "object", "properties": {"x": {"type": "number", "multipleOf": 3}}}', "multipleof"),
    ("--json-schema", '{"type": "object",', "json"),
    ("--json-schema", '{"type": "yaml"}', "yaml"),
    ("--grammar", 'root ::= "yes', "unterminated"),
    ("--grammar", "root ::= foo\n", "foo"),
])
def test_bad_schema_or_grammar_is_exit_2_naming_it(g4_bin, tmp_path, opt, text, words):
    f = tmp_path / "bad"
    f.write_text(text)
    r = run(g4_bin, opt, f)
    assert r.returncode == 2 and r.stdout == b""
    err = r.stderr.decode()
    assert err.count("\n") == 1 and opt in err and str(f) in err and words in err.lower(), err


@pytest.mark.parametrize("args,words", [
    (["--json-schema", "/nonexistent/s.json"], "cannot read"),
    (["--json-schema"], "needs a file"),
    (["--json-object", "--grammar", "g"], "at most one"),
])
def test_bad_options_are_exit_2(g4_bin, args, words):
    r = run(g4_bin, *args)
    assert r.returncode == 2 and words in r.stderr.decode(), r.stderr


def test_logits_takes_no_constraint(g4_bin, tmp_path):
    r = run_g4(g4_bin, "logits", "-m", M, "-p", "hi", "-o", tmp_path / "l", "--json-object")
    assert r.returncode == 2 and b"--json-object" in r.stderr
