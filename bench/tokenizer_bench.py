#!/usr/bin/env python3
"""Side by side, in one run: load time of the Gemma 3 tokenizer (262,144 pieces) and single-thread
encode throughput over the golden corpus (tests/fixtures/tokenizer/goldens.jsonl.gz, 2,882 strings,
1.46 MB), gemma4c (bench/tokenizer_bench.c) vs HuggingFace `tokenizers`.

usage: make bench-tokenizer     (or: python bench/tokenizer_bench.py --bin build/bench/tokenizer_bench)
Needs a Python with `tokenizers` (e.g. $G4_REF_PY). Prints a table and a final JSON line.
Load: best of 3. Encode: best of --repeats passes over the corpus, one string at a time, no batching.
Both wall-clock and CPU time are reported (the CPU figures are what a busy shared machine does not
distort).
"""
import argparse
import gzip
import json
import os
import pathlib
import struct
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")          # HF single-threaded, like gemma4c
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=str(ROOT.parent / "shared" / "data" / "gemma3-tokenizer"))
    ap.add_argument("--bin", default=str(ROOT / "build" / "bench" / "tokenizer_bench"))
    ap.add_argument("--corpus", default=str(ROOT / "tests" / "fixtures" / "tokenizer" / "goldens.jsonl.gz"))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    texts = []
    with gzip.open(args.corpus, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if "text" in r:
                texts.append(r["text"])
    nbytes = sum(len(t.encode()) for t in texts)

    with tempfile.TemporaryDirectory() as td:
        cpath = pathlib.Path(td) / "corpus.bin"
        with open(cpath, "wb") as f:
            for t in texts:
                b = t.encode()
                f.write(struct.pack("<I", len(b)) + b)
        out = subprocess.run([args.bin, args.tokenizer, str(cpath), str(args.repeats)], capture_output=True,
                             text=True, check=True)
        g4 = json.loads(out.stdout.strip().splitlines()[-1])

    from tokenizers import Tokenizer, __version__ as hf_version
    path = str(pathlib.Path(args.tokenizer) / "tokenizer.json")
    loads = [_timed(lambda: Tokenizer.from_file(path)) for _ in range(3)]
    tok = Tokenizer.from_file(path)
    n_ids = 0

    def enc_all():
        nonlocal n_ids
        n_ids = 0
        for t in texts:
            n_ids += len(tok.encode(t, add_special_tokens=False).ids)
    encs = [_timed(enc_all) for _ in range(args.repeats)]
    hf = {"impl": f"HF tokenizers {hf_version}", "load_s": min(x[0] for x in loads),
          "load_cpu_s": min(x[1] for x in loads), "encode_s": min(x[0] for x in encs),
          "encode_cpu_s": min(x[1] for x in encs), "ids": n_ids}
    for r in (g4, hf):
        r["encode_MBps"] = nbytes / r["encode_s"] / 1e6
        r["encode_cpu_MBps"] = nbytes / r["encode_cpu_s"] / 1e6

    print(f"corpus: {len(texts)} strings, {nbytes} bytes; tokenizer: {args.tokenizer}")
    print("wall = elapsed time; cpu = CPU time of the process (load) / of the encoding thread: on a")
    print("busy machine the wall clock also counts waiting for a core. Best of 3 loads / of the passes.")
    print(f"{'':24s} {'load wall':>10s} {'load cpu':>9s} {'enc MB/s wall':>14s} {'enc MB/s cpu':>13s} {'ids':>8s}")
    for r in (g4, hf):
        print(f"{r['impl']:24s} {r['load_s']:9.3f}s {r['load_cpu_s']:8.3f}s {r['encode_MBps']:14.2f} "
              f"{r['encode_cpu_MBps']:13.2f} {r['ids']:8d}")
    if g4["ids"] != hf["ids"]:
        print(f"WARNING: id counts differ ({g4['ids']} vs {hf['ids']})", file=sys.stderr)
    print(json.dumps({"gemma4c_load_s": round(g4["load_s"], 4), "gemma4c_load_cpu_s": round(g4["load_cpu_s"], 4),
                      "hf_load_s": round(hf["load_s"], 4), "hf_load_cpu_s": round(hf["load_cpu_s"], 4),
                      "gemma4c_encode_MBps": round(g4["encode_MBps"], 3),
                      "gemma4c_encode_cpu_MBps": round(g4["encode_cpu_MBps"], 3),
                      "hf_encode_MBps": round(hf["encode_MBps"], 3), "hf_encode_cpu_MBps": round(hf["encode_cpu_MBps"], 3),
                      "corpus_bytes": nbytes, "strings": len(texts), "os_loadavg_1m": os.getloadavg()[0]}))


def _timed(fn):
    """(wall seconds, process CPU seconds) of fn()."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


if __name__ == "__main__":
    main()
