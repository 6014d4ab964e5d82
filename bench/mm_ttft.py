#!/usr/bin/env python3
"""Time to first token of an image prompt: `gemma4c serve` on a checkpoint's HF directory beside
llama-server (mtmd) on llama.cpp's GGUF + mmproj of the same checkpoint, both loaded at once and
asked in turn (the order swapped every repetition), each request with max_tokens 1, streamed.

Every repetition sends a new image (the same one to both servers), so neither reuses a cached
prompt; llama-server is also told `cache_prompt: false`. The chat is one user turn, the image then
"Describe this image.", with `chat_template_kwargs: {"enable_thinking": false}` (llama-server's
default would add the template's thinking turn, gemma4c's does not). Per engine it reports:
  - the client's wall time from sending the request to the first streamed chunk that carries a
    token (content, or the finish reason when the token is not text) — the role-only chunk
    gemma4c sends first does not count;
  - the server's own figure: gemma4c's g4_time_to_first_token_seconds (from /metrics, submit to
    first token), llama-server's `timings.prompt_ms` (prompt processing, the image's encode in it);
  - the prompt tokens (`usage.prompt_tokens`) and the image's soft tokens: gemma4c's prompt minus
    the same chat without the image minus its two image markers; llama-server's `timings.prompt_n`
    minus the text around its media marker as its own /tokenize counts it (the text before it and
    `<|image>`, with <bos>; `<image|>` and the text after). The two counts must agree or the run
    stops.

The images: --image FILE (repeatable, one per repetition plus one for the warm-up), else
photo-like PNGs of --size WxH written here (a smooth pattern with noise, a new noise each; the
standard library only). 1280x896 is 280 soft tokens in both engines' processors (a 960 x 672
grid of 48-pixel patches after the resize; other sizes may round differently in mtmd's).

  python3 bench/mm_ttft.py --g4-bin build/gemma4c -m HF_DIR --llama-server BIN --gguf TEXT.gguf \\
      --mmproj MMPROJ.gguf [--threads 2] [--reps 3] [--lock FILE] [--out DIR] [--md FILE]

--lock FILE: the servers' loading and every request run while holding flock(FILE) (the lock
`flock FILE cmd` takes). Prints a JSON line (medians); --md FILE writes a report.
"""
import argparse
import base64
import fcntl
import http.client
import json
import os
import random
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT_TEXT = "Describe this image."
IMAGE_MARKERS = ("<|image>", "<image|>")  # mtmd's text around a Gemma 4 image's soft tokens


