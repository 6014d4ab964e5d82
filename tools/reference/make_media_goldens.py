#!/usr/bin/env python3
"""Writes the test images of tests/fixtures/media/ and records, for each, what transformers'
Gemma 4 unified image processor makes of it: the resized uint8 pixels, the merged patches
(float32) and their positions, as sha256 hashes and geometry in processor.json.

  "$G4_REF_PY" tools/reference/make_media_goldens.py

The path mirrored is `processor(images=PIL.Image.open(file))`: PIL decodes, transformers'
convert_to_rgb composites any alpha over white, the TorchvisionBackend resizes the uint8 tensor
with tvF.resize(BICUBIC, antialias=True) (torch's native uint8 kernel on CPU), rescales by 1/255
and patchifies. The resized pixels are captured at the rescale step.

Also records the vision embedder's soft tokens on tests/fixtures/g4-cond-mm-tiny (its own
patch geometry: patch_size and pooling_kernel_size of its vision_config) into
tests/fixtures/media/embed_*.f32. Needs transformers (gemma4_unified), torch, torchvision, pillow.
"""
import hashlib
import io
import json
import pathlib
import struct
import sys
import zlib

import numpy as np
import PIL
import torch
import torchvision
import transformers
from PIL import Image
from transformers.models.gemma4_unified.image_processing_gemma4_unified import Gemma4UnifiedImageProcessor

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "media"
MM_TINY = ROOT / "tests" / "fixtures" / "g4-cond-mm-tiny"

rng = np.random.default_rng(1234)


