/*
 * weights/pickle.c - the restricted pickle reader of pickle.h: a pickle
 * virtual machine over an allowlist of opcodes and globals that builds
 * inert values and never calls anything.
 *
 * The opcode semantics follow the pickle protocol as CPython documents it
 * (Lib/pickletools.py); what the torch globals mean follows
 * torch/_utils.py (_rebuild_tensor_v2(storage, storage_offset, size,
 * stride, requires_grad, backward_hooks[, metadata]),
 * _rebuild_parameter(data, requires_grad, backward_hooks)) and
 * torch/serialization.py (the persistent id of a storage).
 */
#include "weights/pickle.h"

#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PK_MAX_VALUES 1000000u
#define PK_MAX_MEMO 1000000u

struct pk_doc {
    pk_value **all; /* every value allocated (the arena) */
    size_t n_all, cap_all;
    pk_value **stack;
    size_t sp, cap_stack;
    pk_value **memo;
    size_t n_memo;
    pk_value **storages;
    size_t n_storages, cap_storages;
    pk_value *root;
    const unsigned char *p, *end, *base;
    const char *what;
};

/* ---- values --------------------------------------------------------------- */

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, nc * elem);
    if (!p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pickle: out of memory");
    *arr = p;
    *cap = nc;
    return 0;
}

static long off(const pk_doc *d) { return (long)(d->p - d->base); }

static int new_value(pk_doc *d, pk_type t, pk_value **out)
{
    if (d->n_all >= PK_MAX_VALUES)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "pickle: %s: more than %u values", d->what, PK_MAX_VALUES);
    FRT_TRY(grow((void **)&d->all, &d->cap_all, d->n_all + 1, sizeof *d->all));
    pk_value *v = calloc(1, sizeof *v);
    if (!v) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pickle: out of memory");
    v->type = t;
    d->all[d->n_all++] = v;
    *out = v;
    return 0;
}

static int add_item(pk_value *c, pk_value *item)
{
    FRT_TRY(grow((void **)&c->items, &c->cap, c->n + 1, sizeof *c->items));
    c->items[c->n++] = item;
    return 0;
}

/* ---- the stack ------------------------------------------------------------ */

static int push(pk_doc *d, pk_value *v)
{
    FRT_TRY(grow((void **)&d->stack, &d->cap_stack, d->sp + 1, sizeof *d->stack));
    d->stack[d->sp++] = v;
    return 0;
}

static int push_new(pk_doc *d, pk_type t, pk_value **out)
{
    pk_value *v = NULL;
    FRT_TRY(new_value(d, t, &v));
    FRT_TRY(push(d, v));
    if (out) *out = v;
    return 0;
}

static int pop(pk_doc *d, pk_value **out)
{
    if (d->sp == 0 || d->stack[d->sp - 1]->type == PK_MARK)
        return frt_error(FRT_ERR_FORMAT, "pickle: %s: stack underflow at offset %ld", d->what, off(d));
    *out = d->stack[--d->sp];
    return 0;
}

static int top(pk_doc *d, pk_value **out)
{
    if (d->sp == 0 || d->stack[d->sp - 1]->type == PK_MARK)
        return frt_error(FRT_ERR_FORMAT, "pickle: %s: empty stack at offset %ld", d->what, off(d));
    *out = d->stack[d->sp - 1];
    return 0;
}

/* The index of the topmost MARK. */
static int find_mark(pk_doc *d, size_t *at)
{
    for (size_t i = d->sp; i-- > 0;)
        if (d->stack[i]->type == PK_MARK) {
            *at = i;
            return 0;
        }
    return frt_error(FRT_ERR_FORMAT, "pickle: %s: no MARK on the stack at offset %ld", d->what, off(d));
}

/* Pops the items above the topmost MARK and the MARK; *items points into the
 * stack array (valid until the next push), *n their count. */
static int pop_mark(pk_doc *d, pk_value ***items, size_t *n)
{
    size_t m = 0;
    FRT_TRY(find_mark(d, &m));
    *items = d->stack + m + 1;
    *n = d->sp - m - 1;
    d->sp = m;
    return 0;
}

/* ---- reading the opcode stream ------------------------------------------ */

