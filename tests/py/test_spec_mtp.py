"""`gemma4c run --draft DIR` (speculative decoding with Gemma 4's MTP drafter; docs/speculative.md)
against transformers' assisted generation (tests/fixtures/mtp/<drafter>/goldens.json, recorded by
tools/reference/record_mtp_goldens.py on the g4-causal-tiny target): every verify round's drafted
ids and accepted count identical to transformers' rounds, the output identical to plain greedy,
on scalar kernels and, where the CPU has it, amx (a verify row's logits then equal a one-row
step's for these short rows: docs/numerics.md), and with the target split over --tp 2 (the
drafter on rank 0 reading each rank's KV heads; sliding heads split, the full layer's one
replicated). The
drafter's own forward (logits, each round standalone) is tested in tests/c/test_mtp.c."""
import json
import os

import pytest

from conftest import FIXTURES, run_g4

TARGET = FIXTURES / "g4-causal-tiny"
DRAFTERS = ["random", "friendly", "friendly-ordered"]


def _isas():
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    return ["scalar"] + (["amx"] if " amx_bf16" in flags and " amx_tile" in flags else [])


def goldens(name):
    return json.loads((FIXTURES / "mtp" / name / "goldens.json").read_text())


def run_ids(g4_bin, prompt, n, *extra, isa="scalar"):
    r = run_g4(g4_bin, "run", "-m", TARGET, "--prompt-ids", ",".join(map(str, prompt)), "-n", n, "--ids",
               "--ctx", 256, "--threads", 1, *extra, env={"G4_CPU_ISA": isa})
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout), r.stderr.decode()


@pytest.mark.parametrize("isa,tp", [(isa, 1) for isa in _isas()] + [("scalar", 2)])
@pytest.mark.parametrize("name", DRAFTERS)
def test_trace_matches_transformers(g4_bin, tmp_path, name, isa, tp):
    g = goldens(name)
    kept = []
    for case in g["cases"]:
        trace = tmp_path / f"{case['name']}.jsonl"
        got, _ = run_ids(g4_bin, case["prompt"], g["n_new"], "--draft", FIXTURES / "mtp" / name, "--spec-trace", trace,
                         "--tp", tp, isa=isa)
        assert got == case["greedy"], case["name"]
        # transformers' last round may draft nothing (no room before max_length): a plain step, no trace line
        want = [r for r in case["rounds"] if r["drafted"]]
        rounds = [json.loads(line) for line in open(trace)]
        assert rounds == want, case["name"]
        kept += [r["accepted"] for r in rounds]
    if name != "random":
        assert max(kept) == g["num_assistant_tokens"], "no round kept every draft"


def test_draft_max_and_plain_greedy(g4_bin, tmp_path):
    """--draft-max caps a round below num_assistant_tokens; the output stays plain greedy's."""
    case = goldens("friendly")["cases"][0]
    plain, _ = run_ids(g4_bin, case["prompt"], 24)
    trace = tmp_path / "t.jsonl"
    got, err = run_ids(g4_bin, case["prompt"], 24, "--draft", FIXTURES / "mtp" / "friendly", "--draft-max", 2,
                       "--spec-trace", trace, "-v")
    assert got == plain == case["greedy"][:24]
    rounds = [json.loads(line) for line in open(trace)]
    assert rounds and all(1 <= len(r["drafted"]) <= 2 for r in rounds)
    assert "speculative:" in err


@pytest.mark.parametrize("args,message", [
    (["--draft", "tests/fixtures/g4-causal-tiny"], "not a Gemma 4 MTP drafter"),
    (["--draft", "/nonexistent-drafter"], "/nonexistent-drafter/config.json: cannot open"),
    (["--draft", "tests/fixtures/mtp/random", "--spec", "ngram"], "--draft and --spec ngram exclude each other"),
    (["--draft", "tests/fixtures/mtp/random", "--spec-ngram-max", "3"], "--spec-ngram-max needs --spec ngram"),
    (["--draft", "tests/fixtures/mtp/random", "--tp-backend", "mpi"], "--draft: not with --tp-backend mpi"),
])
def test_bad_drafters(g4_bin, args, message):
    r = run_g4(g4_bin, "run", "-m", TARGET, "--prompt-ids", "2,5,7", "-n", 4, *args)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert message in err and err.count("\n") == 1, err


def test_drafter_for_another_target(g4_bin):
    r = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-cond-tiny", "--prompt-ids", "2,5,7", "-n", 4,
               "--draft", FIXTURES / "mtp" / "random")
    assert r.returncode == 2
    err = r.stderr.decode()
    assert "drafter vocabulary 512 != the target's 1024" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("seed", [1, 7])
def test_seeded_sampling_identical(g4_bin, seed):
    """Sampling with MTP drafts draws every token as plain sampling does (the loop's point-mass
    rejection sampling): the same seed gives the same tokens."""
    case = goldens("friendly")["cases"][1]
    args = ("--temp", "0.7", "--top-k", "20", "--seed", seed)
    plain, _ = run_ids(g4_bin, case["prompt"], 32, *args)
    got, _ = run_ids(g4_bin, case["prompt"], 32, *args, "--draft", FIXTURES / "mtp" / "friendly")
    assert got == plain
