/*
 * weights/quant_config.h - config.json's quantization_config (FP8
 * checkpoints) -> frt_quant_config (frt/config.h documents the accepted
 * forms; docs/fp8.md "FP8 weights").
 */
#ifndef FRT_WEIGHTS_QUANT_CONFIG_H
#define FRT_WEIGHTS_QUANT_CONFIG_H

#include "frt/config.h"

#include <jansson.h>

/* Parses the quantization_config object qc (NULL: none) into *out (zeroed
 * first). `what` names the document in messages. Errors: FRT_ERR_FORMAT (a
 * field of the wrong JSON type, a missing required field),
 * FRT_ERR_UNSUPPORTED (a quant_method, format, strategy, type, bit width or
 * activation scheme, KV-cache scheme (kv_cache_scheme other than static
 * per-tensor FP8) frt does not run; the message names the field). */
int frt_quant_config_parse(const json_t *qc, frt_quant_config *out, const char *what);

#endif /* FRT_WEIGHTS_QUANT_CONFIG_H */
