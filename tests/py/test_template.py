"""`gemma4c template` against the jinja2/transformers goldens in tests/fixtures/templates (written by
tools/reference/make_template_goldens.py): byte-identical prompts, rejected conversations exit 2
with the template's raise_exception message, and bad input (syntax errors, invalid JSON) exits 2."""
import json

import pytest

from conftest import FIXTURES, ROOT, SHARED, run_g4

TEMPLATE_DIR = FIXTURES / "templates"
GOLDEN_FILES = sorted(TEMPLATE_DIR.glob("*.json"))


def _load(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    return doc


def _cmd(doc):
    args = ["template", "-m", SHARED / doc["tokenizer_dir"]]
    if doc.get("template"):
        args += ["--template", SHARED / doc["template"]]
    elif doc.get("template_repo"):
        args += ["--template", ROOT / doc["template_repo"]]
    return args


def _cases():
    for path in GOLDEN_FILES:
        doc = _load(path)
        for case in doc["cases"]:
            yield pytest.param(doc, case, id=f"{path.stem}:{case['name']}")


def _needs_shared(doc):
    if not (SHARED / doc["tokenizer_dir"]).exists():
        pytest.skip(f"shared test data missing: {SHARED / doc['tokenizer_dir']}")


def test_goldens_present():
    names = {p.stem for p in GOLDEN_FILES}
    assert {"gemma3", "gemma4-31B-it", "gemma4-31B-it-interleaved"} <= names
    for stem in ("gemma3", "gemma4-31B-it", "gemma4-31B-it-interleaved"):
        assert len(_load(TEMPLATE_DIR / f"{stem}.json")["cases"]) >= 30


@pytest.mark.parametrize("doc,case", list(_cases()))
def test_template_golden(g4_bin, doc, case):
    _needs_shared(doc)
    stdin = json.dumps(case["input"], ensure_ascii=False).encode("utf-8")
    r = run_g4(g4_bin, *_cmd(doc), input=stdin)
    if "error" in case:
        assert r.returncode == 2, f"expected rejection, got rc={r.returncode} out={r.stdout[:200]!r}"
        err = r.stderr.decode("utf-8", "replace")
        assert err.count("\n") == 1 and err.endswith("\n"), err
        if case["raise"]:
            assert case["error"] in err, err
        assert r.stdout == b""
    else:
        assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
        got = r.stdout.decode("utf-8")
        assert got == case["expected"]


def _tpl(tmp_path, text):
    p = tmp_path / "chat_template.jinja"
    p.write_text(text, encoding="utf-8")
    return p


MSGS = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()


@pytest.mark.parametrize("src,line", [
    ("ok\n{% if x %}\nunclosed\n", 2),
    ("line1\nline2\n{{ 1 + }}\n", 3),
    ("{% for %}", 1),
    ("a\n\n\n{{ x | no_such_filter }}", 4),
    ("{% endfor %}", 1),
    ("{{ x is no_such_test }}", 1),
    ("{% macro m(a=1, b) %}{% endmacro %}", 1),
    ("\n{{ 'unterminated }}", 2),
    ("{# never closed", 1),
    ("{% do x %}", 1),
])
def test_syntax_error_names_line(g4_bin, tmp_path, src, line):
    p = _tpl(tmp_path, src)
    r = run_g4(g4_bin, "template", "-m", tmp_path, input=MSGS)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert f"{p}:{line}:" in err, err
    assert err.count("\n") == 1


def test_raise_exception_message(g4_bin, tmp_path):
    _tpl(tmp_path, "{{ raise_exception('custom failure: ' ~ messages[0].role) }}")
    r = run_g4(g4_bin, "template", "-m", tmp_path, input=MSGS)
    assert r.returncode == 2
    assert "custom failure: user" in r.stderr.decode()


@pytest.mark.parametrize("stdin", [b"", b"{", b"[1, 2]", b'{"messages": "x"}', b'{"messages": []}',
                                   b'{"messages": [1]}', b"\xff\xfe", b'{"messages": [{"role": "user", "content": "\xff"}]}'])
def test_bad_json_stdin(g4_bin, tmp_path, stdin):
    _tpl(tmp_path, "{{ messages }}")
    r = run_g4(g4_bin, "template", "-m", tmp_path, input=stdin)
    assert r.returncode == 2
    assert r.stderr.count(b"\n") == 1


def test_template_from_tokenizer_config(g4_bin, tmp_path):
    cfg = {"bos_token": {"content": "<s>", "special": True}, "eos_token": "</s>",
           "chat_template": [{"name": "tool_use", "template": "TOOLS"},
                             {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"}]}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    r = run_g4(g4_bin, "template", "-m", tmp_path, input=MSGS)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"<s>hi</s>"


def test_runaway_template_is_bounded(g4_bin, tmp_path):
    _tpl(tmp_path, "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
    r = run_g4(g4_bin, "template", "-m", tmp_path, input=MSGS, timeout=60)
    assert r.returncode == 2 and b"recursion" in r.stderr


def test_missing_model_dir(g4_bin, tmp_path):
    r = run_g4(g4_bin, "template", "-m", tmp_path / "nope", input=MSGS)
    assert r.returncode in (1, 2) and r.stderr.count(b"\n") == 1
