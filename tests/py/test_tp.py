"""Tensor parallelism (MODEL.md's recipe): --tp 2 and 4 over the threads backend and --tp 2 over
MPI give the greedy tokens of the transformers goldens, logits within 1e-5 relative of --tp 1 and
within 1e-4 of the goldens; the MPI and threads backends sum partials in the same rank order, so
their logits are bit-identical. Sizes that cannot be split are refused with exit 2.
The MPI tests need mpirun (Debian's openmpi-bin); CI sets G4_REQUIRE_MPI=1 so they cannot skip."""
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
import requests

from conftest import FIXTURES, fixture_cases, run_g4

TP_REL_TOL = 1e-5     # TP=N vs TP=1: only the order of the all-reduce sums differs
GOLDEN_REL_TOL = 1e-4
MPIRUN = shutil.which("mpirun")
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def _text_config(d):
    c = json.loads((d / "config.json").read_text())
    return c.get("text_config", c)


def _valid_tp(d, tp):
    """The shard plan's rule (src/parallel/tp_plan.c), to pick the sizes each fixture allows."""
    t = _text_config(d)
    heads, inter = t["num_attention_heads"], t["intermediate_size"]
    kvs = {t["num_key_value_heads"], t.get("num_global_key_value_heads") or t["num_key_value_heads"]}
    kvs |= {v.get("num_key_value_heads", t["num_key_value_heads"]) for v in (t.get("per_layer_config") or {}).values()}
    return heads % tp == 0 and inter % tp == 0 and all(k % tp == 0 or tp % k == 0 for k in kvs)


CASES = [(d, c) for d, c in fixture_cases("goldens.json") if (d / "config.json").exists()]
TP_CASES = [(d, c, tp) for d, c in CASES for tp in (2, 4) if _valid_tp(d, tp)]
TP_IDS = [f"{d.name}:{c['name']}:tp{tp}" for d, c, tp in TP_CASES]


def need_mpi():
    if os.environ.get("G4_ASAN"):
        pytest.skip("OpenMPI's own allocations trip LeakSanitizer; the MPI path runs in the plain build")
    if MPIRUN:
        return
    if os.environ.get("G4_REQUIRE_MPI"):
        pytest.fail("G4_REQUIRE_MPI is set but mpirun is not installed")
    pytest.skip("mpirun not installed")


def mpi_g4(g4_bin, n, *args, timeout=300):
    return subprocess.run([MPIRUN, "-np", str(n), g4_bin, *map(str, args)], capture_output=True,
                          timeout=timeout, env={**os.environ, **MPI_ENV})


def logits(g4_bin, tmp_path, fixture, case, tp, mpi=False, chunk=7):
    out = tmp_path / f"logits_tp{tp}_{'mpi' if mpi else 'thr'}.f32"
    args = ["logits", "-m", fixture, "--prompt-ids", ",".join(map(str, case["prompt_ids"])), "-o", out,
            "--prefill-chunk", chunk, "--ctx", 512, "--tp", tp]
    r = mpi_g4(g4_bin, tp, *args, "--tp-backend", "mpi") if mpi else run_g4(g4_bin, *args)
    assert r.returncode == 0, r.stderr.decode()
    return np.fromfile(out, dtype="<f4")


def greedy(g4_bin, fixture, case, tp, mpi=False):
    args = ["run", "-m", fixture, "--prompt-ids", ",".join(map(str, case["prompt_ids"])), "-n", len(case["greedy"]),
            "--ids", "--ignore-eos", "--ctx", 512, "--tp", tp]
    r = mpi_g4(g4_bin, tp, *args, "--tp-backend", "mpi") if mpi else run_g4(g4_bin, *args)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_some_fixture_allows_tp4():
    assert any(tp == 4 for _, _, tp in TP_CASES), "no fixture can be split 4 ways: TP=4 would go untested"


@pytest.mark.parametrize("fixture,case,tp", TP_CASES, ids=TP_IDS)
def test_threads_logits_match_tp1_and_goldens(g4_bin, tmp_path, fixture, case, tp):
    one = logits(g4_bin, tmp_path, fixture, case, 1)
    got = logits(g4_bin, tmp_path, fixture, case, tp)
    want = np.fromfile(fixture / case["logits_file"], dtype="<f4")
    assert got.shape == one.shape == want.shape
    assert rel(got, one) <= TP_REL_TOL, f"TP={tp} vs TP=1: max relative logit error {rel(got, one):.3g}"
    assert rel(got, want) <= GOLDEN_REL_TOL
    assert int(np.argmax(got)) == int(np.argmax(want))


@pytest.mark.parametrize("fixture,case,tp", TP_CASES, ids=TP_IDS)
def test_threads_greedy_matches_goldens(g4_bin, fixture, case, tp):
    assert greedy(g4_bin, fixture, case, tp) == case["greedy"]


