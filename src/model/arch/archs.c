/*
 * arch/archs.c - the registered architectures. Adding one: its folder, one
 * line here (docs/architectures.md).
 */
#include "model/arch.h"

#include <jansson.h>
#include <string.h>

extern const frt_arch frt_arch_qwen35; /* arch/qwen35/qwen35.c */
extern const frt_arch frt_arch_dense;  /* arch/dense/dense.c */
extern const frt_arch frt_arch_pi0;    /* arch/pi0/pi0.c (a policy) */

const frt_arch *const frt_archs[] = {
    &frt_arch_qwen35,
    &frt_arch_dense,
    &frt_arch_pi0,
    NULL,
};

const frt_arch *frt_arch_find(const char *model_type)
{
    if (!model_type) return NULL;
    for (int i = 0; frt_archs[i]; i++)
        for (int j = 0; frt_archs[i]->model_types[j]; j++)
            if (!strcmp(frt_archs[i]->model_types[j], model_type)) return frt_archs[i];
    return NULL;
}

const char *frt_model_type_arch(const char *model_type)
{
    const frt_arch *a = frt_arch_find(model_type);
    return a ? a->name : NULL;
}

const frt_arch *frt_arch_find_layout(const json_t *config)
{
    if (!json_is_object(config) || json_object_get(config, "model_type")) return NULL;
    for (int i = 0; frt_archs[i]; i++)
        for (int j = 0; frt_archs[i]->layout_keys && frt_archs[i]->layout_keys[j]; j++)
            if (json_object_get(config, frt_archs[i]->layout_keys[j])) return frt_archs[i];
    return NULL;
}
