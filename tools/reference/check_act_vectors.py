#!/usr/bin/env python3
"""Cross-checks tests/fixtures/quant/act_Q8_0_ref.blocks (ggml's quantize_row_q8_0_ref, written by
ggml_act_vectors.c) against the `gguf` package's own numpy Q8_0 quantizer (PyPI) on act_in.f32.

usage: "$G4_REF_PY" tools/reference/check_act_vectors.py
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

Q = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/fixtures/quant")
x = np.fromfile(os.path.join(Q, "act_in.f32"), dtype="<f4").reshape(-1, 512)
want = np.fromfile(os.path.join(Q, "act_Q8_0_ref.blocks"), dtype=np.uint8)
got = quantize(x, T.Q8_0).reshape(-1)
same = np.array_equal(got, want)
print(f"gguf-py Q8_0 == ggml quantize_row_q8_0_ref on {x.size} floats: {same}")
sys.exit(0 if same else 1)