MPI_CASES = [(d, c) for d, c in CASES if c["name"] in ("chunk_cross", "text") and _valid_tp(d, 2)]


@pytest.mark.parametrize("fixture,case", MPI_CASES, ids=[f"{d.name}:{c['name']}" for d, c in MPI_CASES])
def test_mpi_two_ranks(g4_bin, tmp_path, fixture, case):
    need_mpi()
    assert greedy(g4_bin, fixture, case, 2, mpi=True) == case["greedy"]
    got = logits(g4_bin, tmp_path, fixture, case, 2, mpi=True)
    thr = logits(g4_bin, tmp_path, fixture, case, 2)
    want = np.fromfile(fixture / case["logits_file"], dtype="<f4")
    assert rel(got, want) <= GOLDEN_REL_TOL
    assert np.array_equal(got, thr), "MPI and threads backends should sum in the same order"


def test_tp_that_does_not_divide_is_refused(g4_bin):
    r = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-cond-tiny", "--prompt-ids", "2,3", "--tp", "3")
    assert r.returncode == 2
    assert b"--tp 3 does not divide the 8 attention heads" in r.stderr
    r = run_g4(g4_bin, "bench", "-m", FIXTURES / "g4-cond-tiny", "--tp", "16", "--no-peaks")
    assert r.returncode == 2 and b"does not divide" in r.stderr
    r = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-cond-tiny", "--prompt-ids", "2", "--tp-backend", "nccl")
    assert r.returncode == 2 and b"--tp-backend expects 'threads' or 'mpi'" in r.stderr
    r = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-cond-tiny", "--prompt-ids", "2", "--tp", "0")
    assert r.returncode == 2


def test_mpi_size_mismatch_is_refused(g4_bin):
    need_mpi()
    r = mpi_g4(g4_bin, 2, "run", "-m", FIXTURES / "g4-cond-tiny", "--prompt-ids", "2,3", "--tp", "4",
               "--tp-backend", "mpi", timeout=60)
    assert r.returncode != 0
    assert b"--tp 4 but mpirun started 2 processes" in r.stderr


def test_sampling_gathers_the_vocabulary(g4_bin):
    """Sampling needs every logit: the gathered vocabulary must give TP=1's seeded draws."""
    args = ["run", "-m", FIXTURES / "g4-cond-tiny", "--prompt-ids", "2,10,20", "-n", 24, "--ids",
            "--ignore-eos", "--temp", "0.9", "--top-k", "40", "--seed", "7"]
    one = run_g4(g4_bin, *args)
    two = run_g4(g4_bin, *args, "--tp", "2")
    assert one.returncode == 0 and two.returncode == 0, two.stderr.decode()
    assert json.loads(one.stdout) == json.loads(two.stdout)


# ------------------------------------------------------------------ serve


def _serve(cmd, env=None):
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    log, port = [], []
    got = threading.Event()

    def drain():
        for line in p.stderr:
            log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                port.append(int(m.group(1)))
                got.set()
        got.set()

    threading.Thread(target=drain, daemon=True).start()
    assert got.wait(60) and port, "server did not start: " + "".join(log)
    url = f"http://127.0.0.1:{port[0]}"
    t0 = time.time()
    while time.time() - t0 < 60:
        try:
            if requests.get(url + "/health", timeout=2).status_code == 200:
                return p, url, log
        except requests.ConnectionError:
            pass
        time.sleep(0.05)
    p.kill()
    raise AssertionError("server never became ready: " + "".join(log))


