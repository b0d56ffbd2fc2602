/*
 * serving/engine_fake.c - a deterministic toy model behind the engine
 * interface, for the serving tests (and `frt serve --engine fake`).
 *
 * The state is a 64-bit hash folded over the token history. Prefill folds
 * each piece between absolute multiples of C (and the call's own ends) as a
 * unit tagged with its start and length; decode folds one token tagged as
 * decoded. So, exactly like the real model (include/frt/model.h):
 *   - prefill calls split at multiples of C give the same state as one call;
 *   - a prefill resumed at an unaligned boundary gives another state;
 *   - decoded tokens give another state than the same tokens prefilled.
 * The next greedy token is a function of the hash (printable ASCII, or
 * <|im_end|> about once in eos_every tokens), so any such difference shows in
 * the generated text. Capsules copy the boundary; the disk tier is a real
 * file with a checksum.
 */
#include "serving/engine.h"

#include "util/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

enum { FAKE_VOCAB = 260, TOK_EOT = 256, TOK_IM_START = 257, TOK_IM_END = 258, TOK_TH = 259 };
static const char *const k_special[3] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
static const uint64_t k_magic = 0x31454b4146545246ull; /* "FRTFAKE1" */

typedef struct fake {
    frt_engine eng;
    frt_engine_fake_params p;
    int pos, pending, has_logits;
    int32_t *reply_ids; /* p.reply tokenized */
    size_t n_reply;
    size_t replied;     /* tokens of reply_ids drawn since the last prefill */
    uint64_t h, rng[2];
    int32_t *tokens; /* [max_seq] committed ids */
} fake;

typedef struct fake_cap {
    int tier;
    char *path;      /* disk tier: the file */
    int pos, pending;
    uint64_t h, rng[2], digest;
    int32_t *tokens; /* memory tiers: [pos]; NULL on the disk tier */
    size_t bytes;
} fake_cap;

