"""The server's prompt cache (--cache-ram): a request reuses the KV of the longest prefix computed
before — in its slot, copied from another slot, or restored from a host snapshot — and its output
is the one a server without the cache (--cache-ram 0) gives, greedy and seeded. Covers a chat's
next turn, a system prompt shared by several conversations, a rewind far deeper than the sliding
window (a snapshot), eviction under a tiny budget, and usage.prompt_tokens_details.cached_tokens.
Tiny random-weight fixture (sliding window 24; serve's 64-row chunks make its rings 87 long).
Reuse stops at a 64-token chunk boundary and never takes a prompt's partial last chunk or
decoded tokens (prompt_cache.c: rows computed as a fresh prefill computes them)."""
import concurrent.futures as cf
import json
import random
import signal

import pytest

from conftest import run_g4
from test_server import BOS, MODEL, NAME, Server, complete
from test_tp import MPI_ENV, MPIRUN, _serve, need_mpi

CTX = 1024


@pytest.fixture(scope="module")
def cold(g4_bin):
    s = Server(g4_bin, "--ctx", CTX, "--cache-ram", 0)
    yield s
    assert s.stop() == 0, "".join(s.log)


def server(g4_bin, *extra):
    return Server(g4_bin, "--ctx", CTX, *extra)


def ids(seed, n):
    rng = random.Random(seed)
    return [rng.randrange(3, 1000) for _ in range(n)]


def gen(srv, prompt, n, **kw):
    r = complete(srv.client(), prompt, n, **kw)
    return r.choices[0].model_extra["token_ids"], r.usage.prompt_tokens_details.cached_tokens


def chat(srv, messages, n, **kw):
    r = srv.client().chat.completions.create(model=NAME, messages=messages, max_tokens=n,
                                             extra_body={"ignore_eos": True}, **kw)
    return r.choices[0].message.content, r.usage.prompt_tokens, r.usage.prompt_tokens_details.cached_tokens


def prompt_ids(g4_bin, messages):
    """The prompt's ids as the server builds them: the CLI's template rendering, then its tokenizer."""
    text = run_g4(g4_bin, "template", "-m", MODEL, input=json.dumps({"messages": messages, "add_generation_prompt": True}).encode())
    toks = run_g4(g4_bin, "tokenize", "-m", MODEL, input=text.stdout)
    return json.loads(toks.stdout)


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


SYSTEM = "You are a careful assistant. " * 30


def test_chat_next_turn_reuses_the_conversation(g4_bin, cold):
    warm = server(g4_bin)
    try:
        turn1 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Tell me a long story."}]
        for kw in ({"temperature": 0}, {"temperature": 1.0, "seed": 11}):
            a1, n1, c1 = chat(warm, turn1, 100, **kw)
            assert (a1, n1, 0) == chat(cold, turn1, 100, **kw)
            turn2 = turn1 + [{"role": "assistant", "content": a1}, {"role": "user", "content": "And then?"}]
            a2, n2, c2 = chat(warm, turn2, 40, **kw)
            # the slot ran 100 tokens past the first prompt: more than its ring allows, so the
            # first prompt's last chunk boundary comes back from its snapshot, set back to the
            # boundary before the two prompts part (the template drops the generation prompt's
            # empty thought channel)
            p1, p2 = prompt_ids(g4_bin, turn1), prompt_ids(g4_bin, turn2)
            assert (len(p1), len(p2)) == (n1, n2) and common_prefix(p1, p2) > n1 - 10
            assert c2 == min(common_prefix(p1, p2), n1 // 64 * 64) // 64 * 64 > n1 - 74
            assert (a2, n2, 0) == chat(cold, turn2, 40, **kw)
        m = warm.metrics()
        assert m["g4_prompt_cache_hits_total"] >= 2 and m["g4_prompt_cache_tokens_total"] >= 2 * n1
        assert m["g4_prompt_cache_bytes"] > 0 and m["g4_prompt_cache_entries"] >= 2
    finally:
        assert warm.stop() == 0, "".join(warm.log)


def test_shared_system_prompt_hits_across_conversations(g4_bin, cold):
    warm = server(g4_bin, "--parallel", 2)
    try:
        cached = []
        for i, q in enumerate(["What is a cat?", "Why is the sky blue?", "Name a prime.", "Count to ten."]):
            msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}]
            a, n, c = chat(warm, msgs, 90, temperature=0)
            assert (a, n, 0) == chat(cold, msgs, 90, temperature=0), i
            cached.append(c)
        # later conversations restore the system prompt from the first one's snapshot at its last
        # chunk boundary (> 300 tokens, far deeper than a ring reaches back)
        assert cached[0] == 0 and all(c > 300 for c in cached[1:]), cached
    finally:
        assert warm.stop() == 0, "".join(warm.log)


def rewind_sequence(warm, cold):
    """Prompts that share prefixes of different depths, with long and short answers; each output
    checked against `cold`. Returns the cached_tokens of each."""
    base = [BOS] + ids(1, 299)
    prompts = [(base, 80), (base[:150] + ids(2, 40), 80), (base[:150] + ids(3, 30), 80), (base + ids(4, 5), 8),
               (base + ids(6, 10), 8), (base[:2], 8), (base, 8)]
    got = []
    for p, n in prompts:
        out, cached = gen(warm, p, n, temperature=0)
        assert out == gen(cold, p, n, temperature=0)[0]
        got.append(cached)
    return got


