/*
 * weights/pickle.h - a restricted pickle reader for the data.pkl of a
 * PyTorch .pt file (the zip container of torch.save, torch >= 1.6).
 *
 * It never executes anything: it runs the pickle virtual machine
 * (https://docs.python.org/3/library/pickle.html, the opcode table of
 * CPython's Lib/pickletools.py) over a fixed set of opcodes and resolves
 * GLOBAL names against a fixed allowlist into inert values:
 *
 *   torch._utils._rebuild_tensor_v2    REDUCE -> a tensor view of a storage
 *   torch._utils._rebuild_parameter    REDUCE -> the tensor it wraps
 *   torch.{BFloat16,Half,Float}Storage the storage type of a persistent id
 *   torch.UntypedStorage, torch.storage.UntypedStorage (bytes)
 *   collections.OrderedDict            REDUCE () -> an empty dict
 *   builtins.set / __builtin__.set     REDUCE () or ([...],) -> a set
 *   torch.nn.modules.container.ParameterList  NEWOBJ () then BUILD {state}
 *
 * Opcodes: PROTO (2..5), FRAME, STOP, MARK, the None / bool / int / float /
 * str literals (BININT*, LONG1, BINFLOAT, BINUNICODE, SHORT_BINUNICODE,
 * BINUNICODE8), the empty containers and TUPLE*, LIST, APPEND(S),
 * SETITEM(S), ADDITEMS, the memo (BINPUT, LONG_BINPUT, MEMOIZE, BINGET,
 * LONG_BINGET), GLOBAL, STACK_GLOBAL, BINPERSID, REDUCE, NEWOBJ, BUILD.
 * Anything else (another opcode, a global outside the list, a REDUCE of a
 * storage type) is FRT_ERR_UNSUPPORTED with a message naming the opcode or
 * the global and its byte offset. A persistent id must be torch's storage
 * tuple ('storage', TYPE, key, location, numel).
 *
 * Limits (FRT_ERR_OUT_OF_RANGE): 1,000,000 values (about 230 MB of them), a memo index below
 * 1,000,000, tensors of at most 8 dims. All values live in one arena freed
 * with the document.
 */
#ifndef FRT_WEIGHTS_PICKLE_H
#define FRT_WEIGHTS_PICKLE_H

#include "frt/safetensors.h"

#include <stddef.h>
#include <stdint.h>

typedef enum pk_type {
    PK_NONE,
    PK_BOOL,
    PK_INT,
    PK_FLOAT,
    PK_STR,
    PK_TUPLE,
    PK_LIST,
    PK_DICT,    /* items: key0, value0, key1, value1, ... (insertion order) */
    PK_SET,
    PK_GLOBAL,  /* an allowlisted name (g) */
    PK_STORAGE, /* a persistent id: str = key, dtype, numel */
    PK_TENSOR,  /* a view: storage, offset, ndim, shape, stride (elements) */
    PK_OBJECT,  /* a ParameterList: state = the dict BUILD gave it (NULL before) */
    PK_MARK,
} pk_type;

typedef enum pk_global {
    PKG_REBUILD_TENSOR,
    PKG_REBUILD_PARAMETER,
    PKG_STORAGE_BF16,
    PKG_STORAGE_F16,
    PKG_STORAGE_F32,
    PKG_STORAGE_BYTES,
    PKG_ORDERED_DICT,
    PKG_SET,
    PKG_PARAMETER_LIST,
} pk_global;

typedef struct pk_value pk_value;
struct pk_value {
    pk_type type;
    int64_t i;          /* INT, BOOL; STORAGE: numel; TENSOR: storage offset */
    double f;           /* FLOAT */
    char *s;            /* STR (NUL-terminated, len bytes); STORAGE: key */
    size_t len;
    pk_value **items;   /* TUPLE, LIST, SET, DICT */
    size_t n, cap;
    pk_global g;        /* GLOBAL */
    frt_dtype dtype;    /* STORAGE, TENSOR */
    pk_value *storage;  /* TENSOR */
    int ndim;           /* TENSOR */
    int64_t shape[FRT_TENSOR_MAX_DIMS], stride[FRT_TENSOR_MAX_DIMS];
    pk_value *state;    /* OBJECT */
};

typedef struct pk_doc pk_doc;

/* Runs the pickle in data[0..size) and returns the document (free with
 * pk_free) whose root is pk_root(doc). `what` names it in messages.
 * Errors: FRT_ERR_FORMAT (truncated or malformed: stack underflow, a missing
 * MARK, an opcode applied to the wrong type, an unknown memo index, no
 * STOP), FRT_ERR_UNSUPPORTED (see above), FRT_ERR_OUT_OF_RANGE (limits),
 * FRT_ERR_OUT_OF_MEMORY. */
int pk_parse(const void *data, size_t size, const char *what, pk_doc **out);

const pk_value *pk_root(const pk_doc *d);

/* Every storage value of the document (persistent ids), in the order met. */
size_t pk_storage_count(const pk_doc *d);
const pk_value *pk_storage_at(const pk_doc *d, size_t i);

/* The value of str key `key` in a DICT, or NULL (the last one if repeated). */
const pk_value *pk_dict_get(const pk_value *dict, const char *key);

void pk_free(pk_doc *d);

#endif /* FRT_WEIGHTS_PICKLE_H */
