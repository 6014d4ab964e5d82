#!/usr/bin/env python3
"""The report of bench/mm_speed.sh (markdown on stdout) from its raw outputs in OUT: gemma4c's
mm_bench JSON lines (g4-hf.json, g4-gguf.json) and llama-mtmd-cli's logs (mtmd-image-R.log,
mtmd-audio-R.log). Of llama.cpp it takes what its log states: "<kind> slice encoded in N ms" (the
embedder graph alone; mtmd's preprocessing runs in mtmd_tokenize, untimed), "decoded (batch i/n) in
N ms" (the soft tokens through the text model), "prompt eval time" (every prompt token, soft ones
included) and "n_tokens_batch" (its soft-token count). Where a log has no timing its last error
lines are shown instead.

usage: mm_speed_report.py OUT REPS THREADS
"""
import json
import re
import statistics
import sys


def med(v):
    return f"{statistics.median(v):.3f}" if v else "—"


def mtmd(out, kind, reps):
    enc, dec, pe, ntok, err, n, npe = [], [], [], None, None, 0, None
    for r in range(1, reps + 1):
        try:
            log = open(f"{out}/mtmd-{kind}-{r}.log", errors="replace").read()
        except FileNotFoundError:
            continue
        # older mtmd-cli: per slice; newer: the whole batch of media chunks ("mtmd batch encoding done")
        m = re.search(r"slice encoded in (\d+) ms", log) or re.search(r"mtmd batch encoding done in (\d+) ms", log)
        if not m:
            err = [ln for ln in log.splitlines() if re.search(r"error|failed|exit \d|abort|what\(\)", ln, re.I)][-4:] or log.splitlines()[-4:]
            continue
        n += 1
        enc.append(float(m.group(1)) / 1e3)
        d = re.findall(r"decoded \(batch \d+/\d+\) in (\d+) ms", log)
        if d:
            dec.append(sum(float(x) for x in d) / 1e3)
        p = re.search(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", log)
        if p:
            pe.append(float(p.group(1)) / 1e3)
            npe = int(p.group(2))
        t = re.findall(r"n_tokens_batch = (\d+)", log)
        ntok = sum(int(x) for x in t) if t else ntok
    ttft = [a + b for a, b in zip(enc, pe)] if pe and len(pe) == len(enc) else []
    return dict(enc=med(enc), dec=med(dec), pe=med(pe), ttft=med(ttft), ntok=ntok if ntok else "—", err=err, n=n,
                npe=npe if npe else "—")


def main():
    out, reps, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    hf, gg = (json.load(open(f"{out}/g4-{k}.json")) for k in ("hf", "gguf"))
    mi, ma = mtmd(out, "image", reps), mtmd(out, "audio", reps)
    print("# Multimodal speed at the 12B's widths: gemma4c and llama.cpp's mtmd\n")
    print(f"The 12B-width slice with the 12B's embedders (`make_12b_slice.py --mm`: hidden 3840, 6 layers), {threads} "
          f"threads, median of {reps}, seconds. Image: a {hf['src_width']} x {hf['src_height']} JPEG, "
          f"{hf['soft_tokens']} soft tokens (at most 280); audio: 30 s at 16 kHz, {hf['audio_frames']} frames. "
          f"gemma4c in one process (`build/bench/mm_bench`, after a warm-up); llama.cpp `llama-mtmd-cli -n 1`, "
          f"one process a run, on the GGUF + mmproj its converter made of the same checkpoint.\n")
    g = lambda d, k: f"{d[k]:.3f}"
    print("| | gemma4c, HF checkpoint | gemma4c, GGUF + mmproj | llama.cpp mtmd, GGUF + mmproj |")
    print("|---|---:|---:|---:|")
    print(f"| image preprocessing (decode, resize, patches) | {g(hf, 'image_preprocess_s')} | {g(gg, 'image_preprocess_s')} | not timed by mtmd |")
    print(f"| vision embedder (6912 -> 3840 -> 3840) | {g(hf, 'image_embed_s')} | {g(gg, 'image_embed_s')} | {mi['enc']} |")
    print(f"| audio preprocessing (30 s) | {g(hf, 'audio_preprocess_s')} | {g(gg, 'audio_preprocess_s')} | not timed by mtmd |")
    print(f"| audio embedder (750 x 640 -> 3840) | {g(hf, 'audio_embed_s')} | {g(gg, 'audio_embed_s')} | {ma['enc']} |")
    pre_hf = hf["image_prompt_ttft_s"] - hf["image_preprocess_s"]
    pre_gg = gg["image_prompt_ttft_s"] - gg["image_preprocess_s"]
    print(f"| image prompt, time to first token (gemma4c: {hf['prompt_tokens']} / {gg['prompt_tokens']} tokens), with preprocessing | "
          f"{g(hf, 'image_prompt_ttft_s')} | {g(gg, 'image_prompt_ttft_s')} | — |")
    print(f"| the same without the image preprocessing (mtmd: encode + prompt eval of {mi['npe']} tokens) | {pre_hf:.3f} | "
          f"{pre_gg:.3f} | {mi['ttft']} |")
    if gg["prompt_tokens"] != hf["prompt_tokens"]:
        print(f"\nThe prompts differ by {gg['prompt_tokens'] - hf['prompt_tokens']} text tokens: the GGUF's vocabulary, "
              "converted from the slice's Gemma 3 tokenizer, does not hold `<start_of_turn>` as a special token, so the "
              "chat markup is split into text pieces; the soft tokens are the same.")
    print(f"\nllama.cpp: soft tokens for the image {mi['ntok']}, for the clip {ma['ntok']}; the image's soft tokens "
          f"through the text model {mi['dec']} s of its prompt eval {mi['pe']} s; runs with timings: image {mi['n']}/{reps}, "
          f"audio {ma['n']}/{reps} (a dash: not in its log at the default verbosity). mtmd resizes with its own bilinear filter (not the processor's antialiased bicubic), "
          f"so its soft tokens are not transformers'.")
    for k, v in (("image", mi), ("audio", ma)):
        if v["err"]:
            print(f"\nllama.cpp {k}: no timing in its log; its last lines:\n\n```\n" + "\n".join(v["err"]) + "\n```")


if __name__ == "__main__":
    main()
