"""`gemma4c run --spec ngram` (speculative decoding with n-gram drafts; docs/speculative.md): the
same token ids as plain decoding, greedy and seeded sampling, on kernel paths whose results do not
depend on a step's row count (scalar everywhere; amx for these fixtures' short rows — see
docs/numerics.md), with drafts kept in some rounds; the --spec-trace lines; bad values refused.
The loop's own invariants (hidden states, rewinds, stop boundaries, the sampling distribution)
are tested in tests/c/test_speculate.c."""
import json
import os

import pytest

from conftest import FIXTURES, run_g4

PROMPTS = {
    "periodic": [2] + [11, 57, 203, 9] * 6,
    "copy": [2, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 7, 40, 41, 42, 43],
    "plain": [2, 100, 200, 300, 17, 5, 250, 31],
}


def _isas():
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    return ["scalar"] + (["amx"] if " amx_bf16" in flags and " amx_tile" in flags else [])


def run_ids(g4_bin, model, prompt, *extra, isa="scalar", n=48):
    r = run_g4(g4_bin, "run", "-m", model, "--prompt-ids", ",".join(map(str, prompt)), "-n", n, "--ids",
               "--ignore-eos", "--ctx", 256, "--threads", 1, *extra, env={"G4_CPU_ISA": isa})
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def read_trace(path):
    rounds = [json.loads(line) for line in open(path)]
    for r in rounds:
        assert set(r) == {"drafted", "accepted"}
        assert all(isinstance(t, int) for t in r["drafted"])
        assert 0 <= r["accepted"] <= len(r["drafted"])
    return rounds


@pytest.mark.parametrize("isa", _isas())
@pytest.mark.parametrize("fixture", ["g4-causal-tiny", "g4-cond-tiny"])
def test_greedy_identical(g4_bin, tmp_path, fixture, isa):
    model = FIXTURES / fixture
    kept = []
    for name, prompt in PROMPTS.items():
        trace = tmp_path / f"{name}.jsonl"
        want = run_ids(g4_bin, model, prompt, isa=isa)
        got = run_ids(g4_bin, model, prompt, "--spec", "ngram", "--spec-trace", trace, isa=isa)
        assert got == want, name
        rounds = read_trace(trace)
        assert all(1 <= len(r["drafted"]) <= 8 for r in rounds)   # the n-gram default, 8
        kept += [r["accepted"] for r in rounds]
    assert max(kept) >= 2, "no round kept two drafts: the test would not see a long accepted run"


def test_draft_max_and_small_chunks(g4_bin, tmp_path):
    """--draft-max bounds a round; one-row prefill chunks leave the sliding rings only the verify
    rows' slack, which the rewinds must respect (the prompt outgrows the window of 16)."""
    model = FIXTURES / "g4-causal-tiny"
    prompt = PROMPTS["periodic"]
    want = run_ids(g4_bin, model, prompt, "--prefill-chunk", 1, n=80)
    trace = tmp_path / "t.jsonl"
    got = run_ids(g4_bin, model, prompt, "--prefill-chunk", 1, "--spec", "ngram", "--draft-max", 3,
                  "--spec-trace", trace, n=80)
    assert got == want
    rounds = read_trace(trace)
    assert rounds and max(len(r["drafted"]) for r in rounds) == 3


@pytest.mark.parametrize("seed", [1, 7])
def test_seeded_sampling_identical(g4_bin, seed):
    model = FIXTURES / "g4-causal-tiny"
    args = ("--temp", "1.5", "--top-k", "20", "--seed", seed)
    want = run_ids(g4_bin, model, PROMPTS["periodic"], *args)
    assert run_ids(g4_bin, model, PROMPTS["periodic"], *args, "--spec", "ngram") == want
    assert run_ids(g4_bin, model, PROMPTS["periodic"], *args, "--spec", "none") == want


@pytest.mark.parametrize("sampling", [[], ["--temp", "1", "--seed", "3"]])
def test_tensor_parallel(g4_bin, sampling):
    """--tp 2: the verify step's rows run over both ranks (argmax or gathered logits)."""
    model = FIXTURES / "g4-cond-tiny"
    want = run_ids(g4_bin, model, PROMPTS["periodic"], "--tp", 2, *sampling, n=40)
    assert run_ids(g4_bin, model, PROMPTS["periodic"], "--tp", 2, "--spec", "ngram", *sampling, n=40) == want


def test_text_identical(g4_bin):
    model = FIXTURES / "g4-causal-tiny"
    out = []
    for extra in ([], ["--spec", "ngram", "-v"]):
        r = run_g4(g4_bin, "run", "-m", model, "-p", "abc abc abc abc abc", "-n", 40, "--ignore-eos",
                   "--threads", 1, *extra, env={"G4_CPU_ISA": "scalar"})
        assert r.returncode == 0, r.stderr.decode()
        out.append(r.stdout)
    assert out[0] == out[1]
    assert b"speculative:" in r.stderr and b"verify rounds" in r.stderr


@pytest.mark.parametrize("args,message", [
    (["--spec", "medusa"], "--spec expects ngram or none, got 'medusa'"),
    (["--spec", "ngram", "--draft-max", "0"], "--draft-max expects"),
    (["--spec", "ngram", "--draft-max", "65"], "--draft-max expects"),
    (["--draft-max", "4"], "--draft-max needs --spec ngram"),
    (["--spec", "none", "--spec-trace", "t.jsonl"], "--spec-trace needs --spec ngram"),
    (["--spec-ngram-max", "3"], "--spec-ngram-max needs --spec ngram"),
    (["--spec", "ngram", "--spec-ngram-min", "3", "--spec-ngram-max", "2"], "is larger than --spec-ngram-max"),
    (["--spec", "ngram", "--spec-ngram-max", "0"], "--spec-ngram-max expects"),
    (["--spec", "ngram", "--spec-trace", "/nonexistent-dir/t.jsonl"], "cannot open the file for writing"),
    (["--draft", "some-assistant-dir"], "some-assistant-dir/config.json: cannot open"),
    (["--spec"], "--spec needs a value"),
])
def test_bad_values(g4_bin, args, message):
    r = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-causal-tiny", "--prompt-ids", "2,5,7", "-n", 4, *args)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert message in err and err.count("\n") == 1, err
