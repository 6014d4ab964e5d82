"""Shared helpers of the reference tooling: fixture specs, Gemma-style BPE tokenizer builder,
random non-trivial weight initialisation, config-spelling rewrite. Python only (transformers +
torch + tokenizers from PyPI); nothing here is used by the C engine or by CI."""

from __future__ import annotations

import json
import os
import random
import shutil

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES_DIR = os.path.join(REPO, "tests", "fixtures")
# The shared test data (the real Gemma 3 tokenizer, the Gemma 4 chat templates): $G4_SHARED_DATA, else
# the data/ folder of a `shared` directory beside the repository (../shared/data).
SHARED_DATA = os.environ.get("G4_SHARED_DATA") or os.path.join(os.path.dirname(REPO), "shared", "data")
CHAT_TEMPLATE_SRC = os.path.join(SHARED_DATA, "gemma4-chat-templates", "google-gemma-4-31B-it.jinja")

S, F = "sliding_attention", "full_attention"

# Special tokens, id = position in this list. <pad>=0 <eos>=1 <bos>=2 <unk>=3 as in Gemma; the rest
# are the Gemma 4 control strings used by the chat template (turns, thinking channel, tools) and
# the multimodal placeholders (<|image|> soft token, <|image> / <image|> begin/end, same for audio).
SPECIAL_TOKENS = [
    "<pad>", "<eos>", "<bos>", "<unk>", "<mask>",
    "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>",
    "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>",
    '<|"|>',
    "<|image|>", "<|image>", "<image|>",
    "<|audio|>", "<|audio>", "<audio|>",
    "<|video|>",
]
TOK = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
PAD_ID, EOS_ID, BOS_ID = TOK["<pad>"], TOK["<eos>"], TOK["<bos>"]
END_OF_TURN_ID = TOK["<turn|>"]
FIRST_BYTE_ID = len(SPECIAL_TOKENS)  # <0x00> .. <0xFF> follow the specials
FIRST_PIECE_ID = FIRST_BYTE_ID + 256  # first id a random prompt may use (ordinary BPE pieces)


# ----------------------------------------------------------------------------------------------
# Fixture specs. Every fixture switches on every 12B text feature: sliding x k then full (last
# layer full), k_eq_v full layers with ONE KV head, global_head_dim != head_dim, proportional
# partial RoPE (0.25, theta 1e6) on full layers / default RoPE theta 1e4 on sliding layers, a window
# shorter than the test prompts, non-trivial norm weights and layer_scalar, softcap 30, tied
# embeddings, eps 1e-6, no per-layer embeddings, no KV sharing.
# ----------------------------------------------------------------------------------------------
FIXTURES = {
    "g4-causal-tiny": dict(
        arch="causal", seed=1001, vocab_size=512, hidden_size=64, intermediate_size=128,
        layer_types=[S, S, F, S, S, F], num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, global_head_dim=32, num_global_key_value_heads=1, sliding_window=16,
        max_shard_size=None, spelling="per_layer_config", mm=False,
        initializer_range=0.1, embed_std=0.05, final_norm_scale=8.0, qk_norm_range=(0.4, 0.7),
    ),
    "g4-cond-tiny": dict(
        arch="cond", seed=2005, vocab_size=1024, hidden_size=128, intermediate_size=192,
        layer_types=[S, S, S, F, S, S, S, F], num_attention_heads=8, num_key_value_heads=4,
        head_dim=32, global_head_dim=64, num_global_key_value_heads=1, sliding_window=24,
        max_shard_size="1MB", spelling="per_layer_config", mm=False,
        initializer_range=0.1, embed_std=0.035, final_norm_scale=8.0, qk_norm_range=(0.4, 0.7),
    ),
    # Every matrix's input width a multiple of 256 (hidden 256, heads of 128 / 256, intermediate 512),
    # so that llama.cpp's K-quant recipes (Q5_K_M) keep their types instead of falling back.
    "g4-causal-k256": dict(
        arch="causal", seed=4007, vocab_size=512, hidden_size=256, intermediate_size=512,
        layer_types=[S, F], num_attention_heads=2, num_key_value_heads=1,
        head_dim=128, global_head_dim=256, num_global_key_value_heads=1, sliding_window=16,
        max_shard_size=None, spelling="per_layer_config", mm=False,
        initializer_range=0.1, embed_std=0.01, final_norm_scale=8.0, qk_norm_range=(0.4, 0.7),
    ),
    # Published-checkpoint spelling (global_head_dim / num_global_key_value_heads instead of
    # per_layer_config), tiny vision + audio embedders present (tensors a text-only engine must
    # tolerate), an irregular layer pattern, 4 query heads / 2 sliding KV heads.
    "g4-cond-mm-tiny": dict(
        arch="cond", seed=3005, vocab_size=768, hidden_size=96, intermediate_size=192,
        layer_types=[S, S, S, S, F, S, F], num_attention_heads=4, num_key_value_heads=2,
        head_dim=24, global_head_dim=48, num_global_key_value_heads=1, sliding_window=20,
        max_shard_size=None, spelling="global_head_dim", mm=True,
        initializer_range=0.1, embed_std=0.04, final_norm_scale=8.0, qk_norm_range=(0.4, 0.7),
    ),
}

