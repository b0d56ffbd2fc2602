/*
 * fuzz_serving_api.c - libFuzzer target: HTTP request bodies of every JSON
 * endpoint through serving/api.c: /v1/completions, /v1/chat/completions,
 * POST /v1/sessions, .../fork, .../checkpoints, .../rollback, and ids taken
 * from URLs. The first byte picks the endpoint, the rest is the body. A
 * parse either fails with a 4xx/5xx error object or yields a request whose
 * invariants hold (a prompt, max_tokens >= 1, sampling in range, valid ids,
 * a compiled grammar for response_format json / tool_choice required).
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_serving_api CORPUS;
 * CI replays fuzz/corpus/serving_api/ through replay_serving_api.
 */
#include "serving/api.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(const frt_api_error *e)
{
    if (e->status < 400 || e->status > 599 || !e->message[0]) abort();
    json_t *o = frt_api_error_json(e);
    char *s = frt_api_dumps(o);
    if (!s) abort();
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    frt_api_error err;
    memset(&err, 0, sizeof err);
    switch (data[0] % 6) {
    case 0:
    case 1: {
        int chat = data[0] % 6 == 1;
        frt_api_completion c;
        if (frt_api_parse_completion(body, len, chat, 16, &c, &err)) {
            check_error(&err);
            break;
        }
        if (c.max_tokens < 1 || c.sampling.temperature < 0 || c.sampling.temperature > 2 || !(c.sampling.top_p > 0) ||
            c.sampling.top_p > 1 || c.sampling.top_k < 0 || c.n_stop < 0 || c.pin_len < -1)
            abort();
        if (chat ? !json_array_size(c.messages) : (!c.prompt_text && (c.n_prompt_ids < 1 || !c.prompt_ids))) abort();
        for (size_t i = 0; i < json_array_size(c.messages); i++) {
            json_t *m = json_array_get(c.messages, i), *content = json_object_get(m, "content");
            if (!json_is_string(json_object_get(m, "role")) || !(json_is_string(content) || json_is_null(content)))
                abort();
        }
        if (c.tools && !json_is_array(c.tools)) abort();
        /* a forced tool call or a JSON response_format comes with its grammar, and nothing else does */
        int forced = c.tool_choice == FRT_API_TOOLS_REQUIRED || c.tool_choice == FRT_API_TOOLS_NAMED;
        if ((forced && (!c.grammar || !c.tools)) || (c.grammar && !c.grammar_param)) abort();
        if (c.template_kwargs && !json_is_object(c.template_kwargs)) abort();
        if (c.session_id && !frt_session_id_valid(c.session_id)) abort();
        int cart_id = c.cartridge_id[0] != 0, cart_label = c.cartridge_label[0] != 0;
        if ((cart_id && !frt_cartridge_id_ok(c.cartridge_id)) || (cart_id && cart_label)) abort();
        frt_api_completion_clear(&c);
        break;
    }
    case 2: {
        frt_api_session_create c;
        if (frt_api_parse_session_create(body, len, &c, &err)) {
            check_error(&err);
            break;
        }
        if (c.has_id && !frt_session_id_valid(c.id)) abort();
        if ((c.salt != NULL) != (c.salt_len > 0)) abort();
        frt_api_session_create_clear(&c);
        break;
    }
    case 3:
    case 4: {
        frt_api_session_verb v = data[0] % 6 == 3 ? FRT_API_FORK : (data[0] & 0x40) ? FRT_API_CHECKPOINT : FRT_API_ROLLBACK;
        frt_api_session_op op;
        if (frt_api_parse_session_op(body, len, v, &op, &err)) {
            check_error(&err);
            break;
        }
        if (v == FRT_API_FORK ? (op.n < 1 || op.n > 64) : !frt_session_id_valid(op.name)) abort();
        break;
    }
    default: {
        /* an id from a URL: NUL-terminated copy of the body */
        char *id = malloc(len + 1);
        if (!id) return 0;
        memcpy(id, body, len);
        id[len] = 0;
        int ok = frt_api_check_url_id(id, "session_id", &err) == 0;
        if (ok != frt_session_id_valid(id) || (ok && strlen(id) >= FRT_SESSION_ID_MAX)) abort();
        if (!ok) check_error(&err);
        uint64_t cap = frt_api_capsule_id(id);
        if (cap) {
            char back[32];
            frt_api_capsule_name(cap, back);
            if (strncmp(back, "cap-", 4)) abort();
        }
        free(id);
        break;
    }
    }
    return 0;
}
