"""`gemma4c chat`: the multi-turn REPL over stdin. Each reply is what `run` gives for the whole
conversation rendered by the chat template (greedy: token for token), /reset starts over, /exit
and the end of input quit with exit 0."""
import json

import pytest

from conftest import FIXTURES, run_g4

M = FIXTURES / "g4-cond-tiny"
N = 8


def chat(g4_bin, lines, *extra):
    r = run_g4(g4_bin, "chat", "-m", M, "-n", N, "--threads", 1, *extra, input="".join(l + "\n" for l in lines).encode())
    assert r.returncode == 0, r.stderr.decode()
    return r


def run_chat(g4_bin, prompt, *extra):
    r = run_g4(g4_bin, "run", "-m", M, "--chat", "-p", prompt, "-n", N, "--threads", 1, *extra)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def run_conversation(g4_bin, messages):
    """`run` on the template's rendering of a whole conversation (with the generation prompt)."""
    t = run_g4(g4_bin, "template", "-m", M, input=json.dumps({"messages": messages, "add_generation_prompt": True}).encode())
    assert t.returncode == 0, t.stderr
    ids = run_g4(g4_bin, "tokenize", "-m", M, input=t.stdout)
    assert ids.returncode == 0, ids.stderr
    r = run_g4(g4_bin, "run", "-m", M, "--prompt-ids", ",".join(map(str, json.loads(ids.stdout))), "-n", N,
               "--threads", 1)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def test_two_turns_and_reset(g4_bin):
    first = run_chat(g4_bin, "Hi!")
    assert first.strip()
    r = chat(g4_bin, ["Hi!", "How are you?", "/reset", "Hi!"])
    assert r.stdout.startswith(first)                      # greedy: the first reply is run --chat's
    second = r.stdout[len(first):]
    assert second.endswith(first) and len(second) > len(first)   # after /reset the same reply again
    second = second[:-len(first)]
    # the second reply continues the conversation: the first reply is the assistant's turn in it
    msgs = [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": first[:-1].decode()},
            {"role": "user", "content": "How are you?"}]
    assert second == run_conversation(g4_bin, msgs)
    assert second != first
    assert r.stderr == b""                                 # no "> " prompt when stdin is not a terminal


def test_system_message(g4_bin):
    r = chat(g4_bin, ["Hi!"], "--system", "Be brief.")
    assert r.stdout == run_chat(g4_bin, "Hi!", "--system", "Be brief.")
    assert r.stdout != run_chat(g4_bin, "Hi!")


def test_exit_and_eof(g4_bin):
    first = run_chat(g4_bin, "Hi!")
    assert chat(g4_bin, ["Hi!", "/exit", "How are you?"]).stdout == first
    assert chat(g4_bin, []).stdout == b""
    assert chat(g4_bin, ["", "Hi!"]).stdout == first        # empty lines are not turns


def test_stops_at_generation_config_eos(g4_bin, tmp_path):
    """The reply ends at an eos id of generation_config.json, as `run` does."""
    r = run_g4(g4_bin, "run", "-m", M, "--chat", "-p", "Hi!", "-n", N, "--ids", "--ignore-eos")
    ids = json.loads(r.stdout)
    d = tmp_path / "m"
    d.mkdir()
    for f in M.iterdir():
        if f.name != "generation_config.json":
            (d / f.name).symlink_to(f)
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [ids[3]]}))
    c = run_g4(g4_bin, "chat", "-m", d, "-n", N, "-v", input=b"Hi!\n")
    assert c.returncode == 0, c.stderr
    t = run_g4(g4_bin, "detokenize", "-m", M, "--skip-special", input=json.dumps(ids[:ids.index(ids[3])]).encode())
    assert c.stdout == t.stdout + b"\n"


def test_context_overflow_is_reported_and_survived(g4_bin):
    """A turn the context cannot hold is reported and forgotten; the REPL goes on, exit 0."""
    r = run_g4(g4_bin, "chat", "-m", M, "-n", 4, "--ctx", 64, input=b"x " * 100 + b"\nHi!\n")
    assert r.returncode == 0, r.stderr
    assert b"exceeds the context" in r.stderr
    assert r.stdout.endswith(run_g4(g4_bin, "run", "-m", M, "--chat", "-p", "Hi!", "-n", 4).stdout)


