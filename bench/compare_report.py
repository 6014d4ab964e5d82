#!/usr/bin/env python3
"""Turn the raw outputs of bench/compare_llamacpp.sh (one directory) into a results report on
stdout: per test (ppN, tgN) the median over rounds of gemma4c's tok/s (each round: median of its
reps) and llama.cpp's (each round: llama-bench's mean of its reps), their ratio, the spread, the
roofline fractions gemma4c bench measured, the machine, the commands and the date. Where the run
had a baseline gemma4c (G4_BIN_BASE: gemma4c-base-r*.txt), the table adds its tok/s, its ratio to
llama.cpp and after/before (gemma4c / baseline, paired by round).
Standard library only.

Usage: python3 bench/compare_report.py OUT_DIR > report.md  (bench/compare_llamacpp.sh files it under bench/results/)"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import dirty_note, fmt, load_g4, load_llama, lscpu_summary, med, read, round_loads, shown_path  # noqa: E402

LLAMA_META = ("build_commit", "build_number", "cpu_info", "backends", "model_type", "model_size", "model_n_params",
              "n_batch", "n_ubatch", "n_threads", "type_k", "type_v", "flash_attn", "use_mmap", "poll")


def paired(xs: list, ys: list) -> str:
    """The median over rounds of each round's xs / ys, with its range."""
    pairs = [x / y for x, y in zip(xs, ys) if x and y]
    return f"{fmt(med(pairs))}x ({fmt(min(pairs))}-{fmt(max(pairs))})" if pairs else "—"


