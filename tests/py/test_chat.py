"""`gemma4c chat`: the multi-turn REPL over stdin. Each reply is what `run` gives for the whole
conversation rendered by the chat template (greedy: token for token), /reset starts over, /exit
and the end of input quit with exit 0."""
import json

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
