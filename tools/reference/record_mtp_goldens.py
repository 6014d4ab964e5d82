#!/usr/bin/env python3
"""Record transformers' assisted generation with each MTP drafter of tests/fixtures/mtp/ (written
by make_mtp_fixtures.py) on the g4-causal-tiny target: float32, eager attention, greedy.

For each drafter and prompt, tests/fixtures/mtp/<name>/goldens.json holds
  - prompt: the token ids (with <bos>);
  - greedy: plain greedy decoding (model.generate(do_sample=False)), N_NEW tokens;
  - assisted: model.generate(..., assistant_model=drafter, do_sample=False); asserted == greedy;
  - rounds: one entry per verify round, {"drafted": [ids], "accepted": n} (the drafts of
    SinglePositionMultiTokenCandidateGenerator.get_candidates and the n_matches
    _assisted_decoding passes on to update_candidate_strategy, after its EOS / length cuts);
  - first_logits: the drafter's logits of every draft step of the first round (right after the
    prompt's prefill), [K][vocab] float32 as a flat list.

Usage:  python tools/reference/record_mtp_goldens.py [NAME ...]"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import g4ref  # noqa: E402
import make_mtp_fixtures as mk  # noqa: E402

N_NEW = 40
# prompt lengths: shorter than the sliding window, about the window, past it, far past it
PROMPT_LENGTHS = [("short", 5), ("window", 15), ("over_window", 27), ("long", 70)]


def prompts(seed: int = 2801) -> list[tuple[str, list[int]]]:
    rng = random.Random(seed)
    lo, hi = g4ref.FIRST_PIECE_ID, g4ref.FIXTURES["g4-causal-tiny"]["vocab_size"] - 1
    return [(name, [g4ref.BOS_ID] + [rng.randint(lo, hi) for _ in range(n - 1)]) for name, n in PROMPT_LENGTHS]


def record(name: str) -> None:
    import torch
    from transformers import Gemma4UnifiedAssistantForCausalLM
    from transformers.generation import candidate_generator as cg

    torch.set_num_threads(1)
    target = mk.load_target()
    d = os.path.join(mk.OUT_DIR, name)
    asst = Gemma4UnifiedAssistantForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    gen_cls = cg.SinglePositionMultiTokenCandidateGenerator
    orig_get, orig_update = gen_cls.get_candidates, gen_cls.update_candidate_strategy
    log: dict = {}

    def get_candidates(self, input_ids, *a, **kw):
        ids, logits = orig_get(self, input_ids, *a, **kw)
        if not kw.get("is_first_iteration"):
            log["rounds"].append({"drafted": ids[0, input_ids.shape[1]:].tolist(), "accepted": None})
            if logits is not None and log["first_logits"] is None:
                log["first_logits"] = logits[0].float().flatten().tolist()
        return ids, logits

    def update(self, input_ids, scores, num_matches):
        if log["rounds"] and log["rounds"][-1]["accepted"] is None:
            log["rounds"][-1]["accepted"] = int(num_matches)
        return orig_update(self, input_ids, scores, num_matches)

    gen_cls.get_candidates, gen_cls.update_candidate_strategy = get_candidates, update
    cases = []
    try:
        for case, p in prompts():
            x = torch.tensor([p])
            with torch.no_grad():
                greedy = target.generate(x, max_new_tokens=N_NEW, do_sample=False, pad_token_id=g4ref.PAD_ID)
                log.update(rounds=[], first_logits=None)
                assisted = target.generate(x, assistant_model=asst, max_new_tokens=N_NEW, do_sample=False,
                                           pad_token_id=g4ref.PAD_ID)
            g, a = greedy[0, len(p):].tolist(), assisted[0, len(p):].tolist()
            assert g == a, (name, case, g, a)
            assert all(r["accepted"] is not None for r in log["rounds"]), log["rounds"]
            acc = sum(r["accepted"] for r in log["rounds"])
            drafted = sum(len(r["drafted"]) for r in log["rounds"])
            print(f"{name}/{case}: {len(log['rounds'])} rounds, {acc}/{drafted} drafts accepted, {len(g)} tokens")
            cases.append(dict(name=case, prompt=p, greedy=g, assisted=a, rounds=log["rounds"],
                              first_logits=log["first_logits"]))
    finally:
        gen_cls.get_candidates, gen_cls.update_candidate_strategy = orig_get, orig_update
    out = dict(target="g4-causal-tiny", num_assistant_tokens=asst.generation_config.num_assistant_tokens,
               n_new=N_NEW, cases=cases)
    with open(os.path.join(d, "goldens.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=list(mk.DRAFTERS))
    for n in ap.parse_args().names:
        record(n)


if __name__ == "__main__":
    main()
