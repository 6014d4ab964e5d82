"""Connection limits of `gemma4c serve`: event-driven connections (slow clients and requests
waiting for a slot hold no thread), --max-connections evicting the oldest slow connection,
--timeout for a request's headers and body, --max-connections-per-ip, --queue-timeout (503 with
Retry-After), CORS (--cors-origin, preflight), --max-messages and --max-tools. Loopback only,
each test a few seconds."""
import concurrent.futures as cf
import socket
import subprocess
import threading
import time

import pytest
import requests

from test_server import MODEL, Server

PARTIAL = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


def _open_slow(port, n):
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(PARTIAL)
        out.append(s)
    return out


def _alive(sock):
    """Whether the server still holds the connection (a closed one reads EOF or resets)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b"" and False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def _health_latency(url):
    t0 = time.time()
    r = requests.get(url + "/health", timeout=5)
    return r.status_code, time.time() - t0


def test_slowloris_does_not_lock_out_health(g4_bin):
    """Twice --max-connections clients sending their headers a byte at a time: the oldest are
    evicted to make room, and /health answers within a second throughout."""
    s = Server(g4_bin, "--max-connections", 64, "--timeout", 30)
    socks = []
    try:
        socks = _open_slow(s.port, 128)
        worst = 0.0
        for _ in range(6):
            for k in socks:
                try:
                    k.send(b"X")
                except OSError:
                    pass
            code, dt = _health_latency(s.url)
            assert code == 200
            worst = max(worst, dt)
            time.sleep(0.3)
        assert worst < 1.0, worst
        m = s.metrics()
        assert m['g4_http_connections_closed_total{reason="evicted"}'] >= 64 - 1, m
        assert m["g4_http_connections"] <= 64 + 1
    finally:
        for k in socks:
            k.close()
        assert s.stop() == 0, "".join(s.log)


def test_request_deadline_closes_a_trickling_client(g4_bin):
    """--timeout 2: a client that keeps sending a byte every 0.3 s (never idle) is still closed
    once its request has not arrived in full within 2 s."""
    s = Server(g4_bin, "--timeout", 2)
    try:
        k = _open_slow(s.port, 1)[0]
        t0 = time.time()
        closed_at = None
        while time.time() - t0 < 6:
            try:
                k.send(b"X")
            except OSError:
                closed_at = time.time() - t0
                break
            if not _alive(k):
                closed_at = time.time() - t0
                break
            time.sleep(0.3)
        k.close()
        assert closed_at is not None and 1.5 < closed_at < 5.0, closed_at
        assert s.metrics()['g4_http_connections_closed_total{reason="timeout"}'] >= 1
        assert requests.get(s.url + "/health", timeout=5).status_code == 200
    finally:
        s.stop()


def test_per_ip_connection_limit(g4_bin):
    s = Server(g4_bin, "--max-connections-per-ip", 3)
    try:
        held = [socket.create_connection(("127.0.0.1", s.port), timeout=5) for _ in range(3)]
        # the readiness probes' connections may still count against the address when these arrive,
        # so the server may refuse one of them: replace any it closed until all three are held
        for _ in range(20):
            time.sleep(0.1)
            closed = [i for i, h in enumerate(held) if not _alive(h)]
            if not closed:
                break
            for i in closed:
                held[i].close()
                held[i] = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        assert all(_alive(h) for h in held)
        # a loaded server may not have accepted all three yet: an answered extra connection is
        # only a failure when it is answered every time over a few seconds
        for _ in range(10):
            time.sleep(0.3)
            extra = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                got = extra.recv(100)
            except OSError:
                got = b""
            extra.close()
            if got == b"":
                break
        assert got == b"", got   # refused: closed without an answer
        held.pop().close()
        t0 = time.time()   # room again once the server has seen that close
        while True:
            try:
                assert requests.get(s.url + "/health", timeout=5).status_code == 200
                break
            except requests.ConnectionError:
                assert time.time() - t0 < 5
                time.sleep(0.1)
        for k in held:
            k.close()
    finally:
        s.stop()


def test_waiting_requests_hold_no_thread(g4_bin):
    """One slot, 24 requests at once: they wait suspended (not in a thread each), /health stays
    quick meanwhile, and every one of them is answered."""
    s = Server(g4_bin, "--parallel", 1)
    try:
        body = {"prompt": "hi", "max_tokens": 40, "temperature": 0, "ignore_eos": True}
        with cf.ThreadPoolExecutor(24) as ex:
            futs = [ex.submit(requests.post, s.url + "/v1/completions", json=body, timeout=120) for _ in range(24)]
            time.sleep(0.3)
            code, dt = _health_latency(s.url)
            assert code == 200 and dt < 1.0, dt
            rs = [f.result() for f in futs]
        assert [r.status_code for r in rs] == [200] * 24
        texts = {r.json()["choices"][0]["text"] for r in rs}
        assert len(texts) == 1   # greedy: the same answer whichever order they ran in
    finally:
        s.stop()


def test_queue_timeout_answers_503_with_retry_after(g4_bin):
    """One slot held by a long request, room for one waiting request: each later request waits
    --queue-timeout for a slot, then gets 503 with Retry-After (a stream too, before it starts),
    and leaves the queue, so the next one waits its turn instead of getting 429."""
    s = Server(g4_bin, "--parallel", 1, "--max-queue", 1, "--queue-timeout", 1, "--ctx", 16384)
    try:
        long = {"prompt": "hi", "max_tokens": 16000, "temperature": 0, "ignore_eos": True, "stream": True}
        first = requests.post(s.url + "/v1/completions", json=long, timeout=300, stream=True)
        assert first.status_code == 200   # a stream starts once it holds the slot
        for stream in (False, True, False):
            t0 = time.time()
            r = requests.post(s.url + "/v1/completions", timeout=30,
                              json={"prompt": "hi", "max_tokens": 2, "stream": stream})
            assert r.status_code == 503, r.text
            assert r.headers.get("Retry-After") == "1"
            assert r.json()["error"]["code"] == "queue_timeout"
            assert 0.9 < time.time() - t0 < 3
            t0 = time.time()   # it left the queue (at the scheduler's next step)
            while s.metrics()["g4_queue_depth"] and time.time() - t0 < 2:
                time.sleep(0.01)
            assert s.metrics()["g4_queue_depth"] == 0
        first.close()   # the client leaves: its slot frees and the server serves again
        r = requests.post(s.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2}, timeout=30)
        assert r.status_code == 200
    finally:
        s.stop()


def test_cors(g4_bin):
    s = Server(g4_bin, "--cors-origin", "https://app.example", "--cors-origin", "http://localhost:3000")
    try:
        pre = requests.options(s.url + "/v1/chat/completions", timeout=5,
                               headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
                                        "Access-Control-Request-Headers": "authorization, content-type"})
        assert pre.status_code == 204
        assert pre.headers["Access-Control-Allow-Origin"] == "https://app.example"
        assert "POST" in pre.headers["Access-Control-Allow-Methods"]
        assert "Authorization" in pre.headers["Access-Control-Allow-Headers"]
        r = requests.get(s.url + "/v1/models", headers={"Origin": "http://localhost:3000"}, timeout=5)
        assert r.headers["Access-Control-Allow-Origin"] == "http://localhost:3000" and r.headers["Vary"] == "Origin"
        r = requests.post(s.url + "/v1/completions", headers={"Origin": "https://app.example"}, timeout=60,
                          json={"prompt": "hi", "max_tokens": 2, "stream": True})
        assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == "https://app.example"
        r = requests.get(s.url + "/v1/models", headers={"Origin": "https://evil.example"}, timeout=5)
        assert "Access-Control-Allow-Origin" not in r.headers
    finally:
        s.stop()
    s = Server(g4_bin, "--cors-origin", "*")
    try:
        r = requests.get(s.url + "/health", headers={"Origin": "https://any.example"}, timeout=5)
        assert r.headers["Access-Control-Allow-Origin"] == "*"
    finally:
        s.stop()


def test_no_cors_by_default(g4_bin):
    s = Server(g4_bin)
    try:
        pre = requests.options(s.url + "/v1/chat/completions", timeout=5,
                               headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
        assert pre.status_code == 405 and "Access-Control-Allow-Origin" not in pre.headers
    finally:
        s.stop()


def test_message_and_tool_caps(g4_bin):
    s = Server(g4_bin, "--max-messages", 3, "--max-tools", 1)
    try:
        msgs = [{"role": "user", "content": "hi"}] * 4
        r = requests.post(s.url + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 1}, timeout=30)
        e = r.json()["error"]
        assert r.status_code == 400 and e["param"] == "messages" and e["code"] == "array_above_max_length"
        tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        r = requests.post(s.url + "/v1/chat/completions", timeout=30,
                          json={"messages": msgs[:3], "max_tokens": 1, "tools": [tool, tool]})
        e = r.json()["error"]
        assert r.status_code == 400 and e["param"] == "tools" and e["code"] == "array_above_max_length"
        r = requests.post(s.url + "/v1/chat/completions", json={"messages": msgs[:3], "max_tokens": 1, "tools": [tool]},
                          timeout=30)
        assert r.status_code == 200, r.text
    finally:
        s.stop()


@pytest.mark.parametrize("flag,value", [("--timeout", "0"), ("--max-connections", "0"), ("--queue-timeout", "-1"),
                                        ("--max-connections-per-ip", "x"), ("--cors-origin", "")])
def test_bad_limit_flags_are_usage_errors(g4_bin, flag, value):
    r = subprocess.run([g4_bin, "serve", "-m", str(MODEL), "--port", "0", flag, value], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and flag in r.stderr, r.stderr
