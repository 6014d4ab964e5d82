#!/usr/bin/env python3
"""What constrained decoding costs, in one run: build/bench/grammar_bench (bench/grammar_bench.c) on
the bench checkpoint and on a GGUF (the real Gemma 3 270M by default), each for a schema-heavy case
(bench/grammar/order.schema.json: nested objects, enums, bounded strings, integer ranges, a
pattern) and for json_object — mask time per token (wall and thread CPU), its share of the decode
step, tok/s constrained and not, compile time; then, when a llama-server binary is given,
llama-server's grammar sampling on the same GGUF and schema (its own timings, constrained and
not), alternating with gemma4c on the same cores. Writes a Markdown report (--out) and prints it.

  python3 bench/grammar_speed.py [--bench-model DIR] [--gguf FILE] [--llama-server BIN]
                                 [-n 128] [--threads 2] [--only bench|gguf] [--out FILE]

Standard library only. Run it under the benchmark lock on a shared host (docs/benchmarking.md)."""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "build", "bench", "grammar_bench")
SCHEMA = os.path.join(REPO, "bench", "grammar", "order.schema.json")
PROMPT = "Answer with one JSON document."


def shown(p: str) -> str:
    p = os.path.abspath(p)
    return os.path.relpath(p, REPO) if p.startswith(REPO + os.sep) else os.path.basename(p)


