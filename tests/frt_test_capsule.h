/*
 * frt_test_capsule.h - capsule helpers the tests share (include after
 * frt_test.h and frt/capsule.h).
 *
 *   capsule_bytes_of(c, prefixes)  stored bytes of the buffers whose name starts
 *                                  with one of the NULL-terminated prefixes
 */
#ifndef FRT_TEST_CAPSULE_H
#define FRT_TEST_CAPSULE_H

#include "frt/capsule.h"
#include "frt_test.h"

static inline size_t capsule_bytes_of(const frt_capsule *c, const char *const *prefixes)
{
    frt_capsule_info in;
    CHECK_OK(frt_capsule_info_get(c, &in));
    size_t sum = 0;
    for (int i = 0; i < in.n_buffers; i++) {
        const char *name = NULL;
        size_t b = 0;
        CHECK_OK(frt_capsule_buffer(c, i, &name, &b));
        for (const char *const *p = prefixes; *p; p++)
            if (!strncmp(name, *p, strlen(*p))) {
                sum += b;
                break;
            }
    }
    return sum;
}

#endif /* FRT_TEST_CAPSULE_H */
