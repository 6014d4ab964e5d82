#!/usr/bin/env python3
"""Markdown table of a bench/compare_batched.sh run (its OUT directory): per batch size B, the
median over rounds of gemma4c's aggregate decode tokens/s (`bench --batch B`, median of its reps)
and of llama-batched-bench's S_TG, their ratio, and the paired ratio (median over rounds of each
round's own ratio: the two engines of a round ran back to back)."""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fmt, med, read, round_no  # noqa: E402


def main(out):
    g4, ll = {}, {}
    for path in sorted(glob.glob(os.path.join(out, "gemma4c-r*-b*.json"))):
        r, b = map(int, re.search(r"-r(\d+)-b(\d+)\.json$", path).groups())
        (t,) = json.load(open(path))["tests"]
        g4.setdefault(b, {})[r] = t["tok_s"]
    for path in sorted(glob.glob(os.path.join(out, "llama-r*.jsonl"))):
        r = round_no(path)
        for line in read(path).splitlines():
            row = json.loads(line)
            ll.setdefault(int(row["pl"]), {})[r] = row["speed_tg"]
    commit = lambda name: read(os.path.join(out, name), "?")[:12]
    print(f"gemma4c {commit('gemma4c-commit.txt')} against llama.cpp {commit('llama-commit.txt')}; "
          f"decode tokens/s over all sequences, median over {max(len(v) for v in g4.values())} rounds\n")
    print("| sequences decoding together | gemma4c tok/s | llama.cpp tok/s | ratio | paired ratio (min-max) |")
    print("|---:|---:|---:|---:|---|")
    for b in sorted(g4):
        if b not in ll:
            continue
        rounds = sorted(set(g4[b]) & set(ll[b]))
        a, c = med(list(g4[b].values())), med(list(ll[b].values()))
        paired = [g4[b][r] / ll[b][r] for r in rounds]
        print(f"| {b} | {fmt(a)} | {fmt(c)} | {fmt(a / c)}x | {fmt(med(paired))}x "
              f"({fmt(min(paired))}-{fmt(max(paired))}) |")


if __name__ == "__main__":
    main(sys.argv[1])
