#!/usr/bin/env python3
"""Write random Gemma 4 MTP drafters (transformers' Gemma4UnifiedAssistantForCausalLM) for the
g4-causal-tiny target into tests/fixtures/mtp/<name>/ (config.json, generation_config.json with
num_assistant_tokens, model.safetensors, bf16):

  random          random weights: drafts the target rarely accepts
  friendly        drafts its input token again (copy_init_); the tiny target repeats its last
                  token in about half of its greedy steps, so runs of drafts are accepted
                  (built, not trained: a drafter distilled on a few dozen of the target's
                  continuations overfits them and drafts worse than copying)
  friendly-ordered  the same plus the centroid-masked embedder (use_ordered_embeddings): a random
                  token ordering, each centroid the mean of its cluster's lm_head rows

The target is tests/fixtures/g4-causal-tiny (make_fixtures.py); rerun this script and
record_mtp_goldens.py whenever that fixture changes.

Usage:  python tools/reference/make_mtp_fixtures.py [NAME ...]
Deterministic: fixed seeds, one torch thread."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import g4ref  # noqa: E402

TARGET = os.path.join(g4ref.FIXTURES_DIR, "g4-causal-tiny")
OUT_DIR = os.path.join(g4ref.FIXTURES_DIR, "mtp")
S, F = g4ref.S, g4ref.F
NUM_ASSISTANT_TOKENS = 4
HIDDEN = 48             # != the target's 64: pre/post projection really change widths
LAYERS = [S, S, S, F]   # four layers, as the published assistants
DRAFTERS = {
    "random": dict(seed=7001, ordered=False, copy=False),
    "friendly": dict(seed=7002, ordered=False, copy=True),
    "friendly-ordered": dict(seed=7002, ordered=True, copy=True),
}
NUM_CENTROIDS, TOP_K = 32, 8   # 512 / 32 = 16 tokens a centroid, 8 x 16 candidates a step


def load_target():
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.float32, attn_implementation="eager").eval()


def assistant_config(tcfg, ordered: bool):
    from transformers import Gemma4UnifiedAssistantConfig, Gemma4UnifiedTextConfig

    ts = g4ref.FIXTURES["g4-causal-tiny"]

    text = Gemma4UnifiedTextConfig(
        vocab_size=tcfg.vocab_size, hidden_size=HIDDEN, intermediate_size=96,
        num_hidden_layers=len(LAYERS), layer_types=list(LAYERS),
        # the KV read from the target: its heads and head sizes per layer type
        num_attention_heads=4, num_key_value_heads=ts["num_key_value_heads"], head_dim=ts["head_dim"],
        global_head_dim=ts["global_head_dim"], num_global_key_value_heads=ts["num_global_key_value_heads"],
        attention_k_eq_v=True, sliding_window=tcfg.sliding_window, final_logit_softcapping=None,
        rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh",
        rope_parameters=json.loads(json.dumps(tcfg.rope_parameters)),
        num_kv_shared_layers=len(LAYERS), use_double_wide_mlp=False, hidden_size_per_layer_input=0,
        initializer_range=0.1, max_position_embeddings=4096,
        pad_token_id=g4ref.PAD_ID, eos_token_id=g4ref.EOS_ID, bos_token_id=g4ref.BOS_ID,
    )
    cfg = Gemma4UnifiedAssistantConfig(
        text_config=text, backbone_hidden_size=tcfg.hidden_size, use_ordered_embeddings=ordered,
        num_centroids=NUM_CENTROIDS, centroid_intermediate_top_k=TOP_K, tie_word_embeddings=True)
    cfg.architectures = ["Gemma4UnifiedAssistantForCausalLM"]
    return cfg


def copy_init_(asst, target, gen) -> None:
    """A drafter that proposes its input token again (the tiny target repeats its last token in
    about half of its greedy steps): pre_projection keeps only a random projection A of the
    target's embedding, every layer passes the residual stream through (o_proj, down_proj = 0,
    layer_scalar 1), and the tied lm_head rows are A times the target's embedding rows, so the
    input token's own row scores highest."""
    import torch

    with torch.no_grad():
        Hb = target.config.hidden_size
        A = torch.randn(HIDDEN, Hb, generator=gen) / Hb ** 0.5
        E = target.get_input_embeddings().weight.float()
        asst.model.embed_tokens.weight.copy_(E @ A.T * target.get_input_embeddings().embed_scale)
        asst.pre_projection.weight.zero_()
        asst.pre_projection.weight[:, :Hb].copy_(A)
        for layer in asst.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
            layer.layer_scalar.fill_(1.0)


def make(name: str) -> None:
    import torch
    from transformers import Gemma4UnifiedAssistantForCausalLM

    torch.set_num_threads(1)
    spec = DRAFTERS[name]
    target = load_target()
    tcfg = target.config
    cfg = assistant_config(tcfg, spec["ordered"])
    torch.manual_seed(spec["seed"])
    asst = Gemma4UnifiedAssistantForCausalLM(cfg).to(torch.float32)
    gen = torch.Generator().manual_seed(spec["seed"])
    rspec = dict(initializer_range=0.1, embed_std=0.05, qk_norm_range=(0.4, 0.7), final_norm_scale=8.0)
    g4ref.randomize_(asst, rspec, gen)
    with torch.no_grad():   # randomize_ only knows the target's final-norm name
        asst.model.norm.weight.uniform_(0.8 * 8.0, 1.2 * 8.0, generator=gen)
    asst.tie_weights()
    if spec["copy"]:
        copy_init_(asst, target, gen)
    asst.eval()
    if spec["ordered"]:
        with torch.no_grad():
            V = tcfg.vocab_size
            perm = torch.randperm(V, generator=gen)
            asst.masked_embedding.token_ordering.copy_(perm)
            rows = asst.lm_head.weight[perm].view(NUM_CENTROIDS, V // NUM_CENTROIDS, HIDDEN)
            asst.masked_embedding.centroids.weight.copy_(rows.mean(1))
    asst = asst.to(torch.bfloat16)
    out = os.path.join(OUT_DIR, name)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    asst.save_pretrained(out)
    gc = asst.generation_config
    gc.num_assistant_tokens = NUM_ASSISTANT_TOKENS
    gc.num_assistant_tokens_schedule = "constant"
    gc.bos_token_id, gc.pad_token_id, gc.eos_token_id = g4ref.BOS_ID, g4ref.PAD_ID, [g4ref.EOS_ID, g4ref.END_OF_TURN_ID]
    gc.save_pretrained(out)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"{name}: {size / 1e6:.2f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=list(DRAFTERS))
    for n in ap.parse_args().names:
        make(n)


if __name__ == "__main__":
    main()