frt_engine_fake_params frt_engine_fake_default_params(void)
{
    frt_engine_fake_params p = {0};
    p.max_seq = 4096;
    p.prefill_chunk = 64;
    p.eos_every = 0;
    p.capsule_bytes_fixed = 4096;
    p.capsule_bytes_per_token = 256;
    p.delay_us = 0;
    p.chatml = 1;
    p.chat_tools = 1;
    p.model_seed = 1;
    return p;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void nap(const fake *f)
{
    if (f->p.delay_us <= 0) return;
    struct timespec ts = {f->p.delay_us / 1000000, (long)(f->p.delay_us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

static uint64_t initial_hash(const fake *f) { return mix(0xF4CEull, f->p.model_seed); }

static int32_t next_token(const fake *f, uint64_t h)
{
    uint64_t a = mix(h, 0xA11CEull);
    if (f->p.eos_every > 0 && mix(a, 7) % (uint64_t)f->p.eos_every == 0) return TOK_IM_END;
    return (int32_t)(32 + a % 95);
}

static uint64_t xorshift128p(uint64_t s[2])
{
    uint64_t a = s[0], b = s[1];
    s[0] = b;
    a ^= a << 23;
    s[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
    return s[1] + b;
}

static int32_t draw(fake *f, const frt_sampling *s)
{
    if (f->reply_ids) return f->replied < f->n_reply ? f->reply_ids[f->replied++] : TOK_IM_END;
    if (!s || s->temperature <= 0) return next_token(f, f->h);
    uint64_t r = xorshift128p(f->rng);
    return next_token(f, mix(f->h, r));
}

static int fk_prefill(void *self, const int32_t *ids, int n)
{
    fake *f = self;
    if (n < 1 || !ids) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake prefill: n = %d", n);
    if (f->pos + n > f->p.max_seq)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "fake prefill: %d + %d tokens exceed max_seq %d", f->pos, n,
                         f->p.max_seq);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= FAKE_VOCAB)
            return frt_error(FRT_ERR_OUT_OF_RANGE, "fake prefill: id %d outside the vocabulary", ids[i]);
    const int C = f->p.prefill_chunk;
    int a = f->pos, end = f->pos + n;
    while (a < end) {
        int b = (a / C + 1) * C;
        if (b > end) b = end;
        f->h = mix(f->h, 0x50000000ull ^ ((uint64_t)a << 24) ^ (uint64_t)(b - a));
        for (int i = a; i < b; i++) {
            f->h = mix(f->h, (uint64_t)ids[i - f->pos]);
            f->tokens[i] = ids[i - f->pos];
        }
        nap(f);
        a = b;
    }
    f->pos = end;
    f->pending = -1;
    f->has_logits = 1;
    f->replied = 0;
    return 0;
}

/* The fake has no logits: the fields that adjust or report them are refused
 * rather than ignored. */
static int fake_sampling_ok(const frt_sampling *s)
{
    if (s && (s->min_p != 0.0f || s->presence_penalty != 0.0f || s->frequency_penalty != 0.0f ||
              (s->repetition_penalty != 0.0f && s->repetition_penalty != 1.0f) || s->n_logit_bias || s->logprobs))
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "fake engine: no logits: min_p, penalties, logit_bias and logprobs are not supported");
    return 0;
}

static int fk_sample(void *self, const frt_sampling *s, int32_t *token)
{
    fake *f = self;
    if (!token) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake sample: NULL token");
    FRT_TRY(fake_sampling_ok(s));
    if (!f->has_logits) return frt_error(FRT_ERR_STATE, "fake sample: no logits");
    f->pending = draw(f, s);
    *token = f->pending;
    return 0;
}

static int fk_decode(void *self, const frt_sampling *s, int32_t *token)
{
    fake *f = self;
    if (!token) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake decode: NULL token");
    FRT_TRY(fake_sampling_ok(s));
    if (f->pending < 0) return frt_error(FRT_ERR_STATE, "fake decode: no pending token");
    if (f->pos >= f->p.max_seq) return frt_error(FRT_ERR_OUT_OF_RANGE, "fake decode: the state is full");
    f->h = mix(f->h, 0xD0000000ull ^ ((uint64_t)f->pos << 24));
    f->h = mix(f->h, (uint64_t)f->pending);
    f->tokens[f->pos++] = f->pending;
    f->has_logits = 1;
    nap(f);
    f->pending = draw(f, s);
    *token = f->pending;
    return 0;
}

static int fk_reset(void *self)
{
    fake *f = self;
    f->pos = 0;
    f->pending = -1;
    f->has_logits = 0;
    f->h = initial_hash(f);
    return 0;
}

static int fk_seed(void *self, uint64_t seed)
{
    fake *f = self;
    f->rng[0] = mix(seed, 1);
    f->rng[1] = mix(seed, 2) | 1;
    return 0;
}

static int fk_position(void *self) { return ((fake *)self)->pos; }
static int fk_pending(void *self) { return ((fake *)self)->pending; }

static uint64_t fk_digest(void *self, const int32_t *ids, int n, const void *salt, size_t salt_len)
{
    XXH64_state_t *st = XXH64_createState();
    if (!st) return 0;
    XXH64_reset(st, 0);
    if (salt && salt_len) XXH64_update(st, salt, salt_len);
    if (n > 0) XXH64_update(st, ids, (size_t)n * sizeof *ids);
    uint64_t d = XXH64_digest(st);
    XXH64_freeState(st);
    return d;
}

static uint64_t fingerprint(const frt_engine_fake_params *p)
{
    uint64_t v[3] = {0xFA4Eull, (uint64_t)p->prefill_chunk, p->model_seed};
    return XXH64(v, sizeof v, 0);
}

/* ---- capsule files: magic, fingerprint, pos, pending, h, rng, digest,
 * tokens[pos], then an xxh64 of everything before ------------------------- */

typedef struct file_head {
    uint64_t magic, fingerprint;
    int32_t pos, pending;
    uint64_t h, rng[2], digest;
} file_head;

static int write_file(const fake *f, const fake_cap *c, const int32_t *tokens, const char *path)
{
    size_t n = strlen(path) + 8;
    char *tmp = malloc(n);
    if (!tmp) return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake capsule: path");
    snprintf(tmp, n, "%s.tmp", path);
    file_head hd = {k_magic, f->eng.facts.fingerprint, c->pos, c->pending, c->h, {c->rng[0], c->rng[1]}, c->digest};
    XXH64_state_t *st = XXH64_createState();
    FILE *fp = fopen(tmp, "wb");
    int ok = fp && st;
    if (ok) {
        XXH64_reset(st, 0);
        XXH64_update(st, &hd, sizeof hd);
        if (c->pos) XXH64_update(st, tokens, (size_t)c->pos * sizeof *tokens);
        uint64_t sum = XXH64_digest(st);
        ok = fwrite(&hd, sizeof hd, 1, fp) == 1 && (c->pos == 0 || fwrite(tokens, sizeof *tokens, (size_t)c->pos, fp) == (size_t)c->pos) &&
             fwrite(&sum, sizeof sum, 1, fp) == 1;
    }
    if (fp && fclose(fp)) ok = 0;
    XXH64_freeState(st);
    if (!ok || rename(tmp, path)) {
        remove(tmp);
        free(tmp);
        return frt_error(FRT_ERR_IO, "fake capsule: cannot write %s", path);
    }
    free(tmp);
    return 0;
}

/* Reads and checks a capsule file; *tokens (optional) receives its ids. */
static int read_file(const fake *f, const char *path, file_head *hd, int32_t **tokens)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return frt_error(FRT_ERR_IO, "fake capsule: cannot open %s", path);
    int32_t *ids = NULL;
    uint64_t sum = 0;
    int rc = 0;
    if (fread(hd, sizeof *hd, 1, fp) != 1 || hd->magic != k_magic) {
        rc = frt_error(FRT_ERR_FORMAT, "fake capsule %s: bad magic", path);
    } else if (hd->fingerprint != f->eng.facts.fingerprint) {
        rc = frt_error(FRT_ERR_MISMATCH, "fake capsule %s: made by another model", path);
    } else if (hd->pos < 0 || hd->pos > f->p.max_seq) {
        rc = frt_error(FRT_ERR_FORMAT, "fake capsule %s: position %d out of range", path, hd->pos);
    } else {
        ids = malloc((size_t)(hd->pos ? hd->pos : 1) * sizeof *ids);
        if (!ids) {
            rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "fake capsule %s", path);
        } else if ((hd->pos && fread(ids, sizeof *ids, (size_t)hd->pos, fp) != (size_t)hd->pos) ||
                   fread(&sum, sizeof sum, 1, fp) != 1) {
            rc = frt_error(FRT_ERR_FORMAT, "fake capsule %s: truncated", path);
        } else {
            XXH64_state_t *st = XXH64_createState();
            XXH64_reset(st, 0);
            XXH64_update(st, hd, sizeof *hd);
            if (hd->pos) XXH64_update(st, ids, (size_t)hd->pos * sizeof *ids);
            if (XXH64_digest(st) != sum) rc = frt_error(FRT_ERR_FORMAT, "fake capsule %s: checksum mismatch", path);
            XXH64_freeState(st);
        }
    }
    fclose(fp);
    if (rc || !tokens) free(ids);
    else *tokens = ids;
    return rc;
}

