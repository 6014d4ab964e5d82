#!/usr/bin/env python3
"""The 12B-width slice check: record transformers goldens on the slice written
by make_12b_slice.py and/or compare gemma4c against them.

  --record     transformers float32 (eager) on the bf16 slice: prompts of 8, 64 and 200 tokens
               (last-position logits, greedy 64 / 16 / 16 tokens), written as goldens.json +
               logits_<case>.f32 in the slice dir, same format as the fixtures. ~10 GB RAM (the
               float32 copy of 2.4e9 parameters), ~10-20 min on one core.
  --gemma4c B  run `B logits` and `B run --ids` on the same prompts and report: max relative logit
               error (max|d| / max|ref|), greedy tokens matched, wall time, peak RSS of the child
               versus the safetensors size. Works on any dir with a goldens.json (fixtures too).

Usage:  python tools/reference/compare_slice.py /tmp/g4-12b-slice --record [--threads 1]
        python tools/reference/compare_slice.py /tmp/g4-12b-slice --gemma4c build/gemma4c [--tp 2]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_goldens  # noqa: E402


def run_child(cmd: list[str]) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run cmd; return (result, wall seconds, peak RSS in GB of that child, from wait4)."""
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.time() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return subprocess.CompletedProcess(cmd, p.returncode, fo.read(), fe.read()), wall, ru.ru_maxrss / 1e6


def compare(d: str, exe: str, extra: list[str]) -> bool:
    import numpy as np

    with open(os.path.join(d, "goldens.json")) as f:
        g = json.load(f)
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(d, "*.safetensors")))
    ok = True
    print(f"{g['model']}: {size / 1e9:.3f} GB safetensors; transformers {g['transformers_version']}")
    for case in g["cases"]:
        ids = ",".join(map(str, case["prompt_ids"]))
        ref = np.fromfile(os.path.join(d, case["logits_file"]), dtype="<f4")
        with tempfile.TemporaryDirectory() as td:
            out = os.path.join(td, "l.f32")
            r, wall_l, rss_l = run_child([exe, "logits", "-m", d, "--prompt-ids", ids, "-o", out] + extra)
            if r.returncode != 0:
                print(f"  {case['name']}: gemma4c logits failed rc={r.returncode}: {r.stderr.strip()[-300:]}")
                ok = False
                continue
            got = np.fromfile(out, dtype="<f4")
        rel = float(np.abs(got - ref).max() / np.abs(ref).max()) if got.shape == ref.shape else float("inf")
        n = len(case["greedy"])
        r, wall_g, rss_g = run_child([exe, "run", "-m", d, "--prompt-ids", ids, "-n", str(n), "--ids"] + extra)
        try:
            toks = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else []
        except (ValueError, IndexError):
            toks = []
        match = 0
        for a, b in zip(toks, case["greedy"]):
            if a != b:
                break
            match += 1
        ok &= rel <= 1e-4 and match == n
        print(f"  {case['name']}: n_prompt={len(case['prompt_ids'])} max rel logit err {rel:.2e}; "
              f"greedy {match}/{n} identical (prefix); logits {wall_l:.1f} s, run {wall_g:.1f} s; "
              f"peak RSS {max(rss_l, rss_g):.2f} GB vs {size / 1e9:.2f} GB weights")
        if r.stderr.strip():
            print("    stderr tail:", r.stderr.strip().splitlines()[-1][:200])
    print("PASS" if ok else "FAIL")
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-manual", action="store_true", help="skip the no-cache re-check of the 8-token case's greedy")
    ap.add_argument("--gemma4c", help="path of the gemma4c binary to compare")
    ap.add_argument("--tp", type=int, default=None)
    ap.add_argument("--engine-threads", type=int, default=None)
    args = ap.parse_args()
    if args.record:
        import torch

        torch.set_num_threads(args.threads)
        with open(os.path.join(args.dir, "config.json")) as f:
            vocab = json.load(f)["text_config"]["vocab_size"]
        t0 = time.time()
        r = record_goldens.record(args.dir, os.path.basename(os.path.normpath(args.dir)),
                                  record_goldens.slice_cases(vocab, 12012), verify_manual=not args.no_manual,
                                  manual_max_prompt=8)
        print(f"recorded in {time.time() - t0:.0f} s: min_top1_margin={r['min_top1_margin']:.4f} "
              f"min_greedy_step_margin={r['min_greedy_step_margin']:.4f}")
    if args.gemma4c:
        extra = []
        if args.tp:
            extra += ["--tp", str(args.tp)]
        if args.engine_threads:
            extra += ["--threads", str(args.engine_threads)]
        sys.exit(0 if compare(args.dir, args.gemma4c, extra) else 1)


if __name__ == "__main__":
    main()
