#!/usr/bin/env python3
"""Regenerates tests/fixtures/tokenizer/{goldens,synthetic}.jsonl.gz. goldens: a deterministic corpus (>= 2,000 strings:
many scripts, emoji and ZWJ sequences, whitespace runs, control characters, code, ~100 KB strings,
special-token text) encoded and decoded by HuggingFace `tokenizers` on the real Gemma 3 tokenizer,
plus random id sequences (byte-fallback runs, specials) decoded. synthetic: small tokenizers trained
here, each stressing one component (Split behaviours, added-token flags, Prepend/Strip, unk, ...),
with HF's encodings of a few strings. tests/c/test_tokenizer.c compares gemma4c with both.

usage: "$G4_REF_PY" tools/reference/make_tokenizer_goldens.py \
           [--tokenizer ../shared/data/gemma3-tokenizer] [--out tests/fixtures/tokenizer/goldens.jsonl.gz]

Every string is stored in the fixture, so the tests never need this script or `tokenizers`; the
script only needs the same seed to rebuild the same corpus (code samples come from fixed text in
this file, not from the Python installation).
"""
import argparse
import gzip
import json
import pathlib
import random

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = 20261202

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How are you doing today?",
    "Pack my box with five dozen liquor jugs.",
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
    "El veloz murciélago hindú comía feliz cardillo y kiwi.",
    "À noite, vovô Kowalsky vê o ímã cair no pé do pinguim queixoso e vovó põe açúcar no chá de tâmaras do jabuti feliz.",
    "Pchnąć w tę łódź jeża lub ośm skrzyń fig.",
    "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Árvíztűrő tükörfúrógép.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Жебракують філософи при ґанку церкви в Гадячі, ще й шатро їхнє п'яне знаємо.",
    "Τάχιστη αλώπηξ βαφής ψημένη γη, δρασκελίζει υπέρ νωθρού κυνός.",
    "דג סקרן שט בים מאוכזב ולפתע מצא חברה.",
    "صِف خَلقَ خَودِ كَمِثلِ الشَمسِ إِذ بَزَغَت يَحظى الضَجيعُ بِها نَجلاءَ مِعطارِ",
    "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق.",
    "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम।",
    "আমি বাংলায় গান গাই।",
    "யாமறிந்த மொழிகளிலே தமிழ்மொழி போல் இனிதாவது எங்கும் காணோம்.",
    "నేను తెలుగు మాట్లాడతాను.",
    "ಕನ್ನಡ ಒಂದು ದ್ರಾವಿಡ ಭಾಷೆ.",
    "മലയാളം ഒരു ദ്രാവിഡ ഭാഷയാണ്.",
    "ਪੰਜਾਬੀ ਇੱਕ ਇੰਡੋ-ਆਰੀਆਈ ਭਾਸ਼ਾ ਹੈ।",
    "ગુજરાતી ભાષા",
    "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน",
    "ສະບາຍດີ ພາສາລາວ",
    "ខ្ញុំអាចញ៉ាំកញ្ចក់បាន ដោយគ្មានបញ្ហា",
    "မြန်မာဘာသာ",
    "いろはにほへと ちりぬるを わかよたれそ つねならむ",
    "私はガラスを食べられます。それは私を傷つけません。",
    "カタカナとひらがなと漢字が混ざった文章です。",
    "我能吞下玻璃而不伤身体。",
    "我能吞下玻璃而不傷身體。",
    "天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。",
    "키스의 고유조건은 입술끼리 만나야 하고 특별한 기술은 필요치 않다.",
    "나는 유리를 먹을 수 있어요. 그래도 아프지 않아요.",
    "Մի՞թե կարող եմ ապակի ուտել։",
    "მინას ვჭამ და არა მტკივა.",
    "ཤེལ་སྒོ་ཟ་ནས་ང་ན་གི་མ་རེད།",
    "ᠪᠢ ᠰᠢᠯᠢ ᠢᠳᠡᠶᠦ ᠴᠢᠳᠠᠨᠠ",
    "ኢትዮጵያ አፍሪካ ውስጥ ናት።",
    "ᐊᓕᒍᖅ ᓂᕆᔭᕌᖓᒃᑯ ᓱᕋᙱᑦᑐᓐᓇᖅᑐᖓ",
    "Tôi có thể ăn thủy tinh mà không hại gì.",
    "Mogę jeść szkło i mi nie szkodzi.",
    "Eg kan eta glas utan å skada meg.",
    "Jeg kan spise glas, det gør ikke ondt på mig.",
    "Saya boleh makan kaca dan ia tidak mencederakan saya.",
    "Naweza kula bilauri na sikunyui.",
    "Ek kan glas eet, maar dit doen my nie skade nie.",
    "Ὕαλον ϕαγεῖν δύναμαι· τοῦτο οὔ με βλάπτει.",
    "ᚠᛇᚻ᛫ᛒᛦᚦ᛫ᚠᚱᚩᚠᚢᚱ᛫ᚠᛁᚱᚪ᛫ᚷᛖᚻᚹᛦᛚᚳᚢᛗ",
    "𝔗𝔥𝔢 𝔮𝔲𝔦𝔠𝔨 𝔟𝔯𝔬𝔴𝔫 𝔣𝔬𝔵 — 𝐌𝐚𝐭𝐡 𝑖𝑡𝑎𝑙𝑖𝑐 𝟙𝟚𝟛",
    "∮ E⋅da = Q,  n → ∞, ∑ f(i) = ∏ g(i), ∀x∈ℝ: ⌈x⌉ = −⌊−x⌋, α ∧ ¬β = ¬(¬α ∨ β)",
    "ℕ ⊆ ℕ₀ ⊂ ℤ ⊂ ℚ ⊂ ℝ ⊂ ℂ, ⊥ < a ≠ b ≡ c ≤ d ≪ ⊤ ⇒ (A ⇔ B)",
    "2H₂ + O₂ ⇌ 2H₂O, R = 4.7 kΩ, ⌀ 200 mm",
    "¡¿Qué?! «Guillemets» „Anführungszeichen“ ‚single‘ 『括弧』 【注】",
    "Price: $1,234.56 — €99,99 — £5 — ¥1000 — ₹500 — ₿0.01 — 50% off!!!",
    "E-mail: someone@example.com, URL: https://example.org/path?q=1&r=2#frag",
    "Mixed: English, русский, 中文, العربية, हिन्दी, 日本語, 한국어, ไทย.",
    "   leading spaces and trailing spaces   ",
    "Don't, won't, can't, shouldn't've, y'all'd've.",
    "It's 3:45 p.m. on 2024-01-15; temperature -3.5°C (25.7°F).",
]