static size_t cap_bytes(const fake *f, int pos)
{
    return f->p.capsule_bytes_fixed + f->p.capsule_bytes_per_token * (size_t)pos;
}

static void fk_capsule_free(void *self, void *cap)
{
    fake_cap *c = cap;
    if (!c) return;
    free(c->path);
    free(c->tokens);
    free(c);
}

static int fk_snapshot(void *self, int tier, const char *path, const void *salt, size_t salt_len, void **out)
{
    fake *f = self;
    if (!out || tier < 0 || tier >= FRT_ENGINE_N_TIERS || (tier == FRT_ENGINE_TIER_DISK && !path))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake snapshot: bad arguments");
    fake_cap *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake snapshot");
    c->tier = tier;
    c->pos = f->pos;
    c->pending = f->pending;
    c->h = f->h;
    c->rng[0] = f->rng[0], c->rng[1] = f->rng[1];
    c->digest = fk_digest(f, f->tokens, f->pos, salt, salt_len);
    c->bytes = cap_bytes(f, f->pos);
    if (tier == FRT_ENGINE_TIER_DISK) {
        c->path = strdup(path);
        int rc = c->path ? write_file(f, c, f->tokens, path) : frt_error(FRT_ERR_OUT_OF_MEMORY, "fake snapshot");
        if (rc) {
            fk_capsule_free(f, c);
            return rc;
        }
    } else {
        c->tokens = malloc((size_t)(f->pos ? f->pos : 1) * sizeof *c->tokens);
        if (!c->tokens) {
            fk_capsule_free(f, c);
            return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake snapshot");
        }
        memcpy(c->tokens, f->tokens, (size_t)f->pos * sizeof *c->tokens);
    }
    *out = c;
    return 0;
}

