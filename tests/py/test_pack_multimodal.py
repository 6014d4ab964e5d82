"""`.g4c` packs keep the multimodal front end: the vision and audio embedder tensors byte for byte
as stored (whatever --dtype says), in rank 0's segment alone, and the processor files; `logits`
with images and audio on a pack is byte-identical to the HF directory it was packed from (one rank
and --tp 2), and so within the transformers goldens of test_multimodal.py; llama.cpp's mmproj GGUF beside a
text GGUF gives the same logits and, through `tokenize --mmproj`, the processor's expanded ids."""
import json
import shutil

import numpy as np
import pytest

from conftest import FIXTURES, run_g4
from test_multimodal import CASES, GOLD_DIR, REL_TOL, image_args
from test_pack import pack, read_hf, read_pack

MODEL = FIXTURES / "g4-cond-mm-tiny"
MM_PREFIXES = ("model.vision_embedder.", "model.embed_vision.", "model.embed_audio.")


def is_mm(name):
    return name.startswith(MM_PREFIXES)


@pytest.mark.parametrize("args", [(), ("--dtype", "q8_0")], ids=["as-stored", "q8_0"])
def test_embedders_in_rank0_as_stored(g4_bin, tmp_path, args):
    err = pack(g4_bin, MODEL, tmp_path / "mm.g4c", "--tp", "2", *args)
    _, _, ranks = read_pack(tmp_path / "mm.g4c")
    vals, raw = read_hf(MODEL)
    mm = {n for n in vals if is_mm(n)}
    assert mm, "the fixture has embedder tensors"
    assert f"({len(mm)} of them multimodal" in err
    assert {n for n in ranks[0] if is_mm(n)} == mm
    assert not any(is_mm(n) for n in ranks[1]), "the embedders are rank 0's alone"
    for name in mm:
        dt, shape, data = ranks[0][name]
        assert dt == raw[name][0] and shape == vals[name].shape, name
        assert data == raw[name][1].tobytes(), name


def logits(g4_bin, model, out, case, *extra):
    r = run_g4(g4_bin, "logits", "-m", model, "-p", case["prompt"], "-o", out,
               "--prefill-chunk", case["prefill_chunk"], *image_args(case), *extra)
    assert r.returncode == 0, r.stderr.decode()
    return out.read_bytes()


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_logits_identical_to_hf_dir(g4_bin, tmp_path, case, tp):
    pk = tmp_path / "mm.g4c"
    pack(g4_bin, MODEL, pk, "--tp", tp)
    got = logits(g4_bin, pk, tmp_path / "pack.f32", case)
    want = logits(g4_bin, MODEL, tmp_path / "dir.f32", case, "--tp", tp)
    assert got == want, "pack and HF directory logits differ"
    gold = np.fromfile(GOLD_DIR / case["logits_file"], dtype="<f4")
    rel = np.abs(np.frombuffer(got, "<f4") - gold).max() / np.abs(gold).max()
    assert rel <= REL_TOL, f"max relative logit error {rel:.3g} > {REL_TOL}"


def test_expanded_ids_from_pack(g4_bin, tmp_path):
    pk = tmp_path / "mm.g4c"
    pack(g4_bin, MODEL, pk)
    case = next(c for c in CASES if c["name"] == "image_audio")
    r = run_g4(g4_bin, "tokenize", "-m", pk, "--bos", *image_args(case), input=case["prompt"].encode())
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == case["expanded_ids"]