static int need(pk_doc *d, size_t n)
{
    if ((size_t)(d->end - d->p) < n)
        return frt_error(FRT_ERR_FORMAT, "pickle: %s: truncated at offset %ld", d->what, off(d));
    return 0;
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int read_le(pk_doc *d, int n, uint64_t *out)
{
    FRT_TRY(need(d, (size_t)n));
    *out = le(d->p, n);
    d->p += n;
    return 0;
}

static int push_str(pk_doc *d, size_t len)
{
    FRT_TRY(need(d, len));
    pk_value *v = NULL;
    FRT_TRY(push_new(d, PK_STR, &v));
    v->s = malloc(len + 1);
    if (!v->s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pickle: out of memory");
    memcpy(v->s, d->p, len);
    v->s[len] = 0;
    v->len = len;
    d->p += len;
    return 0;
}

static int push_int(pk_doc *d, int64_t i, pk_type t)
{
    pk_value *v = NULL;
    FRT_TRY(push_new(d, t, &v));
    v->i = i;
    return 0;
}

/* LONG1: n little-endian two's-complement bytes, n <= 8. */
static int op_long1(pk_doc *d)
{
    uint64_t n;
    FRT_TRY(read_le(d, 1, &n));
    if (n > 8) return frt_error(FRT_ERR_OUT_OF_RANGE, "pickle: %s: a %d-byte integer at offset %ld", d->what, (int)n, off(d));
    FRT_TRY(need(d, n));
    uint64_t u = n ? le(d->p, (int)n) : 0;
    if (n && n < 8 && (d->p[n - 1] & 0x80)) u |= ~0ull << (8 * n); /* sign-extend */
    d->p += n;
    return push_int(d, (int64_t)u, PK_INT);
}

static int op_binfloat(pk_doc *d)
{
    FRT_TRY(need(d, 8));
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u = u << 8 | d->p[i]; /* big-endian */
    d->p += 8;
    pk_value *v = NULL;
    FRT_TRY(push_new(d, PK_FLOAT, &v));
    memcpy(&v->f, &u, sizeof v->f);
    return 0;
}

/* ---- globals ---------------------------------------------------------------- */

static const struct {
    const char *module, *name;
    pk_global g;
} g_allowed[] = {
    {"torch._utils", "_rebuild_tensor_v2", PKG_REBUILD_TENSOR},
    {"torch._utils", "_rebuild_parameter", PKG_REBUILD_PARAMETER},
    {"torch", "BFloat16Storage", PKG_STORAGE_BF16},
    {"torch", "HalfStorage", PKG_STORAGE_F16},
    {"torch", "FloatStorage", PKG_STORAGE_F32},
    {"torch", "UntypedStorage", PKG_STORAGE_BYTES},
    {"torch.storage", "UntypedStorage", PKG_STORAGE_BYTES},
    {"collections", "OrderedDict", PKG_ORDERED_DICT},
    {"builtins", "set", PKG_SET},
    {"__builtin__", "set", PKG_SET},
    {"torch.nn.modules.container", "ParameterList", PKG_PARAMETER_LIST},
};

static int push_global(pk_doc *d, const char *module, const char *name)
{
    for (size_t i = 0; i < sizeof g_allowed / sizeof g_allowed[0]; i++)
        if (!strcmp(module, g_allowed[i].module) && !strcmp(name, g_allowed[i].name)) {
            pk_value *v = NULL;
            FRT_TRY(push_new(d, PK_GLOBAL, &v));
            v->g = g_allowed[i].g;
            return 0;
        }
    return frt_error(FRT_ERR_UNSUPPORTED,
                     "pickle: %s: global '%.100s.%.100s' at offset %ld is not allowed (a cartridge holds only torch "
                     "tensors, storages, OrderedDict, set and ParameterList)",
                     d->what, module, name, off(d));
}

/* GLOBAL: "module\nname\n". */
static int op_global(pk_doc *d)
{
    char part[2][256];
    for (int k = 0; k < 2; k++) {
        const unsigned char *nl = memchr(d->p, '\n', (size_t)(d->end - d->p));
        if (!nl) return frt_error(FRT_ERR_FORMAT, "pickle: %s: truncated GLOBAL at offset %ld", d->what, off(d));
        size_t len = (size_t)(nl - d->p);
        if (len >= sizeof part[k])
            return frt_error(FRT_ERR_FORMAT, "pickle: %s: a GLOBAL name of %zu bytes at offset %ld", d->what, len, off(d));
        memcpy(part[k], d->p, len);
        part[k][len] = 0;
        d->p = nl + 1;
    }
    return push_global(d, part[0], part[1]);
}

static int op_stack_global(pk_doc *d)
{
    pk_value *name = NULL, *module = NULL;
    FRT_TRY(pop(d, &name));
    FRT_TRY(pop(d, &module));
    if (name->type != PK_STR || module->type != PK_STR)
        return frt_error(FRT_ERR_FORMAT, "pickle: %s: STACK_GLOBAL of non-strings at offset %ld", d->what, off(d));
    return push_global(d, module->s, name->s);
}

/* ---- memo ---------------------------------------------------------------- */

static int memo_put(pk_doc *d, uint64_t idx)
{
    if (idx >= PK_MAX_MEMO)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "pickle: %s: memo index %llu at offset %ld", d->what,
                         (unsigned long long)idx, off(d));
    pk_value *v = NULL;
    FRT_TRY(top(d, &v));
    if (idx >= d->n_memo) {
        size_t nn = idx + 1;
        pk_value **m = realloc(d->memo, nn * sizeof *m);
        if (!m) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pickle: out of memory");
        memset(m + d->n_memo, 0, (nn - d->n_memo) * sizeof *m);
        d->memo = m;
        d->n_memo = nn;
    }
    d->memo[idx] = v;
    return 0;
}

static int memo_get(pk_doc *d, uint64_t idx)
{
    if (idx >= d->n_memo || !d->memo[idx])
        return frt_error(FRT_ERR_FORMAT, "pickle: %s: memo index %llu is not set (offset %ld)", d->what,
                         (unsigned long long)idx, off(d));
    return push(d, d->memo[idx]);
}

/* ---- containers ------------------------------------------------------------ */

static int op_tuple_n(pk_doc *d, size_t n)
{
    if (d->sp < n) return frt_error(FRT_ERR_FORMAT, "pickle: %s: stack underflow at offset %ld", d->what, off(d));
    pk_value *t = NULL;
    FRT_TRY(new_value(d, PK_TUPLE, &t));
    for (size_t i = d->sp - n; i < d->sp; i++) {
        if (d->stack[i]->type == PK_MARK)
            return frt_error(FRT_ERR_FORMAT, "pickle: %s: a MARK inside TUPLE%zu at offset %ld", d->what, n, off(d));
        FRT_TRY(add_item(t, d->stack[i]));
    }
    d->sp -= n;
    return push(d, t);
}

/* TUPLE / LIST from the topmost MARK. */
static int op_from_mark(pk_doc *d, pk_type t)
{
    pk_value **items = NULL, *c = NULL;
    size_t n;
    FRT_TRY(pop_mark(d, &items, &n));
    FRT_TRY(new_value(d, t, &c));
    for (size_t i = 0; i < n; i++) FRT_TRY(add_item(c, items[i]));
    return push(d, c);
}

/* APPEND / APPENDS (LIST), ADDITEMS (SET), SETITEM(S) (DICT): items above
 * the container (from the MARK when marked). */
static int op_extend(pk_doc *d, pk_type want, int marked, size_t single)
{
    pk_value **items = NULL, *c = NULL;
    size_t n;
    if (marked) {
        FRT_TRY(pop_mark(d, &items, &n));
    } else {
        if (d->sp < single + 1)
            return frt_error(FRT_ERR_FORMAT, "pickle: %s: stack underflow at offset %ld", d->what, off(d));
        items = d->stack + d->sp - single;
        n = single;
        d->sp -= single;
        for (size_t i = 0; i < n; i++)
            if (items[i]->type == PK_MARK)
                return frt_error(FRT_ERR_FORMAT, "pickle: %s: a MARK as an item at offset %ld", d->what, off(d));
    }
    FRT_TRY(top(d, &c));
    if (c->type != want)
        return frt_error(FRT_ERR_FORMAT, "pickle: %s: adding items to a value of type %d at offset %ld", d->what,
                         (int)c->type, off(d));
    if (want == PK_DICT && n % 2)
        return frt_error(FRT_ERR_FORMAT, "pickle: %s: SETITEMS with an odd count at offset %ld", d->what, off(d));
    for (size_t i = 0; i < n; i++) FRT_TRY(add_item(c, items[i]));
    return 0;
}

/* ---- torch's objects ------------------------------------------------------- */

static int int_of(const pk_value *v, int64_t *out)
{
    if (v->type != PK_INT) return -1;
    *out = v->i;
    return 0;
}

/* ('storage', TYPE, key, location, numel) -> a STORAGE. */
static int op_binpersid(pk_doc *d)
{
    pk_value *pid = NULL, *s = NULL;
    FRT_TRY(pop(d, &pid));
    if (pid->type != PK_TUPLE || pid->n != 5 || pid->items[0]->type != PK_STR || strcmp(pid->items[0]->s, "storage") ||
        pid->items[1]->type != PK_GLOBAL || pid->items[2]->type != PK_STR || pid->items[3]->type != PK_STR ||
        pid->items[4]->type != PK_INT)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "pickle: %s: a persistent id at offset %ld that is not torch's ('storage', type, key, "
                         "location, numel)",
                         d->what, off(d));
    static const frt_dtype dt[] = {[PKG_STORAGE_BF16] = FRT_DT_BF16, [PKG_STORAGE_F16] = FRT_DT_F16,
                                   [PKG_STORAGE_F32] = FRT_DT_F32, [PKG_STORAGE_BYTES] = FRT_DT_U8};
    pk_global g = pid->items[1]->g;
    if (g != PKG_STORAGE_BF16 && g != PKG_STORAGE_F16 && g != PKG_STORAGE_F32 && g != PKG_STORAGE_BYTES)
        return frt_error(FRT_ERR_UNSUPPORTED, "pickle: %s: a persistent id whose type is not a storage (offset %ld)",
                         d->what, off(d));
    if (pid->items[4]->i < 0 || pid->items[4]->i > ((int64_t)1 << 40))
        return frt_error(FRT_ERR_OUT_OF_RANGE, "pickle: %s: storage of %lld elements", d->what,
                         (long long)pid->items[4]->i);
    FRT_TRY(new_value(d, PK_STORAGE, &s));
    s->s = pid->items[2]->s; /* owned by the key string value (same arena) */
    s->len = pid->items[2]->len;
    s->dtype = dt[g];
    s->i = pid->items[4]->i;
    FRT_TRY(grow((void **)&d->storages, &d->cap_storages, d->n_storages + 1, sizeof *d->storages));
    d->storages[d->n_storages++] = s;
    return push(d, s);
}