SCRIPT_RANGES = {
    "latin": [(0x41, 0x5A), (0x61, 0x7A)],
    "latin_ext": [(0xC0, 0x24F), (0x1E00, 0x1EFF)],
    "ipa": [(0x250, 0x2AF)],
    "greek": [(0x391, 0x3A9), (0x3B1, 0x3C9), (0x1F00, 0x1FFF)],
    "cyrillic": [(0x400, 0x4FF)],
    "armenian": [(0x531, 0x556), (0x561, 0x587)],
    "hebrew": [(0x5D0, 0x5EA), (0x591, 0x5C7)],
    "arabic": [(0x621, 0x64A), (0x660, 0x669), (0x64B, 0x652), (0x6A0, 0x6FF)],
    "syriac": [(0x710, 0x74A)],
    "thaana": [(0x780, 0x7B1)],
    "devanagari": [(0x900, 0x97F)],
    "bengali": [(0x980, 0x9FE)],
    "gurmukhi": [(0xA00, 0xA76)],
    "gujarati": [(0xA81, 0xAFF)],
    "tamil": [(0xB82, 0xBFA)],
    "telugu": [(0xC00, 0xC7F)],
    "kannada": [(0xC80, 0xCF2)],
    "malayalam": [(0xD00, 0xD7F)],
    "sinhala": [(0xD81, 0xDF4)],
    "thai": [(0xE01, 0xE5B)],
    "lao": [(0xE81, 0xEDF)],
    "tibetan": [(0xF00, 0xFDA)],
    "myanmar": [(0x1000, 0x109F)],
    "georgian": [(0x10A0, 0x10FF)],
    "hangul_jamo": [(0x1100, 0x11FF)],
    "ethiopic": [(0x1200, 0x137C)],
    "cherokee": [(0x13A0, 0x13F5)],
    "canadian": [(0x1400, 0x167F)],
    "khmer": [(0x1780, 0x17F9)],
    "mongolian": [(0x1820, 0x1878)],
    "hiragana": [(0x3041, 0x3096)],
    "katakana": [(0x30A1, 0x30FA)],
    "bopomofo": [(0x3105, 0x312F)],
    "cjk": [(0x4E00, 0x9FFF)],
    "cjk_ext_b": [(0x20000, 0x2A6DF)],
    "hangul": [(0xAC00, 0xD7A3)],
    "yi": [(0xA000, 0xA48C)],
    "fullwidth": [(0xFF01, 0xFF5E)],
    "math_alnum": [(0x1D400, 0x1D7FF)],
    "symbols": [(0x2000, 0x206F), (0x20A0, 0x20C0), (0x2100, 0x214F), (0x2190, 0x21FF), (0x2200, 0x22FF),
                (0x2300, 0x23FF), (0x2500, 0x257F), (0x25A0, 0x25FF), (0x2600, 0x26FF), (0x2700, 0x27BF)],
    "combining": [(0x300, 0x36F)],
    "cuneiform": [(0x12000, 0x12399)],
    "egyptian": [(0x13000, 0x1342E)],
    "private_use": [(0xE000, 0xF8FF), (0xF0000, 0xF00FF)],
}

