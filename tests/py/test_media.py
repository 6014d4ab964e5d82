"""Images through `gemma4c image` against transformers' Gemma 4 unified image processor, bit for
bit (tests/fixtures/media/processor.json, recorded by tools/reference/make_media_goldens.py): the
resized uint8 pixels, the float32 merged patches and their positions, for every format and colour
mode, up- and downscaling and every max_soft_tokens; the vision embedder's soft tokens on
g4-cond-mm-tiny and on media/vis48 (the 12B's patch geometry, its processor_config.json) within
1e-5; and the refusals (truncated, corrupt, unsupported, too many pixels)."""
import hashlib
import json
import struct
import zlib

import numpy as np
import pytest

from conftest import FIXTURES, run_g4

MEDIA = FIXTURES / "media"
GOLDENS = json.loads((MEDIA / "processor.json").read_text())


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_image(g4_bin, tmp_path, image, *extra):
    outs = {k: tmp_path / f"{k}.bin" for k in ("pixels", "patches", "positions")}
    r = run_g4(g4_bin, "image", "--image", image, "--pixels-out", outs["pixels"], "--patches-out",
               outs["patches"], "--positions-out", outs["positions"], *extra)
    return r, outs


@pytest.mark.parametrize("case", GOLDENS["cases"], ids=lambda c: f"{c['file']}@{c['max_soft_tokens']}")
def test_processor_bit_exact(g4_bin, tmp_path, case):
    r, outs = run_image(g4_bin, tmp_path, MEDIA / case["file"], "--max-soft-tokens", case["max_soft_tokens"],
                        "--patch-size", case["patch_size"], "--pooling-kernel", case["pooling_kernel"])
    assert r.returncode == 0, r.stderr.decode()
    info = json.loads(r.stdout)
    for k in ("src_width", "src_height", "width", "height", "n_patches", "patch_dim"):
        assert info[k] == case[k], (k, info[k], case[k])
    assert sha(outs["pixels"]) == case["pixels_sha256"], "resized pixels differ from torchvision's"
    assert sha(outs["patches"]) == case["patches_sha256"], "patches differ"
    assert sha(outs["positions"]) == case["positions_sha256"], "positions differ"


def test_every_format_and_mode_covered():
    files = {c["file"] for c in GOLDENS["cases"]}
    assert {f.rsplit(".", 1)[1] for f in files} == {"jpg", "png", "webp", "gif"}
    assert {"RGB", "RGBA", "L", "LA", "P", "1", "CMYK", "I;16"} <= {c["pil_mode"] for c in GOLDENS["cases"]}
    assert {70, 140, 280, 560, 1120} == {c["max_soft_tokens"] for c in GOLDENS["cases"]}
    assert any(c["width"] < c["src_width"] for c in GOLDENS["cases"])    # downscaled
    assert any(c["width"] > c["src_width"] for c in GOLDENS["cases"])    # upscaled
    assert any(c["width"] == c["src_width"] and c["height"] == c["src_height"] for c in GOLDENS["cases"])


@pytest.mark.parametrize("case", GOLDENS["embed"], ids=lambda c: c["file"])
def test_vision_embedder(g4_bin, tmp_path, case):
    model = FIXTURES / case["model"]
    out = tmp_path / "emb.f32"
    # max_soft_tokens None: the model's processor_config.json sets it
    soft = ["--max-soft-tokens", case["max_soft_tokens"]] if case["max_soft_tokens"] else []
    r, outs = run_image(g4_bin, tmp_path, MEDIA / case["file"], "-m", model, "-o", out, *soft)
    assert r.returncode == 0, r.stderr.decode()
    info = json.loads(r.stdout)
    assert info["n_patches"] == case["n_patches"] and info["hidden"] == case["hidden"]
    # the patch geometry came from the model (vision_config, processor_config.json)
    assert sha(outs["patches"]) == case["patches_sha256"]
    got = np.fromfile(out, dtype="<f4").reshape(case["n_patches"], case["hidden"])
    want = np.fromfile(MEDIA / case["embed"], dtype="<f4").reshape(case["n_patches"], case["hidden"])
    assert np.abs(got - want).max() <= 1e-5 * max(1.0, np.abs(want).max()), np.abs(got - want).max()


