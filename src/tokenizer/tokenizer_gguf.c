/* tokenizer_gguf.c — a g4_tokenizer and chat template from a GGUF file's metadata
 * (tokenizer.ggml.{model,tokens,token_type,merges,...}, tokenizer.chat_template), written as
 * tokenizer.json text and read by the ordinary loader, so encoding and decoding are the same code
 * as for a HuggingFace directory. Two vocabularies:
 *   "llama" (Gemma 3 GGUFs): built the way transformers' GGUF loader builds Gemma's
 *     (integrations/gguf/gguf_tokenizer_mapping.py, gemma_tokenizer + GemmaTokenizer): the file has
 *     no merges, so they are rebuilt from the vocabulary — every split of a token into two tokens,
 *     ranked by the merged token's position in the file, longer left part first (generate_merges) —
 *     and whitespace-only tokens containing a space are respelled as that many "▁".
 *   "gemma4" (llama.cpp's Gemma4Model.set_vocab): the HF tokenizer.json's vocabulary verbatim and its
 *     merges in tokenizer.ggml.merges ("a b"); the Gemma 4 tokenizer.json around them (normalizer,
 *     pre-tokenizer, byte-fallback BPE, <bos> template) is the same as Gemma 3's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "base/strbuf.h"
#include "tokenizer/tokenizer_gguf.h"
#include "tokenizer/tokenizer_internal.h"


/* JSON string literal of bytes s[0..n) (valid UTF-8, checked by the caller) */
static void put_jstr(g4_strbuf *b, const char *s, size_t n) {
    g4_sb_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        g4_sb_put(b, s + run, i - run);
        char esc[8];
        if (c == '"' || c == '\\') snprintf(esc, sizeof esc, "\\%c", c);
        else snprintf(esc, sizeof esc, "\\u%04x", c);
        g4_sb_puts(b, esc);
        run = i + 1;
    }
    g4_sb_put(b, s + run, n - run);
    g4_sb_put(b, "\"", 1);
}