def ours(model: str, case: str, n: int, threads: int) -> dict:
    args = [BENCH, "-m", model, "-n", str(n), "--threads", str(threads), "-p", PROMPT]
    args += ["--json-object"] if case == "json_object" else ["--json-schema", SCHEMA]
    r = subprocess.run(args, capture_output=True, text=True, timeout=900)
    if r.returncode:
        sys.exit(f"grammar_bench failed: {r.stderr.strip()}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["model"] = shown(model)
    if out["grammar"] != "json_object":
        out["grammar"] = shown(out["grammar"])
    return out


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def post(port: int, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def llama(server: str, gguf: str, n: int, threads: int) -> dict:
    """llama-server's own timings for the same prompt, unconstrained / json_schema / any object."""
    port = free_port()
    p = subprocess.Popen([server, "-m", gguf, "--port", str(port), "-t", str(threads), "-c", "2048", "-np", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            sys.exit("llama-server did not start")
        schema = json.load(open(SCHEMA))
        base = {"prompt": PROMPT, "n_predict": n, "temperature": 1.0, "seed": 1, "cache_prompt": False}
        post(port, {**base, "n_predict": 4})   # warm-up
        out = {}
        for name, extra in (("unconstrained", {"ignore_eos": True}), ("schema", {"json_schema": schema}),
                            ("json_object", {"json_schema": {"type": "object"}})):
            r = post(port, {**base, **extra})
            t = r["timings"]
            out[name] = {"tokens": t["predicted_n"], "tok_s": t["predicted_per_second"],
                         "ms_per_token": t["predicted_per_token_ms"], "text": r.get("content", "")[:200]}
        return out
    finally:
        p.terminate()
        p.wait(timeout=30)


def row(label: str, r: dict) -> str:
    return (f"| {label} | {r['compile']['median_ms']:.2f} | {r['mask']['median_ms']:.3f} / {r['mask']['mean_ms']:.2f} / "
            f"{r['mask']['p99_ms']:.1f} | {r['mask_cpu']['median_ms']:.3f} / {r['mask_cpu']['mean_ms']:.2f} | "
            f"{r['forward_unconstrained']['mean_ms']:.1f} | {100 * r['mask_share_of_step']:.2f}% / "
            f"{100 * r['mask_cpu_share_of_step']:.2f}% | {r['tok_s_unconstrained']:.2f} | {r['tok_s_constrained']:.2f} | "
            f"{r['constrained_over_unconstrained']:.3f} | {r['documents']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench-model", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "g4-bench"))
    ap.add_argument("--gguf", default=None, help="default: what scripts/gemma3-270m.sh prints")
    ap.add_argument("--llama-server", default=None)
    ap.add_argument("--llama-label", default="", help="what llama-server is (e.g. its commit), for the report")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", choices=("bench", "gguf"), default=None,
                    help="one model only (on a slow shared host each half stays under a few minutes)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    gguf = a.gguf or subprocess.run(["bash", os.path.join(REPO, "scripts", "gemma3-270m.sh")], capture_output=True,
                                    text=True, check=True).stdout.strip()
    load0 = os.getloadavg()
    res = {}
    for label, model in (("bench model", a.bench_model), ("Gemma 3 270M", gguf)):
        if a.only and (a.only == "bench") != (model == a.bench_model):
            continue
        for case in ("schema", "json_object"):
            res[(label, case)] = ours(model, case, a.n, a.threads)
    ll = llama(a.llama_server, gguf, a.n, a.threads) if a.llama_server and a.only != "bench" else None
    load1 = os.getloadavg()
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
    lines = [
        f"# Constrained decoding: mask cost and tok/s ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)", "",
        f"- CPU: {cpu}, {os.cpu_count()} cores; load average {load0[0]:.1f} before, {load1[0]:.1f} after",
        f"- gemma4c {commit}; {a.threads} threads; {a.n} decode steps per run at batch 1, temperature 1, seed 1",
        "- models: " + ", ".join(sorted({r["model"] for r in res.values()})),
        f"- schema: {shown(SCHEMA)}; json_object: any JSON object", "",
        "Mask: `g4_matcher_mask` plus setting the other logits to -inf, per step, median / mean / p99 ms of wall "
        "time; CPU: the same in thread CPU time (what it costs without the other tenants' load). Share: "
        "(mask + matcher advance) over the constrained step's mean wall time, then the same with CPU time. "
        "A document that ends is followed by a new one from a fresh matcher.", "",
        "| model, case | compile ms | mask ms (median / mean / p99) | mask CPU ms (median / mean) | forward ms (mean) | "
        "mask share (wall / CPU) | tok/s unconstrained | tok/s constrained | ratio | documents |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (label, case), r in res.items():
        lines.append(row(f"{label}, {case}", r))
    if ll and ("Gemma 3 270M", "schema") in res:
        u = res[("Gemma 3 270M", "schema")]
        o = res[("Gemma 3 270M", "json_object")]
        lines += ["", f"## Side by side with llama-server {a.llama_label} on {shown(gguf)} (same prompt, schema, threads)", "",
                  "llama-server's `timings` of one /completion each (temperature 1, seed 1; unconstrained with "
                  "`ignore_eos`; constrained until the grammar ends); gemma4c: grammar_bench above.", "",
                  "| engine | tok/s unconstrained | tok/s schema (tokens) | schema / unconstrained | tok/s json_object (tokens) | json_object / unconstrained |",
                  "|---|---:|---:|---:|---:|---:|",
                  f"| gemma4c | {u['tok_s_unconstrained']:.2f} | {u['tok_s_constrained']:.2f} ({a.n}) | {u['constrained_over_unconstrained']:.3f} | "
                  f"{o['tok_s_constrained']:.2f} ({a.n}) | {o['tok_s_constrained'] / o['tok_s_unconstrained']:.3f} |",
                  f"| llama-server | {ll['unconstrained']['tok_s']:.2f} | {ll['schema']['tok_s']:.2f} ({ll['schema']['tokens']}) | "
                  f"{ll['schema']['tok_s'] / ll['unconstrained']['tok_s']:.3f} | {ll['json_object']['tok_s']:.2f} ({ll['json_object']['tokens']}) | "
                  f"{ll['json_object']['tok_s'] / ll['unconstrained']['tok_s']:.3f} |"]
    lines += ["", "Command:", "", "```sh",
              f"python3 bench/grammar_speed.py -n {a.n} --threads {a.threads}" + (f" --only {a.only}" if a.only else "")
              + (" --llama-server LLAMA_SERVER" if ll else ""),
              "```", "", "Raw:", "", "```json", json.dumps({f"{k[0]}, {k[1]}": v for k, v in res.items()} | ({"llama-server": ll} if ll else {}), indent=1), "```", ""]
    text = "\n".join(lines)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
