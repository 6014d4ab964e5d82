"""Shared pytest fixtures: where the gemma4c binary, the repo and the shared test data live."""
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
SHARED = ROOT.parent / "shared" / "data"


def fixture_cases(golden_file):
    """(fixture dir, case) for every case of every tests/fixtures dir that has `golden_file`
    (goldens.json, prefill_bf16.json), in name order."""
    out = []
    for d in sorted(FIXTURES.iterdir()):
        g = d / golden_file
        if g.exists():
            out += [(d, c) for c in json.loads(g.read_text())["cases"]]
    return out


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running; skipped in the sanitizer run")


@pytest.fixture(scope="session")
def g4_bin():
    b = os.environ.get("G4_BIN", str(ROOT / "build" / "gemma4c"))
    assert os.path.exists(b), f"gemma4c binary not built: {b}"
    return b


def run_g4(g4_bin, *args, input=None, timeout=600, env=None):
    """Runs gemma4c and returns the CompletedProcess (bytes stdout/stderr); `env` adds variables."""
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    return subprocess.run([g4_bin, *map(str, args)], input=input, capture_output=True,
                          timeout=timeout, env=full_env)


def g4_logits(g4_bin, tmp_path, model, prompt, *extra):
    """`gemma4c logits` on a list of prompt ids (--ctx 512): the last position's logits."""
    import numpy as np
    out = tmp_path / "logits.f32"
    r = run_g4(g4_bin, "logits", "-m", model, "--prompt-ids", ",".join(map(str, prompt)), "-o", out,
               "--ctx", 512, *extra)
    assert r.returncode == 0, r.stderr.decode()
    return np.fromfile(out, dtype="<f4")


def g4_greedy(g4_bin, model, prompt, n, *extra):
    """`gemma4c run --ids --ignore-eos` on a list of prompt ids (--ctx 512): n greedy token ids."""
    import json
    r = run_g4(g4_bin, "run", "-m", model, "--prompt-ids", ",".join(map(str, prompt)), "-n", n, "--ids",
               "--ignore-eos", "--ctx", 512, *extra)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)
