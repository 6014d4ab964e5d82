"""The CLI's top-level contract: help exits 0, an unknown command exits 2 with a message."""
from conftest import run_g4


def test_help(g4_bin):
    r = run_g4(g4_bin, "--help")
    assert r.returncode == 0 and b"usage: gemma4c" in r.stdout


def test_unknown_command(g4_bin):
    r = run_g4(g4_bin, "frobnicate")
    assert r.returncode == 2 and b"unknown command 'frobnicate'" in r.stderr
