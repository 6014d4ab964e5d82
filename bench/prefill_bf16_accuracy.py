#!/usr/bin/env python3
"""How far --prefill-bf16 lands from the exact mode, measured with gemma4c alone: for every
prompt, the last prompt position's logits (max |delta| / max |logit|, argmax agreement) and the
greedy continuation (tokens identical before the first difference), exact vs --prefill-bf16.

Prompts: every case of every fixture with a goldens.json (tests/fixtures); with --real GGUF the 14
real-text prompts of tests/fixtures/gemma3-270m/greedy.json on that file — the real Gemma 3 270M
requantized to BF16, e.g. `llama-quantize --allow-requantize "$(scripts/gemma3-270m.sh)" g3-bf16.gguf
BF16` (the mode only touches bf16 weights); with --model DIR also NPROMPTS random-id prompts of
each --lengths on that checkpoint (beware: a wide random-weight model such as the bench model is
so chaotic that even the exact mode's float32 summation order moves its logits by ~1% against
transformers, and bf16 rounding by >100%; it measures nothing about a trained model).
Prints a markdown table and a summary line.

Usage: python3 bench/prefill_bf16_accuracy.py [--bin build/gemma4c] [--real GGUF] [--model DIR]
       [--lengths 16,64,256] [--nprompts 3] [--ngen 32] [--threads N]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, *cmd):
    r = subprocess.run([args.bin, *map(str, cmd), "--threads", args.threads], capture_output=True)
    if r.returncode:
        sys.exit(f"{' '.join(map(str, cmd))}: {r.stderr.decode()}")
    return r.stdout


def measure(args, model, ids, ctx):
    """(max relative logit error, argmax equal, greedy tokens agreeing, greedy length)"""
    out = {}
    s = ",".join(map(str, ids))
    for mode, extra in (("exact", []), ("bf16", ["--prefill-bf16"])):
        with tempfile.NamedTemporaryFile(suffix=".f32") as f:
            run(args, "logits", "-m", model, "--prompt-ids", s, "-o", f.name, "--ctx", ctx, *extra)
            lg = np.fromfile(f.name, dtype="<f4")
        toks = json.loads(run(args, "run", "-m", model, "--prompt-ids", s, "-n", args.ngen, "--ids",
                              "--ignore-eos", "--ctx", ctx, *extra))
        out[mode] = (lg, toks)
    (a, ta), (b, tb) = out["exact"], out["bf16"]
    rel = float(np.abs(a - b).max() / np.abs(a).max())
    agree = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), len(ta))
    return rel, int(a.argmax()) == int(b.argmax()), agree, len(ta)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "gemma4c"))
    ap.add_argument("--real")
    ap.add_argument("--model")
    ap.add_argument("--lengths", default="16,64,256")
    ap.add_argument("--nprompts", type=int, default=3)
    ap.add_argument("--ngen", type=int, default=32)
    ap.add_argument("--threads", default=str(os.cpu_count() or 1))
    args = ap.parse_args()
    rows = []
    fx = os.path.join(ROOT, "tests", "fixtures")
    for name in sorted(os.listdir(fx)):
        g = os.path.join(fx, name, "goldens.json")
        if not os.path.exists(g):
            continue
        for c in json.load(open(g))["cases"]:
            rows.append((name, c["name"], len(c["prompt_ids"]), *measure(args, os.path.join(fx, name), c["prompt_ids"], 512)))
    if args.real:
        real = json.load(open(os.path.join(fx, "gemma3-270m", "greedy.json")))
        for i, c in enumerate(real["cases"]):
            rows.append((os.path.basename(args.real), f"text{i}", len(c["prompt_ids"]),
                         *measure(args, args.real, c["prompt_ids"], 4096)))
    if args.model:
        vocab = json.load(open(os.path.join(args.model, "config.json")))
        vocab = vocab.get("text_config", vocab)["vocab_size"]
        rng = random.Random(7)
        for n in map(int, args.lengths.split(",")):
            for i in range(args.nprompts):
                ids = [2] + [rng.randrange(1000, vocab) for _ in range(n - 1)]
                rows.append((os.path.basename(os.path.normpath(args.model)), f"random{i}", n,
                             *measure(args, args.model, ids, n + args.ngen + 1)))
    print("| model | prompt | tokens | max rel logit error | argmax same | greedy tokens identical |")
    print("|---|---|---:|---:|:---:|---:|")
    for m, p, n, rel, same, agree, ng in rows:
        print(f"| {m} | {p} | {n} | {rel:.2e} | {'yes' if same else 'no'} | {agree}/{ng} |")
    rels = [r[3] for r in rows]
    print(f"\n{len(rows)} prompts: max relative logit error median {np.median(rels):.2e}, max {max(rels):.2e}; "
          f"argmax same {sum(r[4] for r in rows)}/{len(rows)}; greedy identical to the end "
          f"{sum(r[5] == r[6] for r in rows)}/{len(rows)}")


if __name__ == "__main__":
    main()
