/*
 * capsule.c - execution-state capsules (include/frt/capsule.h): snapshot the
 * live state's closure into a tier, restore it, move it between tiers, and
 * the file format of docs/capsule-format.md.
 *
 * The closure is the model's declared state table (model/arch.h, state.c),
 * which ends with the logits of the last committed token, so a restored
 * boundary can sample without a forward pass. Entries with the rows rule
 * (KV caches, the token journal) are stored up to the position only.
 */
#include "model/model_internal.h"

#include "util/error.h"
#include "frt/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define CAPSULE_MAGIC "FRTCAPS1"
#define CAPSULE_ALIGN 4096u
#define CAPSULE_NAME_LEN 48

/* On-disk header (little-endian, as the host writes it: x86-64 and arm64). */
typedef struct file_header {
    char magic[8];
    uint32_t version;
    uint32_t n_buffers;
    uint64_t file_bytes;     /* the whole file */
    uint64_t payload_bytes;  /* sum of the buffers' valid bytes */
    int32_t position, pending, prefill_chunk, aligned;
    uint64_t rng[2];
    uint64_t prefix_digest;
    uint64_t fingerprint;
    uint64_t meta_checksum;  /* xxh64 of this header (this field and mac 0) and the table */
    uint32_t flags;          /* FILE_KEYED */
    uint32_t reserved;       /* 0 */
    uint8_t mac[32];         /* keyed: HMAC-SHA256 of this header (mac 0) and the table */
} file_header;

#define FILE_KEYED 1u

typedef struct file_entry {
    char name[CAPSULE_NAME_LEN];
    uint64_t offset;     /* payload offset in the file, CAPSULE_ALIGN-aligned */
    uint64_t bytes;      /* valid bytes stored */
    uint64_t full_bytes; /* the live buffer's size (must match the model) */
    uint64_t checksum;   /* xxh64 of the payload */
    uint8_t mac[32];     /* keyed: HMAC-SHA256 of the payload; else 0 */
} file_entry;

struct frt_capsule {
    frt_context *ctx;
    frt_tier tier;
    frt_capsule_info info;
    int n;
    file_entry table[FRT_CAPSULE_MAX_BUFFERS];
    frt_buffer *payload;     /* device or pinned-host memory; NULL for disk */
    char *path;              /* disk tier */
    uint64_t serial;         /* unique in the process, never reused (0: a loaded file) */
    unsigned char key[FRT_CAPSULE_KEY_MAX]; /* the model's capsule key at snapshot (files written later use it) */
    size_t key_len;
    int reads_pending; /* a pipelined restore's copies may still read the payload (payload_free) */
};

static uint64_t g_serial; /* the last capsule serial handed out */

const char *frt_tier_name(frt_tier t)
{
    switch (t) {
    case FRT_TIER_DEVICE: return "device";
    case FRT_TIER_HOST: return "host";
    case FRT_TIER_DISK: return "disk";
    }
    return "unknown";
}

uint64_t frt_model_fingerprint(const frt_model *m) { return m ? m->fingerprint : 0; }

uint64_t frt_prefix_digest(const int32_t *ids, int n, const void *salt, size_t salt_len)
{
    XXH64_state_t *h = XXH64_createState();
    if (!h) return 0;
    XXH64_reset(h, 0xF27C0DE);
    uint64_t sl = salt ? salt_len : 0;
    XXH64_update(h, &sl, sizeof sl);
    if (sl) XXH64_update(h, salt, salt_len);
    if (n > 0) XXH64_update(h, ids, (size_t)n * sizeof *ids);
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d;
}

/* ---- the closure ------------------------------------------------------ */

/* The closure is the model's state table (state.c), in declaration order. */
static int closure(frt_model *m, frt_buffer **bufs)
{
    for (int i = 0; i < m->n_state; i++) bufs[i] = m->state[i].buf;
    return m->n_state;
}

/* Valid bytes of closure buffer i at position pos: the table's rule. */
static size_t valid_bytes(const frt_model *m, int i, int pos) { return frt_model_state_valid_bytes(m, i, pos); }

/* The index of the boundary record in the table. */
static int boundary_index(const frt_model *m)
{
    for (int i = 0; i < m->n_state; i++)
        if (m->state[i].buf == m->boundary) return i;
    return -1;
}

/* Checks a boundary record read from a capsule against the header and the
 * model before anything touches the live state: a record with a position
 * or pending token outside the model would make the next step read or
 * write out of bounds. */
static int check_boundary(const frt_model *m, const char *what, const frt_boundary *b, int position, int pending)
{
    if (b->pos != position || b->pos < 0 || b->pos > m->max_seq)
        return frt_error(FRT_ERR_FORMAT, "capsule: %s: boundary position %d (header %d) outside [0, %d]", what,
                         b->pos, position, m->max_seq);
    if (b->pending != pending || b->pending < -1 || b->pending >= m->cfg.vocab_size)
        return frt_error(FRT_ERR_FORMAT, "capsule: %s: pending token %d (header %d) outside [-1, %d)", what,
                         b->pending, pending, m->cfg.vocab_size);
    if (b->has_logits != 0 && b->has_logits != 1)
        return frt_error(FRT_ERR_FORMAT, "capsule: %s: boundary flag has_logits = %d (0 or 1)", what, b->has_logits);
    if (b->reserved != 0)
        return frt_error(FRT_ERR_FORMAT, "capsule: %s: unknown boundary flags %d", what, b->reserved);
    return 0;
}

