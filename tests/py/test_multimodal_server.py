"""Images and audio through `gemma4c serve` (OpenAI image_url and input_audio content parts) on
g4-cond-mm-tiny, with the official openai client: a data: URL gives the same tokens as
`run --chat --image` (one image, two images, streaming), an input_audio clip the same as
`run --chat --audio`, the prompt usage counts the soft tokens, files only under --media-dir, a
request's own max_soft_tokens (mm_processor_kwargs, as vLLM takes it) against the transformers
golden at 140, and the refusals (a bad image or clip, remote URLs, unknown fields, too many media,
a max_soft_tokens that is not one of the five or above --soft-tokens-cap, a model without vision
or audio)."""
import base64
import json

import pytest
import requests

from conftest import FIXTURES, run_g4
from test_server import Server

MODEL = FIXTURES / "g4-cond-mm-tiny"
MEDIA = FIXTURES / "media"
NAME = "g4-cond-tiny"   # test_server.Server's --alias


def data_url(path, mime):
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()


JPEG = MEDIA / "jpeg_odd_97x61.jpg"
PNG = MEDIA / "png_rgba_150x100.png"


def image_part(path=JPEG, mime="image/jpeg"):
    return {"type": "image_url", "image_url": {"url": data_url(path, mime)}}


@pytest.fixture(scope="module")
def srv(g4_bin):
    s = Server(g4_bin, "--ctx", 512, "--parallel", 2, "--max-soft-tokens", 70, "--soft-tokens-cap", 140,
               "--max-media-per-request", 2, "--media-dir", MEDIA, model_dir=MODEL)
    yield s
    assert s.stop() == 0, "".join(s.log)


def cli_chat_ids(g4_bin, prompt, images, n, audio=(), soft=70):
    args = []
    for f in images:
        args += ["--image", f]
    for f in audio:
        args += ["--audio", f]
    r = run_g4(g4_bin, "run", "-m", MODEL, "--chat", "-p", prompt, "-n", n, "--ids", "--ignore-eos",
               "--max-soft-tokens", soft, "--threads", 1, *args)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def chat(srv, content, n=12, **kw):
    return srv.client().chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": content}], max_tokens=n, temperature=0,
        extra_body={"ignore_eos": True, "return_token_ids": True, **kw})


def test_one_image_matches_cli(srv, g4_bin):
    r = chat(srv, [{"type": "text", "text": "Describe"}, image_part()])
    assert r.choices[0].model_extra["token_ids"] == cli_chat_ids(g4_bin, "Describe<|image|>", [JPEG], 12)
    # usage: the <|image|> of the same text prompt, expanded to <|image>, 60 soft tokens, <image|>
    text_only = chat(srv, "Describe<|image|>", n=1)
    assert r.usage.prompt_tokens == text_only.usage.prompt_tokens + 60 + 1


def test_two_images_match_cli(srv, g4_bin):
    r = chat(srv, [image_part(), {"type": "text", "text": "versus"}, image_part(PNG, "image/png")])
    want = cli_chat_ids(g4_bin, "<|image|>versus<|image|>", [JPEG, PNG], 12)
    assert r.choices[0].model_extra["token_ids"] == want


def test_stream(srv):
    content = [{"type": "text", "text": "Describe"}, image_part()]
    whole = chat(srv, content)
    with requests.post(srv.url + "/v1/chat/completions", stream=True, json={
            "model": NAME, "messages": [{"role": "user", "content": content}], "max_tokens": 12, "temperature": 0,
            "stream": True, "ignore_eos": True}) as resp:
        assert resp.status_code == 200
        lines = [ln for ln in resp.iter_lines() if ln]
    assert lines[-1] == b"data: [DONE]"
    text = "".join(json.loads(ln[6:])["choices"][0]["delta"].get("content") or "" for ln in lines[:-1])
    assert text == whole.choices[0].message.content


def test_media_dir_file(srv, g4_bin):
    r = chat(srv, [{"type": "text", "text": "Describe"},
                   {"type": "image_url", "image_url": {"url": f"file://{JPEG.resolve()}"}}])
    assert r.choices[0].model_extra["token_ids"] == cli_chat_ids(g4_bin, "Describe<|image|>", [JPEG], 12)


def post_error(srv, content):
    resp = requests.post(srv.url + "/v1/chat/completions",
                         json={"model": NAME, "messages": [{"role": "user", "content": content}], "max_tokens": 2})
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == "messages"
    return err["message"]


def test_refusals(srv, tmp_path):
    assert "not a PNG, JPEG, WebP or GIF" in post_error(srv, [image_part(JPEG, "image/jpeg") | {
        "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(b"garbage bytes").decode()}}])
    cut = base64.b64encode(JPEG.read_bytes()[:300]).decode()
    assert "messages[0].content[0]" in post_error(srv, [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + cut}}])
    assert "not valid base64" in post_error(srv, [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}])
    msg = post_error(srv, [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}])
    assert "remote image URLs are not fetched" in msg and "--allow-remote-media" in msg
    assert "--media-dir" in post_error(srv, [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}])
    outside = tmp_path / "x.jpg"
    outside.write_bytes(JPEG.read_bytes())
    assert "--media-dir" in post_error(srv, [{"type": "image_url", "image_url": {"url": str(outside)}}])
    assert "'detail' other than \"auto\"" in post_error(srv, [{"type": "image_url", "image_url": {
        "url": data_url(JPEG, "image/jpeg"), "detail": "high"}}])
    assert "more than 2 images and audio clips" in post_error(srv, [image_part(), image_part(), image_part()])


