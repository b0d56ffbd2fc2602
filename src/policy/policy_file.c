/* policy/policy_file.c - whole-file loading for the policy inputs'
 * tokenizer, images and statistics (policy/policy_internal.h). */
#include "policy/policy_internal.h"

#include "frt/fs.h"
#include "frt/status.h"
#include "util/error.h"

#include <stdlib.h>

int policy_load_file(const char *path, size_t max_bytes, policy_parse_fn parse, void *out)
{
    char *data = NULL;
    size_t len = 0;
    int rc = frt_file_read_all(path, max_bytes, &data, &len);
    if (rc == 0) {
        rc = len ? parse(data, len, out) : frt_error(FRT_ERR_FORMAT, "empty file");
        if (rc < 0) frt_error_prefix("%s", path);
    }
    free(data);
    return rc;
}
