/* chat_template.c — the public chat-template API (g4_template_*): finds the template in a model
 * directory, reads the special-token strings from tokenizer_config.json, and renders a JSON
 * conversation the way transformers' apply_chat_template does (message normalisation, default
 * variables). The Jinja language itself is in jinja_*.c. */
#include "gemma4c.h"
#include "io/source.h"
#include "template/jinja.h"
#include "tokenizer/tokenizer_gguf.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct g4_template {
    jx_arena arena;   /* tokens + AST, alive as long as the template */
    jnode *root;
    char *name;       /* template name in error messages */
    json_t *specials; /* {"bos_token": "<bos>", ...} in tokenizer_config.json order */
};

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) { free(buf); return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static char *join_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* transformers' SPECIAL_TOKENS_ATTRIBUTES, then any named extra_special_tokens; values are
 * strings or AddedToken dicts ({"content": ...}). */
static json_t *read_specials(const json_t *cfg) {
    static const char *const names[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                        "pad_token", "cls_token", "mask_token", NULL};
    json_t *out = json_object();
    if (!out || !cfg) return out;
    for (size_t i = 0; names[i]; i++) {
        json_t *v = json_object_get(cfg, names[i]);
        if (json_is_object(v)) v = json_object_get(v, "content");
        if (json_is_string(v)) json_object_set(out, names[i], v);
    }
    json_t *extra = json_object_get(cfg, "extra_special_tokens");
    if (json_is_object(extra)) {
        const char *k;
        json_t *v;
        json_object_foreach(extra, k, v) {
            if (json_is_object(v)) v = json_object_get(v, "content");
            if (json_is_string(v) && !json_object_get(out, k)) json_object_set(out, k, v);
        }
    }
    return out;
}

/* The "chat_template" field: a string, or a list of {name, template} (take "default"). */
static g4_status template_from_config(const json_t *cfg, const char *cfg_path, const char **src) {
    json_t *t = json_object_get(cfg, "chat_template");
    if (json_is_string(t)) { *src = json_string_value(t); return G4_OK; }
    if (json_is_array(t)) {
        size_t i;
        json_t *e;
        json_array_foreach(t, i, e) {
            json_t *nm = json_object_get(e, "name"), *tp = json_object_get(e, "template");
            if (json_is_string(nm) && !strcmp(json_string_value(nm), "default") && json_is_string(tp)) {
                *src = json_string_value(tp);
                return G4_OK;
            }
        }
        return g4_fail(G4_ERR_INPUT, "%s: field 'chat_template' is a list without a 'default' entry", cfg_path);
    }
    return g4_fail(G4_ERR_INPUT, "%s: no chat template (field 'chat_template' missing)", cfg_path);
}

static json_t *load_json_file(const char *path, g4_status *st) {
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &jerr);
    if (!j) *st = g4_fail(G4_ERR_INPUT, "%s:%d:%d: invalid JSON: %s", path, jerr.line, jerr.column, jerr.text);
    else if (!json_is_object(j)) {
        json_decref(j);
        j = NULL;
        *st = g4_fail(G4_ERR_INPUT, "%s: expected a JSON object", path);
    } else *st = G4_OK;
    return j;
}

