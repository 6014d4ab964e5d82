"""Prompts with images against transformers on g4-cond-mm-tiny (tests/fixtures/multimodal, recorded
by tools/reference/record_mm_goldens.py): the processor's expanded prompt ids identical
(`tokenize --image`), last-position logits within 1e-4 relative and greedy tokens identical
(`logits` / `run --image`), for one image, two images and an image a prefill chunk would cut; and
--tp 2 (threads and MPI); and the refusals (placeholder count, too many images, a bad image, an
image longer than an explicit --prefill-chunk, a model without vision weights)."""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES, run_g4
from test_tp import MPI_ENV, MPIRUN, need_mpi

MODEL = FIXTURES / "g4-cond-mm-tiny"
MEDIA = FIXTURES / "media"
GOLD_DIR = FIXTURES / "multimodal"
GOLDENS = json.loads((GOLD_DIR / "multimodal.json").read_text())
CASES = GOLDENS["cases"]
REL_TOL = 1e-4


def image_args(case):
    """--image / --audio for the case's files (the order within each kind is the prompt's)."""
    out = ["--max-soft-tokens", case["max_soft_tokens"]]
    for f in case["images"]:
        out += ["--image", MEDIA / f]
    for f in case.get("audio", []):
        out += ["--audio", GOLD_DIR / f]
    return out


def test_cases_cover_the_issue():
    names = {c["name"] for c in CASES}
    assert {"one_image", "two_images", "chunk_boundary"} <= names
    cut = next(c for c in CASES if c["name"] == "chunk_boundary")
    start = cut["expanded_ids"].index(17)   # the first soft token (<|image|>)
    assert start < cut["prefill_chunk"] < start + cut["soft_tokens"][0], "the chunk must fall inside the image"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_expanded_ids(g4_bin, case):
    r = run_g4(g4_bin, "tokenize", "-m", MODEL, "--bos", *image_args(case), input=case["prompt"].encode())
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == case["expanded_ids"]


@pytest.mark.parametrize("chunk", ["case", 128])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_logits(g4_bin, tmp_path, case, chunk):
    out = tmp_path / "logits.f32"
    chunk = case["prefill_chunk"] if chunk == "case" else chunk
    r = run_g4(g4_bin, "logits", "-m", MODEL, "-p", case["prompt"], "-o", out, "--prefill-chunk", chunk,
               *image_args(case))
    assert r.returncode == 0, r.stderr.decode()
    got = np.fromfile(out, dtype="<f4")
    want = np.fromfile(GOLD_DIR / case["logits_file"], dtype="<f4")
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel <= REL_TOL, f"max relative logit error {rel:.3g} > {REL_TOL}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_greedy(g4_bin, case):
    r = run_g4(g4_bin, "run", "-m", MODEL, "-p", case["prompt"], "-n", len(case["greedy"]), "--ids", "--ignore-eos",
               "--prefill-chunk", case["prefill_chunk"], *image_args(case))
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == case["greedy"]


def test_default_chunk_grows_to_hold_the_image(g4_bin):
    """Without --prefill-chunk the chunk grows to the largest image; the tokens do not change."""
    case = CASES[0]
    r = run_g4(g4_bin, "run", "-m", MODEL, "-p", case["prompt"], "-n", len(case["greedy"]), "--ids", "--ignore-eos",
               *image_args(case))
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout) == case["greedy"]


def test_text_placeholder_without_image_still_runs(g4_bin):
    """A <|image|> with no --image stays the text-only behaviour (embedded as <pad>, as HF does)."""
    r = run_g4(g4_bin, "run", "-m", MODEL, "-p", "a <|image|> b", "-n", 2, "--ids", "--ignore-eos")
    assert r.returncode == 0, r.stderr.decode()


def refused(g4_bin, *args, cmd="run", want=""):
    r = run_g4(g4_bin, cmd, "-m", MODEL, *args)
    assert r.returncode == 2, (r.returncode, r.stderr.decode())
    err = r.stderr.decode()
    assert want in err, err
    assert err.count("\n") == 1, err
    return err


