#!/usr/bin/env python3
"""An independent NumPy implementation of the Gemma 4 unified text forward pass, written from
the model description (../shared/MODEL.md) (not from transformers), reading config.json (either spelling of the
full-layer overrides) and the safetensors files directly. It checks a fixture's goldens: the
last-position logits of every case, and (optionally) the greedy continuations.

If it agrees with the transformers goldens, MODEL.md's description is complete and the goldens
are what that math gives; the C engine can be debugged against this file op by op.

Usage:  python tools/reference/numpy_ref.py tests/fixtures/g4-causal-tiny [--greedy] [--dtype f64]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402


def load_config(d: str) -> dict:
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    tc = cfg.get("text_config", cfg)
    L = tc["num_hidden_layers"]
    types = tc["layer_types"]
    assert len(types) == L
    # Per-layer head_dim / KV heads: per_layer_config map or global_head_dim spelling.
    hd = [tc["head_dim"]] * L
    kvh = [tc["num_key_value_heads"]] * L
    plc = tc.get("per_layer_config")
    if plc is not None:
        for k, v in plc.items():
            hd[int(k)] = v.get("head_dim", hd[int(k)])
            kvh[int(k)] = v.get("num_key_value_heads", kvh[int(k)])
    else:
        for i, t in enumerate(types):
            if t == "full_attention":
                hd[i] = tc.get("global_head_dim", 512)
                if tc.get("attention_k_eq_v") and tc.get("num_global_key_value_heads") is not None:
                    kvh[i] = tc["num_global_key_value_heads"]
    prefix = "model.language_model." if "text_config" in cfg else "model."
    return dict(tc=tc, L=L, types=types, hd=hd, kvh=kvh, prefix=prefix)


def load_weights(d: str, dtype) -> dict:
    from safetensors.numpy import load_file

    import ml_dtypes  # noqa: F401  (bf16 support in numpy, pulled in by safetensors' numpy path)

    w = {}
    for fn in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        for k, v in load_file(fn).items():
            w[k] = v.astype(dtype)
    return w


def load_weights_torchless(d: str, dtype) -> dict:
    """Parse safetensors by hand (bf16 -> f32 by shifting the 16 bits up), no ml_dtypes needed."""
    w = {}
    for fn in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        with open(fn, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            hdr = json.loads(f.read(n))
            data = f.read()
        for k, info in hdr.items():
            if k == "__metadata__":
                continue
            a, b = info["data_offsets"]
            raw = data[a:b]
            if info["dtype"] == "BF16":
                u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
                arr = u.view(np.float32)
            elif info["dtype"] == "F32":
                arr = np.frombuffer(raw, dtype="<f4")
            elif info["dtype"] == "F16":
                arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
            else:
                raise ValueError(f"{fn}: {k}: dtype {info['dtype']}")
            w[k] = arr.reshape(info["shape"]).astype(dtype)
    return w


def rmsnorm(x, w, eps):
    ms = (x * x).mean(-1, keepdims=True) + eps
    y = x * ms ** -0.5
    return y * w if w is not None else y


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def rope_inv_freq(rp: dict, D: int, dtype):
    theta = rp["rope_theta"]
    if rp["rope_type"] == "default":
        n = D // 2
    elif rp["rope_type"] == "proportional":
        n = int(rp.get("partial_rotary_factor", 1.0) * D // 2)
    else:
        raise ValueError(rp)
    inv = np.zeros(D // 2, dtype=np.float64)
    # float32 like the reference: theta ** (arange(0, 2n, 2) / D) computed in f32
    e = (np.arange(0, 2 * n, 2, dtype=np.float32) / np.float32(D)).astype(np.float32)
    inv[:n] = (1.0 / (np.float32(theta) ** e)).astype(np.float32)
    return inv.astype(dtype)


def apply_rope(x, pos, inv, dtype):
    # x [T, H, D]; pairs (i, i + D/2)
    D = x.shape[-1]
    ang = (pos[:, None].astype(np.float32) * inv[None, :].astype(np.float32)).astype(dtype)  # [T, D/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def forward(ids, c, w, dtype, trace=None):
    tc, p = c["tc"], c["prefix"]
    eps = tc["rms_norm_eps"]
    H = tc["hidden_size"]
    nq = tc["num_attention_heads"]
    T = len(ids)
    E = w[p + "embed_tokens.weight"]
    x = E[np.array(ids)] * dtype(np.sqrt(H))
    pos = np.arange(T)
    for i in range(c["L"]):
        lp = f"{p}layers.{i}."
        D, kvh, typ = c["hd"][i], c["kvh"][i], c["types"][i]
        h = rmsnorm(x, w[lp + "input_layernorm.weight"], eps)
        q = (h @ w[lp + "self_attn.q_proj.weight"].T).reshape(T, nq, D)
        k = (h @ w[lp + "self_attn.k_proj.weight"].T).reshape(T, kvh, D)
        vk = lp + "self_attn.v_proj.weight"
        v = (h @ w[vk].T).reshape(T, kvh, D) if vk in w else k.copy()
        inv = rope_inv_freq(tc["rope_parameters"][typ], D, dtype)
        q = apply_rope(rmsnorm(q, w[lp + "self_attn.q_norm.weight"], eps), pos, inv, dtype)
        k = apply_rope(rmsnorm(k, w[lp + "self_attn.k_norm.weight"], eps), pos, inv, dtype)
        v = rmsnorm(v, None, eps)
        grp = nq // kvh
        mask = pos[None, :] <= pos[:, None]
        if typ == "sliding_attention":
            mask &= pos[None, :] > pos[:, None] - tc["sliding_window"]
        o = np.empty((T, nq, D), dtype=dtype)
        for hq in range(nq):
            s = q[:, hq, :] @ k[:, hq // grp, :].T  # scaling 1.0
            s = np.where(mask, s, -np.inf)
            s = s - s.max(-1, keepdims=True)
            pr = np.exp(s)
            pr /= pr.sum(-1, keepdims=True)
            o[:, hq, :] = pr @ v[:, hq // grp, :]
        a = o.reshape(T, nq * D) @ w[lp + "self_attn.o_proj.weight"].T
        x = x + rmsnorm(a, w[lp + "post_attention_layernorm.weight"], eps)
        h2 = rmsnorm(x, w[lp + "pre_feedforward_layernorm.weight"], eps)
        m = (gelu_tanh(h2 @ w[lp + "mlp.gate_proj.weight"].T) * (h2 @ w[lp + "mlp.up_proj.weight"].T)) @ w[
            lp + "mlp.down_proj.weight"].T
        x = x + rmsnorm(m, w[lp + "post_feedforward_layernorm.weight"], eps)
        x = x * w[lp + "layer_scalar"]
        if trace is not None:
            trace.append(x)
    x = rmsnorm(x[-1:], w[p + "norm.weight"], eps)
    logits = (x @ E.T)[0]
    cap = tc.get("final_logit_softcapping")
    return cap * np.tanh(logits / cap) if cap else logits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--greedy", action="store_true", help="also re-run the greedy continuations (slow)")
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    args = ap.parse_args()
    dtype = np.float32 if args.dtype == "f32" else np.float64
    c = load_config(args.dir)
    w = load_weights_torchless(args.dir, dtype)
    with open(os.path.join(args.dir, "goldens.json")) as f:
        g = json.load(f)
    worst = 0.0
    ok = True
    for case in g["cases"]:
        ref = np.fromfile(os.path.join(args.dir, case["logits_file"]), dtype="<f4")
        got = forward(case["prompt_ids"], c, w, dtype)
        rel = float(np.abs(got - ref).max() / np.abs(ref).max())
        worst = max(worst, rel)
        same_top = int(np.argmax(got)) == int(np.argmax(ref))
        line = f"{g['model']}/{case['name']}: n={len(case['prompt_ids'])} max rel err {rel:.2e} argmax {'ok' if same_top else 'DIFFERS'}"
        if args.greedy:
            seq = list(case["prompt_ids"])
            toks = []
            for _ in range(len(case["greedy"])):
                t = int(np.argmax(forward(seq, c, w, dtype)))
                toks.append(t)
                seq.append(t)
            match = sum(1 for a, b in zip(toks, case["greedy"]) if a == b)
            line += f" greedy {match}/{len(case['greedy'])}"
            ok &= toks == case["greedy"]
        ok &= same_top and rel < 1e-4
        print(line, flush=True)
    print(f"{g['model']}: worst max rel err {worst:.2e} -> {'PASS' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