static size_t align_up(size_t x) { return (x + CAPSULE_ALIGN - 1) / CAPSULE_ALIGN * CAPSULE_ALIGN; }

/* ---- snapshot ----------------------------------------------------------- */

static int fill_descriptor(frt_model *m, frt_capsule *c, const void *salt, size_t salt_len)
{
    frt_boundary b;
    FRT_TRY(frt_model_boundary_read(m, &b));
    frt_capsule_info *in = &c->info;
    in->position = b.pos;
    in->pending = b.pending;
    in->prefill_chunk = m->C;
    in->aligned = b.pos % m->C == 0;
    in->rng[0] = b.rng[0];
    in->rng[1] = b.rng[1];
    in->fingerprint = m->fingerprint;
    int32_t *ids = malloc((size_t)(b.pos ? b.pos : 1) * sizeof *ids);
    if (!ids) return frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule: out of memory");
    int rc = b.pos ? frt_buffer_read(m->tokens, 0, ids, (size_t)b.pos * sizeof *ids, m->stream) : 0;
    if (rc == 0) rc = frt_stream_sync(m->stream);
    if (rc == 0) in->prefix_digest = frt_prefix_digest(ids, b.pos, salt, salt_len);
    free(ids);
    return rc;
}

static int build_table(frt_model *m, frt_capsule *c)
{
    frt_buffer *bufs[FRT_CAPSULE_MAX_BUFFERS];
    int n = closure(m, bufs);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        file_entry *e = &c->table[i];
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", frt_buffer_name(bufs[i]));
        e->bytes = valid_bytes(m, i, c->info.position);
        e->full_bytes = frt_buffer_size(bufs[i]);
        e->offset = off; /* offset inside the in-memory payload; aligned for files */
        off = align_up(off + e->bytes);
    }
    c->n = n;
    c->info.n_buffers = n;
    c->info.bytes = 0;
    for (int i = 0; i < n; i++) c->info.bytes += c->table[i].bytes;
    return 0;
}

static size_t payload_span(const frt_capsule *c)
{
    return c->n ? align_up(c->table[c->n - 1].offset + c->table[c->n - 1].bytes) : 0;
}

/* One batched copy between the closure and a payload buffer. */
static int copy_closure_ex(frt_model *m, const frt_capsule *c, frt_buffer *payload, int to_payload,
                           const unsigned char *skip, frt_restore_stats *st, int sync)
{
    frt_buffer *bufs[FRT_CAPSULE_MAX_BUFFERS];
    frt_copy copies[FRT_CAPSULE_MAX_BUFFERS];
    int n = closure(m, bufs), k = 0;
    for (int i = 0; i < n; i++) {
        if (skip && skip[i]) continue;
        if (!c->table[i].bytes) continue;
        copies[k].dst = to_payload ? payload : bufs[i];
        copies[k].dst_off = to_payload ? c->table[i].offset : 0;
        copies[k].src = to_payload ? bufs[i] : payload;
        copies[k].src_off = to_payload ? 0 : c->table[i].offset;
        copies[k].bytes = c->table[i].bytes;
        if (st) st->bytes += c->table[i].bytes, st->n_buffers++;
        k++;
    }
    FRT_TRY(frt_buffer_copy_batch(copies, k, m->stream));
    return sync ? frt_stream_sync(m->stream) : 0;
}

static int copy_closure(frt_model *m, const frt_capsule *c, frt_buffer *payload, int to_payload,
                        const unsigned char *skip, frt_restore_stats *st)
{
    return copy_closure_ex(m, c, payload, to_payload, skip, st, 1);
}

/* Frees the payload once no pipelined restore can still read it. */
static void payload_free(frt_capsule *c) { frt_model_copy_source_free(c->ctx, &c->payload, &c->reads_pending); }

/* The pipelined restore (m->layer_ready; docs/model.md "The pipelined
 * restore"): the entries no layer owns (the boundary, the journal, the
 * logits: what the host reads next) on m->stream, synced; layer l's
 * entries on m->copy_stream, in layer order, each layer followed by a
 * record of m->layer_ready[l]; m->stream then defers a wait for the last
 * layer, which the next prefill's first piece holds back while its graph
 * waits layer by layer itself. `skip` marks entries not to copy. */
