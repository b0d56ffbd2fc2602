/*
 * policy_obs.h - a robot's observation as the policy server receives it
 * (docs/policy-server.md): a flat list of named values (arrays with a dtype
 * and a shape, strings, nulls), read from openpi's msgpack_numpy encoding
 * (msgpack-c) or from the JSON form of POST /v1/policy/infer (jansson,
 * arrays as {"dtype", "shape", "data" base64}).
 *
 * Nested maps are flattened with '/' between the keys, as openpi's
 * transforms.flatten_dict does: {"images": {"cam_high": x}} gives the key
 * "images/cam_high". The parsers are strict and bounded (the limits below);
 * every refusal is FRT_ERR_INVALID_ARGUMENT (FRT_ERR_OUT_OF_MEMORY when
 * memory ran out) with a message that names the key. On failure *out is
 * left empty. Nothing here prints.
 */
#ifndef FRT_SERVING_POLICY_OBS_H
#define FRT_SERVING_POLICY_OBS_H

#include <stddef.h>
#include <stdint.h>

#define FRT_POBS_MAX_KEYS 64       /* values in one observation, nested ones included */
#define FRT_POBS_MAX_DEPTH 4       /* nested maps */
#define FRT_POBS_MAX_KEY 256       /* bytes of one flattened key */
#define FRT_POBS_MAX_STRING 65536  /* bytes of one string */
#define FRT_POBS_MAX_NDIM 8
#define FRT_POBS_MAX_ELEMS (1LL << 31)

/* numpy's dtypes the server reads (dtype.str: "|u1", "<f4", ...). */
typedef enum frt_pobs_dtype {
    FRT_POBS_BOOL, FRT_POBS_U8, FRT_POBS_I8, FRT_POBS_U16, FRT_POBS_I16, FRT_POBS_U32,
    FRT_POBS_I32, FRT_POBS_U64, FRT_POBS_I64, FRT_POBS_F32, FRT_POBS_F64,
} frt_pobs_dtype;

typedef enum frt_pobs_kind { FRT_POBS_ARRAY, FRT_POBS_STRING, FRT_POBS_NIL } frt_pobs_kind;

/* One value. An array's data is its C-order bytes, little-endian, owned
 * and aligned for its dtype; a string's data is its bytes plus a NUL. */
typedef struct frt_pobs_value {
    char *key;                       /* flattened key, NUL-terminated, owned */
    frt_pobs_kind kind;
    frt_pobs_dtype dtype;            /* arrays */
    int ndim;                        /* arrays: 0 (a scalar) .. FRT_POBS_MAX_NDIM */
    int64_t shape[FRT_POBS_MAX_NDIM];
    size_t n;                        /* elements (arrays) or bytes (strings, without the NUL) */
    void *data;                      /* owned */
} frt_pobs_value;

typedef struct frt_pobs {
    frt_pobs_value *v; /* [n], in message order */
    size_t n;
} frt_pobs;

/* Parses one msgpack value holding a map (openpi's msgpack_numpy: arrays
 * as {"__ndarray__": true, "data": bin, "dtype": str, "shape": [..]} with
 * bin or str keys; numpy scalars as {"__npgeneric__": true, "data": x,
 * "dtype": str}; a list of numbers as a 1-d f64 array; integers, floats and
 * booleans as 0-d arrays (i64 / u64 above INT64_MAX, f64, bool); str and
 * bin as strings; nil as FRT_POBS_NIL). Trailing bytes, another top-level
 * type, a key that is not a str / bin, a repeated key, a container that
 * claims more elements than there are bytes left, deeper nesting than
 * FRT_POBS_MAX_DEPTH or an array whose data size disagrees with its dtype
 * and shape are refused. *out owns the values (frt_pobs_free).
 * Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_MEMORY. */
int frt_pobs_parse_msgpack(const void *buf, size_t len, frt_pobs *out);

/* Parses a JSON object: arrays as {"dtype": s, "shape": [..], "data":
 * base64} (dtype as numpy's dtype.str or its name: "uint8", "float32" ..),
 * strings, null, booleans and numbers (0-d arrays as above), lists of
 * numbers (1-d f64), nested objects (flattened). Errors as above. */
int frt_pobs_parse_json(const char *buf, size_t len, frt_pobs *out);

/* Frees the values and empties *o; NULL is a no-op. */
void frt_pobs_free(frt_pobs *o);

/* The value of KEY, or NULL. */
const frt_pobs_value *frt_pobs_get(const frt_pobs *o, const char *key);

/* Bytes per element. */
size_t frt_pobs_dtype_size(frt_pobs_dtype d);

/* numpy's dtype.str ("|u1", "<f4", ...). Never NULL. */
const char *frt_pobs_dtype_str(frt_pobs_dtype d);

/* dtype.str (or, with NAMES 1, also numpy's names "uint8" ... "float64",
 * "bool") of LEN bytes -> *out. Refused: big-endian, float16, complex and
 * anything else. Errors: FRT_ERR_INVALID_ARGUMENT. */
int frt_pobs_dtype_parse(const char *s, size_t len, int names, frt_pobs_dtype *out);

/* The array's N elements as double (exact for every dtype but 64-bit
 * integers beyond 2^53). Errors: FRT_ERR_INVALID_ARGUMENT (not an array). */
int frt_pobs_to_f64(const frt_pobs_value *v, double *out);

/* Standard base64 (RFC 4648, '=' padding required, no whitespace) of LEN
 * bytes: *out malloc'd, *n_out bytes. Errors: FRT_ERR_INVALID_ARGUMENT (a bad
 * character or length), FRT_ERR_OUT_OF_MEMORY. */
int frt_pobs_base64_decode(const char *s, size_t len, uint8_t **out, size_t *n_out);

/* Base64 of N bytes, NUL-terminated, malloc'd (NULL when memory ran out). */
char *frt_pobs_base64_encode(const uint8_t *p, size_t n);

/* ---- internal to the parsers (policy_obs.c, policy_obs_json.c) ---------- */

/* Appends a value to *o with the key PREFIX/KEY (or KEY alone when PREFIX is
 * ""), refusing a repeated key, too many values or too long a key. The new
 * value is zeroed but for its key; *slot points at it. */
int frt_pobs_add(frt_pobs *o, const char *prefix, const char *key, size_t key_len, frt_pobs_value **slot);

/* Sets *v to an array of DTYPE / SHAPE whose NBYTES bytes are copied from
 * DATA; refuses a size that disagrees with the dtype and shape. */
int frt_pobs_set_array(frt_pobs_value *v, frt_pobs_dtype dtype, const int64_t *shape, int ndim, const void *data,
                       size_t nbytes);

/* Sets *v to a string of LEN bytes (copied; checked for UTF-8 and the
 * length limit). */
int frt_pobs_set_string(frt_pobs_value *v, const char *s, size_t len);

/* Prefixes the last error with "'KEY': WHAT" (the message copied first);
 * returns FRT_ERR_INVALID_ARGUMENT. */
int frt_pobs_error_at(const char *key, const char *what);

/* Sets *v to a 0-d f64 / i64 / u64 / bool array. */
int frt_pobs_set_f64(frt_pobs_value *v, double x);
int frt_pobs_set_i64(frt_pobs_value *v, int64_t x);
int frt_pobs_set_u64(frt_pobs_value *v, uint64_t x);
int frt_pobs_set_bool(frt_pobs_value *v, int x);

#endif
