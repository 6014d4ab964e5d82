#!/usr/bin/env python3
"""Turn the raw outputs of bench/compare_quant.sh (one directory) into the "Quantized weights"
report on stdout: per quantization type and test (ppN, tgN) the median over
rounds of gemma4c on its pack, gemma4c on llama.cpp's GGUF file and llama-bench on that same file;
the ratios; decode against the bandwidth roofline (bytes of the quantized weights read per token /
the bandwidth gemma4c bench measured in the same round); the files; optionally the accuracy tables
of bench/quant_accuracy.py; the machine, the load, the commands. Standard library only.

Usage: python3 bench/compare_quant_report.py OUT_DIR [--accuracy ACCURACY.md] > section.md"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import dirty_note, fmt, load_g4, load_llama, lscpu_summary, med, read, round_loads, shown_path  # noqa: E402

GGUF_NAME = {"bf16": "bf16 (convert_hf_to_gguf --outtype bf16)", "q8_0": "Q8_0 (llama-quantize)", "q4_0": "Q4_0 (llama-quantize)",
             "q4_k": "Q4_K_M (llama-quantize)", "q5_k": "Q5_K_M (llama-quantize)",
             "iq4_xs": "IQ4_XS (llama-quantize)", "q3_k": "Q3_K_M (llama-quantize)", "q2_k": "Q2_K (llama-quantize)",
             "iq4_nl": "IQ4_NL (llama-quantize)", "q4_1": "Q4_1 (llama-quantize)", "q5_1": "Q5_1 (llama-quantize)"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--accuracy", default=None)
    a = ap.parse_args()
    out = a.out
    types = read(os.path.join(out, "types.txt"), "q8_0 q4_0 q4_k").split()
    w = sys.stdout.write
    data = {t: (load_llama(os.path.join(out, f"llama-{t}-r*.json"))[0], load_g4(os.path.join(out, f"g4pack-{t}-r*.txt")),
                load_g4(os.path.join(out, f"g4gguf-{t}-r*.txt"))) for t in types}
    any_runs = next((r for t in types for r in (data[t][1][1] + data[t][2][1])), None)
    tests = [x["test"] for x in any_runs["tests"]] if any_runs else []
    has_pack = any(data[t][1][1] for t in types)   # PACKS=0 runs the GGUF files alone
    n_rounds = max((max(len(data[t][1][1]), len(data[t][2][1])) for t in types), default=0)

    w("## Quantized weights\n\n")
    w(f"Date: {read(os.path.join(out, 'date.txt'), 'unknown')}. Written by `bench/compare_quant.sh` (raw outputs were "
      f"in `{shown_path(out)}`) and `bench/quant_accuracy.py`. The random-weight bench checkpoint "
      "(`tools/reference/make_bench_model.py`: 983 M parameters, real 262k vocabulary), quantized and run "
      + ("three ways: **gemma4c on its own pack** (`gemma4c pack --dtype D`, every 2-D matrix including the tied "
         "embedding / LM head in D), " if has_pack else "two ways (PACKS=0: gemma4c's own packs not run): ")
      + "**gemma4c on llama.cpp's GGUF** of the same checkpoint, and **llama-bench on that same GGUF**.\n\n")
    w(f"Median over {n_rounds} rounds; per round and type the order is llama-bench, gemma4c on the GGUF"
      + (", gemma4c on the pack" if has_pack else "") + " (reversed in even rounds); gemma4c reports the median of its "
      "reps, llama-bench the mean of its reps. "
      + ("For bf16 (the baseline, if run) \"pack\" is the HF directory. " if has_pack else "")
      + "Ratio = gemma4c / llama.cpp on the same GGUF file (> 1: gemma4c faster)"
      + ("; \"pack / llama\" compares gemma4c's pack with llama.cpp's file of the same nominal type (not "
         "byte-identical: see Files)" if has_pack else "") + ".\n\n")
    if has_pack:
        w("| weights | test | gemma4c pack | gemma4c GGUF | llama.cpp GGUF | gemma4c GGUF / llama | pack / llama | "
          "per round: pack; GGUF; llama |\n|---|---|---:|---:|---:|---:|---:|---|\n")
    else:
        w("| weights | test | gemma4c GGUF | llama.cpp GGUF | gemma4c / llama | per round: GGUF; llama |\n"
          "|---|---|---:|---:|---:|---|\n")
    for t in types:
        ll, (gp, _), (gg, _) = data[t]
        for x in tests:
            p, g, lc = med(gp.get(x, [])), med(gg.get(x, [])), med(ll.get(x, []))
            rounds = f"{', '.join(fmt(v) for v in gg.get(x, []))}; {', '.join(fmt(v) for v in ll.get(x, []))}"
            if has_pack:
                w(f"| {t} | {x} | {fmt(p)} | {fmt(g)} | {fmt(lc)} | {fmt(g / lc if g and lc else None)}x | "
                  f"{fmt(p / lc if p and lc else None)}x | {', '.join(fmt(v) for v in gp.get(x, []))}; {rounds} |\n")
            else:
                w(f"| {t} | {x} | {fmt(g)} | {fmt(lc)} | {fmt(g / lc if g and lc else None)}x | {rounds} |\n")

    aq8 = {t: load_g4(os.path.join(out, f"g4aq8-{t}-r*.txt")) for t in types}
    if any(aq8[t][1] for t in types):
        w("\n### --act-q8 (int8 activations) on the GGUF files\n\n"
          "`gemma4c bench ... --act-q8`: every matmul over quantized weights rounds its activation rows to "
          "ggml's Q8_0 (Q8_0/Q4_0/Q5_0 weights) or Q8_K (Q4_K/Q6_K) blocks first and multiplies int8 x int8, "
          "as llama.cpp does; run in the same rounds as the table above (order per round: llama-bench, gemma4c "
          "GGUF exact, gemma4c GGUF --act-q8; reversed in even rounds).\n\n"
          "| weights | test | gemma4c exact | gemma4c --act-q8 | llama.cpp | --act-q8 / exact | --act-q8 / llama | "
          "per round: --act-q8; exact; llama |\n|---|---|---:|---:|---:|---:|---:|---|\n")
        for t in types:
            ll, _, (gg, _) = data[t]
            ga = aq8[t][0]
            for x in tests:
                a8, g, lc = med(ga.get(x, [])), med(gg.get(x, [])), med(ll.get(x, []))
                w(f"| {t} | {x} | {fmt(g)} | {fmt(a8)} | {fmt(lc)} | {fmt(a8 / g if a8 and g else None)}x | "
                  f"{fmt(a8 / lc if a8 and lc else None)}x | {', '.join(fmt(v) for v in ga.get(x, []))}; "
                  f"{', '.join(fmt(v) for v in gg.get(x, []))}; {', '.join(fmt(v) for v in ll.get(x, []))} |\n")

    tg = [x for x in tests if x.startswith("tg")]
    if tg and any_runs:
        x = tg[0]
        bws = [r["machine"]["read_bw_gbs"] for t in types for r in data[t][1][1] + data[t][2][1] + aq8[t][1]
               if r["machine"].get("read_bw_gbs")]
        bw = med(bws)
        w(f"\n### Decode ({x}) against the bandwidth roofline\n\n")
        w(f"Roofline tok/s = measured read bandwidth / bytes of weights read per decoded token (every layer matrix "
          f"plus the LM head, at the file's own types, as `gemma4c bench` counts them on that file). Bandwidth: "
          f"median of the {len(bws)} measurements `gemma4c bench` made in these rounds, **{fmt(bw)} GB/s** "
          f"(range {fmt(min(bws))}–{fmt(max(bws))}; multi-threaded streaming read, best of 10). llama.cpp's fraction "
          f"uses the same bytes (same file) and the same bandwidth.\n\n")
        w("| weights | file | GB read / token (layers + LM head) | roofline tok/s | gemma4c tok/s | gemma4c % of roofline | "
          "llama.cpp tok/s | llama.cpp % of roofline |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
        for t in types:
            ll, (gp, rp), (gg, rg) = data[t]
            for kind, res, runs in (("pack", gp, rp), ("GGUF", gg, rg), ("GGUF --act-q8", *aq8[t])):
                if not runs:
                    continue
                mi = runs[0]["model_info"]
                by = mi["decode_weight_bytes_per_token"]
                roof = bw * 1e9 / by
                g = med(res.get(x, []))
                lc = med(ll.get(x, [])) if kind.startswith("GGUF") else None
                w(f"| {t} | {kind} | {by / 1e9:.3f} ({mi['layer_matrix_bytes'] / 1e9:.3f} + {mi['lm_head_bytes'] / 1e9:.3f}) | "
                  f"{fmt(roof)} | {fmt(g)} | {fmt(None if g is None else 100 * g / roof, 1)}% | "
                  f"{fmt(lc) if lc else '—'} | {fmt(100 * lc / roof, 1) + '%' if lc else '—'} |\n")
        pps = [x for x in tests if x.startswith("pp")]
        if pps:
            w(f"\nPrefill against the fp32 FMA peak (FLOPs per token as in the bf16 table above; gemma4c's quantized "
              f"prefill dequantizes weight panels into its fp32 GEMM), gemma4c on the {'pack' if has_pack else 'GGUF, exact'}:"
              f"\n\n| weights | test | tok/s | % of fp32 FMA peak |\n|---|---|---:|---:|\n")
            for t in types:
                rp = data[t][1][1] if has_pack else data[t][2][1]
                for x in pps:
                    recs = [y for r in rp for y in r["tests"] if y["test"] == x]
                    fr = med([y["roofline_fraction"] for y in recs if y.get("roofline_fraction") is not None])
                    w(f"| {t} | {x} | {fmt(med([y['tok_s'] for y in recs]))} | {fmt(None if fr is None else 100 * fr, 1)}% |\n")

    w("\n### Files\n\n")
    w("| weights | pack (.g4c, tokenizer included) | GGUF | GGUF tensor types |\n|---|---:|---:|---|\n")
    sizes = {}   # type -> (GGUF bytes, pack bytes)
    for ln in read(os.path.join(out, "sizes.txt")).splitlines():
        f = ln.split()
        if len(f) == 3:
            sizes[f[0]] = (int(f[1]), int(f[2]))
    for t in types:
        gb, pb = sizes.get(t, (0, 0))
        psz = "HF directory" if t == "bf16" else f"{pb / 1e6:.0f} MB" if pb else "not run"
        w(f"| {t} | {psz} | {gb / 1e6:.0f} MB, "
          f"{GGUF_NAME[t]} | {read(os.path.join(out, f'gguf-types-{t}.txt'), '?')} |\n")
    w("\nOur packs quantize every matrix to the named type (q4_k: all of this model's rows are multiples of "
      "256 wide, so nothing falls back); llama-quantize's recipes keep the tied token embedding / LM head in Q6_K "
      "(Q4_0, Q4_K_M) and Q4_K_M some attn_v / ffn_down in Q6_K, so its Q4 files read more bytes per token.\n")

    if a.accuracy and os.path.exists(a.accuracy):
        w("\n### Accuracy against bf16\n\n")
        w(read(a.accuracy) + "\n")

    w("\n### Machine, load, commands\n\n```\n" + lscpu_summary(read(os.path.join(out, "lscpu.txt"))) + "\n```\n")
    loads = round_loads(out)
    if loads:
        w("\nLoad average (1/5/15 min) at the start of each round: " +
          "; ".join(f"r{i + 1}: {x}" for i, x in enumerate(loads)) + f" on {os.cpu_count()} CPUs. After the run: "
          f"`{read(os.path.join(out, 'uptime.txt'))}` (shared machine: other tenants' load is round-to-round spread).\n")
    w(f"\ngemma4c commit {read(os.path.join(out, 'gemma4c-commit.txt'))}; llama.cpp {read(os.path.join(out, 'llama-commit.txt'))}.\n")
    w(dirty_note(out))
    w("\n```sh\nbench/compare_quant.sh   # converts, quantizes, packs, then per round and type:\n" +
      read(os.path.join(out, "cmds.txt")) + "\n```\n")


if __name__ == "__main__":
    main()
