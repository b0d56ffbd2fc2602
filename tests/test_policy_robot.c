/*
 * test_policy_robot.c - the policy server's robot transforms
 * (src/serving/policy_robot.c) against a numpy re-implementation of
 * openpi's LIBERO / DROID / ALOHA policy transforms
 * (scripts/ref/policy_robot_ref.py, run with /usr/bin/python3): random
 * observations of each robot (u8 HWC and CHW, f32 / f64 images in [0, 1],
 * f32 / f64 / int states, DROID's 0-d and 1-d gripper, ALOHA with and
 * without the wrist cameras) and random action chunks go through the C
 * transforms; the inputs and the results are written to a manifest the
 * script reads, recomputes and compares (images exactly, the state to 1e-12,
 * the actions to f32 rounding). Then every refusal, with outputs untouched.
 */
#include "frt_test.h"
#include "serving/policy_robot.h"

#include "frt/status.h"

#include <jansson.h>
#include <math.h>
#include <unistd.h>

static json_t *arr_json(const char *dtype, const int64_t *shape, int ndim, const void *data, size_t nb)
{
    json_t *sh = json_array();
    for (int i = 0; i < ndim; i++) json_array_append_new(sh, json_integer(shape[i]));
    char *b = frt_pobs_base64_encode(data, nb);
    json_t *o = json_pack("{s:s, s:o, s:s}", "dtype", dtype, "shape", sh, "data", b);
    free(b);
    return o;
}

/* Adds KEY as an array to the observation and to the manifest's "obs". */
static void put(frt_pobs *o, json_t *jo, const char *key, frt_pobs_dtype dt, const int64_t *shape, int ndim,
                const void *data)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    frt_pobs_value *v;
    CHECK_OK(frt_pobs_add(o, "", key, strlen(key), &v));
    CHECK_OK(frt_pobs_set_array(v, dt, shape, ndim, data, n * frt_pobs_dtype_size(dt)));
    json_object_set_new(jo, key, arr_json(frt_pobs_dtype_str(dt), shape, ndim, data, n * frt_pobs_dtype_size(dt)));
}

/* A random image: u8 or a float in [0, 1], HWC or CHW, 1..40 a side. */
static void put_image(frt_pobs *o, json_t *jo, const char *key, int chw)
{
    int64_t h = 1 + (int64_t)(frt_test_u64() % 40), w = 4 + (int64_t)(frt_test_u64() % 37);
    int64_t shape[3] = {chw ? 3 : h, chw ? h : w, chw ? w : 3};
    size_t n = (size_t)(h * w * 3);
    int kind = (int)(frt_test_u64() % 3);
    void *d = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) {
        if (kind == 0) ((uint8_t *)d)[i] = (uint8_t)frt_test_u64();
        else if (kind == 1) ((float *)d)[i] = i % 11 == 0 ? (float)(i % 2) : frt_test_rand(0, 1);
        else ((double *)d)[i] = i % 13 == 0 ? (double)(i % 2) : frt_test_rand(0, 1);
    }
    put(o, jo, key, kind == 0 ? FRT_POBS_U8 : kind == 1 ? FRT_POBS_F32 : FRT_POBS_F64, shape, 3, d);
    free(d);
}

/* A random state of N values (f32, f64 or i32), 0-d when N is 0. */
static void put_state(frt_pobs *o, json_t *jo, const char *key, int n, float lo, float hi)
{
    int kind = (int)(frt_test_u64() % 3);
    double d[16];
    float f[16];
    int32_t i32[16];
    for (int i = 0; i < (n ? n : 1); i++) {
        d[i] = frt_test_rand(lo, hi);
        f[i] = (float)d[i];
        i32[i] = (int32_t)(d[i] * 10);
    }
    int64_t sh = n;
    const void *p = kind == 0 ? (const void *)f : kind == 1 ? (const void *)d : (const void *)i32;
    put(o, jo, key, kind == 0 ? FRT_POBS_F32 : kind == 1 ? FRT_POBS_F64 : FRT_POBS_I32, &sh, n ? 1 : 0, p);
}

static void put_prompt(frt_pobs *o, json_t *jo)
{
    frt_pobs_value *v;
    CHECK_OK(frt_pobs_add(o, "", "prompt", 6, &v));
    CHECK_OK(frt_pobs_set_string(v, "pick up the cup", 15));
    json_object_set_new(jo, "prompt", json_string("pick up the cup"));
}

