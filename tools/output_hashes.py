#!/usr/bin/env python3
"""Hashes what the engine computes on every golden case, for checking that a change of code layout
changes no bit: last-position logits (`gemma4c logits`) at several prefill chunk sizes and greedy
token ids (`gemma4c run --ids`), on every kernel path this CPU has (G4_CPU_ISA), in each numerics
mode (exact, --prefill-bf16, --act-q8 and --numerics ggml on the GGUF fixtures), with --tp 2, and
several slots decoding at once (`bench --batch`'s first tokens are not printed, so the server's
batched decode is left to tests/py/test_server.py). Prints one "name hash" line per output, sorted;
run it before and after and diff the two files.

usage: tools/output_hashes.py BIN > hashes.txt"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"


def isas():
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    out = ["scalar"]
    if " avx2" in flags and " fma" in flags:
        out.append("avx2")
        if " avx512f" in flags:
            out.append("avx512")
            if " avx512_bf16" in flags:
                out.append("avx512bf16")
                if " amx_bf16" in flags:
                    out.append("amx")
    return out


def run(bin_, args, isa, tmp):
    env = dict(os.environ, G4_CPU_ISA=isa)
    r = subprocess.run([bin_] + [str(a) for a in args], env=env, capture_output=True)
    if r.returncode:
        return "exit%d:%s" % (r.returncode, r.stderr.decode().strip().splitlines()[-1:])
    data = Path(tmp).read_bytes() if "-o" in args else r.stdout
    return hashlib.sha256(data).hexdigest()[:16]


def main():
    bin_ = sys.argv[1]
    tmp = os.path.join(tempfile.mkdtemp(prefix="g4-hashes-"), "logits.f32")
    cases = []
    for d in sorted(FIX.iterdir()):
        g = d / "goldens.json"
        if g.exists():
            cases += [(d, d.name, c) for c in json.loads(g.read_text())["cases"]]
    gg = FIX / "g4-gguf"
    for f in ("causal-bf16.gguf", "causal-q8_0.gguf"):
        for c in json.loads((FIX / "g4-causal-tiny" / "goldens.json").read_text())["cases"]:
            cases.append((gg / f, f, c))
    lines = []
    for isa in isas():
        for path, name, c in cases:
            ids = ",".join(map(str, c["prompt_ids"]))
            n = len(c.get("greedy", [])) or 8
            gguf = str(path).endswith(".gguf")
            modes = [("exact", [])]
            if not gguf:
                modes.append(("bf16", ["--prefill-bf16"]))
            else:
                modes += [("actq8", ["--act-q8"]), ("ggml", ["--numerics", "ggml"])]
            for mode, extra in modes:
                for chunk in (7, 256):
                    key = f"{isa} {name}:{c['name']} {mode} chunk{chunk}"
                    lines.append(key + " logits " + run(bin_, ["logits", "-m", path, "--prompt-ids", ids, "-o", tmp,
                                                              "--prefill-chunk", chunk, "--ctx", 512] + extra, isa, tmp))
                lines.append(f"{isa} {name}:{c['name']} {mode} greedy " +
                             run(bin_, ["run", "-m", path, "--prompt-ids", ids, "-n", n, "--ids", "--ignore-eos",
                                        "--ctx", 512] + extra, isa, tmp))
            if isa == isas()[-1] and not gguf:
                lines.append(f"{isa} {name}:{c['name']} tp2 logits " +
                             run(bin_, ["logits", "-m", path, "--prompt-ids", ids, "-o", tmp, "--ctx", 512, "--tp", 2],
                                 isa, tmp))
    print("\n".join(sorted(lines)))


if __name__ == "__main__":
    main()
