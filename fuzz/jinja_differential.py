#!/usr/bin/env python3
"""Differential fuzzing of the C Jinja interpreter against Python jinja2 (configured by
transformers): generates random templates from a grammar of the constructs chat templates use
(expressions, filters, tests, methods, loops, macros, set/namespace, whitespace control),
renders each with both, and reports any case where the outputs differ or only one side fails.

  "$G4_REF_PY" fuzz/jinja_differential.py build/gemma4c [N] [SEED]

Exit status 1 when a mismatch was found; mismatching templates are written to
build-fuzz/jinja-diff/ for replay.
"""
import copy
import json
import pathlib
import random
import re
import subprocess
import sys
import tempfile

from transformers.utils.chat_template_utils import _compile_jinja_template

VARS = {
    "messages": [{"role": "system", "content": "  Sys prompt\n"},
                 {"role": "user", "content": "Hello, World! ünïcode ß"},
                 {"role": "assistant", "content": "<think>x</think> Answer", "tool_calls": [
                     {"id": "c1", "function": {"name": "f", "arguments": {"a": 1, "b": [1, 2.5, None]}}}]},
                 {"role": "user", "content": [{"type": "text", "text": " part "}, {"type": "image"}]}],
    "s": "  Mixed Case, words; here  ",
    "e": "",
    "n": 7,
    "m": -3,
    "f": 2.5,
    "g": 1e-7,
    "l": [3, 1, 2],
    "ls": ["b", "A", "c", "a"],
    "d": {"z": 1, "a": [1, 2], "M": {"k": "v"}},
    "t": True,
    "z": None,
    "add_generation_prompt": True,
    "tools": None,
    "documents": None,
}

ADDR = re.compile(r"0x[0-9a-f]+")  # Python prints object addresses; they never match

NAMES = list(VARS) + ["undef", "loop_var"]
STR_LITS = ["'a'", "'Hello'", "'x,y,z'", "'  pad '", "\"dq\"", "''", "'ß'", "'\\n'", "'<tag>'", "'a b c'"]
FILTERS0 = ["length", "trim", "upper", "lower", "title", "capitalize", "first", "last", "list", "string",
            "int", "float", "abs", "round", "sort", "unique", "reverse", "sum", "min", "max", "tojson",
            "items", "dictsort", "safe", "count", "e", "wordcount"]
FILTERS1 = ["join(', ')", "join", "default('dflt')", "default('D', true)", "replace('a', 'b')", "indent(2)",
            "indent(2, true)", "map('upper')", "map(attribute='role')", "selectattr('role', 'equalto', 'user')",
            "rejectattr('role', 'eq', 'user')", "select('odd')", "reject('even')", "tojson(indent=2)",
            "tojson(sort_keys=true)", "sort(reverse=true)", "round(1)", "batch(2)", "center(11)", "trim('x')",
            "dictsort(true)", "dictsort(by='value')", "sort(attribute='role')", "join('|', attribute='role')",
            "format('q')", "int(5)", "float(1.5)"]
TESTS = ["defined", "undefined", "none", "string", "number", "mapping", "sequence", "iterable", "boolean",
         "integer", "float", "odd", "even", "divisibleby 3", "in [1, 2, 3]", "eq 7", "lower", "upper",
         "callable", "sameas none", "true", "false", "gt 2", "le 3"]
METHODS = ["strip()", "lstrip()", "rstrip()", "split()", "split(',')", "split(' ', 1)", "rsplit(' ', 1)",
           "upper()", "lower()", "title()", "startswith('He')", "endswith(' ')", "replace(' ', '_')",
           "find('o')", "count('e')", "splitlines()", "strip('x ')", "capitalize()", "isdigit()"]
DMETHODS = ["get('z')", "get('nope', 'dflt')", "items()", "keys()", "values()", "get('nope')"]
BINOPS = ["+", "-", "*", "/", "//", "%", "~", "**"]
CMPS = ["==", "!=", "<", ">", "<=", ">=", "in", "not in"]