def test_processor_config_travels(g4_bin, tmp_path):
    """The processor's max_soft_tokens (not the built-in 280) decides the image's size from a
    pack as from the directory: the pack embeds processor_config.json."""
    src = tmp_path / "mm"
    shutil.copytree(MODEL, src)
    (src / "processor_config.json").write_text(json.dumps({"image_processor": {"max_soft_tokens": 70}}))
    pk = tmp_path / "mm.g4c"
    pack(g4_bin, src, pk)
    _, files, _ = read_pack(pk)
    assert files["processor_config.json"] == (src / "processor_config.json").read_bytes()
    case = next(c for c in CASES if c["name"] == "one_image")
    ids = []
    for model in (src, pk):
        r = run_g4(g4_bin, "tokenize", "-m", model, "--bos", "--image", FIXTURES / "media" / case["images"][0],
                   input=case["prompt"].encode())
        assert r.returncode == 0, r.stderr.decode()
        ids.append(json.loads(r.stdout))
    assert ids[0] == ids[1] == case["expanded_ids"]


# ---- llama.cpp's mmproj GGUF beside a text GGUF (tools/reference/make_mmproj_gguf.py)

GGUF_DIR = FIXTURES / "g4-mmproj"
TEXT_GGUF = GGUF_DIR / "mm-bf16.gguf"
MMPROJ = GGUF_DIR / "mmproj-bf16.gguf"
# The converter stores v.patch_embd (patch_dense) as f32, the checkpoint as bf16: the same values,
# but the matmul layer sums an f32 and a bf16 weight in different orders (float32 both).
MMPROJ_REL_TOL = 1e-5


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_mmproj_logits_match_hf_dir(g4_bin, tmp_path, case, tp):
    got = np.frombuffer(logits(g4_bin, TEXT_GGUF, tmp_path / "gguf.f32", case, "--mmproj", MMPROJ, "--tp", tp), "<f4")
    want = np.frombuffer(logits(g4_bin, MODEL, tmp_path / "dir.f32", case, "--tp", tp), "<f4")
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel <= MMPROJ_REL_TOL, f"GGUF + mmproj vs HF directory: max relative logit error {rel:.3g}"
    if not case["images"]:
        assert got.tobytes() == want.tobytes(), "audio alone: the same weights and kernels, byte for byte"
    gold = np.fromfile(GOLD_DIR / case["logits_file"], dtype="<f4")
    assert np.abs(got - gold).max() / np.abs(gold).max() <= REL_TOL


