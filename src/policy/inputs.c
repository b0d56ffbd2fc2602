/*
 * policy/inputs.c - the whole input set of a Pi0 / Pi0.5 policy from camera
 * views, a prompt and a state (frt_policy_inputs_build), and its safetensors
 * form, the file `frt policy run --inputs` reads (frt_policy_inputs_write).
 * The order of the steps is openpi's input transforms: Normalize, then
 * ResizeImages, TokenizePrompt (Pi0.5: with the normalised state),
 * PadStatesAndActions (transforms.py, training/config.py
 * ModelTransformFactory).
 */
#include "frt/policy_io.h"

#include "frt/safetensors.h"
#include "frt/status.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PIX_PER_CAMERA ((size_t)3 * FRT_POLICY_IMAGE_SIZE * FRT_POLICY_IMAGE_SIZE)

frt_policy_input_params frt_policy_input_default_params(void)
{
    return (frt_policy_input_params){.variant = FRT_POLICY_PI0, .max_state_dim = 32};
}

void frt_policy_inputs_free(frt_policy_input_set *in)
{
    if (!in) return;
    free(in->pixel_values);
    free(in->pixel_attention_mask);
    free(in->input_ids);
    free(in->attention_mask);
    free(in->state);
    free(in);
}

static int check_params(const frt_policy_input_params *p, size_t n_views, const char *prompt, const float *state,
                        size_t n_state)
{
    if (!p->tokenizer) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: no tokenizer");
    if (p->variant != FRT_POLICY_PI0 && p->variant != FRT_POLICY_PI05)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: unknown variant %d", (int)p->variant);
    if (!p->cameras || p->n_cameras < 1 || p->n_cameras > FRT_POLICY_MAX_CAMERAS)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "policy inputs: %zu cameras (1..%d)", p->n_cameras,
                         FRT_POLICY_MAX_CAMERAS);
    if (n_views < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: no camera image");
    if (n_views > p->n_cameras)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "policy inputs: %zu images for a model with %zu cameras", n_views,
                         p->n_cameras);
    if (!prompt) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: no prompt");
    if (!state || n_state < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: no state");
    if (n_state > p->max_state_dim)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "policy inputs: state of %zu values, the model takes at most %zu",
                         n_state, p->max_state_dim);
    for (size_t i = 0; i < n_state; i++)
        if (!isfinite(state[i]))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: state[%zu] is not finite (%g)", i,
                             (double)state[i]);
    return 0;
}

/* Index of CAMERA in the model's list, or an error. */
static int camera_slot(const frt_policy_input_params *p, const char *camera, const uint8_t *taken)
{
    if (!camera) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: a view without a camera name");
    for (size_t c = 0; c < p->n_cameras; c++) {
        if (!p->cameras[c] || strcmp(p->cameras[c], camera)) continue;
        if (taken[c]) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: camera '%s' given twice", camera);
        return (int)c;
    }
    return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: unknown camera '%s'", camera);
}

static int fill_view(const frt_policy_view *v, float *out)
{
    if (!v->rgb == !v->pixels)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "camera '%s': give exactly one of u8 rgb or f32 pixels",
                         v->camera);
    int rc = v->rgb ? frt_policy_pixels_from_u8(v->rgb, v->height, v->width, 3, out)
                    : frt_policy_pixels_from_f32(v->pixels, v->height, v->width, 3, out);
    if (rc < 0) frt_error_prefix("camera '%s'", v->camera);
    return rc;
}

static int fill_images(const frt_policy_input_params *p, const frt_policy_view *views, size_t n_views,
                       frt_policy_input_set *in)
{
    uint8_t *mask = in->pixel_attention_mask;
    for (size_t i = 0; i < n_views; i++) {
        int c = camera_slot(p, views[i].camera, mask);
        if (c < 0) return c;
        FRT_TRY(fill_view(&views[i], in->pixel_values + (size_t)c * PIX_PER_CAMERA));
        mask[c] = 1;
    }
    for (size_t c = 0; c < p->n_cameras; c++) /* openpi feeds a missing camera as a black image, masked */
        if (!mask[c])
            for (size_t j = 0; j < PIX_PER_CAMERA; j++) in->pixel_values[c * PIX_PER_CAMERA + j] = -1.0f;
    return 0;
}

