#!/usr/bin/env python3
"""Records what transformers makes of prompts with images on tests/fixtures/g4-cond-mm-tiny, for
tests/py/test_multimodal.py: the processor's expanded prompt ids, the last position's logits
(softcapped, float32) and a greedy continuation.

  "$G4_REF_PY" tools/reference/record_mm_goldens.py

The processor is Gemma4UnifiedProcessor over the fixture's tokenizer (its image markers named as the
hub's tokenizer names them) and Gemma4UnifiedImageProcessor at the fixture's patch geometry. The
model runs in float32 on the bf16 weights, eager attention, with the attention masks of
Gemma4UnifiedForConditionalGeneration.create_masks_for_generate (create_masks_for_vision_model:
an image's soft tokens attend to each other on sliding layers, within the window; full layers
causal), passed explicitly: Gemma4UnifiedModel.forward alone builds a different mask (the image
block bidirectional on every layer and past the window), and the script records how far apart the
two are (plain_forward_rel_diff). Greedy tokens re-run the whole sequence each step (no cache), the
generated tokens text (mm_token_type_ids 0). Cases whose top1 - top2 margin at any step is under
MIN_MARGIN are refused, so float32 summation noise cannot flip a golden token.
"""
import json
import pathlib
import sys

import numpy as np
import torch
import transformers
from PIL import Image
from transformers import AutoTokenizer, Gemma4UnifiedForConditionalGeneration
from transformers.models.gemma4_unified.feature_extraction_gemma4_unified import Gemma4UnifiedAudioFeatureExtractor
from transformers.models.gemma4_unified.image_processing_gemma4_unified import Gemma4UnifiedImageProcessor
from transformers.models.gemma4_unified.processing_gemma4_unified import Gemma4UnifiedProcessor
from transformers.models.gemma4_unified.video_processing_gemma4_unified import Gemma4UnifiedVideoProcessor

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "g4-cond-mm-tiny"
MEDIA = ROOT / "tests" / "fixtures" / "media"
OUT = ROOT / "tests" / "fixtures" / "multimodal"
N_GREEDY = 20
MIN_MARGIN = 0.003
MARKERS = {"image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
           "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>"}

# name, prompt text, images (file, max_soft_tokens), the prefill chunk our engine runs it at
# (chunk_boundary: 64 would cut the image at position 64; the engine must end that chunk before it)
CASES = [
    ("one_image", "Describe <|image|> in words.", [("jpeg_odd_97x61.jpg", 70)], 256),
    ("two_images", "<|image|> and then <|image|> are", [("png_rgba_150x100.png", 70), ("gif_trns_64x64.gif", 70)], 256),
    ("chunk_boundary", "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c <|image|> end",
     [("jpeg_odd_97x61.jpg", 70)], 64),
    ("small_image", "look: <|image|>", [("png_gray2_33x21.png", 70)], 256),
]


def processor(soft):
    tok = AutoTokenizer.from_pretrained(FIX, extra_special_tokens=MARKERS)
    ip = Gemma4UnifiedImageProcessor(max_soft_tokens=soft, patch_size=4, pooling_kernel_size=2)
    return Gemma4UnifiedProcessor(feature_extractor=Gemma4UnifiedAudioFeatureExtractor(), image_processor=ip,
                                  tokenizer=tok, video_processor=Gemma4UnifiedVideoProcessor())


def vision_masks(model, ids, tt):
    L = ids.shape[1]
    return Gemma4UnifiedForConditionalGeneration.create_masks_for_generate(
        config=model.config, inputs_embeds=torch.empty((1, L, 0)), attention_mask=None, cache=None,
        position_ids=torch.arange(L)[None], mm_token_type_ids=tt)


def logits_of(model, inp, ids, tt, masks):
    kw = dict(input_ids=ids, pixel_values=inp["pixel_values"], image_position_ids=inp["image_position_ids"],
              mm_token_type_ids=tt)
    if masks is not None:
        kw["attention_mask"] = masks
    with torch.no_grad():
        return model(**kw).logits[0, -1].to(torch.float32)


def margin(x):
    top = torch.topk(x, 2).values
    return float(top[0] - top[1])


def main():
    torch.manual_seed(0)
    model = Gemma4UnifiedForConditionalGeneration.from_pretrained(FIX, dtype=torch.float32,
                                                                  attn_implementation="eager").eval()
    assert model.config.text_config.use_bidirectional_attention == "vision"
    OUT.mkdir(exist_ok=True)
    cases = []
    for name, text, imgs, chunk in CASES:
        soft = imgs[0][1]
        assert all(s == soft for _, s in imgs)
        inp = processor(soft)(text=[text], images=[[Image.open(MEDIA / f) for f, _ in imgs]], return_tensors="pt")
        ids, tt = inp["input_ids"], inp["mm_token_type_ids"]
        first = logits_of(model, inp, ids, tt, vision_masks(model, ids, tt))
        plain = logits_of(model, inp, ids, tt, None)
        plain_rel = float((plain - first).abs().max() / first.abs().max())
        greedy, margins, x = [], [margin(first)], first
        for _ in range(N_GREEDY):
            t = int(torch.argmax(x))
            greedy.append(t)
            ids = torch.cat([ids, torch.tensor([[t]])], dim=1)
            tt = torch.cat([tt, torch.zeros((1, 1), dtype=tt.dtype)], dim=1)
            x = logits_of(model, inp, ids, tt, vision_masks(model, ids, tt))
            margins.append(margin(x))
        if min(margins) < MIN_MARGIN:
            sys.exit(f"{name}: a greedy step's top1 - top2 margin is {min(margins):.3g} < {MIN_MARGIN}; change the case")
        out = f"logits_{name}.f32"
        first.numpy().astype("<f4").tofile(OUT / out)
        spans = [int((inp["image_position_ids"][i] != -1).all(-1).sum()) for i in range(len(imgs))]
        cases.append(dict(name=name, prompt=text, images=[f for f, _ in imgs], max_soft_tokens=soft,
                          prefill_chunk=chunk, expanded_ids=inp["input_ids"][0].tolist(), soft_tokens=spans,
                          logits_file=out, greedy=greedy, min_margin=min(margins), plain_forward_rel_diff=plain_rel))
        print(f"{name}: {inp['input_ids'].shape[1]} ids, soft tokens {spans}, greedy {greedy[:8]}..., "
              f"min margin {min(margins):.3g}, plain forward differs by {plain_rel:.3g} relative")
    meta = dict(transformers=transformers.__version__, torch=torch.__version__, model="g4-cond-mm-tiny",
                masks="Gemma4UnifiedForConditionalGeneration.create_masks_for_generate (create_masks_for_vision_model)",
                attention="eager, float32")
    (OUT / "multimodal.json").write_text(json.dumps(dict(meta=meta, cases=cases), indent=1) + "\n")


if __name__ == "__main__":
    main()
