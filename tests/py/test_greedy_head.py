"""The greedy LM head (src/model/lm_argmax.c): over a Q4_K / Q6_K LM head, a greedy step computes
every logit with int8 activations, bounds each one's distance from the exact logit, and recomputes
exactly only the rows that can win — the tokens must be the exact head's (--full-logits) on every
kernel path, under --tp 2, and for several slots decoding at once (bench --batch).
G4_GREEDY_HEAD_CHECK=1 takes the pre-pass over any quantized head (here the fixtures' Q8_0 ones,
whose 128-wide rows cannot be K-quants) and makes each step also run the exact head and compare
every logit with its int8 one and bound, and the token with the exact head's; the bound's
arithmetic is tested per kernel and type in tests/c/test_lm_bound.c."""
import json
import re

import pytest

from conftest import FIXTURES, g4_greedy, run_g4
from test_goldens import _isas

G = FIXTURES / "g4-gguf"
LC = json.loads((G / "llamacpp_greedy.json").read_text())


def _prompts(name, k):
    return [c["prompt_ids"] for c in LC["files"][name]["cases"][:k]]


CHECK = re.compile(r"greedy LM head check: (\d+) logits against their bound, (\d+) failures")


def _checked(stderr):
    """(logits checked, failures) from a G4_GREEDY_HEAD_CHECK=1 --profile run"""
    m = CHECK.search(stderr)
    assert m, stderr
    return int(m[1]), int(m[2])


def _profile_line(g4_bin, model, prompt, *extra, env=None):
    r = run_g4(g4_bin, "run", "-m", model, "--prompt-ids", ",".join(map(str, prompt)), "-n", 8, "--ids",
               "--ignore-eos", "--ctx", 512, "--profile", *extra, env=env)
    assert r.returncode == 0, r.stderr.decode()
    m = re.search(r"greedy LM head: (\d+) rows with the int8 pre-pass, ([\d.]+) of its rows exact per row; "
                  r"(\d+) rows on the exact head", r.stderr.decode())
    return m and (int(m[1]), float(m[2]), int(m[3]))


@pytest.mark.parametrize("isa", _isas())
@pytest.mark.parametrize("name", ["cond-q8_0.gguf", "causal-q8_0.gguf"])
def test_same_tokens_as_the_exact_head(g4_bin, name, isa):
    for prompt in _prompts(name, 3):
        r = [run_g4(g4_bin, "run", "-m", G / name, "--prompt-ids", ",".join(map(str, prompt)), "-n", 24, "--ids",
                    "--ignore-eos", "--ctx", 512, *extra, env={"G4_CPU_ISA": isa, **env})
             for extra, env in ((("--profile",), {"G4_GREEDY_HEAD_CHECK": "1"}), (("--full-logits",), {}))]
        for x in r:
            assert x.returncode == 0, x.stderr.decode()
        fast, full = (json.loads(x.stdout) for x in r)
        assert fast == full
        checked, failures = _checked(r[0].stderr.decode())
        assert checked > 0 and checked % 24 == 0 and failures == 0   # every logit of 24 steps


def test_takes_the_pre_pass_and_few_exact_rows(g4_bin):
    """by default over Q4_K / Q6_K heads only (the fixtures' 128-wide rows cannot be K-quants);
    G4_GREEDY_HEAD_CHECK=1 takes it over their Q8_0 heads too"""
    prompt = _prompts("cond-q8_0.gguf", 1)[0]
    check = {"G4_GREEDY_HEAD_CHECK": "1"}
    rows, exact, full = _profile_line(g4_bin, G / "cond-q8_0.gguf", prompt, env=check)
    assert rows == 8 and full == 0
    assert 1 <= exact <= 1024 / 16 + 1   # the fixtures' vocabulary: 1024
    assert _profile_line(g4_bin, G / "cond-q8_0.gguf", prompt) is None
    # not where it does not apply: --full-logits, --act-q8 (an int8 head already), float heads
    assert _profile_line(g4_bin, G / "cond-q8_0.gguf", prompt, "--full-logits", env=check) is None
    assert _profile_line(g4_bin, G / "cond-q8_0.gguf", prompt, "--act-q8", env=check) is None
    assert _profile_line(g4_bin, G / "cond-bf16.gguf", prompt, env=check) is None


def test_tp2(g4_bin):
    name = "causal-q8_0.gguf"
    prompt = _prompts(name, 2)[1]
    r = run_g4(g4_bin, "run", "-m", G / name, "--prompt-ids", ",".join(map(str, prompt)), "-n", 16, "--ids",
               "--ignore-eos", "--ctx", 512, "--tp", 2, env={"G4_GREEDY_HEAD_CHECK": "1"})
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == g4_greedy(g4_bin, G / name, prompt, 16, "--full-logits")
    r = run_g4(g4_bin, "run", "-m", G / name, "--prompt-ids", ",".join(map(str, prompt)), "-n", 8, "--ignore-eos",
               "--tp", 2, "--profile", env={"G4_GREEDY_HEAD_CHECK": "1"})
    assert r.returncode == 0, r.stderr.decode()
    checked, failures = _checked(r.stderr.decode())   # rank 0's half of the vocabulary
    assert checked > 0 and checked % 8 == 0 and failures == 0


def test_batched_bench_rows(g4_bin):
    """several slots' rows in one step (bench --batch 4): each row's own candidates"""
    r = run_g4(g4_bin, "bench", "-m", G / "cond-q8_0.gguf", "-p", 0, "-n", 4, "--batch", 4, "--reps", 1, "--no-peaks",
               "--profile", env={"G4_GREEDY_HEAD_CHECK": "1"})
    assert r.returncode == 0, r.stderr.decode()
    assert _checked(r.stderr.decode())[1] == 0
    m = re.search(r"greedy LM head: (\d+) rows with the int8 pre-pass, [\d.]+ of its rows exact per row; (\d+) rows",
                  r.stderr.decode())
    assert m and int(m[1]) >= 16 and int(m[2]) == 0
    assert json.loads(r.stdout.decode().strip().splitlines()[-1])["full_logits"] is False
