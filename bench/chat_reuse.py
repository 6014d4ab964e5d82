#!/usr/bin/env python3
"""Time to first token of `gemma4c chat`'s last turn after a long conversation, with the slot's
KV reused, against `gemma4c run` on the same conversation from an empty slot. A conversation of
--turns user messages of --words words each, then a short question, goes through `chat -v` (greedy,
-n replies); the last turn's whole rendered prompt then goes through `run -v --prompt-ids` with the
same --prefill-chunk. Every reply must equal what `run` gives (checked for the last turn, and for
each turn with --check-all; the conversation keeps each reply as chat printed it, so a model whose
replies hold reasoning or tool calls is not measured right). Prints one JSON line: prompt tokens,
tokens reused, chat's TTFT (render, reuse and prefill) and run's prefill seconds.

  python3 bench/chat_reuse.py --bin build/gemma4c -m MODEL [--threads 2] [--prefill-chunk 64]
"""
import argparse
import json
import random
import re
import subprocess
import sys

WORDS = ("the river city morning light people market bridge history music garden winter summer train "
         "station old new small large quiet busy street window story friend").split()


def g4(args, *a, stdin=None):
    r = subprocess.run([args.bin, *map(str, a)], input=stdin, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"gemma4c {a[0]} failed: {r.stderr.strip()}")
    return r


def fresh(args, msgs):
    """`run` on the rendered conversation: (reply, prompt tokens, prefill seconds)."""
    text = g4(args, "template", "-m", args.model,
              stdin=json.dumps({"messages": msgs, "add_generation_prompt": True})).stdout
    ids = g4(args, "tokenize", "-m", args.model, stdin=text).stdout.strip()[1:-1]
    r = g4(args, "run", "-m", args.model, "--prompt-ids", ids, "-n", args.n, "-v", "--threads", args.threads,
           "--prefill-chunk", args.prefill_chunk)
    m = re.search(r"prefill (\d+) tokens ([0-9.]+) s", r.stderr)
    return r.stdout, int(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/gemma4c")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill-chunk", type=int, default=64)
    ap.add_argument("--turns", type=int, default=7)
    ap.add_argument("--words", type=int, default=190)
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--check-all", action="store_true")
    args = ap.parse_args()
    rnd = random.Random(1)
    turns = ["Please summarise this note: " + " ".join(rnd.choice(WORDS) for _ in range(args.words)) + "."
             for _ in range(args.turns)] + ["Now give me a one-line title for all of it."]
    r = g4(args, "chat", "-m", args.model, "-n", args.n, "-v", "--threads", args.threads,
           "--prefill-chunk", args.prefill_chunk, stdin="".join(t + "\n" for t in turns))
    replies = r.stdout.split("\n")[:-1]
    stats = [tuple(map(float, m)) for m in
             re.findall(r"prompt (\d+) tokens, (\d+) of them reused from the slot(?: \((?:rewind|snapshot)\))?; first token after ([0-9.]+) s", r.stderr)]
    assert len(replies) == len(turns) == len(stats), r.stderr
    msgs = []
    for k, (t, reply) in enumerate(zip(turns, replies)):
        msgs.append({"role": "user", "content": t})
        if args.check_all or k == len(turns) - 1:
            out, n, prefill_s = fresh(args, msgs)
            if out != reply + "\n":
                sys.exit(f"turn {k + 1}: chat answered {reply!r}, run {out!r}")
        msgs.append({"role": "assistant", "content": reply})
    n_prompt, reused, ttft = stats[-1]
    print(json.dumps({"prompt_tokens": int(n_prompt), "reused_tokens": int(reused), "chat_ttft_s": ttft,
                      "fresh_prefill_s": prefill_s, "speedup": round(prefill_s / ttft, 1), "same_text": True}))


if __name__ == "__main__":
    main()
