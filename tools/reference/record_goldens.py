#!/usr/bin/env python3
"""Record the golden outputs our C engine is tested against: transformers (eager attention) in
float32 on the fixture's bf16 weights (bf16 -> f32 widening is exact).

For each fixture dir it writes goldens.json and one logits_<case>.f32 per case:
  - logits_<case>.f32: the last prompt position's logits AFTER the final softcap (what HF returns),
    float32 little-endian, vocab_size values;
  - greedy: 64 tokens of greedy continuation (pure argmax, EOS does not stop or get suppressed),
    from model.generate(do_sample=False) with the KV cache, and checked token for token against a
    manual loop that re-runs the full forward (no cache) each step;
  - top1_margin (top1 - top2 of those logits), and min_greedy_step_margin over every greedy step.

Usage:  python tools/reference/record_goldens.py [NAME ...]                 (default: every fixture)
        python tools/reference/record_goldens.py --dir /tmp/g4-12b-slice --cases slice --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import g4ref  # noqa: E402

N_GREEDY = 64


# A candidate prompt is skipped when its last-position top1-top2 is below MIN_CASE_MARGIN or a
# greedy step's top1-top2 is below MIN_STEP_MARGIN (absolute, on softcapped logits of ~10), so
# float32 summation-order noise (~1e-5 absolute here) can never flip a golden token.
MIN_CASE_MARGIN = 0.05
MIN_STEP_MARGIN = 0.003
N_CANDIDATES = 8


def fixture_cases(spec: dict, seed: int) -> list[tuple[str, list[list[int]], int]]:
    """(name, candidate prompts, n_greedy). Every prompt starts with <bos> (id 2); the other ids
    are drawn from the ordinary BPE pieces (no specials, no byte pieces), seeded. record() keeps
    the first candidate whose last-position top-1 margin is >= MIN_CASE_MARGIN."""
    rng = random.Random(seed)
    w = spec["sliding_window"]
    lo, hi = g4ref.FIRST_PIECE_ID, spec["vocab_size"] - 1

    def prompt(n):
        return [g4ref.BOS_ID] + [rng.randint(lo, hi) for _ in range(n - 1)]

    lengths = [
        ("bos_only", 1),              # a single <bos>
        ("short", 4),                 # 3-5 tokens
        ("window", w),                # exactly fills the ring
        ("over_window", w + 9),       # longer than the sliding window
        ("chunk_cross", 77),          # crosses a 64-token prefill chunk boundary
        ("long", 190),                # wraps the ring many times
    ]
    return [(name, [prompt(n) for _ in range(1 if n == 1 else N_CANDIDATES)], N_GREEDY) for name, n in lengths]


TEXTS = [
    "The model reads the window of the ring buffer, and the cache keeps every key and value. "
    "When the story begins, the teacher asks a question.",
    "In the morning the children walk to the river and read a book together, because the "
    "garden is quiet and the water is cold.",
    "Every layer of the engine checks the weight of each token twice, then the kernel writes "
    "the result to memory and starts again.",
    "My friend wrote a long letter about the mountain city, the old house, the green tree and "
    "the small bird that sings at night.",
]


def text_case(out_dir: str) -> tuple[str, list[list[int]], int] | None:
    """Prompts of real text through the fixture's own tokenizer (with <bos>)."""
    path = os.path.join(out_dir, "tokenizer.json")
    if not os.path.exists(path):
        return None
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(path)
    cands = [tok.encode(t).ids for t in TEXTS]
    assert all(c[0] == g4ref.BOS_ID for c in cands)
    return ("text", cands, N_GREEDY)


def slice_cases(vocab: int, seed: int) -> list[tuple[str, list[list[int]], int]]:
    rng = random.Random(seed)
    # ids drawn away from the first few hundred (specials / bytes in the real vocab)
    mk = lambda n: [g4ref.BOS_ID] + [rng.randint(1000, vocab - 1) for _ in range(n - 1)]  # noqa: E731
    return [("p8", [mk(8)], N_GREEDY), ("p64", [mk(64)], 16), ("p200", [mk(200)], 16)]


def top2(logits):
    import torch

    v, i = torch.topk(logits, 2)
    return float(v[0] - v[1]), int(i[0])


