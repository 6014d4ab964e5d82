#!/usr/bin/env python3
"""Bounded load test of `gemma4c serve` on loopback: C concurrent streaming clients for D seconds
per --parallel setting, each looping POST /v1/completions (stream, include_usage). Reports
requests/s, aggregate generated tokens/s, p50/p99 time-to-first-token and the error count, then
SIGTERMs the server and checks it exits 0 with no sanitizer report (run it against an ASan build
to check for leaks). One JSON line per setting on stdout, a table on stderr.

  python3 bench/load_test.py --bin build/gemma4c -m tests/fixtures/g4-cond-tiny \\
      --parallel 1,4,8 --clients 32 --duration 20
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time


def start_server(args, parallel):
    cmd = [args.bin, "serve", "-m", args.model, "--port", "0", "--parallel", str(parallel),
           "--ctx", str(args.ctx), "--threads", str(args.threads)]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    log, port = [], [None]
    ready = threading.Event()

    def drain():
        for line in p.stderr:
            log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                port[0] = int(m.group(1))
            if "ready" in line:
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    if not ready.wait(120) or port[0] is None or p.poll() is not None:
        raise SystemExit("server did not start:\n" + "".join(log))
    return p, port[0], log


def one_request(port, prompt, max_tokens, seed, timeout):
    """Returns (ttft_s, generated_tokens) or raises."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.8, "seed": seed,
                       "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    try:
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]!r}")
        ttft, tokens, done = None, None, False
        for raw in r:
            line = raw.strip()
            if not line.startswith(b"data: "):
                continue
            if line == b"data: [DONE]":
                done = True
                break
            ev = json.loads(line[6:])
            if "error" in ev:
                raise RuntimeError(ev["error"]["message"])
            if ttft is None and ev.get("choices"):
                ttft = time.perf_counter() - t0
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
        if not done or tokens is None:
            raise RuntimeError("stream ended without usage / [DONE]")
        return ttft, tokens
    finally:
        c.close()


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def run_setting(args, parallel):
    p, port, log = start_server(args, parallel)
    stop_at = time.perf_counter() + args.duration
    lock = threading.Lock()
    ttfts, tokens, errors, done = [], [0], [], [0]

    def client(ci):
        rng = random.Random(ci)
        while time.perf_counter() < stop_at:
            prompt = [2] + [rng.randrange(10, 1000) for _ in range(rng.randrange(4, args.max_prompt))]
            try:
                ttft, n = one_request(port, prompt, args.max_tokens, rng.randrange(1 << 30), args.timeout)
                with lock:
                    ttfts.append(ttft)
                    tokens[0] += n
                    done[0] += 1
            except Exception as e:  # noqa: BLE001 — every failure counts as an error
                with lock:
                    errors.append(repr(e)[:200])

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = "hung"
    time.sleep(0.2)
    text = "".join(log)
    sanitizer = [ln.strip() for ln in log if "Sanitizer" in ln or "runtime error" in ln]
    res = {"parallel": parallel, "clients": args.clients, "wall_s": round(wall, 2), "requests": done[0],
           "requests_per_s": round(done[0] / wall, 2), "gen_tokens": tokens[0],
           "gen_tokens_per_s": round(tokens[0] / wall, 1),
           "ttft_p50_ms": round(pct(ttfts, 0.5) * 1e3, 1), "ttft_p99_ms": round(pct(ttfts, 0.99) * 1e3, 1),
           "errors": len(errors), "exit_code": rc, "sanitizer_reports": len(sanitizer)}
    if errors:
        res["first_error"] = errors[0]
    if sanitizer:
        res["first_sanitizer_line"] = sanitizer[0]
        sys.stderr.write(text[-4000:])
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("G4_BIN", "build/gemma4c"))
    ap.add_argument("-m", "--model", default="tests/fixtures/g4-cond-tiny")
    ap.add_argument("--parallel", default="1,4,8", help="comma-separated --parallel settings")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--max-prompt", type=int, default=48, help="prompt lengths are uniform in [5, this]")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    results = []
    for par in [int(x) for x in args.parallel.split(",")]:
        r = run_setting(args, par)
        results.append(r)
        print(json.dumps(r), flush=True)
    sys.stderr.write("\nparallel  req/s  gen tok/s  TTFT p50 ms  TTFT p99 ms  errors  exit  sanitizer\n")
    for r in results:
        sys.stderr.write(f"{r['parallel']:>8}  {r['requests_per_s']:>5}  {r['gen_tokens_per_s']:>9}  "
                         f"{r['ttft_p50_ms']:>11}  {r['ttft_p99_ms']:>11}  {r['errors']:>6}  {r['exit_code']!s:>4}  "
                         f"{r['sanitizer_reports']:>9}\n")
    ok = all(r["errors"] == 0 and r["exit_code"] == 0 and r["sanitizer_reports"] == 0 for r in results)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
