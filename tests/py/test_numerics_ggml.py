"""--numerics ggml: llama.cpp's CPU arithmetic (src/kernels/cpu/ggml_num.c, the RoPE cache in
src/model/rope.c, --act-q8's int8 matmuls) against llama.cpp itself on the Gemma 4 Q8_0 GGUF
fixtures (llamacpp_greedy.json and lc_logits_*.f32: llama.cpp d32676d7, x86 AVX2 build, f32 KV
cache, 1 thread, flash attention off, the prompt in one batch).

Measured (this commit, AVX2 path): first-step logits bit-identical on 14/14 prompts (max |Δ| 0) and
64-token greedy runs identical on 14/14. Before the mode: exact 1/14 runs (max |Δ| up to 1.16),
--act-q8 3/14 (up to 0.98).

The same on g4-causal-k256's Q5_K_M, IQ4_XS, Q3_K_M, Q2_K, IQ4_NL, Q4_1 and Q5_1 files
(llamacpp_k256.json, the AVX2 build, weight repacking off; 16 tokens): logits bit-identical on 7/7
prompts each and greedy runs identical — the int8 dots (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS;
IQ4_NL's one-row dot and its tinyBLAS prefill order; Q4_1 / Q5_1 with Q8_1 activations) end to end.

Not covered by the agreement, by construction: --tp > 1 (row-parallel o_proj / down_proj sum
partial dot products per rank, which llama.cpp never does: 9/14 runs there) and the scalar kernel
path (G4_CPU_ISA=scalar: --act-q8's quantizer and int8 dots follow ggml's generic C, not its x86
build; 5/14).
"""
import json

import numpy as np
import pytest

from conftest import FIXTURES, g4_greedy, g4_logits, run_g4

G = FIXTURES / "g4-gguf"
LC = json.loads((G / "llamacpp_greedy.json").read_text())
LC_CASES = [(name, c) for name, f in LC["files"].items() if "q8_0" in name for c in f["cases"]]
IDS = [f"{n[:-5]}-{c['name']}" for n, c in LC_CASES]


@pytest.mark.parametrize("name,case", LC_CASES, ids=IDS)
def test_logits_bit_identical_to_llamacpp(g4_bin, tmp_path, name, case):
    want = np.fromfile(G / case["logits_file"], dtype="<f4")
    got = g4_logits(g4_bin, tmp_path, G / name, case["prompt_ids"], "--numerics", "ggml")
    assert got.shape == want.shape
    assert np.array_equal(got, want), f"max |d| {np.abs(got - want).max():.3g}"


K256 = json.loads((G / "llamacpp_k256.json").read_text())
K256_CASES = [(name, c) for name, f in K256["files"].items() for c in f["cases"]]


@pytest.mark.parametrize("name,case", K256_CASES, ids=[f"{n[:-5]}-{c['name']}" for n, c in K256_CASES])
def test_k256_quants_identical_to_llamacpp(g4_bin, tmp_path, name, case):
    want = np.fromfile(G / case["logits_file"], dtype="<f4")
    got = g4_logits(g4_bin, tmp_path, G / name, case["prompt_ids"], "--numerics", "ggml")
    assert np.array_equal(got, want), f"max |d| {np.abs(got - want).max():.3g}"
    toks = g4_greedy(g4_bin, G / name, case["prompt_ids"], len(case["greedy"]), "--numerics", "ggml")
    assert toks == case["greedy"]


@pytest.mark.parametrize("name,case", LC_CASES, ids=IDS)
def test_greedy_identical_to_llamacpp(g4_bin, name, case):
    toks = g4_greedy(g4_bin, G / name, case["prompt_ids"], len(case["greedy"]), "--numerics", "ggml")
    assert toks == case["greedy"]


def test_threads_and_chunks_do_not_matter(g4_bin, tmp_path):
    """One thread, two threads, and prefill chunks that leave a one-row chunk (llama.cpp's batch
    was the whole prompt: P·V stays in tinyBLAS order) give the same bits."""
    name, case = next((n, c) for n, c in LC_CASES if c["name"] == "long" and n.startswith("cond"))
    want = np.fromfile(G / case["logits_file"], dtype="<f4")
    for extra in (("--threads", 1), ("--threads", 2), ("--prefill-chunk", 7), ("--prefill-chunk", 189)):
        got = g4_logits(g4_bin, tmp_path, G / name, case["prompt_ids"], "--numerics", "ggml", *extra)
        assert np.array_equal(got, want), extra


def test_exact_stays_default(g4_bin, tmp_path):
    """--numerics exact is the default; ggml differs from it (and applies the softcap: |logit| < 30)."""
    name, case = LC_CASES[3]
    a = g4_logits(g4_bin, tmp_path, G / name, case["prompt_ids"])
    b = g4_logits(g4_bin, tmp_path, G / name, case["prompt_ids"], "--numerics", "exact")
    c = g4_logits(g4_bin, tmp_path, G / name, case["prompt_ids"], "--numerics", "ggml")
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.abs(a - c).max() < 2.0 and np.abs(c).max() < 30


def test_bad_value_is_usage_error(g4_bin):
    r = run_g4(g4_bin, "run", "-m", G / "causal-q8_0.gguf", "--prompt-ids", "2", "--numerics", "fast")
    assert r.returncode == 2 and b"--numerics" in r.stderr


def test_bench_flag(g4_bin):
    r = run_g4(g4_bin, "bench", "-m", G / "causal-q8_0.gguf", "-p", 8, "-n", 4, "--reps", 1, "--no-peaks",
               "--numerics", "ggml")
    assert r.returncode == 0, r.stderr.decode()
    last = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert last["numerics"] == "ggml" and last["act_q8"] is True


def test_serve_matches_llamacpp(g4_bin):
    """`serve --numerics ggml` (greedy, temperature 0) returns llama.cpp's tokens."""
    from test_tp import _serve
    name, case = next((n, c) for n, c in LC_CASES if c["name"] == "text" and n.startswith("causal"))
    args = [str(g4_bin), "serve", "-m", str(G / name), "--port", "0", "--ctx", "512", "--numerics", "ggml"]
    p, url, log = _serve(args, None)
    try:
        import requests
        r = requests.post(url + "/v1/completions", json={"prompt": case["prompt_ids"], "max_tokens": 32,
                                                         "temperature": 0, "ignore_eos": True,
                                                         "return_token_ids": True}, timeout=120)
        assert r.status_code == 200, r.text
        body = r.json()
        got = body["choices"][0].get("token_ids") or body.get("token_ids")
        assert got == case["greedy"][:32], "".join(log)
    finally:
        import signal
        p.send_signal(signal.SIGTERM)
        p.wait(60)
