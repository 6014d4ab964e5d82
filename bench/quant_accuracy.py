#!/usr/bin/env python3
"""Accuracy of quantized weights against bf16, measured with gemma4c itself.

For each model (an HF checkpoint directory holding bf16 weights) this packs it with
`gemma4c pack --dtype q8_0|q4_0|q4_k` (and takes any extra quantized files given with --extra, e.g.
llama.cpp's GGUF quantizations of the same checkpoint) and compares every quantized variant with the
bf16 directory, both run by the same gemma4c binary, so the difference is the weights' alone:

  * prompt top-1: argmax of the last prompt position's logits equals bf16's;
  * teacher-forced top-1: along bf16's greedy continuation (the fixture's transformers goldens where
    the model has goldens.json, else gemma4c's bf16 greedy), the logits of every growing prefix
    prompt + greedy[:k] (k = 0..steps-1); agreement = quantized argmax == greedy[k];
  * free-running greedy: `run -n steps --ids` on the quantized model, tokens equal to bf16's until the
    first divergence (mean and minimum over prompts);
  * max |logit error| over all those positions, and max relative error = max over positions of
    max_i |q_i - b_i| / max_i |b_i| (logits after the final softcap, as `gemma4c logits` writes them);
  * "explained": disagreements where bf16's own top-1 margin (best - second best logit) is smaller
    than 2 x that position's max |logit error|, i.e. a near-tie the error can flip.

Which matrices a q4_k pack actually holds as Q4_K is read from the pack's directory (rows whose
width is not a multiple of 256 fall back to Q8_0). Standard library + numpy.

With --act-q8, every quantized variant is measured a second time with `--act-q8` (activations
rounded to int8 blocks before the matmuls, as llama.cpp does), labelled "+act-q8".

usage: python3 bench/quant_accuracy.py [--bin build/gemma4c] [--fixtures g4-cond-tiny g4-causal-tiny] [--act-q8]
         [--bench-model /tmp/g4-bench --bench-steps 8] [--extra LABEL=MODEL_DIR=QUANT_FILE ...]
         [--json out.json] [--workdir DIR]   -> markdown tables on stdout
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import struct
import subprocess
import sys
import shutil
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
DTYPES = ("q8_0", "q4_0", "q4_k")
DT_NAMES = {0: "F32", 1: "F16", 2: "BF16", 3: "Q8_0", 4: "Q4_0", 5: "Q5_0", 6: "Q4_K", 7: "Q6_K"}
# text prompts for models without goldens.json (tokenized by the model's own tokenizer, with BOS)
BENCH_PROMPTS = ["The capital of France is",
                 "Once upon a time, in a small village by the sea,",
                 "def fibonacci(n):\n    if n < 2:\n        return n\n",
                 "Water boils at 100 degrees Celsius at sea level because"]


def g4(bin_, *args, threads=1, inp=None):
    p = subprocess.run([bin_, *map(str, args)], input=inp, capture_output=True, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"gemma4c {' '.join(map(str, args))} failed ({p.returncode}): {p.stderr.decode()[-2000:]}")
    return p


def mode(model):
    """a variant's path may carry "#act-q8": the same file run with --act-q8"""
    path, _, m = model.partition("#")
    return path, (["--act-q8"] if m == "act-q8" else [])


def logits(bin_, model, ids, tmp, threads):
    out = os.path.join(tmp, "l.f32")
    model, extra = mode(model)
    g4(bin_, "logits", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "-o", out, "--threads", threads, *extra)
    return np.fromfile(out, "<f4")


def greedy(bin_, model, ids, n, threads):
    model, extra = mode(model)
    p = g4(bin_, "run", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "-n", n, "--ids", "--threads", threads,
           *extra)
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