static int copy_closure_pipelined(frt_model *m, frt_capsule *c, frt_buffer *payload, const unsigned char *skip,
                                  frt_restore_stats *st)
{
    frt_buffer *bufs[FRT_CAPSULE_MAX_BUFFERS];
    unsigned char main_skip[FRT_CAPSULE_MAX_BUFFERS] = {0};
    frt_copy copies[FRT_CAPSULE_MAX_BUFFERS];
    int layer[FRT_CAPSULE_MAX_BUFFERS], k = 0;
    int n = closure(m, bufs);
    for (int i = 0; i < n; i++) main_skip[i] = (unsigned char)(skip[i] || m->entry_layer[i] >= 0);
    FRT_TRY(copy_closure(m, c, payload, 0, main_skip, st));
    for (int i = 0; i < n; i++) {
        if (skip[i] || m->entry_layer[i] < 0 || !c->table[i].bytes) continue;
        copies[k] = (frt_copy){bufs[i], 0, payload, c->table[i].offset, c->table[i].bytes};
        layer[k++] = m->entry_layer[i];
        st->bytes += c->table[i].bytes, st->n_buffers++;
    }
    c->reads_pending = 1;
    return frt_model_copy_layers(m, copies, layer, k);
}

static frt_space tier_space(frt_tier t) { return t == FRT_TIER_DEVICE ? FRT_SPACE_DEVICE : FRT_SPACE_PINNED_HOST; }

static int write_file(const frt_capsule *c, const frt_buffer *payload, const char *path);

int frt_capsule_snapshot(frt_model *m, frt_tier tier, const char *path, const void *salt, size_t salt_len,
                         frt_capsule **out)
{
    if (!m || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL argument");
    *out = NULL;
    if (tier != FRT_TIER_DEVICE && tier != FRT_TIER_HOST && tier != FRT_TIER_DISK)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: unknown tier %d", (int)tier);
    if (tier == FRT_TIER_DISK && (!path || !*path))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: the disk tier needs a path");
    if (tier != FRT_TIER_DISK && path)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: a path is for the disk tier only (tier %s writes no file)",
                         frt_tier_name(tier));
    if (!salt && salt_len)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: salt NULL with salt_len %zu", salt_len);
    frt_capsule *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule: out of memory");
    c->ctx = m->ctx;
    memcpy(c->key, m->capsule_key, m->capsule_key_len);
    c->key_len = m->capsule_key_len;
    int rc = fill_descriptor(m, c, salt, salt_len);
    if (rc == 0) rc = build_table(m, c);
    frt_buffer *payload = NULL;
    if (rc == 0) {
        rc = frt_buffer_alloc(m->ctx, "capsule", tier_space(tier), payload_span(c) ? payload_span(c) : 1, &payload);
        if (rc < 0) frt_error_prefix("capsule: %s tier", frt_tier_name(tier));
    }
    if (rc == 0) rc = copy_closure(m, c, payload, 1, NULL, NULL);
    if (rc == 0 && tier == FRT_TIER_DISK) {
        rc = write_file(c, payload, path);
        frt_buffer_free(payload);
        payload = NULL;
        if (rc == 0 && !(c->path = strdup(path))) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule: out of memory");
    }
    if (rc < 0) {
        frt_buffer_free(payload);
        free(c->path);
        free(c);
        return rc;
    }
    c->payload = payload;
    c->tier = tier;
    c->info.tier = tier;
    c->info.path = c->path;
    c->serial = __atomic_add_fetch(&g_serial, 1, __ATOMIC_RELAXED);
    m->live_capsule = c->serial; /* the live state is this capsule's, byte for byte */
    *out = c;
    return 0;
}

/* ---- files ---------------------------------------------------------------- */

static uint64_t meta_checksum(const file_header *h, const file_entry *table, int n)
{
    file_header tmp = *h;
    tmp.meta_checksum = 0;
    memset(tmp.mac, 0, sizeof tmp.mac);
    XXH64_state_t *st = XXH64_createState();
    if (!st) return 0;
    XXH64_reset(st, 0);
    XXH64_update(st, &tmp, sizeof tmp);
    XXH64_update(st, table, (size_t)n * sizeof *table);
    uint64_t d = XXH64_digest(st);
    XXH64_freeState(st);
    return d;
}

static size_t meta_bytes(int n) { return align_up(sizeof(file_header) + (size_t)n * sizeof(file_entry)); }

/* HMAC-SHA256 of data under key into out[32]; 0 or -1. */
static int hmac(const unsigned char *key, size_t key_len, const void *data, size_t n, uint8_t out[32])
{
    unsigned int len = 0;
    return HMAC(EVP_sha256(), key, (int)key_len, data, n, out, &len) && len == 32 ? 0 : -1;
}

/* The metadata MAC: HMAC-SHA256 of the header (mac zeroed) and the table. */
static int meta_mac(const unsigned char *key, size_t key_len, const file_header *h, const file_entry *table, int n,
                    uint8_t out[32])
{
    size_t bytes = sizeof *h + (size_t)n * sizeof *table;
    unsigned char *buf = malloc(bytes);
    if (!buf) return -1;
    file_header tmp = *h;
    memset(tmp.mac, 0, sizeof tmp.mac);
    memcpy(buf, &tmp, sizeof tmp);
    memcpy(buf + sizeof tmp, table, (size_t)n * sizeof *table);
    int rc = hmac(key, key_len, buf, bytes, out);
    free(buf);
    return rc;
}

/* Writes header, table and payloads to path.tmp.PID, then renames it. The
 * payload buffer must be host-readable (host tier) or is staged through a
 * pinned host copy. */
