"""The side-by-side report scripts on raw outputs written here: compare_quant_report.py with and
without gemma4c's own packs (PACKS=0 runs the GGUF files alone: no pack columns, and the prefill
table reads the GGUF runs), and the CPU summary naming family and model where a hypervisor hides
the model name."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.path.join(REPO, "bench", "compare_quant_report.py")


def g4_run(pp, tg, bw):
    return {"machine": {"read_bw_gbs": bw},
            "model_info": {"decode_weight_bytes_per_token": 675e6, "layer_matrix_bytes": 345e6, "lm_head_bytes": 330e6},
            "tests": [{"test": "pp64", "tok_s": pp, "roofline_fraction": pp / 150},
                      {"test": "tg128", "tok_s": tg, "roofline_fraction": tg / 30}]}


def write_out(d, packs):
    def put(name, text):
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            f.write(text)
    put("types.txt", "q4_k\n")
    put("date.txt", "2026-12-07 23:11 UTC\n")
    put("lscpu.txt", "CPU(s): 2\nModel name: AMD EPYC\nCPU family: 25\nModel: 1\nFlags: fpu avx2 fma f16c\n")
    put("sizes.txt", f"q4_k 692000000 {700000000 if packs else 0}\n")
    for r, (pp, tg) in enumerate(((80.0, 20.0), (90.0, 22.0)), 1):
        put(f"llama-q4_k-r{r}.json", json.dumps([{"n_prompt": 64, "n_gen": 0, "avg_ts": 78.0},
                                                 {"n_prompt": 0, "n_gen": 128, "avg_ts": 16.0}]))
        put(f"g4gguf-q4_k-r{r}.txt", "pp64 ...\n" + json.dumps(g4_run(pp, tg, 21.5)) + "\n")
        if packs:
            put(f"g4pack-q4_k-r{r}.txt", json.dumps(g4_run(pp + 5, tg + 1, 21.5)) + "\n")


def report(d):
    return subprocess.run([sys.executable, REPORT, d], check=True, capture_output=True, text=True).stdout


def test_gguf_only_report_has_no_pack_columns(tmp_path):
    write_out(str(tmp_path), packs=False)
    out = report(str(tmp_path))
    assert "n/a" not in out
    assert "| weights | test | gemma4c GGUF | llama.cpp GGUF | gemma4c / llama |" in out
    assert "| q4_k | pp64 | 85.00 | 78.00 | 1.09x | 80.00, 90.00; 78.00, 78.00 |" in out
    assert "gemma4c on the GGUF, exact" in out   # the prefill table reads the GGUF runs
    assert "| q4_k | pp64 | 85.00 | 56.7% |" in out
    assert "| q4_k | not run |" in out
    assert "CPU family: 25" in out and "Model: 1" in out


def test_report_with_packs_keeps_them(tmp_path):
    write_out(str(tmp_path), packs=True)
    out = report(str(tmp_path))
    assert "| gemma4c pack | gemma4c GGUF | llama.cpp GGUF |" in out
    assert "| q4_k | pp64 | 90.00 | 85.00 | 78.00 | 1.09x | 1.15x |" in out
    assert "gemma4c on the pack" in out
    assert "| q4_k | 700 MB |" in out
