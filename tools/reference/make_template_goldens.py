#!/usr/bin/env python3
"""Records chat-template goldens: the exact text transformers' apply_chat_template (jinja2) renders
for a set of conversations, or the error it raises, for each template under test.

  "$G4_REF_PY" tools/reference/make_template_goldens.py

Writes tests/fixtures/templates/<template>.json. Templates: the Gemma 3 template (the
chat_template field of ../shared/data/gemma3-tokenizer/tokenizer_config.json), the two official
Gemma 4 templates in ../shared/data/gemma4-chat-templates/, and tests/fixtures/templates/
features.jinja (a template of ours exercising the jinja2 features HF templates use). Special
tokens (bos_token, ...) come from the Gemma 3 tokenizer directory, as `gemma4c template -m` reads
them. Each case's "input" is exactly the JSON object `gemma4c template` reads on stdin.
"""
import copy
import json
import pathlib
import sys

import jinja2
import transformers
from transformers import AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
OUT = ROOT / "tests" / "fixtures" / "templates"
TOK_DIR = "gemma3-tokenizer"

# ---------------------------------------------------------------- building blocks

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
            },
            "required": ["city"],
        },
    },
}

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_flights",
        "description": "Search flights between airports.",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "description": "IATA code"},
                "destination": {"type": "string", "description": "IATA code"},
                "passengers": {"type": "integer", "description": "Number of passengers", "nullable": True},
                "cabin": {"type": "string", "enum": ["economy", "business", "first"]},
                "legs": {
                    "type": "array",
                    "description": "Flight legs",
                    "items": {
                        "type": "object",
                        "properties": {
                            "date": {"type": "string", "description": "ISO date"},
                            "flexible": {"type": "boolean"},
                        },
                        "required": ["date"],
                    },
                },
                "filters": {
                    "type": "object",
                    "description": "Optional filters",
                    "properties": {
                        "max_price": {"type": "number", "description": "Upper bound"},
                        "airlines": {"type": "array", "items": {"type": "string"}},
                        "stops": {"type": "object", "properties": {"max": {"type": "integer"}}, "required": ["max"]},
                    },
                    "required": ["max_price"],
                },
                "tags": {"type": "array", "items": {"type": ["string", "null"]}},
                "x-custom": {"type": "string", "format": "uuid", "default": "none"},
            },
            "required": ["origin", "destination", "legs"],
        },
        "response": {"type": "object", "description": "Matching flights"},
    },
}

CALC_TOOL = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}

NOPARAM_TOOL = {"type": "function", "function": {"name": "get_time", "description": "Current time.",
                                                  "parameters": {"type": "object", "properties": {}}}}
BARE_TOOL = {"type": "function", "function": {"name": "ping"}}

U = lambda text: {"role": "user", "content": text}
A = lambda text: {"role": "assistant", "content": text}
S = lambda text: {"role": "system", "content": text}


def call(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}


def case(name, messages, agp=True, tools=None, **extra):
    inp = {"messages": messages, "add_generation_prompt": agp}
    if tools is not None:
        inp["tools"] = tools
    inp.update(extra)
    return {"name": name, "input": inp}


# ---------------------------------------------------------------- conversations shared by all templates