TURNS = ["Hello there, how are you doing today?", "Tell me about the weather in Paris please.",
         "And what about London, is it rainy?", "Thanks a lot!", "One more question: why is the sky blue?"]


@pytest.mark.parametrize("chunk,n,path", [(8, 12, "snapshot"), (16, 4, "rewind")])
def test_kv_reuse_gives_the_fresh_greedy_answers(g4_bin, chunk, n, path):
    """Each turn continues from the slot's KV (a rewind, or the snapshot taken before the last
    generation prompt) and still answers exactly what `run` answers for the whole rendered
    conversation from an empty slot. A small --prefill-chunk makes the conversation span many
    chunks; replies of 12 tokens outrun the sliding rings (window 24 + chunk 8 - 1), so the
    snapshot is restored, short ones are within reach of a rewind."""
    extra = ("--prefill-chunk", chunk, "-n", n)
    r = run_g4(g4_bin, "chat", "-m", M, "--threads", 1, "-v", *extra,
               input="".join(t + "\n" for t in TURNS).encode())
    assert r.returncode == 0, r.stderr.decode()
    replies = r.stdout.decode().split("\n")[:-1]
    assert len(replies) == len(TURNS)
    reused = [int(l.split(", ")[1].split()[0]) for l in r.stderr.decode().splitlines() if "reused" in l]
    assert reused[0] == 0 and all(x > 0 and x % chunk == 0 for x in reused[1:]), r.stderr
    assert f"({path})" in r.stderr.decode()
    msgs = []
    for turn, reply in zip(TURNS, replies):
        msgs.append({"role": "user", "content": turn})
        t = run_g4(g4_bin, "template", "-m", M, input=json.dumps({"messages": msgs, "add_generation_prompt": True}).encode())
        ids = json.loads(run_g4(g4_bin, "tokenize", "-m", M, input=t.stdout).stdout)
        fresh = run_g4(g4_bin, "run", "-m", M, "--prompt-ids", ",".join(map(str, ids)), "--threads", 1, *extra)
        assert fresh.returncode == 0, fresh.stderr
        assert fresh.stdout.decode() == reply + "\n"
        msgs.append({"role": "assistant", "content": reply})


def _swap_tokens(src, dst, pairs, rename=()):
    """A copy of model dir src whose tokenizer trades the ids of each (special token, id) pair
    and gives each (id, text) of `rename` that text: the model is the same, so its greedy ids are
    too, but now they spell those tokens."""
    dst.mkdir()
    for f in src.iterdir():
        if f.name not in ("tokenizer.json", "tokenizer_config.json"):
            (dst / f.name).symlink_to(f)
    t = json.loads((src / "tokenizer.json").read_text())
    tc = json.loads((src / "tokenizer_config.json").read_text())
    vocab, dec = t["model"]["vocab"], tc["added_tokens_decoder"]
    by_id = {v: k for k, v in vocab.items()}
    for special, tid in pairs:
        sid, piece = vocab[special], by_id[tid]
        vocab[special], vocab[piece] = tid, sid
        for a in t["added_tokens"]:
            if a["content"] == special:
                a["id"] = tid
        dec[str(tid)] = dec.pop(str(sid))
    for tid, piece in rename:
        del vocab[by_id[tid]]
        vocab[piece] = tid
    (dst / "tokenizer.json").write_text(json.dumps(t))
    (dst / "tokenizer_config.json").write_text(json.dumps(tc))