def smooth(h, w, ch=3, noise=6.0, rng=rng):
    """A photo-like test picture: gradients, a few discs and a little noise (so JPEG / PNG stay
    small while the resize sees real detail)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, ch))
    for c in range(ch):
        fx, fy = rng.uniform(0.5, 3.0, 2)
        ph = rng.uniform(0, 6.28)
        img[..., c] = 127 + 100 * np.sin(fx * 6.28 * x / max(w, 1) + ph) * np.cos(fy * 6.28 * y / max(h, 1))
    for _ in range(4):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(3, max(4, min(h, w) / 3))
        m = (x - cx) ** 2 + (y - cy) ** 2 < r * r
        img[m] = rng.uniform(0, 255, ch)
    img += rng.normal(0, noise, img.shape)
    return np.clip(img, 0, 255).round().astype(np.uint8)


# ------------------------------------------------------------------ a PNG writer for what PIL cannot write

def png_chunk(t, data):
    return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data) & 0xFFFFFFFF)


def png_bytes(rows, w, h, depth, ctype, trns=None, interlace=False):
    """rows: a function (x0, dx, y) -> packed scanline bytes of the pixels x0, x0+dx, ... of row y."""
    raw = bytearray()
    if not interlace:
        for y in range(h):
            raw += b"\0" + rows(0, 1, y, w)
    else:
        for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)):
            n = (w - x0 + dx - 1) // dx if w > x0 else 0
            if n == 0:
                continue
            for y in range(y0, h, dy):
                raw += b"\0" + rows(x0, dx, y, n)
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0))
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    return out + png_chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + png_chunk(b"IEND", b"")


def png16(arr, ctype, interlace=False):
    h, w = arr.shape[:2]
    a = arr.reshape(h, w, -1).astype(">u2")
    return png_bytes(lambda x0, dx, y, n: a[y, x0::dx][:n].tobytes(), w, h, 16, ctype, interlace=interlace)


def png_gray_low(arr, depth):
    """arr holds values < 2**depth; packed MSB first."""
    h, w = arr.shape

    def row(x0, dx, y, n):
        v = arr[y, x0::dx][:n]
        per = 8 // depth
        out = bytearray((n + per - 1) // per)
        for i, p in enumerate(v):
            out[i // per] |= int(p) << (8 - depth * (i % per + 1))
        return bytes(out)
    return png_bytes(row, w, h, depth, 0)


def png8(arr, ctype, interlace=False, trns=None):
    h, w = arr.shape[:2]
    a = arr.reshape(h, w, -1)
    return png_bytes(lambda x0, dx, y, n: a[y, x0::dx][:n].tobytes(), w, h, 8, ctype, trns=trns, interlace=interlace)


# ------------------------------------------------------------------ the images

def save(img, name, **kw):
    buf = io.BytesIO()
    img.save(buf, **kw)
    (OUT / name).write_bytes(buf.getvalue())


def write_images():
    """(file name, [max_soft_tokens...]) in a fixed order."""
    cases = []

    def add(name, data_or_img, soft, **kw):
        if isinstance(data_or_img, bytes):
            (OUT / name).write_bytes(data_or_img)
        else:
            save(data_or_img, name, **kw)
        cases.append((name, soft))

    # JPEG: downscale (70) and upscale (280) of one RGB picture; gray; CMYK; odd sizes with 4:2:0
    # chroma; progressive; 4:4:4
    rgb = Image.fromarray(smooth(400, 600))
    add("jpeg_rgb_600x400.jpg", rgb, [70, 280], format="JPEG", quality=70)
    add("jpeg_big_1280x960.jpg", Image.fromarray(smooth(960, 1280, noise=1.0, rng=np.random.default_rng(99))), [70, 140], format="JPEG", quality=40)
    add("jpeg_gray_333x251.jpg", Image.fromarray(smooth(251, 333, 1)[..., 0], "L"), [140], format="JPEG", quality=80)
    add("jpeg_cmyk_200x150.jpg", Image.fromarray(smooth(150, 200, 4), "CMYK"), [280], format="JPEG", quality=80)
    add("jpeg_odd_97x61.jpg", Image.fromarray(smooth(61, 97)), [70], format="JPEG", quality=75)
    add("jpeg_progressive_300x200.jpg", Image.fromarray(smooth(200, 300)), [560], format="JPEG", quality=75, progressive=True)
    add("jpeg_444_123x77.jpg", Image.fromarray(smooth(77, 123)), [140], format="JPEG", quality=90, subsampling=0)
    # PNG: every colour mode PIL distinguishes
    add("png_rgb_257x129.png", Image.fromarray(smooth(129, 257)), [280], format="PNG")
    rgba = smooth(100, 150, 4)
    rgba[..., 3] = np.linspace(0, 255, 150, dtype=np.uint8)[None, :]
    rgba[:10, :, 3] = 0
    add("png_rgba_150x100.png", Image.fromarray(rgba, "RGBA"), [140], format="PNG")
    la = smooth(48, 64, 2)
    la[..., 1] = rng.integers(0, 256, (48, 64), dtype=np.uint8)
    add("png_la_64x48.png", Image.fromarray(la, "LA"), [70], format="PNG")
    add("png_l_wide_1000x31.png", Image.fromarray(smooth(31, 1000, 1)[..., 0], "L"), [280], format="PNG")
    add("png_l_strip_1200x4.png", Image.fromarray(smooth(4, 1200, 1)[..., 0], "L"), [280], format="PNG")
    add("png_wide_down_1900x120.png", Image.fromarray(smooth(120, 1900, noise=0, rng=np.random.default_rng(98))), [70], format="PNG")
    add("png_1bit_90x45.png", Image.fromarray(smooth(45, 90, 1)[..., 0] > 127).convert("1"), [70], format="PNG")
    pal = Image.fromarray(smooth(90, 120)).quantize(256)
    add("png_palette_120x90.png", pal, [280], format="PNG")
    pt = Image.fromarray(smooth(60, 80)).quantize(16)
    add("png_palette_trns_80x60.png", pt, [70], format="PNG", transparency=bytes([0, 64, 128, 200] + [255] * 12))
    rgbt = smooth(50, 70)
    rgbt[10:20, 10:30] = (12, 34, 56)
    add("png_rgb_trns_70x50.png", Image.fromarray(rgbt), [70], format="PNG", transparency=(12, 34, 56))
    lt = smooth(40, 40, 1)[..., 0]
    lt[5:15, 5:25] = 77
    add("png_l_trns_40x40.png", Image.fromarray(lt, "L"), [140], format="PNG", transparency=77)
    add("png_gray2_33x21.png", png_gray_low(rng.integers(0, 4, (21, 33)), 2), [70])
    add("png_gray4_40x30.png", png_gray_low(rng.integers(0, 16, (30, 40)), 4), [70])
    add("png_rgb16_100x75.png", png16(smooth(75, 100).astype(np.uint16) * 257 + rng.integers(0, 257, (75, 100, 3)), 2), [140])
    add("png_rgba16_60x40.png", png16(smooth(40, 60, 4).astype(np.uint16) * 257, 6), [70])
    add("png_gray16_90x70.png", png16((smooth(70, 90, 1)[..., 0].astype(np.uint16) * 2), 0), [70])
    add("png_interlaced_rgb_77x55.png", png8(smooth(55, 77), 2, interlace=True), [140])
    add("png_exact_480x336.png", Image.fromarray(smooth(336, 480, noise=0)), [70], format="PNG")
    add("png_tiny_64x64_1120.png", Image.fromarray(smooth(64, 64)), [1120, 560], format="PNG")
    # WebP: lossy, lossless with alpha, lossy with alpha
    add("webp_lossy_300x200.webp", Image.fromarray(smooth(200, 300)), [280], format="WEBP", quality=70)
    wa = smooth(96, 128, 4)
    wa[..., 3] = np.linspace(0, 255, 128, dtype=np.uint8)[None, :]
    add("webp_lossless_rgba_128x96.webp", Image.fromarray(wa, "RGBA"), [140], format="WEBP", lossless=True)
    add("webp_lossy_alpha_100x100.webp", Image.fromarray(smooth(100, 100, 4), "RGBA"), [70], format="WEBP", quality=60)
    # GIF: palette (PIL writes it interlaced), transparency, a tall extreme aspect ratio
    add("gif_rgb_200x150.gif", Image.fromarray(smooth(150, 200)).quantize(64), [280], format="GIF")
    gt = Image.fromarray(smooth(64, 64)).quantize(32)
    add("gif_trns_64x64.gif", gt, [70], format="GIF", transparency=3)
    add("gif_tall_3x700.gif", Image.fromarray(smooth(700, 3)).quantize(16), [70], format="GIF")
    return cases


# ------------------------------------------------------------------ a checkpoint with the real patch geometry

def write_vis48():
    """A tiny Gemma 4 unified checkpoint (2 text layers) whose vision_config has the 12B's patch
    geometry (patch 16, pooling 3) and a narrow embedder (mm_embed_dim 16, 72 positions), saved by
    transformers, with a processor_config.json as the hub's (max_soft_tokens 140 here)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import g4ref
    from transformers import Gemma4UnifiedForConditionalGeneration, Gemma4UnifiedVisionConfig

    spec = dict(arch="cond", seed=4801, vocab_size=128, hidden_size=32, intermediate_size=64,
                layer_types=[g4ref.S, g4ref.F], num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                global_head_dim=32, num_global_key_value_heads=1, sliding_window=8, initializer_range=0.1,
                embed_std=0.05, final_norm_scale=8.0, qk_norm_range=(0.4, 0.7))
    cfg = g4ref.build_config(spec)
    vc = dict(patch_size=16, pooling_kernel_size=3, mm_embed_dim=16, mm_posemb_size=72, output_proj_dims=16)
    cfg.vision_config = Gemma4UnifiedVisionConfig(initializer_range=0.1, **vc)
    torch.manual_seed(spec["seed"])
    model = Gemma4UnifiedForConditionalGeneration(cfg).to(torch.float32).eval()
    g4ref.randomize_(model, spec, torch.Generator().manual_seed(spec["seed"]))
    model.tie_weights()
    out = OUT / "vis48"
    out.mkdir(exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out)
    (out / "processor_config.json").write_text(json.dumps({"image_processor": {
        "image_processor_type": "Gemma4UnifiedImageProcessor", "patch_size": 16, "pooling_kernel_size": 3,
        "max_soft_tokens": 140}}, indent=1) + "\n")
    return out, vc