# The 12B's exact widths (MODEL.md); make_12b_slice.py uses 6 layers of it (5 sliding + 1 full).
SLICE_12B = dict(
    arch="cond", seed=12012, vocab_size=262144, hidden_size=3840, intermediate_size=15360,
    layer_types=[S, S, S, S, S, F], num_attention_heads=16, num_key_value_heads=8,
    head_dim=256, global_head_dim=512, num_global_key_value_heads=1, sliding_window=1024,
    max_shard_size="2GB", spelling="global_head_dim", mm=False,
    initializer_range=0.02, embed_std=0.001625, final_norm_scale=32.0, qk_norm_range=(0.25, 0.4),
    post_norm_scale=2.0,
)


def text_config_kwargs(spec: dict) -> dict:
    return dict(
        vocab_size=spec["vocab_size"],
        hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"],
        num_hidden_layers=len(spec["layer_types"]),
        layer_types=list(spec["layer_types"]),
        num_attention_heads=spec["num_attention_heads"],
        num_key_value_heads=spec["num_key_value_heads"],
        head_dim=spec["head_dim"],
        global_head_dim=spec["global_head_dim"],
        num_global_key_value_heads=spec["num_global_key_value_heads"],
        attention_k_eq_v=True,
        sliding_window=spec["sliding_window"],
        final_logit_softcapping=30.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        hidden_activation="gelu_pytorch_tanh",
        rope_parameters={
            S: {"rope_type": "default", "rope_theta": 10_000.0},
            F: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
        },
        num_kv_shared_layers=0,
        use_double_wide_mlp=False,
        hidden_size_per_layer_input=0,
        initializer_range=spec["initializer_range"],
        max_position_embeddings=4096 if spec["vocab_size"] < 100_000 else 262_144,
        pad_token_id=PAD_ID, eos_token_id=EOS_ID, bos_token_id=BOS_ID,
    )


