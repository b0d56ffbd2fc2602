/*
 * policy_robot.h - the robot side of openpi's policy configs for the policy
 * server (docs/policy-server.md): how a LIBERO, DROID or ALOHA client's
 * observation becomes a policy's camera images, state and prompt, and how
 * the model's (un-normalised) action chunk becomes the robot's actions.
 *
 * The math follows openpi (read for it; the code is frt's own):
 * src/openpi/policies/libero_policy.py (LiberoInputs / LiberoOutputs),
 * droid_policy.py (DroidInputs / DroidOutputs), aloha_policy.py
 * (AlohaInputs / AlohaOutputs with adapt_to_pi: the joint flips and the
 * gripper conversions), transforms.py (AbsoluteActions, make_bool_mask) and
 * training/config.py (which config applies delta actions). Normalisation,
 * resizing and tokenization are frt/policy_io.h's.
 *
 * Every function returns 0 or FRT_ERR_INVALID_ARGUMENT (a message naming
 * the key) / FRT_ERR_OUT_OF_MEMORY; outputs are untouched on failure.
 */
#ifndef FRT_SERVING_POLICY_ROBOT_H
#define FRT_SERVING_POLICY_ROBOT_H

#include "serving/policy_obs.h"

#include "frt/policy_io.h"

#include <stddef.h>
#include <stdint.h>

typedef enum frt_robot { FRT_ROBOT_LIBERO = 0, FRT_ROBOT_DROID = 1, FRT_ROBOT_ALOHA = 2 } frt_robot;

#define FRT_ROBOT_CAMERAS 3    /* openpi's model cameras: base_0_rgb, left_wrist_0_rgb, right_wrist_0_rgb */
#define FRT_ROBOT_MAX_STATE 64 /* state values a robot observation may carry */
#define FRT_ROBOT_MAX_SIDE 4096

/* "libero" / "droid" / "aloha" -> *out. Errors: FRT_ERR_INVALID_ARGUMENT. */
int frt_robot_parse(const char *name, frt_robot *out);

/* The robot's name; "?" outside the enum. */
const char *frt_robot_name(frt_robot r);

/* The robot's action dimensions (LiberoOutputs 7, DroidOutputs 8,
 * AlohaOutputs 14). */
int frt_robot_dof(frt_robot r);

/* The delta-action mask of openpi's configs (transforms.make_bool_mask):
 * with ON -1 (auto) the configs' choice for the variant (libero: Pi0
 * (6, -1) as pi0_libero, Pi0.5 none as pi05_libero; droid none as
 * pi0_droid / pi05_droid; aloha (6, -1, 6, -1) as pi0_aloha /
 * pi05_aloha), with ON 1 the robot's mask whatever the variant (droid's
 * joint-position training mask (7, -1)), with ON 0 none. mask[0..n) of 0/1;
 * returns n (0: no delta actions). MASK holds 16. */
size_t frt_robot_delta_mask(frt_robot r, frt_policy_variant v, int on, uint8_t *mask);

/* A robot observation, repacked: one HWC u8 image per model camera slot
 * (NULL: the camera is masked out, openpi's zeros_like image with mask
 * False), the state after the robot's input conversion (double), the
 * prompt. Owns the images; the prompt points into the observation or the
 * default prompt. */
typedef struct frt_robot_obs {
    uint8_t *rgb[FRT_ROBOT_CAMERAS];
    int height[FRT_ROBOT_CAMERAS], width[FRT_ROBOT_CAMERAS];
    double state[FRT_ROBOT_MAX_STATE];
    size_t n_state;
    const char *prompt;
} frt_robot_obs;

/* Repacks O for robot R (the keys of docs/policy-server.md): images through
 * openpi's _parse_image (u8 or float in [0, 1] -> (255 x) cast to u8; a
 * first dimension of 3 means CHW; ALOHA's are always CHW), the state
 * (DROID: joints then gripper; ALOHA: the flips and the gripper conversion
 * of _decode_state), the prompt (or DEFAULT_PROMPT when the observation
 * has none; NULL: a prompt is required). A key the robot does not read
 * (not in docs/policy-server.md's table for R: a misspelt camera, "noise",
 * "seed", training's "actions") is refused, naming it. *out is set on
 * success only (frt_robot_obs_free). */
int frt_robot_obs_from(frt_robot r, const frt_pobs *o, const char *default_prompt, frt_robot_obs *out);

/* Frees the images; NULL is a no-op. */
void frt_robot_obs_free(frt_robot_obs *ro);

/* One image value as HWC u8 (openpi's _parse_image; CHW when FORCE_CHW or
 * shape[0] == 3): *rgb malloc'd [h, w, 3]. Refused: a dtype other than u8 /
 * f32 / f64, other than 3 dimensions or 3 channels, a side outside 1..4096,
 * a float value outside [0, 1] or not finite. */
int frt_robot_image(const frt_pobs_value *v, int force_chw, uint8_t **rgb, int *h, int *w);

/* The model's chunk ACTIONS [chunk, action_dim] f32 (after Unnormalize)
 * into the robot's OUT [chunk, dof] f32: AbsoluteActions (MASK[0..n_mask)
 * adds STATE, zero past n_state), the slice to the robot's DoF, and for
 * ALOHA _encode_actions (flips, gripper from angular). In double, rounded
 * to f32 once. Errors: FRT_ERR_INVALID_ARGUMENT (action_dim < dof or <
 * n_mask). */
int frt_robot_actions(frt_robot r, const uint8_t *mask, size_t n_mask, const double *state, size_t n_state,
                      const float *actions, size_t chunk, size_t action_dim, float *out);

#endif
