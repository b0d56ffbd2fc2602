/* cmd_chat_template.c - frt chat-template: the prompt a chat template renders.
 *
 *   frt chat-template (-m DIR | --tokenizer-config FILE) --messages FILE.json
 *                     [--tools FILE.json] [--no-generation-prompt] [--kwargs JSON]
 *                     [--ids [--parse-special-in-content]]
 *
 * Prints the rendered prompt exactly as the engine produces it (text/chat.h:
 * nothing added, no newline after it), so anyone can check a template
 * against transformers' apply_chat_template. --ids prints the token ids
 * instead (needs -m: the tokenizer), with the bytes that came from the
 * messages protected (a "<|im_end|>" typed in a message is ordinary tokens);
 * --parse-special-in-content gives transformers' ids instead.
 * Exit status: 0 printed, 1 the files or the render failed (the engine's
 * message on stderr), 2 usage. */
#include "args.h"
#include "cli.h"

#include "frt/status.h"
#include "frt/tokenizer.h"
#include "text/chat.h"
#include "text/tok_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ct_opts {
    const char *model, *config, *messages, *tools, *kwargs;
    int no_gen, ids, parse_special;
} ct_opts;

/* the JSON of PATH (a file) or TEXT (when PATH is NULL); *out must be of
 * TYPE. 0, or 1 with the message printed. */
static int read_json(const char *cmd, const char *what, const char *path, const char *text, json_type type,
                     json_t **out)
{
    json_error_t err;
    json_t *j = path ? json_load_file(path, 0, &err) : json_loads(text, 0, &err);
    if (!j) {
        if (err.line >= 1)
            fprintf(stderr, "frt %s: %s%s%s: line %d: %s\n", cmd, what, path ? " " : "", path ? path : "", err.line,
                    err.text);
        else
            fprintf(stderr, "frt %s: %s: %s\n", cmd, what, err.text);
        return 1;
    }
    if (json_typeof(j) != type) {
        fprintf(stderr, "frt %s: %s%s%s: not a JSON %s\n", cmd, what, path ? " " : "", path ? path : "",
                type == JSON_ARRAY ? "array" : "object");
        json_decref(j);
        return 1;
    }
    *out = j;
    return 0;
}

/* --tokenizer-config FILE: its template and special tokens. 0 or an frt status. */
static int render_from_config(const char *path, const frt_chat_request *req, char **text, size_t *len)
{
    char *tmpl = NULL, *special[4];
    FRT_TRY(tok_config_load(path, &tmpl, special));
    static const char *const names[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    json_t *sp = json_object();
    int rc = sp ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < 4; i++) {
        if (!rc && special[i] && json_object_set_new(sp, names[i], json_string(special[i])))
            rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory");
        free(special[i]);
    }
    if (!rc && !tmpl) rc = frt_error(FRT_ERR_UNSUPPORTED, "unsupported chat template: %s has no chat_template", path);
    if (!rc) rc = frt_chat_render_json(tmpl, req, sp, text, len);
    json_decref(sp);
    free(tmpl);
    return rc;
}

/* -m DIR: the checkpoint's tokenizer; the text, or with --ids the ids. */
static int render_from_model(const ct_opts *o, const frt_chat_request *req, char **text, size_t *len, int32_t **ids,
                             size_t *n_ids)
{
    frt_tokenizer *tok = NULL;
    FRT_TRY(frt_tokenizer_load(o->model, &tok));
    int rc = o->ids ? frt_chat_encode_json(tok, req, ids, n_ids) : frt_chat_format_json(tok, req, text, len);
    frt_tokenizer_free(tok);
    return rc;
}

static int run(const char *cmd, const ct_opts *o)
{
    json_t *messages = NULL, *tools = NULL, *kwargs = NULL;
    int bad = read_json(cmd, "--messages", o->messages, NULL, JSON_ARRAY, &messages);
    if (!bad && o->tools) bad = read_json(cmd, "--tools", o->tools, NULL, JSON_ARRAY, &tools);
    if (!bad && o->kwargs) bad = read_json(cmd, "--kwargs", NULL, o->kwargs, JSON_OBJECT, &kwargs);
    frt_chat_request req = {.messages = messages, .tools = tools, .kwargs = kwargs,
                            .add_generation_prompt = !o->no_gen, .parse_special_in_content = o->parse_special};
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    int rc = 0;
    if (!bad) rc = o->model ? render_from_model(o, &req, &text, &len, &ids, &n_ids)
                            : render_from_config(o->config, &req, &text, &len);
    json_decref(messages);
    json_decref(tools);
    json_decref(kwargs);
    if (bad) return 1;
    if (rc) return frt_cli_fail(cmd, rc);
    if (o->ids) {
        for (size_t i = 0; i < n_ids; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    } else {
        fwrite(text, 1, len, stdout);
    }
    free(text);
    free(ids);
    return fflush(stdout) ? 1 : 0;
}

int frt_cmd_chat_template(int argc, char **argv)
{
    const char *cmd = argv[0];
    ct_opts o = {0};
    frt_arg opts[] = {
        FRT_OPT('m', "model", FRT_ARG_STR, &o.model, "DIR",
                "checkpoint directory: its tokenizer's template (chat_template.jinja or tokenizer_config.json)",
                .dflt = ""),
        FRT_OPT(0, "tokenizer-config", FRT_ARG_STR, &o.config, "FILE",
                "a tokenizer_config.json: its chat_template and special tokens", .dflt = ""),
        FRT_OPT(0, "messages", FRT_ARG_STR, &o.messages, "FILE", "JSON array of message objects (required)",
                .dflt = ""),
        FRT_OPT(0, "tools", FRT_ARG_STR, &o.tools, "FILE", "JSON array of tool objects (default: tools = None)",
                .dflt = ""),
        FRT_OPT(0, "no-generation-prompt", FRT_ARG_FLAG, &o.no_gen, NULL,
                "add_generation_prompt = false (default: true)"),
        FRT_OPT(0, "kwargs", FRT_ARG_STR, &o.kwargs, "JSON",
                "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'", .dflt = ""),
        FRT_OPT(0, "ids", FRT_ARG_FLAG, &o.ids, NULL, "print the token ids (needs -m) instead of the text"),
        FRT_OPT(0, "parse-special-in-content", FRT_ARG_FLAG, &o.parse_special, NULL,
                "--ids: special-token text inside messages becomes special ids, as in transformers "
                "(default: it is ordinary text)"),
    };
    frt_cmd_spec spec = {"chat-template",
                         "(-m DIR | --tokenizer-config FILE) --messages FILE.json [--tools FILE.json]\n"
                         "       [--no-generation-prompt] [--kwargs JSON] [--ids [--parse-special-in-content]]",
                         "Prints the prompt the chat template renders for the messages, exactly as frt\n"
                         "produces it (no newline is added), as transformers' apply_chat_template renders it.\n"
                         "Exit status: 0 printed, 1 a file or the render failed, 2 usage.\n",
                         opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    int prc = frt_args_parse(&spec, argc, argv, NULL, NULL);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    if (!!o.model == !!o.config) return frt_args_error(&spec, "give -m DIR or --tokenizer-config FILE (one of them)");
    if (!o.messages) return frt_args_error(&spec, "--messages FILE.json is required");
    if (o.ids && !o.model) return frt_args_error(&spec, "--ids needs -m DIR (the tokenizer)");
    if (o.parse_special && !o.ids) return frt_args_error(&spec, "--parse-special-in-content only changes --ids");
    return run(cmd, &o);
}