static int ints_of(const pk_value *t, int64_t *out, int *n)
{
    if (t->type != PK_TUPLE || t->n > FRT_TENSOR_MAX_DIMS) return -1;
    for (size_t i = 0; i < t->n; i++)
        if (int_of(t->items[i], &out[i]) || out[i] < 0 || out[i] > ((int64_t)1 << 40)) return -1;
    *n = (int)t->n;
    return 0;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]) */
static int rebuild_tensor(pk_doc *d, const pk_value *a, pk_value **out)
{
    int ns = 0, nt = 0;
    pk_value *t = NULL;
    FRT_TRY(new_value(d, PK_TENSOR, &t));
    if ((a->n != 6 && a->n != 7) || a->items[0]->type != PK_STORAGE || int_of(a->items[1], &t->i) || t->i < 0 ||
        ints_of(a->items[2], t->shape, &ns) || ints_of(a->items[3], t->stride, &nt) || ns != nt ||
        a->items[4]->type != PK_BOOL || a->items[5]->type != PK_DICT ||
        (a->n == 7 && a->items[6]->type != PK_NONE && a->items[6]->type != PK_DICT))
        return frt_error(FRT_ERR_FORMAT, "pickle: %s: bad arguments to _rebuild_tensor_v2 at offset %ld", d->what,
                         off(d));
    t->storage = a->items[0];
    t->dtype = t->storage->dtype;
    t->ndim = ns;
    /* the largest element index read must lie in the storage */
    int64_t last = t->i, empty = 0;
    for (int i = 0; i < ns; i++) {
        if (t->shape[i] == 0) empty = 1;
        else last += (t->shape[i] - 1) * t->stride[i]; /* < 2^80 cannot happen: each factor < 2^40 */
    }
    if (!empty && last >= t->storage->i)
        return frt_error(FRT_ERR_FORMAT, "pickle: %s: a tensor view past the end of storage '%s' (%lld elements)",
                         d->what, t->storage->s, (long long)t->storage->i);
    *out = t;
    return 0;
}

