"""A GGUF vocabulary is read in time linear in its bytes: the merges of a sentencepiece ("llama")
vocabulary come from splitting every piece at every point, which must not cost the square of a
piece's length (a crafted file with one 100,000-byte token took seconds; 400,000 bytes would take
minutes). The file is written here, a minimal GGUF with no tensors."""
import struct

from conftest import run_g4


def _s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def _gguf(tokens):
    kvs = [_s("general.architecture") + struct.pack("<I", 8) + _s("gemma3"),
           _s("tokenizer.ggml.model") + struct.pack("<I", 8) + _s("llama"),
           _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens)) + b"".join(_s(t) for t in tokens)]
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)


def test_a_long_piece_loads_in_linear_time(g4_bin, tmp_path):
    letters = [chr(ord("a") + i) for i in range(26)]
    toks = ["<pad>", "<eos>", "<bos>", "<unk>"] + letters + ["ab", "abc", "a" * 400_000, "b" * 399_999 + "c"]
    f = tmp_path / "long.gguf"
    f.write_bytes(_gguf(toks))
    # quadratic splitting takes minutes here; linear, well under a second
    r = run_g4(g4_bin, "tokenize", "-m", f, input=b"abc", timeout=30)
    assert r.returncode == 0, r.stderr.decode()
    # "abc" is piece 31, reached by the merges the split search found: a + b -> ab, ab + c -> abc
    assert r.stdout.strip() == b"[31]"