def write_png(path, width, height, seed):
    """A photo-like RGB PNG: smooth colour waves plus uniform noise (+-16), 8-bit, unfiltered."""
    import math
    rng = random.Random(seed)
    rows = []
    for y in range(height):
        row = bytearray(1 + 3 * width)
        for x in range(width):
            r = 128 + 100 * math.sin(x / 97 + y / 211)
            g = 128 + 90 * math.cos(x / 53 - y / 67)
            b = 128 + 80 * math.sin((x + y) / 151)
            for c, v in enumerate((r, g, b)):
                row[1 + 3 * x + c] = min(255, max(0, int(v) + rng.randint(-16, 16)))
        rows.append(bytes(row))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(b"".join(rows), 6)) + chunk(b"IEND", b""))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on a free port, its stderr kept (the last lines shown if it fails)."""

    def __init__(self, name, cmd, port, log_path):
        self.name, self.port, self.log_path = name, port, log_path
        self.log = open(log_path, "w")
        self.p = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        t0 = time.time()
        while time.time() - t0 < 600:
            if self.p.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if json.loads(r.read()).get("status") == "ok":
                        return
            except Exception:
                pass
            time.sleep(0.5)
        self.stop()
        raise SystemExit(f"{name} did not start ({' '.join(cmd)}):\n" + open(log_path).read()[-3000:])

    def post(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=3600) as r:
            return json.loads(r.read())

    def metric(self, name):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            m = re.search(rf"^{name} (\S+)$", r.read().decode(), re.M)
        return float(m.group(1)) if m else None

    def stream_chat(self, body):
        """(client seconds to the first token's chunk, usage, timings) of a streamed chat request."""
        data = json.dumps(dict(body, stream=True, stream_options={"include_usage": True})).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", data, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise SystemExit(f"{self.name}: HTTP {resp.status}: {resp.read()[:500]!r}")
        first, usage, timings = None, None, None
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            ev = json.loads(line[5:])
            for ch in ev.get("choices") or []:
                d = ch.get("delta") or {}
                if first is None and (d.get("content") or d.get("reasoning_content") or d.get("tool_calls")
                                      or ch.get("finish_reason")):
                    first = time.perf_counter() - t0
            usage = ev.get("usage") or usage
            timings = ev.get("timings") or timings
        conn.close()
        if first is None:
            raise SystemExit(f"{self.name}: the stream carried no token")
        return first, usage, timings

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()


def chat_body(image_path=None):
    content = []
    if image_path:
        mime = "image/png" if image_path.lower().endswith(".png") else "image/jpeg"
        url = f"data:{mime};base64," + base64.b64encode(open(image_path, "rb").read()).decode()
        content.append({"type": "image_url", "image_url": {"url": url}})
    content.append({"type": "text", "text": PROMPT_TEXT})
    return {"messages": [{"role": "user", "content": content}], "max_tokens": 1, "temperature": 0,
            "chat_template_kwargs": {"enable_thinking": False}}


def llama_text_around_image(srv, image_path):
    """llama-server's text tokens around the image: its template's prompt split at the media marker,
    tokenized as mtmd does (the text before and <|image>, with <bos>; <image|> and the text after)."""
    prompt = srv.post("/apply-template", chat_body(image_path))["prompt"]
    parts = re.split(r"<__media_\w*__>", prompt)
    if len(parts) != 2:
        raise SystemExit(f"llama-server's prompt has {len(parts) - 1} media markers, not 1: {prompt!r}")
    before = srv.post("/tokenize", {"content": parts[0] + IMAGE_MARKERS[0], "add_special": True})["tokens"]
    after = srv.post("/tokenize", {"content": IMAGE_MARKERS[1] + parts[1], "add_special": False})["tokens"]
    return len(before) + len(after)


def uptime():
    return open("/proc/loadavg").read().split()[:3]


def med(xs):
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--g4-bin", default=os.path.join(REPO, "build", "gemma4c"))
    ap.add_argument("-m", "--model", required=True, help="the checkpoint's HF directory (gemma4c)")
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--gguf", required=True, help="llama.cpp's text GGUF of the same checkpoint")
    ap.add_argument("--mmproj", required=True, help="llama.cpp's mmproj GGUF of it")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--image", action="append", default=[], help="reps + 1 images (the first warms up)")
    ap.add_argument("--size", default="1280x896")
    ap.add_argument("--lock")
    ap.add_argument("--out")
    ap.add_argument("--md")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="g4-mm-ttft-")
    os.makedirs(out, exist_ok=True)

    images = args.image
    if not images:
        w, h = (int(v) for v in args.size.lower().split("x"))
        images = [os.path.join(out, f"photo-{i}.png") for i in range(args.reps + 1)]
        for i, p in enumerate(images):
            write_png(p, w, h, seed=1000 + i)
    if len(images) != args.reps + 1:
        raise SystemExit(f"--image: {args.reps + 1} images wanted (a warm-up and one per repetition), got {len(images)}")
    bodies = [chat_body(p) for p in images]  # encoded before any timing

    lock = open(args.lock, "a") if args.lock else None
    if lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
    load_before, g4, ll = uptime(), None, None
    try:
        gp, lp = free_port(), free_port()
        g4 = Server("gemma4c serve", [args.g4_bin, "serve", "-m", args.model, "--port", str(gp), "--threads",
                                      str(args.threads), "--ctx", str(args.ctx), "--max-body", str(1 << 26)],
                    gp, os.path.join(out, "gemma4c-serve.log"))
        ll = Server("llama-server", [args.llama_server, "-m", args.gguf, "--mmproj", args.mmproj, "-t",
                                     str(args.threads), "-c", str(args.ctx), "-np", "1", "--host", "127.0.0.1",
                                     "--port", str(lp)], lp, os.path.join(out, "llama-server.log"))
        # the image's soft tokens in each engine, from the warm-up image (untimed)
        g4_txt = g4.post("/v1/chat/completions", chat_body())["usage"]["prompt_tokens"]
        ll_around = llama_text_around_image(ll, images[0])
        ll_markers = [len(ll.post("/tokenize", {"content": m, "add_special": False})["tokens"]) for m in IMAGE_MARKERS]
        runs = {"gemma4c": [], "llama.cpp": []}
        for rep in range(args.reps + 1):
            order = [("gemma4c", g4), ("llama.cpp", ll)]
            if rep % 2:
                order.reverse()
            for name, srv in order:
                body = dict(bodies[rep], cache_prompt=False) if name == "llama.cpp" else bodies[rep]
                before = srv.metric("g4_time_to_first_token_seconds_sum") if name == "gemma4c" else None
                wall, usage, timings = srv.stream_chat(body)
                r = {"rep": rep, "client_ttft_s": wall, "prompt_tokens": usage["prompt_tokens"] if usage else None}
                if name == "gemma4c":
                    r["server_ttft_s"] = srv.metric("g4_time_to_first_token_seconds_sum") - before
                    r["soft_tokens"] = r["prompt_tokens"] - g4_txt - 2
                else:
                    r["server_ttft_s"] = timings["prompt_ms"] / 1e3
                    r["prompt_n"] = timings["prompt_n"]
                    r["soft_tokens"] = timings["prompt_n"] - ll_around
                runs[name].append(r)
                print(json.dumps({"engine": name, **r}), file=sys.stderr, flush=True)
    finally:
        for s in (g4, ll):
            if s:
                s.stop()
        load_after = uptime()
        if lock:
            lock.close()

    soft = {n: {r["soft_tokens"] for r in rs} for n, rs in runs.items()}
    if len(soft["gemma4c"] | soft["llama.cpp"]) != 1:
        raise SystemExit(f"the engines' soft tokens differ: {soft}")
    timed = {n: [r for r in rs if r["rep"] > 0] for n, rs in runs.items()}
    summary = {"reps": args.reps, "threads": args.threads, "soft_tokens": soft["gemma4c"].pop(),
               "load_before": load_before, "load_after": load_after,
               "text_tokens": {"gemma4c": g4_txt + 2, "llama.cpp": ll_around},
               "llama_image_marker_tokens": ll_markers}
    for n, rs in timed.items():
        summary[n] = {"prompt_tokens": rs[0]["prompt_tokens"],
                      "client_ttft_s": med([r["client_ttft_s"] for r in rs]),
                      "server_ttft_s": med([r["server_ttft_s"] for r in rs]),
                      "client_ttft_all_s": [round(r["client_ttft_s"], 3) for r in rs],
                      "server_ttft_all_s": [round(r["server_ttft_s"], 3) for r in rs]}
    summary["image"] = os.path.basename(images[1])
    print(json.dumps(summary))
    with open(os.path.join(out, "mm-ttft.json"), "w") as f:
        json.dump({"summary": summary, "runs": runs}, f, indent=1)
    if args.md:
        with open(args.md, "w") as f:
            f.write(report(summary, args))


