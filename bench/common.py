"""Helpers shared by the side-by-side report scripts (bench/compare_report.py,
bench/compare_quant_report.py, bench/compare_batched_report.py): reading the raw outputs their shell drivers leave in one directory
(llama-bench JSON, gemma4c bench's JSON line, lscpu, load averages), formatting medians, and
listing a GGUF file's tensor types (`python3 bench/common.py gguf-types FILE`, for compare_quant.sh).
Standard library only, so that no Python package has to be found; owns no output format beyond these pieces."""

from __future__ import annotations

import glob
import json
import os
import re
import statistics
import struct
import sys
from collections import Counter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shown_path(path: str, name: str = "$OUT") -> str:
    """`path` relative to the repository when it lies inside it, else `name` (the knob that set it):
    a report names no checkout's or machine's location."""
    p = os.path.abspath(path)
    return os.path.relpath(p, REPO) if p.startswith(REPO + os.sep) else name


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
    # family / model name the core where a hypervisor hides the model name ("AMD EPYC": 25 / 1 is Zen 3)
    keep = ("Model name", "CPU family", "Model", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
            "Hypervisor vendor", "L1d cache", "L2 cache", "L3 cache", "NUMA node(s)")
    lines = []
    for ln in text.splitlines():
        k = ln.split(":", 1)[0].strip()
        if k in keep:
            lines.append(re.sub(r"\s{2,}", " ", ln.strip()))
    flags = re.search(r"Flags:\s*(.*)", text)
    if flags:
        f = set(flags.group(1).split())
        simd = [x for x in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile") if x in f]
        lines.append("SIMD: " + " ".join(simd))
    return "\n".join(lines)


# ggml's type ids (ggml.h enum ggml_type) -> names, for the types a GGUF of this model can hold
GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1", 10: "Q2_K",
              11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 24: "I8", 25: "I16", 26: "I32", 27: "I64",
              20: "IQ4_NL", 23: "IQ4_XS", 28: "F64", 30: "BF16"}


def gguf_tensors(path: str) -> list[tuple[str, list[int], str]]:
    """(name, dims, type name) of every tensor of a GGUF file (version 2 or 3), read from its header."""
    with open(path, "rb") as f:
        def u(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def string():
            return f.read(u("Q")).decode("utf-8", "replace")

        scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

        def skip_value(vt):
            if vt in scalar:
                f.read(struct.calcsize("<" + scalar[vt]))
            elif vt == 8:
                string()
            elif vt == 9:
                et, n = u("I"), u("Q")
                for _ in range(n):
                    skip_value(et)
            else:
                raise ValueError(f"{path}: unknown GGUF value type {vt}")

        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version = u("I")
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version} (this reader knows 2 and 3)")
        n_tensors, n_kv = u("Q"), u("Q")
        for _ in range(n_kv):
            string()
            skip_value(u("I"))
        out = []
        for _ in range(n_tensors):
            name = string()
            dims = [u("Q") for _ in range(u("I"))]
            t = u("I")
            u("Q")   # offset
            out.append((name, dims, GGML_TYPES.get(t, f"type{t}")))
        return out


def gguf_types_summary(path: str) -> str:
    """The matrices' types with counts, and the token embedding's (the tied LM head) type."""
    ts = gguf_tensors(path)
    c = Counter(t for _, dims, t in ts if len(dims) >= 2)
    emb = [t for name, _, t in ts if name == "token_embd.weight"]
    return ", ".join(f"{n} x{k}" for n, k in sorted(c.items())) + f"; token_embd (tied LM head) {emb[0] if emb else '?'}"


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "gguf-types":
        sys.exit("usage: python3 bench/common.py gguf-types FILE.gguf")
    print(gguf_types_summary(sys.argv[2]))
