#!/usr/bin/env python3
"""Writes the quantizer test vectors of `gemma4c pack` in tests/fixtures/quant/ with the `gguf`
package's own (numpy) encoders, gguf.quants.quantize (PyPI), which mirror ggml's
quantize_row_*_ref bit for bit:

  pack_in.f32          ROWS x COLS float32 inputs (gaussian rows plus edge cases: an all-zero block,
                       exact .5 ties, a negative and a tied +-max, fp16-subnormal scales, outliers)
  pack_<TYPE>.blocks   gguf.quants.quantize(pack_in, TYPE) for Q8_0, Q4_0, F16, BF16 — the C encoders
                       (src/io/quantize.c) must reproduce these bytes exactly

gguf-py has no Q4_K quantizer; test_pack.c checks ours by its round-trip error instead.

usage: "$G4_REF_PY" tools/reference/make_pack_quant_vectors.py
"""
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

ROWS, COLS = 8, 512
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/fixtures/quant")


def main():
    rng = np.random.default_rng(20261203)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x[0, :32] = 0.0                                        # all-zero block: d = 0
    x[0, 32:64] = np.arange(32) - 15.5                      # .5 ties after scaling (Q8_0 d = 16.5/127)
    blk = np.zeros(32, np.float32); blk[0] = 127.0; blk[1:8] = [0.5, 1.5, -2.5, 3.5, -0.5, 126.5, -126.5]
    x[0, 64:96] = blk                                       # Q8_0 d = 1 exactly: round-half-away ties
    x[0, 96:128] = -np.abs(x[0, 96:128]); x[0, 100] = -9.0   # negative max (Q4_0 d > 0)
    x[0, 128:160] = 0.25; x[0, 130] = -4.0; x[0, 140] = 4.0  # +-max tie: the first one wins in Q4_0
    x[1, :64] *= 1e-6                                       # fp16 subnormal scales
    x[1, 64:96] *= 1e-9                                     # scales that underflow to 0
    x[2, 5] = 40.0; x[2, 300] = -55.0                       # outliers
    x[3] *= 0.02                                            # weight-like magnitudes
    x[4, :] = rng.uniform(-1, 1, COLS).astype(np.float32) * np.float32(2.0 ** -14)  # near fp16 min normal
    x[5, :256] = np.float32(65504.0) * rng.uniform(-1, 1, 256).astype(np.float32)   # fp16 range edge
    x.astype("<f4").tofile(os.path.join(OUT, "pack_in.f32"))
    for qtype in (T.Q8_0, T.Q4_0, T.F16, T.BF16):
        q = quantize(x, qtype)
        q.tofile(os.path.join(OUT, f"pack_{qtype.name}.blocks"))
        print(qtype.name, q.shape)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
