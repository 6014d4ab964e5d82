#!/usr/bin/env python3
"""Write the random-weight Gemma 4 unified test checkpoints into tests/fixtures/<name>/ with
transformers' own save_pretrained (safetensors, bf16), plus generation_config.json, a small real
BPE tokenizer (tokenizer.json, tokenizer_config.json) and chat_template.jinja.

Usage:  python tools/reference/make_fixtures.py [NAME ...]      (default: every fixture)
Then:   python tools/reference/record_goldens.py [NAME ...]
Deterministic: fixed seeds; rerunning rewrites byte-identical weights for the same
transformers/torch versions."""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import g4ref  # noqa: E402


def make_model(spec: dict):
    import torch
    from transformers import Gemma4UnifiedForCausalLM, Gemma4UnifiedForConditionalGeneration

    cfg = g4ref.build_config(spec)
    torch.manual_seed(spec["seed"])
    cls = Gemma4UnifiedForCausalLM if spec["arch"] == "causal" else Gemma4UnifiedForConditionalGeneration
    model = cls(cfg).to(torch.float32).eval()
    gen = torch.Generator().manual_seed(spec["seed"])
    summary = g4ref.randomize_(model, spec, gen)
    model.tie_weights()
    model = model.to(torch.bfloat16)
    gc = model.generation_config
    gc.bos_token_id = g4ref.BOS_ID
    gc.pad_token_id = g4ref.PAD_ID
    gc.eos_token_id = [g4ref.EOS_ID, g4ref.END_OF_TURN_ID]
    return model, summary


def check_saved(out_dir: str, spec: dict) -> dict:
    """Re-open the written safetensors: every tensor bf16, layer_scalars present and != 1,
    norm weights not all ones, v_proj absent exactly on full layers, lm_head absent (tied)."""
    from safetensors import safe_open

    files = sorted(glob.glob(os.path.join(out_dir, "*.safetensors")))
    keys = {}
    for fn in files:
        with safe_open(fn, framework="pt") as f:
            for k in f.keys():
                keys[k] = f.get_tensor(k)
    import torch

    pre = "model." if spec["arch"] == "causal" else "model.language_model."
    n_layers = len(spec["layer_types"])
    for k, t in keys.items():
        assert t.dtype == torch.bfloat16, (k, t.dtype)
    assert not any(k.startswith("lm_head") for k in keys), "lm_head should be tied (absent)"
    for i, lt in enumerate(spec["layer_types"]):
        ls = keys[f"{pre}layers.{i}.layer_scalar"]
        assert ls.shape == (1,) and abs(float(ls) - 1.0) > 1e-3, (i, ls)
        has_v = f"{pre}layers.{i}.self_attn.v_proj.weight" in keys
        assert has_v == (lt == g4ref.S), (i, lt, has_v)
        kshape = keys[f"{pre}layers.{i}.self_attn.k_proj.weight"].shape
        if lt == g4ref.F:
            assert kshape == (spec["num_global_key_value_heads"] * spec["global_head_dim"], spec["hidden_size"]), kshape
        else:
            assert kshape == (spec["num_key_value_heads"] * spec["head_dim"], spec["hidden_size"]), kshape
    for k, t in keys.items():
        if k.endswith("norm.weight") and "embed_" not in k:
            assert (t.float() - 1).abs().max() > 0.05, k
    assert (n_layers * 1) == sum(1 for k in keys if k.endswith("layer_scalar"))
    return {"files": [os.path.basename(f) for f in files], "n_tensors": len(keys)}


def write_fixture(name: str) -> None:
    import torch

    torch.set_num_threads(1)
    spec = g4ref.FIXTURES[name]
    out_dir = os.path.join(g4ref.FIXTURES_DIR, name)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    model, summary = make_model(spec)
    kw = {}
    if spec["max_shard_size"]:
        kw["max_shard_size"] = spec["max_shard_size"]
    model.save_pretrained(out_dir, **kw)
    if spec["spelling"] == "global_head_dim":
        g4ref.rewrite_config_spelling(out_dir, spec)
    g4ref.write_tokenizer_files(out_dir, spec["vocab_size"], spec["seed"])
    info = check_saved(out_dir, spec)
    # Reload through transformers and compare every tensor and the resolved per-layer config.
    from transformers import AutoConfig

    cfg2 = AutoConfig.from_pretrained(out_dir)
    tc2 = cfg2.get_text_config()
    for i, lt in enumerate(spec["layer_types"]):
        lc = tc2.per_layer_config[i]
        want = (spec["global_head_dim"], spec["num_global_key_value_heads"]) if lt == g4ref.F else (
            spec["head_dim"], spec["num_key_value_heads"])
        assert (lc.head_dim, lc.num_key_value_heads) == want, (i, lc.head_dim, lc.num_key_value_heads)
    if not os.path.exists(os.path.join(out_dir, "generation_config.json")):
        model.generation_config.save_pretrained(out_dir)
    size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
    print(f"{name}: {info['n_tensors']} tensors in {info['files']}, {size/1e6:.2f} MB, drew {summary}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=list(g4ref.FIXTURES))
    args = ap.parse_args()
    for n in args.names:
        write_fixture(n)


if __name__ == "__main__":
    main()