def report(s, args):
    g, l = s["gemma4c"], s["llama.cpp"]
    f = lambda x: f"{x:.3f}"
    ratio = l["client_ttft_s"] / g["client_ttft_s"]
    return "\n".join([
        "| | gemma4c serve, HF checkpoint | llama-server (mtmd), GGUF + mmproj |",
        "|---|---:|---:|",
        f"| prompt tokens (the image's soft tokens) | {g['prompt_tokens']} ({s['soft_tokens']}) | "
        f"{l['prompt_tokens']} ({s['soft_tokens']}) |",
        f"| text tokens around the image (llama-server: `<|image>` / `<image|>` as "
        f"{' / '.join(map(str, s['llama_image_marker_tokens']))} tokens) | {s['text_tokens']['gemma4c']} | "
        f"{s['text_tokens']['llama.cpp']} |",
        f"| time to first token, client wall time to the first streamed token (median) | {f(g['client_ttft_s'])} | "
        f"{f(l['client_ttft_s'])} |",
        f"| the same, each repetition | {', '.join(map(f, g['client_ttft_all_s']))} | "
        f"{', '.join(map(f, l['client_ttft_all_s']))} |",
        f"| the server's own figure (gemma4c: submit to first token; llama-server: `timings.prompt_ms`) (median) | "
        f"{f(g['server_ttft_s'])} | {f(l['server_ttft_s'])} |",
        f"| the same, each repetition | {', '.join(map(f, g['server_ttft_all_s']))} | "
        f"{', '.join(map(f, l['server_ttft_all_s']))} |",
        "",
        f"llama.cpp / gemma4c client time to first token: {ratio:.2f}x. {args.threads} threads, {s['reps']} repetitions "
        f"after a warm-up, engines alternating; load average (1, 5, 15 min) {' '.join(s['load_before'])} before, "
        f"{' '.join(s['load_after'])} after.",
        ""])


if __name__ == "__main__":
    main()
