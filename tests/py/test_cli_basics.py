"""The CLI's top-level contract: help exits 0, an unknown command exits 2 with a message, every
subcommand's --help / -h prints its usage on stdout and exits 0, --version names the release."""
import re

import pytest

from conftest import run_g4

SUBCOMMANDS = ["run", "logits", "tokenize", "detokenize", "template", "serve", "bench", "pack", "chat"]


def test_help(g4_bin):
    r = run_g4(g4_bin, "--help")
    assert r.returncode == 0 and b"usage: gemma4c" in r.stdout
    for cmd in SUBCOMMANDS:   # the top-level help lists every subcommand
        assert re.search(rb"^  %s " % cmd.encode(), r.stdout, re.M), cmd


def test_unknown_command(g4_bin):
    r = run_g4(g4_bin, "frobnicate")
    assert r.returncode == 2 and b"unknown command 'frobnicate'" in r.stderr


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_subcommand_help(g4_bin, cmd, flag):
    r = run_g4(g4_bin, cmd, flag)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.startswith(b"usage: gemma4c " + cmd.encode()), r.stdout[:200]
    assert r.stderr == b""


@pytest.mark.parametrize("cmd", ["run", "logits", "bench", "serve", "chat"])
def test_model_options_in_help(g4_bin, cmd):
    """The commands that load a model document the shared model options, measuring knobs included."""
    out = run_g4(g4_bin, cmd, "--help").stdout.decode()
    for opt in ("--threads", "--ctx", "--prefill-chunk", "--tp", "--no-mmap", "--numerics", "--prefill-bf16",
                "--amx-pairs-rows", "--amx-gemv-rows", "--amx-gemv1-k-below", "--profile"):
        assert opt in out, (cmd, opt)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(g4_bin, flag):
    r = run_g4(g4_bin, flag)
    assert r.returncode == 0, r.stderr
    # "gemma4c 0.1.0", and the commit it was built from where git could say
    assert re.fullmatch(rb"gemma4c \d+\.\d+\.\d+( \([0-9a-f]{4,40}\))?\n", r.stdout), r.stdout