def common_cases():
    long_conv = []
    for i in range(10):
        long_conv += [U(f"Question {i}: what is {i} squared?"), A(f"{i} squared is {i * i}.")]
    long_conv.append(U("Thanks, and 11?"))
    return [
        case("single_user", [U("Hello!")]),
        case("single_user_no_gen", [U("Hello!")], agp=False),
        case("system_user", [S("You are a helpful assistant."), U("What is the capital of France?")]),
        case("system_multiturn", [S("Answer briefly."), U("2+2?"), A("4"), U("And 3+3?")]),
        case("multiturn", [U("Hi"), A("Hello! How can I help?"), U("Tell me a joke.")]),
        case("multiturn_ends_assistant", [U("Hi"), A("Hello!")], agp=False),
        case("multiturn_ends_assistant_gen", [U("Hi"), A("Hello!")], agp=True),
        case("long_conversation", long_conv),
        case("whitespace_content", [U("\n\n   padded question \t\n"), A("  answer with spaces  \n"), U(" next ")]),
        case("unicode_content", [U("Ünïcödé: 日本語, العربية, emoji 👩‍👩‍👧‍👦 🇫🇷, math ∑∫√")]),
        case("special_token_text", [U("Literal <start_of_turn>user and <|turn> and <bos> in text")]),
        case("empty_user_content", [U("")]),
        case("quotes_and_backslashes", [U("He said \"hi\" and it's a \\path\\ with {{ braces }} {% tags %}")]),
        case("control_chars", [U("tab\there\u0000nul\u001besc\rcr")]),
        case("multimodal_text_image", [{"role": "user", "content": [
            {"type": "image", "url": "https://example.com/cat.png"},
            {"type": "text", "text": "What is in this image?"}]}]),
        case("multimodal_text_parts", [{"role": "user", "content": [
            {"type": "text", "text": "  first part "}, {"type": "text", "text": "second part"}]}]),
        case("multimodal_image_only", [{"role": "user", "content": [{"type": "image", "image": "<PIL>"}]}]),
        case("multimodal_multi_turn", [
            {"role": "user", "content": [{"type": "text", "text": "Describe"}, {"type": "image"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "A cat on a mat."}]},
            {"role": "user", "content": [{"type": "text", "text": "And this one?"}, {"type": "image"}, {"type": "image"}]}]),
        case("system_user_multimodal", [S("Describe images precisely."),
                                        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Go"}]}]),
        case("extra_message_keys", [{"role": "user", "content": "Hi", "name": "alice", "metadata": {"x": 1}}]),
        case("null_valued_keys_dropped", [{"role": "user", "content": "Hi", "tool_calls": None, "name": None}]),
        case("bos_override", [U("Hi")], bos_token="<BOS_OVERRIDE>"),
        case("unused_extra_vars", [U("Hi")], custom_var=[1, 2, 3], date_string="26 Jul 2024"),
    ]


# ---------------------------------------------------------------- Gemma 3 specific

def gemma3_cases():
    return [
        case("g3_system_list_content", [{"role": "system", "content": [{"type": "text", "text": "Sys as parts"}]}, U("Hi")]),
        case("g3_reject_two_users", [U("a"), U("b")]),
        case("g3_reject_assistant_first", [A("I start"), U("ok")]),
        case("g3_reject_system_then_assistant", [S("sys"), A("x")]),
        case("g3_reject_content_number", [{"role": "user", "content": 42}]),
        case("g3_content_null_dropped", [{"role": "user", "content": None}]),
        case("g3_tools_ignored", [U("Weather in Paris?")], tools=[WEATHER_TOOL]),
        case("g3_thinking_var_ignored", [U("Hi")], enable_thinking=True),
    ]


# ---------------------------------------------------------------- Gemma 4 specific

def gemma4_cases():
    tc_dict = call("call_1", "get_weather", {"city": "Paris", "unit": "celsius"})
    tc_str = call("call_2", "get_weather", '{"city": "Tokyo"}')
    nested_args = call("call_3", "search_flights", {
        "origin": "CDG", "destination": "NRT", "passengers": 2, "legs": [{"date": "2025-01-02", "flexible": True}],
        "filters": {"max_price": 1234.5, "airlines": ["AF", "JL"], "stops": {"max": 1}}, "note": None,
        "ratio": 1e-7, "big": 12345678901234, "neg": -0.0, "flag": False})
    return [
        case("g4_developer_role", [{"role": "developer", "content": "Dev instructions"}, U("Hi")]),
        case("g4_thinking_on", [U("Solve 17*23")], enable_thinking=True),
        case("g4_thinking_off_explicit", [U("Solve 17*23")], enable_thinking=False),
        case("g4_thinking_on_system", [S("Be rigorous."), U("Prove it")], enable_thinking=True),
        case("g4_thinking_on_no_gen", [U("Hi"), A("Hello")], agp=False, enable_thinking=True),
        case("g4_strip_thinking_in_history", [
            U("Q1"), A("<|channel>thought\nlet me think<channel|>The answer is 4."), U("Q2")]),
        case("g4_strip_thinking_multiple", [
            U("Q1"), A("pre <|channel>a<channel|> mid <|channel>b<channel|> post"), U("Q2")]),
        case("g4_tools_simple", [U("Weather in Paris?")], tools=[WEATHER_TOOL]),
        case("g4_tools_nested", [U("Find flights")], tools=[SEARCH_TOOL, CALC_TOOL]),
        case("g4_tools_noparams", [U("Time?")], tools=[NOPARAM_TOOL, BARE_TOOL]),
        case("g4_tools_system_thinking", [S("Use tools."), U("Weather?")], tools=[WEATHER_TOOL, CALC_TOOL],
             enable_thinking=True),
        case("g4_tool_call_dict_args", [U("Weather in Paris?"),
                                        {"role": "assistant", "tool_calls": [tc_dict]}],
             tools=[WEATHER_TOOL]),
        case("g4_tool_call_and_response", [
            U("Weather in Paris?"),
            {"role": "assistant", "content": None, "tool_calls": [tc_dict]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21, "sky": "clear"}'}],
            tools=[WEATHER_TOOL]),
        case("g4_tool_response_then_answer", [
            U("Weather in Paris?"),
            {"role": "assistant", "tool_calls": [tc_dict]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"},
            A("It is 21 degrees in Paris."), U("Thanks!")],
            tools=[WEATHER_TOOL]),
        case("g4_tool_call_string_args", [U("Weather in Tokyo?"), {"role": "assistant", "tool_calls": [tc_str]},
                                          {"role": "tool", "tool_call_id": "call_2", "name": "get_weather", "content": "sunny"}],
             tools=[WEATHER_TOOL]),
        case("g4_parallel_tool_calls", [
            U("Weather in Paris and Tokyo?"),
            {"role": "assistant", "tool_calls": [tc_dict, tc_str]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "30C"}],
            tools=[WEATHER_TOOL]),
        case("g4_nested_tool_args", [U("Book it"), {"role": "assistant", "tool_calls": [nested_args]},
                                     {"role": "tool", "tool_call_id": "call_3", "content": [
                                         {"type": "text", "text": "found 3 flights"}, {"type": "text", "text": "; cheapest 900"}]}],
             tools=[SEARCH_TOOL]),
        case("g4_tool_response_name_only", [U("ping?"), {"role": "assistant", "tool_calls": [call("x", "ping", {})]},
                                            {"role": "tool", "name": "ping", "content": "pong"}], tools=[BARE_TOOL]),
        case("g4_legacy_tool_responses", [
            U("Weather?"),
            {"role": "assistant", "tool_calls": [tc_dict],
             "tool_responses": [{"name": "get_weather", "response": {"temp": 21, "ok": True, "items": [1, "a"]}}]},
        ], tools=[WEATHER_TOOL]),
        case("g4_legacy_tool_responses_scalar", [
            U("Weather?"),
            {"role": "assistant", "tool_calls": [tc_dict], "tool_responses": [{"response": "plain text"}],
             "content": "Here you go."}], tools=[WEATHER_TOOL]),
        case("g4_reasoning_with_tool_calls", [
            U("Weather in Paris?"),
            {"role": "assistant", "reasoning_content": "I should call the weather tool.", "tool_calls": [tc_dict]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21C"}],
            tools=[WEATHER_TOOL], enable_thinking=True),
        case("g4_reasoning_before_last_user", [
            U("Q1"), {"role": "assistant", "reasoning_content": "old thoughts", "content": "A1"}, U("Q2")],
            enable_thinking=True),
        case("g4_thinking_field_alias", [
            U("Weather?"), {"role": "assistant", "thinking": "via thinking key", "tool_calls": [tc_dict]}],
            tools=[WEATHER_TOOL]),
        case("g4_consecutive_assistant", [U("Hi"), A("part one"), A("part two"), U("ok")]),
        case("g4_multimodal_audio_video", [{"role": "user", "content": [
            {"type": "audio", "audio": "a.wav"}, {"type": "text", "text": "Transcribe, then describe"},
            {"type": "video", "video": "v.mp4"}]}]),
        case("g4_system_content_list_repr", [{"role": "system", "content": [{"type": "text", "text": "it's a list"}]},
                                             U("Hi")]),
        case("g4_user_user", [U("a"), U("b")]),
        case("g4_tool_content_dict", [U("x"), {"role": "assistant", "tool_calls": [tc_dict]},
                                      {"role": "tool", "tool_call_id": "call_1", "content": {"k": "v"}}]),
        case("g4_reject_tool_call_without_function", [U("x"), {"role": "assistant", "tool_calls": [{"id": "c"}]}]),
        case("g4_reject_unresolved_tool_name", [U("x"), {"role": "assistant", "tool_calls": [tc_dict]},
                                                {"role": "tool", "tool_call_id": "nope", "content": "r"}]),
        case("g4_reject_tool_name_number", [U("x"), {"role": "assistant", "tool_calls": [call("c", 42, {})]}]),
        case("g4_empty_tools_list", [U("Hi")], tools=[]),
    ]


# ---------------------------------------------------------------- feature template

def feature_cases():
    msgs = [S("sys prompt"), U("first"), A("reply"), U("second <tag> & 'quote'")]
    return [
        case("feat_basic", msgs),
        case("feat_no_gen", msgs, agp=False),
        case("feat_tools", msgs, tools=[WEATHER_TOOL, SEARCH_TOOL]),
        case("feat_values", [U("v")], values={"int": 3, "float": 2.5, "neg": -7, "zero": 0.0, "tiny": 1e-9,
                                             "huge": 1e22, "big": 2 ** 62, "t": True, "f": False, "n": None,
                                             "s": "str'\"q\n", "list": [1, "two", [3.0, None]],
                                             "nested": {"b": {"c": [1, {"d": "e"}]}, "a": 1},
                                             "unicode": "héllo wörld ÄÖÜ ß ǅ ΣΑΣ"}),
        case("feat_raise", [U("please raise")]),
        case("feat_strings", [U("  Mixed Case words, split me  ")]),
        case("feat_empty_values", [U("e")], values={}),
    ]


# ---------------------------------------------------------------- rendering

def render(tok, template_src, inp):
    inp = copy.deepcopy(inp)
    messages = inp.pop("messages")
    tools = inp.pop("tools", None)
    documents = inp.pop("documents", None)
    agp = inp.pop("add_generation_prompt", False)
    try:
        out = tok.apply_chat_template(messages, tools=tools, documents=documents, add_generation_prompt=agp,
                                      tokenize=False, chat_template=template_src, **inp)
        return {"expected": out}
    except jinja2.exceptions.TemplateError as e:
        kind = type(e).__name__
        # raise_exception() raises a bare TemplateError; jinja2's own errors are subclasses
        return {"error": str(e), "raise": kind == "TemplateError"}
    except Exception as e:  # TypeError, ValueError ... raised inside the template
        return {"error": f"{type(e).__name__}: {e}", "raise": False}


def write(name, template_rel, template_src, tok, cases, in_repo=False):
    out = []
    names = set()
    for c in cases:
        assert c["name"] not in names, c["name"]
        names.add(c["name"])
        r = render(tok, template_src, c["input"])
        out.append({**c, **r})
    doc = {
        "generator": "tools/reference/make_template_goldens.py",
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "tokenizer_dir": TOK_DIR,
        ("template_repo" if in_repo else "template"): template_rel,
        "cases": out,
    }
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    n_err = sum(1 for c in out if "error" in c)
    print(f"{path.relative_to(ROOT)}: {len(out)} cases ({n_err} rejected)")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(str(SHARED / TOK_DIR))
    common = common_cases()
    write("gemma3", None, None, tok, common + gemma3_cases())
    for fname, short in [("google-gemma-4-31B-it.jinja", "gemma4-31B-it"),
                         ("google-gemma-4-31B-it-interleaved.jinja", "gemma4-31B-it-interleaved")]:
        rel = f"gemma4-chat-templates/{fname}"
        src = (SHARED / rel).read_text(encoding="utf-8")
        write(short, rel, src, tok, common + gemma4_cases())
    feat = OUT / "features.jinja"
    write("features", "tests/fixtures/templates/features.jinja", feat.read_text(encoding="utf-8"), tok,
          feature_cases(), in_repo=True)


if __name__ == "__main__":
    sys.exit(main())