def test_think_and_reasoning_shown_apart(g4_bin, tmp_path):
    """--think renders the template with enable_thinking; the reply goes through the chat output
    parser: a thought to stderr with --show-reasoning (else nowhere), the answer to stdout. The
    random fixture never thinks, so a tokenizer whose ids are traded makes its greedy ids spell
    <|channel>...<channel|> (the model is unchanged; the thinking prompt holds neither token)."""
    t = run_g4(g4_bin, "template", "-m", M, input=json.dumps(
        {"messages": [{"role": "user", "content": "Hi!"}], "add_generation_prompt": True, "enable_thinking": True}).encode())
    prompt = json.loads(run_g4(g4_bin, "tokenize", "-m", M, input=t.stdout).stdout)
    ids = json.loads(run_g4(g4_bin, "run", "-m", M, "--prompt-ids", ",".join(map(str, prompt)), "-n", N, "--ids",
                            "--ignore-eos", "--threads", 1).stdout)
    def text(part):
        return run_g4(g4_bin, "detokenize", "-m", M, "--skip-special", input=json.dumps(part).encode()).stdout.decode()
    assert chat(g4_bin, ["Hi!"], "--think").stdout.decode() == text(ids) + "\n"   # the thinking prompt
    # two ids that occur once each, neither in the prompt, with text between them and after
    once = [k for k, x in enumerate(ids) if ids.count(x) == 1 and x not in prompt]
    i, j = next((i, j) for i in once for j in once if i + 2 <= j < len(ids) - 1)
    d = tmp_path / "m"
    _swap_tokens(M, d, [("<|channel>", ids[i]), ("<channel|>", ids[j])])
    thought, answer = text(ids[i + 1:j]), text(ids[:i]) + text(ids[j + 1:])
    assert thought and answer.strip()
    shown = chat(g4_bin, ["Hi!"], "-m", d, "--think", "--show-reasoning")
    assert shown.stdout.decode() == answer + "\n"
    assert shown.stderr.decode() == "[reasoning] " + thought + "\n"
    hidden = chat(g4_bin, ["Hi!"], "-m", d, "--think")
    assert hidden.stdout == shown.stdout and hidden.stderr == b""


def test_tool_call_printed_as_json(g4_bin, tmp_path):
    """A tool call in the reply prints as one JSON line; the text around it is content. As above,
    a tokenizer with traded ids makes three greedy ids spell <|tool_call>call:f{x:1}<tool_call|>."""
    t = run_g4(g4_bin, "template", "-m", M, input=json.dumps(
        {"messages": [{"role": "user", "content": "Hi!"}], "add_generation_prompt": True, "enable_thinking": True}).encode())
    prompt = json.loads(run_g4(g4_bin, "tokenize", "-m", M, input=t.stdout).stdout)
    ids = json.loads(run_g4(g4_bin, "run", "-m", M, "--prompt-ids", ",".join(map(str, prompt)), "-n", N, "--ids",
                            "--ignore-eos", "--threads", 1).stdout)
    once = [k for k, x in enumerate(ids) if ids.count(x) == 1 and x not in prompt]
    i = next(i for i in once if i + 1 in once and i + 2 in once)
    d = tmp_path / "m"
    _swap_tokens(M, d, [("<|tool_call>", ids[i]), ("<tool_call|>", ids[i + 2])], rename=[(ids[i + 1], "call:f{x:1}")])
    def text(part):
        return run_g4(g4_bin, "detokenize", "-m", M, "--skip-special", input=json.dumps(part).encode()).stdout.decode()
    r = chat(g4_bin, ["Hi!"], "-m", d, "--think")
    call = json.dumps({"tool_call": {"name": "f", "arguments": {"x": 1}}}, separators=(",", ":"))
    assert r.stdout.decode() == text(ids[:i]) + call + "\n" + text(ids[i + 3:]) + "\n"


# ---- images and audio in the REPL (/image, /audio, --image), on the multimodal fixture

MM = FIXTURES / "g4-cond-mm-tiny"
JPEG = FIXTURES / "media" / "jpeg_odd_97x61.jpg"
PNG = FIXTURES / "media" / "png_rgba_150x100.png"
WAV = FIXTURES / "multimodal" / "audio_mono_811.wav"
MEDIA_OPTS = ("--max-soft-tokens", 70, "--prefill-chunk", 64)


def mm_chat(g4_bin, lines, *extra):
    r = run_g4(g4_bin, "chat", "-m", MM, "-n", N, "--threads", 1, *MEDIA_OPTS, "-v", *extra,
               input="".join(l + "\n" for l in lines).encode())
    assert r.returncode == 0, r.stderr.decode()
    return r


def mm_run(g4_bin, messages, images=(), audio=()):
    """`run --image/--audio` on the template's rendering of a whole conversation."""
    t = run_g4(g4_bin, "template", "-m", MM, input=json.dumps({"messages": messages, "add_generation_prompt": True}).encode())
    assert t.returncode == 0, t.stderr
    ids = run_g4(g4_bin, "tokenize", "-m", MM, input=t.stdout)
    assert ids.returncode == 0, ids.stderr
    media = [a for f in images for a in ("--image", f)] + [a for f in audio for a in ("--audio", f)]
    r = run_g4(g4_bin, "run", "-m", MM, "--prompt-ids", ",".join(map(str, json.loads(ids.stdout))), "-n", N,
               "--threads", 1, *MEDIA_OPTS, *media)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def user(*parts):
    return {"role": "user", "content": [{"type": p} if p in ("image", "audio") else {"type": "text", "text": p}
                                        for p in parts]}


