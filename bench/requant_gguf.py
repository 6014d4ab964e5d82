#!/usr/bin/env python3
"""Re-encodes the weight matrices of a GGUF file: dequantizes every tensor with the `gguf` package
(PyPI; its dequantizers are ggml's block formats) and writes a copy in which each 2-D tensor is
F32 (the exact reference: the same values the quantized file decodes to), BF16 (those values rounded
to nearest even: the dtype the CPU's bf16 units multiply) or re-quantized with the `gguf` package's
own quantizer (Q8_0, Q4_0 — ggml's reference rounding). 1-D tensors (norms) stay
as they are, and so does every metadata key (architecture, tokenizer, chat template).

Used by bench/quant_accuracy_real.py to measure quantization on a real trained model (Google's
Gemma 3 270M, shipped only as Q4_K_M): its F32 decode is the reference, Q8_0/Q4_0 re-encodings are
compared with it. bench/speculate.py times speculative decoding on its BF16 copy.

usage: requant_gguf.py IN.gguf OUT.gguf --type f32|bf16|q8_0|q4_0 [--keep-embedding]
  --keep-embedding: leave token_embd (Gemma's tied embedding / LM head) as stored, as llama.cpp's
  own Q4_0 recipe keeps its output matrix at higher precision.
"""
import argparse
import sys

import numpy as np
import gguf
from gguf import quants

SKIP_FIELDS = ("GGUF.version", "GGUF.tensor_count", "GGUF.kv_count")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--type", required=True, choices=["f32", "bf16", "q8_0", "q4_0"])
    ap.add_argument("--keep-embedding", action="store_true")
    a = ap.parse_args()
    target = {"f32": gguf.GGMLQuantizationType.F32, "bf16": gguf.GGMLQuantizationType.BF16, "q8_0": gguf.GGMLQuantizationType.Q8_0,
              "q4_0": gguf.GGMLQuantizationType.Q4_0}[a.type]
    r = gguf.GGUFReader(a.src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(a.dst, arch)
    for name, f in r.fields.items():
        if name in SKIP_FIELDS or name == "general.architecture":
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, f.contents(), vtype, sub_type=sub)
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]            # numpy order: rows, cols
        if t.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16,
                             gguf.GGMLQuantizationType.BF16) and len(shape) == 1:
            w.add_tensor(t.name, np.asarray(t.data).astype(np.float32).reshape(shape))
            continue
        if a.keep_embedding and t.name == "token_embd.weight":
            w.add_tensor(t.name, np.asarray(t.data), raw_shape=list(np.asarray(t.data).shape), raw_dtype=t.tensor_type)
            continue
        x = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if len(shape) == 1 or target == gguf.GGMLQuantizationType.F32:
            w.add_tensor(t.name, x)
            continue
        q = quants.quantize(x, target)
        w.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=target)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{a.dst}: {len(r.tensors)} tensors, matrices as {a.type}", file=sys.stderr)


if __name__ == "__main__":
    main()