def pack_dtypes(path):
    """{HF tensor name: dtype name} of rank 0 of a .g4c pack (layout: src/io/pack.h)."""
    with open(path, "rb") as f:
        h = f.read(4096)
        assert h[:8] == b"G4CPACK\0", path
        _meta_off, _meta_len, dir_off, dir_len, _ = struct.unpack_from("<5Q", h, 16)
        _so, _sl, do, _dl, _crc, nt = struct.unpack_from("<4QII", h, 64)
        f.seek(dir_off)
        d = f.read(dir_len)
    out, o = {}, do
    for _ in range(nt):
        nl, dt, _nd = struct.unpack_from("<HBB", d, o)
        out[d[o + 64:o + 64 + nl].decode()] = DT_NAMES.get(dt, str(dt))
        o = (o + 64 + nl + 7) & ~7
    return out


def q4k_fallbacks(path):
    """For a q4_k pack: (names stored as Q4_K, names that fell back, "kind xN (dtype)" of the fallbacks,
    "kind xN" of the Q4_K ones); kind = the HF name's second-to-last part (q_proj, embed_tokens...)."""
    dts = pack_dtypes(path)
    mats = {n: t for n, t in dts.items() if t in ("Q4_K", "Q8_0", "BF16", "F16", "F32") and
            (n.endswith("proj.weight") or "embed_tokens" in n or n.endswith("lm_head.weight"))}
    q4k = sorted(n for n, t in mats.items() if t == "Q4_K")
    fb = sorted(n for n, t in mats.items() if t != "Q4_K")
    kinds = {}
    for n in fb:
        k = (n.split(".")[-2], mats[n])
        kinds[k] = kinds.get(k, 0) + 1
    desc = ", ".join(f"{k} x{c} ({t})" for (k, t), c in sorted(kinds.items()))
    q4kinds = {}
    for n in q4k:
        q4kinds[n.split(".")[-2]] = q4kinds.get(n.split(".")[-2], 0) + 1
    return q4k, fb, desc, ", ".join(f"{k} x{c}" for k, c in sorted(q4kinds.items()))


def _f16(b, n, off):
    """the little-endian f16 at byte off of each of the n blocks (rows of the uint8 array b), as [n][1]."""
    return b[:, off:off + 2].copy().view("<f2").astype(np.float32).reshape(n, 1)


def dequantize(dt, raw, rows, cols):
    """float32 [rows][cols] of a Q8_0 / Q4_0 / Q4_K / BF16 / F16 / F32 tensor (ggml's block formats)."""
    if dt == "F32":
        return np.frombuffer(raw, "<f4").reshape(rows, cols).copy()
    if dt == "F16":
        return np.frombuffer(raw, "<f2").astype(np.float32).reshape(rows, cols)
    if dt == "BF16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).reshape(rows, cols)
    qk, bs = {"Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_K": (256, 144)}[dt]
    nb = rows * cols // qk
    b = np.frombuffer(raw, np.uint8).reshape(nb, bs)
    d = _f16(b, nb, 0)
    if dt == "Q8_0":
        return (d * b[:, 2:].view(np.int8).astype(np.float32)).reshape(rows, cols)
    if dt == "Q4_0":
        q = b[:, 2:].astype(np.int32)
        return (d * (np.concatenate([q & 15, q >> 4], axis=1) - 8).astype(np.float32)).reshape(rows, cols)
    dmin = _f16(b, nb, 2)
    sc8 = b[:, 4:16].astype(np.int32)
    sc = np.empty((nb, 8), np.int32)
    mn = np.empty((nb, 8), np.int32)
    for j in range(8):   # ggml's get_scale_min_k4
        if j < 4:
            sc[:, j], mn[:, j] = sc8[:, j] & 63, sc8[:, j + 4] & 63
        else:
            sc[:, j] = (sc8[:, j + 4] & 15) | ((sc8[:, j - 4] >> 6) << 4)
            mn[:, j] = (sc8[:, j + 4] >> 4) | ((sc8[:, j] >> 6) << 4)
    qs = b[:, 16:].astype(np.int32).reshape(nb, 4, 32)
    out = np.empty((nb, 8, 32), np.float32)
    out[:, 0::2] = qs & 15
    out[:, 1::2] = qs >> 4
    out = d[:, :, None] * sc[:, :, None] * out - dmin[:, :, None] * mn[:, :, None]
    return out.reshape(rows, cols).astype(np.float32)