WAV = FIXTURES / "multimodal" / "audio_mono_811.wav"


def audio_part(path=WAV, fmt="wav"):
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(path.read_bytes()).decode(), "format": fmt}}


def test_audio_matches_cli(srv, g4_bin):
    r = chat(srv, [{"type": "text", "text": "Hear"}, audio_part()])
    assert r.choices[0].model_extra["token_ids"] == cli_chat_ids(g4_bin, "Hear<|audio|>", [], 12, audio=[WAV])
    r = chat(srv, [image_part(), {"type": "text", "text": "and"}, audio_part()])
    assert r.choices[0].model_extra["token_ids"] == cli_chat_ids(g4_bin, "<|image|>and<|audio|>", [JPEG], 12, audio=[WAV])


def test_audio_refusals(srv):
    assert "is not one of wav" in post_error(srv, [audio_part(fmt="aiff")])
    assert "not valid base64" in post_error(srv, [{"type": "input_audio", "input_audio": {"data": "@@", "format": "wav"}}])
    bad = {"type": "input_audio", "input_audio": {"data": base64.b64encode(b"RIFFjunk").decode(), "format": "wav"}}
    assert "messages[0].content[0]" in post_error(srv, [bad])
    assert "more than 2 images and audio clips" in post_error(srv, [image_part(), audio_part(), audio_part()])


def test_model_without_vision(g4_bin):
    s = Server(g4_bin, "--ctx", 256)   # test_server's text-only fixture
    try:
        resp = requests.post(s.url + "/v1/chat/completions", json={
            "model": NAME, "messages": [{"role": "user", "content": [image_part()]}], "max_tokens": 2})
        assert resp.status_code == 400 and "takes no images" in resp.json()["error"]["message"]
        resp = requests.post(s.url + "/v1/chat/completions", json={
            "model": NAME, "messages": [{"role": "user", "content": [audio_part()]}], "max_tokens": 2})
        assert resp.status_code == 400 and "takes no audio" in resp.json()["error"]["message"]
    finally:
        assert s.stop() == 0


GOLDENS = json.loads((FIXTURES / "multimodal" / "multimodal.json").read_text())["cases"]


def test_max_soft_tokens_per_request(srv, g4_bin):
    """mm_processor_kwargs.max_soft_tokens 140 on a server whose default is 70: the image has the
    processor's soft-token count at 140 (the transformers golden) and the tokens are `run
    --max-soft-tokens 140`'s, on chat completions and on /v1/responses; without it, 70."""
    gold = next(c for c in GOLDENS if c["name"] == "image_140")
    png = MEDIA / gold["images"][0]
    part = image_part(png, "image/png")
    text_only = chat(srv, "Describe<|image|>", n=1).usage.prompt_tokens
    r = chat(srv, [{"type": "text", "text": "Describe"}, part], mm_processor_kwargs={"max_soft_tokens": 140})
    assert r.usage.prompt_tokens == text_only + gold["soft_tokens"][0] + 1
    assert r.choices[0].model_extra["token_ids"] == cli_chat_ids(g4_bin, "Describe<|image|>", [png], 12, soft=140)
    default = chat(srv, [{"type": "text", "text": "Describe"}, part])
    assert default.choices[0].model_extra["token_ids"] == cli_chat_ids(g4_bin, "Describe<|image|>", [png], 12)
    assert default.usage.prompt_tokens < r.usage.prompt_tokens
    resp = requests.post(srv.url + "/v1/responses", timeout=120, json={
        "model": NAME, "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "Describe"}, {"type": "input_image", "image_url": part["image_url"]["url"]}]}],
        "temperature": 0, "max_output_tokens": 1, "mm_processor_kwargs": {"max_soft_tokens": 140}})
    assert resp.status_code == 200, resp.text
    assert resp.json()["usage"]["input_tokens"] == r.usage.prompt_tokens


@pytest.mark.parametrize("kwargs,param,text", [
    ({"max_soft_tokens": 100}, "mm_processor_kwargs.max_soft_tokens", "one of 70, 140, 280, 560, 1120"),
    ({"max_soft_tokens": "140"}, "mm_processor_kwargs.max_soft_tokens", "one of 70, 140, 280, 560, 1120"),
    ({"max_soft_tokens": 280}, "mm_processor_kwargs.max_soft_tokens", "above this server's --soft-tokens-cap 140"),
    ({"do_pan_and_scan": True}, "mm_processor_kwargs.do_pan_and_scan", "not supported"),
    ([140], "mm_processor_kwargs", "must be an object"),
])
def test_max_soft_tokens_refusals(srv, kwargs, param, text):
    resp = requests.post(srv.url + "/v1/chat/completions", json={
        "model": NAME, "messages": [{"role": "user", "content": [image_part()]}], "max_tokens": 2,
        "mm_processor_kwargs": kwargs})
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["param"] == param and text in err["message"], err