def record(out_dir: str, name: str, cases, verify_manual: bool = True, manual_max_prompt: int | None = None) -> dict:
    import numpy as np
    import torch
    import transformers
    from transformers import AutoConfig, GenerationConfig

    cfg = AutoConfig.from_pretrained(out_dir)
    arch = cfg.architectures[0]
    cls = getattr(transformers, arch)
    model = cls.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()
    tc = cfg.get_text_config()
    vocab = tc.vocab_size
    # Sanity: tied head, layer_scalar actually loaded (not the ones() default), bf16-exact weights.
    emb = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight.data_ptr() == emb.data_ptr() or torch.equal(
        model.get_output_embeddings().weight, emb), "lm_head not tied"
    scalars = [float(b) for n, b in model.named_buffers() if n.endswith("layer_scalar")]
    assert len(scalars) == tc.num_hidden_layers and all(abs(s - 1) > 1e-3 for s in scalars), scalars
    assert torch.equal(emb, emb.to(torch.bfloat16).float())

    # generate() fills unset fields from the checkpoint's generation_config (eos [1, <turn|>]):
    # clear EOS there too, so greedy runs the full 64 steps without stopping or suppressing EOS.
    model.generation_config.eos_token_id = None
    gen_cfg = GenerationConfig(do_sample=False, max_new_tokens=N_GREEDY, min_new_tokens=0,
                               eos_token_id=None, pad_token_id=g4ref.PAD_ID, bos_token_id=g4ref.BOS_ID,
                               use_cache=True)
    out = {
        "model": name,
        "architecture": arch,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "dtype": "float32 activations on bf16 weights (attn_implementation=eager)",
        "logits_note": "last prompt position, after final_logit_softcapping, float32 little-endian",
        "layer_scalars": scalars,
        "cases": [],
    }
    # Gemma4UnifiedModel.forward replaces every image / video / audio placeholder id with the pad
    # id before the embedding lookup when no media is given, so a text-only engine that embeds
    # such an id as itself disagrees. Goldens stay text-only: a candidate whose prompt or greedy
    # continuation holds one of these ids is rejected.
    mm_ids = {getattr(cfg, k, None) for k in ("image_token_id", "video_token_id", "audio_token_id")} - {None}
    if arch.endswith("ForCausalLM"):
        mm_ids = set()
    out["multimodal_placeholder_ids_avoided"] = sorted(mm_ids)
    min_margin = min_step = float("inf")
    with torch.no_grad():
        for cname, cands, n_new in cases:
            gen_cfg.max_new_tokens = n_new
            best = None
            for ci, ids in enumerate(cands):
                x = torch.tensor([ids], dtype=torch.long)
                logits = model(input_ids=x, use_cache=False).logits[0, -1].float()
                margin, _ = top2(logits)
                if margin < MIN_CASE_MARGIN and ci + 1 < len(cands):
                    continue
                g = model.generate(input_ids=x, generation_config=gen_cfg, output_logits=True,
                                   return_dict_in_generate=True)
                greedy = g.sequences[0, len(ids):].tolist()
                assert len(greedy) == n_new, (cname, len(greedy))
                # Per-step top1-top2 of the (softcapped) logits generate() chose from, with the cache.
                step_margins = [top2(lg[0].float())[0] for lg in g.logits]
                assert [top2(lg[0].float())[1] for lg in g.logits] == greedy
                text_only = not (set(ids) | set(greedy)) & mm_ids
                score = min(margin, min(step_margins)) if text_only else -1.0
                cand = (score, ci, ids, logits, margin, greedy, step_margins)
                if best is None or cand[0] > best[0]:
                    best = cand
                if text_only and margin >= MIN_CASE_MARGIN and min(step_margins) >= MIN_STEP_MARGIN:
                    break
            assert best[0] >= 0, f"{name}/{cname}: every candidate hits a multimodal placeholder id"
            _, ci, ids, logits, margin, greedy, step_margins = best
            assert logits.shape == (vocab,)
            fn = f"logits_{cname}.f32"
            logits.numpy().astype("<f4").tofile(os.path.join(out_dir, fn))
            # Manual loop: full forward (no cache) each step, argmax of the last position.
            seq = list(ids)
            manual = []
            do_manual = verify_manual and (manual_max_prompt is None or len(ids) <= manual_max_prompt)
            for step in range(n_new if do_manual else 0):
                lg = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1].float()
                m, a = top2(lg)
                step_margins.append(m)  # the no-cache margins count too (min over both)
                manual.append(a)
                seq.append(a)
            if do_manual:
                assert manual == greedy, f"{name}/{cname}: generate() and manual loop disagree:\n{greedy}\n{manual}"
            distinct = len(set(greedy))
            case = {
                "name": cname,
                "n_prompt": len(ids),
                "candidate": ci,
                "prompt_ids": ids,
                "logits_file": fn,
                "top1_margin": margin,
                "max_abs_logit": float(logits.abs().max()),
                "greedy": greedy,
                "greedy_distinct_tokens": distinct,
                "min_greedy_step_margin": min(step_margins) if step_margins else None,
                "greedy_checked_without_cache": do_manual,
            }
            out["cases"].append(case)
            min_margin = min(min_margin, margin)
            if step_margins:
                min_step = min(min_step, min(step_margins))
            print(f"  {name}/{cname}: n={len(ids)} margin={margin:.4f} max|logit|={case['max_abs_logit']:.2f} "
                  f"greedy distinct={distinct} min step margin={case['min_greedy_step_margin']}", flush=True)
    out["min_top1_margin"] = min_margin
    out["min_greedy_step_margin"] = min_step
    with open(os.path.join(out_dir, "goldens.json"), "w") as f:
        f.write(dump_json(out))
    return out


def dump_json(obj) -> str:
    """Indented JSON with lists of numbers kept on one line."""
    import re

    text = json.dumps(obj, indent=1)
    text = re.sub(r"\[\s*([-0-9.e,\s]+?)\s*\]", lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    return text + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=None)
    ap.add_argument("--dir", help="record goldens for this checkpoint dir instead of the fixtures")
    ap.add_argument("--cases", choices=["fixture", "slice"], default="fixture")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-manual", action="store_true", help="skip the no-cache manual greedy check")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    if args.dir:
        name = os.path.basename(os.path.normpath(args.dir))
        with open(os.path.join(args.dir, "config.json")) as f:
            vocab = json.load(f).get("text_config", {}).get("vocab_size")
        cases = slice_cases(vocab, 12012)
        record(args.dir, name, cases, verify_manual=not args.no_manual, manual_max_prompt=8)
        return
    for n in args.names or list(g4ref.FIXTURES):
        spec = g4ref.FIXTURES[n]
        d = os.path.join(g4ref.FIXTURES_DIR, n)
        cases = fixture_cases(spec, spec["seed"] + 1)
        t = text_case(d)
        if t:
            cases.append(t)
        r = record(d, n, cases, verify_manual=not args.no_manual)
        print(f"{n}: min_top1_margin={r['min_top1_margin']:.4f} min_greedy_step_margin={r['min_greedy_step_margin']:.5f}")


if __name__ == "__main__":
    main()
