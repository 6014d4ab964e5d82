#!/usr/bin/env python3
"""Markdown report of a bench/compare_batched.sh run (its OUT directory): per batch size B, the
median over rounds of gemma4c's aggregate decode tokens/s (`bench --batch B`, median of its reps)
and of llama-batched-bench's S_TG, the paired ratio (median over rounds of each round's own
ratio: the two engines of a round ran back to back), and each engine's fraction of the bandwidth
roofline. The roofline is gemma4c bench's own for that round and B: the read bandwidth it measured
÷ the weight bytes a step reads (every layer matrix and the LM head once) per token of the step's B
tokens; llama.cpp's fraction is its S_TG over that same roofline (same weights, same bytes).
Standard library only."""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import dirty_note, fmt, lscpu_summary, med, read, round_loads, shown_path  # noqa: E402


def load(out):
    """{B: {round: gemma4c's test record}}, {B: {round: llama-batched-bench's S_TG}}, bandwidths"""
    g4, ll, bw = {}, {}, []
    for path in glob.glob(os.path.join(out, "gemma4c-r*-b*.json")):
        r, b = map(int, re.search(r"-r(\d+)-b(\d+)\.json$", path).groups())
        j = json.loads(read(path))
        (t,) = j["tests"]
        g4.setdefault(b, {})[r] = t
        bw.append(j["machine"]["read_bw_gbs"])
    for path in glob.glob(os.path.join(out, "llama-r*-b*.jsonl")):
        r, b = map(int, re.search(r"-r(\d+)-b(\d+)\.jsonl$", path).groups())
        for line in read(path).splitlines():
            row = json.loads(line)
            if int(row["pl"]) == b:
                ll.setdefault(b, {})[r] = float(row["speed_tg"])
    return g4, ll, bw


def main(out):
    g4, ll, bw = load(out)
    if not g4 or not ll:
        sys.exit(f"compare_batched_report.py: no gemma4c or llama-batched-bench results in {out}")
    commit = lambda name: read(os.path.join(out, name), "?")[:12]
    n_rounds = max(len(v) for v in g4.values())
    w = sys.stdout.write
    w("# Batched decode side by side with llama.cpp\n\n")
    w(f"gemma4c {commit('gemma4c-commit.txt')} against llama.cpp {commit('llama-commit.txt')}, "
      f"{read(os.path.join(out, 'date.txt'), 'date unknown')}; raw outputs in `{shown_path(out)}`. Decode tokens/s "
      f"over all sequences, median over {n_rounds} rounds; in every round and for every B the two engines ran back "
      "to back, gemma4c first in odd rounds and llama.cpp first in even ones. Roofline: the read bandwidth "
      "gemma4c bench measured right before that run ÷ weight bytes per token (a step reads the weights once "
      f"for its B tokens); bandwidth median {fmt(med(bw))} GB/s (range {fmt(min(bw))}–{fmt(max(bw))}).\n\n")
    w("| sequences decoding together | gemma4c tok/s | llama.cpp tok/s | paired ratio (min-max) | roofline tok/s | "
      "gemma4c % of roofline | llama.cpp % of roofline | per round: gemma4c; llama.cpp |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---|\n")
    for b in sorted(g4):
        rounds = sorted(set(g4[b]) & set(ll.get(b, {})))
        if not rounds:
            continue
        g = [g4[b][r]["tok_s"] for r in rounds]
        lc = [ll[b][r] for r in rounds]
        roof = [g4[b][r]["roofline_tok_s"] for r in rounds]
        paired = [x / y for x, y in zip(g, lc)]
        gf = med([x / z for x, z in zip(g, roof)])
        lf = med([y / z for y, z in zip(lc, roof)])
        w(f"| {b} | {fmt(med(g))} | {fmt(med(lc))} | {fmt(med(paired))}x ({fmt(min(paired))}-{fmt(max(paired))}) | "
          f"{fmt(med(roof))} | {fmt(100 * gf, 1)}% | {fmt(100 * lf, 1)}% | "
          f"{', '.join(fmt(x) for x in g)}; {', '.join(fmt(y) for y in lc)} |\n")
    w("\n### Machine, load, commands\n\n```\n" + lscpu_summary(read(os.path.join(out, "lscpu.txt"))) + "\n```\n")
    loads = round_loads(out)
    if loads:
        w("\nLoad average (1/5/15 min) at the start of each round: " +
          "; ".join(f"r{i + 1}: {x}" for i, x in enumerate(loads)) +
          f". After the run: `{read(os.path.join(out, 'uptime.txt'))}`.\n")
    w(dirty_note(out))
    w("\n```sh\n" + read(os.path.join(out, "cmds.txt")) + "\n```\n")


if __name__ == "__main__":
    main(sys.argv[1])
