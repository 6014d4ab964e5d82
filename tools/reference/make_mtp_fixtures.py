#!/usr/bin/env python3
"""Write random Gemma 4 MTP drafters (transformers' Gemma4UnifiedAssistantForCausalLM) for the
g4-causal-tiny target into tests/fixtures/mtp/<name>/ (config.json, generation_config.json with
num_assistant_tokens, model.safetensors, bf16):

  random          random weights: drafts the target rarely accepts
  friendly        distilled for a few hundred Adam steps on the target's own greedy continuations,
                  so that several drafts per round are accepted
  friendly-ordered  the same weights plus the centroid-masked embedder (use_ordered_embeddings):
                  a random token ordering, each centroid the mean of its cluster's lm_head rows

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
    "random": dict(seed=7001, ordered=False, train_steps=0),
    "friendly": dict(seed=7002, ordered=False, copy=True, train_steps=0),
    "friendly-ordered": dict(seed=7002, ordered=True, copy=True, train_steps=0),
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


def training_data(target, seed: int, n_seq: int = 24, prompt_len: int = 12, gen_len: int = 52):
    """Greedy continuations of random prompts by the target, with its final hidden states and the
    K/V of its last sliding and last full layer (shared_kv_states) over the whole sequence."""
    import torch

    g = torch.Generator().manual_seed(seed)
    lo, hi = g4ref.FIRST_PIECE_ID, target.config.vocab_size
    seqs = []
    with torch.no_grad():
        for _ in range(n_seq):
            p = torch.cat([torch.tensor([[g4ref.BOS_ID]]), torch.randint(lo, hi, (1, prompt_len - 1), generator=g)], 1)
            out = target.generate(p, max_new_tokens=gen_len, do_sample=False, eos_token_id=None,
                                  pad_token_id=g4ref.PAD_ID)
            o = target(out, use_cache=False, output_hidden_states=True, return_shared_kv_states=True)
            seqs.append((out, o.hidden_states[-1], {k: (v[0], v[1]) for k, v in o.shared_kv_states.items()},
                         o.logits.argmax(-1)))
    return seqs


def masks(T: int, W: int):
    """Query row i (drafting at position i from token i and the hidden of row i - 1) sees target
    positions [0, i) on full layers and the last W + 1 of them on sliding ones (the assistant's
    flipped bidirectional window), as in the first round after a prefill."""
    import torch

    q = torch.arange(1, T)[:, None]
    k = torch.arange(T)[None, :]
    neg = torch.finfo(torch.float32).min
    full = torch.where(k < q, 0.0, neg)[None, None]
    slide = torch.where((k < q) & (k >= q - W - 1), 0.0, neg)[None, None]
    return {"full_attention": full, "sliding_attention": slide}


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


def distill(asst, target, steps: int, seed: int) -> float:
    """Trains the drafter to predict the target's next greedy tokens, NUM_ASSISTANT_TOKENS steps
    unrolled as SinglePositionMultiTokenCandidateGenerator runs it; returns the last step's
    first-draft accuracy."""
    import torch

    torch.manual_seed(seed)
    data = training_data(target, seed)
    W = target.config.sliding_window
    emb = target.get_input_embeddings()
    opt = torch.optim.Adam([p for p in asst.parameters() if p.requires_grad], lr=3e-3)
    acc = 0.0
    for step in range(steps):
        ids, hid, kv, greedy = data[step % len(data)]
        T = ids.shape[1]
        m = masks(T, W)
        pos = torch.arange(1, T)[None]
        tok = ids[:, 1:]
        h = hid[:, :-1]
        loss = 0.0
        for j in range(NUM_ASSISTANT_TOKENS):
            x = asst.pre_projection(torch.cat([emb(tok), h], -1))
            out = asst.model(inputs_embeds=x, attention_mask=m, position_ids=pos, shared_kv_states=kv, use_cache=False)
            logits = asst.lm_head(out.last_hidden_state)
            # label: the target's greedy token j + 1 steps after token i (rows past the end drop)
            n = T - 1 - j
            ce = torch.nn.functional.cross_entropy(logits[0, :n], greedy[0, 1 + j:T])
            loss = loss + ce / (j + 1)
            if j == 0:
                acc = float((logits[0].argmax(-1) == greedy[0, 1:T]).float().mean())
            tok = logits.argmax(-1)
            h = asst.post_projection(out.last_hidden_state)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return acc


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
    acc = None
    if spec.get("copy"):
        copy_init_(asst, target, gen)
    if spec["train_steps"]:
        asst.train()
        acc = distill(asst, target, spec["train_steps"], spec["seed"])
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
    print(f"{name}: {size / 1e6:.2f} MB" + (f", distilled first-draft accuracy {acc:.2f}" if acc is not None else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=list(DRAFTERS))
    for n in ap.parse_args().names:
        make(n)


if __name__ == "__main__":
    main()