def test_mmproj_greedy(g4_bin):
    case = next(c for c in CASES if c["name"] == "image_audio")
    r = run_g4(g4_bin, "run", "-m", TEXT_GGUF, "--mmproj", MMPROJ, "-p", case["prompt"], "-n", len(case["greedy"]),
               "--ids", "--ignore-eos", *image_args(case))
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == case["greedy"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_mmproj_tokenize_expanded_ids(g4_bin, case):
    """`tokenize --mmproj`: the mmproj's patch geometry and audio frame expand the placeholders as
    the processor does (the text GGUF alone knows neither)."""
    r = run_g4(g4_bin, "tokenize", "-m", TEXT_GGUF, "--mmproj", MMPROJ, "--bos", *image_args(case),
               input=case["prompt"].encode())
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == case["expanded_ids"]


def test_mmproj_tokenize_refusals(g4_bin, tmp_path):
    def refused(model, mmproj, want, *media):
        r = run_g4(g4_bin, "tokenize", "-m", model, "--mmproj", mmproj, *media, input=b"<|image|>")
        err = r.stderr.decode()
        assert r.returncode == 2 and want in err and err.count("\n") == 1, (r.returncode, err)
    img = ("--image", FIXTURES / "media" / "jpeg_odd_97x61.jpg")
    refused(MODEL, MMPROJ, "goes with a GGUF model", *img)
    refused(TEXT_GGUF, TEXT_GGUF, "not an mmproj GGUF", *img)
    refused(TEXT_GGUF, tmp_path / "missing.gguf", "missing.gguf", *img)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(MMPROJ.read_bytes()[:5000])
    refused(TEXT_GGUF, cut, "cut.gguf", *img)


def test_mmproj_refusals(g4_bin, tmp_path):
    def refused(model, mmproj, want):
        r = run_g4(g4_bin, "run", "-m", model, "--mmproj", mmproj, "-p", "hi", "-n", 1)
        err = r.stderr.decode()
        assert r.returncode == 2 and want in err and err.count("\n") == 1, (r.returncode, err)
    refused(MODEL, MMPROJ, "goes with a GGUF model")
    refused(TEXT_GGUF, TEXT_GGUF, "not an mmproj GGUF")
    refused(TEXT_GGUF, tmp_path / "missing.gguf", "missing.gguf")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(MMPROJ.read_bytes()[:5000])
    refused(TEXT_GGUF, cut, "cut.gguf")


# ---- the server on a pack and on GGUF + mmproj: an image part gives the HF directory's tokens

@pytest.mark.parametrize("source", ["pack", "mmproj"])
def test_server_image_matches_hf_dir(g4_bin, tmp_path, source):
    from test_multimodal_server import JPEG, NAME, cli_chat_ids, image_part
    from test_server import Server
    if source == "pack":
        model, extra = tmp_path / "mm.g4c", ()
        pack(g4_bin, MODEL, model)
    else:
        model, extra = TEXT_GGUF, ("--mmproj", MMPROJ)
    s = Server(g4_bin, "--ctx", 512, "--max-soft-tokens", 70, *extra, model_dir=model)
    try:
        r = s.client().chat.completions.create(
            model=NAME, messages=[{"role": "user", "content": [{"type": "text", "text": "Describe"}, image_part()]}],
            max_tokens=12, temperature=0, extra_body={"ignore_eos": True, "return_token_ids": True})
        assert r.choices[0].model_extra["token_ids"] == cli_chat_ids(g4_bin, "Describe<|image|>", [JPEG], 12)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_mmproj_forged_layout(g4_bin, tmp_path):
    """A patch_ln1 whose length is no merged patch (forged in the tensor directory): refused, never
    reordered past its end."""
    b = bytearray(MMPROJ.read_bytes())
    name = b"v.patch_norm.1.weight"
    at = b.index(len(name).to_bytes(8, "little") + name) + 8 + len(name)
    assert int.from_bytes(b[at:at + 4], "little") == 1 and int.from_bytes(b[at + 4:at + 12], "little") == 192
    b[at + 4:at + 12] = (190).to_bytes(8, "little")
    bad = tmp_path / "forged.gguf"
    bad.write_bytes(bytes(b))
    r = run_g4(g4_bin, "run", "-m", TEXT_GGUF, "--mmproj", bad, "-p", "hi", "-n", 1)
    err = r.stderr.decode()
    assert r.returncode == 2 and "does not have the layout of a gemma4uv mmproj" in err, (r.returncode, err)


@pytest.mark.parametrize("source", ["pack", "mmproj"])
def test_mpi_two_ranks(g4_bin, tmp_path, source):
    """--tp 2 over MPI: rank 0 alone holds the embedders (a pack's rank-0 segment, the mmproj);
    the logits are the threads backend's, byte for byte."""
    import os
    import subprocess
    from test_tp import MPI_ENV, MPIRUN, need_mpi
    need_mpi()
    case = next(c for c in CASES if c["name"] == "image_audio")
    if source == "pack":
        model, extra = tmp_path / "mm.g4c", []
        pack(g4_bin, MODEL, model, "--tp", 2)
    else:
        model, extra = TEXT_GGUF, ["--mmproj", MMPROJ]
    out = tmp_path / "mpi.f32"
    args = ["logits", "-m", model, "-p", case["prompt"], "-o", out, *image_args(case), *extra]
    r = subprocess.run([MPIRUN, "-np", "2", g4_bin, *map(str, args), "--tp-backend", "mpi", "--threads", "1"],
                       capture_output=True, timeout=300, env={**os.environ, **MPI_ENV})
    assert r.returncode == 0, r.stderr.decode()
    threads = logits(g4_bin, model, tmp_path / "threads.f32", case, "--tp", 2, "--threads", 2, *extra)
    assert out.read_bytes() == threads