# ---------------------------------------------------------------- refusals

def png_header(w, h):
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr
            + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr) & 0xFFFFFFFF))


def refuse(g4_bin, path, *extra):
    r = run_g4(g4_bin, "image", "--image", path, *extra)
    err = r.stderr.decode()
    assert r.returncode == 2, (r.returncode, err)
    assert err.count("\n") == 1 and str(path) in err, err
    return err


@pytest.mark.parametrize("name", ["jpeg_rgb_600x400.jpg", "png_rgb_257x129.png", "webp_lossy_300x200.webp",
                                  "gif_rgb_200x150.gif", "png_interlaced_rgb_77x55.png"])
def test_truncated(g4_bin, tmp_path, name):
    data = (MEDIA / name).read_bytes()
    for frac in (0.3, 0.9):
        p = tmp_path / f"cut_{frac}_{name}"
        p.write_bytes(data[: int(len(data) * frac)])
        err = refuse(g4_bin, p)
        assert "truncated" in err or "corrupt" in err, err


def test_corrupt_and_unsupported(g4_bin, tmp_path):
    cases = {
        "garbage.png": (b"hello, not an image at all", "not a PNG, JPEG, WebP or GIF"),
        "empty.jpg": (b"", "empty file"),
        "pic.bmp": (b"BM" + bytes(60), "BMP images are not supported"),
        "pic.tif": (b"II*\0" + bytes(60), "TIFF images are not supported"),
        "bad_crc.png": (png_header(10, 10)[:-1] + b"\0" + bytes(40), "corrupt"),
        "bad.gif": (b"GIF89a" + bytes(3), "GIF"),
        "bad.webp": (b"RIFF\x10\0\0\0WEBPVP8 " + bytes(8), "WebP"),
        "bad.jpg": (b"\xff\xd8\xff\xe0" + bytes(30), "JPEG"),
    }
    for name, (data, want) in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        assert want in refuse(g4_bin, p), name
    err = refuse(g4_bin, tmp_path / "missing.png")
    assert "cannot open" in err


def test_pixel_limit(g4_bin, tmp_path):
    # a decompression bomb: a PNG declaring 100000 x 100000 pixels is refused from its header
    p = tmp_path / "bomb.png"
    p.write_bytes(png_header(100000, 100000) + bytes(64))
    err = refuse(g4_bin, p)
    assert "100000x100000" in err and "--max-image-pixels" in err
    # the limit is adjustable and applies to every format
    for name in ("jpeg_rgb_600x400.jpg", "webp_lossy_300x200.webp", "gif_rgb_200x150.gif"):
        assert "over the limit" in refuse(g4_bin, MEDIA / name, "--max-image-pixels", 1000)


def test_bad_options(g4_bin):
    r = run_g4(g4_bin, "image", "--image", MEDIA / "png_rgb_257x129.png", "--max-soft-tokens", 100)
    assert r.returncode == 2 and "max_soft_tokens 100" in r.stderr.decode()
    r = run_g4(g4_bin, "image", "--image", MEDIA / "png_rgb_257x129.png", "-o", "x.f32")
    assert r.returncode == 2 and "needs -m" in r.stderr.decode()
    r = run_g4(g4_bin, "image", "--image", MEDIA / "png_rgb_257x129.png", "-m", FIXTURES / "g4-cond-tiny", "-o", "/dev/null")
    assert r.returncode == 2 and "vision" in r.stderr.decode()


@pytest.mark.parametrize("name", ["png_palette_trns_80x60.png", "png_interlaced_rgb_77x55.png", "jpeg_odd_97x61.jpg",
                                  "jpeg_progressive_300x200.jpg", "webp_lossy_alpha_100x100.webp", "gif_trns_64x64.gif"])
