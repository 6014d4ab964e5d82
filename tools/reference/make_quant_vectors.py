#!/usr/bin/env python3
"""Writes the quantization test vectors in tests/fixtures/quant/ with the `gguf` package's own
(numpy) quantizers and dequantizers (gguf.quants, PyPI):

  <TYPE>.blocks  raw ggml blocks, ROWS rows of COLS elements
  <TYPE>.f32     gguf.quants.dequantize of those blocks (float32, little-endian) — the C decoder
                 must reproduce these bits exactly
  tiny.gguf      a small GGUF v3 (GGUFWriter) with one metadata key of every value type and one
                 tensor of every supported type, for the reader's tests

Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, BF16, F16 blocks come from gguf.quants.quantize of random floats. gguf-py has
no quantizer for Q4_K / Q5_K / Q6_K / IQ4_XS / Q3_K / Q2_K / IQ4_NL, so their blocks are random bytes with finite, plausible f16 scales
(every bit pattern of the packed scales and quants is exercised), dequantized by gguf-py.

usage: "$G4_REF_PY" tools/reference/make_quant_vectors.py
"""
import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

ROWS, COLS = 4, 512
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/fixtures/quant")


def rand_f16(rng, n, lo, hi):
    return rng.uniform(lo, hi, n).astype(np.float16).view(np.uint8).reshape(n, 2)


def kquant_blocks(rng, qtype, n_blocks):
    if qtype == T.Q4_K:   # d, dmin, scales[12], qs[128]
        return np.concatenate([rand_f16(rng, n_blocks, 1e-4, 2e-2), rand_f16(rng, n_blocks, 1e-4, 2e-2),
                               rng.integers(0, 256, (n_blocks, 12 + 128), dtype=np.uint8)], axis=1)
    if qtype == T.Q5_K:   # d, dmin, scales[12], qh[32], qs[128]
        return np.concatenate([rand_f16(rng, n_blocks, 1e-4, 2e-2), rand_f16(rng, n_blocks, 1e-4, 2e-2),
                               rng.integers(0, 256, (n_blocks, 12 + 32 + 128), dtype=np.uint8)], axis=1)
    if qtype == T.IQ4_XS:   # d, scales_h (u16), scales_l[4], qs[128]
        return np.concatenate([rand_f16(rng, n_blocks, 1e-4, 2e-2),
                               rng.integers(0, 256, (n_blocks, 2 + 4 + 128), dtype=np.uint8)], axis=1)
    if qtype == T.Q6_K:   # ql[128], qh[64], scales[16] (int8), d
        return np.concatenate([rng.integers(0, 256, (n_blocks, 128 + 64 + 16), dtype=np.uint8),
                               rand_f16(rng, n_blocks, -2e-3, 2e-3)], axis=1)
    if qtype == T.Q3_K:   # hmask[32], qs[64], scales[12], d
        return np.concatenate([rng.integers(0, 256, (n_blocks, 32 + 64 + 12), dtype=np.uint8),
                               rand_f16(rng, n_blocks, -2e-3, 2e-3)], axis=1)
    if qtype == T.Q2_K:   # scales[16], qs[64], d, dmin
        return np.concatenate([rng.integers(0, 256, (n_blocks, 16 + 64), dtype=np.uint8),
                               rand_f16(rng, n_blocks, 1e-4, 2e-2), rand_f16(rng, n_blocks, 1e-4, 2e-2)], axis=1)
    if qtype == T.IQ4_NL:   # d, qs[16] (32-weight blocks)
        return np.concatenate([rand_f16(rng, n_blocks, 1e-4, 2e-2),
                               rng.integers(0, 256, (n_blocks, 16), dtype=np.uint8)], axis=1)
    raise ValueError(qtype)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261202)
    tensors = {}
    for qtype in (T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_K, T.Q6_K, T.Q5_K, T.IQ4_XS, T.Q3_K, T.Q2_K, T.IQ4_NL,
                  T.Q4_1, T.Q5_1):
        if qtype in (T.Q4_K, T.Q6_K, T.Q5_K, T.IQ4_XS, T.Q3_K, T.Q2_K, T.IQ4_NL):
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            raw = kquant_blocks(rng, qtype, ROWS * COLS // block).reshape(ROWS, COLS // block * size)
        else:
            x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
            x[0, :32] = 0.0                      # an all-zero block (d = 0)
            x[1, 40] = 9.0                       # an outlier
            raw = quantize(x, qtype)
        deq = dequantize(raw, qtype).astype(np.float32)
        assert deq.shape == (ROWS, COLS), deq.shape
        raw.tofile(os.path.join(OUT, f"{qtype.name}.blocks"))
        deq.astype("<f4").tofile(os.path.join(OUT, f"{qtype.name}.f32"))
        tensors[qtype] = raw

    w = gguf.GGUFWriter(os.path.join(OUT, "tiny.gguf"), arch="tiny")
    w.add_uint8("t.u8", 200); w.add_int8("t.i8", -100); w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000); w.add_uint32("t.u32", 4000000000); w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.25); w.add_bool("t.bool", True); w.add_string("t.str", "héllo")
    w.add_uint64("t.u64", 1 << 40); w.add_int64("t.i64", -(1 << 40)); w.add_float64("t.f64", 1e-300)
    w.add_array("t.arr_str", ["a", "", "ccc"]); w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, 1.5])
    w.add_tensor("f32", np.arange(6, dtype=np.float32).reshape(2, 3))
    for qtype, raw in tensors.items():
        w.add_tensor(qtype.name.lower(), raw, raw_dtype=qtype)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    print("wrote", OUT)


if __name__ == "__main__":
    main()
