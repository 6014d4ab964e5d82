#!/usr/bin/env python3
"""Write the "12B-width slice": a random-weight Gemma4UnifiedForConditionalGeneration checkpoint
with the 12B's exact widths (hidden 3840, intermediate 15360, 16 query heads, sliding: 8 KV heads x
head_dim 256, window 1024, RoPE 1e4; full: 1 KV head x global_head_dim 512, k_eq_v, proportional
RoPE 0.25 / 1e6; vocab 262,144 tied; softcap 30) but only 6 layers (5 sliding + 1 full), bf16,
sharded, config.json in the published checkpoint's global_head_dim / num_global_key_value_heads
spelling. About 4.7 GB: write it OUTSIDE the repository.

Usage:  python tools/reference/make_12b_slice.py /tmp/g4-12b-slice
        python tools/reference/compare_slice.py /tmp/g4-12b-slice --record      (goldens, ~10 min)
        python tools/reference/make_12b_slice.py /tmp/g4-12b-mm --mm            (bench/mm_speed.sh)

--mm adds the 12B's vision and audio embedders (transformers' Gemma4UnifiedVisionConfig /
AudioConfig defaults: 16 px patches merged 3 x 3, 6912 -> 3840; 640-sample frames -> 3840) and the
processor files (max_soft_tokens 280), and names the Gemma 3 tokenizer's pieces at the config's
image / audio ids as Gemma 4's markers (<|image|>, <|image>, <image|>, ...), which the Gemma 3
vocabulary holds as unused or Gemma 3 image pieces at those ids.

Memory: the model is built directly in bf16 (no float32 copy), peak ~ 5 GB. The tokenizer is the
real 262,144-piece Gemma 3 one ($G4_SHARED_DATA/gemma3-tokenizer, default ../shared/data/gemma3-tokenizer) when present, else a trained
toy one is not possible at this vocab size and the tokenizer files are skipped."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import g4ref  # noqa: E402

GEMMA3_TOK = os.path.join(g4ref.SHARED_DATA, "gemma3-tokenizer")


def copy_gemma3_tokenizer(out_dir: str, vocab_size: int, rename: dict | None = None) -> bool:
    src = os.path.join(GEMMA3_TOK, "tokenizer.json")
    if not os.path.exists(src):
        return False
    with open(src, encoding="utf-8") as f:
        tj = json.load(f)
    # Gemma 3's one added token past the vocabulary (<image_soft_token>, 262144) is dropped so the
    # tokenizer and the embedding agree on vocab_size ids.
    tj["added_tokens"] = [a for a in tj["added_tokens"] if a["id"] < vocab_size]
    for tid, piece in (rename or {}).items():   # the same id under Gemma 4's name, everywhere
        old = next(a["content"] for a in tj["added_tokens"] if a["id"] == tid)
        for a in tj["added_tokens"]:
            if a["id"] == tid:
                a["content"] = piece
        vocab = tj["model"]["vocab"]
        if old in vocab:
            vocab[piece] = vocab.pop(old)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(GEMMA3_TOK, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    tc["added_tokens_decoder"] = {k: v for k, v in tc.get("added_tokens_decoder", {}).items() if int(k) < vocab_size}
    for tid, piece in (rename or {}).items():
        if str(tid) in tc["added_tokens_decoder"]:
            tc["added_tokens_decoder"][str(tid)]["content"] = piece
    for k in ("chat_template", "image_token", "boi_token", "eoi_token", "extra_special_tokens", "processor_class"):
        tc.pop(k, None)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=1)
    shutil.copyfile(g4ref.CHAT_TEMPLATE_SRC, os.path.join(out_dir, "chat_template.jinja"))
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="output dir (outside the repo), e.g. /tmp/g4-12b-slice")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mm", action="store_true", help="with the 12B's vision and audio embedders")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    if out.startswith(g4ref.REPO + os.sep):
        sys.exit("make_12b_slice: write the slice outside the repository (it is ~4.7 GB)")
    spec = dict(g4ref.SLICE_12B)
    if args.mm:
        spec["mm"] = "12b"

    import torch
    from transformers import Gemma4UnifiedForConditionalGeneration

    t0 = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(spec["seed"])
    cfg = g4ref.build_config(spec)
    torch.set_default_dtype(torch.bfloat16)  # build directly in bf16: no float32 copy of 2.4e9 params
    try:
        model = Gemma4UnifiedForConditionalGeneration(cfg).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    gen = torch.Generator().manual_seed(spec["seed"])
    drawn = g4ref.randomize_(model, spec, gen)
    model.tie_weights()
    model = model.to(torch.bfloat16)
    gc = model.generation_config
    gc.bos_token_id, gc.pad_token_id = g4ref.BOS_ID, g4ref.PAD_ID
    gc.eos_token_id = [g4ref.EOS_ID, 106]  # Gemma's <eos> and end-of-turn ids in the real vocab
    n_params = sum(p.numel() for p in model.parameters())

    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    model.save_pretrained(out, max_shard_size=spec["max_shard_size"])
    del model
    g4ref.rewrite_config_spelling(out, spec)
    if not os.path.exists(os.path.join(out, "generation_config.json")):
        gc.save_pretrained(out)
    rename = None
    if args.mm:
        c = json.load(open(os.path.join(out, "config.json")))
        rename = {c["image_token_id"]: "<|image|>", c["boi_token_id"]: "<|image>", c["eoi_token_id"]: "<image|>",
                  c["audio_token_id"]: "<|audio|>", c["boa_token_id"]: "<|audio>", c["eoa_token_index"]: "<audio|>",
                  c["video_token_id"]: "<|video|>"}
        from transformers.models.gemma4_unified.image_processing_gemma4_unified import Gemma4UnifiedImageProcessor
        Gemma4UnifiedImageProcessor(max_soft_tokens=280).save_pretrained(out)
    tok = copy_gemma3_tokenizer(out, spec["vocab_size"], rename)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".safetensors"))
    print(f"{out}: {n_params / 1e6:.1f} M parameters, {size / 1e9:.3f} GB safetensors, "
          f"{len(spec['layer_types'])} layers, drew {drawn}, tokenizer={'gemma3' if tok else 'none'}, "
          f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