def test_cut_anywhere(g4_bin, tmp_path, name):
    """A file cut at any of ~40 points spread over it decodes (the cut fell after the image data)
    or is refused with one line and exit 2: never a crash."""
    data = (MEDIA / name).read_bytes()
    p = tmp_path / name
    for cut in sorted({int(len(data) * i / 40) for i in range(40)} | {1, 7, 12, 20, 30, len(data) - 1}):
        p.write_bytes(data[:cut])
        r = run_g4(g4_bin, "image", "--image", p)
        err = r.stderr.decode()
        assert r.returncode in (0, 2), (cut, r.returncode, err)
        if r.returncode:
            assert err.count("\n") == 1 and name in err, (cut, err)


def test_vision_module_names(g4_bin, tmp_path):
    """The vision weights under the modules' own names (model.embed_vision.patch_ln1, ...,
    model.embed_vision.multimodal_embedder.embedding_projection) load the same as the names
    save_pretrained writes."""
    import shutil
    src = MEDIA / "vis48"
    dst = tmp_path / "vis48-modules"
    shutil.copytree(src, dst)
    raw = (src / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    renamed = {}
    for k, v in header.items():
        k = k.replace("model.vision_embedder.", "model.embed_vision.")
        k = k.replace("model.embed_vision.embedding_projection", "model.embed_vision.multimodal_embedder.embedding_projection")
        renamed[k] = v
    hb = json.dumps(renamed).encode()
    hb += b" " * (-len(hb) % 8)
    (dst / "model.safetensors").write_bytes(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
    case = next(c for c in GOLDENS["embed"] if c["model"] == "media/vis48")
    out = tmp_path / "emb.f32"
    r = run_g4(g4_bin, "image", "--image", MEDIA / case["file"], "-m", dst, "-o", out)
    assert r.returncode == 0, r.stderr.decode()
    want = np.fromfile(MEDIA / case["embed"], dtype="<f4")
    assert np.abs(np.fromfile(out, dtype="<f4") - want).max() <= 1e-5
    # a vision tensor of the wrong shape is refused naming it
    bad = dict(renamed)
    bad["model.embed_vision.pos_norm.weight"] = dict(bad["model.embed_vision.pos_norm.weight"], shape=[8, 2])
    hb = json.dumps(bad).encode()
    hb += b" " * (-len(hb) % 8)
    (dst / "model.safetensors").write_bytes(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
    r = run_g4(g4_bin, "image", "--image", MEDIA / case["file"], "-m", dst, "-o", out)
    assert r.returncode == 2 and "pos_norm.weight" in r.stderr.decode(), r.stderr.decode()


def test_processor_settings_from_model(g4_bin, tmp_path):
    """-m DIR: processor_config.json's image_processor, else preprocessor_config.json, else the
    defaults with vision_config's patch geometry; the command line wins; bad values are refused."""
    import shutil
    dst = tmp_path / "m"
    shutil.copytree(MEDIA / "vis48", dst)
    img = MEDIA / "jpeg_rgb_600x400.jpg"

    def n_patches(*extra):
        r = run_g4(g4_bin, "image", "--image", img, "-m", dst, *extra)
        assert r.returncode == 0, r.stderr.decode()
        return json.loads(r.stdout)["n_patches"], json.loads(r.stdout)["max_soft_tokens"]
    assert n_patches() == (126, 140)
    assert n_patches("--max-soft-tokens", 70)[1] == 70
    (dst / "processor_config.json").unlink()
    (dst / "preprocessor_config.json").write_text(json.dumps({"max_soft_tokens": 560, "patch_size": 16}))
    assert n_patches()[1] == 560
    (dst / "preprocessor_config.json").unlink()
    assert n_patches()[1] == 280
    (dst / "processor_config.json").write_text(json.dumps({"image_processor": {"max_soft_tokens": 100}}))
    r = run_g4(g4_bin, "image", "--image", img, "-m", dst)
    assert r.returncode == 2 and "processor_config.json" in r.stderr.decode() and "100" in r.stderr.decode()
