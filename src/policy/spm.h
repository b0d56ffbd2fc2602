/*
 * policy/spm.h - internal: the C entry points of policy/spm_shim.cc over
 * libsentencepiece. frt_policy_tokenizer is defined there. Each returns 0
 * or a negative frt_status with the message set; arguments are checked by
 * the callers (policy/tokenize.c).
 */
#ifndef FRT_POLICY_SPM_H
#define FRT_POLICY_SPM_H

#include "frt/policy_io.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parses LEN bytes of a serialized ModelProto. Errors: FRT_ERR_FORMAT,
 * FRT_ERR_OUT_OF_MEMORY. */
int frt_spm_load(const void *data, size_t len, frt_policy_tokenizer **out);
void frt_spm_free(frt_policy_tokenizer *tok);
int frt_spm_vocab_size(const frt_policy_tokenizer *tok);
int frt_spm_bos_id(const frt_policy_tokenizer *tok);
/* Encode (no BOS/EOS); *ids malloc'd, NULL when *n_ids is 0. Errors:
 * FRT_ERR_BACKEND, FRT_ERR_OUT_OF_MEMORY. */
int frt_spm_encode(const frt_policy_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n_ids);

#ifdef __cplusplus
}
#endif
#endif /* FRT_POLICY_SPM_H */
