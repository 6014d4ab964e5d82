"""--profile's forward-phase report, and bench/synth_weights.py (the device runs' weights): a
checkpoint rebuilt from its safetensors head loads and runs, with the same tensor table."""
import json
import re
import struct
import subprocess
import sys

import numpy as np

from conftest import FIXTURES, ROOT, run_g4

NUM = r"-?[0-9.]+(?:e[-+]?[0-9]+)?"
PHASES = ["row passes", "bf16 rounding", "q/k/v", "attention", "o", "gate/up", "down", "LM head", "other"]


def profile_lines(stderr):
    """{kind: (total seconds, {phase: seconds})} from --profile's report on stderr."""
    out = {}
    for line in stderr.splitlines():
        m = re.match(r"profile: (one-row|multi-row) steps, (%s) s:(.*)$" % NUM, line)
        if m:
            phases = {p.strip(): float(v) for p, v in re.findall(r"([^;:]+?) (%s) \(-?[0-9.]+%%\)" % NUM, m.group(3))}
            out[m.group(1)] = (float(m.group(2)), phases)
    return out


def test_profile_reports_every_phase(g4_bin, tmp_path):
    r = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-cond-tiny", "--prompt-ids", ",".join(["2"] + ["7"] * 40),
               "-n", 6, "--ids", "--ignore-eos", "--prefill-bf16", "--profile")
    assert r.returncode == 0, r.stderr.decode()
    prof = profile_lines(r.stderr.decode())
    assert set(prof) == {"one-row", "multi-row"}, r.stderr.decode()
    for kind, (total, phases) in prof.items():
        assert list(phases) == PHASES, phases
        assert total > 0 and all(v >= 0 for p, v in phases.items() if p != "other")
        assert phases["other"] >= -0.01 * total
        # the phases are disjoint parts of the forward time ("other" is the remainder)
        assert abs(sum(phases.values()) - total) <= 0.002 + 0.01 * total, (kind, total, phases)
    assert prof["multi-row"][1]["bf16 rounding"] > 0     # prompt rows only
    assert prof["one-row"][1]["bf16 rounding"] == 0
    assert prof["multi-row"][1]["q/k/v"] > 0 and prof["one-row"][1]["LM head"] > 0


def test_no_profile_without_the_flag(g4_bin):
    r = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-cond-tiny", "--prompt-ids", "2,5,7", "-n", 2, "--ids")
    assert r.returncode == 0 and b"profile:" not in r.stderr


def test_synth_weights_round_trip(g4_bin, tmp_path):
    src = FIXTURES / "g4-causal-tiny"   # one safetensors file (synth_weights.py takes one file)
    head = tmp_path / "model.safetensors.head"
    out = tmp_path / "m"
    out.mkdir()
    tool = ROOT / "bench" / "synth_weights.py"
    subprocess.run([sys.executable, tool, "head", head, src / "model.safetensors"], check=True, capture_output=True)
    subprocess.run([sys.executable, tool, "fill", head, out / "model.safetensors"], check=True, capture_output=True)
    for f in ("config.json", "generation_config.json"):
        (out / f).write_bytes((src / f).read_bytes())
    orig, new = (src / "model.safetensors").read_bytes(), (out / "model.safetensors").read_bytes()
    n = 8 + struct.unpack("<Q", orig[:8])[0]
    assert len(new) == len(orig) and new[:n] == orig[:n]     # same size, same header
    assert new[n:] != orig[n:]
    # random bf16 N(0, 0.02): every value finite and small
    body = np.frombuffer(new[n:n + (len(new) - n) // 2 * 2], dtype="<u2").astype(np.uint32) << 16
    vals = body.view(np.float32)
    assert np.isfinite(vals).all() and np.abs(vals).max() < 0.2
    assert json.loads(orig[8:n]) == json.loads(new[8:n])
    r = run_g4(g4_bin, "run", "-m", out, "--prompt-ids", "2,5,7", "-n", 4, "--ids", "--ignore-eos")
    assert r.returncode == 0, r.stderr.decode()
    assert len(json.loads(r.stdout)) == 4