# ------------------------------------------------------------------ the processor

def run_processor(path, soft, patch=16, pool=3):
    proc = Gemma4UnifiedImageProcessor(max_soft_tokens=soft, patch_size=patch, pooling_kernel_size=pool)
    captured = {}
    orig = proc.rescale_and_normalize

    def capture(images, *a, **k):
        captured["pixels"] = images.clone()
        return orig(images, *a, **k)
    proc.rescale_and_normalize = capture
    img = Image.open(path)
    out = proc(images=img, return_tensors="pt")
    n = int(out["num_soft_tokens_per_image"][0])
    pv = out["pixel_values"][0, :n].to(torch.float32).contiguous().numpy()
    pos = out["image_position_ids"][0, :n].to(torch.int32).contiguous().numpy()
    assert (out["image_position_ids"][0, n:] == -1).all()
    px = captured["pixels"]
    assert px.dtype == torch.uint8, px.dtype
    px = px.permute(1, 2, 0).contiguous().numpy()  # CHW -> HWC, as gemma4c writes it
    return img, px, pv, pos, n


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for f in OUT.rglob("*"):
        if f.is_file():
            f.unlink()
    cases = write_images()
    goldens = []
    for name, softs in cases:
        for soft in softs:
            img, px, pv, pos, n = run_processor(OUT / name, soft)
            goldens.append(dict(
                file=name, max_soft_tokens=soft, patch_size=16, pooling_kernel=3, pil_mode=img.mode,
                src_width=img.width, src_height=img.height, width=int(px.shape[1]), height=int(px.shape[0]),
                n_patches=n, patch_dim=int(pv.shape[1]),
                pixels_sha256=sha(px), patches_sha256=sha(pv.astype("<f4")), positions_sha256=sha(pos.astype("<i4")),
            ))
            print(f"{name:36s} {img.mode:5s} {img.width}x{img.height} @{soft} -> {px.shape[1]}x{px.shape[0]} ({n} patches)")

    # the vision embedder on g4-cond-mm-tiny, in float32, with the fixture's own patch geometry
    from transformers import Gemma4UnifiedForConditionalGeneration
    model = Gemma4UnifiedForConditionalGeneration.from_pretrained(MM_TINY, dtype=torch.float32).eval()
    vc = model.config.vision_config
    embeds = []
    for name, soft in (("jpeg_odd_97x61.jpg", 70), ("png_rgba_150x100.png", 70), ("gif_trns_64x64.gif", 70)):
        img, px, pv, pos, n = run_processor(OUT / name, soft, vc.patch_size, vc.pooling_kernel_size)
        assert pos.max() < vc.mm_posemb_size, (name, pos.max())
        with torch.no_grad():
            feats = model.model.get_image_features(torch.from_numpy(pv)[None], torch.from_numpy(pos.astype(np.int64))[None])
        emb = feats.pooler_output[0].to(torch.float32).numpy()
        out = f"embed_{pathlib.Path(name).stem}.f32"
        emb.astype("<f4").tofile(OUT / out)
        embeds.append(dict(file=name, max_soft_tokens=soft, patch_size=vc.patch_size, pooling_kernel=vc.pooling_kernel_size,
                           n_patches=n, hidden=int(emb.shape[1]), embed=out, model="g4-cond-mm-tiny",
                           pixels_sha256=sha(px), patches_sha256=sha(pv.astype("<f4"))))
        print(f"embed {name} -> {emb.shape}")

    # the same with the 12B's patch geometry (16-pixel patches merged 3 x 3: 6912 values a patch) on a
    # checkpoint written here, whose processor_config.json sets max_soft_tokens 140
    vis, vc = write_vis48()
    model = Gemma4UnifiedForConditionalGeneration.from_pretrained(vis, dtype=torch.float32).eval()
    for name in ("jpeg_rgb_600x400.jpg", "png_palette_trns_80x60.png"):
        img, px, pv, pos, n = run_processor(OUT / name, 140, vc["patch_size"], vc["pooling_kernel_size"])
        with torch.no_grad():
            feats = model.model.get_image_features(torch.from_numpy(pv)[None], torch.from_numpy(pos.astype(np.int64))[None])
        emb = feats.pooler_output[0].to(torch.float32).numpy()
        out = f"embed_vis48_{pathlib.Path(name).stem}.f32"
        emb.astype("<f4").tofile(OUT / out)
        embeds.append(dict(file=name, max_soft_tokens=None, patch_size=16, pooling_kernel=3, n_patches=n,
                           hidden=int(emb.shape[1]), embed=out, model="media/vis48",
                           pixels_sha256=sha(px), patches_sha256=sha(pv.astype("<f4"))))
        print(f"embed vis48 {name} -> {emb.shape}")

    meta = dict(
        transformers=transformers.__version__, torch=torch.__version__, torchvision=torchvision.__version__,
        pillow=PIL.__version__, torch_cpu_capability=torch.backends.cpu.get_cpu_capability(),
        path="Gemma4UnifiedImageProcessor(images=PIL.Image.open(file)); pixels captured at rescale_and_normalize",
    )
    (OUT / "processor.json").write_text(json.dumps(dict(meta=meta, cases=goldens, embed=embeds), indent=1) + "\n")
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"{len(goldens)} cases, {len(embeds)} embed cases, {total / 1024:.0f} KiB in {OUT}")


if __name__ == "__main__":
    sys.exit(main())
