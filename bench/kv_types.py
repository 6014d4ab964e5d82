#!/usr/bin/env python3
"""KV cache precision (--kv-type f32|bf16|f16|q8_0): accuracy against the exact f32 cache deep
into the context, and decode speed at depth beside llama.cpp's llama-bench -ctk/-ctv.

  accuracy: the text (default: the GPL-3 licence text, real English) is tokenized with the
    model's tokenizer and cut to DEPTH + N ids; `gemma4c logits --decode-from DEPTH` prefills
    the first DEPTH ids and then decodes the rest one at a time (teacher-forced), writing the
    logits of every position from DEPTH-1 on. Per type, against f32's: top-1 agreement over
    those N + 1 positions, and the max relative logit error max_pos max_i |v_i - r_i| / max_i |r_i|.
  speed: `gemma4c bench -p 0 -n N --depth D --kv-type T` and, with --llama-bench, `llama-bench
    -p 0 -n N -d D -ctk T -ctv T -fa 1` (llama.cpp needs flash attention for a quantized V
    cache), the two engines alternating per type and depth, each run under flock on the
    shared benchmark lock; progress on stderr. The table adds bytes read per token (weights + the
    K and V each layer sees) and the fraction of the read bandwidth that gemma4c's first run
    measures, and the load average at each run's start.

usage: kv_types.py accuracy -m MODEL [--depth 4000] [-n 64] [--text FILE] [--types bf16,f16,q8_0]
       kv_types.py speed -m MODEL [--depths 4000,32000] [-n 32] [--reps 2] [--prefill-bf16]
                         [--llama-bench BIN --gguf FILE] [--timeout 480]
       common: [--bin build/gemma4c] [--threads 2] [--lock /tmp/g4-bench.lock] -> markdown on stdout
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

TYPES = ["f32", "bf16", "f16", "q8_0"]


def run(cmd, lock=None, timeout=480):
    """cmd's stdout; under `flock lock` when given (the wait for the lock is not timed), killed
    after `timeout` seconds of running"""
    cmd = ["timeout", timeout, *cmd]
    if lock:
        cmd = ["flock", lock, *cmd]
    p = subprocess.run([str(c) for c in cmd], capture_output=True)
    if p.returncode:
        sys.exit(f"{' '.join(map(str, cmd))[:300]}...: exit {p.returncode}: {p.stderr.decode()[-1500:]}")
    return p.stdout.decode()


def accuracy(a):
    text = open(a.text, encoding="utf-8").read()
    ids = json.loads(subprocess.run([a.bin, "tokenize", "-m", a.model, "--bos"], input=text.encode(),
                                    capture_output=True, check=True).stdout)
    need = a.depth + a.n
    while len(ids) < need:   # a short text is repeated (a real text is preferable)
        ids += ids[1:]
    ids = ids[:need]
    ctx = need + 16
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for t in ["f32"] + a.types:
            out = os.path.join(tmp, f"{t}.f32")
            run([a.bin, "logits", "-m", a.model, "--prompt-ids", ",".join(map(str, ids)), "-o", out,
                 "--decode-from", a.depth, "--ctx", ctx, "--kv-type", t, "--threads", a.threads], lock=a.lock)
            rows[t] = np.fromfile(out, dtype="<f4").reshape(a.n + 1, -1)
    ref = rows["f32"]
    top_ref = ref.argmax(1)
    print(f"model `{os.path.basename(a.model.rstrip('/'))}`, depth {a.depth}, {a.n + 1} teacher-forced decode positions "
          f"({a.depth - 1}..{a.depth + a.n - 1}) of `{os.path.basename(a.text)}`\n")
    print("| kv type | top-1 agreement with f32 | max relative logit error | median relative logit error |")
    print("|---|---:|---:|---:|")
    for t in a.types:
        v = rows[t]
        rel = np.abs(v - ref).max(1) / np.abs(ref).max(1)
        agree = int((v.argmax(1) == top_ref).sum())
        print(f"| {t} | {agree}/{len(ref)} ({100.0 * agree / len(ref):.1f}%) | {rel.max():.4g} | {np.median(rel):.4g} |")


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def progress(msg):
    """a line on stderr at once (a depth-32,000 run takes minutes; stdout is the final table)"""
    print(msg, file=sys.stderr, flush=True)


def speed(a):
    res, bw = {}, None
    for d in a.depths:
        for t in a.types:
            # the first run also measures the machine's read bandwidth (the roofline's denominator)
            cmd = [a.bin, "bench", "-m", a.model, "-p", 0, "-n", a.n, "--depth", d, "--ctx", d + a.n + 16,
                   "--kv-type", t, "--reps", a.reps, "--threads", a.threads] + (["--no-peaks"] if bw else []) \
                + (["--prefill-bf16"] if a.prefill_bf16 else [])
            la = loadavg()
            progress(f"gemma4c d={d} {t} (load {la})")
            out = run(cmd, lock=a.lock, timeout=a.timeout)
            js = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
            bw = bw or js["machine"]["read_bw_gbs"]
            dec = [x for x in js["tests"] if x["kind"] == "decode"][0]
            res[("gemma4c", d, t)] = (dec["tok_s"], la, dec["weight_bytes_per_token"] + dec["kv_bytes_per_token"],
                                      js["kernels"])
            progress(f"  {dec['tok_s']:.2f} tok/s")
            if a.llama_bench and t in a.llama_types:
                la = loadavg()
                progress(f"llama-bench d={d} {t} (load {la})")
                out = run([a.llama_bench, "-m", a.gguf, "-p", 0, "-n", a.n, "-d", d, "-ctk", t, "-ctv", t, "-fa", 1,
                           "-t", a.threads, "-r", a.reps, "-o", "json"], lock=a.lock, timeout=a.timeout)
                rec = json.loads(out)[0]
                res[("llama.cpp", d, t)] = (rec["avg_ts"], la)
                progress(f"  {rec['avg_ts']:.2f} tok/s")
    print(f"decode tok/s (tg{a.n} at depth D, --reps {a.reps}, --threads {a.threads}); gemma4c kernels: "
          f"{next(v[3] for k, v in res.items() if k[0] == 'gemma4c')}; bytes/token: gemma4c's weights + K and V of "
          f"the positions each layer sees; % roofline: tok/s x bytes/token / {bw:.2f} GB/s (measured read "
          f"bandwidth); load: 1-minute load average when the run started\n")
    print("| depth | kv type | gemma4c tok/s | llama.cpp tok/s | gemma4c / llama.cpp | bytes/token (MB) | "
          "% roofline | load (gemma4c / llama.cpp) |")
    print("|---:|---|---:|---:|---:|---:|---:|---|")
    for d in a.depths:
        for t in a.types:
            g = res[("gemma4c", d, t)]
            l = res.get(("llama.cpp", d, t))
            print(f"| {d} | {t} | {g[0]:.2f} | {f'{l[0]:.2f}' if l else 'n/a'} | {f'{g[0] / l[0]:.2f}x' if l else 'n/a'} | "
                  f"{g[2] / 1e6:.1f} | {100 * g[0] * g[2] / 1e9 / bw:.0f}% | {g[1]} / {l[1] if l else '-'} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["accuracy", "speed"])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--bin", default="build/gemma4c")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lock", default="/tmp/g4-bench.lock")
    ap.add_argument("--types", default=None)
    ap.add_argument("--depth", type=int, default=4000)
    ap.add_argument("--depths", default="4000,32000")
    ap.add_argument("-n", type=int, default=None)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--prefill-bf16", action="store_true",
                    help="speed: gemma4c's untimed depth prefill in bf16 (shorter; the timed decode is the same code)")
    ap.add_argument("--timeout", type=int, default=480, help="seconds a run may take (depth 32,000 on 2 cores: minutes)")
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--llama-bench", default=None)
    ap.add_argument("--gguf", default=None, help="the GGUF llama-bench runs (default: -m)")
    ap.add_argument("--llama-types", default="bf16,f16,q8_0",
                    help="types llama-bench runs (its -ctk takes no f32: its default cache is f16)")
    a = ap.parse_args()
    a.types = (a.types or ("bf16,f16,q8_0" if a.what == "accuracy" else "f32,bf16,f16,q8_0")).split(",")
    for t in a.types:
        if t not in TYPES:
            ap.error(f"--types: unknown kv type '{t}' (f32, bf16, f16, q8_0)")
    a.depths = [int(x) for x in a.depths.split(",")]
    a.llama_types = a.llama_types.split(",")
    a.gguf = a.gguf or a.model
    if a.n is None:
        a.n = 64 if a.what == "accuracy" else 32
    accuracy(a) if a.what == "accuracy" else speed(a)


if __name__ == "__main__":
    main()