EMOJI = ["😀", "😂", "🥲", "🤖", "👍", "👍🏻", "👍🏿", "❤️", "❤", "🔥", "🎉", "🙏🏽", "💯", "🚀", "🌍",
         "👨‍👩‍👧‍👦", "👩‍❤️‍💋‍👨", "🧑🏽‍🚀", "👩🏾‍💻", "🏳️‍🌈", "🏴‍☠️", "🐻‍❄️", "❤️‍🔥", "🫱🏼‍🫲🏾",
         "🇺🇸", "🇯🇵", "🇫🇷", "🇩🇪", "🇧🇷", "🇮🇳", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣", "#️⃣", "*️⃣", "©️", "™️",
         "🧔‍♀️", "👁️‍🗨️", "🤷‍♂️", "🙅🏻‍♀️", "🧑‍🤝‍🧑", "🫠", "🪿", "🦩", "🍣", "⚽", "⌚", "☕", "♨️", "🆗"]

WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", "\u00a0", "\u3000", "\u2003", "\u2009",
              "\u200b", "\u2028", "\u2029", "\u000b", "\u000c", "\u0085", "\u202f", "\u205f", "\u1680"]

CODE = [
    'def fib(n):\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n',
    '#include <stdio.h>\n\nint main(int argc, char **argv) {\n\tfor (int i = 0; i < argc; i++)\n\t\tprintf("%d: %s\\n", i, argv[i]);\n\treturn 0;\n}\n',
    'const add = (a, b) => a + b;\nexport default function App() {\n  return <div className="app">{add(1, 2)}</div>;\n}\n',
    '{\n  "name": "gemma4c",\n  "version": "0.1.0",\n  "tags": ["c", "llm", null, true, 1.5e-3]\n}\n',
    '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>Test &amp; check</title></head>\n<body><p id=\'x\'>Hi</p></body>\n</html>\n',
    'SELECT u.id, COUNT(*) AS n\nFROM users u\nJOIN orders o ON o.user_id = u.id\nWHERE o.created_at >= \'2024-01-01\'\nGROUP BY u.id\nHAVING n > 5\nORDER BY n DESC;\n',
    '#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do\n  wc -l "$f" | awk \'{print $1}\' >> counts.log 2>&1\ndone\n',
    'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
    'package main\n\nimport "fmt"\n\nfunc main() {\n\tch := make(chan int, 3)\n\tgo func() { ch <- 42 }()\n\tfmt.Println(<-ch)\n}\n',
    'class Stack<T> {\n  private items: T[] = [];\n  push(x: T): void { this.items.push(x); }\n  pop(): T | undefined { return this.items.pop(); }\n}\n',
    '\\begin{equation}\n  \\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}\n\\end{equation}\n',
    'x = [i**2 for i in range(100) if i % 3 == 0]\nprint(f"{len(x)=} {sum(x):,}")\nassert x[-1] == 9801, x\n',
    '    if (ptr == NULL) {\n        return -ENOMEM;\n    }\n    memcpy(dst, src, n * sizeof(*src));\n',
    'diff --git a/x.c b/x.c\n@@ -1,3 +1,4 @@\n-int a = 1;\n+int a = 2;\n+int b = 3;\n',
    'matrix:\n  include:\n    - os: ubuntu-latest\n      python: ["3.10", "3.11"]\nsteps:\n  - run: make -j2 test\n',
    '<?php echo htmlspecialchars($_GET["q"] ?? "", ENT_QUOTES); ?>\n',
    '// TODO(fixme): handle the edge case where n == 0 && m != 0 || (k >> 2) <= 7\n',
    '    \t    mixed indentation\n\t\t\ttabs\n        spaces\n',
    'a=1;b=2;c=a+b;d=c*2;e=d/3;f=e%4;g=f^5;h=g|6;i=h&7;j=~i;k=!j;l=j<<1;m=l>>1;\n',
    '{{ bos_token }}{% for message in messages %}{{ message["content"] | trim }}{% endfor %}\n',
]