g4_status g4_template_load_source(const char *src, size_t len, const char *template_path,
                                  const char *tokenizer_dir, g4_template **out) {
    *out = NULL;
    const char *name = template_path ? template_path : "chat_template.jinja";
    if (!jx_utf8_valid(src, len)) return g4_fail(G4_ERR_INPUT, "%s: template is not valid UTF-8", name);
    g4_template *t = calloc(1, sizeof *t);
    if (!t) return g4_fail(G4_ERR_NOMEM, "out of memory loading %s", name);
    t->name = strdup(name);
    jx_limits lim;
    jx_limits_default(&lim);
    jx_arena_init(&t->arena, (size_t)1 << 30);
    if (tokenizer_dir) {
        char *cp = join_path(tokenizer_dir, "tokenizer_config.json");
        if (cp && is_file(cp)) {
            g4_status st;
            json_t *cfg = load_json_file(cp, &st);
            if (!cfg) { free(cp); g4_template_free(t); return st; }
            t->specials = read_specials(cfg);
            json_decref(cfg);
        }
        free(cp);
    }
    if (!t->specials) t->specials = json_object();
    jx_err err;
    memset(&err, 0, sizeof err);
    err.path = t->name;
    if (setjmp(err.jb)) {
        g4_status st = g4_fail(G4_ERR_INPUT, "%s", err.msg);
        g4_template_free(t);
        return st;
    }
    jx_toks toks;
    jx_lex(&t->arena, &err, src, len, &toks);
    t->root = jx_parse(&t->arena, &err, &toks, lim.max_depth);
    *out = t;
    return G4_OK;
}

static json_t *parse_json_object(const char *data, size_t len, const char *where, g4_status *st) {
    json_error_t jerr;
    json_t *j = json_loadb(data, len, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &jerr);
    if (!j) *st = g4_fail(G4_ERR_INPUT, "%s:%d:%d: invalid JSON: %s", where, jerr.line, jerr.column, jerr.text);
    else if (!json_is_object(j)) {
        json_decref(j);
        j = NULL;
        *st = g4_fail(G4_ERR_INPUT, "%s: expected a JSON object", where);
    } else *st = G4_OK;
    return j;
}

/* A checkpoint (directory or .g4c): chat_template.jinja, else the chat_template field of
 * chat_template.json / tokenizer_config.json, with the special-token strings of
 * tokenizer_config.json. */
static g4_status template_load_checkpoint(g4_source *src, g4_template **out) {
    const char *jinja, *jinja_at, *cfg_text, *cfg_at, *ct_text, *ct_at;
    size_t jinja_len, cfg_len, ct_len;
    g4_status st;
    if ((st = g4_source_file(src, "chat_template.jinja", &jinja, &jinja_len, &jinja_at)) ||
        (st = g4_source_file(src, "tokenizer_config.json", &cfg_text, &cfg_len, &cfg_at)) ||
        (st = g4_source_file(src, "chat_template.json", &ct_text, &ct_len, &ct_at)))
        return st;
    json_t *cfg = NULL, *specials = NULL;
    if (cfg_text) {
        if (!(cfg = parse_json_object(cfg_text, cfg_len, cfg_at, &st))) return st;
        specials = read_specials(cfg);
    }
    if (jinja) {
        st = g4_template_load_source(jinja, jinja_len, jinja_at, NULL, out);
    } else if (ct_text || cfg) {
        json_t *tc = ct_text ? parse_json_object(ct_text, ct_len, ct_at, &st) : cfg;
        const char *from = ct_text ? ct_at : cfg_at, *text = NULL;
        if (tc && !(st = template_from_config(tc, from, &text))) {
            char name[4200];
            snprintf(name, sizeof name, "%s:chat_template", from);
            st = g4_template_load_source(text, strlen(text), name, NULL, out);
        }
        if (tc != cfg) json_decref(tc);
    } else {
        st = g4_fail(G4_ERR_INPUT, "%s: no chat_template.jinja or tokenizer_config.json", g4_source_path(src));
    }
    if (!st && specials) {   /* the source loader had no directory to read them from */
        json_decref((*out)->specials);
        (*out)->specials = specials;
        specials = NULL;
    }
    json_decref(specials);
    json_decref(cfg);
    return st;
}

