#!/usr/bin/env python3
"""Float32 reference for the quantized Gemma 4 GGUF fixtures (tests/fixtures/g4-gguf/*-q8_0.gguf,
causal-k256-{q5_k_m,iq4_xs,q3_k_m,q2_k,iq4_nl,q4_1,q5_1}.gguf):
transformers runs the HF fixture with every quantized tensor of the GGUF dequantized (gguf-py's
reference dequantize, the published block format) in place of its bf16 weight, in float32 — the
exact semantics gemma4c computes on a quantized file. The norms, layer scalars and RoPE of the GGUF
are the HF values unchanged (F32 copies of bf16), so only the quantized matrices are swapped.
Writes tests/fixtures/g4-gguf/<group>_goldens.json and <group>_logits_<file>_<case>.f32 (last
prompt position, after the softcap; group q8_0 or one of the causal-k256 files' types) for the prompts of the HF fixture's
goldens.json, 64 greedy tokens each (EOS neither stops nor is suppressed).

A multimodal placeholder id (<|image|>, ...) in a prompt or continuation is embedded as <pad> by
Gemma4UnifiedForConditionalGeneration but as itself by llama.cpp and gemma4c on a GGUF; such cases
are flagged "placeholder_hit" and the test skips them.

usage: "$G4_REF_PY" tools/reference/record_gemma4_gguf_goldens.py [--groups q8_0 q5_k_m iq4_xs q3_k_m q2_k iq4_nl q4_1 q5_1]
"""
import argparse
import json
import pathlib

import numpy as np
import torch
import transformers
from gguf import GGUFReader
from gguf.quants import dequantize
from transformers import AutoConfig, GenerationConfig

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "g4-gguf"
GROUPS = {"q8_0": {"cond-q8_0.gguf": "g4-cond-tiny", "causal-q8_0.gguf": "g4-causal-tiny"},
          "q5_k_m": {"causal-k256-q5_k_m.gguf": "g4-causal-k256"},
          "iq4_xs": {"causal-k256-iq4_xs.gguf": "g4-causal-k256"},
          "q3_k_m": {"causal-k256-q3_k_m.gguf": "g4-causal-k256"},
          "q2_k": {"causal-k256-q2_k.gguf": "g4-causal-k256"},
          "iq4_nl": {"causal-k256-iq4_nl.gguf": "g4-causal-k256"},
          "q4_1": {"causal-k256-q4_1.gguf": "g4-causal-k256"},
          "q5_1": {"causal-k256-q5_1.gguf": "g4-causal-k256"}}
MAP = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
       "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
       "ffn_down": "mlp.down_proj"}
N_GREEDY = 64


def hf_name(gname, base):
    if gname == "token_embd.weight":
        return base + "embed_tokens.weight"
    parts = gname.split(".")   # blk.L.kind.weight
    return f"{base}layers.{parts[1]}.{MAP[parts[2]]}.weight"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", nargs="+", default=list(GROUPS), choices=list(GROUPS))
    for group in ap.parse_args().groups:
        record(group, GROUPS[group])


def record(group, files):
    torch.set_num_threads(1)
    result = {"transformers_version": transformers.__version__, "torch_version": torch.__version__,
              "note": "float32 forward of the HF fixture with the GGUF's quantized tensors dequantized in place",
              "files": {}}
    for fname, fixture in files.items():
        d = ROOT / "tests" / "fixtures" / fixture
        cfg = AutoConfig.from_pretrained(d)
        cls = getattr(transformers, cfg.architectures[0])
        model = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
        base = "model.language_model." if cfg.architectures[0].endswith("ConditionalGeneration") else "model."
        sd = model.state_dict()
        swapped = 0
        for t in GGUFReader(OUT / fname).tensors:
            if t.tensor_type.name in ("F32", "F16", "BF16"):
                continue
            w = dequantize(t.data, t.tensor_type).astype(np.float32)
            name = hf_name(t.name, base)
            assert tuple(sd[name].shape) == w.shape, (name, sd[name].shape, w.shape)
            with torch.no_grad():
                sd[name].copy_(torch.from_numpy(w))
            swapped += 1
        # tied head follows the embedding
        assert torch.equal(model.get_output_embeddings().weight, model.get_input_embeddings().weight)
        mm = {getattr(cfg, k, None) for k in ("image_token_id", "video_token_id", "audio_token_id")} - {None}
        if cfg.architectures[0].endswith("ForCausalLM"):
            mm = set()
        model.generation_config.eos_token_id = None
        gen = GenerationConfig(do_sample=False, max_new_tokens=N_GREEDY, min_new_tokens=0, eos_token_id=None,
                               pad_token_id=0, bos_token_id=2, use_cache=True)
        cases = []
        with torch.no_grad():
            for c in json.loads((d / "goldens.json").read_text())["cases"]:
                x = torch.tensor([c["prompt_ids"]], dtype=torch.long)
                logits = model(input_ids=x, use_cache=False).logits[0, -1].float().numpy()
                lf = f"{group}_logits_{fname.rsplit('-', 1)[0]}_{c['name']}.f32"
                logits.astype("<f4").tofile(OUT / lf)
                g = model.generate(input_ids=x, generation_config=gen, output_logits=True, return_dict_in_generate=True)
                greedy = g.sequences[0, len(c["prompt_ids"]):].tolist()
                margins = []
                for lg in g.logits:
                    v = torch.topk(lg[0].float(), 2).values
                    margins.append(float(v[0] - v[1]))
                hit = bool(mm & (set(greedy) | set(c["prompt_ids"])))
                cases.append({"name": c["name"], "prompt_ids": c["prompt_ids"], "logits_file": lf, "greedy": greedy,
                              "min_step_margin": min(margins), "placeholder_hit": hit})
                print(fname, c["name"], "min margin %.4g" % min(margins), "placeholder" if hit else "")
        result["files"][fname] = {"fixture": fixture, "tensors_dequantized": swapped, "cases": cases}
    (OUT / f"{group}_goldens.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