static int fill_state_and_prompt(const frt_policy_input_params *p, const char *prompt, const float *state,
                                 size_t n_state, frt_policy_input_set *in)
{
    if (p->norm_stats) {
        FRT_TRY(frt_policy_normalize_state(p->norm_stats, p->variant, state, n_state, in->state));
        in->state_normalized = 1;
    } else {
        memcpy(in->state, state, n_state * sizeof *state);
    }
    for (size_t i = 0; i < n_state; i++) /* a huge raw value can normalise to infinity */
        if (!isfinite(in->state[i]))
            return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: state[%zu] normalises to %g", i,
                             (double)in->state[i]);
    int32_t *ids = in->input_ids;
    return frt_policy_tokenize(p->tokenizer, p->variant, prompt, in->state, n_state, in->n_tokens, ids,
                               in->attention_mask, &in->n_prompt_tokens, &in->n_prompt_untruncated);
}

static frt_policy_input_set *inputs_alloc(size_t n_cameras, size_t n_tokens, size_t state_dim)
{
    frt_policy_input_set *in = calloc(1, sizeof *in);
    if (!in) return NULL;
    in->n_cameras = n_cameras;
    in->n_tokens = n_tokens;
    in->state_dim = state_dim;
    in->pixel_values = malloc(n_cameras * PIX_PER_CAMERA * sizeof(float));
    in->pixel_attention_mask = calloc(n_cameras, 1);
    in->input_ids = calloc(n_tokens, sizeof(int32_t));
    in->attention_mask = calloc(n_tokens, 1);
    in->state = calloc(state_dim, sizeof(float));
    if (!in->pixel_values || !in->pixel_attention_mask || !in->input_ids || !in->attention_mask || !in->state) {
        frt_policy_inputs_free(in);
        return NULL;
    }
    return in;
}

int frt_policy_inputs_build(const frt_policy_input_params *params, const frt_policy_view *views, size_t n_views,
                            const char *prompt, const float *state, size_t n_state, frt_policy_input_set **out)
{
    if (out) *out = NULL;
    if (!params || !out || (n_views && !views))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs: NULL argument");
    FRT_TRY(check_params(params, n_views, prompt, state, n_state));
    size_t n_tokens = params->max_tokens ? params->max_tokens : frt_policy_default_max_tokens(params->variant);
    frt_policy_input_set *in = inputs_alloc(params->n_cameras, n_tokens, params->max_state_dim);
    if (!in) return frt_error(FRT_ERR_OUT_OF_MEMORY, "policy inputs: out of memory");
    int rc = fill_images(params, views, n_views, in);
    if (rc == 0) rc = fill_state_and_prompt(params, prompt, state, n_state, in);
    if (rc < 0) {
        frt_policy_inputs_free(in);
        return rc;
    }
    *out = in;
    return 0;
}

int frt_policy_inputs_write(const frt_policy_input_set *in, frt_policy_variant v, const char *path)
{
    if (!in || !path) return frt_error(FRT_ERR_INVALID_ARGUMENT, "policy inputs write: NULL argument");
    int64_t *ids = malloc((in->n_tokens ? in->n_tokens : 1) * sizeof *ids);
    frt_st_writer *w = NULL;
    int rc = ids ? frt_st_writer_create(&w) : frt_error(FRT_ERR_OUT_OF_MEMORY, "policy inputs write: out of memory");
    for (size_t i = 0; ids && i < in->n_tokens; i++) ids[i] = in->input_ids[i];
    int64_t pix[4] = {(int64_t)in->n_cameras, 3, FRT_POLICY_IMAGE_SIZE, FRT_POLICY_IMAGE_SIZE};
    int64_t cams = (int64_t)in->n_cameras, toks = (int64_t)in->n_tokens, sd = (int64_t)in->state_dim;
    if (rc == 0) rc = frt_st_writer_add(w, "pixel_values", FRT_DT_F32, 4, pix, in->pixel_values);
    if (rc == 0) rc = frt_st_writer_add(w, "pixel_attention_mask", FRT_DT_U8, 1, &cams, in->pixel_attention_mask);
    if (rc == 0) rc = frt_st_writer_add(w, "input_ids", FRT_DT_I64, 1, &toks, ids);
    if (rc == 0) rc = frt_st_writer_add(w, "attention_mask", FRT_DT_U8, 1, &toks, in->attention_mask);
    if (rc == 0) rc = frt_st_writer_add(w, "state", FRT_DT_F32, 1, &sd, in->state);
    if (rc == 0) rc = frt_st_writer_set_metadata(w, "frt.policy.variant", v == FRT_POLICY_PI05 ? "pi05" : "pi0");
    if (rc == 0) rc = frt_st_writer_set_metadata(w, "frt.policy.state_normalized", in->state_normalized ? "1" : "0");
    if (rc == 0) rc = frt_st_writer_write(w, path);
    frt_st_writer_destroy(w);
    free(ids);
    return rc;
}