g4_status g4_template_load(const char *path, g4_template **out) {
    *out = NULL;
    if (!path) return g4_fail(G4_ERR_INPUT, "template: no path given");
    if (!is_dir(path) && !is_file(path)) return g4_fail(G4_ERR_IO, "%s: no such file or directory", path);
    g4_source *source;
    g4_status st = g4_source_open(path, &source);
    if (st) return st;
    const g4_source_kind kind = g4_source_kind_of(source);
    if (kind == G4_SOURCE_GGUF) {   /* tokenizer.chat_template (tokenizer_gguf.c) */
        const g4_gguf *g = g4_source_gguf(source, &st);
        if (g) st = tk_template_load_gguf(g, path, out);
    } else if (kind != G4_SOURCE_FILE) st = template_load_checkpoint(source, out);
    g4_source_close(source);
    if (kind != G4_SOURCE_FILE) return st;
    /* a file: tokenizer_config.json-like JSON, or a template whose directory may hold one */
    char *dir = strdup(path);
    if (!dir) return g4_fail(G4_ERR_NOMEM, "out of memory");
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else strcpy(dir, ".");
    size_t plen = strlen(path);
    if (plen > 5 && !strcmp(path + plen - 5, ".json")) {
        json_t *cfg = load_json_file(path, &st);
        if (cfg) {
            const char *src = NULL;
            st = template_from_config(cfg, path, &src);
            if (st == G4_OK) {
                char name[4096];
                snprintf(name, sizeof name, "%s:chat_template", path);
                st = g4_template_load_source(src, strlen(src), name, dir, out);
            }
            json_decref(cfg);
        }
    } else {
        size_t len;
        char *src = read_file(path, &len);
        st = src ? g4_template_load_source(src, len, path, dir, out)
                 : g4_fail(G4_ERR_IO, "%s: cannot read", path);
        free(src);
    }
    free(dir);
    return st;
}

void g4_template_free(g4_template *t) {
    if (!t) return;
    jx_arena_free(&t->arena);
    json_decref(t->specials);
    free(t->name);
    free(t);
}

/* transformers' _normalize_chat_messages (drop None-valued keys) and _alias_reasoning_fields
 * ({"thinking": r, **message, "reasoning_content": r} when any of reasoning_content / thinking /
 * reasoning is set, first in that order). */
static json_t *normalize_message(const json_t *m) {
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_t *reasoning = NULL;
    static const char *const fields[] = {"reasoning_content", "thinking", "reasoning", NULL};
    for (size_t i = 0; fields[i] && !reasoning; i++) {
        json_t *r = json_object_get(m, fields[i]);
        if (r && !json_is_null(r)) reasoning = r;
    }
    if (reasoning) json_object_set(out, "thinking", reasoning);
    json_object_foreach((json_t *)m, k, v) {
        if (json_is_null(v)) continue;
        json_object_set(out, k, v);
    }
    if (reasoning) {
        json_object_set(out, "thinking", json_object_get(m, "thinking") && !json_is_null(json_object_get(m, "thinking"))
                                             ? json_object_get(m, "thinking") : reasoning);
        json_object_set(out, "reasoning_content", reasoning);
    }
    return out;
}

g4_status g4_template_render(const g4_template *t, const char *json_vars, size_t json_len,
                             char **out, size_t *out_len) {
    return g4_template_render_budget(t, json_vars, json_len, 0, out, out_len);
}

