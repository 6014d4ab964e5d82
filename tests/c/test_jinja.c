/* test_jinja.c — unit tests of the Jinja interpreter behind the chat templates: whitespace
 * control, expressions, filters and statements, each case's expected text recorded from jinja2
 * 3.1 as transformers configures it; plus error reporting (line numbers, raise_exception,
 * undefined use) and the runaway guards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"
#include "template/jinja.h"

struct tcase {
    const char *tpl, *want;
};

static const char VARS[] = "{\"s\": \"Hello World\", \"n\": 5, \"f\": 2.5, \"l\": [3, 1, 2], \"d\": {\"b\": 2, \"a\": 1}, \"msgs\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}], \"t\": true, \"z\": null}";
static const struct tcase whitespace_cases[] = {
    {"a  {%- if t %} b {% endif -%}  c",
     "a b c"},
    {"line1\n  {% if t %}\n  inner\n  {% endif %}\nline2",
     "line1\n  inner\nline2"},
    {"x\n{# comment #}\ny",
     "x\ny"},
    {"  {%+ if t %}keep{% endif %}",
     "  keep"},
    {"{{ 'a' -}}\n\n   {{- 'b' }}",
     "ab"},
    {"{% for i in l %}\n{{ i }}\n{% endfor %}\n",
     "3\n1\n2\n"},
    {"a\n{% raw %}{{ x }}{% endraw %}\nb",
     "a\n{{ x }}b"},
    {"trailing newline\n",
     "trailing newline"},
    {"{% if t -%}\n   x\n{%- endif %}",
     "x"},
    {"\r\nwin\r\n{% if t %}\r\nyes\r\n{% endif %}\r\n",
     "\nwin\nyes\n"},
};
static const struct tcase expressions_cases[] = {
    {"{{ 1 + 2 * 3 - 4 / 2 }}",
     "5.0"},
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 8 }}",
     "3 -4 2 256"},
    {"{{ s ~ n ~ z ~ t }}",
     "Hello World5NoneTrue"},
    {"{{ s[0] }}{{ s[-1] }}{{ s[1:4] }}{{ s[::-1] }}{{ l[1:] }}",
     "HdelldlroW olleH[1, 2]"},
    {"{{ 'World' in s }} {{ 4 in l }} {{ 'a' in d }} {{ 'x' not in s }}",
     "True False True True"},
    {"{{ n > 3 and n < 10 }} {{ z or 'dflt' }} {{ t and 'yes' }} {{ not z }}",
     "True dflt yes True"},
    {"{{ 'big' if n > 3 else 'small' }}|{{ 'never' if false }}|",
     "big||"},
    {"{{ msgs[0].role }} {{ msgs[1]['content'] }} {{ d.a + d['b'] }}",
     "user yo 3"},
    {"{{ l }} {{ d }} {{ z }} {{ t }} {{ f }} {{ (1, 'a') }} {{ 1e20 }} {{ 0.1 }}",
     "[3, 1, 2] {'b': 2, 'a': 1} None True 2.5 (1, 'a') 1e+20 0.1"},
    {"{{ undefined_var }}|{{ undefined_var is defined }}|{{ d.missing is defined }}",
     "|False|False"},
    {"{{ 1 < 2 < 3 }} {{ 2 == 2.0 }} {{ 'a' != 'b' }} {{ [1, 2] == [1, 2] }}",
     "True True True True"},
    {"{{ 'it''s' }} {{ \"dq\" 'concat' }} {{ '\\u00e9\\n'|length }}",
     "its dqconcat 2"},
};
static const struct tcase filters_cases[] = {
    {"{{ s | upper }} {{ s | lower }} {{ s | length }} {{ '  pad  ' | trim }}|",
     "HELLO WORLD hello world 11 pad|"},
    {"{{ l | sort }} {{ l | join('-') }} {{ l | first }} {{ l | last }} {{ l | sum }} {{ l | max }} {{ l | min }}",
     "[1, 2, 3] 3-1-2 3 2 6 3 1"},
    {"{% for k, v in d | dictsort %}{{ k }}={{ v }};{% endfor %}",
     "a=1;b=2;"},
    {"{{ d | tojson }} {{ msgs | tojson(indent=2) }} {{ d | tojson(sort_keys=true) }}",
     "{\"b\": 2, \"a\": 1} [\n  {\n    \"role\": \"user\",\n    \"content\": \"hi\"\n  },\n  {\n    \"role\": \"assistant\",\n    \"content\": \"yo\"\n  }\n] {\"a\": 1, \"b\": 2}"},
    {"{{ msgs | map(attribute='role') | join(',') }} {{ msgs | selectattr('role', 'equalto', 'user') | list | length }}",
     "user,assistant 1"},
    {"{{ undefined_var | default('D') }} {{ z | default('kept') }} {{ '' | default('E', true) }}",
     "D None E"},
    {"{{ 'a-b' | replace('-', '+') }} {{ '3' | int + 1 }} {{ 2.567 | round(1) }} {{ -3 | abs }} {{ n | string }}",
     "a+b 4 2.6 3 5"},
    {"{{ 'x\\ny' | indent(2, true) }}",
     "  x\n  y"},
    {"{{ d | items | list }} {{ l | reverse | list }} {{ [1, 1, 2] | unique | list }} {{ ['b', 'a'] | map('upper') | list }}",
     "[('b', 2), ('a', 1)] [2, 1, 3] [1, 2] ['B', 'A']"},
    {"{{ s.split(' ') }} {{ s.startswith('He') }} {{ s.replace('o', '0') }} {{ '  x '.strip() }} {{ s.lower().title() }}",
     "['Hello', 'World'] True Hell0 W0rld x Hello World"},
};
static const struct tcase statements_cases[] = {
    {"{% for m in msgs %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ m.role }} {% endfor %}",
     "1TrueFalse2user 2FalseTrue2assistant "},
    {"{% for i in range(5) if i is odd %}{{ i }}{% else %}none{% endfor %}",
     "13"},
    {"{% for i in range(10) %}{% if i > 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}",
     "023"},
    {"{% set x = 1 %}{% for i in l %}{% set x = x + i %}{% endfor %}{{ x }}",
     "1"},
    {"{% set ns = namespace(c=0) %}{% for i in l %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}",
     "6"},
    {"{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, 3) }}{{ m(b=4, a=5) }}",
     "<1B><23><54>"},
    {"{% set blk %}inner {{ n }}{% endset %}[{{ blk }}]",
     "[inner 5]"},
    {"{% if n == 1 %}one{% elif n == 5 %}five{% else %}other{% endif %}",
     "five"},
    {"{% filter upper %}shout {{ s }}{% endfilter %}",
     "SHOUT HELLO WORLD"},
    {"{% generation %}gen {{ n }}{% endgeneration %}",
     "gen 5"},
};

/* jinja2's scoping and Python-object quirks (frames, for-else flag, generators, views) */
static const struct tcase scoping_cases[] = {
    {"{% set blk %}{{ s }}{% endset %}[{{ blk }}]{% set s = 'zz' %}",
     "[]"},
    {"{{ s }}{% set s = 'zz' %}{{ s }}",
     "Hello Worldzz"},
    {"{% macro m() %}{{ s }}{% endmacro %}[{{ m() }}]{% set s = 'zz' %}[{{ m() }}]",
     "[][zz]"},
    {"{% for i in [1] %}{{ s }}{% set s = 'q' %}{{ s }}{% endfor %}{{ s }}",
     "Hello WorldqHello World"},
    {"{% for i in [1] %}{% for j in [1] %}[{{ s }}]{% endfor %}{% set s = 'q' %}{% endfor %}",
     "[]"},
    {"{% if false %}{% set s = 1 %}{% endif %}{{ s }}",
     "Hello World"},
    {"{% set blk %}{% set y = 1 %}{% endset %}[{{ y }}]",
     "[]"},
    {"{% for x in [1, 2] %}{{ x }}{% continue %}{% else %}ELSE{% endfor %}",
     "12ELSE"},
    {"{{ l | select('odd') | list }} {{ (l | select('odd')) is sequence }} {{ d.keys() }} {{ range(3) }} {{ (none | select) | list }}",
     "[3, 1] False dict_keys(['b', 'a']) range(0, 3) []"},
    {"{% set g = l | map('string') %}{{ g | list }}{{ g | list }}",
     "['3', '1', '2'][]"},
};

