"""Remote image URLs under `serve --allow-remote-media`, against a Python HTTP origin on 127.0.0.1:
the fetched image gives the same tokens and usage as the same bytes in a data: URL; a 404, a body
over --remote-media-max-bytes (declared, or chunked without a length), an empty body, a redirect
loop, a stalled origin (past --remote-media-timeout), a redirect to file:// or ftp://, and a URL
with credentials are each a 400 naming the part; a stalled fetch does not hold up other requests;
bad flag values are usage errors. (Without the flag the refusal is
test_multimodal_server.test_refusals'.)"""
import http.server
import threading
import time

import pytest
import requests

from conftest import run_g4
from test_multimodal_server import JPEG, MODEL, NAME, chat, image_part, post_error
from test_server import Server

MAX_BYTES = 8192
BIG = 100_000
seen_headers = []


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        try:
            self.route()
        except (BrokenPipeError, ConnectionResetError):
            pass   # the server stopped reading: what the limits are for

    def route(self):
        p = self.path
        if p == "/img.jpg":
            seen_headers.append(dict(self.headers))
            self.send(200, JPEG.read_bytes(), [("Content-Type", "image/jpeg")])
        elif p == "/moved":
            self.send(302, headers=[("Location", "/img.jpg")])
        elif p == "/loop":
            self.send(302, headers=[("Location", "/loop")])
        elif p == "/empty":
            self.send(200)
        elif p == "/to-file":
            self.send(302, headers=[("Location", "file:///etc/hostname")])
        elif p == "/to-ftp":
            self.send(302, headers=[("Location", "ftp://127.0.0.1/x.jpg")])
        elif p == "/big":   # declared too large, then nothing: refused before any body arrives
            self.send_response(200)
            self.send_header("Content-Length", str(BIG))
            self.end_headers()
            self.wfile.flush()
            time.sleep(4)
        elif p == "/big-chunked":   # no length: the cap holds while the body streams
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = bytes(4096)
            for _ in range(10 * BIG // len(chunk)):   # 2.4 s if read to the end
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                time.sleep(0.01)
            self.wfile.write(b"0\r\n\r\n")
        elif p == "/stall":   # headers, then nothing
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.flush()
            time.sleep(4)
        else:
            self.send(404, b"not here")


class Quiet(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass   # connections the server cut short


@pytest.fixture(scope="module")
def origin():
    httpd = Quiet(("127.0.0.1", 0), Origin)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def srv(g4_bin):
    s = Server(g4_bin, "--ctx", 512, "--parallel", 2, "--max-soft-tokens", 70, "--allow-remote-media",
               "--remote-media-max-bytes", MAX_BYTES, "--remote-media-timeout", 1, model_dir=MODEL,
               env={"no_proxy": "127.0.0.1", "NO_PROXY": "127.0.0.1"})
    yield s
    assert s.stop() == 0, "".join(s.log)


def url_part(url):
    return {"type": "image_url", "image_url": {"url": url}}


def test_fetched_image_matches_data_url(srv, origin):
    want = chat(srv, [{"type": "text", "text": "Describe"}, image_part()], n=4)
    for path in ("/img.jpg", "/moved"):
        got = chat(srv, [{"type": "text", "text": "Describe"}, url_part(origin + path)], n=4)
        assert got.choices[0].model_extra["token_ids"] == want.choices[0].model_extra["token_ids"]
        assert got.usage.prompt_tokens == want.usage.prompt_tokens
    h = seen_headers[-1]
    assert h["User-Agent"].startswith("gemma4c/") and "Cookie" not in h and "Authorization" not in h


@pytest.mark.parametrize("path,text", [
    ("/missing", "answered HTTP 404"),
    ("/big", f"larger than {MAX_BYTES} bytes (--remote-media-max-bytes)"),
    ("/big-chunked", f"larger than {MAX_BYTES} bytes (--remote-media-max-bytes)"),
    ("/empty", "an empty body"),
    ("/loop", "more than 3 redirects"),
    ("/to-file", "only http and https"),
    ("/to-ftp", "only http and https"),
])
def test_refusals(srv, origin, path, text):
    t0 = time.time()
    msg = post_error(srv, [{"type": "text", "text": "x"}, url_part(origin + path)])
    assert "messages[0].content[1]: fetching the image URL failed" in msg and text in msg, msg
    assert time.time() - t0 < 1.5


def test_credentials_refused(srv, origin):
    msg = post_error(srv, [url_part(origin.replace("//", "//user:pw@") + "/img.jpg")])
    assert "credentials" in msg and "pw" not in msg


def test_stalled_origin_times_out_alone(srv, origin):
    """--remote-media-timeout 1: a 400 within ~2 s; meanwhile a text request is answered (the fetch
    runs on its request's parse worker, not the scheduler)."""
    out = {}

    def stalled():
        t0 = time.time()
        out["msg"] = post_error(srv, [url_part(origin + "/stall")])
        out["t"] = time.time() - t0
        out["done"] = time.time()

    th = threading.Thread(target=stalled)
    th.start()
    time.sleep(0.2)
    r = requests.post(srv.url + "/v1/chat/completions", timeout=10, json={
        "model": NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    other_done = time.time()
    th.join()
    assert r.status_code == 200, r.text
    assert other_done < out["done"]
    assert "--remote-media-timeout" in out["msg"] and out["t"] < 2.5, out


@pytest.mark.parametrize("flag,value", [("--remote-media-max-bytes", "0"), ("--remote-media-timeout", "0"),
                                        ("--remote-media-timeout", "x")])
def test_bad_flags_are_usage_errors(g4_bin, flag, value):
    r = run_g4(g4_bin, "serve", "-m", MODEL, "--port", 0, "--allow-remote-media", flag, value, timeout=30)
    assert r.returncode == 2 and flag.encode() in r.stderr, r.stderr