static int is_ws(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* The official Gemma 3 template (google/gemma-3 tokenizer_config.json), for Gemma GGUFs that carry
 * none (llama.cpp likewise falls back to its built-in "gemma" template). */
static const char gemma_template[] =
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n"
    "\n"
    "' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n"
    "\n"
    "' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n"
    "' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n"
    "' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n"
    "'}}\n"
    "{%- endif -%}\n"
    "";

typedef struct {
    const g4_gguf *g;
    const char *path;
    uint64_t n;              /* tokens */
    tk_str *tok;             /* [n] spelled as transformers respells them, in `arena` */
    char *arena;
    const g4_gguf_kv *types; /* int32 [n] or NULL */
    int verbatim;            /* 1: tokens as stored (gemma4), 0: respell whitespace tokens (llama) */
} vocab_t;

static int32_t ttype(const vocab_t *v, uint64_t i) { return v->types ? (int32_t)g4_gguf_arr_i64(v->types, i) : 1; }

static g4_status read_vocab(vocab_t *v) {
    const g4_gguf_kv *kv;
    g4_status st = g4_gguf_get_arr(v->g, "tokenizer.ggml.tokens", G4_GGUF_STRING, &kv);
    if (st) return st;
    if (!kv || kv->n == 0) return g4_fail(G4_ERR_INPUT, "%s: metadata 'tokenizer.ggml.tokens' is missing or empty", v->path);
    if (kv->n >= TK_MAX_ID) return g4_fail(G4_ERR_INPUT, "%s: tokenizer.ggml.tokens has %llu tokens (max %d)", v->path, (unsigned long long)kv->n, TK_MAX_ID - 1);
    v->n = kv->n;
    if ((st = g4_gguf_get_arr(v->g, "tokenizer.ggml.token_type", G4_GGUF_INT32, &v->types))) return st;
    if (v->types && v->types->n != v->n)
        return g4_fail(G4_ERR_INPUT, "%s: tokenizer.ggml.token_type has %llu entries for %llu tokens", v->path,
                       (unsigned long long)v->types->n, (unsigned long long)v->n);
    /* respelling never lengthens a token by more than 3x (1 byte ' ' -> 3 bytes "▁") */
    size_t bytes = 0;
    const uint8_t *p = kv->val;
    for (uint64_t i = 0; i < v->n; i++) {
        const char *s;
        uint64_t len;
        p = g4_gguf_str_next(p, &s, &len);
        bytes += 3 * len + 1;
    }
    v->tok = malloc(v->n * sizeof *v->tok);
    v->arena = malloc(bytes + 1);
    if (!v->tok || !v->arena) return g4_fail(G4_ERR_NOMEM, "%s: out of memory", v->path);
    char *w = v->arena;
    p = kv->val;
    for (uint64_t i = 0; i < v->n; i++) {
        const char *s;
        uint64_t len;
        p = g4_gguf_str_next(p, &s, &len);
        if (tk_utf8_check(s, len) != len)
            return g4_fail(G4_ERR_INPUT, "%s: tokenizer.ggml.tokens[%llu] is not valid UTF-8", v->path, (unsigned long long)i);
        int space = 0, all_ws = 1;
        for (uint64_t k = 0; k < len; k++) {
            space |= s[k] == ' ';
            all_ws &= is_ws((unsigned char)s[k]);
        }
        v->tok[i].s = w;
        if (space && all_ws && !v->verbatim) {   /* " " in t and not t.strip(): "▁" * len(t) */
            for (uint64_t k = 0; k < len; k++) { memcpy(w, "\xe2\x96\x81", 3); w += 3; }
            v->tok[i].len = (uint32_t)(3 * len);
        } else {
            memcpy(w, s, len);
            w += len;
            v->tok[i].len = (uint32_t)len;
        }
        *w++ = 0;
    }
    return G4_OK;
}

static int32_t find_tok(const vocab_t *v, const char *piece) {
    size_t n = strlen(piece);
    for (uint64_t i = 0; i < v->n; i++)
        if (v->tok[i].len == n && !memcmp(v->tok[i].s, piece, n)) return (int32_t)i;
    return -1;
}

/* llama.cpp's converter types only the tokenizer's named specials (<bos>, <eos>, ...) CONTROL and a
 * few chat markers USER_DEFINED; Gemma 4's other markers (<|turn>, <turn|>, <|image|>, ...) come as
 * NORMAL, while its tokenizer.json has them as added special tokens, matched whole in any text. They
 * are recognized by that spelling: "<|...>" or "<...|>". */
static int gemma4_control(const tk_str *t) {
    const char *s = t->s;
    const uint32_t n = t->len;
    return n >= 4 && s[0] == '<' && s[n - 1] == '>' && (s[1] == '|' || s[n - 2] == '|');
}

/* The vocabulary's pieces as a set keyed by (length, polynomial hash), for the merges below: with
 * the prefix hashes of a token, whether any substring of it is a piece takes O(1) expected instead
 * of hashing the substring, so splitting every token at every point stays linear in the
 * vocabulary's bytes (a crafted file with one 100,000-byte token took seconds before). A hash hit
 * is confirmed byte for byte. */
#define PIECE_HASH_BASE 0x100000001b3ull
typedef struct {
    uint64_t *hash;       /* [cap] hash of the piece in the slot, or 0 with len 0: empty */
    uint32_t *len;        /* [cap] its length */
    const tk_str **tok;   /* [cap] one piece of that spelling */
    uint64_t cap;
} piece_set;

static uint64_t piece_slot(const piece_set *ps, uint64_t h, uint32_t len) {
    return (h ^ ((uint64_t)len * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull >> 17 & (ps->cap - 1);
}

static int piece_set_init(piece_set *ps, const vocab_t *v) {
    ps->cap = 16;
    while (ps->cap < 2 * v->n) ps->cap <<= 1;
    ps->hash = calloc(ps->cap, sizeof *ps->hash);
    ps->len = calloc(ps->cap, sizeof *ps->len);
    ps->tok = calloc(ps->cap, sizeof *ps->tok);
    if (!ps->hash || !ps->len || !ps->tok) return -1;
    for (uint64_t i = 0; i < v->n; i++) {
        const tk_str *t = &v->tok[i];
        if (!t->len) continue;
        uint64_t h = 0;
        for (uint32_t k = 0; k < t->len; k++) h = h * PIECE_HASH_BASE + (unsigned char)t->s[k];
        uint64_t j = piece_slot(ps, h, t->len);
        while (ps->len[j] && !(ps->hash[j] == h && ps->len[j] == t->len && !memcmp(ps->tok[j]->s, t->s, t->len)))
            j = (j + 1) & (ps->cap - 1);
        ps->hash[j] = h;
        ps->len[j] = t->len;
        ps->tok[j] = t;
    }
    return 0;
}

static void piece_set_free(piece_set *ps) {
    free(ps->hash);
    free(ps->len);
    free(ps->tok);
}

/* Whether s[0, len) — whose hash is h — is a piece; `confirm` 0 trusts a hash match (a first
 * filter), 1 compares the bytes. */
static int piece_set_has(const piece_set *ps, uint64_t h, const char *s, uint32_t len, int confirm) {
    for (uint64_t j = piece_slot(ps, h, len); ps->len[j]; j = (j + 1) & (ps->cap - 1))
        if (ps->hash[j] == h && ps->len[j] == len && (!confirm || !memcmp(ps->tok[j]->s, s, len))) return 1;
    return 0;
}

static g4_status build_json(vocab_t *v, g4_strbuf *b) {
    g4_status st;
    const char *model;
    size_t ml;
    int found;
    if ((st = g4_gguf_get_str(v->g, "tokenizer.ggml.model", &model, &ml, &found))) return st;
    if (!found) return g4_fail(G4_ERR_INPUT, "%s: metadata 'tokenizer.ggml.model' is missing", v->path);
    const char *arch = "";
    size_t al = 0;
    if ((st = g4_gguf_get_str(v->g, "general.architecture", &arch, &al, &found))) return st;
    v->verbatim = ml == 6 && !memcmp(model, "gemma4", 6);
    if (!(ml == 5 && !memcmp(model, "llama", 5)) && !v->verbatim)
        return g4_fail(G4_ERR_INPUT, "%s: tokenizer.ggml.model '%.*s' is not supported (llama: Gemma's sentencepiece "
                       "vocabulary; gemma4)", v->path, (int)(ml < 32 ? ml : 32), model);
    if (al < 5 || memcmp(arch, "gemma", 5))
        return g4_fail(G4_ERR_INPUT, "%s: tokenizer of architecture '%.*s' is not supported (Gemma models' are)", v->path,
                       (int)(al < 32 ? al : 32), arch);
    const g4_gguf_kv *merges = NULL;
    if (v->verbatim) {
        if ((st = g4_gguf_get_arr(v->g, "tokenizer.ggml.merges", G4_GGUF_STRING, &merges))) return st;
        if (!merges) return g4_fail(G4_ERR_INPUT, "%s: metadata 'tokenizer.ggml.merges' is missing (the gemma4 vocabulary needs it)", v->path);
    }
    if ((st = read_vocab(v))) return st;
    int add_bos = 1;
    if ((st = g4_gguf_get_bool(v->g, "tokenizer.ggml.add_bos_token", &add_bos, &found))) return st;
    if (!found) add_bos = 1;
    /* transformers' GemmaTokenizer names its specials "<bos>" / "<unk>" whatever ids the file lists */
    int32_t bos = find_tok(v, "<bos>"), unk = find_tok(v, "<unk>");
    if (bos < 0) {
        int64_t id;
        if ((st = g4_gguf_get_int(v->g, "tokenizer.ggml.bos_token_id", &id, &found))) return st;
        bos = found && id >= 0 && (uint64_t)id < v->n ? (int32_t)id : -1;
    }

    g4_sb_puts(b, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[");
    int first = 1;
    for (uint64_t i = 0; i < v->n; i++) {
        int32_t ty = ttype(v, i);   /* 3 CONTROL: special; 4 USER_DEFINED: plain added token */
        if (v->verbatim && ty == 1 && gemma4_control(&v->tok[i])) ty = 3;
        if (ty != 3 && ty != 4) continue;
        if (v->verbatim) ty = 3;   /* Gemma 4's tokenizer.json marks every added token special */
        char head[64];
        snprintf(head, sizeof head, "%s{\"id\":%llu,\"content\":", first ? "" : ",", (unsigned long long)i);
        g4_sb_puts(b, head);
        put_jstr(b, v->tok[i].s, v->tok[i].len);
        g4_sb_puts(b, ty == 3 ? ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}"
                         : ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":false}");
        first = 0;
    }
    g4_sb_puts(b, "],\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"},"
             "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"MergedWithPrevious\",\"invert\":false},");
    if (add_bos && bos >= 0) {
        g4_sb_puts(b, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":");
        put_jstr(b, v->tok[bos].s, v->tok[bos].len);
        g4_sb_puts(b, ",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{");
        put_jstr(b, v->tok[bos].s, v->tok[bos].len);
        g4_sb_puts(b, ":{\"id\":");
        put_jstr(b, v->tok[bos].s, v->tok[bos].len);
        char ids[48];
        snprintf(ids, sizeof ids, ",\"ids\":[%d],\"tokens\":[", bos);
        g4_sb_puts(b, ids);
        put_jstr(b, v->tok[bos].s, v->tok[bos].len);
        g4_sb_puts(b, "]}}},");
    } else g4_sb_puts(b, "\"post_processor\":null,");
    g4_sb_puts(b, "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"},"
             "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]},"
             "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":");
    if (unk >= 0) put_jstr(b, v->tok[unk].s, v->tok[unk].len);
    else g4_sb_puts(b, "null");
    g4_sb_puts(b, ",\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":true,\"byte_fallback\":true,"
             "\"ignore_merges\":false,\"vocab\":{");
    for (uint64_t i = 0; i < v->n; i++) {
        if (i) g4_sb_put(b, ",", 1);
        put_jstr(b, v->tok[i].s, v->tok[i].len);
        char id[24];
        snprintf(id, sizeof id, ":%llu", (unsigned long long)i);
        g4_sb_puts(b, id);
    }
    g4_sb_puts(b, "},\"merges\":[");
    if (v->verbatim) {   /* the file's merges, "left right" split at the first space after byte 0, as llama.cpp does */
        const uint8_t *p = merges->val;
        for (uint64_t i = 0; i < merges->n; i++) {
            const char *m;
            uint64_t len, k = 1;
            p = g4_gguf_str_next(p, &m, &len);
            while (k < len && m[k] != ' ') k++;
            if (k >= len || tk_utf8_check(m, len) != len)
                return g4_fail(G4_ERR_INPUT, "%s: tokenizer.ggml.merges[%llu] is not two UTF-8 pieces separated by a space",
                               v->path, (unsigned long long)i);
            g4_sb_put(b, i ? ",[" : "[", i ? 2 : 1);
            put_jstr(b, m, k);
            g4_sb_put(b, ",", 1);
            put_jstr(b, m + k + 1, len - k - 1);
            g4_sb_put(b, "]", 1);
        }
        g4_sb_puts(b, "]}}");
        return b->oom ? g4_fail(G4_ERR_NOMEM, "%s: out of memory", v->path) : G4_OK;
    }
    /* merges: for each piece in file order (its final id: a respelled duplicate keeps the last),
     * each split into two pieces of the vocabulary, longer left part first */
    tk_strmap map;
    piece_set ps = {0};
    uint32_t max_len = 0;
    for (uint64_t i = 0; i < v->n; i++) max_len = v->tok[i].len > max_len ? v->tok[i].len : max_len;
    uint64_t *pre = malloc(((size_t)max_len + 1) * sizeof *pre), *pw = malloc(((size_t)max_len + 1) * sizeof *pw);
    if (!pre || !pw || piece_set_init(&ps, v) || tk_strmap_init(&map, (uint32_t)v->n, v->arena)) {
        free(pre);
        free(pw);
        piece_set_free(&ps);
        return g4_fail(G4_ERR_NOMEM, "%s: out of memory", v->path);
    }
    pw[0] = 1;
    for (uint32_t k = 1; k <= max_len; k++) pw[k] = pw[k - 1] * PIECE_HASH_BASE;
    for (uint64_t i = 0; i < v->n; i++)
        if (tk_strmap_put(&map, v->tok[i].s, v->tok[i].len, (int32_t)i)) {
            tk_strmap_free(&map);
            free(pre);
            free(pw);
            piece_set_free(&ps);
            return g4_fail(G4_ERR_NOMEM, "%s: out of memory", v->path);
        }
    first = 1;
    for (uint64_t i = 0; i < v->n; i++) {
        const char *s = v->tok[i].s;
        const uint32_t n = v->tok[i].len;
        if (n < 2 || tk_strmap_get(&map, s, n) != (int32_t)i) continue;
        pre[0] = 0;   /* pre[k]: hash of s[0, k) */
        for (uint32_t k = 0; k < n; k++) pre[k + 1] = pre[k] * PIECE_HASH_BASE + (unsigned char)s[k];
        for (uint32_t k = n - 1; k >= 1; k--) {
            if (((unsigned char)s[k] & 0xC0) == 0x80) continue;   /* split at code point boundaries */
            const uint64_t hl = pre[k], hr = pre[n] - pre[k] * pw[n - k];
            if (!piece_set_has(&ps, hl, s, k, 0) || !piece_set_has(&ps, hr, s + k, n - k, 0)) continue;
            if (!piece_set_has(&ps, hl, s, k, 1) || !piece_set_has(&ps, hr, s + k, n - k, 1)) continue;
            g4_sb_put(b, first ? "[" : ",[", first ? 1 : 2);
            put_jstr(b, s, k);
            g4_sb_put(b, ",", 1);
            put_jstr(b, s + k, n - k);
            g4_sb_put(b, "]", 1);
            first = 0;
        }
    }
    free(pre);
    free(pw);
    piece_set_free(&ps);
    tk_strmap_free(&map);
    g4_sb_puts(b, "]}}");
    return b->oom ? g4_fail(G4_ERR_NOMEM, "%s: out of memory", v->path) : G4_OK;
}

g4_status tk_load_gguf(const g4_gguf *g, const char *path, g4_tokenizer **out) {
    *out = NULL;
    g4_status st;
    vocab_t v = {.g = g, .path = path};
    g4_strbuf b = {0};
    if (!(st = build_json(&v, &b))) st = tk_load_json(b.p, b.len, path, out);
    free(b.p);
    free(v.tok);
    free(v.arena);
    return st;
}

/* tokenizer.chat_template, or Gemma's own for a Gemma GGUF without one; the special-token
 * variables the template reads (bos_token, eos_token) are set in front of it. */
g4_status tk_template_load_gguf(const g4_gguf *g, const char *path, g4_template **out) {
    *out = NULL;
    g4_status st;
    const char *src = NULL, *arch = "";
    size_t len = 0, al = 0;
    int found, fa;
    if ((st = g4_gguf_get_str(g, "tokenizer.chat_template", &src, &len, &found)) ||
        (st = g4_gguf_get_str(g, "general.architecture", &arch, &al, &fa)))
        goto done;
    if (!found) {   /* Gemma 4's template is nothing like Gemma 3's: no fallback for it */
        if (!fa || al < 5 || memcmp(arch, "gemma", 5) || (al == 6 && !memcmp(arch, "gemma4", 6))) {
            st = g4_fail(G4_ERR_INPUT, "%s: metadata 'tokenizer.chat_template' is missing", path);
            goto done;
        }
        src = gemma_template;
        len = sizeof gemma_template - 1;
    }
    vocab_t v = {.g = g, .path = path};
    g4_strbuf b = {0};
    if (!(st = read_vocab(&v))) {
        static const char *const names[][2] = {{"bos_token", "<bos>"}, {"eos_token", "<eos>"}};
        for (int i = 0; i < 2; i++) {
            if (find_tok(&v, names[i][1]) < 0) continue;
            char set[96];
            snprintf(set, sizeof set, "{%% set %s = \"%s\" %%}", names[i][0], names[i][1]);
            g4_sb_puts(&b, set);
        }
        g4_sb_put(&b, src, len);
        char name[4200];
        snprintf(name, sizeof name, "%s:%s", path, found ? "tokenizer.chat_template" : "built-in Gemma template");
        st = b.oom ? g4_fail(G4_ERR_NOMEM, "out of memory") : g4_template_load_source(b.p, b.len, name, NULL, out);
    }
    free(b.p);
    free(v.tok);
    free(v.arena);
done:
    return st;
}
