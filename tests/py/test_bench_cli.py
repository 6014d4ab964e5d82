"""`gemma4c bench` on a fixture: the final JSON line carries every figure docs/benchmarking.md
and the reports under bench/results/ quote — tokens/s per rep, the roofline fractions (against the start-up best read
and against the read made right before each decode rep), the bytes in 2 MiB pages — with values
that are consistent with each other."""
import json

import pytest

from conftest import FIXTURES, run_g4


def test_bench_json(g4_bin):
    r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-p", "8", "-n", "4", "--reps", "3",
               "--threads", "2", "--bw-mib", "64")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "of the bandwidth read just before each rep" in out
    assert "of the fp32 FMA peak measured just before each rep" in out
    j = json.loads(out.strip().splitlines()[-1])
    assert j["machine"]["read_bw_gbs"] > 0
    assert j["model_info"]["huge_page_bytes"] >= -1
    assert j["model_info"]["weights_reread_bytes"] == 0   # a tiny model: below the size that is checked
    pp, tg = j["tests"]
    assert pp["test"] == "pp8" and tg["test"] == "tg4" and tg["kind"] == "decode"
    for t in (pp, tg):
        assert len(t["tok_s_reps"]) == 3 and all(x > 0 for x in t["tok_s_reps"])
        assert sorted(t["tok_s_reps"])[1] == t["tok_s"]
    bws = tg["read_bw_before_reps_gbs"]
    assert len(bws) == 3 and all(b > 0 for b in bws)
    fr = sorted(x * tg["weight_bytes_per_token"] / 1e9 / b for x, b in zip(tg["tok_s_reps"], bws))
    assert abs(tg["roofline_fraction_adjacent"] - fr[1]) <= 1e-4 * fr[1]
    assert abs(tg["roofline_fraction"] - tg["achieved_gbs"] / j["machine"]["read_bw_gbs"]) <= 1e-3 * tg["roofline_fraction"]
    # prefill against the FMA peak measured right before each rep
    peaks = pp["peak_before_reps_gflops"]
    assert len(peaks) == 3 and all(p > 0 for p in peaks)
    fr = sorted(x * pp["flops_per_token"] / 1e9 / p for x, p in zip(pp["tok_s_reps"], peaks))
    assert abs(pp["roofline_fraction_adjacent"] - fr[1]) <= 1e-4 * fr[1]


def test_bench_no_peaks_has_no_fractions(g4_bin):
    r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-p", "4", "-n", "2", "--reps", "1", "--no-peaks")
    assert r.returncode == 0, r.stderr
    for t in json.loads(r.stdout.decode().strip().splitlines()[-1])["tests"]:
        assert t["roofline_fraction"] is None and t["roofline_fraction_adjacent"] is None


def test_bench_takes_the_shared_model_options(g4_bin):
    """bench parses the model options as run / serve do (one parser), measuring knobs included."""
    r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-p", "4", "-n", "2", "--reps", "1", "--no-peaks",
               "--threads", 1, "--prefill-chunk", 2, "--amx-gemv-rows", "2-7", "--amx-pairs-rows", 16,
               "--amx-gemv1-k-below", 0, "--profile")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert j["threads"] == 1 and j["model_info"]["prefill_chunk"] == 2
    r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "--amx-gemv-rows", "9-3")
    assert r.returncode == 2 and b"gemma4c bench: --amx-gemv-rows expects" in r.stderr


def test_bench_kernels_json(g4_bin):
    """--kernels: every group at T = 1 and T = chunk; the decode sweeps (T = 1) carry a plain read
    of the same bytes made on the same threads and the kernel's ratio to it, the prefill ones not.
    (The tiny fixture sits in cache, so the figures themselves mean nothing here.)"""
    r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-p", "0", "-n", "0", "--reps", "3",
               "--threads", "2", "--bw-mib", "64", "--prefill-chunk", "8", "--kernels")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "of a plain read of the same bytes" in out
    ks = json.loads(out.strip().splitlines()[-1])["kernels_only"]
    groups = ["qkv", "o", "gateup", "down", "lm_head"]
    assert [(k["group"], k["T"]) for k in ks] == [(g, 1) for g in groups + ["decode"]] + [(g, 8) for g in groups[:4]]
    # decode: every matmul of a step in its order (4 per layer, then the LM head), so its bytes are
    # the five groups' together
    one = {k["group"]: k for k in ks if k["T"] == 1}
    n_layers = one["qkv"]["calls"]
    assert one["decode"]["calls"] == 4 * n_layers + 1
    gb = lambda k: k["gbs"] * k["seconds"]
    assert gb(one["decode"]) == pytest.approx(sum(gb(one[g]) for g in groups), rel=1e-4)
    for k in ks:
        assert k["seconds"] > 0 and k["gbs"] > 0
        if k["T"] == 1:
            assert k["read_same_bytes_gbs"] > 0 and 0 < k["fraction_of_read_same_bytes"] < 100
        else:
            assert k["read_same_bytes_gbs"] is None and k["fraction_of_read_same_bytes"] is None