def build_config(spec: dict):
    from transformers import Gemma4UnifiedConfig, Gemma4UnifiedTextConfig

    tc = Gemma4UnifiedTextConfig(**text_config_kwargs(spec))
    if spec["arch"] == "causal":
        tc.architectures = ["Gemma4UnifiedForCausalLM"]
        return tc
    from transformers import Gemma4UnifiedAudioConfig, Gemma4UnifiedVisionConfig

    kw = dict(
        text_config=tc,
        vision_config=None,
        audio_config=None,
        initializer_range=spec["initializer_range"],
        tie_word_embeddings=True,
    )
    if spec["vocab_size"] < 262_144:  # toy vocab: point the multimodal ids at our specials
        kw.update(image_token_id=TOK["<|image|>"], boi_token_id=TOK["<|image>"], eoi_token_id=TOK["<image|>"],
                  audio_token_id=TOK["<|audio|>"], boa_token_id=TOK["<|audio>"], eoa_token_index=TOK["<audio|>"],
                  video_token_id=TOK["<|video|>"])
    if spec.get("mm") == "12b":
        # the 12B's embedders: transformers' defaults (16 px patches merged 3 x 3 -> 6912 raw
        # values -> 3840, a 1120-entry position table; 640-sample audio frames -> 3840)
        kw["vision_config"] = Gemma4UnifiedVisionConfig(initializer_range=spec["initializer_range"])
        kw["audio_config"] = Gemma4UnifiedAudioConfig(initializer_range=spec["initializer_range"])
    elif spec.get("mm"):
        h = spec["hidden_size"]
        # patch 4 px merged 2x2 -> 8 px model patches (8*8*3 = 192 raw values); tiny position table.
        kw["vision_config"] = Gemma4UnifiedVisionConfig(
            patch_size=4, pooling_kernel_size=2, mm_embed_dim=h, mm_posemb_size=16,
            output_proj_dims=h, initializer_range=spec["initializer_range"])
        kw["audio_config"] = Gemma4UnifiedAudioConfig(audio_embed_dim=32, initializer_range=spec["initializer_range"])
    cfg = Gemma4UnifiedConfig(**kw)
    cfg.architectures = ["Gemma4UnifiedForConditionalGeneration"]
    return cfg


def randomize_(model, spec: dict, gen) -> dict:
    """Re-draw every weight (seeded), by module type: Linear N(0, initializer_range) (bias
    U(-0.1, 0.1)), token embedding N(0, embed_std), every RMSNorm / LayerNorm scale U(0.7, 1.3)
    (LayerNorm bias U(-0.1, 0.1)), every layer_scalar buffer 1 +- U(0.05, 0.5), any other parameter
    (e.g. the vision position table) N(0, initializer_range). Returns counts of what was drawn."""
    import torch
    from torch import nn

    n = {"norm_weights": 0, "layer_scalars": 0, "linear": 0, "other": 0}
    std = spec["initializer_range"]
    # q_norm / k_norm scales set the attention logit scale (attention scaling is 1.0): around 1
    # the scores of unit-RMS heads have std ~ sqrt(head_dim), softmax is nearly one-hot and the
    # model is chaotic (float32 rounding grows ~2x per layer). Around 0.55 the scores are soft,
    # the float32 noise floor of the goldens drops ~10x, and every key in the window matters.
    qk_lo, qk_hi = spec.get("qk_norm_range", (0.7, 1.3))
    qk_norms = {id(getattr(a, nm)) for a in model.modules() for nm in ("q_norm", "k_norm") if hasattr(a, nm)}
    # post_attention / post_feedforward norm scales times `post_norm_scale` (a power of 2, so the
    # bf16 values are exact multiples of the unscaled draw): larger sublayer outputs shrink the
    # input embedding's share of the residual stream. At 12B width (3840) even a 10% share makes
    # a tied-embedding model predict its last input token forever (its self-logit stands out by
    # ~share * sqrt(hidden) standard deviations).
    post_scale = spec.get("post_norm_scale", 1.0)
    post_norms = {id(getattr(a, nm)) for a in model.modules()
                  for nm in ("post_attention_layernorm", "post_feedforward_layernorm") if hasattr(a, nm)}
    done = set()
    with torch.no_grad():
        for _, m in model.named_modules():
            is_norm = isinstance(m, nn.LayerNorm) or type(m).__name__.endswith("RMSNorm")
            for pname, p in m.named_parameters(recurse=False):
                if id(p) in done:  # tied lm_head.weight is the embedding: drawn once
                    continue
                done.add(id(p))
                if pname == "bias":
                    p.uniform_(-0.1, 0.1, generator=gen)
                elif isinstance(m, nn.Embedding):
                    p.normal_(0.0, spec["embed_std"], generator=gen)
                elif isinstance(m, nn.Linear):
                    p.normal_(0.0, std, generator=gen)
                    n["linear"] += 1
                elif id(m) in qk_norms:
                    p.uniform_(qk_lo, qk_hi, generator=gen)
                    n["norm_weights"] += 1
                elif is_norm:
                    p.uniform_(0.7, 1.3, generator=gen)
                    if id(m) in post_norms:
                        p.mul_(post_scale)
                    n["norm_weights"] += 1
                else:
                    p.normal_(0.0, std, generator=gen)
                    n["other"] += 1
        # Final norm scaled up (U(0.8 s, 1.2 s)): with tied embeddings, the logit scale and the
        # input embedding's share of the residual stream both grow with embed_std; a small
        # embed_std plus a larger final-norm scale gives wide top-1 margins AND varied greedy
        # continuations (a large embed_std makes a random model repeat its last token forever).
        s = spec.get("final_norm_scale")
        if s:
            fn = [p for name, p in model.named_parameters() if name in ("model.norm.weight", "model.language_model.norm.weight")]
            assert len(fn) == 1
            fn[0].uniform_(0.8 * s, 1.2 * s, generator=gen)
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                # 1 +- U(0.05, 0.5): never within bf16 rounding of 1.0, so a loader that
                # ignores the buffer (ones) is always caught.
                mag = torch.empty_like(b, dtype=torch.float32).uniform_(0.05, 0.5, generator=gen)
                sign = 1.0 if torch.rand((), generator=gen) < 0.5 else -1.0
                b.copy_(1.0 + sign * mag)
                n["layer_scalars"] += 1
    return n


