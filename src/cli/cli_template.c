/* cli_template.c — `gemma4c template -m MODEL_OR_TOKENIZER_DIR [--template FILE]`: renders the
 * model's chat template for one JSON object on stdin ({"messages": [...], "tools": [...],
 * "add_generation_prompt": true, ...}) and prints the prompt text exactly, nothing else. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: gemma4c template -m MODEL_OR_TOKENIZER_DIR [--template FILE] < conversation.json\n"
            "  stdin: one JSON object {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true,\n"
            "         ...extra template variables such as \"enable_thinking\"}\n"
            "  -m DIR          model or tokenizer directory (chat_template.jinja, else\n"
            "                  tokenizer_config.json \"chat_template\"; special tokens from the latter)\n"
            "  --template FILE use this Jinja file instead of the directory's template\n");
}

int cli_template(int argc, char **argv) {
    const char *model = NULL, *tpl = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--template") && i + 1 < argc) tpl = argv[++i];
        else {
            usage(stderr);
            return cli_usage_error("template", "unknown or incomplete option '%s'", argv[i]);
        }
    }
    if (!model && !tpl) {
        usage(stderr);
        return cli_usage_error("template", "-m MODEL_OR_TOKENIZER_DIR is required");
    }
    g4_template *t = NULL;
    g4_status st;
    if (tpl) {
        size_t len;
        char *src = cli_read_file(tpl, &len);
        if (!src) return cli_usage_error("template", "%s: cannot read template file", tpl);
        st = g4_template_load_source(src, len, tpl, model, &t);
        free(src);
    } else st = g4_template_load(model, &t);
    if (st != G4_OK) return cli_report(st);
    size_t in_len;
    char *in = cli_read_stdin(&in_len);
    if (!in) {
        g4_template_free(t);
        return cli_report(g4_fail(G4_ERR_NOMEM, "out of memory reading stdin"));
    }
    char *out = NULL;
    size_t out_len = 0;
    st = g4_template_render(t, in, in_len, &out, &out_len);
    free(in);
    g4_template_free(t);
    if (st != G4_OK) return cli_report(st);
    size_t w = fwrite(out, 1, out_len, stdout);
    free(out);
    if (w != out_len || fflush(stdout) != 0) return cli_report(g4_fail(G4_ERR_IO, "stdout: write failed"));
    return 0;
}
