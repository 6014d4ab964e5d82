"""`gemma4c serve --spec ngram` and `serve --draft DIR` (docs/speculative.md): several requests
decoding at once, each slot verifying its n-gram (or MTP) drafts in the same step, give the token
ids, logprobs, seeded samples, stop and length ends of a server without speculation (scalar
kernels: row-invariant, docs/numerics.md); the drafted / accepted counters move — for the MTP
drafter by exactly transformers' rounds; a request's `speculative` object caps its drafts; bad
options and values are refused."""
import concurrent.futures as cf
import json

import pytest
import requests

from conftest import FIXTURES, run_g4
from test_server import NAME, Server, complete

MODEL = FIXTURES / "g4-cond-tiny"
PERIODIC = [2] + [11, 57, 203, 9] * 5
CASES = [
    (PERIODIC, {"temperature": 0}),
    ([2, 40, 41, 42, 43, 44, 45, 7, 40, 41, 42], {"temperature": 0, "logprobs": 2}),
    (PERIODIC[:9], {"temperature": 1.2, "seed": 5}),
    ([2, 100, 200, 300, 100, 200], {"temperature": 0, "stop": ["x"]}),
]


def run_all(srv):
    c = srv.client()
    with cf.ThreadPoolExecutor(len(CASES)) as ex:   # at once: the slots decode (and verify) together
        outs = list(ex.map(lambda case: complete(c, case[0], 40, **case[1]), CASES))
    res = []
    for r in outs:
        ch = r.choices[0]
        lp = ch.logprobs.top_logprobs if ch.logprobs else None
        res.append((ch.model_extra["token_ids"], ch.text, ch.finish_reason, lp))
    return res


@pytest.fixture(scope="module")
def servers(g4_bin):
    env = {"G4_CPU_ISA": "scalar"}
    plain = Server(g4_bin, "--parallel", 3, "--ctx", 256, env=env, model_dir=MODEL)
    spec = Server(g4_bin, "--parallel", 3, "--ctx", 256, "--spec", "ngram", "--draft-max", 5, env=env, model_dir=MODEL)
    yield plain, spec
    assert plain.stop() == 0 and spec.stop() == 0


def test_same_as_plain_server(servers):
    plain, spec = servers
    want = run_all(plain)
    got = run_all(spec)
    for w, g in zip(want, got):
        assert g[0] == w[0] and g[1] == w[1] and g[2] == w[2]
        if w[3] is not None:
            for a, b in zip(w[3], g[3]):
                assert a.keys() == b.keys() and all(abs(a[k] - b[k]) < 1e-5 for k in a)
    m = spec.metrics()
    assert m["g4_spec_accepted_tokens_total"] >= 2 and m["g4_spec_drafted_tokens_total"] >= m["g4_spec_accepted_tokens_total"]
    assert m["g4_decode_batch_max"] >= 2   # slots verified in one step
    assert plain.metrics()["g4_spec_drafted_tokens_total"] == 0


def test_prompt_cache_after_speculation(servers):
    """A later prompt sharing a prefix with an earlier speculative generation reuses its slot (set
    back past dropped verify rows, within the rings' true floor) and still answers as plain."""
    plain, spec = servers
    long = [2] + [11, 57, 203, 9, 31] * 16   # past a prefill chunk (64): reusable prefixes
    for prompt in (long, long[:70] + [5, 6], long[:66] + [7]):
        w = complete(plain.client(), prompt, 24, temperature=0).choices[0].model_extra["token_ids"]
        g = complete(spec.client(), prompt, 24, temperature=0).choices[0].model_extra["token_ids"]
        assert g == w
    assert spec.metrics()["g4_prompt_cache_hits_total"] >= 1