class Gen:
    def __init__(self, rng):
        self.r = rng
        self.loop_vars = []

    def lit(self):
        r = self.r
        k = r.randrange(9)
        if k == 0: return str(r.choice([0, 1, 2, 3, -1, 10, 255, 1000000]))
        if k == 1: return r.choice(["0.5", "1.0", "2.25", "1e3", "3.14159", "1e-5", "1e16"])
        if k == 2: return r.choice(STR_LITS)
        if k == 3: return r.choice(["true", "false", "none", "True", "None"])
        if k == 4: return "[" + ", ".join(self.expr(1) for _ in range(r.randrange(4))) + "]"
        if k == 5: return "{" + ", ".join(f"{r.choice(STR_LITS)}: {self.expr(1)}" for _ in range(r.randrange(3))) + "}"
        if k == 6: return "(" + ", ".join(self.expr(1) for _ in range(r.randrange(1, 3))) + ",)"
        if k == 7: return "range(" + str(r.randrange(6)) + ")"
        return r.choice(STR_LITS)

    def atom(self, depth):
        r = self.r
        k = r.randrange(10)
        if k < 3: return self.lit()
        if k < 6 or depth <= 0:
            return r.choice(NAMES + self.loop_vars) if self.loop_vars and r.random() < 0.3 else r.choice(NAMES)
        base = r.choice(["messages", "d", "l", "s", "ls", "messages[1]", "messages[-1]", "d.M"] + self.loop_vars)
        acc = r.choice([".role", "['content']", "[0]", "[-1]", "[1:]", "[:2]", "[::-1]", ".a", "['z']",
                        ".content", "[5]", ".missing", "|length", "['role']"])
        return base + acc

    def expr(self, depth=3):
        r = self.r
        if depth <= 0: return self.atom(0)
        k = r.randrange(14)
        if k < 3: return self.atom(depth - 1)
        if k == 3: return f"({self.expr(depth - 1)} {r.choice(BINOPS)} {self.expr(depth - 1)})"
        if k == 4: return f"({self.expr(depth - 1)} {r.choice(CMPS)} {self.expr(depth - 1)})"
        if k == 5: return f"({self.expr(depth - 1)} {r.choice(['and', 'or'])} {self.expr(depth - 1)})"
        if k == 6: return f"(not {self.expr(depth - 1)})"
        if k == 7: return f"({self.expr(depth - 1)} if {self.expr(depth - 1)} else {self.expr(depth - 1)})"
        if k == 8: return f"({self.expr(depth - 1)} | {r.choice(FILTERS0)})"
        if k == 9: return f"({self.expr(depth - 1)} | {r.choice(FILTERS1)})"
        if k == 10: return f"({self.expr(depth - 1)} is {r.choice(['', 'not '])}{r.choice(TESTS)})"
        if k == 11: return f"{r.choice(['s', 'e', 'messages[1].content', 'ls[0]', '(s ~ n)'])}.{r.choice(METHODS)}"
        if k == 12: return f"{r.choice(['d', 'messages[0]', 'd.M'])}.{r.choice(DMETHODS)}"
        return f"(-{self.atom(depth - 1)})"

    def ws(self):
        return self.r.choice(["", "", " ", "\n", "  \n  ", "\n\n", "\t"])

    def o(self, kind):
        m = self.r.choice(["", "", "-", "+"]) if kind == "%" else self.r.choice(["", "", "-"])
        return "{" + kind + m + " "

    def c(self, kind):
        m = self.r.choice(["", "", "-"])
        return " " + m + kind + "}"

    def block(self, depth):
        r = self.r
        out = []
        for _ in range(r.randrange(1, 4)):
            out.append(self.ws())
            k = r.randrange(9 if depth > 0 else 3)
            if k == 0: out.append(r.choice(["text", "a b", "<x>", "line\n", "  indented\n", "é"]))
            elif k in (1, 2): out.append(self.o("{") + self.expr() + self.c("}"))
            elif k == 3:
                s = self.o("%") + f"if {self.expr(2)}" + self.c("%") + self.block(depth - 1)
                if r.random() < 0.4: s += self.o("%") + f"elif {self.expr(2)}" + self.c("%") + self.block(depth - 1)
                if r.random() < 0.5: s += self.o("%") + "else" + self.c("%") + self.block(depth - 1)
                out.append(s + self.o("%") + "endif" + self.c("%"))
            elif k == 4:
                v = r.choice(["x", "item", "m"])
                src = r.choice(["messages", "l", "ls", "d", "s", "range(4)", "d|dictsort", "d.items()", "e", "undef",
                                "messages|selectattr('role', 'eq', 'user')"])
                target = "k, val" if "items" in src or "dictsort" in src else v
                cond = f" if {self.expr(1)}" if r.random() < 0.2 else ""
                self.loop_vars += [target.split(",")[0], "loop.index", "loop.first", "loop.last", "loop.length",
                                   "loop.index0", "loop.revindex", "loop.previtem", "loop.cycle('a', 'b')"]
                body = self.block(depth - 1)
                if r.random() < 0.2: body += self.o("%") + r.choice(["break", "continue"]) + self.c("%")
                self.loop_vars = self.loop_vars[:-9]
                s = self.o("%") + f"for {target} in {src}{cond}" + self.c("%") + body
                if r.random() < 0.3: s += self.o("%") + "else" + self.c("%") + self.block(depth - 1)
                out.append(s + self.o("%") + "endfor" + self.c("%"))
            elif k == 5: out.append(self.o("%") + f"set {r.choice(['n', 'q', 'ns.v', 's'])} = {self.expr(2)}" + self.c("%"))
            elif k == 6:
                out.append(self.o("%") + "set blk" + self.c("%") + self.block(depth - 1) + self.o("%") + "endset" + self.c("%")
                           + "[{{ blk }}]")
            elif k == 7:
                out.append(self.o("%") + "macro mm(a, b='B')" + self.c("%") + self.block(depth - 1) + "{{ a }}{{ b }}"
                           + self.o("%") + "endmacro" + self.c("%") + "{{ mm(" + self.expr(1) + ") }}")
            else: out.append(self.o("#") + "comment" + self.c("#"))
        return "".join(out)

    def template(self):
        return "{% set ns = namespace(v=0) %}" + self.block(3) + self.ws()