def read_pack_tensors(path):
    """{name: (dtype, shape, raw bytes)} of rank 0 of a tp-1 pack."""
    b = pathlib.Path(path).read_bytes()
    _mo, _ml, dir_off, _dl, _ = struct.unpack_from("<5Q", b, 16)
    so, _sl, do, _dl2, _crc, nt = struct.unpack_from("<4QII", b, 64)
    out, o = {}, dir_off + do
    for _ in range(nt):
        nl, dt, nd = struct.unpack_from("<HBB", b, o)
        shape = struct.unpack_from("<4q", b, o + 16)[:nd]
        off, nbytes = struct.unpack_from("<QQ", b, o + 48)
        out[b[o + 64:o + 64 + nl].decode()] = (DT_NAMES[dt], shape, b[so + off:so + off + nbytes])
        o = dir_off + ((o - dir_off + 64 + nl + 7) & ~7)
    return out


def write_dequantized_dir(pack, model_dir, out_dir):
    """An HF directory whose weights are the pack's, dequantized to float32 (others as in model_dir):
    gemma4c on it runs the float32 path on exactly the quantized values, the control that separates
    the weights' rounding from the quantized kernels' own error."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in pathlib.Path(model_dir).iterdir():
        if f.suffix in (".json", ".jinja") and not f.name.startswith("model.safetensors") and f.name != "goldens.json":
            (out_dir / f.name).write_bytes(f.read_bytes())
    tensors = {}
    for f in sorted(pathlib.Path(model_dir).glob("*.safetensors")):
        b = f.read_bytes()
        (hl,) = struct.unpack_from("<Q", b, 0)
        for name, e in json.loads(b[8:8 + hl]).items():
            if name != "__metadata__":
                s, t = e["data_offsets"]
                tensors[name] = (e["dtype"], e["shape"], b[8 + hl + s:8 + hl + t])
    for name, (dt, shape, raw) in read_pack_tensors(pack).items():
        if dt in ("Q8_0", "Q4_0", "Q4_K"):
            tensors[name] = ("F32", list(shape), dequantize(dt, raw, shape[0], shape[1]).tobytes())
    hdr, off, blobs = {}, 0, []
    for name, (dt, shape, raw) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw + b"\0" * (-len(raw) % 64))   # every tensor 64-byte aligned in the file
        off += len(blobs[-1])
    h = json.dumps(hdr).encode()
    h += b" " * (-(8 + len(h)) % 64)
    with open(out_dir / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for x in blobs:
            f.write(x)
    return str(out_dir)


def cases_for(bin_, model, steps, threads, n_prompts=None):
    """[(name, prompt_ids, bf16 greedy continuation)]: goldens.json's cases (transformers' greedy)
    where the model has them, else BENCH_PROMPTS with gemma4c's own bf16 greedy."""
    gold = pathlib.Path(model) / "goldens.json"
    if gold.exists():
        cs = json.loads(gold.read_text())["cases"]
        return [(c["name"], c["prompt_ids"], c["greedy"][:steps]) for c in cs], "transformers bf16 greedy (goldens.json)"
    out = []
    for i, text in enumerate(BENCH_PROMPTS[:n_prompts]):
        ids = json.loads(g4(bin_, "tokenize", "-m", model, "--bos", inp=text.encode()).stdout)
        out.append((f"p{i}", ids, greedy(bin_, model, ids, steps, threads)))
    return out, "gemma4c bf16 greedy"