static int fk_restore(void *self, const void *cap)
{
    fake *f = self;
    const fake_cap *c = cap;
    if (!c) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake restore: NULL capsule");
    if (c->tier == FRT_ENGINE_TIER_DISK) {
        file_head hd;
        int32_t *ids = NULL;
        FRT_TRY(read_file(f, c->path, &hd, &ids));
        memcpy(f->tokens, ids, (size_t)hd.pos * sizeof *ids);
        free(ids);
        f->pos = hd.pos, f->pending = hd.pending, f->h = hd.h;
        f->rng[0] = hd.rng[0], f->rng[1] = hd.rng[1];
    } else {
        if (c->pos > f->p.max_seq) return frt_error(FRT_ERR_MISMATCH, "fake restore: capsule past max_seq");
        memcpy(f->tokens, c->tokens, (size_t)c->pos * sizeof *c->tokens);
        f->pos = c->pos, f->pending = c->pending, f->h = c->h;
        f->rng[0] = c->rng[0], f->rng[1] = c->rng[1];
    }
    f->has_logits = 0;
    return 0;
}

/* The two calls: a failed prefill leaves the restored state (the service
 * rebuilds after any failure of the one call). */
static int fk_restore_prefill(void *self, const void *cap, const int32_t *ids, int n)
{
    if (n < 1 || !ids) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake restore_prefill: n = %d", n);
    FRT_TRY(fk_restore(self, cap));
    return fk_prefill(self, ids, n);
}

static int fk_capsule_load(void *self, const char *path, void **out)
{
    fake *f = self;
    if (!path || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake load: NULL argument");
    file_head hd;
    FRT_TRY(read_file(f, path, &hd, NULL));
    fake_cap *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake load");
    }
    c->tier = FRT_ENGINE_TIER_DISK;
    c->pos = hd.pos, c->pending = hd.pending, c->h = hd.h, c->digest = hd.digest;
    c->rng[0] = hd.rng[0], c->rng[1] = hd.rng[1];
    c->bytes = cap_bytes(f, hd.pos);
    *out = c;
    return 0;
}

static int fk_capsule_save(void *self, const void *cap, const char *path)
{
    fake *f = self;
    const fake_cap *c = cap;
    if (!c || !path) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake save: NULL argument");
    if (c->tier != FRT_ENGINE_TIER_DISK) return write_file(f, c, c->tokens, path);
    file_head hd;
    int32_t *ids = NULL;
    FRT_TRY(read_file(f, c->path, &hd, &ids));
    int rc = write_file(f, c, ids, path);
    free(ids);
    return rc;
}