static char *render(const char *tpl, const char *vars, g4_status *st) {
    g4_template *t = NULL;
    *st = g4_template_load_source(tpl, strlen(tpl), "t.jinja", NULL, &t);
    if (*st != G4_OK) return NULL;
    char *out = NULL;
    size_t n = 0;
    *st = g4_template_render(t, vars, strlen(vars), &out, &n);
    g4_template_free(t);
    if (out) assert_int_equal(strlen(out), n);
    return out;
}

/* vars for the table cases: VARS plus the messages the render API requires */
static char *table_vars(void) {
    size_t n = strlen(VARS);
    char *v = malloc(n + 64);
    memcpy(v, VARS, n - 1);
    strcpy(v + n - 1, ", \"messages\": [{\"role\": \"user\", \"content\": \"m\"}]}");
    return v;
}

static void run_table(const struct tcase *cs, size_t n) {
    char *vars = table_vars();
    for (size_t i = 0; i < n; i++) {
        g4_status st;
        char *out = render(cs[i].tpl, vars, &st);
        if (st != G4_OK) print_error("case %zu: %s\n  template: %s\n", i, g4_last_error(), cs[i].tpl);
        assert_int_equal(st, G4_OK);
        if (strcmp(out, cs[i].want))
            print_error("case %zu:\n  template: %s\n  want: [%s]\n  got:  [%s]\n", i, cs[i].tpl, cs[i].want, out);
        assert_string_equal(out, cs[i].want);
        free(out);
    }
    free(vars);
}

