"""The model-source interface (src/io/source.c): a path is a HuggingFace directory, a GGUF file or
a .g4c pack, and anything else is refused naming what it is — never a confusing message about a
file inside it."""
from pathlib import Path

import pytest

from conftest import FIXTURES, run_g4

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("cmd", ["run", "logits"])
def test_a_plain_file_is_not_a_model(g4_bin, tmp_path, cmd):
    args = ["-p", "hi"] if cmd == "run" else ["--prompt-ids", "2", "-o", tmp_path / "l.f32"]
    r = run_g4(g4_bin, cmd, "-m", ROOT / "README.md", *args)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert "README.md is a file, not a model" in err and "config.json" in err and "/config.json" not in err


def test_a_missing_path(g4_bin):
    r = run_g4(g4_bin, "run", "-m", "/nonexistent/model", "-p", "hi")
    assert r.returncode == 2 and b"/nonexistent/model: cannot open: No such file or directory" in r.stderr


def test_every_source_kind_tokenizes_alike(g4_bin, tmp_path):
    """A directory, its GGUF and its pack give the same ids for the same text (the GGUF's vocabulary
    is its metadata; the pack's is the embedded tokenizer.json)."""
    pack = tmp_path / "m.g4c"
    r = run_g4(g4_bin, "pack", "-m", FIXTURES / "g4-causal-tiny", "-o", pack)
    assert r.returncode == 0, r.stderr.decode()
    outs = []
    for src in (FIXTURES / "g4-causal-tiny", pack, FIXTURES / "g4-gguf" / "causal-bf16.gguf"):
        r = run_g4(g4_bin, "tokenize", "-m", src, input=b"Hello world, hello gemma")
        assert r.returncode == 0, (src, r.stderr.decode())
        outs.append(r.stdout)
    assert outs[0] == outs[1] == outs[2]