def evaluate(bin_, model, variants, steps, threads, tmp, n_prompts=None, log=print, deq_control=False):
    """variants: [(label, path)]. Returns {label: metrics}, the reference note, the cases.
    deq_control: for .g4c variants also the max |logit difference| at the prompts' last positions
    between the pack and an f32 directory holding the same values dequantized (see
    write_dequantized_dir): the error of the quantized kernels themselves."""
    cases, ref_note = cases_for(bin_, model, steps, threads, n_prompts)
    # bf16 logits of every prefix, once
    ref = {}
    t0 = time.time()
    for name, ids, gr in cases:
        for k in range(len(gr)):
            ref[(name, k)] = logits(bin_, model, ids + gr[:k], tmp, threads)
    log(f"  bf16 reference: {len(ref)} prefixes, {time.time() - t0:.1f} s")
    ref_agree = sum(int(np.argmax(ref[(n, k)])) == gr[k] for n, _, gr in cases for k in range(len(gr)))
    res = {"_ref": {"positions": len(ref), "bf16_agrees_with_reference_greedy": ref_agree, "note": ref_note}}
    for label, path in variants:
        t0 = time.time()
        m = dict(prompt_agree=0, n_prompt=0, tf_agree=0, n_tf=0, max_abs=0.0, max_rel=0.0, explained=0,
                 run_match=[], disagreements=[])
        for name, ids, gr in cases:
            for k in range(len(gr)):
                b = ref[(name, k)]
                q = logits(bin_, path, ids + gr[:k], tmp, threads)
                if q.shape != b.shape:
                    raise SystemExit(f"{path}: {q.shape} logits vs bf16 {b.shape}")
                err = float(np.max(np.abs(q - b)))
                m["max_abs"] = max(m["max_abs"], err)
                m["max_rel"] = max(m["max_rel"], err / float(np.max(np.abs(b))))
                ok = int(np.argmax(q)) == gr[k]
                m["n_tf"] += 1
                m["tf_agree"] += ok
                if k == 0:
                    m["n_prompt"] += 1
                    m["prompt_agree"] += ok
                if not ok:
                    top2 = np.sort(b)[-2:]
                    margin = float(top2[1] - top2[0])
                    m["explained"] += margin < 2 * err
                    m["disagreements"].append({"case": name, "k": k, "bf16_margin": margin, "max_abs_err": err})
            if deq_control and path.endswith(".g4c"):
                dq = os.path.join(tmp, "deq-" + os.path.basename(path)[:-4])
                if not os.path.exists(os.path.join(dq, "model.safetensors")):
                    write_dequantized_dir(path, model, dq)
                d = float(np.max(np.abs(logits(bin_, path, ids, tmp, threads) - logits(bin_, dq, ids, tmp, threads))))
                m["kernel_err"] = max(m.get("kernel_err", 0.0), d)
                if name == cases[-1][0] and deq_control == "cleanup":
                    shutil.rmtree(dq)
            run = greedy(bin_, path, ids, len(gr), threads)
            same = next((i for i, (a, c) in enumerate(zip(run, gr)) if a != c), min(len(run), len(gr)))
            m["run_match"].append(same)
        m["seconds"] = round(time.time() - t0, 1)
        res[label] = m
        log(f"  {label}: teacher-forced {m['tf_agree']}/{m['n_tf']}, prompt {m['prompt_agree']}/{m['n_prompt']}, "
            f"max abs {m['max_abs']:.4g}, max rel {m['max_rel']:.4g}, {m['seconds']} s")
    return res, cases


def table(title, res, steps, cases, extra_note=""):
    w = []
    r0 = res["_ref"]
    w.append(f"**{title}** — {len(cases)} prompts x {steps} greedy steps = {r0['positions']} positions; "
             f"reference continuation: {r0['note']} (gemma4c bf16 argmax agrees at "
             f"{r0['bf16_agrees_with_reference_greedy']}/{r0['positions']}).{extra_note}\n")
    w.append("| weights | file MB (with tokenizer) | prompt top-1 | teacher-forced top-1 | greedy run = bf16 (mean / min tokens) | "
             "max abs logit err | max rel err | disagreements at near-ties | kernel err (vs same values in f32) |")
    w.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, m in res.items():
        if label.startswith("_"):
            continue
        nd = m["n_tf"] - m["tf_agree"]
        rm = m["run_match"]
        w.append(f"| {label} | {m.get('file_mb', 0):.1f} | {m['prompt_agree']}/{m['n_prompt']} | "
                 f"{m['tf_agree']}/{m['n_tf']} ({100 * m['tf_agree'] / m['n_tf']:.1f}%) | "
                 f"{sum(rm) / len(rm):.1f} / {min(rm)} of {steps} | {m['max_abs']:.4f} | {m['max_rel']:.4f} | "
                 f"{m['explained']}/{nd} | {'%.2g' % m['kernel_err'] if 'kernel_err' in m else '—'} |")
    return "\n".join(w) + "\n"


