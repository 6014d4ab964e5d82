#!/usr/bin/env python3
"""Speculative decoding's costs and gains (docs/speculative.md), in three parts:

  verify   `gemma4c bench --verify 1..8`: a verify step of K + 1 rows against a one-row decode step
           on the bench checkpoint (default ${TMPDIR:-/tmp}/g4-bench), at --depth positions;
  rewrite  tokens/s of `gemma4c run --spec ngram` against plain greedy `run` on a rewriting task (a
           paragraph given twice with small edits, the model asked for it once more) on a small real
           model (--small; default the Gemma 3 270M Q4_K_M of scripts/gemma3-270m.sh — its BF16
           re-encoding, bench/requant_gguf.py --type bf16, is the one whose multi-row steps are cheap
           in exact mode); runs alternate, median of --reps, and both outputs must be identical;
  free     the same on a chat request for a story (a small model may still repeat itself);
  nomatch  random prompt ids into the random-weight bench checkpoint, whose output hardly repeats:
           what rounds of mostly rejected drafts cost;
  mtp      a model, not a measurement: the speedup an MTP drafter would give at acceptance rates
           alpha, from the verify part's step-cost ratios: per round E[tokens] = (1 - a^(K+1)) / (1 - a)
           (each draft kept with probability a, independently: Leviathan et al.), cost = ratio(K) +
           K * c, c the drafter's step against the target's (--draft-cost, default 0.034: the 12B
           assistant's bf16 bytes against the 12B's).

  python3 bench/speculate.py --bin build/gemma4c [--parts verify,rewrite,mtp] [--threads 2]
      [--reps 3] [--depth 256] [-n 160] [--save]

Raw outputs go to bench/out/speculate/; the verify part's JSON there feeds the mtp part of a later
run. --save writes bench/results/DATE-speculate-COMMIT.md with every command. Standard library only.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "bench", "out", "speculate")

PARAGRAPH = ("The city council met on Tuesday evening to discuss the new park proposal. Residents spoke for "
             "nearly two hours about the playground, the walking paths and the plan to plant three hundred "
             "trees along the river. The mayor promised a final decision before the end of the month, and "
             "the budget committee will publish its estimate of the costs next week. Several shop owners "
             "asked whether the works would close the market street during the summer season.")
EDITS = [("Tuesday", "Wednesday"), ("three hundred", "four hundred"), ("next week", "on Friday")]


def rewrite_prompt():
    """The paragraph, a copy with two small edits, and a request for a third version."""
    second = PARAGRAPH
    for a, b in EDITS[:2]:
        second = second.replace(a, b)
    return (f"Draft 1:\n{PARAGRAPH}\n\nDraft 2 (corrected):\n{second}\n\n"
            f"Draft 3 (corrected again, '{EDITS[2][0]}' becomes '{EDITS[2][1]}'):\n")


def sh(cmd, log):
    """Runs cmd (a list), appends it and its stderr to the log, returns (stdout, stderr)."""
    r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
    with open(log, "a") as f:
        f.write("$ " + " ".join(map(str, cmd)) + "\n" + r.stderr + "\n")
    if r.returncode:
        sys.exit(f"failed ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stderr.strip()}")
    return r.stdout, r.stderr


def part_verify(a, rep):
    cmd = [a.bin, "bench", "-m", a.bench_model, "-p", 0, "-n", 0, "--verify", a.ks, "--depth", a.depth,
           "--reps", a.reps, "--no-peaks", "--threads", a.threads]
    out, _ = sh(cmd, os.path.join(OUT, "verify.log"))
    js = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    # a run of some Ks adds to the last run's others when the settings match (on a loaded host the
    # eight Ks may not fit one run's time)
    path = os.path.join(OUT, "verify.json")
    if os.path.exists(path) and not a.fresh:
        with open(path) as f:
            old = json.load(f)
        same = all(old.get(k) == js.get(k) for k in ("model", "depth", "threads", "kernels"))
        if same:
            mine = {v["k"] for v in js["verify"]}
            js["verify"] = sorted([v for v in old["verify"] if v["k"] not in mine] + js["verify"], key=lambda v: v["k"])
    with open(path, "w") as f:
        json.dump(js, f)
    rep.append("## Verify step against a decode step\n")
    rep.append(f"Bench checkpoint ({js['model_info']['architecture']}, hidden {js['model_info']['hidden']}, "
               f"{js['model_info']['n_layers']} layers, vocab {js['model_info']['vocab']}), kernels "
               f"`{js['kernels']}`, {js['threads']} threads, at position {js['depth']}; greedy steps, each undone by "
               f"a rewind, decode and verify alternating; medians over {8 * a.reps} pairs.\n")
    rep.append("| K drafts | rows | verify step (ms) | decode step (ms) | verify / decode (median of pairs) |")
    rep.append("|---:|---:|---:|---:|---:|")
    for v in js["verify"]:
        rep.append(f"| {v['k']} | {v['rows']} | {1e3 * v['step_s']:.1f} | {1e3 * v['decode_step_s']:.1f} | "
                   f"{v['ratio']:.3f} |")
    rep.append("\nA round pays when it yields more tokens than verify / decode (the drafter's own cost aside).")
    rep.append(f"\nCommand (per run of Ks; runs with the same settings add up): "
               f"`{' '.join(map(str, [os.path.relpath(a.bin, REPO)] + cmd[1:])).replace(a.bench_model, 'BENCH_MODEL')}`\n")
    return js


def run_once(a, prompt, spec, log, chat=False):
    cmd = [a.bin, "run", "-m", a.small, "-p", prompt, "-n", a.n, "--ignore-eos", "-v", "--threads", a.threads]
    if chat:
        cmd.append("--chat")
    if spec:
        cmd += ["--spec", "ngram"] + (["--draft-max", a.draft_max] if a.draft_max else [])
    out, err = sh(cmd, log)
    m = re.search(r"decode (\d+) tokens ([0-9.]+) s", err)
    s = re.search(r"speculative: (\d+) verify rounds, (\d+) plain steps; drafted (\d+), accepted (\d+)", err)
    return out, int(m.group(1)) / float(m.group(2)), s.groups() if s else None


FREE_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle.\n\n"


def part_rewrite(a, rep, free=False):
    prompt = FREE_PROMPT if free else rewrite_prompt()
    log = os.path.join(OUT, "free.log" if free else "rewrite.log")
    plain, spec, stats = [], [], None
    for _ in range(a.reps):
        out_p, tp, _ = run_once(a, prompt, False, log, chat=free)
        out_s, ts, stats = run_once(a, prompt, True, log, chat=free)
        if out_p != out_s:
            sys.exit("the speculative output differs from plain decoding's:\n" + out_p + "\n---\n" + out_s)
        plain.append(tp)
        spec.append(ts)
    mp, ms = statistics.median(plain), statistics.median(spec)
    rounds, steps, drafted, accepted = map(int, stats)
    task = (f"a chat request for a story ({FREE_PROMPT.strip()!r}, `--chat`): little to copy" if free else
            f"the prompt gives a {len(PARAGRAPH.split())}-word paragraph twice with small edits and asks for a "
            "third version")
    rep.append("## Free text with n-gram drafts\n" if free else "## Rewriting with n-gram drafts\n")
    rep.append(f"`{os.path.basename(a.small)}`, {a.threads} threads, default kernels; {task}; "
               f"{a.n} greedy tokens (`--ignore-eos`), plain and `--spec ngram` alternating, {a.reps} runs each. "
               "Output identical in every run.\n")
    rep.append("| | decode tok/s (median) | runs |")
    rep.append("|---|---:|---|")
    rep.append(f"| plain | {mp:.2f} | {', '.join(f'{x:.2f}' for x in plain)} |")
    rep.append(f"| `--spec ngram`{' --draft-max ' + str(a.draft_max) if a.draft_max else ''} | {ms:.2f} | "
               f"{', '.join(f'{x:.2f}' for x in spec)} |")
    rep.append(f"\nSpeedup **{ms / mp:.2f}x**. Last run: {rounds} verify rounds and {steps} plain steps for "
               f"{a.n - 1} tokens after the first; drafted {drafted}, accepted {accepted} "
               f"({100 * accepted / max(drafted, 1):.0f}%); {(a.n - 1) / max(rounds + steps, 1):.2f} tokens a step.\n")
    rep.append("The generated text (identical in both modes):\n\n```\n" + out_s.strip() + "\n```\n")
    part = "free" if free else "rewrite"
    small = f" --small {os.path.basename(a.small)}" if a.small_given else ""
    rep.append(f"Command: `bench/speculate.py --parts {part}{small} --threads {a.threads} --reps {a.reps} -n {a.n}` "
               f"(the `run` lines are in bench/out/speculate/{part}.log)\n")
    return ms / mp


def part_nomatch(a, rep):
    """Random ids into the random-weight bench checkpoint: its output hardly repeats, so most rounds'
    drafts are rejected: what speculation costs where it cannot help. --amx-gemv1-k-below 8192 lets
    one row take the same AMX kernel as several over its 6144-wide down projection, so that the
    outputs can be compared token for token (numerics.md)."""
    import random
    rng = random.Random(7)
    ids = ",".join(str(rng.randrange(3, 262000)) for _ in range(64))
    log = os.path.join(OUT, "nomatch.log")
    base = [a.bin, "run", "-m", a.bench_model, "--prompt-ids", ids, "-n", a.n_nomatch, "--ids", "--ignore-eos", "-v",
            "--threads", a.threads, "--amx-gemv1-k-below", 8192]
    res = {}
    for name, extra in (("plain", []), ("spec", ["--spec", "ngram"])):
        out, err = sh(base + extra, log)
        m = re.search(r"decode (\d+) tokens ([0-9.]+) s", err)
        st = re.search(r"speculative: (\d+) verify rounds, (\d+) plain steps; drafted (\d+), accepted (\d+)", err)
        res[name] = (out, int(m.group(1)) / float(m.group(2)), st.groups() if st else None)
    same = res["plain"][0] == res["spec"][0]
    rounds, steps, drafted, accepted = map(int, res["spec"][2])
    rep.append("## Where drafts fail: random ids into the bench checkpoint\n")
    rep.append(f"64 random prompt ids, {a.n_nomatch} greedy tokens, {a.threads} threads, `--amx-gemv1-k-below 8192`; "
               f"output {'identical' if same else 'DIFFERENT'}.\n")
    rep.append("| | decode tok/s |\n|---|---:|")
    rep.append(f"| plain | {res['plain'][1]:.2f} |\n| `--spec ngram` | {res['spec'][1]:.2f} |")
    rep.append(f"\nRatio {res['spec'][1] / res['plain'][1]:.2f}x; {rounds} verify rounds and {steps} plain steps; drafted "
               f"{drafted}, accepted {accepted}.\n")
    rep.append(f"Command: `bench/speculate.py --parts nomatch --threads {a.threads} --n-nomatch {a.n_nomatch}` "
               "(the `run` lines are in bench/out/speculate/nomatch.log)\n")


def part_mtp(a, rep, js):
    ratio = {v["k"]: v["ratio"] for v in js["verify"]}
    alphas = [0.5, 0.6, 0.7, 0.8, 0.9]
    rep.append("## Expected MTP speedup (a model, not a measurement)\n")
    rep.append("Per round the drafter proposes K tokens, each kept with probability a given the ones before it "
               "(independent, as in Leviathan et al.): E[tokens] = (1 - a^(K+1)) / (1 - a); the round costs a "
               f"verify step (the measured ratio above) plus K drafter steps of c = {a.draft_cost} of a target "
               "step each. Speedup = E[tokens] / (ratio(K) + K c).\n")
    rep.append("| K | verify / decode | " + " | ".join(f"a = {x}" for x in alphas) + " |")
    rep.append("|---:|---:|" + "---:|" * len(alphas))
    best = {}
    for k in sorted(ratio):
        row = []
        for al in alphas:
            s = (1 - al ** (k + 1)) / (1 - al) / (ratio[k] + k * a.draft_cost)
            row.append(s)
            if s > best.get(al, (0, 0))[0]:
                best[al] = (s, k)
        rep.append(f"| {k} | {ratio[k]:.3f} | " + " | ".join(f"{s:.2f}x" for s in row) + " |")
    rep.append("\nBest K per acceptance rate: " + "; ".join(f"a = {al}: {s:.2f}x at K = {k}" for al, (s, k) in best.items()) + ".\n")
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(REPO, "build", "gemma4c"))
    p.add_argument("--bench-model", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "g4-bench"))
    p.add_argument("--small", default=None, help="model of the rewrite part (default: scripts/gemma3-270m.sh)")
    p.add_argument("--parts", default="verify,rewrite,mtp")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--ks", default="1,2,3,4,5,6,7,8")
    p.add_argument("--depth", type=int, default=256)
    p.add_argument("-n", type=int, default=160)
    p.add_argument("--n-nomatch", type=int, default=24)
    p.add_argument("--draft-max", type=int, default=0)
    p.add_argument("--draft-cost", type=float, default=0.034)
    p.add_argument("--fresh", action="store_true", help="verify: do not add to the last run's Ks")
    p.add_argument("--save", action="store_true")
    a = p.parse_args()
    a.bin = os.path.abspath(a.bin)
    parts = a.parts.split(",")
    a.small_given = a.small is not None
    os.makedirs(OUT, exist_ok=True)
    if ("rewrite" in parts or "free" in parts) and not a.small:
        a.small = subprocess.run([os.path.join(REPO, "scripts", "gemma3-270m.sh")], capture_output=True, text=True,
                                 check=True).stdout.strip()
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cpu = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read())
    now = datetime.datetime.now(datetime.timezone.utc)
    rep = [f"# Speculative decoding — {now:%Y-%m-%d %H:%M} UTC, gemma4c {commit}\n",
           f"CPU: {cpu.group(1) if cpu else 'unknown'}, {os.cpu_count()} CPUs (a shared virtual machine: "
           "compare ratios within this file).\n"]
    js = None
    partial = os.path.join(OUT, "report.md")   # the report so far, rewritten after every part

    def keep():
        with open(partial, "w") as f:
            f.write("\n".join(rep) + "\n")
    if "verify" in parts:
        js = part_verify(a, rep)
        keep()
    if "rewrite" in parts:
        part_rewrite(a, rep)
        keep()
    if "free" in parts:
        part_rewrite(a, rep, free=True)
        keep()
    if "nomatch" in parts:
        part_nomatch(a, rep)
        keep()
    if "mtp" in parts:
        if js is None:
            with open(os.path.join(OUT, "verify.json")) as f:
                js = json.load(f)
        part_mtp(a, rep, js)
    text = "\n".join(rep)
    print(text)
    if a.save:
        path = os.path.join(REPO, "bench", "results", f"{now:%Y-%m-%d}-speculate-{commit}.md")
        with open(path, "a") as f:
            f.write(text + "\n")
        print(f"saved {os.path.relpath(path, REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
