"""Gemma 4 from GGUF files written by llama.cpp's converter (tests/fixtures/g4-gguf/, made by
tools/reference/make_gemma4_gguf.py from the random-weight fixtures g4-cond-tiny and
g4-causal-tiny; the llama.cpp commit is in convert.json). Each .gguf runs alone: config, weights,
tokenizer and chat template all come from the file.

  * bf16: greedy tokens and last-position logits equal transformers' on the HF fixture (its
    goldens.json; logits within 1e-4 relative), for prefill chunks 1, 7 and 64.
  * Q8_0, Q5_K_M, IQ4_XS, Q3_K_M, Q2_K, IQ4_NL, Q4_1 and Q5_1, exact semantics: equal to transformers running the HF
    fixture with the GGUF's quantized tensors dequantized in float32 (<group>_goldens.json,
    record_gemma4_gguf_goldens.py). The K-quant and IQ4_XS files
    (llama-quantize's recipes on g4-causal-k256, whose matrices are all 256 wide or a multiple;
    Q6_K for the embedding) run on every kernel path the CPU has.
  * Q8_0 against llama.cpp (llamacpp_greedy.json, record_llamacpp_greedy.py): llama.cpp's CPU
    matmuls round the activations to Q8_0 (and to bf16 for bf16 weights), gemma4c keeps them
    float32, so on these chaotic random-weight models the logits differ by up to ~1.2 (of ~10) and
    greedy paths part at near-ties — llama.cpp parts from itself as often with an f16 instead of an
    f32 KV cache. Checked: last-position logits within LC_LOGIT_TOL of llama.cpp's, and the greedy
    tokens identical up to llama.cpp's first step whose top-1 margin is below that bound.
"""
import json
import os

import numpy as np
import pytest

from conftest import FIXTURES, run_g4

G = FIXTURES / "g4-gguf"
REL_TOL = 1e-4
CHUNKS = [1, 7, 64]
LC_LOGIT_TOL = 1.25   # max |gemma4c - llama.cpp| logit on the Q8_0 files is 1.16 (measured)

HF = {f: json.loads((FIXTURES / f / "goldens.json").read_text())["cases"] for f in ("g4-cond-tiny", "g4-causal-tiny")}
BF16 = [(f"{p}-bf16.gguf", fx, c) for p, fx in (("cond", "g4-cond-tiny"), ("causal", "g4-causal-tiny")) for c in HF[fx]]
Q8 = json.loads((G / "q8_0_goldens.json").read_text())["files"]
Q8_CASES = [(name, c) for name, f in Q8.items() for c in f["cases"]]
# llama-quantize's Q5_K_M, IQ4_XS, Q3_K_M, Q2_K, IQ4_NL, Q4_1 and Q5_1 of g4-causal-k256 (every matrix 256 wide or a multiple)
K256 = {g: json.loads((G / f"{g}_goldens.json").read_text())["files"]
        for g in ("q5_k_m", "iq4_xs", "q3_k_m", "q2_k", "iq4_nl", "q4_1", "q5_1")}
K256_CASES = [(name, c) for files in K256.values() for name, f in files.items() for c in f["cases"]]
LC = json.loads((G / "llamacpp_greedy.json").read_text())
LC_CASES = [(name, c) for name, f in LC["files"].items() if "q8_0" in name for c in f["cases"]]


def _greedy(g4_bin, path, prompt, n, chunk=64):
    r = run_g4(g4_bin, "run", "-m", path, "--prompt-ids", ",".join(map(str, prompt)), "-n", n, "--ids",
               "--ignore-eos", "--prefill-chunk", chunk, "--ctx", 512)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def _logits(g4_bin, tmp_path, path, prompt, chunk=64):
    out = tmp_path / "logits.f32"
    r = run_g4(g4_bin, "logits", "-m", path, "--prompt-ids", ",".join(map(str, prompt)), "-o", out,
               "--prefill-chunk", chunk, "--ctx", 512)
    assert r.returncode == 0, r.stderr.decode()
    return np.fromfile(out, dtype="<f4")


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("name,fixture,case", BF16, ids=[f"{n}:{c['name']}" for n, _, c in BF16])
def test_bf16_matches_hf(g4_bin, tmp_path, name, fixture, case, chunk):
    assert _greedy(g4_bin, G / name, case["prompt_ids"], len(case["greedy"]), chunk) == case["greedy"]
    got = _logits(g4_bin, tmp_path, G / name, case["prompt_ids"], chunk)
    want = np.fromfile(FIXTURES / fixture / case["logits_file"], dtype="<f4")
    assert got.shape == want.shape
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel <= REL_TOL, f"max relative logit error {rel:.3g} > {REL_TOL}"