def _completion_ids(url, prompt, n):
    r = requests.post(url + "/v1/completions", json={"model": "g4-cond-tiny", "prompt": prompt, "max_tokens": n,
                                                    "temperature": 0, "ignore_eos": True, "return_token_ids": True},
                      timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("backend", ["threads", "mpi"])
def test_serve_with_tp2_matches_cli(g4_bin, backend):
    model = FIXTURES / "g4-cond-tiny"
    prompt = [2, 10, 20, 30, 40]
    want = greedy(g4_bin, model, {"prompt_ids": prompt, "greedy": [0] * 16}, 1)
    args = [g4_bin, "serve", "-m", str(model), "--port", "0", "--ctx", "256", "--parallel", "2", "--tp", "2",
            "--tp-backend", backend]
    if backend == "mpi":
        need_mpi()
        args = [MPIRUN, "-np", "2", *args]
    p, url, log = _serve(args, MPI_ENV if backend == "mpi" else None)
    try:
        body = _completion_ids(url, prompt, 16)
        choice = body["choices"][0]
        got = choice.get("token_ids") or body.get("token_ids")
        assert got == want, f"{got} != {want}\n" + "".join(log)
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(60)
    # mpirun reports a job it forwarded SIGTERM to as failed; rank 0 must still drain and stop
    assert rc == 0 or (backend == "mpi" and any("gemma4c serve: stopped" in line for line in log)), "".join(log)


def _mpi_rank_pids(launcher_pid):
    """{rank: pid} of the processes mpirun started (found by OMPI_COMM_WORLD_RANK in their
    environment, among the launcher's descendants)."""
    kids, ranks = {}, {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    todo = list(kids.get(launcher_pid, []))
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                ranks[int(kv.split(b"=", 1)[1])] = pid
    return ranks


def _serve_mpi2(g4_bin, *extra):
    need_mpi()
    args = [MPIRUN, "-np", "2", g4_bin, "serve", "-m", str(FIXTURES / "g4-cond-tiny"), "--port", "0", "--ctx", "4096",
            "--tp", "2", "--tp-backend", "mpi", *map(str, extra)]
    p, url, log = _serve(args, MPI_ENV)
    ranks = {}
    for _ in range(100):
        ranks = _mpi_rank_pids(p.pid)
        if len(ranks) == 2:
            break
        time.sleep(0.05)
    assert len(ranks) == 2, ranks
    return p, url, log, ranks


def _end_mpi(p, ranks):
    """SIGTERM to the job; a stopped rank is resumed so it can be ended too. The exit code."""
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(60)
    finally:
        for pid in ranks.values():
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        if p.poll() is None:
            p.kill()


TP_TIMEOUT = 2


def test_mpi_stopped_rank_fails_the_stream_and_health(g4_bin):
    """A rank stopped (SIGSTOP, not dead) in the middle of a stream: the stream ends with a 503
    error event within --tp-timeout (plus slack for a loaded host), /health turns 503 naming the
    reason, every later request is a 503 at once, and SIGTERM still ends the whole job."""
    p, url, log, ranks = _serve_mpi2(g4_bin, "--tp-timeout", TP_TIMEOUT)
    try:
        assert requests.get(url + "/health", timeout=5).json() == {"status": "ok"}
        body = {"model": "g4-cond-tiny", "prompt": [2, 10, 20], "max_tokens": 3500, "temperature": 0, "ignore_eos": True,
                "stream": True}
        with requests.post(url + "/v1/completions", json=body, stream=True, timeout=60) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            n_before = 0
            for line in lines:
                if line.startswith(b"data: {"):
                    n_before += 1
                    if n_before == 5:
                        break
            os.kill(ranks[1], signal.SIGSTOP)
            t0 = time.time()
            events = [line for line in lines if line.startswith(b"data: ")]
            took = time.time() - t0
        errors = [json.loads(e[6:]) for e in events if e.startswith(b"data: {\"error\"")]
        assert errors, events[-3:]
        assert errors[-1]["error"]["code"] == "tp_group_lost", errors[-1]
        assert took < TP_TIMEOUT + 8, took
        h = requests.get(url + "/health", timeout=5)
        assert h.status_code == 503 and h.json()["status"] == "failed", h.text
        assert "--tp-timeout" in h.json()["error"] and "rank 1" in h.json()["error"], h.text
        t0 = time.time()
        r = requests.post(url + "/v1/completions", json={"model": "g4-cond-tiny", "prompt": "hi", "max_tokens": 4}, timeout=30)
        assert r.status_code == 503 and r.json()["error"]["code"] == "tp_group_lost", r.text
        assert time.time() - t0 < 1.5
    finally:
        rc = _end_mpi(p, ranks)
    # the job ended (not hung in MPI_Finalize waiting for the stopped rank), and as a failure
    assert rc != 0, "".join(log)


def test_mpi_rank_stopped_while_idle_turns_health_503(g4_bin):
    """No request at all: the idle heartbeat (every 5 s) notices the stopped rank."""
    p, url, log, ranks = _serve_mpi2(g4_bin, "--tp-timeout", TP_TIMEOUT)
    try:
        os.kill(ranks[1], signal.SIGSTOP)
        t0, status = time.time(), 200
        while time.time() - t0 < 5 + TP_TIMEOUT + 10 and status == 200:
            time.sleep(0.2)
            status = requests.get(url + "/health", timeout=5).status_code
        assert status == 503, "".join(log)
        assert time.time() - t0 < 5 + TP_TIMEOUT + 8
        assert p.poll() is None   # it stays up to say so
    finally:
        _end_mpi(p, ranks)


def test_mpi_exit_on_tp_loss_ends_the_job(g4_bin):
    """--exit-on-tp-loss: the lost group ends the whole job by itself (status != 0)."""
    p, url, log, ranks = _serve_mpi2(g4_bin, "--tp-timeout", TP_TIMEOUT, "--exit-on-tp-loss")
    try:
        os.kill(ranks[1], signal.SIGSTOP)
        t0 = time.time()
        rc = p.wait(5 + TP_TIMEOUT + 20)
        assert rc != 0 and time.time() - t0 < 5 + TP_TIMEOUT + 15, "".join(log)
    finally:
        _end_mpi(p, ranks)


def test_tp_timeout_is_validated(g4_bin):
    r = run_g4(g4_bin, "run", "-m", FIXTURES / "g4-cond-tiny", "--prompt-ids", "2", "--tp-timeout", "-1")
    assert r.returncode == 2 and b"--tp-timeout" in r.stderr, r.stderr


# ------------------------------------------------------------------ packs


@pytest.fixture(scope="module")
def pack_tp2(g4_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("pack") / "cond-tp2.g4c"
    r = run_g4(g4_bin, "pack", "-m", FIXTURES / "g4-cond-tiny", "-o", out, "--tp", "2")
    assert r.returncode == 0, r.stderr.decode()
    return out


def test_pack_tp2_runs_on_both_backends(g4_bin, tmp_path, pack_tp2):
    fixture = FIXTURES / "g4-cond-tiny"
    case = next(c for d, c in CASES if d == fixture and c["name"] == "chunk_cross")
    # --tp unset: the pack's own size
    assert greedy(g4_bin, pack_tp2, case, 2) == case["greedy"]
    args = ["run", "-m", pack_tp2, "--prompt-ids", ",".join(map(str, case["prompt_ids"])), "-n", 8, "--ids", "--ignore-eos"]
    r = run_g4(g4_bin, *args)
    assert r.returncode == 0 and json.loads(r.stdout) == case["greedy"][:8], r.stderr.decode()
    got = logits(g4_bin, tmp_path, pack_tp2, case, 2)
    assert np.array_equal(got, logits(g4_bin, tmp_path, fixture, case, 2)), "pack and directory shards differ"
    if MPIRUN and not os.environ.get("G4_ASAN"):
        assert greedy(g4_bin, pack_tp2, case, 2, mpi=True) == case["greedy"]


def test_pack_for_tp2_refuses_tp4(g4_bin, pack_tp2):
    r = run_g4(g4_bin, "run", "-m", pack_tp2, "--prompt-ids", "2,3", "--tp", "4")
    assert r.returncode == 2
    assert b"was packed for --tp 2; it cannot be loaded with --tp 4" in r.stderr


def test_corrupt_pack_is_refused(g4_bin, tmp_path, pack_tp2):
    data = bytearray(pack_tp2.read_bytes())
    bad = tmp_path / "bad.g4c"
    data[len(data) - 4096] ^= 0x5A   # inside rank 1's segment: only its checksum can tell
    bad.write_bytes(bytes(data))
    r = run_g4(g4_bin, "run", "-m", bad, "--prompt-ids", "2,3", "-n", 2)
    assert r.returncode == 2 and b"bad.g4c" in r.stderr and b"crc" in r.stderr.lower(), r.stderr
    short = tmp_path / "short.g4c"
    short.write_bytes(bytes(data[: len(data) // 2]))
    r = run_g4(g4_bin, "run", "-m", short, "--prompt-ids", "2,3", "-n", 2)
    assert r.returncode == 2 and b"truncated" in r.stderr, r.stderr


# ------------------------------------------------------------------ --no-mmap


@pytest.mark.parametrize("source", ["dir", "pack", "gguf"])
@pytest.mark.parametrize("tp", [1, 2])
def test_no_mmap_copies_give_identical_logits(g4_bin, tmp_path, pack_tp2, source, tp):
    """--no-mmap copies the weights (whole, or this rank's slices) into huge-page memory; the
    arithmetic must not change by a bit."""
    model = {"dir": FIXTURES / "g4-cond-tiny", "pack": pack_tp2,
             "gguf": FIXTURES / "g4-gguf" / "cond-q8_0.gguf"}[source]
    if source == "pack" and tp != 2:
        pytest.skip("the pack is made for --tp 2")
    args = ["logits", "-m", model, "--prompt-ids", "2,10,20,30,40,50,60,70", "--tp", tp, "--prefill-chunk", 3]
    a, b = tmp_path / "mmap.f32", tmp_path / "copy.f32"
    r1 = run_g4(g4_bin, *args, "-o", a)
    r2 = run_g4(g4_bin, *args, "-o", b, "--no-mmap")
    assert r1.returncode == 0 and r2.returncode == 0, r2.stderr.decode()
    assert np.array_equal(np.fromfile(a, "<f4"), np.fromfile(b, "<f4"))