SPECIAL_TEXT = ["<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]", "<start_of_turn>", "<end_of_turn>",
                "<start_of_image>", "<end_of_image>", "<image_soft_token>", "<unused0>", "<unused99>", "<unused6241>",
                "<0x41>", "<0xFF>", "<bos", "bos>", "<start_of_tur", "<<bos>>", "< bos>", "<BOS>", "<unused>",
                "<unused-1>", "<|turn>", "<turn|>", "</s>", "<s>", "▁", "▁▁", "<start_of_turn>user\n",
                "<end_of_turn>\n<start_of_turn>model\n"]


def rand_from_ranges(rng, ranges, n):
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        c = rng.randint(lo, hi)
        out.append(chr(c))
    return "".join(out)


def rand_word_text(rng, script, nwords):
    words = []
    for _ in range(nwords):
        words.append(rand_from_ranges(rng, SCRIPT_RANGES[script], rng.randint(1, 9)))
    seps = [" ", " ", " ", ", ", ". ", "  ", "\n", "-", ""]
    return "".join(w + rng.choice(seps) for w in words).rstrip(" ") if rng.random() < 0.5 else \
        "".join(w + rng.choice(seps) for w in words)


def random_scalar(rng):
    while True:
        c = rng.choice([rng.randint(0, 0x7F), rng.randint(0x80, 0x7FF), rng.randint(0x800, 0xFFFF),
                        rng.randint(0x10000, 0x10FFFF)])
        if not 0xD800 <= c <= 0xDFFF:
            return chr(c)


