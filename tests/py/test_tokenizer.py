"""`gemma4c tokenize` / `gemma4c detokenize` against the HuggingFace goldens (a sample of the corpus;
tests/c/test_tokenizer.c covers all of it through the C API), and bad input: exit 2 with a
one-line error naming the file / field / value."""
import gzip
import json

import pytest

from conftest import FIXTURES, SHARED, run_g4

GEMMA = SHARED / "gemma3-tokenizer"
needs_gemma = pytest.mark.skipif(not (GEMMA / "tokenizer.json").exists(), reason="no ../shared/data/gemma3-tokenizer")

MINI = {
    "version": "1.0",
    "added_tokens": [{"id": 1, "content": "<bos>", "special": True, "lstrip": False, "rstrip": False,
                      "normalized": False, "single_word": False}],
    "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    "pre_tokenizer": None,
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                       "pair": [], "special_tokens": {"<bos>": {"id": "<bos>", "ids": [1], "tokens": ["<bos>"]}}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                 {"type": "ByteFallback"}, {"type": "Fuse"}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True,
              "vocab": {"<unk>": 0, "<bos>": 1, "a": 2, "b": 3, "ab": 4, "\u2581": 5, "\u2581ab": 6},
              "merges": [["a", "b"], ["\u2581", "ab"]]},
}


def goldens_sample(step=97):
    out = []
    with gzip.open(FIXTURES / "tokenizer" / "goldens.jsonl.gz", "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            r = json.loads(line)
            if "text" in r and (i % step == 0 or "<start_of_turn>" in r["text"]) and len(r["text"]) < 20000:
                out.append(r)
    return out[:40]


def one_line_error(r):
    err = r.stderr.decode()
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err


@pytest.fixture()
def mini_dir(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(MINI))
    return tmp_path


def test_mini_roundtrip(g4_bin, mini_dir):
    r = run_g4(g4_bin, "tokenize", "-m", mini_dir, "--bos", input="ab ab<bos>é".encode())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [1, 4, 6, 1, 0]
    r = run_g4(g4_bin, "detokenize", "-m", mini_dir, input=b"[1, 4, 6, 1]")
    assert r.returncode == 0 and r.stdout == b"<bos>ab ab<bos>"
    r = run_g4(g4_bin, "detokenize", "-m", mini_dir, "--skip-special", input=b"[1,4,6]")
    assert r.returncode == 0 and r.stdout == b"ab ab"
    r = run_g4(g4_bin, "tokenize", "-m", mini_dir / "tokenizer.json", input=b"")
    assert r.returncode == 0 and r.stdout == b"[]\n"


@needs_gemma
@pytest.mark.slow
def test_cli_matches_goldens(g4_bin):
    sample = goldens_sample()
    assert len(sample) >= 20
    # each call reloads the 262k vocabulary: a few strings here, the whole corpus in test_tokenizer.c
    for r in sample[:8]:
        out = run_g4(g4_bin, "tokenize", "-m", GEMMA, input=r["text"].encode())
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == r["ids"], r["text"][:100]
        out = run_g4(g4_bin, "detokenize", "-m", GEMMA, input=json.dumps(r["ids"]).encode())
        assert out.returncode == 0 and out.stdout.decode() == r["decoded"]
    r = sample[-1]
    out = run_g4(g4_bin, "tokenize", "-m", GEMMA, "--bos", input=r["text"].encode())
    want = r.get("ids_special") or r["special_prefix"] + r["ids"] + r["special_suffix"]
    assert json.loads(out.stdout) == want
    out = run_g4(g4_bin, "detokenize", "-m", GEMMA, "--skip-special", input=json.dumps(want).encode())
    assert out.stdout.decode() == r["decoded_skip"]


@needs_gemma
def test_cli_example(g4_bin):
    out = run_g4(g4_bin, "tokenize", "-m", GEMMA, "--bos", input="Hello world".encode())
    assert out.stdout == b"[2,9259,1902]\n"
    out = run_g4(g4_bin, "detokenize", "-m", GEMMA, input=b"[2,9259,1902]")
    assert out.stdout == b"<bos>Hello world"


@pytest.mark.parametrize("data,msg", [
    (b"ab\xff", b"not valid UTF-8 (byte 2: 0xFF)"),
    (b"\xc3", b"not valid UTF-8 (byte 0"),
    (b"\xed\xa0\x80", b"not valid UTF-8"),          # UTF-16 surrogate
    (b"\xc0\xaf", b"not valid UTF-8"),              # overlong
])
def test_invalid_utf8(g4_bin, mini_dir, data, msg):
    r = run_g4(g4_bin, "tokenize", "-m", mini_dir, input=data)
    assert r.returncode == 2 and msg in r.stderr
    one_line_error(r)


@pytest.mark.parametrize("text,msg", [
    ('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []', "unexpected end of input in object"),
    ('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [}}', "byte 56: unexpected character '}'"),
    ('{"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}}', "model.vocab['a']: expected an id"),
    ('{"model": {"type": "Unigram", "vocab": []}}', "model type 'Unigram' is not supported"),
    ('{"normalizer": {"type": "NFKC"}, "model": {"type": "BPE", "vocab": {}, "merges": []}}',
     "normalizer type 'NFKC' is not supported"),
    ('{"decoder": {"type": "Metaspace", "replacement": "x"}, "model": {"type": "BPE", "vocab": {}, "merges": []}}',
     "decoder type 'Metaspace' is not supported"),
    ('{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\\\s+"}, "behavior": "Isolated", "invert": false},'
     ' "model": {"type": "BPE", "vocab": {}, "merges": []}}', "Regex patterns are not supported"),
    ('', "byte 0: unexpected end of input"),
])
def test_bad_tokenizer_json(g4_bin, tmp_path, text, msg):
    (tmp_path / "tokenizer.json").write_text(text)
    r = run_g4(g4_bin, "tokenize", "-m", tmp_path, input=b"hi")
    assert r.returncode == 2, r.stderr
    err = one_line_error(r)
    assert "tokenizer.json: " in err and msg in err, err


@pytest.mark.parametrize("data,msg", [
    (b"[1, 2", b"expected a JSON array of token ids"),
    (b'{"a": 1}', b"expected a JSON array of token ids"),
    (b"[1, -3]", b"element 1 is not a token id"),
    (b'[1, "x"]', b"element 1 is not a token id"),
    (b"[1, 1.5]", b"element 1 is not a token id"),
    (b"[7]", b"token id 7 is out of range [0, 7)"),
])
def test_detokenize_bad_input(g4_bin, mini_dir, data, msg):
    r = run_g4(g4_bin, "detokenize", "-m", mini_dir, input=data)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
    one_line_error(r)


def test_usage_errors(g4_bin, mini_dir):
    r = run_g4(g4_bin, "tokenize", input=b"x")
    assert r.returncode == 2 and b"-m MODEL_OR_TOKENIZER_DIR is required" in r.stderr
    r = run_g4(g4_bin, "tokenize", "-m", mini_dir, "--frob", input=b"x")
    assert r.returncode == 2 and b"unknown option '--frob'" in r.stderr
    r = run_g4(g4_bin, "detokenize", "-m", mini_dir / "nope", input=b"[]")
    assert r.returncode == 2 and b"nope: cannot open: No such file or directory" in r.stderr
    one_line_error(r)
    r = run_g4(g4_bin, "tokenize", "-m", mini_dir.parent, input=b"x")  # a directory without tokenizer.json
    assert r.returncode == 2 and b"tokenizer.json: cannot open" in r.stderr
