/* policy/policy_internal.h - helpers shared by the src/policy files. */
#ifndef FRT_POLICY_INTERNAL_H
#define FRT_POLICY_INTERNAL_H

#include <stddef.h>

/* Parses LEN bytes of DATA into OUT (a typed handle pointer). */
typedef int (*policy_parse_fn)(const char *data, size_t len, void *out);

/* Reads the file at PATH (at most MAX_BYTES) and hands its bytes to PARSE.
 * A read error names the path itself (frt_file_read_all); an empty file is
 * FRT_ERR_FORMAT; a parse error gets "PATH: " in front of its message.
 * Returns 0 or the failing status. */
int policy_load_file(const char *path, size_t max_bytes, policy_parse_fn parse, void *out);

#endif