def main() -> None:
    out = sys.argv[1]
    llama, lrecs = load_llama(os.path.join(out, "llama-r*.json"))
    lmeta = {k: lrecs[0].get(k) for k in LLAMA_META} if lrecs else {}
    g4, runs = load_g4(os.path.join(out, "gemma4c-r*.txt"))
    tests = [t["test"] for t in runs[0]["tests"]] if runs else sorted(llama)
    n_rounds = len(runs)
    # the opt-in bf16 prefill (compare_llamacpp.sh BF16=1): its prompts against the same llama.cpp runs
    g4b, bruns = load_g4(os.path.join(out, "gemma4c-bf16-r*.txt"))
    btests = [t["test"] for t in bruns[0]["tests"] if t["kind"] == "prefill"] if bruns else []
    # the baseline gemma4c binary (compare_llamacpp.sh G4_BIN_BASE): same tests, same rounds
    g4base, baseruns = load_g4(os.path.join(out, "gemma4c-base-r*.txt"))

    w = sys.stdout.write
    w("# gemma4c vs llama.cpp — CPU side-by-side\n\n")
    w(f"Date: {read(os.path.join(out, 'date.txt'), 'unknown')}. Written by `bench/compare_llamacpp.sh` "
      f"(raw outputs were in `{shown_path(out)}`).\n\n")
    order = ("the three engines' order rotating so that each runs once in each position every 3 rounds"
             if baseruns else "ABBA order")
    w(f"Median over {n_rounds} alternating rounds ({order}); within a round gemma4c reports the median of "
      "its reps, llama-bench the mean of its reps. Ratio = gemma4c / llama.cpp (> 1: gemma4c faster). "
      "Paired ratio: the median over rounds of each round's own ratio — the two engines of a round ran "
      "back to back, so it is the less sensitive to this shared host's drift.\n\n")
    if baseruns:
        w("Baseline: a second gemma4c binary (`G4_BIN_BASE`, command below) with the same arguments in every "
          "round. Baseline ratio = baseline / llama.cpp; after/before = gemma4c / baseline, paired by round "
          "(> 1: gemma4c faster than the baseline).\n\n")
    w("| test | gemma4c tok/s | llama.cpp tok/s | ratio | paired ratio (min-max) | gemma4c per round | "
      "llama.cpp per round |" + (" baseline tok/s | baseline ratio | after/before, paired (min-max) | "
                                 "baseline per round |" if baseruns else "") + "\n")
    w("|---|---:|---:|---:|---:|---|---|" + ("---:|---:|---:|---|" if baseruns else "") + "\n")
    rows = [(t, t, g4) for t in tests] + [(f"{t} `--prefill-bf16`", t, g4b) for t in btests]
    for label, t, eng in rows:
        a, b = med(eng.get(t, [])), med(llama.get(t, []))
        ratio = a / b if a and b else None
        w(f"| {label} | {fmt(a)} | {fmt(b)} | {fmt(ratio)}x | {paired(eng.get(t, []), llama.get(t, []))} | "
          f"{', '.join(fmt(x) for x in eng.get(t, []))} | {', '.join(fmt(x) for x in llama.get(t, []))} |")
        if baseruns and eng is g4:
            c = med(g4base.get(t, []))
            w(f" {fmt(c)} | {fmt(c / b if c and b else None)}x | {paired(eng.get(t, []), g4base.get(t, []))} | "
              f"{', '.join(fmt(x) for x in g4base.get(t, []))} |")
        elif baseruns:   # --prefill-bf16 rows: the baseline runs the exact mode only
            w(" — | — | — | — |")
        w("\n")
    if btests:
        sp = [f"{t} {fmt(med(g4b[t]) / med(g4[t]))}x" for t in btests if med(g4b.get(t, [])) and med(g4.get(t, []))]
        w(f"\n`--prefill-bf16` (activations rounded to bf16 for the layer matmuls, kernels `{bruns[0]['kernels']}`; "
          f"decode stays exact) over the exact prefill: {', '.join(sp)}. Its accuracy against the exact mode: "
          "`bench/prefill_bf16_accuracy.py`.\n")

    if runs:
        mach = [r["machine"] for r in runs]
        bw = med([m["read_bw_gbs"] for m in mach if m.get("read_bw_gbs")])
        fma = med([m["fp32_fma_gflops"] for m in mach if m.get("fp32_fma_gflops")])
        mi = runs[0]["model_info"]
        w("\n## gemma4c against the machine's roofline\n\n")
        w(f"Measured by `gemma4c bench` in each round (median over rounds): memory read bandwidth "
          f"**{fmt(bw)} GB/s** (multi-threaded streaming read of {mach[0]['read_bw_buffer_bytes'] >> 20} MiB in 2 MiB pages, "
          f"best of 10; until 2026-12-03 11:00 the buffer was in 4 KiB pages and read ~25% slower, so older "
          f"fractions are not comparable), fp32 FMA peak **{fmt(fma, 1)} GFLOP/s** ({mach[0]['fp32_fma_isa']}), bf16 peak: "
          f"{mach[0]['bf16_note'] if not mach[0].get('bf16_gflops') else fmt(mach[0]['bf16_gflops'], 1) + ' GFLOP/s'}. "
          f"Kernel path: `{runs[0]['kernels']}`, {runs[0]['threads']} threads.\n\n")
        w(f"Decode roofline: {mi['decode_weight_bytes_per_token'] / 1e9:.3f} GB of bf16 weights per token "
          f"(layer matrices {mi['layer_matrix_bytes'] / 1e9:.3f} GB + tied LM head {mi['lm_head_bytes'] / 1e9:.3f} GB) "
          "/ bandwidth. Prefill roofline: FLOPs per token (2 x layer parameters, + the LM head once per "
          "prompt, + attention) / fp32 FMA peak.\n\n")
        w("Each rep is also compared with the limit measured right before it (`roofline_fraction_adjacent`: "
          "the median over reps of the rep's figure / that limit): decode with a 256 MiB read (weight GB/s / "
          "read GB/s), prefill with the FMA peak (GFLOP/s / peak GFLOP/s; runs from 2026-12-03 21:00 on), "
          "because on this shared host the bandwidth drifts by tens of percent and the cores' clock by ~15% "
          "within a run.\n\n")
        hp = [r["model_info"].get("huge_page_bytes") for r in runs if r["model_info"].get("huge_page_bytes") is not None]
        if hp:
            w(f"Weights in 2 MiB pages during the run: {fmt(med(hp) / 1e9, 3)} GB of "
              f"{mi['weight_bytes_mapped'] / 1e9:.3f} GB.\n\n")
        w("| test | gemma4c tok/s | roofline tok/s | fraction of roofline | fraction of the limit measured before each rep | achieved |\n"
          "|---|---:|---:|---:|---:|---|\n")
        for t in tests:
            recs = [x for r in runs for x in r["tests"] if x["test"] == t]
            fr = med([x["roofline_fraction"] for x in recs if x.get("roofline_fraction") is not None])
            rt = med([x["roofline_tok_s"] for x in recs if x.get("roofline_tok_s") is not None])
            if recs and recs[0]["kind"] == "decode":
                ach = f"{fmt(med([x['achieved_gbs'] for x in recs]))} GB/s of weights"
            else:
                ach = f"{fmt(med([x['achieved_gflops'] for x in recs]), 1)} GFLOP/s"
            fa = med([x["roofline_fraction_adjacent"] for x in recs if x.get("roofline_fraction_adjacent") is not None])
            fa_s = "—" if fa is None else f"{fmt(100 * fa, 1)}%"
            w(f"| {t} | {fmt(med(g4.get(t, [])))} | {fmt(rt)} | {fmt(None if fr is None else 100 * fr, 1)}% | {fa_s} | {ach} |\n")
        lt = {t: med(v) for t, v in llama.items()}
        tg = [t for t in tests if t.startswith("tg")]
        if tg and lt.get(tg[0]) and bw:
            f = lt[tg[0]] * mi["decode_weight_bytes_per_token"] / 1e9 / bw
            w(f"\nFor reference, llama.cpp's {tg[0]} streams the same bf16 weights at "
              f"{lt[tg[0]] * mi['decode_weight_bytes_per_token'] / 1e9:.2f} GB/s = {100 * f:.1f}% of the measured bandwidth.\n")

        w("\n## Model\n\n")
        w(f"`{runs[0]['model']}` — random-weight Gemma 4 unified checkpoint from "
          "`tools/reference/make_bench_model.py` (transformers `save_pretrained`, bf16): "
          f"{mi['architecture']}, {mi['n_layers']} layers (5 sliding : 1 full), hidden {mi['hidden']}, "
          f"vocab {mi['vocab']} (real Gemma tokenizer vocabulary), {mi['weight_bytes_mapped'] / 1e9:.3f} GB of weights, "
          f"{(mi['layer_params'] + mi['lm_head_params']) / 1e6:.1f} M parameters. "
          "GGUF: the same checkpoint through llama.cpp's `convert_hf_to_gguf.py --outtype bf16`.\n")
        if lmeta:
            w(f"\nllama.cpp as llama-bench reports it: model_type `{lmeta.get('model_type')}`, "
              f"{(lmeta.get('model_size') or 0) / 1e9:.3f} GB, {(lmeta.get('model_n_params') or 0) / 1e6:.1f} M params, "
              f"backend {lmeta.get('backends')}, n_batch {lmeta.get('n_batch')}, n_ubatch {lmeta.get('n_ubatch')}, "
              f"KV {lmeta.get('type_k')}/{lmeta.get('type_v')}, flash_attn {lmeta.get('flash_attn')}, "
              f"mmap {lmeta.get('use_mmap')}, build {lmeta.get('build_commit')} ({lmeta.get('build_number')}).\n")
        w(f"\ngemma4c: commit {read(os.path.join(out, 'gemma4c-commit.txt'))}, prefill chunk "
          f"{mi['prefill_chunk']}, KV cache float32 (exact mode).\n")
        w(dirty_note(out))

    w("\n## Machine\n\n```\n" + lscpu_summary(read(os.path.join(out, "lscpu.txt"))) + "\n```\n")
    loads = round_loads(out)
    if loads:
        w("\nLoad average (1/5/15 min) at the start of each round: " + "; ".join(f"r{i + 1}: {l}" for i, l in enumerate(loads)) +
          f" on {os.cpu_count()} CPUs.\n")
    up = read(os.path.join(out, "uptime.txt"))
    if up:
        w(f"\nLoad after the run (`uptime`): `{up}` — the machine is shared; other tenants' load shows up "
          "as round-to-round spread.\n")
    w("\n## Commands\n\n```sh\nbench/compare_llamacpp.sh   # builds, converts, then per round:\n")
    w(read(os.path.join(out, "llama-cmd.txt")) + "\n" + read(os.path.join(out, "gemma4c-cmd.txt")) + "\n")
    bcmd = read(os.path.join(out, "gemma4c-bf16-cmd.txt"))
    w((bcmd + "\n" if bcmd else "") + "```\n")
    basecmd = read(os.path.join(out, "gemma4c-base-cmd.txt"))
    if basecmd:
        w(f"\nBaseline (`G4_BIN_BASE`):\n\n```sh\n{basecmd}\n```\n")


if __name__ == "__main__":
    main()
