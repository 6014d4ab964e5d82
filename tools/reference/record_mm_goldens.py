#!/usr/bin/env python3
"""Records what transformers makes of prompts with images and audio on tests/fixtures/g4-cond-mm-tiny,
for tests/py/test_multimodal.py: the processor's expanded prompt ids, the last position's logits
(softcapped, float32) and a greedy continuation. Writes the test sound files too (16-bit PCM WAV
at 16 kHz, mono and stereo; the waveform the processor gets is what libsndfile reads from them:
samples / 32768, channels averaged).

  "$G4_REF_PY" tools/reference/record_mm_goldens.py

The processor is Gemma4UnifiedProcessor over the fixture's tokenizer (its image and audio markers
named as the hub's tokenizer names them), Gemma4UnifiedImageProcessor at the fixture's patch
geometry and Gemma4UnifiedAudioFeatureExtractor at its audio_embed_dim. The
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
import wave

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

# name, prompt text, images (file, max_soft_tokens), audio files, the prefill chunk our engine runs
# it at (chunk_boundary: 64 would cut the image at position 64; the engine must end that chunk
# before it)
CASES = [
    ("one_image", "Describe <|image|> in words.", [("jpeg_odd_97x61.jpg", 70)], [], 256),
    ("two_images", "<|image|> and then <|image|> are", [("png_rgba_150x100.png", 70), ("gif_trns_64x64.gif", 70)], [], 256),
    ("chunk_boundary", "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c <|image|> end",
     [("jpeg_odd_97x61.jpg", 70)], [], 64),
    ("small_image", "look: <|image|>", [("png_gray2_33x21.png", 70)], [], 256),
    # a max_soft_tokens other than the goldens' 70 (and the processor's default 280): per request on
    # the server (mm_processor_kwargs), --max-soft-tokens on the CLI
    ("image_140", "Describe <|image|> in words.", [("png_rgba_150x100.png", 140)], [], 256),
    ("audio", "Listen: <|audio|> now", [], ["audio_mono_811.wav"], 256),
    ("image_audio", "<|image|> with <|audio|> sound", [("jpeg_odd_97x61.jpg", 70)], ["audio_stereo_1203.wav"], 256),
]

AUDIO_FILES = {"audio_mono_811.wav": (811, 1), "audio_stereo_1203.wav": (1203, 2)}


def write_audio():
    """Tones with a little noise as 16-bit PCM WAV at 16 kHz; returns name -> the mono float32 waveform
    libsndfile reads (int16 / 32768, channels averaged)."""
    rng = np.random.default_rng(7)
    out = {}
    for name, (n, ch) in AUDIO_FILES.items():
        t = np.arange(n) / 16000.0
        sig = np.stack([0.4 * np.sin(2 * np.pi * (220 + 110 * c) * t) + 0.05 * rng.standard_normal(n) for c in range(ch)], 1)
        pcm = np.clip(np.round(sig * 32767), -32768, 32767).astype("<i2")
        with wave.open(str(OUT / name), "wb") as w:
            w.setnchannels(ch)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(pcm.tobytes())
        out[name] = (pcm.astype(np.float32) / np.float32(32768)).mean(axis=1, dtype=np.float32)
    return out


def processor(soft, frame):
    tok = AutoTokenizer.from_pretrained(FIX, extra_special_tokens=MARKERS)
    ip = Gemma4UnifiedImageProcessor(max_soft_tokens=soft, patch_size=4, pooling_kernel_size=2)
    fe = Gemma4UnifiedAudioFeatureExtractor(feature_size=frame, audio_samples_per_token=frame)
    return Gemma4UnifiedProcessor(feature_extractor=fe, image_processor=ip, tokenizer=tok,
                                  video_processor=Gemma4UnifiedVideoProcessor())


def vision_masks(model, ids, tt):
    L = ids.shape[1]
    return Gemma4UnifiedForConditionalGeneration.create_masks_for_generate(
        config=model.config, inputs_embeds=torch.empty((1, L, 0)), attention_mask=None, cache=None,
        position_ids=torch.arange(L)[None], mm_token_type_ids=tt)


def logits_of(model, inp, ids, tt, masks):
    kw = dict(input_ids=ids, mm_token_type_ids=tt)
    for k in ("pixel_values", "image_position_ids", "input_features", "input_features_mask"):
        if k in inp:
            kw[k] = inp[k]
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
    waves = write_audio()
    frame = model.config.audio_config.audio_embed_dim
    cases = []
    for name, text, imgs, audio, chunk in CASES:
        soft = imgs[0][1] if imgs else 70
        assert all(s == soft for _, s in imgs)
        kw = dict(text=[text], return_tensors="pt")
        if imgs:
            kw["images"] = [[Image.open(MEDIA / f) for f, _ in imgs]]
        if audio:
            kw["audio"] = [waves[f] for f in audio]
        inp = processor(soft, frame)(**kw)
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
        spans += [int(inp["input_features_mask"][i].sum()) for i in range(len(audio))]
        cases.append(dict(name=name, prompt=text, images=[f for f, _ in imgs], audio=audio, max_soft_tokens=soft,
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