@pytest.mark.parametrize("args,message", [
    (["--spec", "ngram", "--spec-trace", "t.jsonl"], "--spec-trace is an option of run, not of serve"),
    (["--draft-max", "3"], "--draft-max needs --spec ngram"),
    (["--spec", "eagle"], "--spec expects ngram or none"),
])
def test_bad_options(g4_bin, args, message):
    r = run_g4(g4_bin, "serve", "-m", MODEL, "--port", "0", *args, timeout=30)
    assert r.returncode == 2 and message in r.stderr.decode(), r.stderr


def test_drafter_load_error(g4_bin):
    """--draft is checked against the loaded model: a drafter for another vocabulary stops the server."""
    r = run_g4(g4_bin, "serve", "-m", MODEL, "--port", "0", "--draft", FIXTURES / "mtp" / "random", timeout=30)
    assert r.returncode == 2 and "drafter vocabulary 512 != the target's 1024" in r.stderr.decode(), r.stderr


# ------------------------------------------------------------------ per-request control


def post(srv, body, route="/v1/completions"):
    if "responses" in route:
        base = {"input": "hi", "max_output_tokens": 4}
    else:
        base = {"max_tokens": 4, **({"messages": [{"role": "user", "content": "hi"}]} if "chat" in route
                                    else {"prompt": [2, 5, 7]})}
    return requests.post(srv.url + route, json={"model": NAME, **base, **body}, timeout=30)


def drafted(srv):
    m = srv.metrics()
    return m["g4_spec_drafted_tokens_total"], m["g4_spec_accepted_tokens_total"]


def test_request_n_max(servers):
    """speculative.n_max 0 turns drafting off for one request (same output); n_max 2 caps each
    round's drafts below the server's --draft-max 5."""
    plain, spec = servers
    want = complete(plain.client(), PERIODIC, 24, temperature=0).choices[0].model_extra["token_ids"]
    before = drafted(spec)
    got = complete(spec.client(), PERIODIC, 24, temperature=0, extra_body={"speculative": {"n_max": 0}})
    assert got.choices[0].model_extra["token_ids"] == want and drafted(spec) == before
    steps = spec.metrics()["g4_decode_steps_total"]
    got = complete(spec.client(), PERIODIC, 24, temperature=0, extra_body={"speculative": {"n_max": 2, "n_min": 1}})
    assert got.choices[0].model_extra["token_ids"] == want
    d = drafted(spec)[0] - before[0]
    assert 0 < d <= 2 * (spec.metrics()["g4_decode_steps_total"] - steps)
    # chat, /v1/responses and /generate take it too
    r = post(spec, {"speculative": {"n_max": 1}}, "/v1/chat/completions")
    assert r.status_code == 200, r.text
    before = drafted(spec)
    r = post(spec, {"speculative": {"n_max": 0}}, "/v1/responses")
    assert r.status_code == 200 and r.json()["object"] == "response", r.text
    assert drafted(spec) == before   # n_max 0 reached the request: no drafts
    r = post(spec, {"speculative": {"n_max": 2, "n_min": 1}}, "/v1/responses")
    assert r.status_code == 200, r.text
    r = requests.post(spec.url + "/generate", json={"prompt": [2, 5], "max_tokens": 2, "speculative": {"n_max": 0}})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("spec_field,param,message", [
    ({"n_max": 6}, "speculative.n_max", "above this server's --draft-max 5"),
    ({"n_max": -1}, "speculative.n_max", "it must be at least 0"),
    ({"n_max": "2"}, "speculative.n_max", "must be an integer"),
    ({"n_max": 2, "n_min": 3}, "speculative.n_min", "above the 2 drafts a round may have"),
    ({"p_min": 0.5}, "speculative.p_min", "speculative.p_min is not supported (only n_max and n_min are)"),
    (4, "speculative", "must be an object"),
])
def test_request_bad_values(servers, spec_field, param, message):
    for route in ("/v1/completions", "/v1/chat/completions", "/v1/responses"):
        r = post(servers[1], {"speculative": spec_field}, route)
        assert r.status_code == 400, r.text
        e = r.json()["error"]
        assert e["param"] == param and message in e["message"], e