/* One random observation of robot R into O and the manifest's obs. */
static void make_obs(frt_robot r, int k, frt_pobs *o, json_t *jo)
{
    switch (r) {
    case FRT_ROBOT_LIBERO:
        put_image(o, jo, "observation/image", k % 2);
        put_image(o, jo, "observation/wrist_image", 0);
        put_state(o, jo, "observation/state", 8, -2, 2);
        break;
    case FRT_ROBOT_DROID:
        put_image(o, jo, "observation/exterior_image_1_left", 0);
        put_image(o, jo, "observation/wrist_image_left", k % 2);
        put_state(o, jo, "observation/joint_position", 7, -3, 3);
        put_state(o, jo, "observation/gripper_position", k % 2, 0, 1);
        break;
    case FRT_ROBOT_ALOHA:
        put_image(o, jo, "images/cam_high", 1);
        if (k % 2) put_image(o, jo, "images/cam_left_wrist", 1);
        if (k % 3) put_image(o, jo, "images/cam_right_wrist", 1);
        if (k % 4 == 1) put_image(o, jo, "images/cam_low", 1);
        put_state(o, jo, "state", 14, 0, 1);
        break;
    }
    put_prompt(o, jo);
}

/* One case: the transforms, their results into the manifest. */
static json_t *run_case(frt_robot r, frt_policy_variant var, int delta_on, int k)
{
    frt_pobs o = {0};
    json_t *jo = json_object(), *out = json_object();
    make_obs(r, k, &o, jo);
    frt_robot_obs ro;
    CHECK_OK(frt_robot_obs_from(r, &o, NULL, &ro));
    CHECK(!strcmp(ro.prompt, "pick up the cup"));
    json_t *imgs = json_array();
    for (int s = 0; s < FRT_ROBOT_CAMERAS; s++) {
        int64_t sh[3] = {ro.height[s], ro.width[s], 3};
        json_array_append_new(imgs, ro.rgb[s] ? arr_json("|u1", sh, 3, ro.rgb[s], (size_t)(sh[0] * sh[1] * 3))
                                              : json_null());
    }
    int64_t ns = (int64_t)ro.n_state;
    json_object_set_new(out, "images", imgs);
    json_object_set_new(out, "state", arr_json("<f8", &ns, 1, ro.state, ro.n_state * 8));
    uint8_t mask[16];
    size_t nm = frt_robot_delta_mask(r, var, delta_on, mask);
    json_t *jm = json_array();
    for (size_t i = 0; i < nm; i++) json_array_append_new(jm, json_boolean(mask[i]));
    int64_t ash[2] = {5, 16}, osh[2] = {5, frt_robot_dof(r)};
    float a[5 * 16], u[5 * 16];
    frt_test_fill(a, 5 * 16, -2, 2);
    CHECK_OK(frt_robot_actions(r, mask, nm, ro.state, ro.n_state, a, 5, 16, u));
    json_object_set_new(out, "actions_in", arr_json("<f4", ash, 2, a, sizeof a));
    json_object_set_new(out, "actions", arr_json("<f4", osh, 2, u, (size_t)(5 * osh[1]) * 4));
    frt_robot_obs_free(&ro);
    frt_pobs_free(&o);
    return json_pack("{s:s, s:o, s:o, s:o}", "robot", frt_robot_name(r), "mask", jm, "obs", jo, "out", out);
}

