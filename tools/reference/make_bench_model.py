#!/usr/bin/env python3
"""Write the random-weight Gemma 4 unified BENCHMARK checkpoint (outside the repository, default
/tmp/g4-bench): about 2.0 GB of bf16, far larger than any L3 cache, with the REAL 262,144-entry
vocabulary and every 12B text feature at reduced width:

  hidden 1536, intermediate 6144 (gated GELU-tanh), 16 query heads, 12 layers = 2 x (5 sliding +
  1 full), sliding: 8 KV heads x head_dim 256, window 1024, RoPE 1e4; full: 1 KV head x
  global_head_dim 512, k_eq_v (no v_proj), proportional RoPE 0.25 / 1e6; tied embeddings,
  softcap 30, layer_scalar buffers, Gemma4UnifiedForConditionalGeneration like the published 12B.

The config uses the published checkpoint's spelling (global_head_dim / num_global_key_value_heads),
which is what llama.cpp's convert_hf_to_gguf.py reads. The tokenizer is the real Gemma 3 one
($G4_SHARED_DATA/gemma3-tokenizer, default ../shared/data/gemma3-tokenizer, same 262,144-piece family as Gemma 4) with its one added token
past the vocabulary (<image_soft_token>, id 262144) dropped so that tokenizer and embedding agree
on 262,144 ids: llama.cpp's converter needs a tokenizer.json; gemma4c bench does not.

Usage:  "$G4_REF_PY" tools/reference/make_bench_model.py [OUT_DIR] [--layers 12]
Deterministic (fixed seed). Peak memory ~ 2x the checkpoint (weights are built directly in bf16)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import g4ref  # noqa: E402

S, F = g4ref.S, g4ref.F
GEMMA3_TOK = os.path.join(g4ref.SHARED_DATA, "gemma3-tokenizer")

BENCH = dict(
    arch="cond", seed=4004, vocab_size=262144, hidden_size=1536, intermediate_size=6144,
    layer_types=[S, S, S, S, S, F] * 2, num_attention_heads=16, num_key_value_heads=8,
    head_dim=256, global_head_dim=512, num_global_key_value_heads=1, sliding_window=1024,
    max_shard_size=None, spelling="global_head_dim", mm=False,
    initializer_range=0.02, embed_std=0.02, final_norm_scale=5.0,
)


def write_tokenizer(out_dir: str, vocab_size: int) -> None:
    with open(os.path.join(GEMMA3_TOK, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    assert len(tj["model"]["vocab"]) == vocab_size, len(tj["model"]["vocab"])
    tj["added_tokens"] = [a for a in tj["added_tokens"] if a["id"] < vocab_size]
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(GEMMA3_TOK, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    tc["added_tokens_decoder"] = {k: v for k, v in tc.get("added_tokens_decoder", {}).items() if int(k) < vocab_size}
    for k in ("chat_template", "image_token", "boi_token", "eoi_token", "extra_special_tokens", "processor_class"):
        tc.pop(k, None)
    tc["eos_token"] = "<eos>"
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=1)


# Gemma 4 text-config fields that a dense checkpoint carries with their "off" values (transformers'
# Gemma4TextConfig defaults). Gemma4UnifiedTextConfig does not serialize them, but llama.cpp's
# convert_hf_to_gguf.py (Gemma4Model.set_gguf_parameters) requires one of expert_intermediate_size /
# moe_intermediate_size to be present and stops with KeyError otherwise; None means "no MoE" there.
MOE_OFF = {"enable_moe_block": False, "num_experts": None, "top_k_experts": None, "moe_intermediate_size": None}


def add_dense_moe_fields(out_dir: str) -> None:
    path = os.path.join(out_dir, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    tc = cfg.get("text_config", cfg)
    for k, v in MOE_OFF.items():
        tc.setdefault(k, v)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default="/tmp/g4-bench")
    ap.add_argument("--layers", type=int, default=12, help="multiple of 6 (5 sliding + 1 full)")
    args = ap.parse_args()
    assert args.layers % 6 == 0 and args.layers > 0
    spec = dict(BENCH, layer_types=[S, S, S, S, S, F] * (args.layers // 6))

    import torch
    from transformers import Gemma4UnifiedForConditionalGeneration

    t0 = time.time()
    torch.set_num_threads(2)
    torch.manual_seed(spec["seed"])
    cfg = g4ref.build_config(spec)
    torch.set_default_dtype(torch.bfloat16)   # build in bf16: no fp32 copy of ~1e9 parameters
    model = Gemma4UnifiedForConditionalGeneration(cfg).eval()
    torch.set_default_dtype(torch.float32)
    gen = torch.Generator().manual_seed(spec["seed"])
    drawn = g4ref.randomize_(model, spec, gen)
    model.tie_weights()
    model = model.to(torch.bfloat16)
    gc = model.generation_config
    gc.bos_token_id, gc.pad_token_id, gc.eos_token_id = g4ref.BOS_ID, g4ref.PAD_ID, [g4ref.EOS_ID]
    n_params = sum(p.numel() for p in model.parameters())

    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    model.save_pretrained(args.out)
    del model
    g4ref.rewrite_config_spelling(args.out, spec)
    add_dense_moe_fields(args.out)
    if not os.path.exists(os.path.join(args.out, "generation_config.json")):
        gc.save_pretrained(args.out)
    write_tokenizer(args.out, spec["vocab_size"])
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out) if f.endswith(".safetensors"))
    print(f"{args.out}: {n_params / 1e6:.1f} M parameters, {size / 1e9:.3f} GB safetensors, "
          f"{len(spec['layer_types'])} layers, drew {drawn}, {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
