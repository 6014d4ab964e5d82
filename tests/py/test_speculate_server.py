"""`gemma4c serve --spec ngram` (docs/speculative.md): several requests decoding at once, each slot
verifying its n-gram drafts in the same step, give the token ids, logprobs, seeded samples, stop
and length ends of a server without speculation (scalar kernels: row-invariant, docs/numerics.md);
the drafted / accepted counters move; bad options are refused."""
import concurrent.futures as cf

import pytest

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
    (["--draft", "some-dir"], "the MTP drafter is an option of run, not yet of serve"),
])
def test_bad_options(g4_bin, args, message):
    r = run_g4(g4_bin, "serve", "-m", MODEL, "--port", "0", *args, timeout=30)
    assert r.returncode == 2 and message in r.stderr.decode(), r.stderr