def fixture_crosschecks(bin_, fixture, q8_pack, tmp, threads):
    """Prompt positions of a fixture against the recorded references (tests/fixtures/g4-gguf):
    transformers bf16 (the fixture's goldens), transformers on the Q8_0 GGUF's dequantized tensors,
    llama.cpp (libllama, f32 KV, 1 thread) on the bf16 and Q8_0 GGUFs, and our q8_0 pack. Shows how
    much of the Q8_0 error is the weights' own (transformers sees it too) and llama.cpp side by side."""
    fx = ROOT / "tests" / "fixtures" / fixture
    gg = ROOT / "tests" / "fixtures" / "g4-gguf"
    pre = {"g4-cond-tiny": "cond", "g4-causal-tiny": "causal"}.get(fixture)
    if not pre or not (gg / "llamacpp_greedy.json").exists():
        return ""
    cases = json.loads((fx / "goldens.json").read_text())["cases"]
    lcg = json.loads((gg / "llamacpp_greedy.json").read_text())["files"]
    ref = [np.fromfile(fx / c["logits_file"], "<f4") for c in cases]
    rows = {
        "transformers, Q8_0 tensors dequantized": [np.fromfile(gg / f"q8_0_logits_{pre}_{c['name']}.f32", "<f4") for c in cases],
        "gemma4c, pack q8_0": [logits(bin_, q8_pack, c["prompt_ids"], tmp, threads) for c in cases],
        "llama.cpp, bf16 GGUF": [np.fromfile(gg / f"lc_logits_{pre}-bf16_{k}.f32", "<f4") for k in range(len(cases))],
        "llama.cpp, Q8_0 GGUF": [np.fromfile(gg / f"lc_logits_{pre}-q8_0_{k}.f32", "<f4") for k in range(len(cases))],
    }
    runs = {"llama.cpp, bf16 GGUF": [c["greedy"] for c in lcg[f"{pre}-bf16.gguf"]["cases"]],
            "llama.cpp, Q8_0 GGUF": [c["greedy"] for c in lcg[f"{pre}-q8_0.gguf"]["cases"]]}
    deq = rows["transformers, Q8_0 tensors dequantized"]
    w = [f"*{fixture}, cross-check at the {len(cases)} prompts' last positions* against transformers bf16 "
         "(the fixture's goldens); llama.cpp recorded by `tools/reference/record_llamacpp_greedy.py` (f32 KV, "
         "1 thread); the Q8_0 GGUF holds the same Q8_0 blocks as our q8_0 pack (encoders bit-exact).\n",
         "| engine, weights | top-1 = transformers bf16 | max abs logit err | max rel err | greedy = bf16 (mean / min of 64) | max abs vs transformers on dequantized Q8_0 |",
         "|---|---:|---:|---:|---:|---:|"]
    for label, ls in rows.items():
        agree = sum(int(np.argmax(x)) == int(np.argmax(b)) for x, b in zip(ls, ref))
        ea = max(float(np.max(np.abs(x - b))) for x, b in zip(ls, ref))
        er = max(float(np.max(np.abs(x - b)) / np.max(np.abs(b))) for x, b in zip(ls, ref))
        ed = max(float(np.max(np.abs(x - d))) for x, d in zip(ls, deq))
        rm = ""
        if label in runs:
            m = [next((i for i, (a, g) in enumerate(zip(r, c["greedy"])) if a != g), 64) for r, c in zip(runs[label], cases)]
            rm = f"{sum(m) / len(m):.1f} / {min(m)}"
        w.append(f"| {label} | {agree}/{len(cases)} | {ea:.4f} | {er:.4f} | {rm or '—'} | {ed:.2g} |")
    return "\n".join(w) + "\n"