IMG = MEDIA / "jpeg_odd_97x61.jpg"


@pytest.mark.parametrize("cmd", ["run", "logits", "tokenize"])
def test_placeholder_count_mismatch(g4_bin, tmp_path, cmd):
    extra = ["-o", tmp_path / "l.f32"] if cmd == "logits" else []
    if cmd == "tokenize":
        r = run_g4(g4_bin, "tokenize", "-m", MODEL, "--image", IMG, "--image", IMG, "--max-soft-tokens", 70,
                   input=b"one <|image|> only")
        assert r.returncode == 2 and "1 image placeholder (<|image|>) for 2 images" in r.stderr.decode()
        return
    refused(g4_bin, "-p", "no placeholder", "--image", IMG, "--max-soft-tokens", 70, *extra, cmd=cmd,
            want="0 image placeholders (<|image|>) for 1 image")
    refused(g4_bin, "-p", "<|image|> <|image|>", "--image", IMG, "--max-soft-tokens", 70, *extra, cmd=cmd,
            want="2 image placeholders (<|image|>) for 1 image")


def test_too_many_images(g4_bin):
    refused(g4_bin, "-p", "<|image|><|image|>", "--image", IMG, "--image", IMG, "--max-media-per-request", 1,
            want="2 images and audio clips, more than --max-media-per-request 1")


def test_bad_image(g4_bin, tmp_path):
    bad = tmp_path / "cut.jpg"
    bad.write_bytes(IMG.read_bytes()[:200])
    refused(g4_bin, "-p", "<|image|>", "--image", bad, "--max-soft-tokens", 70, want=str(bad))
    txt = tmp_path / "notes.png"
    txt.write_bytes(b"not an image at all")
    refused(g4_bin, "-p", "<|image|>", "--image", txt, "--max-soft-tokens", 70, want=str(txt))
    refused(g4_bin, "-p", "<|image|>", "--image", tmp_path / "missing.png", want="missing.png")
    refused(g4_bin, "-p", "<|image|>", "--image", IMG, "--max-image-pixels", 100, want=str(IMG))


def test_bad_max_soft_tokens(g4_bin):
    refused(g4_bin, "-p", "<|image|>", "--image", IMG, "--max-soft-tokens", 100, want="70, 140, 280, 560 or 1120")


def test_image_longer_than_explicit_chunk(g4_bin):
    refused(g4_bin, "-p", "<|image|>", "--image", IMG, "--max-soft-tokens", 70, "--prefill-chunk", 32,
            want="image 1 has 60 soft tokens, more than a prefill chunk of 32 positions (--prefill-chunk)")


@pytest.mark.parametrize("backend", ["threads", "mpi"])
@pytest.mark.parametrize("case", [c for c in CASES if c["name"] in ("two_images", "chunk_boundary")], ids=lambda c: c["name"])
def test_tensor_parallel(g4_bin, tmp_path, case, backend):
    """--tp 2: rank 0 embeds the images, the soft tokens reach the other rank through the
    embedding's all-reduce, every rank gets the rows' image spans; same tokens, logits in tolerance."""
    out = tmp_path / "logits.f32"
    common = ["-m", MODEL, "-p", case["prompt"], "--prefill-chunk", case["prefill_chunk"], *image_args(case)]
    runs = [["logits", *common, "-o", out], ["run", *common, "-n", len(case["greedy"]), "--ids", "--ignore-eos"]]
    results = []
    for args in runs:
        if backend == "mpi":
            need_mpi()
            r = subprocess.run([MPIRUN, "-np", "2", g4_bin, *map(str, args), "--tp-backend", "mpi", "--threads", "1"],
                               capture_output=True, timeout=300, env={**os.environ, **MPI_ENV})
        else:
            r = run_g4(g4_bin, *args, "--tp", 2)
        assert r.returncode == 0, r.stderr.decode()
        results.append(r)
    got, want = np.fromfile(out, dtype="<f4"), np.fromfile(GOLD_DIR / case["logits_file"], dtype="<f4")
    assert np.abs(got - want).max() / np.abs(want).max() <= REL_TOL
    assert json.loads(results[1].stdout) == case["greedy"]


