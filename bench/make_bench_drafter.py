#!/usr/bin/env python3
"""A random-weight Gemma 4 MTP drafter (transformers' Gemma4UnifiedAssistantForCausalLM) for the
bench checkpoint (bench/synth_weights.py; default ${TMPDIR:-/tmp}/g4-bench), to time
`gemma4c run --draft DIR` on a target larger than the test fixtures. Random weights: it measures
what drafting and verifying cost, not what a trained drafter gains. The 12B assistant's layout
(four layers, three sliding and one full, each reading the target's KV of that type) at a smaller
width. --copy makes it draft its input token again (tools/reference/make_mtp_fixtures.py's
"friendly" drafter), so that drafts are accepted wherever the target repeats its last token.

  /path/to/venv-with-transformers/bin/python bench/make_bench_drafter.py [--target DIR] [--out DIR]
      [--hidden 256] [--copy]

Needs torch, safetensors and a transformers with gemma4_unified_assistant."""
import argparse
import json
import os

S, F = "sliding_attention", "full_attention"


def main():
    tmp = os.environ.get("TMPDIR", "/tmp")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default=os.path.join(tmp, "g4-bench"))
    p.add_argument("--out", default=os.path.join(tmp, "g4-bench-drafter"))
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--draft-tokens", type=int, default=4, help="num_assistant_tokens")
    p.add_argument("--copy", action="store_true")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()

    import torch
    from safetensors import safe_open
    from transformers import (Gemma4UnifiedAssistantConfig, Gemma4UnifiedAssistantForCausalLM,
                              Gemma4UnifiedTextConfig)

    torch.manual_seed(a.seed)
    tc = json.load(open(os.path.join(a.target, "config.json")))
    tc = tc.get("text_config", tc)
    H, Hb, V = a.hidden, tc["hidden_size"], tc["vocab_size"]
    text = Gemma4UnifiedTextConfig(
        vocab_size=V, hidden_size=H, intermediate_size=4 * H, num_hidden_layers=4, layer_types=[S, S, S, F],
        num_attention_heads=tc["num_attention_heads"], num_key_value_heads=tc["num_key_value_heads"],
        head_dim=tc["head_dim"], global_head_dim=tc["global_head_dim"],
        num_global_key_value_heads=tc["num_global_key_value_heads"], attention_k_eq_v=tc.get("attention_k_eq_v", True),
        sliding_window=tc["sliding_window"], final_logit_softcapping=None, rms_norm_eps=tc["rms_norm_eps"],
        tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh", rope_parameters=tc["rope_parameters"],
        num_kv_shared_layers=4, use_double_wide_mlp=False, hidden_size_per_layer_input=0,
        max_position_embeddings=tc["max_position_embeddings"], pad_token_id=0, eos_token_id=1, bos_token_id=2)
    cfg = Gemma4UnifiedAssistantConfig(text_config=text, backbone_hidden_size=Hb, use_ordered_embeddings=False,
                                       tie_word_embeddings=True)
    cfg.architectures = ["Gemma4UnifiedAssistantForCausalLM"]
    asst = Gemma4UnifiedAssistantForCausalLM(cfg).to(torch.float32).eval()
    with torch.no_grad():
        for name, w in asst.named_parameters():
            if name.endswith("norm.weight"):
                w.uniform_(0.8, 1.2)
            elif w.dim() == 2:
                w.normal_(0.0, 0.02)
        for layer in asst.model.layers:
            layer.layer_scalar.fill_(1.0)
        asst.tie_weights()
        if a.copy:   # proposes its input token again: lm_head rows = A x the target's embedding rows
            st = safe_open(os.path.join(a.target, "model.safetensors"), "pt")
            key = next(k for k in st.keys() if k.endswith("embed_tokens.weight"))
            E = st.get_tensor(key).float()
            A = torch.randn(H, Hb) / Hb ** 0.5
            asst.model.embed_tokens.weight.copy_(E @ A.T * Hb ** 0.5)
            asst.pre_projection.weight.zero_()
            asst.pre_projection.weight[:, :Hb].copy_(A)
            for layer in asst.model.layers:
                layer.self_attn.o_proj.weight.zero_()
                layer.mlp.down_proj.weight.zero_()
    asst = asst.to(torch.bfloat16)
    os.makedirs(a.out, exist_ok=True)
    asst.save_pretrained(a.out)
    gc = asst.generation_config
    gc.num_assistant_tokens = a.draft_tokens
    gc.num_assistant_tokens_schedule = "constant"
    gc.save_pretrained(a.out)
    size = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out))
    print(f"{a.out}: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