static int write_file(const frt_capsule *c, const frt_buffer *payload, const char *path)
{
    const unsigned char *host = NULL;
    frt_buffer *staging = NULL;
    int rc = 0;
    if (frt_buffer_space(payload) == FRT_SPACE_DEVICE && frt_context_backend(c->ctx) != FRT_BACKEND_CPU) {
        FRT_TRY(frt_buffer_alloc(c->ctx, "capsule-staging", FRT_SPACE_PINNED_HOST, frt_buffer_size(payload), &staging));
        frt_stream *s = frt_context_stream(c->ctx);
        rc = frt_buffer_copy(staging, 0, payload, 0, frt_buffer_size(payload), s);
        if (rc == 0) rc = frt_stream_sync(s);
        if (rc < 0) {
            frt_buffer_free(staging);
            return rc;
        }
        host = frt_buffer_ptr(staging);
    } else {
        host = frt_buffer_ptr(payload);
    }

    file_header h;
    file_entry table[FRT_CAPSULE_MAX_BUFFERS];
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CAPSULE_MAGIC, 8);
    h.version = FRT_CAPSULE_FORMAT_VERSION;
    h.n_buffers = (uint32_t)c->n;
    h.position = c->info.position;
    h.pending = c->info.pending;
    h.prefill_chunk = c->info.prefill_chunk;
    h.aligned = c->info.aligned;
    h.rng[0] = c->info.rng[0];
    h.rng[1] = c->info.rng[1];
    h.prefix_digest = c->info.prefix_digest;
    h.fingerprint = c->info.fingerprint;
    h.payload_bytes = c->info.bytes;
    size_t base = meta_bytes(c->n), off = base;
    for (int i = 0; i < c->n; i++) {
        table[i] = c->table[i];
        table[i].offset = off;
        off = align_up(off + c->table[i].bytes);
    }
    /* the checksums (and MACs), one buffer per thread */
    const int keyed = c->key_len > 0;
    int mac_failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : mac_failed)
    for (int i = 0; i < c->n; i++) {
        table[i].checksum = XXH64(host + c->table[i].offset, c->table[i].bytes, 0);
        memset(table[i].mac, 0, sizeof table[i].mac);
        if (keyed) mac_failed |= hmac(c->key, c->key_len, host + c->table[i].offset, c->table[i].bytes, table[i].mac) != 0;
    }
    h.file_bytes = off;
    h.flags = keyed ? FILE_KEYED : 0;
    h.meta_checksum = meta_checksum(&h, table, c->n);
    if (keyed && (mac_failed || meta_mac(c->key, c->key_len, &h, table, c->n, h.mac) != 0)) {
        frt_buffer_free(staging);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule: computing the HMAC failed");
    }

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        frt_buffer_free(staging);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule: out of memory");
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = frt_error(FRT_ERR_IO, "capsule: cannot create %s: %s", tmp, strerror(errno));
        goto done;
    }
    /* header and table, then the payloads in parallel at their offsets; the
     * gaps between them read as zeros (the file is sized with ftruncate) */
    int err = frt_pwrite_all(fd, &h, sizeof h, 0);
    if (!err) err = frt_pwrite_all(fd, table, (uint64_t)c->n * sizeof *table, sizeof h);
    if (!err && ftruncate(fd, (off_t)off) != 0) err = errno ? errno : EIO;
    if (!err) {
        int first = 0;
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < c->n; i++) {
            int e;
#pragma omp atomic read
            e = first;
            if (e || c->table[i].bytes == 0) continue;
            e = frt_pwrite_all(fd, host + c->table[i].offset, c->table[i].bytes, table[i].offset);
            if (e) {
#pragma omp critical(frt_capsule_write_err)
                if (!first) first = e;
            }
        }
        err = first;
    }
    if (!err && fsync(fd) != 0) err = errno ? errno : EIO;
    if (close(fd) != 0 && !err) err = errno ? errno : EIO;
    if (err) {
        rc = frt_error(FRT_ERR_IO, "capsule: writing %s failed: %s", tmp, strerror(err));
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        rc = frt_error(FRT_ERR_IO, "capsule: cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
    }
done:
    free(tmp);
    frt_buffer_free(staging);
    return rc;
}

/* Reads and checks a capsule file against model m. With payload_out, the
 * whole payload is read into a new pinned-host buffer laid out like the
 * in-memory table (checksums verified); otherwise only the metadata. */
