"""`gemma4c run --draft DIR` (speculative decoding with Gemma 4's MTP drafter; docs/speculative.md)
against transformers' assisted generation (tests/fixtures/mtp/<drafter>/goldens.json, recorded by
tools/reference/record_mtp_goldens.py on the g4-causal-tiny target): every verify round's drafted
ids and accepted count identical to transformers' rounds, the output identical to plain greedy,
on scalar kernels and, where the CPU has it, amx (a verify row's logits then equal a one-row
step's for these short rows: docs/numerics.md), and with the target split over --tp 2 (the
drafter on rank 0 reading each rank's KV heads; sliding heads split, the full layer's one
replicated): on the threads backend, and over MPI (rank 0 gathering rank 1's KV rows each round
and its embedding rows each step). The
drafter's own forward (logits, each round standalone) is tested in tests/c/test_mtp.c."""
import json
import os
import subprocess

import pytest

from conftest import FIXTURES, run_g4
from test_tp import MPI_ENV, MPIRUN, need_mpi

TARGET = FIXTURES / "g4-causal-tiny"
DRAFTERS = ["random", "friendly", "friendly-ordered"]


def _isas():
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    return ["scalar"] + (["amx"] if " amx_bf16" in flags and " amx_tile" in flags else [])


def goldens(name):
    return json.loads((FIXTURES / "mtp" / name / "goldens.json").read_text())


def run_ids(g4_bin, prompt, n, *extra, isa="scalar", mpi=0):
    args = ["run", "-m", TARGET, "--prompt-ids", ",".join(map(str, prompt)), "-n", n, "--ids", "--ctx", 256,
            "--threads", 1, *extra]
    if mpi:   # mpi ranks under mpirun: --tp mpi --tp-backend mpi
        r = subprocess.run([MPIRUN, "-np", str(mpi), g4_bin, *map(str, args), "--tp", str(mpi), "--tp-backend", "mpi"],
                           capture_output=True, timeout=300, env={**os.environ, **MPI_ENV, "G4_CPU_ISA": isa})
    else:
        r = run_g4(g4_bin, *args, env={"G4_CPU_ISA": isa})
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout), r.stderr.decode()


@pytest.mark.parametrize("isa,tp", [(isa, 1) for isa in _isas()] + [("scalar", 2)])
@pytest.mark.parametrize("name", DRAFTERS)
def test_trace_matches_transformers(g4_bin, tmp_path, name, isa, tp):
    check_trace(g4_bin, tmp_path, name, isa, "--tp", tp)


def test_trace_matches_transformers_mpi(g4_bin, tmp_path):
    """--tp 2 over MPI: the drafter on rank 0 reads rank 1's sliding KV heads from the rows the
    round gathers, and the embedding rows of rank 1's vocabulary half from that process; rounds
    as transformers', the output plain greedy's at the same --tp."""
    need_mpi()
    check_trace(g4_bin, tmp_path, "friendly", "scalar", mpi=2)
    case = goldens("friendly")["cases"][0]
    plain, _ = run_ids(g4_bin, case["prompt"], goldens("friendly")["n_new"], mpi=2)
    assert plain == case["greedy"]


def check_trace(g4_bin, tmp_path, name, isa, *extra, mpi=0):
    g = goldens(name)
    kept = []
    for case in g["cases"]:
        trace = tmp_path / f"{case['name']}.jsonl"
        got, _ = run_ids(g4_bin, case["prompt"], g["n_new"], "--draft", FIXTURES / "mtp" / name, "--spec-trace", trace,
                         *extra, isa=isa, mpi=mpi)
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