def build_corpus(rng, special_tokens):
    c = []
    c += ["", " ", "  ", "a", "\n", "▁", " ▁ ", "▁▁▁", "▁hello", "hello▁world", "<", ">", "<>", "0", "00000",
          "\x00", "\x00\x00", "a\x00b", "\ufffd", "\ufeffBOM", "\U0010ffff", "\uffff", "\ufffe"]
    # sentences, alone and perturbed
    for s in SENTENCES:
        c.append(s)
        c.append(" " + s)
        c.append(s.upper())
        c.append(s.replace(" ", "  "))
        c.append(s + "\n" + rng.choice(SENTENCES))
    # random words per script
    for script in SCRIPT_RANGES:
        for _ in range(14):
            c.append(rand_word_text(rng, script, rng.randint(1, 25)))
    # mixed scripts
    for _ in range(150):
        parts = [rand_word_text(rng, rng.choice(list(SCRIPT_RANGES)), rng.randint(1, 5)) for _ in range(rng.randint(2, 6))]
        c.append(rng.choice(["", " ", "\n"]).join(parts))
    # emoji and ZWJ sequences
    for _ in range(220):
        k = rng.randint(1, 8)
        seq = [rng.choice(EMOJI) for _ in range(k)]
        sep = rng.choice(["", " ", "", "\u200d", " and ", "\n"])
        s = sep.join(seq)
        if rng.random() < 0.4:
            s = rng.choice(SENTENCES) + " " + s
        c.append(s)
    # whitespace runs
    for _ in range(220):
        parts = []
        for _ in range(rng.randint(1, 8)):
            ws = "".join(rng.choice(WHITESPACE) for _ in range(rng.randint(1, 6))) * rng.randint(1, 12)
            parts.append(ws)
            if rng.random() < 0.7:
                parts.append(rng.choice(["word", "x", "hello", "世界", "слово", "🙂", "def", "{", "a b"]))
        c.append("".join(parts))
    for n in (1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 64, 100, 257):
        for ch in (" ", "\t", "\n", "\u3000", "\r\n", "▁"):
            c.append(ch * n)
            c.append("x" + ch * n + "y")
    # control characters
    for _ in range(200):
        s = []
        for _ in range(rng.randint(1, 20)):
            r = rng.random()
            if r < 0.4:
                s.append(chr(rng.randint(0, 0x1F)))
            elif r < 0.5:
                s.append(chr(0x7F))
            elif r < 0.65:
                s.append(chr(rng.randint(0x80, 0x9F)))
            elif r < 0.8:
                s.append(rng.choice(["\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202e",
                                     "\u2066", "\u2069", "\ufeff", "\u00ad", "\u034f", "\ufe0f", "\ufe0e"]))
            else:
                s.append(rng.choice(["abc", " ", "text", "数字", "1"]))
        c.append("".join(s))
    # code
    for snippet in CODE:
        c.append(snippet)
        for _ in range(9):
            lines = snippet.splitlines(True)
            i = rng.randrange(len(lines))
            j = rng.randint(i + 1, len(lines))
            chunk = "".join(lines[i:j])
            if rng.random() < 0.3:
                chunk = chunk.replace("    ", "\t")
            c.append(chunk)
    for _ in range(60):
        c.append("".join(rng.choice(CODE) for _ in range(rng.randint(2, 5))))
    # special-token text in context
    for _ in range(260):
        parts = []
        for _ in range(rng.randint(1, 6)):
            r = rng.random()
            if r < 0.45:
                parts.append(rng.choice(SPECIAL_TEXT))
            elif r < 0.6:
                parts.append(rng.choice(special_tokens))
            else:
                parts.append(rng.choice([" ", "\n", "hello", " world ", "user", "model", "x", "", "<", ">", "  "]))
        c.append("".join(parts))
    c.append("<start_of_turn>user\nWrite a poem about the sea.<end_of_turn>\n<start_of_turn>model\n")
    c.append("<bos><start_of_turn>system\nYou are helpful.<end_of_turn>\n<start_of_turn>user\nHi<end_of_turn>\n")
    # random scalars
    for _ in range(200):
        c.append("".join(random_scalar(rng) for _ in range(rng.randint(1, 30))))
    # printable ASCII noise
    for _ in range(120):
        c.append("".join(chr(rng.randint(0x20, 0x7E)) for _ in range(rng.randint(1, 80))))
    # numbers
    for _ in range(80):
        c.append(rng.choice(["", "-", "+", "$", "#"]) + str(rng.randint(0, 10 ** rng.randint(1, 30))) +
                 rng.choice(["", ".", ".5", "e10", ",000", "%", " km"]))
    # medium strings (1-10 KB)
    pool = list(c)
    for _ in range(60):
        s = []
        target = rng.randint(1000, 10000)
        n = 0
        while n < target:
            x = rng.choice(pool)
            s.append(x)
            n += len(x)
        c.append(rng.choice(["", " ", "\n"]).join(s))
    # ~100 KB strings: prose-like, code-like, CJK, mixed with specials, whitespace-heavy
    def big(gen):
        s, n = [], 0
        while n < 100_000:
            x = gen()
            s.append(x)
            n += len(x.encode())
        return "".join(s)
    c.append(big(lambda: rng.choice(SENTENCES) + rng.choice([" ", " ", "\n", "\n\n"])))
    c.append(big(lambda: rng.choice(CODE)))
    c.append(big(lambda: rand_word_text(rng, rng.choice(["cjk", "hiragana", "hangul", "thai"]), 5)))
    c.append(big(lambda: rng.choice(pool)))
    c.append(big(lambda: rng.choice(WHITESPACE) * rng.randint(1, 50) + rng.choice(["a", "<bos>", "🙂", "▁"])))
    return c


SYNTH_TEXTS = ["", " ", "a", "hello world", "  hello  world  ", "the cat sat on the mat", "abab ab ba",
               "hello<sep>world", "hello <sep> world", "x <sep>  y", "<sep><sep>", "a<sep>", "[tag]x", " [tag] x",
               "word[tag]word", "word [tag] word", "xx<cls>yy", "é and ü and 中", "emoji 😀!", "tab\tnew\nline",
               "a  b   c    d", " leading", "trailing ", "ab-ab--ab", "thethe the", "zzz qqq", "▁ literal ▁",
               "MiXeD CaSe", "<SEP>", "<sep", "sep>", "hello\u00a0world\u3000x", "hello\u2009 <sep>\u2009x"]