static int op_reduce(pk_doc *d)
{
    pk_value *args = NULL, *fn = NULL, *r = NULL;
    FRT_TRY(pop(d, &args));
    FRT_TRY(pop(d, &fn));
    if (fn->type != PK_GLOBAL || args->type != PK_TUPLE)
        return frt_error(FRT_ERR_FORMAT, "pickle: %s: REDUCE of a non-global at offset %ld", d->what, off(d));
    switch (fn->g) {
    case PKG_REBUILD_TENSOR: FRT_TRY(rebuild_tensor(d, args, &r)); break;
    case PKG_REBUILD_PARAMETER:
        if (args->n != 3 || args->items[0]->type != PK_TENSOR || args->items[1]->type != PK_BOOL ||
            args->items[2]->type != PK_DICT)
            return frt_error(FRT_ERR_FORMAT, "pickle: %s: bad arguments to _rebuild_parameter at offset %ld", d->what,
                             off(d));
        r = args->items[0];
        break;
    case PKG_ORDERED_DICT:
        if (args->n != 0)
            return frt_error(FRT_ERR_UNSUPPORTED, "pickle: %s: OrderedDict with arguments at offset %ld", d->what,
                             off(d));
        FRT_TRY(new_value(d, PK_DICT, &r));
        break;
    case PKG_SET:
        if (args->n > 1 || (args->n == 1 && args->items[0]->type != PK_LIST))
            return frt_error(FRT_ERR_UNSUPPORTED, "pickle: %s: set() of something other than a list at offset %ld",
                             d->what, off(d));
        FRT_TRY(new_value(d, PK_SET, &r));
        for (size_t i = 0; args->n && i < args->items[0]->n; i++) FRT_TRY(add_item(r, args->items[0]->items[i]));
        break;
    default:
        return frt_error(FRT_ERR_UNSUPPORTED, "pickle: %s: REDUCE of a storage type or class at offset %ld (only "
                         "tensors, parameters, OrderedDict and set are built)", d->what, off(d));
    }
    return push(d, r);
}