def test_model_without_vision(g4_bin):
    r = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-cond-tiny", "-p", "<|image|>", "--image", IMG,
               "--max-soft-tokens", 70)
    assert r.returncode == 2, r.stderr.decode()
    assert "no vision embedder" in r.stderr.decode() or "image" in r.stderr.decode()


@pytest.mark.parametrize("isa", ["scalar", "avx2"])
def test_kernel_paths(g4_bin, tmp_path, isa):
    """The image rows' attention spans (past their own position) on the reference and AVX2 kernels."""
    flags = open("/proc/cpuinfo").read()
    if isa == "avx2" and not (" avx2" in flags and " fma" in flags):
        pytest.skip("no AVX2 here")
    case = next(c for c in CASES if c["name"] == "two_images")
    out = tmp_path / "logits.f32"
    r = run_g4(g4_bin, "logits", "-m", MODEL, "-p", case["prompt"], "-o", out, "--prefill-chunk", 128,
               *image_args(case), env={"G4_CPU_ISA": isa})
    assert r.returncode == 0, r.stderr.decode()
    got, want = np.fromfile(out, dtype="<f4"), np.fromfile(GOLD_DIR / case["logits_file"], dtype="<f4")
    assert np.abs(got - want).max() / np.abs(want).max() <= REL_TOL


WAV = GOLD_DIR / "audio_mono_811.wav"


def test_audio_refusals(g4_bin, tmp_path):
    refused(g4_bin, "-p", "no placeholder", "--audio", WAV, want="0 audio clip placeholders (<|audio|>) for 1 audio clip")
    bad = tmp_path / "noise.wav"
    bad.write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunk")
    refused(g4_bin, "-p", "<|audio|>", "--audio", bad, want=str(bad))
    refused(g4_bin, "-p", "<|audio|>", "--audio", WAV, "--max-audio-seconds", 0.01, want="--max-audio-seconds")
    refused(g4_bin, "-p", "<|audio|>", "--audio", tmp_path / "missing.flac", want="missing.flac")
    r = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-cond-tiny", "-p", "<|audio|>", "--audio", WAV)
    assert r.returncode == 2 and "no audio embedder" in r.stderr.decode(), r.stderr.decode()


def test_audio_resampled(g4_bin, tmp_path):
    """A clip at 8 kHz is resampled to 16 kHz (libsoxr): twice the samples, so twice the frames."""
    import wave
    with wave.open(str(WAV), "rb") as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    low = tmp_path / "low.wav"
    with wave.open(str(low), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(pcm[::2].tobytes())
    r = run_g4(g4_bin, "tokenize", "-m", MODEL, "--audio", low, input=b"<|audio|>")
    assert r.returncode == 0, r.stderr.decode()
    frame = json.loads((MODEL / "config.json").read_text())["audio_config"]["audio_embed_dim"]
    n = len(pcm[::2]) * 2
    assert json.loads(r.stdout).count(20) == (n + frame - 1) // frame   # <|audio|> soft tokens


def test_audio_split_across_chunks(g4_bin, tmp_path):
    """Audio attends causally, so a clip may be cut by prefill chunks like text (8 < its 26 frames)."""
    case = next(c for c in CASES if c["name"] == "audio")
    out = tmp_path / "logits.f32"
    r = run_g4(g4_bin, "logits", "-m", MODEL, "-p", case["prompt"], "-o", out, "--prefill-chunk", 8, *image_args(case))
    assert r.returncode == 0, r.stderr.decode()
    got, want = np.fromfile(out, dtype="<f4"), np.fromfile(GOLD_DIR / case["logits_file"], dtype="<f4")
    assert np.abs(got - want).max() / np.abs(want).max() <= REL_TOL
