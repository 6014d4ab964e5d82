"""`gemma4c run` with text prompts: -p goes through the tokenizer (with <bos>), --chat through
the model's chat template (which writes <bos> itself), and the printed text is the
detokenization of the generated ids. Sampling with a seed is reproducible."""
import json

from conftest import FIXTURES, run_g4

M = FIXTURES / "g4-cond-tiny"


def ids_of(g4_bin, text, bos):
    r = run_g4(g4_bin, "tokenize", "-m", M, *(["--bos"] if bos else []), input=text.encode())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def run_ids(g4_bin, *args):
    r = run_g4(g4_bin, "run", "-m", M, "-n", 12, "--ids", "--ignore-eos", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_text_prompt_equals_token_prompt(g4_bin):
    text = "The quick brown fox"
    by_text = run_ids(g4_bin, "-p", text)
    by_ids = run_ids(g4_bin, "--prompt-ids", ",".join(map(str, ids_of(g4_bin, text, True))))
    assert by_text == by_ids


def test_text_output_is_detokenized_ids(g4_bin):
    gen = run_ids(g4_bin, "-p", "Hello there")
    r = run_g4(g4_bin, "run", "-m", M, "-n", 12, "--ignore-eos", "-p", "Hello there")
    assert r.returncode == 0, r.stderr
    d = run_g4(g4_bin, "detokenize", "-m", M, "--skip-special", input=json.dumps(gen).encode())
    assert d.returncode == 0, d.stderr
    assert r.stdout == d.stdout + b"\n"


def test_chat_uses_template_without_double_bos(g4_bin):
    conv = {"messages": [{"role": "user", "content": "Hi!"}], "add_generation_prompt": True}
    t = run_g4(g4_bin, "template", "-m", M, input=json.dumps(conv).encode())
    assert t.returncode == 0, t.stderr
    prompt = ids_of(g4_bin, t.stdout.decode(), False)
    bos = json.loads((M / "config.json").read_text())["text_config"]["bos_token_id"]
    assert prompt[0] == bos and prompt[1] != bos
    assert run_ids(g4_bin, "--chat", "-p", "Hi!") == run_ids(g4_bin, "--prompt-ids", ",".join(map(str, prompt)))


def test_seeded_sampling_is_reproducible(g4_bin):
    a = run_ids(g4_bin, "-p", "Once upon", "--temp", "1.0", "--seed", "7")
    b = run_ids(g4_bin, "-p", "Once upon", "--temp", "1.0", "--seed", "7")
    greedy = run_ids(g4_bin, "-p", "Once upon")
    assert a == b
    assert a != greedy or run_ids(g4_bin, "-p", "Once upon", "--temp", "1.0", "--seed", "8") != a


def test_prompt_and_ids_are_exclusive(g4_bin):
    r = run_g4(g4_bin, "run", "-m", M, "-p", "x", "--prompt-ids", "2")
    assert r.returncode == 2 and b"exactly one" in r.stderr