def llama_side(exe, bf16_gguf, files, cases, steps, tmp, g4_bf16=None):
    """llama.cpp (libllama through tools/reference/llamacpp_greedy.c, f32 KV, 1 thread) on each GGUF
    against llama.cpp on the bf16 GGUF: its own quantization error, measured the same way."""
    def run(path):
        pre = os.path.join(tmp, "lc-" + os.path.basename(path) + "-")
        inp = "".join(",".join(map(str, ids)) + "\n" for _, ids, _ in cases).encode()
        p = subprocess.run([exe, path, str(steps), "f32", pre], input=inp, capture_output=True, timeout=3600)
        if p.returncode:
            raise SystemExit(f"{exe} {path}: {p.stderr.decode()[-1000:]}")
        gr = [json.loads(ln)["greedy"] for ln in p.stdout.decode().splitlines() if ln.startswith("{")]
        return [np.fromfile(f"{pre}{k}.f32", "<f4") for k in range(len(cases))], gr
    bl, bg = run(bf16_gguf)
    w = [f"*llama.cpp on the same GGUF files* (libllama via `tools/reference/llamacpp_greedy.c`, f32 KV, 1 thread): "
         f"each file against llama.cpp on the bf16 GGUF, at the {len(cases)} prompts' last positions; greedy runs "
         f"of {steps} tokens against llama.cpp's bf16 run.\n",
         "| weights | prompt top-1 | max abs logit err | max rel err | greedy run = bf16 (mean / min) |", "|---|---:|---:|---:|---:|"]
    if g4_bf16 is not None:   # the noise floor: two engines, identical bf16 weights
        ea = max(float(np.max(np.abs(x - b))) for x, b in zip(bl, g4_bf16))
        er = max(float(np.max(np.abs(x - b)) / np.max(np.abs(b))) for x, b in zip(bl, g4_bf16))
        agree = sum(int(np.argmax(x)) == int(np.argmax(b)) for x, b in zip(bl, g4_bf16))
        mm = [next((i for i, (a_, c) in enumerate(zip(x, y)) if a_ != c), steps) for x, (_, _, y) in zip(bg, cases)]
        w.append(f"| bf16 GGUF, llama.cpp vs gemma4c bf16 (same weights) | {agree}/{len(cases)} | {ea:.4f} | {er:.4f} | "
                 f"{sum(mm) / len(mm):.1f} / {min(mm)} of {steps} |")
    for label, path in files:
        ql, qg = run(path)
        agree = sum(int(np.argmax(x)) == int(np.argmax(b)) for x, b in zip(ql, bl))
        ea = max(float(np.max(np.abs(x - b))) for x, b in zip(ql, bl))
        er = max(float(np.max(np.abs(x - b)) / np.max(np.abs(b))) for x, b in zip(ql, bl))
        mm = [next((i for i, (a, c) in enumerate(zip(x, y)) if a != c), steps) for x, y in zip(qg, bg)]
        w.append(f"| {label} | {agree}/{len(cases)} | {ea:.4f} | {er:.4f} | {sum(mm) / len(mm):.1f} / {min(mm)} of {steps} |")
    return "\n".join(w) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "build" / "gemma4c"))
    ap.add_argument("--fixtures", nargs="*", default=["g4-cond-tiny", "g4-causal-tiny"])
    ap.add_argument("--fixture-steps", type=int, default=64)
    ap.add_argument("--dtypes", nargs="+", default=list(DTYPES))
    ap.add_argument("--bench-model", default=None, help="a bigger HF checkpoint, e.g. /tmp/g4-bench")
    ap.add_argument("--bench-steps", type=int, default=8)
    ap.add_argument("--bench-prompts", type=int, default=4)
    ap.add_argument("--bench-packs", default=None, help="directory with (or for) its packs NAME-DTYPE.g4c")
    ap.add_argument("--extra", action="append", default=[],
                    help="LABEL=MODEL_DIR=FILE: also compare FILE (e.g. a llama.cpp GGUF) with MODEL_DIR's bf16")
    ap.add_argument("--bench-deq-control", action="store_true",
                    help="also the f32-dequantized control for --bench-model (writes 4 bytes per weight per dtype)")
    ap.add_argument("--llama-greedy", default=None,
                    help="llamacpp_greedy executable: also run llama.cpp on the --bench-model's .gguf extras")
    ap.add_argument("--llama-bf16-gguf", default=None, help="the bf16 GGUF llama.cpp's runs are compared with")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--act-q8", action="store_true",
                    help="also every quantized variant run with --act-q8 (int8 activations), labelled '+act-q8'")
    ap.add_argument("--json", default=None)
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    tmp = a.workdir or tempfile.mkdtemp(prefix="g4-quant-acc-")
    os.makedirs(tmp, exist_ok=True)
    models = [(f, str(ROOT / "tests" / "fixtures" / f), a.fixture_steps, None, tmp) for f in a.fixtures]
    if a.bench_model:
        models.append((os.path.basename(a.bench_model.rstrip("/")), a.bench_model, a.bench_steps, a.bench_prompts,
                       a.bench_packs or tmp))
    extras = {}
    for e in a.extra:
        label, mdir, path = e.split("=", 2)
        extras.setdefault(os.path.abspath(mdir.rstrip("/")), []).append((label, path))
    allres, out = {}, []
    out.append(f"gemma4c `{a.bin}`, `logits`/`run` at --threads {a.threads}; packs by `gemma4c pack --dtype D` "
               f"(tp 1). Generated by `bench/quant_accuracy.py`.\n")
    for name, mdir, steps, nprom, pdir in models:
        log(f"{name}: packing {', '.join(a.dtypes)}")
        variants, notes = [], ""
        for d in a.dtypes:
            p = os.path.join(pdir, f"{name}-{d}.g4c")
            if not os.path.exists(p) or os.path.getmtime(p) < os.path.getmtime(a.bin):
                g4(a.bin, "pack", "-m", mdir, "-o", p, "--dtype", d)
            variants.append((f"pack {d}", p))
            if d == "q4_k":
                q4k, fb, desc, q4desc = q4k_fallbacks(p)
                notes += (f" q4_k pack: {len(q4k)} matrices Q4_K ({q4desc or 'none'}); {len(fb)} fall back"
                          + (f" (width not a multiple of 256): {desc}." if fb else "."))
        variants += extras.get(os.path.abspath(mdir.rstrip("/")), [])
        if a.act_q8:
            variants += [(f"{lb} +act-q8", f"{p}#act-q8") for lb, p in list(variants)]
        res, cases = evaluate(a.bin, mdir, variants, steps, a.threads, tmp, nprom, log,
                              deq_control=True if nprom is None else ("cleanup" if a.bench_deq_control else False))
        for label, p in variants:
            res[label]["file_mb"] = os.path.getsize(mode(p)[0]) / 1e6
        allres[name] = {"steps": steps, "cases": [c[0] for c in cases], **res}
        out.append(table(name, res, steps, cases, notes))
        if nprom is None and "q8_0" in a.dtypes:
            out.append(fixture_crosschecks(a.bin, name, os.path.join(pdir, f"{name}-q8_0.g4c"), tmp, a.threads))
        if nprom is not None and a.llama_greedy and a.llama_bf16_gguf:
            ggufs = [(lb, p) for lb, p in variants if p.endswith(".gguf") and
                     os.path.realpath(p) != os.path.realpath(a.llama_bf16_gguf)]
            log(f"{name}: llama.cpp on {len(ggufs)} GGUF files")
            g4b = [logits(a.bin, mdir, ids, tmp, a.threads) for _, ids, _ in cases]
            out.append(llama_side(a.llama_greedy, a.llama_bf16_gguf, ggufs, cases, steps, tmp, g4b))
    print("\n".join(out))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(allres, indent=1) + "\n")


if __name__ == "__main__":
    main()