def test_bench_batch(g4_bin):
    """--batch B: a decode test advances B slots a step (named tgNxB), counts B tokens a step, and
    charges each token 1/B of the step's weight bytes; a batch outside [1, 256] is a usage error."""
    r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-p", "0", "-n", "8", "--reps", "1",
               "--threads", "2", "--no-peaks", "--batch", "3")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert out["batch"] == 3
    (t,) = out["tests"]
    assert t["test"] == "tg8x3" and t["kind"] == "decode"
    step_bytes = out["model_info"]["decode_weight_bytes_per_token"]
    assert t["weight_bytes_per_token"] == pytest.approx(step_bytes / 3, rel=1e-5)   # %.6g in the JSON
    assert t["achieved_gbs"] == pytest.approx(t["tok_s"] * step_bytes / 3 / 1e9, rel=1e-4)
    for bad in ("0", "257", "x"):
        r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-n", "4", "--batch", bad)
        assert r.returncode == 2 and b"--batch" in r.stderr


def test_bench_depth(g4_bin):
    """--depth D: decode tests start at position D (named tgN@dD; every rep prefills D ids into
    each slot first, untimed), their KV reads are those of positions D..D+N-1, and a second
    fraction counts them against the bandwidth too; --ctx must hold D + N."""
    def bench(*extra):
        r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-p", "0", "-n", "4", "--reps", "1",
                   "--threads", "2", "--bw-mib", "64", *extra)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.decode().strip().splitlines()[-1])
    flat, deep = bench(), bench("--depth", "40", "--batch", "2")
    assert flat["depth"] == 0 and deep["depth"] == 40
    (t0,), (t,) = flat["tests"], deep["tests"]
    assert t0["test"] == "tg4" and t["test"] == "tg4x2@d40"
    assert t["kv_bytes_per_token"] > 5 * t0["kv_bytes_per_token"] > 0   # 40+ keys a layer against 0-3
    bw = deep["machine"]["read_bw_gbs"]
    with_kv = t["tok_s"] * (t["weight_bytes_per_token"] + t["kv_bytes_per_token"]) / 1e9 / bw
    assert t["roofline_fraction_with_kv"] == pytest.approx(with_kv, rel=1e-3)
    assert t["roofline_fraction_with_kv"] > t["roofline_fraction"]
    r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-p", "0", "-n", "4", "--depth", "40",
               "--ctx", "43")
    assert r.returncode == 2 and b"--ctx 43 is smaller than the longest test" in r.stderr
    for bad in ("-1", "x"):
        r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-n", "4", "--depth", bad)
        assert r.returncode == 2 and b"--depth" in r.stderr


def test_bench_verify(g4_bin):
    """--verify K,...: a speculative verify step of K + 1 rows against a one-row decode step at
    --depth, alone (-p 0 -n 0): each K's step times and the median ratio of adjacent pairs."""
    r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-p", "0", "-n", "0", "--verify", "1,3",
               "--depth", "40", "--reps", "1", "--no-peaks", "--threads", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "speculative verify at position 40" in out
    j = json.loads(out.strip().splitlines()[-1])
    assert j["tests"] == [] and [v["k"] for v in j["verify"]] == [1, 3]
    for v in j["verify"]:
        assert v["rows"] == v["k"] + 1 and v["step_s"] > 0 and v["decode_step_s"] > 0 and v["ratio"] > 0


@pytest.mark.parametrize("value,message", [("0", "--verify needs at least one K"), ("65", "--verify: K 65 is over 64"),
                                           ("x", "--verify expects")])
def test_bench_verify_bad_values(g4_bin, value, message):
    r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "-p", "0", "-n", "0", "--verify", value)
    assert r.returncode == 2 and message in r.stderr.decode(), r.stderr
