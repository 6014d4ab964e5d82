#!/usr/bin/env python3
"""Rebuild a weights file (safetensors or GGUF) from its head and its size, for speed runs on a
machine the checkpoint cannot travel to (e.g. one reached by copying 64 MiB; the bench model is
2 GB). The head — every byte before the tensor data: format header, metadata, tensor table — is
kept as written by transformers / llama.cpp's converter; the tensor bytes are a 32 MiB block of
random bf16 N(0, 0.02) values repeated to the full size. The numbers are not the model's (speed
only: no NaN, Inf or subnormals; a GGUF's f32 tensors read two such bf16 halves, also finite).

  synth_weights.py head HEAD_OUT FILE      writes FILE's head to HEAD_OUT, its size to HEAD_OUT.size
  synth_weights.py fill HEAD OUT           writes OUT: HEAD, then random bytes up to HEAD.size

The head ends where the tensor data starts: safetensors 8 + its header length; GGUF the data
offset that gguf-py's GGUFReader reports (needs the gguf package: llama.cpp's gguf-py)."""

import os
import struct
import sys

BLOCK = 32 << 20


def head_length(path: str) -> int:
    with open(path, "rb") as f:
        magic = f.read(8)
    if magic[:4] == b"GGUF":
        from gguf import GGUFReader
        return GGUFReader(path).data_offset
    return 8 + struct.unpack("<Q", magic)[0]


def cut_head(head_out: str, path: str) -> None:
    n = head_length(path)
    with open(path, "rb") as f, open(head_out, "wb") as g:
        g.write(f.read(n))
    with open(head_out + ".size", "w") as g:
        g.write(f"{os.path.getsize(path)}\n")
    print(f"{head_out}: {n} bytes of head, file {os.path.getsize(path)} bytes")


def fill(head: str, out: str) -> None:
    import numpy as np
    total = int(open(head + ".size").read())
    x = np.random.default_rng(4004).normal(0.0, 0.02, BLOCK // 2).astype(np.float32)
    block = (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    with open(head, "rb") as f:
        data = f.read()
    with open(out, "wb") as g:
        g.write(data)
        left = total - len(data)
        while left > 0:
            g.write(block[:min(left, BLOCK)])
            left -= BLOCK
    print(f"{out}: {total} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("head", "fill"):
        sys.exit(__doc__)
    (cut_head if sys.argv[1] == "head" else fill)(sys.argv[2], sys.argv[3])
