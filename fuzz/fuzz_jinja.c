/* fuzz_jinja.c — libFuzzer target for the chat-template Jinja interpreter (lexer, parser,
 * evaluator, builtins). The input is a template; bytes after a first NUL, if any, are the JSON
 * variables (else a fixed conversation with tools). Tight limits keep every run bounded: the
 * interpreter must refuse or render, never crash, hang or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

static const char DEFAULT_VARS[] =
    "{\"bos_token\": \"<bos>\", \"eos_token\": \"<eos>\", \"add_generation_prompt\": true,"
    " \"enable_thinking\": true, \"documents\": null,"
    " \"messages\": [{\"role\": \"system\", \"content\": \"sys\"},"
    "  {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \" hi \"}, {\"type\": \"image\"}]},"
    "  {\"role\": \"assistant\", \"content\": \"<|channel>t<channel|>ok\", \"reasoning_content\": \"r\","
    "   \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\","
    "    \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5, \"s\"], \"c\": {\"d\": \"e\"}}}}]},"
    "  {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"42\"},"
    "  {\"role\": \"user\", \"content\": \"again\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"},"
    "   \"b\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}, \"c\": {\"type\": \"object\","
    "   \"properties\": {\"d\": {\"type\": \"string\", \"enum\": [\"e\"]}}}}, \"required\": [\"a\"]}}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *src = (const char *)data;
    size_t tn = size;
    const char *vars = DEFAULT_VARS;
    size_t vn = sizeof DEFAULT_VARS - 1;
    const void *nul = memchr(data, 0, size);
    if (nul) {
        tn = (size_t)((const uint8_t *)nul - data);
        vars = src + tn + 1;
        vn = size - tn - 1;
    }
    jx_limits lim;
    jx_limits_default(&lim);
    lim.max_output = 1 << 20;
    lim.max_memory = 64u << 20;
    lim.max_depth = 64;
    lim.max_steps = 200000;
    char err[800], *out = NULL;
    size_t out_len = 0;
    int rc = jx_render_source(src, tn, vars, vn, &lim, &out, &out_len, err, sizeof err);
    if (rc == 0 && (!out || strlen(out) > out_len)) abort();   /* NUL-terminated, length right */
    if (rc != 0 && out) abort();
    free(out);
    return 0;
}
