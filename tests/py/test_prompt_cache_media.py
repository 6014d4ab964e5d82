"""The prompt cache beside images: two requests with the same text and different images must not
share a cached prefix (the soft tokens sit at the same placeholder ids), and text requests before
and after an image request keep their exact greedy answers. On g4-cond-mm-tiny, one slot, so every
request lands on the slot the previous one used; each answer is checked against `run`."""
import pytest

from conftest import FIXTURES
from test_multimodal_server import JPEG, MODEL, NAME, PNG, cli_chat_ids, image_part
from test_server import Server


@pytest.fixture(scope="module")
def srv(g4_bin):
    s = Server(g4_bin, "--ctx", 512, "--parallel", 1, "--max-soft-tokens", 70, "--cache-ram", 64,
               model_dir=MODEL)
    yield s
    assert s.stop() == 0, "".join(s.log)


def ids(srv, content, n=8):
    r = srv.client().chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": content}], max_tokens=n, temperature=0,
        extra_body={"ignore_eos": True, "return_token_ids": True})
    return r.choices[0].model_extra["token_ids"], r.usage


def test_images_never_reuse_each_other(srv, g4_bin):
    jpeg = cli_chat_ids(g4_bin, "Describe<|image|>", [JPEG], 8)
    png = cli_chat_ids(g4_bin, "Describe<|image|>", [PNG], 8)
    assert jpeg != png   # else the test below could not tell the images apart
    for path, mime, want in ((JPEG, "image/jpeg", jpeg), (PNG, "image/png", png), (JPEG, "image/jpeg", jpeg)):
        got, usage = ids(srv, [{"type": "text", "text": "Describe"}, image_part(path, mime)])
        assert got == want
        assert (usage.prompt_tokens_details.cached_tokens or 0) == 0


def test_text_around_an_image_request(srv, g4_bin):
    # longer than a prefill chunk (64): the cache reuses only whole chunks
    text = "Describe a painting of a harbour at dusk in three words. " * 6
    want = cli_chat_ids(g4_bin, text, [], 8)
    assert ids(srv, text)[0] == want
    ids(srv, [{"type": "text", "text": text}, image_part()])
    got, usage = ids(srv, text)   # the slot was used by the image: nothing of it is reused
    assert got == want
    got, usage = ids(srv, text)   # now the text prompt itself is cached
    assert got == want and usage.prompt_tokens_details.cached_tokens > 0