static int op_newobj(pk_doc *d)
{
    pk_value *args = NULL, *cls = NULL, *o = NULL;
    FRT_TRY(pop(d, &args));
    FRT_TRY(pop(d, &cls));
    if (cls->type != PK_GLOBAL || cls->g != PKG_PARAMETER_LIST || args->type != PK_TUPLE || args->n != 0)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "pickle: %s: NEWOBJ at offset %ld of something other than ParameterList()", d->what, off(d));
    FRT_TRY(new_value(d, PK_OBJECT, &o));
    return push(d, o);
}

static int op_build(pk_doc *d)
{
    pk_value *state = NULL, *o = NULL;
    FRT_TRY(pop(d, &state));
    FRT_TRY(top(d, &o));
    if (o->type != PK_OBJECT || o->state || state->type != PK_DICT)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "pickle: %s: BUILD at offset %ld of something other than a new ParameterList with a dict",
                         d->what, off(d));
    o->state = state;
    return 0;
}

/* ---- the machine ---------------------------------------------------------- */

static int step(pk_doc *d, int *stop)
{
    uint64_t u = 0;
    unsigned char op = *d->p++;
    switch (op) {
    case 0x80: /* PROTO */
        FRT_TRY(read_le(d, 1, &u));
        if (u < 2 || u > 5)
            return frt_error(FRT_ERR_UNSUPPORTED, "pickle: %s: protocol %d (2 to 5 are read)", d->what, (int)u);
        return 0;
    case 0x95: return read_le(d, 8, &u); /* FRAME: a length hint */
    case '.': *stop = 1; return 0;
    case '(': return push_new(d, PK_MARK, NULL);
    case 'N': return push_new(d, PK_NONE, NULL);
    case 0x88: return push_int(d, 1, PK_BOOL);
    case 0x89: return push_int(d, 0, PK_BOOL);
    case 'J': FRT_TRY(read_le(d, 4, &u)); return push_int(d, (int32_t)(uint32_t)u, PK_INT);
    case 'K': FRT_TRY(read_le(d, 1, &u)); return push_int(d, (int64_t)u, PK_INT);
    case 'M': FRT_TRY(read_le(d, 2, &u)); return push_int(d, (int64_t)u, PK_INT);
    case 0x8a: return op_long1(d);
    case 'G': return op_binfloat(d);
    case 'X': FRT_TRY(read_le(d, 4, &u)); return push_str(d, (size_t)u);
    case 0x8c: FRT_TRY(read_le(d, 1, &u)); return push_str(d, (size_t)u);
    case 0x8d:
        FRT_TRY(read_le(d, 8, &u));
        if (u > (uint64_t)(d->end - d->p)) return need(d, (size_t)-1);
        return push_str(d, (size_t)u);
    case '}': return push_new(d, PK_DICT, NULL);
    case ']': return push_new(d, PK_LIST, NULL);
    case ')': return push_new(d, PK_TUPLE, NULL);
    case 0x8f: return push_new(d, PK_SET, NULL);
    case 't': return op_from_mark(d, PK_TUPLE);
    case 'l': return op_from_mark(d, PK_LIST);
    case 0x85: return op_tuple_n(d, 1);
    case 0x86: return op_tuple_n(d, 2);
    case 0x87: return op_tuple_n(d, 3);
    case 'a': return op_extend(d, PK_LIST, 0, 1);
    case 'e': return op_extend(d, PK_LIST, 1, 0);
    case 's': return op_extend(d, PK_DICT, 0, 2);
    case 'u': return op_extend(d, PK_DICT, 1, 0);
    case 0x90: return op_extend(d, PK_SET, 1, 0);
    case 'q': FRT_TRY(read_le(d, 1, &u)); return memo_put(d, u);
    case 'r': FRT_TRY(read_le(d, 4, &u)); return memo_put(d, u);
    case 0x94: return memo_put(d, d->n_memo);
    case 'h': FRT_TRY(read_le(d, 1, &u)); return memo_get(d, u);
    case 'j': FRT_TRY(read_le(d, 4, &u)); return memo_get(d, u);
    case 'c': return op_global(d);
    case 0x93: return op_stack_global(d);
    case 'Q': return op_binpersid(d);
    case 'R': return op_reduce(d);
    case 0x81: return op_newobj(d);
    case 'b': return op_build(d);
    default:
        d->p--;
        return frt_error(FRT_ERR_UNSUPPORTED, "pickle: %s: opcode 0x%02x ('%c') at offset %ld is not allowed", d->what,
                         op, op >= 0x20 && op < 0x7f ? op : '?', off(d));
    }
}

