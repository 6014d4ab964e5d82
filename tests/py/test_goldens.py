"""Golden tests: gemma4c against transformers (float32 on the same bf16 weights), on every
fixture in tests/fixtures that has a goldens.json (written by tools/reference/record_goldens.py).
Logits within 1e-4 relative (max |Δ| / max |logit|), greedy continuations identical token for
token, for prefill chunk sizes 1, 7, 64 and 256 (the default: the longest prompt, 190 tokens, in
one step)."""
import json
import os

import numpy as np
import pytest

from conftest import FIXTURES, fixture_cases, run_g4

REL_TOL = 1e-4
CHUNKS = [1, 7, 64, 256]


CASES = fixture_cases("goldens.json")
IDS = [f"{d.name}:{c['name']}" for d, c in CASES]


def test_fixtures_present():
    names = {d.name for d, _ in CASES}
    assert len(names) >= 2, f"expected at least two golden fixtures, found {names}"


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("fixture,case", CASES, ids=IDS)
def test_logits(g4_bin, tmp_path, fixture, case, chunk):
    out = tmp_path / "logits.f32"
    ids = ",".join(map(str, case["prompt_ids"]))
    r = run_g4(g4_bin, "logits", "-m", fixture, "--prompt-ids", ids, "-o", out,
               "--prefill-chunk", chunk, "--ctx", 512)
    assert r.returncode == 0, r.stderr.decode()
    got = np.fromfile(out, dtype="<f4")
    want = np.fromfile(fixture / case["logits_file"], dtype="<f4")
    assert got.shape == want.shape
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel <= REL_TOL, f"max relative logit error {rel:.3g} > {REL_TOL}"
    assert int(np.argmax(got)) == int(np.argmax(want))


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("fixture,case", CASES, ids=IDS)
def test_greedy(g4_bin, fixture, case, chunk):
    ids = ",".join(map(str, case["prompt_ids"]))
    n = len(case["greedy"])
    r = run_g4(g4_bin, "run", "-m", fixture, "--prompt-ids", ids, "-n", n, "--ids",
               "--ignore-eos", "--prefill-chunk", chunk, "--ctx", 512)
    assert r.returncode == 0, r.stderr.decode()
    got = json.loads(r.stdout)
    assert got == case["greedy"]


def _isas():
    """The kernel paths this CPU runs: G4_CPU_ISA values (avx512: the AVX-512F prefill GEMM; the bf16
    ones add --prefill-bf16's matmul)."""
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    avx2 = " avx2" in flags and " fma" in flags
    avx512 = avx2 and " avx512f" in flags
    bf16 = avx512 and " avx512_bf16" in flags and " avx512bw" in flags and " avx512vl" in flags
    amx = bf16 and " amx_bf16" in flags and " amx_tile" in flags
    return (["scalar"] + (["avx2"] if avx2 else []) + (["avx512"] if avx512 else []) +
            (["avx512bf16"] if bf16 else []) + (["amx"] if amx else []))


@pytest.mark.parametrize("isa", _isas())
@pytest.mark.parametrize("fixture,case", [(d, c) for d, c in CASES if c["name"] in ("chunk_cross", "long")],
                         ids=[f"{d.name}:{c['name']}" for d, c in CASES if c["name"] in ("chunk_cross", "long")])
def test_forced_kernel_path(g4_bin, tmp_path, fixture, case, isa):
    """Every kernel path (G4_CPU_ISA) reproduces the goldens: logits and greedy tokens."""
    ids = ",".join(map(str, case["prompt_ids"]))
    env = {"G4_CPU_ISA": isa}
    out = tmp_path / "logits.f32"
    r = run_g4(g4_bin, "logits", "-m", fixture, "--prompt-ids", ids, "-o", out, "--ctx", 512, env=env)
    assert r.returncode == 0, r.stderr.decode()
    got, want = np.fromfile(out, dtype="<f4"), np.fromfile(fixture / case["logits_file"], dtype="<f4")
    assert np.abs(got - want).max() / np.abs(want).max() <= REL_TOL
    r = run_g4(g4_bin, "run", "-m", fixture, "--prompt-ids", ids, "-n", len(case["greedy"]), "--ids",
               "--ignore-eos", "--ctx", 512, env=env)
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == case["greedy"]


@pytest.mark.skipif("amx" not in _isas(), reason="no AMX-BF16 on this CPU")
@pytest.mark.parametrize("fixture,case", [(d, c) for d, c in CASES if c["name"] in ("chunk_cross", "long")],
                         ids=[f"{d.name}:{c['name']}" for d, c in CASES if c["name"] in ("chunk_cross", "long")])
def test_amx_decode_matmul(g4_bin, tmp_path, fixture, case):
    """Decode's matmul on AMX tiles (the default for 1-15 rows over rows under 8 KB): one-row
    prefill chunks and greedy decoding reproduce the goldens; the logits are not the FMA kernels'
    bits (the path ran), and the knobs route as documented — --amx-gemv-rows 5 (rows 1-5) gives
    the default's bits, --amx-gemv1-k-below 0 (one row never on tiles) those of
    --amx-gemv-rows 0 (never)."""
    ids = ",".join(map(str, case["prompt_ids"]))
    logits = {}
    knobs = {"default": [], "never": ["--amx-gemv-rows", "0"], "rows5": ["--amx-gemv-rows", "5"],
             "one_row_off": ["--amx-gemv1-k-below", "0"]}
    for name, flags in knobs.items():
        out = tmp_path / f"logits-{name}.f32"
        r = run_g4(g4_bin, "logits", "-m", fixture, "--prompt-ids", ids, "-o", out, "--ctx", 512,
                   "--prefill-chunk", 1, *flags, env={"G4_CPU_ISA": "amx"})
        assert r.returncode == 0, r.stderr.decode()
        logits[name] = np.fromfile(out, dtype="<f4")
    want = np.fromfile(fixture / case["logits_file"], dtype="<f4")
    assert np.abs(logits["default"] - want).max() / np.abs(want).max() <= REL_TOL
    assert not np.array_equal(logits["default"], logits["never"])
    assert np.array_equal(logits["default"], logits["rows5"])
    assert np.array_equal(logits["one_row_off"], logits["never"])
    r = run_g4(g4_bin, "run", "-m", fixture, "--prompt-ids", ids, "-n", len(case["greedy"]), "--ids",
               "--ignore-eos", "--ctx", 512, env={"G4_CPU_ISA": "amx"})
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == case["greedy"]


@pytest.mark.parametrize("isa", [i for i in ("avx512", "avx512bf16", "amx") if i not in _isas()] + ["avx3"])
def test_forced_kernel_path_unavailable(g4_bin, isa):
    """A G4_CPU_ISA this CPU cannot run, or a misspelt one, is a one-line error and exit 2."""
    fixture = FIXTURES / "g4-cond-tiny"
    r = run_g4(g4_bin, "run", "-m", fixture, "--prompt-ids", "2,5,7", "-n", 2, env={"G4_CPU_ISA": isa})
    assert r.returncode == 2
    assert f"G4_CPU_ISA={isa}: unknown or not supported by this CPU" in r.stderr.decode()