def test_request_without_speculation(servers):
    """A server without --spec / --draft: n_max 0 is fine, n_max > 0 a 400 naming the field."""
    plain = servers[0]
    assert post(plain, {"speculative": {"n_max": 0}}).status_code == 200
    r = post(plain, {"speculative": {"n_max": 1}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "speculative.n_max"
    assert "does not decode speculatively" in r.json()["error"]["message"]


# ------------------------------------------------------------------ the MTP drafter


MTP_TARGET = FIXTURES / "g4-causal-tiny"


def mtp_goldens(name):
    return json.loads((FIXTURES / "mtp" / name / "goldens.json").read_text())


@pytest.fixture(scope="module")
def mtp_servers(g4_bin):
    env = {"G4_CPU_ISA": "scalar"}
    plain = Server(g4_bin, "--parallel", 3, "--ctx", 256, env=env, model_dir=MTP_TARGET)
    mtp = [Server(g4_bin, "--parallel", 3, "--ctx", 256, "--draft", FIXTURES / "mtp" / "friendly", "--tp", tp,
                  env=env, model_dir=MTP_TARGET) for tp in (1, 2)]
    yield plain, mtp
    assert plain.stop() == 0 and all(s.stop() == 0 for s in mtp)


@pytest.mark.parametrize("tp", [1, 2])
def test_mtp_slots_match_transformers(mtp_servers, tp):
    """Three slots drafting with the MTP drafter at once (each from its own row's hidden state and
    its own KV, asked before its rejected rows are dropped) give plain greedy, and draft and keep
    exactly as many tokens as transformers' assisted generation does for each prompt alone — also
    with the target split over --tp 2 (the drafter reading each rank's KV heads)."""
    mtp = mtp_servers[1][tp - 1]
    g = mtp_goldens("friendly")
    cases = g["cases"]   # four prompts on three slots; "long" prefills in two chunks
    rounds = [r for c in cases for r in c["rounds"] if r["drafted"]]
    for _ in range(2):   # the second time the prompts come from the prompt cache
        before = drafted(mtp)
        with cf.ThreadPoolExecutor(len(cases)) as ex:
            outs = list(ex.map(lambda c: complete(mtp.client(), c["prompt"], g["n_new"], temperature=0), cases))
        for c, r in zip(cases, outs):
            assert r.choices[0].model_extra["token_ids"] == c["greedy"], c["name"]
        after = drafted(mtp)
        assert after[0] - before[0] == sum(len(r["drafted"]) for r in rounds)
        assert after[1] - before[1] == sum(r["accepted"] for r in rounds)
    m = mtp.metrics()
    assert m["g4_decode_batch_max"] >= 2 and m["g4_prompt_cache_hits_total"] >= 1


@pytest.mark.parametrize("tp", [1, 2])
def test_mtp_sampling_and_n_max(mtp_servers, tp):
    """Seeded samples as a plain server's, with slots decoding at once; speculative.n_max 0 on one
    request leaves the counters alone and its output unchanged."""
    plain, mtp = mtp_servers[0], mtp_servers[1][tp - 1]
    case = mtp_goldens("friendly")["cases"][1]
    kws = [{"temperature": 0.7, "seed": s, "top_k": 20} for s in (1, 7)] + [{"temperature": 0}]

    def both(srv, extra=None):
        def one(kw):
            kw = dict(kw)
            body = {**(extra or {}), **({"top_k": kw.pop("top_k")} if "top_k" in kw else {})}
            return complete(srv.client(), case["prompt"], 32, extra_body=body, **kw)

        with cf.ThreadPoolExecutor(len(kws)) as ex:
            outs = list(ex.map(one, kws))
        return [r.choices[0].model_extra["token_ids"] for r in outs]

    want = both(plain)
    before = drafted(mtp)
    assert both(mtp) == want
    mid = drafted(mtp)
    assert mid[0] > before[0]
    assert both(mtp, {"speculative": {"n_max": 0}}) == want
    assert drafted(mtp) == mid