def synthetic_tokenizers():
    """Small tokenizers, each stressing one component; returns [(name, tokenizer_json_str)]."""
    from tokenizers import Tokenizer, models, trainers, normalizers
    train = ["the cat sat on the mat", "hello world", "abab ab ba", "thethe the", "word word words",
             "hello there", "a b c d", "tab\tnew\nline", "ab-ab--ab"] * 3
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.normalizer = normalizers.Replace(" ", "\u2581")
    trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<bos>"], show_progress=False,
                                  initial_alphabet=list("abcdefghijklmnopqrstuvwxyz\u2581-"))
    base.train_from_iterator(train, trainer)
    d0 = json.loads(base.to_str())
    n = len(d0["model"]["vocab"])
    for b in range(256):
        d0["model"]["vocab"]["<0x%02X>" % b] = n + b
    d0["model"]["byte_fallback"] = True
    d0["model"]["fuse_unk"] = True
    rep = lambda a, b: {"type": "Replace", "pattern": {"String": a}, "content": b}
    d0["decoder"] = {"type": "Sequence", "decoders": [rep("\u2581", " "), {"type": "ByteFallback"}, {"type": "Fuse"}]}
    d0["post_processor"] = {"type": "TemplateProcessing",
                            "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                            "special_tokens": {"<bos>": {"id": "<bos>", "ids": [1], "tokens": ["<bos>"]}}}

    def tok(content, **kw):
        t = {"id": 0, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": False}
        t.update(kw)
        return t
    out = []

    def add(name, d):
        d = json.loads(json.dumps(d))
        nxt = max(d["model"]["vocab"].values()) + 1
        for t in d["added_tokens"]:  # ids as HF would assign them; HF only warns when they differ
            if t["content"] in d["model"]["vocab"]:
                t["id"] = d["model"]["vocab"][t["content"]]
            else:
                t["id"] = nxt
                nxt += 1
        out.append((name, json.dumps(d, ensure_ascii=False)))

    add("base", d0)
    for beh in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        for inv in (False, True):
            for pat in (" ", "ab"):
                d = json.loads(json.dumps(d0))
                d["normalizer"] = None
                d["pre_tokenizer"] = {"type": "Split", "pattern": {"String": pat}, "behavior": beh, "invert": inv}
                add(f"split_{beh}_{inv}_{pat.strip() or 'space'}", d)
    d = json.loads(json.dumps(d0))
    d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": "\u2581"}, "behavior": "MergedWithNext", "invert": False},
        {"type": "Split", "pattern": {"String": "-"}, "behavior": "Isolated", "invert": False}]}
    add("split_sequence", d)
    d = json.loads(json.dumps(d0))
    d["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"}, rep(" ", "\u2581")]}
    d["decoder"] = {"type": "Sequence", "decoders": [rep("\u2581", " "), {"type": "ByteFallback"}, {"type": "Fuse"},
                                                     {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    add("prepend_strip", d)
    # (start and stop both > 0 makes HF panic on a one-character token, so one at a time)
    for st, sp in ((1, 0), (0, 1), (2, 0)):
        d = json.loads(json.dumps(d0))
        d["decoder"] = {"type": "Sequence", "decoders": [{"type": "Strip", "content": "\u2581", "start": st, "stop": sp},
                                                         {"type": "ByteFallback"}, {"type": "Fuse"}]}
        add(f"strip_per_token_{st}_{sp}", d)
    d = json.loads(json.dumps(d0))
    d["decoder"] = None
    add("no_decoder", d)
    for fuse in (False, True):
        d = json.loads(json.dumps(d0))
        d["model"]["byte_fallback"] = False
        d["model"]["fuse_unk"] = fuse
        add(f"unk_fuse_{fuse}", d)
    d = json.loads(json.dumps(d0))
    d["model"]["byte_fallback"] = False
    d["model"]["unk_token"] = None
    add("no_unk", d)
    d = json.loads(json.dumps(d0))
    d["model"]["ignore_merges"] = True
    d["model"]["vocab"]["hello"] = max(d["model"]["vocab"].values()) + 1
    add("ignore_merges", d)
    flags = [dict(), dict(lstrip=True), dict(rstrip=True), dict(lstrip=True, rstrip=True), dict(single_word=True),
             dict(normalized=True), dict(normalized=True, lstrip=True), dict(special=True),
             dict(special=True, normalized=True, rstrip=True)]
    for i, f in enumerate(flags):
        d = json.loads(json.dumps(d0))
        d["added_tokens"] = [tok("<unk>", special=True), tok("<bos>", special=True), tok("<sep>", **f),
                             tok("[tag]", **f), tok("<cls>", special=True), tok("sep>"), tok(" <sep>", normalized=True)]
        add("added_" + ("_".join(k for k in f) or "plain"), d)
    return out


def write_synthetic(path):
    from tokenizers import Tokenizer
    with gzip.GzipFile(path, "wb", mtime=0, compresslevel=9) as gz:
        for name, js in synthetic_tokenizers():
            t = Tokenizer.from_str(js)
            cases = []
            for s in SYNTH_TEXTS:
                e = t.encode(s, add_special_tokens=False).ids
                es = t.encode(s, add_special_tokens=True).ids
                cases.append({"text": s, "ids": e, "ids_special": es,
                              "decoded": t.decode(e, skip_special_tokens=False),
                              "decoded_special": t.decode(es, skip_special_tokens=False)})
            gz.write((json.dumps({"name": name, "tokenizer_json": js, "cases": cases}, ensure_ascii=False) + "\n").encode())
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=str(ROOT.parent / "shared" / "data" / "gemma3-tokenizer"))
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "tokenizer" / "goldens.jsonl.gz"))
    args = ap.parse_args()
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_synthetic(pathlib.Path(args.out).parent / "synthetic.jsonl.gz")
    import tokenizers
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(pathlib.Path(args.tokenizer) / "tokenizer.json"))
    rng = random.Random(SEED)
    added = tok.get_added_tokens_decoder()
    special_tokens = sorted(t.content for t in added.values() if t.special)
    other_added = sorted(t.content for t in added.values() if not t.special)
    corpus = build_corpus(rng, special_tokens + rng.sample(other_added, 40))
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n_enc = n_dec = 0
    with gzip.GzipFile(out, "wb", mtime=0, compresslevel=9) as gz:
        def w(obj):
            gz.write((json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode())
        w({"meta": {"tokenizers": tokenizers.__version__, "seed": SEED,
                    "tokenizer_sha": "4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795"}})
        for s in corpus:
            e = tok.encode(s, add_special_tokens=False).ids
            es = tok.encode(s, add_special_tokens=True).ids
            rec = {"text": s, "ids": e, "decoded": tok.decode(e, skip_special_tokens=False)}
            # the post-processor's output, stored compactly when it is prefix + ids + suffix
            k = next((i for i in range(len(es) - len(e) + 1) if es[i:i + len(e)] == e), None)
            if k is not None:
                rec["special_prefix"], rec["special_suffix"] = es[:k], es[k + len(e):]
            else:
                rec["ids_special"] = es
            rec["decoded_skip"] = tok.decode(es, skip_special_tokens=True)
            w(rec)
            n_enc += 1
        # random id sequences: byte-fallback runs (valid and broken UTF-8), specials, anything
        vocab = tok.get_vocab_size()
        byte_ids = [tok.token_to_id("<0x%02X>" % b) for b in range(256)]
        special_ids = sorted(added)
        for i in range(400):
            ids = []
            for _ in range(rng.randint(0, 40)):
                r = rng.random()
                if r < 0.35:
                    ids.append(rng.choice(byte_ids))
                elif r < 0.5:
                    ids += [byte_ids[b] for b in rng.choice(["é", "€", "😀", "中", "\x00"]).encode()][: rng.randint(1, 4)]
                elif r < 0.65:
                    ids.append(rng.choice(special_ids))
                else:
                    ids.append(rng.randrange(vocab))
            w({"decode_ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
               "decoded_skip": tok.decode(ids, skip_special_tokens=True)})
            n_dec += 1
    print(f"wrote {out} ({out.stat().st_size} bytes): {n_enc} encode strings, {n_dec} decode sequences, "
          f"{sum(len(s.encode()) for s in corpus)} corpus bytes")


if __name__ == "__main__":
    main()
