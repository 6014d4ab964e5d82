#!/usr/bin/env python3
"""Markdown table of a bench/compare_batched.sh run (its OUT directory): per batch size B, the
median over rounds of gemma4c's aggregate decode tokens/s (`bench --batch B`, median of its reps)
and of llama-batched-bench's S_TG, their ratio, and the paired ratio (median over rounds of each
round's own ratio: the two engines of a round ran back to back)."""
import glob
import json
import os
import re
import statistics
import sys


def main(out):
    g4, ll = {}, {}
    for path in sorted(glob.glob(os.path.join(out, "gemma4c-r*-b*.json"))):
        r, b = map(int, re.search(r"-r(\d+)-b(\d+)\.json$", path).groups())
        (t,) = json.load(open(path))["tests"]
        g4.setdefault(b, {})[r] = t["tok_s"]
    for path in sorted(glob.glob(os.path.join(out, "llama-r*.jsonl"))):
        r = int(re.search(r"-r(\d+)\.jsonl$", path).group(1))
        for line in open(path):
            row = json.loads(line)
            ll.setdefault(int(row["pl"]), {})[r] = row["speed_tg"]
    read = lambda name: open(os.path.join(out, name)).read().strip() if os.path.exists(os.path.join(out, name)) else "?"
    print(f"gemma4c {read('gemma4c-commit.txt')[:12]} against llama.cpp {read('llama-commit.txt')[:12]}; "
          f"decode tokens/s over all sequences, median over {max(len(v) for v in g4.values())} rounds\n")
    print("| sequences decoding together | gemma4c tok/s | llama.cpp tok/s | ratio | paired ratio (min-max) |")
    print("|---:|---:|---:|---:|---|")
    for b in sorted(g4):
        if b not in ll:
            continue
        rounds = sorted(set(g4[b]) & set(ll[b]))
        a, c = statistics.median(g4[b].values()), statistics.median(ll[b].values())
        paired = [g4[b][r] / ll[b][r] for r in rounds]
        print(f"| {b} | {a:.2f} | {c:.2f} | {a / c:.2f}x | {statistics.median(paired):.2f}x "
              f"({min(paired):.2f}-{max(paired):.2f}) |")


if __name__ == "__main__":
    main(sys.argv[1])
