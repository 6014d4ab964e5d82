#!/usr/bin/env python3
"""Converts the random-weight Gemma 4 fixtures to GGUF with llama.cpp's own converter
(convert_hf_to_gguf.py and its bundled gguf-py), bf16 and Q8_0, into tests/fixtures/g4-gguf/; a
type the converter does not write (q5_k_m, iq4_xs, q3_k_m, q2_k, iq4_nl, q4_1, q5_1) is made from its bf16 file by the checkout's built
llama-quantize (build/bin/llama-quantize, cmake target llama-quantize) with that recipe.
Nothing of llama.cpp is copied into this repo: pass a llama.cpp checkout (argument or
LLAMA_CPP_DIR) and the converter runs from there.

Two shims, both applied to a temporary copy of the fixture, never to the converter's code:
  * config spelling: transformers >= 5.24 serializes the full-layer overrides as `per_layer_config`
    and its AutoConfig drops `global_head_dim` / `num_global_key_value_heads`, the spelling the
    converter reads (the published checkpoint's). The converter's load_hparams is wrapped to put
    them back from per_layer_config (refusing overrides that disagree), and to add
    `expert_intermediate_size: null`, a key older transformers serialized and the converter looks up.
  * architecture name (g4-causal-tiny only): the converter registers Gemma4ForCausalLM but not
    Gemma4UnifiedForCausalLM; their text stacks and tensor names are the same, so the copy's
    config.json says Gemma4ForCausalLM.

usage: "$G4_REF_PY" tools/reference/make_gemma4_gguf.py [LLAMA_CPP_DIR] [--out DIR]
       [--fixtures g4-cond-tiny g4-causal-tiny] [--types bf16 q8_0]
       "$G4_REF_PY" tools/reference/make_gemma4_gguf.py --fixtures g4-causal-k256 --types q5_k_m iq4_xs q3_k_m q2_k iq4_nl q4_1 q5_1
convert.json keeps the entries of files not made by this run.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Runs inside the converter's process: wraps ModelBase.load_hparams, then runs the converter as __main__.
SHIM = r'''
import runpy, sys
lc = sys.argv[1]
sys.path.insert(0, lc)
sys.path.insert(1, lc + "/gguf-py")
import conversion.base as B
orig = B.ModelBase.load_hparams
def load_hparams(dir_model, is_mistral_format):
    c = orig(dir_model, is_mistral_format)
    t = c.get("text_config", c)
    plc = t.get("per_layer_config") or {}
    if plc and t.get("global_head_dim") is None:
        vals = {(v.get("head_dim"), v.get("num_key_value_heads")) for v in plc.values()}
        if len(vals) != 1:
            raise SystemExit(f"per_layer_config overrides differ between layers: {vals}")
        t["global_head_dim"], t["num_global_key_value_heads"] = vals.pop()
    t.setdefault("expert_intermediate_size", None)
    return c
B.ModelBase.load_hparams = staticmethod(load_hparams)
sys.argv = [lc + "/convert_hf_to_gguf.py"] + sys.argv[2:]
runpy.run_path(lc + "/convert_hf_to_gguf.py", run_name="__main__")
'''

# fixture -> the GGUF name prefix
FIXTURES = {"g4-cond-tiny": "cond", "g4-causal-tiny": "causal", "g4-causal-k256": "causal-k256"}
QUANTIZE = {"q5_k_m": "Q5_K_M", "iq4_xs": "IQ4_XS", "q3_k_m": "Q3_K_M", "q2_k": "Q2_K", "iq4_nl": "IQ4_NL",
            "q4_1": "Q4_1", "q5_1": "Q5_1"}   # llama-quantize recipes, from the bf16 conversion
RENAME = {"Gemma4UnifiedForCausalLM": "Gemma4ForCausalLM"}


def git_commit(d):
    try:
        return subprocess.run(["git", "-C", str(d), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:
        return (pathlib.Path(d) / "COMMIT").read_text().strip() if (pathlib.Path(d) / "COMMIT").exists() else "unknown"


def convert(lc, fixture, outtype, out, tmp):
    src = pathlib.Path(tmp) / fixture
    if not src.exists():
        shutil.copytree(ROOT / "tests" / "fixtures" / fixture, src)
        cfg = json.loads((src / "config.json").read_text())
        cfg["architectures"] = [RENAME.get(a, a) for a in cfg["architectures"]]
        (src / "config.json").write_text(json.dumps(cfg, indent=2))
    shim = pathlib.Path(tmp) / "shim.py"
    shim.write_text(SHIM)
    env = dict(os.environ, NO_LOCAL_GGUF="1", PYTHONPATH=str(pathlib.Path(lc) / "gguf-py"))
    cmd = [sys.executable, str(shim), str(lc), str(src), "--outtype", outtype, "--outfile", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
        raise SystemExit(f"converter failed on {fixture} ({outtype})")


def quantize(lc, fixture, recipe, out, tmp):
    src = pathlib.Path(tmp) / f"{fixture}-bf16.gguf"
    if not src.exists():
        convert(lc, fixture, "bf16", src, tmp)
    exe = pathlib.Path(lc) / "build" / "bin" / "llama-quantize"
    p = subprocess.run([str(exe), str(src), str(out), recipe], capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
        raise SystemExit(f"llama-quantize failed on {fixture} ({recipe})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("llama_cpp", nargs="?", default=os.environ.get("LLAMA_CPP_DIR"))
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "g4-gguf"))
    ap.add_argument("--fixtures", nargs="+", default=list(FIXTURES))
    ap.add_argument("--types", nargs="+", default=["bf16", "q8_0"])
    a = ap.parse_args()
    if not a.llama_cpp or not (pathlib.Path(a.llama_cpp) / "convert_hf_to_gguf.py").exists():
        raise SystemExit("pass a llama.cpp checkout (argument or LLAMA_CPP_DIR)")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in a.fixtures:
            for t in a.types:
                dst = out / f"{FIXTURES[f]}-{t}.gguf"
                if t in QUANTIZE:
                    quantize(a.llama_cpp, f, QUANTIZE[t], dst, tmp)
                else:
                    convert(a.llama_cpp, f, t, dst, tmp)
                made.append((f, t, dst.name, dst.stat().st_size))
                print(f"{f} {t} -> {dst} ({dst.stat().st_size} bytes)")
    made_names = {n for _, _, n, _ in made}
    old = json.loads((out / "convert.json").read_text())["files"] if (out / "convert.json").exists() else []
    info = {"llama_cpp_commit": git_commit(a.llama_cpp),
            "files": [e for e in old if e["file"] not in made_names]
                     + [{"fixture": f, "outtype": t, "file": n, "bytes": s} for f, t, n, s in made]}
    (out / "convert.json").write_text(json.dumps(info, indent=1) + "\n")


if __name__ == "__main__":
    main()