static int read_file(frt_model *m, const char *path, frt_capsule *c, frt_buffer **payload_out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return frt_error(FRT_ERR_IO, "capsule: cannot open %s: %s", path, strerror(errno));
    int rc = 0;
    file_header h;
    file_entry *table = NULL;
    frt_buffer *payload = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        rc = frt_error(FRT_ERR_IO, "capsule: cannot stat %s", path);
        goto out;
    }
    if (fread(&h, sizeof h, 1, f) != 1) {
        rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: truncated header", path);
        goto out;
    }
    if (memcmp(h.magic, CAPSULE_MAGIC, 8) != 0) {
        rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: not a capsule file (bad magic)", path);
        goto out;
    }
    if (h.version != FRT_CAPSULE_FORMAT_VERSION) {
        rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: format version %u, this build reads version %u", path,
                       h.version, FRT_CAPSULE_FORMAT_VERSION);
        goto out;
    }
    if (h.n_buffers == 0 || h.n_buffers > FRT_CAPSULE_MAX_BUFFERS) {
        rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: bad buffer count %u", path, h.n_buffers);
        goto out;
    }
    if ((uint64_t)st.st_size != h.file_bytes) {
        rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: file has %lld bytes, header says %llu (truncated?)", path,
                       (long long)st.st_size, (unsigned long long)h.file_bytes);
        goto out;
    }
    table = calloc(h.n_buffers, sizeof *table);
    if (!table) {
        rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule: out of memory");
        goto out;
    }
    if (fread(table, sizeof *table, h.n_buffers, f) != h.n_buffers) {
        rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: truncated buffer table", path);
        goto out;
    }
    if (meta_checksum(&h, table, (int)h.n_buffers) != h.meta_checksum) {
        rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: metadata checksum mismatch (corrupted)", path);
        goto out;
    }
    if (h.flags & ~FILE_KEYED || h.reserved) {
        rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: unknown flags %08x", path, h.flags);
        goto out;
    }
    if (!(h.flags & FILE_KEYED)) {
        static const uint8_t zero[32];
        if (memcmp(h.mac, zero, sizeof zero) != 0) {
            rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: a MAC in a file not flagged as keyed (corrupted)", path);
            goto out;
        }
    }
    if ((h.flags & FILE_KEYED) && !m->capsule_key_len) {
        rc = frt_error(FRT_ERR_MISMATCH, "capsule: %s: the file carries a MAC and this model has no capsule key to check it",
                       path);
        goto out;
    }
    if (!(h.flags & FILE_KEYED) && m->capsule_key_len) {
        rc = frt_error(FRT_ERR_MISMATCH, "capsule: %s: the file carries no MAC and this model requires one (capsule key set)",
                       path);
        goto out;
    }
    if (h.flags & FILE_KEYED) {
        uint8_t want[32];
        if (meta_mac(m->capsule_key, m->capsule_key_len, &h, table, (int)h.n_buffers, want) != 0) {
            rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule: computing the HMAC failed");
            goto out;
        }
        if (CRYPTO_memcmp(want, h.mac, sizeof want) != 0) {
            rc = frt_error(FRT_ERR_MISMATCH, "capsule: %s: metadata MAC mismatch (tampered, or another capsule key)",
                           path);
            goto out;
        }
    }
    if (h.fingerprint != m->fingerprint) {
        rc = frt_error(FRT_ERR_MISMATCH,
                       "capsule: %s: made by another model or build (fingerprint %016llx, this model %016llx)", path,
                       (unsigned long long)h.fingerprint, (unsigned long long)m->fingerprint);
        goto out;
    }
    frt_buffer *bufs[FRT_CAPSULE_MAX_BUFFERS];
    int n = closure(m, bufs);
    if ((int)h.n_buffers != n || h.position < 0 || h.position > m->max_seq) {
        rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: %u buffers at position %d do not fit this model", path,
                       h.n_buffers, h.position);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        file_entry *e = &table[i];
        e->name[CAPSULE_NAME_LEN - 1] = 0;
        if (strcmp(e->name, frt_buffer_name(bufs[i])) != 0 || e->full_bytes != frt_buffer_size(bufs[i]) ||
            e->bytes != valid_bytes(m, i, h.position) || e->offset % CAPSULE_ALIGN ||
            e->offset + e->bytes > h.file_bytes || e->offset < meta_bytes(n)) {
            rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: buffer %d '%s' does not match the model's state", path, i,
                           e->name);
            goto out;
        }
    }
    c->ctx = m->ctx;
    c->n = n;
    memset(&c->info, 0, sizeof c->info);
    c->info.position = h.position;
    c->info.pending = h.pending;
    c->info.prefill_chunk = h.prefill_chunk;
    c->info.aligned = h.aligned;
    c->info.rng[0] = h.rng[0];
    c->info.rng[1] = h.rng[1];
    c->info.prefix_digest = h.prefix_digest;
    c->info.fingerprint = h.fingerprint;
    c->info.n_buffers = n;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        c->table[i] = table[i];
        c->table[i].offset = off;
        c->info.bytes += table[i].bytes;
        off = align_up(off + table[i].bytes);
    }
    if (payload_out) {
        rc = frt_buffer_alloc(m->ctx, "capsule", FRT_SPACE_PINNED_HOST, off ? off : 1, &payload);
        if (rc < 0) goto out;
        unsigned char *host = frt_buffer_ptr(payload);
        const int fd = fileno(f);
        int bad = -1, why = 0; /* the first bad buffer (lowest index): 1 unreadable, 2 checksum, 3 MAC */
        const int keyed = (h.flags & FILE_KEYED) != 0;
        /* one buffer per thread: read at its offset, then its checksum (and MAC) */
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < n; i++) {
            int e = 0;
            uint8_t mac[32];
            if (table[i].bytes && frt_pread_all(fd, host + c->table[i].offset, table[i].bytes, table[i].offset))
                e = 1;
            else if (XXH64(host + c->table[i].offset, table[i].bytes, 0) != table[i].checksum)
                e = 2;
            else if (keyed && (hmac(m->capsule_key, m->capsule_key_len, host + c->table[i].offset, table[i].bytes,
                                    mac) != 0 ||
                               CRYPTO_memcmp(mac, table[i].mac, sizeof mac) != 0))
                e = 3;
            if (e) {
#pragma omp critical(frt_capsule_read_err)
                if (bad < 0 || i < bad) bad = i, why = e;
            }
        }
        if (bad >= 0) {
            rc = why == 1   ? frt_error(FRT_ERR_FORMAT, "capsule: %s: cannot read buffer '%s'", path, table[bad].name)
                 : why == 2 ? frt_error(FRT_ERR_FORMAT, "capsule: %s: checksum mismatch in buffer '%s' (corrupted)",
                                        path, table[bad].name)
                            : frt_error(FRT_ERR_MISMATCH, "capsule: %s: MAC mismatch in buffer '%s' (tampered)", path,
                                        table[bad].name);
            goto out;
        }
        int bi = boundary_index(m);
        frt_boundary br;
        if (bi < 0 || c->table[bi].bytes != sizeof br) {
            rc = frt_error(FRT_ERR_FORMAT, "capsule: %s: no boundary record", path);
            goto out;
        }
        memcpy(&br, host + c->table[bi].offset, sizeof br);
        rc = check_boundary(m, path, &br, h.position, h.pending);
        if (rc < 0) goto out;
        *payload_out = payload;
        payload = NULL;
    }