static void test_against_numpy(void)
{
    if (access("/usr/bin/python3", X_OK) != 0 || system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0)
        TEST_SKIP("/usr/bin/python3 with numpy is missing (scripts/install-deps.sh installs it)");
    json_t *cases = json_array();
    for (int r = 0; r < 3; r++)
        for (int var = 0; var < 2; var++)
            for (int k = 0; k < 6; k++)
                json_array_append_new(cases, run_case((frt_robot)r, (frt_policy_variant)var, k < 4 ? -1 : k - 4, k));
    char dir[] = "/tmp/frt_policy_robot_XXXXXX", path[256], cmd[1024];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/cases.json", dir);
    CHECK(json_dump_file(cases, path, 0) == 0);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/ref/policy_robot_ref.py %s", FRT_SOURCE_DIR, path);
    CHECK_MSG(system(cmd) == 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    json_decref(cases);
}

/* The observation of robot R with KEY removed or replaced must be refused
 * naming NEEDLE. */
static void refuse(frt_robot r, const char *drop, const char *needle, const char *default_prompt)
{
    frt_pobs o = {0};
    json_t *jo = json_object();
    make_obs(r, 1, &o, jo);
    for (size_t i = 0; drop && i < o.n; i++)
        if (!strcmp(o.v[i].key, drop)) {
            free(o.v[i].key);
            free(o.v[i].data);
            o.v[i] = o.v[--o.n];
        }
    frt_robot_obs ro = {.n_state = 99};
    int rc = frt_robot_obs_from(r, &o, default_prompt, &ro);
    CHECK_MSG(rc == FRT_ERR_INVALID_ARGUMENT && strstr(frt_last_error(), needle), "%s: want '%s', got %s", drop,
              needle, frt_last_error());
    CHECK(ro.n_state == 99 && ro.rgb[0] == NULL);
    frt_pobs_free(&o);
    json_decref(jo);
}

/* Replaces the value KEY of a fresh observation of R by an array. */
static void refuse_value(frt_robot r, const char *key, frt_pobs_dtype dt, const int64_t *shape, int ndim,
                         const void *data, const char *needle)
{
    frt_pobs o = {0};
    json_t *jo = json_object();
    make_obs(r, 1, &o, jo);
    for (size_t i = 0; i < o.n; i++)
        if (!strcmp(o.v[i].key, key)) {
            free(o.v[i].data);
            o.v[i].data = NULL;
            CHECK_OK(frt_pobs_set_array(&o.v[i], dt, shape, ndim, data, 0 + (size_t)(ndim ? shape[0] : 1) *
                                        (ndim > 1 ? (size_t)shape[1] : 1) * (ndim > 2 ? (size_t)shape[2] : 1) *
                                        frt_pobs_dtype_size(dt)));
        }
    frt_robot_obs ro = {.n_state = 99};
    int rc = frt_robot_obs_from(r, &o, NULL, &ro);
    CHECK_MSG(rc == FRT_ERR_INVALID_ARGUMENT && strstr(frt_last_error(), needle), "%s: want '%s', got %s", key,
              needle, frt_last_error());
    CHECK(ro.n_state == 99);
    frt_pobs_free(&o);
    json_decref(jo);
}

static void test_refusals(void)
{
    refuse(FRT_ROBOT_LIBERO, "observation/image", "missing key 'observation/image'", NULL);
    refuse(FRT_ROBOT_LIBERO, "observation/state", "missing key 'observation/state'", NULL);
    refuse(FRT_ROBOT_DROID, "observation/gripper_position", "missing key 'observation/gripper_position'", NULL);
    refuse(FRT_ROBOT_ALOHA, "images/cam_high", "missing key 'images/cam_high'", NULL);
    refuse(FRT_ROBOT_ALOHA, "prompt", "missing key 'prompt'", NULL);
    { /* the default prompt stands in */
        frt_pobs o = {0};
        json_t *jo = json_object();
        make_obs(FRT_ROBOT_LIBERO, 0, &o, jo);
        free(o.v[o.n - 1].key);
        free(o.v[o.n - 1].data);
        o.n--;
        frt_robot_obs ro;
        CHECK_OK(frt_robot_obs_from(FRT_ROBOT_LIBERO, &o, "fold", &ro));
        CHECK(!strcmp(ro.prompt, "fold") && ro.n_state == 8);
        frt_robot_obs_free(&ro);
        frt_pobs_free(&o);
        json_decref(jo);
    }
    uint8_t px[4 * 4 * 4] = {0};
    float fpx[4 * 4 * 3], nanst[8];
    int64_t s44[3] = {4, 4, 4}, s443[3] = {4, 4, 3}, s2[2] = {4, 12}, s8 = 8, s13 = 13;
    for (int i = 0; i < 48; i++) fpx[i] = 0.5f;
    fpx[17] = 1.5f;
    for (int i = 0; i < 8; i++) nanst[i] = 0.5f;
    nanst[3] = NAN;
    int16_t i16[48] = {0};
    refuse_value(FRT_ROBOT_LIBERO, "observation/image", FRT_POBS_U8, s44, 3, px, "needs 3 channels");
    refuse_value(FRT_ROBOT_LIBERO, "observation/image", FRT_POBS_U8, s2, 2, px, "3 dimensions");
    refuse_value(FRT_ROBOT_LIBERO, "observation/image", FRT_POBS_I16, s443, 3, i16, "|u1, <f4 or <f8");
    refuse_value(FRT_ROBOT_DROID, "observation/wrist_image_left", FRT_POBS_F32, s443, 3, fpx, "outside [0, 1]");
    refuse_value(FRT_ROBOT_LIBERO, "observation/state", FRT_POBS_F32, &s8, 1, nanst, "not finite");
    refuse_value(FRT_ROBOT_LIBERO, "observation/state", FRT_POBS_U8, s443, 3, px, "1-d numeric");
    refuse_value(FRT_ROBOT_ALOHA, "state", FRT_POBS_F32, &s13, 1, fpx, "[14]");
    refuse_value(FRT_ROBOT_LIBERO, "prompt", FRT_POBS_F32, &s8, 1, fpx, "'prompt': must be a string");
    { /* an unknown ALOHA camera */
        frt_pobs o = {0};
        json_t *jo = json_object();
        make_obs(FRT_ROBOT_ALOHA, 0, &o, jo);
        put_image(&o, jo, "images/cam_nose", 1);
        frt_robot_obs ro;
        CHECK_STATUS(frt_robot_obs_from(FRT_ROBOT_ALOHA, &o, NULL, &ro), FRT_ERR_INVALID_ARGUMENT);
        CHECK(strstr(frt_last_error(), "cam_nose") != NULL);
        frt_pobs_free(&o);
        json_decref(jo);
    }
    { /* a key the robot does not read is refused, naming it, whatever else the observation holds: openpi's
         transforms would drop it unread (a misspelt camera, a noise or seed field, training's actions, another
         robot's key); the robot's own keys (ALOHA's cam_low too) still pass */
        static const struct { frt_robot r; const char *key; } extra[] = {
            {FRT_ROBOT_LIBERO, "noise"},           {FRT_ROBOT_LIBERO, "seed"},
            {FRT_ROBOT_LIBERO, "actions"},         {FRT_ROBOT_LIBERO, "observation/wrist_img"},
            {FRT_ROBOT_DROID, "observation/state"}, {FRT_ROBOT_DROID, "observation/exterior_image_2_left"},
            {FRT_ROBOT_ALOHA, "images"},           {FRT_ROBOT_ALOHA, "observation/state"},
        };
        for (size_t e = 0; e < sizeof extra / sizeof extra[0]; e++) {
            frt_pobs o = {0};
            json_t *jo = json_object();
            make_obs(extra[e].r, 1, &o, jo);
            float x[8] = {0};
            int64_t n8 = 8;
            put(&o, jo, extra[e].key, FRT_POBS_F32, &n8, 1, x);
            frt_robot_obs ro = {.n_state = 99};
            int rc = frt_robot_obs_from(extra[e].r, &o, NULL, &ro);
            char want[128];
            snprintf(want, sizeof want, "'%s': not an observation key of robot %s", extra[e].key,
                     frt_robot_name(extra[e].r));
            CHECK_MSG(rc == FRT_ERR_INVALID_ARGUMENT && strstr(frt_last_error(), want), "%s: got %s", extra[e].key,
                      frt_last_error());
            CHECK(ro.n_state == 99 && ro.rgb[0] == NULL);
            frt_pobs_free(&o);
            json_decref(jo);
        }
        frt_pobs o = {0};
        json_t *jo = json_object();
        make_obs(FRT_ROBOT_ALOHA, 1, &o, jo); /* k 1: both wrists and cam_low */
        CHECK(frt_pobs_get(&o, "images/cam_low") && frt_pobs_get(&o, "images/cam_right_wrist"));
        frt_robot_obs ro;
        CHECK_OK(frt_robot_obs_from(FRT_ROBOT_ALOHA, &o, NULL, &ro));
        frt_robot_obs_free(&ro);
        frt_pobs_free(&o);
        json_decref(jo);
    }
    float a[2 * 8] = {0}, u[2 * 14];
    u[0] = 42;
    CHECK_STATUS(frt_robot_actions(FRT_ROBOT_ALOHA, NULL, 0, NULL, 0, a, 2, 8, u), FRT_ERR_INVALID_ARGUMENT);
    CHECK(u[0] == 42);
    frt_robot r;
    CHECK_STATUS(frt_robot_parse("franka", &r), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_robot_parse("aloha", &r));
    CHECK(r == FRT_ROBOT_ALOHA && frt_robot_dof(r) == 14);
}

int main(void)
{
    frt_test_seed(2323);
    test_refusals();
    test_against_numpy();
    return frt_test_report();
}
