"""The one generation path (src/generate, g4_gen) as `run` uses it — the same code the server's
scheduler and `chat` step: every eos id of generation_config.json ends a generation, its
suppress_tokens never come out, the context end is a normal stop; and the shared model-option
parser takes the measuring knobs on every model-loading command."""
import json

import numpy as np
import pytest

from conftest import FIXTURES, run_g4

M = FIXTURES / "g4-cond-tiny"
PROMPT = "2,100,200,300"


def model_copy(tmp_path, gen):
    """g4-cond-tiny with its own generation_config.json (the rest symlinked)."""
    d = tmp_path / "m"
    d.mkdir()
    for f in M.iterdir():
        if f.name != "generation_config.json":
            (d / f.name).symlink_to(f)
    (d / "generation_config.json").write_text(json.dumps(gen))
    return d


def run_ids(g4_bin, model, *extra, n=12):
    r = run_g4(g4_bin, "run", "-m", model, "--prompt-ids", PROMPT, "-n", n, "--ids", "--threads", 1, *extra)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def test_run_stops_at_every_generation_config_eos(g4_bin, tmp_path):
    free = run_ids(g4_bin, M, "--ignore-eos")
    assert len(free) == 12
    # two stop ids, neither config.json's eos: the generation ends at the first either gives
    a, b = free[5], free[2]
    d = model_copy(tmp_path, {"eos_token_id": [a, b]})
    got = run_ids(g4_bin, d)
    k = min(free.index(a), free.index(b))
    assert got == free[:k + 1]                       # the stop id is the last one generated
    assert run_ids(g4_bin, d, "--ignore-eos") == free
    # text output: the stop id adds no text; the text is the detokenized ids before it
    r = run_g4(g4_bin, "run", "-m", d, "--prompt-ids", PROMPT, "-n", 12, "--threads", 1)
    assert r.returncode == 0, r.stderr.decode()
    t = run_g4(g4_bin, "detokenize", "-m", M, "--skip-special", input=json.dumps(free[:k]).encode())
    assert r.stdout == t.stdout + b"\n"


def test_run_suppresses_generation_config_tokens(g4_bin, tmp_path):
    free = run_ids(g4_bin, M, "--ignore-eos")
    banned = free[0]
    d = model_copy(tmp_path, {"eos_token_id": [1, 6], "suppress_tokens": [banned]})
    got = run_ids(g4_bin, d, "--ignore-eos")
    assert banned not in got
    out = tmp_path / "l.f32"
    r = run_g4(g4_bin, "logits", "-m", M, "--prompt-ids", PROMPT, "-o", out, "--threads", 1)
    assert r.returncode == 0, r.stderr
    z = np.fromfile(out, dtype=np.float32)
    z[banned] = -np.inf
    assert got[0] == int(np.argmax(z))


@pytest.mark.parametrize("ids_out", [True, False])
def test_run_context_end_is_a_normal_stop(g4_bin, ids_out):
    """A context that fills up ends the generation like max tokens does: exit 0, a note on stderr
    (not "slot 0 is full" and exit 2, as before)."""
    args = ["run", "-m", M, "--prompt-ids", "2,3", "-n", 20, "--ctx", 8, "--ignore-eos", "--threads", 1]
    r = run_g4(g4_bin, *args, *(["--ids"] if ids_out else []))
    assert r.returncode == 0, r.stderr.decode()
    assert b"gemma4c run: stopped at the context limit (--ctx 8)" in r.stderr
    if ids_out:
        assert len(json.loads(r.stdout)) == 8 - 2 + 1   # the last one is generated, never fed
    # a prompt longer than the context is still bad input
    r = run_g4(g4_bin, "run", "-m", M, "--prompt-ids", ",".join(["2"] * 9), "-n", 2, "--ctx", 8)
    assert r.returncode == 2


def test_max_tokens_is_not_the_context_note(g4_bin):
    r = run_g4(g4_bin, "run", "-m", M, "--prompt-ids", "2,3", "-n", 6, "--ctx", 8, "--ignore-eos", "--ids")
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 6
    assert b"context limit" not in r.stderr


KNOBS = [["--amx-gemv-rows", 5], ["--amx-gemv-rows", "2-7"], ["--amx-gemv-rows", 0], ["--amx-gemv1-k-below", 0],
         ["--amx-pairs-rows", 0], ["--amx-pairs-rows", 16], ["--profile"]]


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: " ".join(map(str, k)))
def test_measuring_knobs_parse(g4_bin, tmp_path, knob):
    """The knobs only move products between kernels: greedy ids of the tiny model stay the same."""
    assert run_ids(g4_bin, M, "--ignore-eos", *knob, n=4) == run_ids(g4_bin, M, "--ignore-eos", n=4)
    r = run_g4(g4_bin, "logits", "-m", M, "--prompt-ids", PROMPT, "-o", tmp_path / "l.f32", *knob)
    assert r.returncode == 0, r.stderr.decode()


BAD = [(["--amx-gemv-rows", "7-2"], "--amx-gemv-rows expects"), (["--amx-gemv-rows", "x"], "--amx-gemv-rows expects"),
       (["--amx-gemv-rows", "0-3"], "--amx-gemv-rows expects"), (["--amx-pairs-rows", "-1"], "--amx-pairs-rows"),
       (["--amx-gemv1-k-below", "big"], "--amx-gemv1-k-below"), (["--amx-pairs-rows"], "needs a value")]


@pytest.mark.parametrize("cmd", ["run", "logits", "bench", "serve", "chat"])
@pytest.mark.parametrize("bad,needle", BAD, ids=lambda x: x if isinstance(x, str) else " ".join(x))
def test_measuring_knobs_bad_values(g4_bin, cmd, bad, needle):
    r = run_g4(g4_bin, cmd, "-m", M, "--prompt-ids", "2", *bad) if cmd in ("run", "logits") else \
        run_g4(g4_bin, cmd, "-m", M, *bad, input=b"")
    assert r.returncode == 2, (cmd, bad, r.stderr)
    assert needle.encode() in r.stderr and r.stderr.startswith(b"gemma4c %s: " % cmd.encode())


@pytest.mark.parametrize("cmd", ["run", "chat"])
def test_bad_generation_config_is_bad_input(g4_bin, tmp_path, cmd):
    d = model_copy(tmp_path, {})
    (d / "generation_config.json").write_text('{"eos_token_id": [1,')
    extra = ["--prompt-ids", "2"] if cmd == "run" else []
    r = run_g4(g4_bin, cmd, "-m", d, *extra, input=b"Hi!\n")
    assert r.returncode == 2, r.stderr
    assert f"{d}/generation_config.json:1:".encode() in r.stderr and r.stderr.count(b"\n") == 1