def test_image_turns_match_run(g4_bin):
    """/image before a line puts the image before its text; the next turn keeps it in the prompt,
    reuses the slot's KV over it (step ends where a fresh prefill has them) and answers as `run`
    on the whole conversation with both images."""
    first = mm_run(g4_bin, [user("image", "Describe")], [JPEG])
    r = mm_chat(g4_bin, [f"/image {JPEG}", "Describe", f"/image {PNG}", "And this?"])
    assert r.stdout.startswith(first)
    second = r.stdout[len(first):]
    msgs = [user("image", "Describe"), {"role": "assistant", "content": first[:-1].decode()}, user("image", "And this?")]
    assert second == mm_run(g4_bin, msgs, [JPEG, PNG])
    reused = [int(ln.split(b", ")[1].split()[0]) for ln in r.stderr.splitlines() if b"reused" in ln]
    assert reused[0] == 0 and reused[1] > 60, r.stderr   # the first image's soft tokens came from the slot
    assert mm_chat(g4_bin, ["Describe"], "--image", JPEG).stdout == first   # --image: the first turn's


def test_audio_turn_and_reset(g4_bin):
    heard = mm_run(g4_bin, [user("audio", "Hear")], audio=[WAV])
    plain = mm_run(g4_bin, [{"role": "user", "content": "Hear"}])
    r = mm_chat(g4_bin, [f"/audio {WAV}", "Hear", "/reset", f"/image {JPEG}", "/reset", "Hear"])
    assert r.stdout == heard + plain   # /reset forgets the conversation's media, queued ones too


def test_media_refusals_keep_the_session(g4_bin, tmp_path):
    r = mm_chat(g4_bin, [f"/image {tmp_path / 'missing.png'}", "Describe"])
    assert b"missing.png" in r.stderr
    assert r.stdout == mm_run(g4_bin, [{"role": "user", "content": "Describe"}])
    r = mm_chat(g4_bin, [f"/image {JPEG}"] * 3 + ["Describe"], "--max-media-per-request", 2)
    assert b"--max-media-per-request 2" in r.stderr
    r = mm_chat(g4_bin, [f"/image {JPEG}"], "--prefill-chunk", 32)
    assert b"more than a prefill chunk of 32" in r.stderr
    r = run_g4(g4_bin, "chat", "-m", M, "-n", 2, input=f"/image {JPEG}\n/audio {WAV}\n".encode())
    assert r.returncode == 0 and b"no vision embedder" in r.stderr and b"no audio embedder" in r.stderr, r.stderr


@pytest.mark.parametrize("model,spec", [
    ("g4-cond-tiny", ("--spec", "ngram", "--draft-max", 3)),
    ("g4-causal-tiny", ("--draft", FIXTURES / "mtp" / "friendly")),   # the MTP fixtures' target
    ("g4-causal-tiny", ("--draft", FIXTURES / "mtp" / "friendly", "--tp", 2)),   # the drafter reading both ranks' KV
])
def test_speculative_replies_as_plain(g4_bin, model, spec):
    """--spec ngram / --draft DIR: every reply is the plain reply, token for token (scalar kernels,
    docs/speculative.md), also where a turn continues from the slot's KV after speculative steps;
    drafts were kept."""
    turns = "".join(t + "\n" for t in TURNS[:2] + ["/reset", "again"]).encode()

    def go(*extra):
        r = run_g4(g4_bin, "chat", "-m", FIXTURES / model, "-n", 12, "--threads", 1, "--prefill-chunk", 8, "-v", *extra,
                   input=turns, env={"G4_CPU_ISA": "scalar"})
        assert r.returncode == 0, r.stderr.decode()
        return r.stdout, r.stderr.decode()

    plain, _ = go()
    got, err = go(*spec)
    assert got == plain and plain.count(b"\n") == 3
    lines = [line for line in err.splitlines() if "speculative:" in line]
    assert len(lines) == 3 and sum(int(line.split("accepted ")[1]) for line in lines) > 0, err
    if model == "g4-cond-tiny":   # its second turn reuses the slot
        assert int([line for line in err.splitlines() if "reused" in line][1].split(", ")[1].split()[0]) > 0, err
