"""Helpers shared by the side-by-side report scripts (bench/compare_report.py,
bench/compare_quant_report.py, bench/compare_batched_report.py): reading the raw outputs their shell drivers leave in one directory
(llama-bench JSON, gemma4c bench's JSON line, lscpu, load averages) and formatting medians.
Standard library only; owns no output format beyond these pieces."""

from __future__ import annotations

import glob
import json
import os
import re
import statistics


def read(path: str, default: str = "") -> str:
    """The file's text, stripped; `default` if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return default


def round_no(path: str) -> int:
    """The round number in a raw output's name (`...-r3.json` -> 3)."""
    return int(re.search(r"-r(\d+)\.", path).group(1))


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, nd=2):
    return "n/a" if x is None else f"{x:.{nd}f}"


def llama_test_name(rec: dict) -> str:
    """llama-bench's record -> ppN, tgN (or ppN+tgM for a combined test)."""
    npr, ngen = rec.get("n_prompt", 0), rec.get("n_gen", 0)
    return f"pp{npr}" if npr and not ngen else f"tg{ngen}" if ngen and not npr else f"pp{npr}+tg{ngen}"


def load_llama(pattern: str) -> tuple[dict, list[dict]]:
    """{test: [llama-bench's mean tok/s per round]} over the files matching `pattern` in round
    order, and every record (for the settings llama-bench reports)."""
    res: dict[str, list[float]] = {}
    recs: list[dict] = []
    for p in sorted(glob.glob(pattern), key=round_no):
        for rec in json.loads(read(p, "[]") or "[]"):
            res.setdefault(llama_test_name(rec), []).append(float(rec["avg_ts"]))
            recs.append(rec)
    return res, recs


def load_g4(pattern: str) -> tuple[dict, list[dict]]:
    """{test: [gemma4c's tok/s per round]} from the last JSON line of each `gemma4c bench` output
    matching `pattern` in round order, and those JSON objects."""
    res: dict[str, list[float]] = {}
    runs = []
    for p in sorted(glob.glob(pattern), key=round_no):
        lines = [ln for ln in read(p).splitlines() if ln.startswith("{")]
        if not lines:
            continue
        j = json.loads(lines[-1])
        runs.append(j)
        for t in j["tests"]:
            res.setdefault(t["test"], []).append(float(t["tok_s"]))
    return res, runs


def round_loads(out: str) -> list[str]:
    """The load averages recorded at the start of each round (load-rN.txt), in round order."""
    return [read(p) for p in sorted(glob.glob(os.path.join(out, "load-r*.txt")), key=round_no)]


def dirty_note(out: str) -> str:
    """A markdown note listing gemma4c's uncommitted source changes at run time, or ""."""
    dirty = read(os.path.join(out, "gemma4c-dirty.txt"))
    if not dirty:
        return ""
    return "Working tree had uncommitted changes under src/include at run time:\n\n```\n" + dirty + "\n```\n"


def lscpu_summary(text: str) -> str:
    keep = ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
            "Hypervisor vendor", "L1d cache", "L2 cache", "L3 cache", "NUMA node(s)")
    lines = []
    for ln in text.splitlines():
        k = ln.split(":", 1)[0].strip()
        if k in keep:
            lines.append(re.sub(r"\s{2,}", " ", ln.strip()))
    flags = re.search(r"Flags:\s*(.*)", text)
    if flags:
        f = set(flags.group(1).split())
        simd = [x for x in ("avx2", "fma", "f16c", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if x in f]
        lines.append("SIMD: " + " ".join(simd))
    return "\n".join(lines)
