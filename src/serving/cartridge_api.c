/* serving/cartridge_api.c - the cartridge members of a completion request
 * and the API errors of cartridge failures (api.h). */
#include "serving/api.h"

#include "util/error.h"

#include <stdio.h>
#include <string.h>

/* 1 for a label of 1..FRT_CARTRIDGE_LABEL_MAX - 1 bytes without control characters. */
static int label_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n >= FRT_CARTRIDGE_LABEL_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 0;
    return 1;
}

int frt_api_parse_cartridge(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    const char *id = NULL, *label = NULL;
    if (frt_api_opt_string(o, "cartridge_id", &id, err) || frt_api_opt_string(o, "cartridge_label", &label, err))
        return -1;
    if (id && !frt_cartridge_id_ok(id))
        return frt_api_fail(err, 400, "invalid_value", "cartridge_id",
                            "'cartridge_id' must be 1 to %d characters of A-Z a-z 0-9 . _ - (not . or ..)",
                            FRT_CARTRIDGE_ID_MAX - 1);
    if (label && !label_ok(label))
        return frt_api_fail(err, 400, "invalid_value", "cartridge_label",
                            "'cartridge_label' must be 1 to %d bytes without control characters",
                            FRT_CARTRIDGE_LABEL_MAX - 1);
    if (id && label)
        return frt_api_fail(err, 400, "invalid_value", "cartridge_label",
                            "send one of 'cartridge_id' and 'cartridge_label', not both");
    snprintf(c->cartridge_id, sizeof c->cartridge_id, "%s", id ? id : "");
    snprintf(c->cartridge_label, sizeof c->cartridge_label, "%s", label ? label : "");
    return 0;
}

void frt_api_cartridge_error(frt_api_error *e, int status, const char *param)
{
    const char *msg = frt_last_error();
    switch (status) {
    case FRT_ERR_NOT_FOUND: frt_api_fail(e, 404, "cartridge_not_found", param, "%s", msg); break;
    case FRT_ERR_MISMATCH: frt_api_fail(e, 400, "cartridge_mismatch", param, "%s", msg); break;
    case FRT_ERR_UNSUPPORTED: frt_api_fail(e, 400, "unsupported_value", param, "%s", msg); break;
    case FRT_ERR_OUT_OF_RANGE: frt_api_fail(e, 400, "context_length_exceeded", param, "%s", msg); break;
    case FRT_ERR_OUT_OF_MEMORY: frt_api_fail(e, 503, "insufficient_capacity", param, "%s", msg); break;
    default: frt_api_fail(e, 500, "cartridge_unavailable", param, "%s (%s)", msg, frt_status_name(status)); break;
    }
}