g4_status g4_template_render_budget(const g4_template *t, const char *json_vars, size_t json_len,
                                    size_t max_memory, char **out, size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    json_error_t jerr;
    json_t *in = json_loadb(json_vars, json_len, JSON_ALLOW_NUL, &jerr);
    if (!in) return g4_fail(G4_ERR_INPUT, "template variables: invalid JSON at line %d column %d: %s",
                            jerr.line, jerr.column, jerr.text);
    if (!json_is_object(in)) {
        json_decref(in);
        return g4_fail(G4_ERR_INPUT, "template variables: expected a JSON object");
    }
    json_t *msgs = json_object_get(in, "messages");
    if (!json_is_array(msgs)) {
        json_decref(in);
        return g4_fail(G4_ERR_INPUT, "template variables: field 'messages' must be a list of message objects");
    }
    if (json_array_size(msgs) == 0) {
        json_decref(in);
        return g4_fail(G4_ERR_INPUT, "template variables: cannot apply the chat template to an empty conversation");
    }
    json_t *nmsgs = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) {
            json_decref(nmsgs);
            json_decref(in);
            return g4_fail(G4_ERR_INPUT, "template variables: messages[%zu] is not an object", i);
        }
        json_array_append_new(nmsgs, normalize_message(m));
    }
    /* {**special_tokens_map, **kwargs}, then messages / tools / documents /
     * add_generation_prompt exactly as render_jinja_template passes them */
    json_t *vars = json_deep_copy(t->specials);
    const char *k;
    json_t *v;
    json_object_foreach(in, k, v) {
        if (!strcmp(k, "messages") || !strcmp(k, "tools") || !strcmp(k, "documents") ||
            !strcmp(k, "add_generation_prompt"))
            continue;
        json_object_set(vars, k, v);
    }
    json_object_set_new(vars, "messages", nmsgs);
    json_t *tools = json_object_get(in, "tools"), *docs = json_object_get(in, "documents");
    json_t *agp = json_object_get(in, "add_generation_prompt");
    json_object_set(vars, "tools", tools ? tools : json_null());
    json_object_set(vars, "documents", docs ? docs : json_null());
    json_object_set(vars, "add_generation_prompt", agp ? agp : json_false());
    json_decref(in);

    jx_limits lim;
    jx_limits_default(&lim);
    if (max_memory) lim.max_memory = max_memory;
    jx_arena a;
    jx_arena_init(&a, lim.max_memory);
    jx_err err;
    memset(&err, 0, sizeof err);
    err.path = t->name;
    g4_status st = G4_OK;
    if (setjmp(err.jb)) {
        st = g4_fail(G4_ERR_INPUT, "%s", err.msg);
    } else {
        jv *jvars = jv_from_json(&a, &err, vars);
        size_t n = 0;
        if (jx_render(t->root, jvars, &a, &err, &lim, out, &n))
            st = g4_fail(G4_ERR_INPUT, "%s", err.msg);
        else if (out_len)
            *out_len = n;
    }
    /* the arena refused an allocation: the render outgrew its budget, whatever the message said */
    if (st && a.refused)
        st = g4_fail(G4_ERR_NOMEM, "%s: rendering this conversation needs more than its memory budget of %zu MiB",
                     t->name, lim.max_memory >> 20);
    json_decref(vars);
    jx_arena_free(&a);
    return st;
}

int jx_render_source(const char *src, size_t n, const char *vars, size_t vars_len,
                     const jx_limits *lim, char **out, size_t *out_len, char *err, size_t errcap) {
    *out = NULL;
    *out_len = 0;
    if (!jx_utf8_valid(src, n)) {
        snprintf(err, errcap, "template is not valid UTF-8");
        return 1;
    }
    json_error_t jerr;
    json_t *j = json_loadb(vars, vars_len, JSON_ALLOW_NUL, &jerr);
    if (!j || !json_is_object(j)) {
        snprintf(err, errcap, "variables: not a JSON object");
        json_decref(j);
        return 1;
    }
    jx_arena a;
    jx_arena_init(&a, lim->max_memory);
    jx_err e;
    memset(&e, 0, sizeof e);
    e.path = "template";
    int rc = 0;
    if (setjmp(e.jb)) {
        rc = e.is_raise ? 2 : 1;
    } else {
        jx_toks toks;
        jx_lex(&a, &e, src, n, &toks);
        jnode *root = jx_parse(&a, &e, &toks, lim->max_depth);
        jv *jvars = jv_from_json(&a, &e, j);
        if (jx_render(root, jvars, &a, &e, lim, out, out_len)) rc = e.is_raise ? 2 : 1;
    }
    if (rc) snprintf(err, errcap, "%s", e.msg);
    json_decref(j);
    jx_arena_free(&a);
    return rc;
}