int pk_parse(const void *data, size_t size, const char *what, pk_doc **out)
{
    if (!data || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "pickle: NULL argument");
    *out = NULL;
    pk_doc *d = calloc(1, sizeof *d);
    if (!d) return frt_error(FRT_ERR_OUT_OF_MEMORY, "pickle: out of memory");
    d->base = d->p = data;
    d->end = d->base + size;
    d->what = what ? what : "data.pkl";
    int stop = 0, rc = 0;
    while (rc == 0 && !stop) {
        if (d->p >= d->end) rc = frt_error(FRT_ERR_FORMAT, "pickle: %s: no STOP opcode", d->what);
        else rc = step(d, &stop);
    }
    if (rc == 0 && (d->sp != 1 || d->stack[0]->type == PK_MARK))
        rc = frt_error(FRT_ERR_FORMAT, "pickle: %s: %zu values left on the stack at STOP (1 expected)", d->what, d->sp);
    if (rc < 0) {
        pk_free(d);
        return rc;
    }
    d->root = d->stack[0];
    *out = d;
    return 0;
}

const pk_value *pk_root(const pk_doc *d) { return d ? d->root : NULL; }
size_t pk_storage_count(const pk_doc *d) { return d ? d->n_storages : 0; }
const pk_value *pk_storage_at(const pk_doc *d, size_t i) { return d && i < d->n_storages ? d->storages[i] : NULL; }

const pk_value *pk_dict_get(const pk_value *dict, const char *key)
{
    if (!dict || dict->type != PK_DICT) return NULL;
    const pk_value *found = NULL;
    for (size_t i = 0; i + 1 < dict->n; i += 2)
        if (dict->items[i]->type == PK_STR && !strcmp(dict->items[i]->s, key)) found = dict->items[i + 1];
    return found;
}

void pk_free(pk_doc *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n_all; i++) {
        pk_value *v = d->all[i];
        if (v->type == PK_STR) free(v->s);
        free(v->items);
        free(v);
    }
    free(d->all);
    free(d->stack);
    free(d->memo);
    free(d->storages);
    free(d);
}