def main():
    g4 = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    rng = random.Random(seed)
    gen = Gen(rng)
    bad_dir = pathlib.Path("build-fuzz/jinja-diff")
    mismatches = agree_err = agree_ok = 0
    with tempfile.TemporaryDirectory() as tmp:
        tpl = pathlib.Path(tmp) / "t.jinja"
        stdin = json.dumps(VARS).encode()
        for i in range(n):
            src = gen.template()
            try:
                want = _compile_jinja_template(src).render(**copy.deepcopy(VARS))
                want_err = None
            except Exception as ex:  # any jinja2 / Python error: the C side must fail too
                want, want_err = None, f"{type(ex).__name__}: {ex}"
            tpl.write_text(src, encoding="utf-8")
            p = subprocess.run([g4, "template", "-m", tmp, "--template", str(tpl)], input=stdin,
                               capture_output=True, timeout=60)
            got = ADDR.sub("0x?", p.stdout.decode("utf-8", "replace"))
            want = ADDR.sub("0x?", want) if want is not None else None
            if want_err is not None and p.returncode == 2:
                agree_err += 1
                continue
            if want_err is None and p.returncode == 0 and got == want:
                agree_ok += 1
                continue
            mismatches += 1
            bad_dir.mkdir(parents=True, exist_ok=True)
            (bad_dir / f"case-{seed}-{i}.jinja").write_text(src, encoding="utf-8")
            print(f"MISMATCH #{i}: jinja2={'ERR ' + want_err if want_err else repr(want[:200])}\n"
                  f"   C rc={p.returncode} {p.stderr.decode()[:200]!r} {got[:200]!r}\n   template: {src[:600]!r}")
    print(f"{n} random templates: {agree_ok} identical output, {agree_err} both rejected, {mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
