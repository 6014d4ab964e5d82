#!/usr/bin/env python3
"""Records llama.cpp's greedy continuations on the Gemma 4 GGUF fixtures (tests/fixtures/g4-gguf/,
written by make_gemma4_gguf.py) for the prompts of the HF fixtures' goldens.json, into
tests/fixtures/g4-gguf/llamacpp_greedy.json. tests/py/test_gemma4_gguf.py checks gemma4c's Q8_0
tokens against it (CI cannot build llama.cpp, so the tokens are committed).

Compiles llamacpp_greedy.c (next to this file) against a llama.cpp build: LLAMA_CPP_DIR (or the
first argument) with libllama in build/bin, e.g.
  cmake -B build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF && cmake --build build -j2 --target llama-simple
llama.cpp runs with one thread, the whole prompt in one batch, flash attention off and an f32 KV
cache (gemma4c's cache is f32; an f16 cache, llama.cpp's default, is recorded alongside for the
note). "margin" is llama.cpp's top-1 minus top-2 logit at each greedy step; lc_logits_*.f32 are its
last-prompt-position logits (after the softcap, float32 LE).

With --k256: the Q5_K_M, IQ4_XS, Q3_K_M, Q2_K and IQ4_NL files of g4-causal-k256 instead (16 tokens, f32 cache), into
llamacpp_k256.json and lc_logits_causal-k256-<type>_<k>.f32, for test_numerics_ggml.py; recorded
with an x86 AVX2 build (--build DIR: cmake -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON
-DGGML_F16C=ON), whose int8 dots those tests mirror (a native AVX-512 build differs from it in the
last bits on a few prompts).

usage: python3 tools/reference/record_llamacpp_greedy.py [LLAMA_CPP_DIR] [-n 64] [--build DIR] [--k256]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "g4-gguf"
FILES = {"cond": "g4-cond-tiny", "causal": "g4-causal-tiny"}


def commit(lc):
    p = subprocess.run(["git", "-C", str(lc), "rev-parse", "HEAD"], capture_output=True, text=True)
    if p.returncode == 0:
        return p.stdout.strip()
    c = pathlib.Path(lc) / "COMMIT"
    return c.read_text().strip() if c.exists() else "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("llama_cpp", nargs="?", default=os.environ.get("LLAMA_CPP_DIR"))
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--build", default=None, help="the build directory (default LLAMA_CPP_DIR/build)")
    ap.add_argument("--k256", action="store_true")
    a = ap.parse_args()
    lc = pathlib.Path(a.llama_cpp or "")
    build = pathlib.Path(a.build) if a.build else lc / "build"
    if not (lc / "include" / "llama.h").exists() or not (build / "bin").is_dir():
        raise SystemExit("pass a built llama.cpp checkout (argument or LLAMA_CPP_DIR)")
    with tempfile.TemporaryDirectory() as tmp:
        exe = pathlib.Path(tmp) / "llamacpp_greedy"
        lib = build / "bin"
        subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{lc}/include", f"-I{lc}/ggml/include",
                        str(ROOT / "tools" / "reference" / "llamacpp_greedy.c"), f"-L{lib}", "-lllama", "-lggml",
                        "-lggml-base", f"-Wl,-rpath,{lib}", "-o", str(exe)], check=True)
        if a.k256:
            record_k256(exe, lc)
            return
        result = {"llama_cpp_commit": commit(lc), "n": a.n,
                  "settings": "1 thread, prompt in one batch, flash attention off, greedy = argmax of the logits",
                  "files": {}}
        for prefix, fixture in FILES.items():
            cases = json.loads((ROOT / "tests" / "fixtures" / fixture / "goldens.json").read_text())["cases"]
            prompts = "".join(",".join(map(str, c["prompt_ids"])) + "\n" for c in cases)
            for t in ("q8_0", "bf16"):
                name = f"{prefix}-{t}.gguf"
                runs = {}
                for kv in ("f32", "f16"):
                    # the f32 run also writes each prompt's last-position logits (lc_logits_<file>_<k>.f32)
                    extra = [str(OUT / f"lc_logits_{name[:-5]}_")] if kv == "f32" else []
                    p = subprocess.run([str(exe), str(OUT / name), str(a.n), kv] + extra, input=prompts,
                                       capture_output=True, text=True, check=True)
                    runs[kv] = [json.loads(l) for l in p.stdout.splitlines()]
                result["files"][name] = {
                    "fixture": fixture,
                    "cases": [{"name": c["name"], "prompt_ids": c["prompt_ids"], "greedy": r32["greedy"],
                               "logits_file": f"lc_logits_{name[:-5]}_{k}.f32",
                               "margin": [round(m, 5) for m in r32["margin"]], "greedy_kv_f16": r16["greedy"]}
                              for k, (c, r32, r16) in enumerate(zip(cases, runs["f32"], runs["f16"]))]}
                same = sum(x["greedy"] == y["greedy"] for x, y in zip(runs["f32"], runs["f16"]))
                print(f"{name}: {len(cases)} prompts; kv f32 == kv f16 on {same}", file=sys.stderr)
    (OUT / "llamacpp_greedy.json").write_text(json.dumps(result, indent=1) + "\n")


def record_k256(exe, lc, n=16):
    cases = json.loads((ROOT / "tests" / "fixtures" / "g4-causal-k256" / "goldens.json").read_text())["cases"]
    prompts = "".join(",".join(map(str, c["prompt_ids"])) + "\n" for c in cases)
    result = {"llama_cpp_commit": commit(lc), "n": n, "settings": "x86 AVX2 build, 1 thread, prompt in one batch, "
              "flash attention off, f32 KV cache, weight repacking off (use_extra_bufts = false: the x86 build "
              "otherwise repacks the Q4_K matrices of the Q3_K_M file into 8-row blocks whose GEMM sums in "
              "another order; the other files give the same bits either way), greedy = argmax of the logits",
              "files": {}}
    for t in ("q5_k_m", "iq4_xs", "q3_k_m", "q2_k", "iq4_nl", "q4_1", "q5_1"):
        name = f"causal-k256-{t}.gguf"
        p = subprocess.run([str(exe), str(OUT / name), str(n), "f32", str(OUT / f"lc_logits_{name[:-5]}_")],
                           input=prompts, capture_output=True, text=True, check=True, env={**os.environ, "NO_REPACK": "1"})
        runs = [json.loads(l) for l in p.stdout.splitlines()]
        result["files"][name] = {"cases": [{"name": c["name"], "prompt_ids": c["prompt_ids"], "greedy": r["greedy"],
                                            "logits_file": f"lc_logits_{name[:-5]}_{k}.f32"}
                                           for k, (c, r) in enumerate(zip(cases, runs))]}
        print(f"{name}: {len(cases)} prompts", file=sys.stderr)
    (OUT / "llamacpp_k256.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