out:
    frt_buffer_free(payload);
    free(table);
    fclose(f);
    return rc;
}

int frt_capsule_load(frt_model *m, const char *path, frt_capsule **out)
{
    if (!m || !path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL argument");
    *out = NULL;
    frt_capsule *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule: out of memory");
    frt_buffer *payload = NULL;
    int rc = read_file(m, path, c, &payload); /* full check, checksums included */
    frt_buffer_free(payload);
    if (rc == 0 && !(c->path = strdup(path))) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule: out of memory");
    if (rc < 0) {
        free(c);
        return rc;
    }
    c->tier = FRT_TIER_DISK;
    c->info.tier = FRT_TIER_DISK;
    c->info.path = c->path;
    *out = c;
    return 0;
}

int frt_capsule_save(const frt_capsule *c, const char *path)
{
    if (!c || !path) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL argument");
    if (c->tier == FRT_TIER_DISK) {
        if (c->path && !strcmp(c->path, path)) return 0;
        return frt_error(FRT_ERR_UNSUPPORTED, "capsule: copying a disk capsule to another file: use cp");
    }
    return write_file(c, c->payload, path);
}

int frt_capsule_set_key(frt_model *m, const void *key, size_t key_len)
{
    if (!m || (!key && key_len)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL argument");
    if (key_len > FRT_CAPSULE_KEY_MAX)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: a key of %zu bytes (at most %d)", key_len,
                         FRT_CAPSULE_KEY_MAX);
    OPENSSL_cleanse(m->capsule_key, sizeof m->capsule_key);
    if (key_len) memcpy(m->capsule_key, key, key_len);
    m->capsule_key_len = key_len;
    return 0;
}

/* ---- restore -------------------------------------------------------------- */

int frt_capsule_restore_ex(frt_model *m, const frt_capsule *c, int flags)
{
    if (!m || !c) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL argument");
    if (c->info.fingerprint != m->fingerprint)
        return frt_error(FRT_ERR_MISMATCH,
                         "capsule: made by another model or build (fingerprint %016llx, this model %016llx)",
                         (unsigned long long)c->info.fingerprint, (unsigned long long)m->fingerprint);
    frt_buffer *bufs[FRT_CAPSULE_MAX_BUFFERS];
    int n = closure(m, bufs);
    if (n != c->n) return frt_error(FRT_ERR_MISMATCH, "capsule: %d buffers, the model has %d", c->n, n);
    frt_buffer *payload = c->payload, *owned = NULL;
    if (c->tier == FRT_TIER_DISK) {
        frt_capsule tmp;
        memset(&tmp, 0, sizeof tmp);
        FRT_TRY(read_file(m, c->path, &tmp, &owned)); /* checks everything again: the file may have changed */
        if (tmp.info.prefix_digest != c->info.prefix_digest || tmp.info.position != c->info.position) {
            frt_buffer_free(owned);
            return frt_error(FRT_ERR_MISMATCH, "capsule: %s changed since it was opened", c->path);
        }
        payload = owned;
    }
    /* Ablation (tests only): leave out the recurrent and conv state. */
    unsigned char skip[FRT_CAPSULE_MAX_BUFFERS];
    memset(skip, 0, sizeof skip);
    const int ablate = flags & (FRT_RESTORE_KV_ONLY_ZERO | FRT_RESTORE_KV_ONLY_STALE);
    if (ablate)
        for (int i = 0; i < n; i++) skip[i] = (unsigned char)m->state[i].decl.recurrent;
    /* Rollback: the rows entries (KV, journal) below the capsule's position
     * are still its bytes (see capsule.h); copy the whole entries only. */
    const int rollback = !ablate && !(flags & FRT_RESTORE_FULL) && c->tier != FRT_TIER_DISK && c->serial &&
                         m->live_capsule == c->serial;
    if (rollback)
        for (int i = 0; i < n; i++)
            if (m->state[i].decl.validity == FRT_STATE_ROWS) skip[i] = 1;
    FRT_TRY(frt_model_rows_rewritten(m));
    m->live_capsule = 0; /* until the copy has landed */
    m->logprobs_valid = 0;
    frt_restore_stats st = {0, 0, rollback, 0};
    /* A host-tier capsule's layers land beside the next append (the copy
     * engines against its compute); a device-tier one copies everything
     * first: there both are bound by the same memory (docs/model.md "The
     * pipelined restore"). */
    const int pipelined = m->layer_ready && c->tier == FRT_TIER_HOST && !ablate && !rollback;
    int rc = pipelined ? copy_closure_pipelined(m, (frt_capsule *)c, payload, skip, &st)
                       : copy_closure(m, c, payload, 0, skip, &st);
    if (rc == 0 && (flags & FRT_RESTORE_KV_ONLY_ZERO)) {
        for (int i = 0; i < n && rc == 0; i++)
            if (skip[i]) rc = frt_buffer_fill(bufs[i], 0, frt_buffer_size(bufs[i]), 0, m->stream);
        if (rc == 0) rc = frt_stream_sync(m->stream);
    }
    if (rc == 0) {
        m->last_restore = st;
        if (!ablate && c->tier != FRT_TIER_DISK) m->live_capsule = c->serial;
    }
    frt_buffer_free(owned);
    return rc;
}

int frt_capsule_restore_wait(frt_model *m)
{
    if (!m) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL model");
    return m->copy_stream ? frt_stream_sync(m->copy_stream) : 0;
}

int frt_capsule_last_restore(const frt_model *m, frt_restore_stats *out)
{
    if (!m || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL argument");
    *out = m->last_restore;
    return 0;
}

int frt_capsule_restore(frt_model *m, const frt_capsule *c) { return frt_capsule_restore_ex(m, c, 0); }

/* ---- restore and append in one call ----------------------------------------- */

/* The device-tier capsule's per-layer KV entries for the backend's
 * kv_source (k[l], v[l]: the first `pos` rows of kv.l.k / kv.l.v in the
 * payload, laid out as the live buffers) and the mask of the entries a
 * layer owns; 0 when c or m is not of that form (then restore + prefill). */
static int kv_entries(frt_model *m, const frt_capsule *c, const void **k, const void **v, unsigned char *layered)
{
    const int L = m->cfg.n_layers, pos = c->info.position;
    if (!m->entry_layer || c->n != m->n_state || L < 1 || L > FRT_CAPSULE_MAX_BUFFERS / 2) return 0;
    for (int l = 0; l < L; l++) k[l] = v[l] = NULL;
    for (int i = 0; i < m->n_state; i++) {
        const int l = m->entry_layer[i];
        layered[i] = (unsigned char)(l >= 0);
        if (l < 0) continue;
        const char *name = m->state[i].decl.name;
        const size_t nl = strlen(name);
        if (l >= L || nl < 2 || name[nl - 2] != '.' || c->table[i].bytes != valid_bytes(m, i, pos)) return 0;
        const void *p = (const char *)frt_buffer_ptr(c->payload) + c->table[i].offset;
        if (name[nl - 1] == 'k' && !k[l]) k[l] = p;
        else if (name[nl - 1] == 'v' && !v[l]) v[l] = p;
        else return 0; /* another kind of per-layer state (the hybrid's recurrent state) */
    }
    for (int l = 0; l < L; l++)
        if (!k[l] || !v[l]) return 0;
    return 1;
}

int frt_capsule_restore_prefill_ex(frt_model *m, const frt_capsule *c, int flags, const int32_t *ids, int n)
{
    if (!m || !c || (!ids && n > 0)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL argument");
    if (flags & ~FRT_RESTORE_FULL)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: restore_prefill flags %#x (0 or FRT_RESTORE_FULL)",
                         (unsigned)flags);
    if (n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: restore_prefill of %d tokens (at least 1)", n);
    if (m->arch->kind != FRT_ARCH_TOKEN)
        return frt_error(FRT_ERR_UNSUPPORTED, "capsule: restore_prefill needs a token model (prefill)");
    /* the tokens first: a bad id changes nothing */
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return frt_error(FRT_ERR_OUT_OF_RANGE, "capsule: token %d at index %d is outside the vocabulary [0, %d)",
                             ids[i], i, m->cfg.vocab_size);
    const int pos = c->info.position;
    const void *k[FRT_CAPSULE_MAX_BUFFERS], *v[FRT_CAPSULE_MAX_BUFFERS];
    unsigned char layered[FRT_CAPSULE_MAX_BUFFERS] = {0}, rest[FRT_CAPSULE_MAX_BUFFERS];
    /* The one-call form: a device-tier capsule of this model whose position
     * is a whole number of pieces, an append of one piece below C, not a
     * rollback (cheaper as it is), no pipelined restore still landing, and
     * a backend whose first piece reads the capsule's KV (kv_source). */
    int one = m->bk->kv_source && c->tier == FRT_TIER_DEVICE && c->payload &&
              c->info.fingerprint == m->fingerprint && pos > 0 && pos % m->C == 0 && n < m->C &&
              (long)pos + n <= m->max_seq && !m->restore_pending &&
              ((flags & FRT_RESTORE_FULL) || !(c->serial && m->live_capsule == c->serial)) &&
              kv_entries(m, c, k, v, layered);
    if (one) {
        const int rc = m->bk->kv_source(m, k, v, pos, frt_model_prefill_bucket(m, n));
        if (rc < 0) return rc; /* nothing changed */
        one = rc == 1;
    }
    if (!one) {
        FRT_TRY(frt_capsule_restore_ex(m, c, flags));
        return frt_model_prefill(m, ids, n);
    }
    /* the entries no layer owns (boundary, journal, logits, sampler counts) now; the layers' KV rows inside the
     * first piece's attention */
    int rc = frt_model_rows_rewritten(m);
    m->live_capsule = 0;
    m->logprobs_valid = 0;
    frt_restore_stats st = {0, 0, 0, 1};
    /* not synced: the prefill's boundary read does it */
    if (rc == 0) rc = copy_closure_ex(m, c, c->payload, 0, layered, &st, 0);
    if (rc == 0) rc = frt_model_prefill(m, ids, n);
    const int rc_clear = m->bk->kv_source(m, NULL, NULL, 0, 0);
    if (rc == 0) rc = rc_clear;
    if (rc < 0) { /* the live state as a restore leaves it (the append's outcome as a failed prefill's) */
        for (int i = 0; i < m->n_state; i++) rest[i] = (unsigned char)!layered[i];
        if (copy_closure(m, c, c->payload, 0, rest, NULL) == 0) m->live_capsule = c->serial;
        return rc;
    }
    for (int i = 0; i < m->n_state; i++)
        if (layered[i] && c->table[i].bytes) st.bytes += c->table[i].bytes, st.n_buffers++;
    m->last_restore = st;
    m->live_capsule = c->serial;
    return 0;
}

int frt_capsule_restore_prefill(frt_model *m, const frt_capsule *c, const int32_t *ids, int n)
{
    return frt_capsule_restore_prefill_ex(m, c, 0, ids, n);
}

/* ---- tiers, info, free -------------------------------------------------- */

int frt_capsule_move(frt_capsule *c, frt_tier tier, const char *path)
{
    if (!c) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL capsule");
    if (tier != FRT_TIER_DEVICE && tier != FRT_TIER_HOST && tier != FRT_TIER_DISK)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: unknown tier %d", (int)tier);
    if (tier != FRT_TIER_DISK && path)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: a path is for the disk tier only (tier %s writes no file)",
                         frt_tier_name(tier));
    if (tier == FRT_TIER_DISK && c->tier == FRT_TIER_DISK && path && c->path && strcmp(path, c->path) != 0)
        return frt_error(FRT_ERR_UNSUPPORTED, "capsule: the capsule is already on disk at %s, not at %s: copy the file "
                                              "(cp) and frt_capsule_load it",
                         c->path, path);
    if (tier == c->tier) return 0;
    if (tier == FRT_TIER_DISK) {
        if (!path || !*path) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: the disk tier needs a path");
        FRT_TRY(write_file(c, c->payload, path));
        char *p = strdup(path);
        if (!p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "capsule: out of memory");
        payload_free(c);
        c->path = p;
    } else if (c->tier == FRT_TIER_DISK) {
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "capsule: promote a disk capsule by restoring it (frt_capsule_restore reads the file)");
    } else {
        frt_buffer *nb = NULL;
        size_t span = payload_span(c) ? payload_span(c) : 1;
        FRT_TRY(frt_buffer_alloc(c->ctx, "capsule", tier_space(tier), span, &nb));
        frt_stream *s = frt_context_stream(c->ctx);
        int rc = frt_buffer_copy(nb, 0, c->payload, 0, frt_buffer_size(c->payload) < span ? frt_buffer_size(c->payload) : span, s);
        if (rc == 0) rc = frt_stream_sync(s);
        if (rc < 0) {
            frt_buffer_free(nb);
            return rc;
        }
        payload_free(c);
        c->payload = nb;
    }
    c->tier = tier;
    c->info.tier = tier;
    c->info.path = c->path;
    return 0;
}

int frt_capsule_info_get(const frt_capsule *c, frt_capsule_info *info)
{
    if (!c || !info) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL argument");
    *info = c->info;
    return 0;
}

int frt_capsule_buffer(const frt_capsule *c, int i, const char **name, size_t *bytes)
{
    if (!c) return frt_error(FRT_ERR_INVALID_ARGUMENT, "capsule: NULL capsule");
    if (i < 0 || i >= c->n) return frt_error(FRT_ERR_OUT_OF_RANGE, "capsule: buffer %d of %d", i, c->n);
    if (name) *name = c->table[i].name;
    if (bytes) *bytes = c->table[i].bytes;
    return 0;
}

void frt_capsule_free(frt_capsule *c)
{
    if (!c) return;
    payload_free(c);
    free(c->path);
    OPENSSL_cleanse(c->key, sizeof c->key);
    free(c);
}