static int fk_capsule_move(void *self, void *cap, int tier, const char *path)
{
    fake *f = self;
    fake_cap *c = cap;
    if (!c || tier < 0 || tier >= FRT_ENGINE_N_TIERS || (tier == FRT_ENGINE_TIER_DISK && !path))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake move: bad arguments");
    if (tier == c->tier) return 0;
    if (tier == FRT_ENGINE_TIER_DISK) {
        char *p = strdup(path);
        if (!p) return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake move");
        int rc = write_file(f, c, c->tokens, path);
        if (rc) {
            free(p);
            return rc;
        }
        free(c->tokens);
        c->tokens = NULL;
        c->path = p;
    } else if (c->tier == FRT_ENGINE_TIER_DISK) {
        /* as frt_capsule_move: a disk capsule is promoted by restoring it */
        return frt_error(FRT_ERR_UNSUPPORTED, "fake move: promote a disk capsule by restoring it");
    }
    c->tier = tier;
    return 0;
}

static int fk_capsule_info(void *self, const void *cap, frt_engine_capsule_info *info)
{
    const fake_cap *c = cap;
    if (!c || !info) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake info: NULL argument");
    info->tier = c->tier;
    info->position = c->pos;
    info->pending = c->pending;
    info->bytes = c->bytes;
    info->digest = c->digest;
    return 0;
}

static int fk_tokenize(void *self, const char *text, size_t len, int32_t **ids, size_t *n)
{
    if ((!text && len) || !ids || !n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake tokenize: NULL argument");
    int32_t *out = malloc((len ? len : 1) * sizeof *out);
    if (!out) return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake tokenize");
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        int matched = 0;
        for (int s = 0; s < 3 && !matched; s++) {
            size_t ls = strlen(k_special[s]);
            if (len - i >= ls && !memcmp(text + i, k_special[s], ls)) {
                out[k++] = TOK_EOT + s;
                i += ls;
                matched = 1;
            }
        }
        if (matched) continue;
        if (len - i >= 2 && text[i] == 't' && text[i + 1] == 'h') {
            out[k++] = TOK_TH;
            i += 2;
            continue;
        }
        out[k++] = (unsigned char)text[i++];
    }
    *ids = out;
    *n = k;
    return 0;
}

static int fk_detokenize(void *self, const int32_t *ids, size_t n, char **text, size_t *len)
{
    if ((!ids && n) || !text) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake detokenize: NULL argument");
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= FAKE_VOCAB)
            return frt_error(FRT_ERR_OUT_OF_RANGE, "fake detokenize: id %d outside the vocabulary", ids[i]);
        total += ids[i] < 256 ? 1 : ids[i] == TOK_TH ? 2 : strlen(k_special[ids[i] - TOK_EOT]);
    }
    char *out = malloc(total), *p = out;
    if (!out) return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake detokenize");
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 256) {
            *p++ = (char)ids[i];
        } else if (ids[i] == TOK_TH) {
            *p++ = 't', *p++ = 'h';
        } else {
            size_t ls = strlen(k_special[ids[i] - TOK_EOT]);
            memcpy(p, k_special[ids[i] - TOK_EOT], ls);
            p += ls;
        }
    }
    *p = 0;
    *text = out;
    if (len) *len = (size_t)(p - out);
    return 0;
}

/* The fake's chat template: ChatML; with chat_tools, Qwen3's way of
 * rendering tools (a system block listing them as JSON), assistant tool
 * calls (<tool_call> JSON </tool_call>), tool results, and enable_thinking
 * (true opens <think> in the generation prompt, false closes an empty
 * block). Without tools and tool calls it renders exactly plain ChatML. */