@pytest.mark.parametrize("chunk", [1, 64])
@pytest.mark.parametrize("name,case", Q8_CASES, ids=[f"{n}:{c['name']}" for n, c in Q8_CASES])
def test_q8_0_matches_dequantized_reference(g4_bin, tmp_path, name, case, chunk):
    if case["placeholder_hit"]:
        pytest.skip("a multimodal placeholder id: HF embeds it as <pad>, a GGUF engine as itself")
    assert _greedy(g4_bin, G / name, case["prompt_ids"], len(case["greedy"]), chunk) == case["greedy"]
    got = _logits(g4_bin, tmp_path, G / name, case["prompt_ids"], chunk)
    want = np.fromfile(G / case["logits_file"], dtype="<f4")
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel <= REL_TOL, f"max relative logit error {rel:.3g} > {REL_TOL}"


_FLAGS = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
K256_ISAS = ["scalar"] + (["avx2"] if " avx2" in _FLAGS and " fma" in _FLAGS else []) + ["native"]


@pytest.mark.parametrize("isa", K256_ISAS)
@pytest.mark.parametrize("chunk", [1, 64])
@pytest.mark.parametrize("name,case", K256_CASES, ids=[f"{n}:{c['name']}" for n, c in K256_CASES])
def test_k256_quants_match_dequantized_reference(g4_bin, tmp_path, name, case, chunk, isa):
    env = {"G4_CPU_ISA": isa} if isa != "native" else None
    r = run_g4(g4_bin, "run", "-m", G / name, "--prompt-ids", ",".join(map(str, case["prompt_ids"])), "-n",
               len(case["greedy"]), "--ids", "--ignore-eos", "--prefill-chunk", chunk, "--ctx", 512, env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == case["greedy"]
    out = tmp_path / "logits.f32"
    r = run_g4(g4_bin, "logits", "-m", G / name, "--prompt-ids", ",".join(map(str, case["prompt_ids"])), "-o", out,
               "--prefill-chunk", chunk, "--ctx", 512, env=env)
    assert r.returncode == 0, r.stderr.decode()
    got, want = np.fromfile(out, dtype="<f4"), np.fromfile(G / case["logits_file"], dtype="<f4")
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel <= REL_TOL, f"max relative logit error {rel:.3g} > {REL_TOL}"


@pytest.mark.parametrize("group", list(K256))
def test_k256_quants_act_q8(g4_bin, tmp_path, group):
    """--act-q8 on Q5_K / IQ4_XS / Q3_K / Q2_K / IQ4_NL / Q4_1 / Q5_1 (ggml's int8 dots, bit-identical to them:
    tests/c/test_quant_act.c) is in effect — the logits move off the exact ones (by 5.6% / 12.3%
    of the largest on the Q5_K_M / IQ4_XS files' last case, measured; llama.cpp's own logits are as
    far from the exact ones, and --numerics ggml equals them bit for bit: test_numerics_ggml.py) —
    and the AVX2 and native paths' int8 matmuls give the same bits: under --numerics ggml, whose
    float ops are one scalar code on every path, their logits are identical. (Plain --act-q8 runs
    the exact attention, whose AVX-512 and AVX2 kernels agree only to float rounding —
    test_kernels.c — and a rounding that moves an activation across a Q8 step moves the logits by
    more: 1% of the largest on the Q4_1 file's last case, measured.)"""
    name, f = next(iter(K256[group].items()))
    case = f["cases"][-1]
    ids = ",".join(map(str, case["prompt_ids"]))
    exact = _logits(g4_bin, tmp_path, G / name, case["prompt_ids"])
    out = tmp_path / "aq8.f32"
    r = run_g4(g4_bin, "logits", "-m", G / name, "--prompt-ids", ids, "-o", out, "--ctx", 512, "--act-q8")
    assert r.returncode == 0, r.stderr.decode()
    rel = np.abs(np.fromfile(out, dtype="<f4") - exact).max() / np.abs(exact).max()
    assert 0 < rel < 0.2, rel
    runs = []
    for env in ({"G4_CPU_ISA": "avx2"}, None):
        r = run_g4(g4_bin, "logits", "-m", G / name, "--prompt-ids", ids, "-o", out, "--ctx", 512, "--numerics", "ggml",
                   env=env)
        assert r.returncode == 0, r.stderr.decode()
        runs.append(np.fromfile(out, dtype="<f4"))
    assert np.array_equal(runs[0], runs[1]), f"max |d| {np.abs(runs[0] - runs[1]).max():.3g}"


@pytest.mark.parametrize("name,case", LC_CASES, ids=[f"{n}:{c['name']}" for n, c in LC_CASES])
def test_q8_0_vs_llamacpp(g4_bin, tmp_path, name, case):
    got = _logits(g4_bin, tmp_path, G / name, case["prompt_ids"])
    want = np.fromfile(G / case["logits_file"], dtype="<f4")
    assert np.abs(got - want).max() <= LC_LOGIT_TOL
    tokens = _greedy(g4_bin, G / name, case["prompt_ids"], len(case["greedy"]))
    tie = next((i for i, m in enumerate(case["margin"]) if m < LC_LOGIT_TOL), len(case["margin"]))
    assert tokens[:tie] == case["greedy"][:tie], f"differs before llama.cpp's first near-tie (step {tie})"


def test_q8_0_llamacpp_agreement_summary(g4_bin):
    """Not a pass/fail bound per case: the share of the 64-token runs and of the steps before the
    first divergence, printed with -s; guards against a wholesale break (e.g. a wrong RoPE) that
    the tie rule above would let through on cases that tie at step 0."""
    same_first = 0
    for name, case in LC_CASES:
        tokens = _greedy(g4_bin, G / name, case["prompt_ids"], len(case["greedy"]))
        same_first += tokens[0] == case["greedy"][0]
    print(f"first greedy token equal to llama.cpp's on {same_first}/{len(LC_CASES)} Q8_0 prompts")
    assert same_first >= len(LC_CASES) - 2


def test_tokenizer_and_template_from_gguf(g4_bin):
    """The GGUF's tokenizer (vocabulary + merges) and chat template act as the HF directory's."""
    texts = ["Hello world, this is a test.", "  two  spaces\tand\nnew\n\nlines", "ünïcödé 日本語 🙂",
             "<|turn>user\nHi<turn|>\n<|turn>model\n", "<bos>x<eos> <|image|> <|\"|>"]
    for name, d in (("cond-bf16.gguf", "g4-cond-tiny"), ("causal-q8_0.gguf", "g4-causal-tiny")):
        for t in texts:
            a = run_g4(g4_bin, "tokenize", "-m", G / name, "--bos", input=t.encode())
            b = run_g4(g4_bin, "tokenize", "-m", FIXTURES / d, "--bos", input=t.encode())
            assert a.returncode == 0 and b.returncode == 0, a.stderr.decode() + b.stderr.decode()
            assert json.loads(a.stdout) == json.loads(b.stdout), (name, t)
            ids = a.stdout
            a = run_g4(g4_bin, "detokenize", "-m", G / name, input=ids)
            b = run_g4(g4_bin, "detokenize", "-m", FIXTURES / d, input=ids)
            assert a.returncode == 0 and a.stdout == b.stdout, (name, t)
        req = json.dumps({"messages": [{"role": "user", "content": "What is the capital of France?"}],
                          "add_generation_prompt": True}).encode()
        a = run_g4(g4_bin, "template", "-m", G / name, input=req)
        b = run_g4(g4_bin, "template", "-m", FIXTURES / d, input=req)
        assert a.returncode == 0, a.stderr.decode()
        assert a.stdout == b.stdout and a.stdout.startswith(b"<bos><|turn>user\n")


def test_chat_from_gguf(g4_bin):
    """--chat on the bf16 GGUF alone gives the HF directory's tokens."""
    args = ["--chat", "-p", "What is the capital of France?", "-n", 16, "--ids"]
    a = run_g4(g4_bin, "run", "-m", G / "cond-bf16.gguf", *args)
    b = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-cond-tiny", *args)
    assert a.returncode == 0, a.stderr.decode()
    assert json.loads(a.stdout) == json.loads(b.stdout)


def _bad(g4_bin, path, *want):
    r = run_g4(g4_bin, "run", "-m", path, "--prompt-ids", "2", "-n", 1)
    err = r.stderr.decode().strip()
    assert r.returncode == 2, err
    assert len(err.splitlines()) == 1 and path.name in err, err
    for w in want:
        assert w in err, err


def test_bad_gemma4_gguf(g4_bin, tmp_path):
    data = (G / "cond-q8_0.gguf").read_bytes()
    for n in (100, 50_000, len(data) - 1000):
        cut = tmp_path / f"cut{n}.gguf"
        cut.write_bytes(data[:n])
        _bad(g4_bin, cut)
    # a required metadata key, a tensor and the window pattern, each renamed in place (same length)
    for old, new, want in ((b"gemma4.attention.key_length_swa", b"gemma4.attention.key_lengtX_swa", "key_length_swa"),
                           (b"blk.3.attn_q.weight", b"blk.3.attn_X.weight", "blk.3.attn_q.weight"),
                           (b"gemma4.attention.sliding_window_pattern", b"gemma4.attention.sliding_window_patterX",
                            "sliding_window_pattern")):
        assert data.count(old) == 1
        p = tmp_path / "renamed.gguf"
        p.write_bytes(data.replace(old, new))
        _bad(g4_bin, p, want)