# ----------------------------------------------------------------------------------------------
# Tokenizer: a small real Gemma-style BPE trained on generated English.
# ----------------------------------------------------------------------------------------------
_WORDS = (
    "the a an of to and in is was for on that with as by at from it this be are or have not but "
    "they we you he she his her their our my your one two three four five six seven eight nine ten "
    "time year day night week model token engine memory cache layer head window ring buffer weight "
    "matrix vector value key query attention softmax norm scale shard rank thread core kernel bench "
    "test golden check fast slow small large long short good new old first last next same other "
    "people world house water river mountain city country garden tree flower bird fish dog cat horse "
    "child mother father friend teacher student doctor book paper letter story song music picture "
    "morning evening summer winter spring autumn rain snow wind sun moon star light dark green blue "
    "red white black yellow run walk read write speak listen think know see find give take make "
    "build keep start stop open close begin end learn teach help play work live move turn call ask "
    "answer question problem reason idea result number line point place part group system program "
    "question because although however therefore while when where which what who why how very "
    "quickly slowly carefully always never often sometimes together again already still only just"
).split()


def make_corpus(seed: int, n_sentences: int = 6000) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for i in range(n_sentences):
        n = rng.randint(4, 16)
        ws = [rng.choice(_WORDS) for _ in range(n)]
        if rng.random() < 0.1:
            ws.insert(rng.randrange(len(ws)), str(rng.randint(0, 2026)))
        s = " ".join(ws)
        s = s[0].upper() + s[1:] + rng.choice([".", ".", ".", "?", "!", ","])
        if rng.random() < 0.05:
            s = "  " + s  # runs of spaces
        if rng.random() < 0.05:
            s += " café naïve — “quoted” 東京"  # non-ASCII (some will byte-fall-back)
        lines.append(s)
    return lines