static const char k_template_tools[] =
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n<tools>' }}{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\nCall a function as <tool_call>\\n{\"name\": <name>, \"arguments\": <object>}\\n"
    "</tool_call><|im_end|>\\n' }}{%- endif %}"
    "{%- for m in messages %}{%- if not (tools and loop.first and m.role == 'system') %}"
    "{{- '<|im_start|>' + m.role + '\\n' }}{%- if m.content %}{{- m.content }}{%- endif %}"
    "{%- if m.tool_calls %}{%- for tc in m.tool_calls %}{%- if m.content or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + tc.function.name + '\", \"arguments\": ' }}"
    "{%- if tc.function.arguments is string %}{{- tc.function.arguments }}"
    "{%- else %}{{- tc.function.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking %}{{- '<think>\\n' }}"
    "{%- elif enable_thinking is defined %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";

/* ChatML only: tools, tool calls and kwargs do not reach the text. */
static const char k_template_plain[] =
    "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' }}{%- if m.content is string %}"
    "{{- m.content }}{%- endif %}{{- '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

static int fk_chat_prompt(void *self, const frt_chat_request *req, char **text, size_t *len, int32_t **ids,
                          size_t *n)
{
    fake *f = self;
    if (!f->p.chatml) return frt_error(FRT_ERR_UNSUPPORTED, "unsupported chat template: the model has none");
    size_t l = 0;
    FRT_TRY(frt_chat_render_json(f->p.chat_tools ? k_template_tools : k_template_plain, req, NULL, text, &l));
    if (len) *len = l;
    if (!ids) return 0;
    int rc = fk_tokenize(f, *text, l, ids, n);
    if (rc) {
        free(*text);
        *text = NULL;
    }
    return rc;
}

static void fk_destroy(void *self)
{
    fake *f = self;
    if (!f) return;
    free(f->tokens);
    free(f->reply_ids);
    free(f);
}

int frt_engine_fake_create(const frt_engine_fake_params *p, frt_engine **out)
{
    frt_engine_fake_params d = frt_engine_fake_default_params();
    if (!p) p = &d;
    if (!out || p->max_seq < 1 || p->prefill_chunk < 1 || p->eos_every < 0)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "fake engine: bad parameters");
    fake *f = calloc(1, sizeof *f);
    if (!f || !(f->tokens = malloc((size_t)p->max_seq * sizeof *f->tokens))) {
        free(f);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "fake engine: %d tokens", p->max_seq);
    }
    f->p = *p;
    frt_engine *e = &f->eng;
    e->self = f;
    snprintf(e->facts.model_id, sizeof e->facts.model_id, "frt-fake");
    snprintf(e->facts.backend, sizeof e->facts.backend, "fake");
    e->facts.vocab_size = FAKE_VOCAB;
    e->facts.no_logits = 1;
    e->facts.max_seq = p->max_seq;
    e->facts.prefill_chunk = p->prefill_chunk;
    e->facts.branch_slots = 1; /* no branch entries: requests with n > 1 are refused */
    e->facts.n_eos = 2;
    e->facts.eos_ids[0] = TOK_IM_END;
    e->facts.eos_ids[1] = TOK_EOT;
    e->facts.fingerprint = fingerprint(p);
    e->prefill = fk_prefill;
    e->sample = fk_sample;
    e->decode = fk_decode;
    e->reset = fk_reset;
    e->seed = fk_seed;
    e->position = fk_position;
    e->pending = fk_pending;
    e->snapshot = fk_snapshot;
    e->restore = fk_restore;
    e->restore_prefill = fk_restore_prefill;
    e->capsule_load = fk_capsule_load;
    e->capsule_save = fk_capsule_save;
    e->capsule_move = fk_capsule_move;
    e->capsule_info = fk_capsule_info;
    e->capsule_free = fk_capsule_free;
    e->digest = fk_digest;
    e->tokenize = fk_tokenize;
    e->detokenize = fk_detokenize;
    e->chat_prompt = fk_chat_prompt;
    e->destroy = fk_destroy;
    fk_reset(f);
    fk_seed(f, 0);
    int rc = p->reply ? fk_tokenize(f, p->reply, strlen(p->reply), &f->reply_ids, &f->n_reply) : 0;
    if (rc) {
        fk_destroy(f);
        return rc;
    }
    *out = e;
    return 0;
}