#define TABLE(name) static void test_##name(void **s) { (void)s; run_table(name##_cases, sizeof name##_cases / sizeof name##_cases[0]); }
TABLE(whitespace)
TABLE(expressions)
TABLE(filters)
TABLE(statements)
TABLE(scoping)

static const char MSGS[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";

static void expect_error(const char *tpl, const char *vars, const char *needle) {
    g4_status st;
    char *out = render(tpl, vars, &st);
    free(out);
    assert_int_equal(st, G4_ERR_INPUT);
    if (!strstr(g4_last_error(), needle)) print_error("want '%s' in '%s'\n", needle, g4_last_error());
    assert_non_null(strstr(g4_last_error(), needle));
}

static void test_syntax_errors_name_line(void **s) {
    (void)s;
    expect_error("a\nb\n{% if x %}never closed", MSGS, "t.jinja:3:");
    expect_error("{{ 1 + }}", MSGS, "t.jinja:1:");
    expect_error("\n\n{{ x | nope }}", MSGS, "No filter named 'nope'");
    expect_error("{% endif %}", MSGS, "t.jinja:1:");
    expect_error("{{ (1, 2 }}", MSGS, "unexpected '}'");
    expect_error("{% break %}", MSGS, "outside of a loop");
    expect_error("{{ 'open", MSGS, "t.jinja:1:");
    expect_error("\xff\xfe", MSGS, "UTF-8");
}

static void test_runtime_errors(void **s) {
    (void)s;
    expect_error("x\n{{ raise_exception('nope: ' ~ messages|length) }}", MSGS, "t.jinja:2:4: raise_exception: nope: 1");
    expect_error("{{ undefined_thing.attr }}", MSGS, "'undefined_thing' is undefined");
    expect_error("{{ messages[0].missing.deeper }}", MSGS, "has no attribute 'missing'");
    expect_error("{{ 'a' + 1 }}", MSGS, "unsupported operand");
    expect_error("{{ 1 / 0 }}", MSGS, "division by zero");
    expect_error("{{ 1 < 'a' }}", MSGS, "not supported between");
    expect_error("{% for x in none %}{% endfor %}", MSGS, "not iterable");
    expect_error("{{ messages.append(1) }}", MSGS, "unsafe");
    expect_error("{{ namespace(_x=1) }}", MSGS, "underscore");
    expect_error("{{ range(1000000) | length }}", MSGS, "Range too big");
}

static void test_bad_vars(void **s) {
    (void)s;
    expect_error("x", "{", "invalid JSON");
    expect_error("x", "[]", "JSON object");
    expect_error("x", "{\"messages\": {}}", "messages");
    expect_error("x", "{\"messages\": []}", "empty conversation");
}

static void test_runaway_guards(void **s) {
    (void)s;
    /* each bounded by a limit rather than hanging or exhausting memory */
    expect_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", MSGS, "recursion");
    jx_limits lim;
    jx_limits_default(&lim);
    lim.max_steps = 1000000;
    char err[800], *out = NULL;
    size_t n;
    const char *loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
    assert_int_equal(jx_render_source(loops, strlen(loops), "{}", 2, &lim, &out, &n, err, sizeof err), 1);
    assert_non_null(strstr(err, "evaluation steps"));
    lim.max_output = 1000;
    const char *big = "{% for i in range(2000) %}x{% endfor %}";
    assert_int_equal(jx_render_source(big, strlen(big), "{}", 2, &lim, &out, &n, err, sizeof err), 1);
    assert_non_null(strstr(err, "exceeds 1000 bytes"));
    lim.max_memory = 1 << 20;
    const char *mem = "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}";
    assert_int_equal(jx_render_source(mem, strlen(mem), "{}", 2, &lim, &out, &n, err, sizeof err), 1);
    assert_null(out);
    char deep[5000];
    size_t k = 0;
    k += (size_t)sprintf(deep + k, "{{ ");
    for (int i = 0; i < 1000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 1000; i++) deep[k++] = ')';
    strcpy(deep + k, " }}");
    expect_error(deep, MSGS, "nested too deeply");
}

static void test_value_repr(void **s) {
    (void)s;
    char buf[64];
    jv_float_repr(buf, sizeof buf, 1e16);
    assert_string_equal(buf, "1e+16");
    jv_float_repr(buf, sizeof buf, 1e15);
    assert_string_equal(buf, "1000000000000000.0");
    jv_float_repr(buf, sizeof buf, 0.0001);
    assert_string_equal(buf, "0.0001");
    jv_float_repr(buf, sizeof buf, 0.00001);
    assert_string_equal(buf, "1e-05");
    jv_float_repr(buf, sizeof buf, 0.1 + 0.2);
    assert_string_equal(buf, "0.30000000000000004");
    jv_float_repr(buf, sizeof buf, -2.5e-300);
    assert_string_equal(buf, "-2.5e-300");
    jv_float_repr(buf, sizeof buf, 123456789.125);
    assert_string_equal(buf, "123456789.125");
}

static void test_special_tokens_and_normalisation(void **s) {
    (void)s;
    g4_status st;
    /* None-valued keys are dropped; reasoning aliases fill thinking / reasoning_content */
    char *out = render("{{ messages[0] }}",
                       "{\"messages\": [{\"role\": \"assistant\", \"content\": null, \"reasoning\": \"r\"}]}", &st);
    assert_int_equal(st, G4_OK);
    assert_string_equal(out, "{'thinking': 'r', 'role': 'assistant', 'reasoning': 'r', 'reasoning_content': 'r'}");
    free(out);
    out = render("{{ tools }} {{ documents }} {{ add_generation_prompt }} {{ bos_token is defined }}", MSGS, &st);
    assert_int_equal(st, G4_OK);
    assert_string_equal(out, "None None False False");
    free(out);
}

/* inputs that crashed fuzz_jinja once */
static void test_fuzz_regressions(void **s) {
    (void)s;
    g4_status st;
    char *out = render("{{ 1[:2, 2] }}|{{ [1, 2][:1, 0] }}|", MSGS, &st);   /* slice inside a tuple subscript */
    assert_int_equal(st, G4_OK);
    assert_string_equal(out, "||");
    free(out);
    expect_error("{{ 2<3}} {{1[:2, 2]}}|t]}}} {{ect1[::-1] [2, 2]}}|t|tojson", MSGS, "is undefined");
    /* self-referencing namespace: CPython's repr guard */
    out = render("{% set ns = namespace(a=1) %}{% set ns.x = ns %}{{ ns }}", MSGS, &st);
    assert_int_equal(st, G4_OK);
    assert_string_equal(out, "<Namespace {'a': 1, 'x': <Namespace {...}>}>");
    free(out);
    /* values nested deeper than Python's recursion limit, and very long operator chains, fail
     * cleanly instead of overflowing the stack */
    expect_error("{% set ns = namespace(x=0) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
                 MSGS, "recursion");
    static char chain[40000];
    size_t k = (size_t)sprintf(chain, "{{ 1");
    for (int i = 0; i < 5000; i++) k += (size_t)sprintf(chain + k, " + 1");
    strcpy(chain + k, " }}");
    expect_error(chain, MSGS, "expression too long");
    k = (size_t)sprintf(chain, "{{ x");
    for (int i = 0; i < 5000; i++) k += (size_t)sprintf(chain + k, ".a");
    strcpy(chain + k, " }}");
    expect_error(chain, MSGS, "nested too deeply");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whitespace),
        cmocka_unit_test(test_expressions),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_statements),
        cmocka_unit_test(test_scoping),
        cmocka_unit_test(test_syntax_errors_name_line),
        cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_bad_vars),
        cmocka_unit_test(test_runaway_guards),
        cmocka_unit_test(test_value_repr),
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_special_tokens_and_normalisation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
