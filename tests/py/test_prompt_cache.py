"""The server's prompt cache (--cache-ram): a request reuses the KV of the longest prefix computed
before — in its slot, copied from another slot, or restored from a host snapshot — and its output
is the one a server without the cache (--cache-ram 0) gives, greedy and seeded. Covers a chat's
next turn, a system prompt shared by several conversations, a rewind far deeper than the sliding
window (a snapshot), eviction under a tiny budget, and usage.prompt_tokens_details.cached_tokens.
Tiny random-weight fixture (sliding window 24; serve's 64-row chunks make its rings 87 long)."""
import json
import random

import pytest

from conftest import run_g4
from test_server import BOS, MODEL, NAME, Server, complete

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
            # first prompt's end comes back from its snapshot, set back to where the two prompts
            # part (the template drops the generation prompt's empty thought channel)
            p1, p2 = prompt_ids(g4_bin, turn1), prompt_ids(g4_bin, turn2)
            assert (len(p1), len(p2)) == (n1, n2)
            assert c2 == common_prefix(p1, p2) > n1 - 10
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
        # the second conversation leaves a snapshot where it parts from the first; later ones
        # restore it (the system prompt is > 300 tokens, far deeper than a ring reaches back)
        assert cached[0] == 0 and all(c > 300 for c in cached[2:]), cached
    finally:
        assert warm.stop() == 0, "".join(warm.log)


def test_rewind_deeper_than_the_window_and_partial_prefixes(g4_bin, cold):
    warm = server(g4_bin)
    try:
        base = [BOS] + ids(1, 299)
        p4 = base[:140] + ids(5, 20)
        prompts = [base, base[:150] + ids(2, 40), base[:150] + ids(3, 30), base + ids(4, 5), p4,
                   lambda out: p4 + out[:60] + [7], base]
        got, out = [], None
        for p in prompts:
            p = p(out) if callable(p) else p
            out, cached = gen(warm, p, 80, temperature=0)
            assert out == gen(cold, p, 80, temperature=0)[0]
            got.append(cached)
        # 1: shares 150 with a slot 230 positions further on (no snapshot there yet: computed,
        #    leaving one at 150); 2: restores it; 3: the first prompt's end snapshot; 4: 150's
        #    snapshot set back 10 positions; 5: in place, 19 positions back from the slot's end
        #    (within its rings); 6: the first prompt's snapshot but its last id, computed again
        assert got == [0, 0, 150, 300, 140, 220, 299], got
    finally:
        assert warm.stop() == 0, "".join(warm.log)


def test_eviction_keeps_within_a_tiny_budget(g4_bin, cold):
    warm = server(g4_bin, "--cache-ram", 1)
    try:
        for i in range(8):
            p = [BOS] + ids(100 + i, 250)
            assert gen(warm, p, 8, temperature=0)[0] == gen(cold, p, 8, temperature=0)[0]
        m = warm.metrics()
        assert m["g4_prompt_cache_evictions_total"] > 0
        assert 0 < m["g4_prompt_cache_bytes"] <= 1 << 20
        p = [BOS] + ids(107, 250) + [7, 8]   # the latest snapshot survived
        out, cached = gen(warm, p, 8, temperature=0)
        assert cached == 251 and out == gen(cold, p, 8, temperature=0)[0]
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