# 0: snapshot at 256; 1: shares 150 with a slot 230 positions further on: computed, leaving a
# snapshot at the boundary 128; 2: restores it (the slot was 141 positions on); 3: restores 256;
# 4: in place, 56 positions back from the slot's end (within its rings); 5: a 2-id prompt reuses
# nothing; 6: all but the last id is reusable, the snapshot gives the boundary 256
WITH_SNAPSHOTS = [0, 0, 128, 256, 256, 0, 256]
IN_PLACE_ONLY = [0, 0, 0, 0, 256, 0, 0]


def test_rewind_deeper_than_the_window_and_partial_prefixes(g4_bin, cold):
    warm = server(g4_bin)
    try:
        assert rewind_sequence(warm, cold) == WITH_SNAPSHOTS
    finally:
        assert warm.stop() == 0, "".join(warm.log)


@pytest.mark.parametrize("kv", ["bf16", "q8_0"])
def test_kv_types_snapshot_and_restore(g4_bin, kv):
    """--kv-type: snapshots copy the typed cache's bytes, so a warm server gives what a cold one
    of the same type gives, and the startup line reports the smaller cache"""
    cold_t = server(g4_bin, "--cache-ram", 0, "--kv-type", kv)
    warm = server(g4_bin, "--kv-type", kv)
    try:
        assert rewind_sequence(warm, cold_t) == WITH_SNAPSHOTS
        banner = [ln for ln in warm.log if "KV " in ln and "ready" in ln]
        assert banner and f"MiB ({kv})" in banner[0], "".join(warm.log)
    finally:
        assert warm.stop() == 0, "".join(warm.log)
        assert cold_t.stop() == 0, "".join(cold_t.log)


class Launched(Server):
    """A server some other launcher started (test_tp's, for mpirun)."""

    def __init__(self, p, url, log):
        self.p, self.url, self.log = p, url, log


@pytest.mark.parametrize("backend", ["threads", "mpi"])
def test_tensor_parallel(g4_bin, cold, backend):
    """--tp 2: with the threads backend snapshots hold every rank's shard; under MPI the other
    ranks' shards are in other processes, so only the in-place reuse (4) runs."""
    args = [g4_bin, "serve", "-m", str(MODEL), "--port", "0", "--ctx", CTX, "--threads", "2", "--alias", NAME,
            "--tp", "2", "--tp-backend", backend]
    if backend == "mpi":
        need_mpi()
        args = [MPIRUN, "-np", "2", *args]
    p, url, log = _serve([str(a) for a in args], MPI_ENV if backend == "mpi" else None)
    try:
        got = rewind_sequence(Launched(p, url, log), cold)
        assert got == (WITH_SNAPSHOTS if backend == "threads" else IN_PLACE_ONLY), got
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(60)
    # mpirun may end rank 0 before it reports; test_tp checks the shutdown under MPI
    assert rc == 0 or backend == "mpi", "".join(log)


def test_eviction_keeps_within_a_tiny_budget(g4_bin, cold):
    warm = server(g4_bin, "--cache-ram", 1)
    try:
        for i in range(8):
            p = [BOS] + ids(100 + i, 250)
            assert gen(warm, p, 8, temperature=0)[0] == gen(cold, p, 8, temperature=0)[0]
        m = warm.metrics()
        assert m["g4_prompt_cache_evictions_total"] > 0
        assert 0 < m["g4_prompt_cache_bytes"] <= 1 << 20
        p = [BOS] + ids(107, 250) + [7, 8]   # the latest snapshot (at 192) survived
        out, cached = gen(warm, p, 8, temperature=0)
        assert cached == 192 and out == gen(cold, p, 8, temperature=0)[0]
    finally:
        assert warm.stop() == 0, "".join(warm.log)


def test_eight_clients_random_conversations(g4_bin, cold):
    """8 clients at once over 4 slots, each a 3-turn conversation of random lengths (half of them
    on a shared system prompt), under a budget small enough to evict: every answer is the one the
    cache-off server gives to the same messages."""
    warm = server(g4_bin, "--parallel", 4, "--cache-ram", 3)
    words = "alpha beta gamma delta harbour ship crate copper timber grain tide".split()

    def client(k):
        rng = random.Random(k)
        msgs = [{"role": "system", "content": SYSTEM if k % 2 else " ".join(rng.choices(words, k=40))}]
        turns = []
        for _ in range(3):
            msgs.append({"role": "user", "content": " ".join(rng.choices(words, k=rng.randrange(2, 25)))})
            n = rng.randrange(4, 40)
            a, _, c = chat(warm, msgs, n, temperature=0)
            turns.append((list(msgs), n, a, c))
            msgs.append({"role": "assistant", "content": a})
        return turns

    try:
        with cf.ThreadPoolExecutor(8) as ex:
            runs = list(ex.map(client, range(8)))
        assert sum(c for turns in runs for *_, c in turns) > 0
        for turns in runs:
            for msgs, n, a, _ in turns:
                assert a == chat(cold, msgs, n, temperature=0)[0]
        assert warm.metrics()["g4_prompt_cache_bytes"] <= 3 << 20
    finally:
        assert warm.stop() == 0, "".join(warm.log)


def test_cache_off_reuses_nothing(cold):
    p = [BOS] + ids(9, 50)
    gen(cold, p, 4, temperature=0)
    assert gen(cold, p + [5], 4, temperature=0)[1] == 0
    m = cold.metrics()
    assert m["g4_prompt_cache_hits_total"] == 0 and m["g4_prompt_cache_entries"] == 0


def test_cache_ram_flag_is_checked(g4_bin):
    r = run_g4(g4_bin, "serve", "-m", "x", "--cache-ram", "-1")
    assert r.returncode == 2 and b"--cache-ram" in r.stderr
