#!/usr/bin/env python3
"""Converts g4-cond-mm-tiny with llama.cpp's own converter into a text GGUF (bf16) and its mmproj
GGUF (`--mmproj`, f32: the embedders' bf16 values widened exactly), into tests/fixtures/g4-mmproj/,
for `-m text.gguf --mmproj mmproj.gguf` in tests/py/test_pack_multimodal.py.

The converter reads image_mean / image_std from the processor files, which the fixture does not
carry: the temporary copy gets transformers' Gemma4UnifiedImageProcessor saved beside it (the
geometry of record_mm_goldens.py). The config shims are make_gemma4_gguf.py's.

usage: "$G4_REF_PY" tools/reference/make_mmproj_gguf.py [LLAMA_CPP_DIR] [--out DIR]
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from make_gemma4_gguf import ROOT, SHIM, git_commit
from transformers.models.gemma4_unified.image_processing_gemma4_unified import Gemma4UnifiedImageProcessor

FIXTURE = "g4-cond-mm-tiny"


def run_converter(lc, src, out, tmp, *extra):
    shim = pathlib.Path(tmp) / "shim.py"
    shim.write_text(SHIM)
    env = dict(os.environ, NO_LOCAL_GGUF="1", PYTHONPATH=str(pathlib.Path(lc) / "gguf-py"))
    cmd = [sys.executable, str(shim), str(lc), str(src), *extra, "--outfile", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
        raise SystemExit(f"converter failed: {' '.join(extra)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("llama_cpp", nargs="?", default=os.environ.get("LLAMA_CPP_DIR"))
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "g4-mmproj"))
    a = ap.parse_args()
    if not a.llama_cpp or not (pathlib.Path(a.llama_cpp) / "convert_hf_to_gguf.py").exists():
        raise SystemExit("pass a llama.cpp checkout (argument or LLAMA_CPP_DIR)")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / FIXTURE
        shutil.copytree(ROOT / "tests" / "fixtures" / FIXTURE, src)
        Gemma4UnifiedImageProcessor(max_soft_tokens=70, patch_size=4, pooling_kernel_size=2).save_pretrained(src)
        run_converter(a.llama_cpp, src, out / "mm-bf16.gguf", tmp, "--outtype", "bf16")
        run_converter(a.llama_cpp, src, out / "mmproj-bf16.gguf", tmp, "--mmproj", "--outtype", "bf16")
    files = {f: (out / f).stat().st_size for f in ("mm-bf16.gguf", "mmproj-bf16.gguf")}
    for f, n in files.items():
        print(f"{FIXTURE} -> {out / f} ({n} bytes)")
    info = {"llama_cpp_commit": git_commit(a.llama_cpp), "fixture": FIXTURE, "files": files}
    (out / "convert.json").write_text(json.dumps(info, indent=1) + "\n")


if __name__ == "__main__":
    main()
