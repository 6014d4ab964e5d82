#!/usr/bin/env python3
"""Time to first token of a chat's second turn with the prompt cache, against the same request
on a server without it. A conversation of >= --min-tokens prompt tokens (a long system prompt and
user message) is answered once (turn 1, greedy) on a fresh server with the cache, then the second
turn (turn 1, the answer, a new question) is sent to it, and to a `--cache-ram 0` server; once
greedy and once seeded, each on its own fresh cached server, --repeats times. TTFT is the
server's own (the g4_time_to_first_token_seconds sum before and after the request); the texts of
both servers must be identical. Prints a JSON line (medians); --md FILE appends a report.

  python3 bench/prompt_cache.py --bin build/gemma4c -m MODEL [--template-dir DIR] [--threads 2]

--template-dir: a checkpoint without a chat template borrows DIR's chat_template.jinja (the
model directory is mirrored with symbolic links into a temporary one).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

PARAGRAPH = ("Section {i}. The harbour master logged {a} ships arriving before noon and {b} leaving "
             "after the tide turned; the cargo manifests listed grain, timber, copper wire and {c} "
             "crates of glassware, each inspected twice before the warehouses closed for the night. ")


class Server:
    def __init__(self, args, model, cache_ram):
        cmd = [args.bin, "serve", "-m", model, "--port", "0", "--ctx", str(args.ctx), "--threads",
               str(args.threads), "--cache-ram", str(cache_ram)]
        self.p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.log, self.port, ready = [], None, threading.Event()

        def drain():
            for line in self.p.stderr:
                self.log.append(line)
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        t0 = time.time()
        while time.time() - t0 < 300:
            if self.port and self.get("/health", ok_only=True):
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.2)
        raise SystemExit("server did not start:\n" + "".join(self.log))

    def get(self, path, ok_only=False):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                return r.read().decode()
        except Exception:
            if ok_only:
                return None
            raise

    def ttft_sum(self):
        m = re.search(r"^g4_time_to_first_token_seconds_sum (\S+)$", self.get("/metrics"), re.M)
        return float(m.group(1))

    def chat(self, messages, max_tokens, **kw):
        """(content, usage, server TTFT seconds, wall seconds)"""
        body = json.dumps({"messages": messages, "max_tokens": max_tokens, "ignore_eos": True, **kw}).encode()
        before, t0 = self.ttft_sum(), time.perf_counter()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions", body,
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=3600) as r:
            out = json.loads(r.read())
        wall = time.perf_counter() - t0
        msg = out["choices"][0]["message"]
        return (msg.get("content") or "") + (msg.get("reasoning_content") or ""), out["usage"], \
            self.ttft_sum() - before, wall

    def stop(self):
        self.p.terminate()
        return self.p.wait(60)


def with_template(model, template_dir, tmp):
    """A directory of links to model's files plus template_dir's chat_template.jinja."""
    d = os.path.join(tmp, "model")
    os.mkdir(d)
    for f in os.listdir(model):
        os.symlink(os.path.join(os.path.abspath(model), f), os.path.join(d, f))
    os.symlink(os.path.abspath(os.path.join(template_dir, "chat_template.jinja")), os.path.join(d, "chat_template.jinja"))
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/gemma4c")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--template-dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--min-tokens", type=int, default=1500)
    ap.add_argument("--answer-tokens", type=int, default=100, help="turn 1's answer (past the rings' reach)")
    ap.add_argument("--gen", type=int, default=16, help="tokens generated in turn 2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--md", help="append a markdown report here")
    args = ap.parse_args()

    modes = {"greedy": {"temperature": 0}, "seeded": {"temperature": 1.0, "seed": 1234}}
    hot = {k: [] for k in modes}
    cold = {k: [] for k in modes}
    with tempfile.TemporaryDirectory() as tmp:
        model = with_template(args.model, args.template_dir, tmp) if args.template_dir else args.model
        text = "".join(PARAGRAPH.format(i=i, a=3 * i + 7, b=2 * i + 1, c=11 * i) for i in range(32))
        turn1 = [{"role": "system", "content": "You answer questions about the harbour log below.\n" + text},
                 {"role": "user", "content": "Which section mentions the most crates? Explain step by step."}]
        turn2 = None
        for _ in range(args.repeats):
            for k, kw in modes.items():
                warm = Server(args, model, 8192)
                try:
                    answer, use1, _, _ = warm.chat(turn1, args.answer_tokens, temperature=0)
                    if use1["prompt_tokens"] < args.min_tokens:
                        raise SystemExit(f"turn 1 has {use1['prompt_tokens']} prompt tokens, fewer than {args.min_tokens}")
                    turn2 = turn1 + [{"role": "assistant", "content": answer},
                                     {"role": "user", "content": "Now list the sections in reverse order."}]
                    hot[k].append(warm.chat(turn2, args.gen, **kw))
                finally:
                    warm.stop()
            cold_srv = Server(args, model, 0)
            try:
                for k, kw in modes.items():
                    cold[k].append(cold_srv.chat(turn2, args.gen, **kw))
            finally:
                cold_srv.stop()

    med = lambda xs: sorted(xs)[len(xs) // 2]
    res = {"model": os.path.basename(os.path.normpath(args.model)), "threads": args.threads, "repeats": args.repeats,
           "answer_tokens": args.answer_tokens, "turn1_prompt_tokens": use1["prompt_tokens"],
           "turn2_prompt_tokens": hot["greedy"][0][1]["prompt_tokens"]}
    for k in modes:
        tc, tf = med([h[2] for h in hot[k]]), med([c[2] for c in cold[k]])
        res[k] = {"cached_tokens": hot[k][0][1]["prompt_tokens_details"]["cached_tokens"],
                  "ttft_cached_s": [round(h[2], 3) for h in hot[k]], "ttft_fresh_s": [round(c[2], 3) for c in cold[k]],
                  "speedup_of_medians": round(tf / tc, 1) if tc > 0 else None,
                  "identical_text": all(h[0] == c[0] for h, c in zip(hot[k], cold[k]))}
    print(json.dumps(res))
    if args.md:
        with open(args.md, "a", encoding="utf-8") as f:
            f.write(f"\n## {res['model']}\n\nturn 1: {res['turn1_prompt_tokens']} prompt tokens, answered in "
                    f"{args.answer_tokens} tokens; turn 2: {res['turn2_prompt_tokens']} prompt tokens, {args.gen} "
                    f"generated; {args.threads} threads; median of {args.repeats} runs (each run's value in "
                    "brackets).\n\n"
                    "| turn 2 | cached tokens | TTFT cached (s) | TTFT fresh server (s) | sooner | identical text |\n"
                    "|---|---:|---:|---:|---:|---|\n")
            for k in modes:
                r = res[k]
                f.write(f"| {k} | {r['cached_tokens']} | {med(r['ttft_cached_s']):.3f} {r['ttft_cached_s']} | "
                        f"{med(r['ttft_fresh_s']):.3f} {r['ttft_fresh_s']} | {r['speedup_of_medians']}x | "
                        f"{'yes' if r['identical_text'] else 'NO'} |\n")
    ok = all(res[k]["identical_text"] for k in modes)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
