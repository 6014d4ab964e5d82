"""Bad checkpoints and bad prompts: each must give a one-line error naming the file / field /
value at fault and exit code 2 — never a crash. The checkpoints are mutated copies of the
g4-causal-tiny fixture; safetensors files are rewritten by hand (no torch needed)."""
import json
import shutil
import struct

import pytest

from conftest import FIXTURES, run_g4

SRC = FIXTURES / "g4-causal-tiny"


def read_st(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_st(path, header, data):
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


@pytest.fixture
def ckpt(tmp_path):
    d = tmp_path / "ckpt"
    shutil.copytree(SRC, d)
    return d


def expect_error(g4_bin, d, *needles, prompt="2,5,6"):
    r = run_g4(g4_bin, "run", "-m", d, "--prompt-ids", prompt, "-n", 2)
    err = r.stderr.decode()
    assert r.returncode == 2, f"rc={r.returncode} stderr={err}"
    assert err.count("\n") == 1, f"expected one line, got: {err!r}"
    for n in needles:
        assert n in err, f"{n!r} not in {err!r}"
    return err


def test_missing_config_field(g4_bin, ckpt):
    cfg = json.loads((ckpt / "config.json").read_text())
    del cfg["hidden_size"]
    (ckpt / "config.json").write_text(json.dumps(cfg))
    expect_error(g4_bin, ckpt, "config.json", "hidden_size")


def test_config_not_json(g4_bin, ckpt):
    (ckpt / "config.json").write_text("{ nope")
    expect_error(g4_bin, ckpt, "config.json", "invalid JSON")


def test_disagreeing_full_layer_overrides(g4_bin, ckpt):
    cfg = json.loads((ckpt / "config.json").read_text())
    full = [i for i, t in enumerate(cfg["layer_types"]) if t == "full_attention"]
    cfg["per_layer_config"] = {str(i): {"head_dim": 999, "num_key_value_heads": 1} for i in full}
    cfg["global_head_dim"] = 64
    cfg["num_global_key_value_heads"] = 1
    (ckpt / "config.json").write_text(json.dumps(cfg))
    expect_error(g4_bin, ckpt, "per_layer_config", "disagrees")


def test_missing_tensor(g4_bin, ckpt):
    h, data = read_st(ckpt / "model.safetensors")
    name = next(k for k in h if k.endswith("layers.1.mlp.up_proj.weight"))
    del h[name]
    write_st(ckpt / "model.safetensors", h, data)
    expect_error(g4_bin, ckpt, name, "missing")


def test_extra_tensor(g4_bin, ckpt):
    h, data = read_st(ckpt / "model.safetensors")
    k = next(k for k in h if k.endswith("layers.0.input_layernorm.weight"))
    h["model.layers.0.surprise.weight"] = dict(h[k])
    write_st(ckpt / "model.safetensors", h, data)
    expect_error(g4_bin, ckpt, "model.layers.0.surprise.weight", "unexpected")


def test_wrong_shape(g4_bin, ckpt):
    h, data = read_st(ckpt / "model.safetensors")
    name = next(k for k in h if k.endswith("layers.0.mlp.gate_proj.weight"))
    r, c = h[name]["shape"]
    assert r != c
    h[name]["shape"] = [c, r]   # same byte count, transposed shape
    write_st(ckpt / "model.safetensors", h, data)
    expect_error(g4_bin, ckpt, name, "shape")


def test_unknown_dtype(g4_bin, ckpt):
    h, data = read_st(ckpt / "model.safetensors")
    name = next(k for k in h if k.endswith("layers.0.input_layernorm.weight"))
    h[name]["dtype"] = "F8_E4M3"
    write_st(ckpt / "model.safetensors", h, data)
    expect_error(g4_bin, ckpt, name, "F8_E4M3")


def test_truncated_file(g4_bin, ckpt):
    p = ckpt / "model.safetensors"
    raw = p.read_bytes()
    p.write_bytes(raw[: len(raw) - 1000])
    expect_error(g4_bin, ckpt, "model.safetensors", "truncated")


def test_truncated_header(g4_bin, ckpt):
    p = ckpt / "model.safetensors"
    p.write_bytes(p.read_bytes()[:100])
    expect_error(g4_bin, ckpt, "model.safetensors")


def test_lying_offsets(g4_bin, ckpt):
    h, data = read_st(ckpt / "model.safetensors")
    name = next(k for k in h if k.endswith("layers.0.self_attn.k_proj.weight"))
    b, e = h[name]["data_offsets"]
    h[name]["data_offsets"] = [b, e + 2]   # span disagrees with dtype x shape
    write_st(ckpt / "model.safetensors", h, data)
    expect_error(g4_bin, ckpt, name, "data_offsets")
    h[name]["data_offsets"] = [b + 10**12, e + 10**12]   # points past the end
    write_st(ckpt / "model.safetensors", h, data)
    expect_error(g4_bin, ckpt, name, "data_offsets")


def test_huge_header_length(g4_bin, ckpt):
    p = ckpt / "model.safetensors"
    raw = bytearray(p.read_bytes())
    raw[:8] = struct.pack("<Q", 2**62)
    p.write_bytes(bytes(raw))
    expect_error(g4_bin, ckpt, "header length")


def test_not_a_model_dir(g4_bin, tmp_path):
    expect_error(g4_bin, tmp_path, "config.json")


def test_prompt_longer_than_ctx(g4_bin):
    ids = ",".join(["2"] + ["7"] * 40)
    r = run_g4(g4_bin, "run", "-m", SRC, "--prompt-ids", ids, "--ctx", 16, "-n", 1)
    err = r.stderr.decode()
    assert r.returncode == 2 and "41 tokens" in err and "--ctx" in err and err.count("\n") == 1, err


def test_token_id_out_of_vocab(g4_bin):
    r = run_g4(g4_bin, "run", "-m", SRC, "--prompt-ids", "2,999999", "-n", 1)
    assert r.returncode == 2 and b"999999" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--prompt-ids", "2,x"], "--prompt-ids"),
    (["--prompt-ids", "2", "-n", "-3"], "-n"),
    (["--prompt-ids", "2", "--bogus"], "--bogus"),
    (["--prompt-ids", "2", "--threads"], "--threads"),
])
def test_bad_cli_options(g4_bin, args, needle):
    r = run_g4(g4_bin, "run", "-m", SRC, *args)
    assert r.returncode == 2 and needle.encode() in r.stderr


@pytest.mark.parametrize("cmd", ["run", "serve", "chat", "bench"])
def test_missing_model_is_bad_input_everywhere(g4_bin, tmp_path, cmd):
    """A model path that is not there is bad input (exit 2) for every command that loads one."""
    extra = {"run": ["--prompt-ids", "2"], "serve": ["--port", "0"], "chat": [], "bench": ["--no-peaks"]}[cmd]
    r = run_g4(g4_bin, cmd, "-m", tmp_path / "nonexistent", *extra, input=b"", timeout=60)
    assert r.returncode == 2, (cmd, r.stderr)
    assert b"nonexistent: cannot open: No such file or directory" in r.stderr