def build_tokenizer(vocab_size: int, seed: int):
    """Train a byte-fallback BPE with exactly `vocab_size` pieces: ids 0..len(SPECIAL_TOKENS)-1 are
    the specials, then the 256 byte pieces <0x00>..<0xFF>, then learned pieces."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    n_learned = vocab_size - FIRST_PIECE_ID
    assert n_learned > 64, vocab_size

    def fresh(vocab=None, merges=None):
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True,
                                   fuse_unk=True) if vocab is not None else
                        models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tok.normalizer = normalizers.Replace(" ", "▁")
        tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
        return tok

    corpus = make_corpus(seed)
    trainer_tok = fresh()
    # Train on words split before each "▁" (sentencepiece-like "▁word" pieces); the saved
    # tokenizer keeps Gemma's Split(" ", MergedWithPrevious), which gives the same segmentation
    # because no learned piece has a "▁" anywhere but at its start.
    trainer_tok.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_next")
    # Train a few extra and cut: the trainer may stop short or include the alphabet; we keep the
    # alphabet (single chars) first, then merges in order, until we have exactly n_learned pieces.
    trainer = trainers.BpeTrainer(vocab_size=n_learned + 64, show_progress=False, special_tokens=[],
                                  min_frequency=2, limit_alphabet=200)
    trainer_tok.train_from_iterator(corpus, trainer=trainer)
    tj = json.loads(trainer_tok.to_str())
    learned_vocab = tj["model"]["vocab"]  # piece -> id, alphabet first then merge results
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in tj["model"]["merges"]]
    pieces = [p for p, _ in sorted(learned_vocab.items(), key=lambda kv: kv[1])]
    pieces = pieces[:n_learned]
    keep = set(pieces)
    merges = [m for m in merges if m[0] in keep and m[1] in keep and (m[0] + m[1]) in keep]
    if len(pieces) < n_learned:  # corpus too small: pad with unreachable filler pieces
        pieces += [f"<unused{i}>" for i in range(n_learned - len(pieces))]

    vocab = {}
    for t in SPECIAL_TOKENS:
        vocab[t] = len(vocab)
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for p in pieces:
        assert p not in vocab, p
        vocab[p] = len(vocab)
    assert len(vocab) == vocab_size

    tok = fresh(vocab, merges)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos>:1 $B:1", special_tokens=[("<bos>", BOS_ID)])
    assert tok.get_vocab_size(with_added_tokens=True) == vocab_size, tok.get_vocab_size()
    return tok, corpus


def write_tokenizer_files(out_dir: str, vocab_size: int, seed: int) -> None:
    tok, _ = build_tokenizer(vocab_size, seed)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    added = {
        str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                 "single_word": False, "special": True}
        for i, t in enumerate(SPECIAL_TOKENS)
    }
    tcfg = {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": added,
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "mask_token": "<mask>",
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1000000000000000019884624838656,
        "padding_side": "left",
        "spaces_between_special_tokens": False,
        "tokenizer_class": "GemmaTokenizer",
        "extra_special_tokens": {},
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2, ensure_ascii=False)
        f.write("\n")
    shutil.copyfile(CHAT_TEMPLATE_SRC, os.path.join(out_dir, "chat_template.jinja"))


def rewrite_config_spelling(out_dir: str, spec: dict) -> None:
    """Rewrite config.json's full-layer overrides from transformers' `per_layer_config` map to the
    published checkpoint's `global_head_dim` / `num_global_key_value_heads` spelling."""
    path = os.path.join(out_dir, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    tc = cfg.get("text_config", cfg)
    plc = tc.pop("per_layer_config")
    full = [i for i, t in enumerate(tc["layer_types"]) if t == F]
    assert sorted(int(k) for k in plc) == full, plc
    for k, v in plc.items():
        assert v == {"head_dim": spec["global_head_dim"], "num_key_value_heads": spec["num_global_key_value_heads"]}, v
    tc["global_head_dim"] = spec["global_head_dim"]
    tc["num_global_key_value_heads"] = spec["num_global_key_value_heads"]
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
