/*
 * cmd_inspect.c - frt inspect MODEL_DIR: what a checkpoint directory holds
 * (architecture, parameters, dtypes, layer pattern, context, eos ids,
 * tokenizer summary) and whether its weights match what the config implies.
 * Exit status 1 when the config or a weight file fails to load or a weight
 * is missing or mis-shaped.
 */
#include "args.h"
#include "cli.h"
#include "model/arch/pi0/pi0.h"

#include "frt/model.h"
#include "frt/status.h"
#include "frt/checkpoint.h"
#include "frt/config.h"
#include "gen_model.h"
#include "frt/fs.h"

#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_tokenizer(const char *dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    char *text;
    size_t len;
    int rc = frt_file_read_all(path, 1u << 30, &text, &len);
    if (rc == FRT_ERR_NOT_FOUND) {
        printf("tokenizer      none (no tokenizer.json)\n");
        return;
    }
    if (rc < 0) {
        printf("tokenizer      unreadable: %s\n", frt_last_error());
        return;
    }
    json_error_t err;
    json_t *root = json_loadb(text, len, 0, &err);
    free(text);
    if (!root) {
        printf("tokenizer      tokenizer.json: invalid JSON at line %d: %s\n", err.line, err.text);
        return;
    }
    json_t *model = json_object_get(root, "model");
    json_t *vocab = json_object_get(model, "vocab");
    const char *type = json_string_value(json_object_get(model, "type"));
    size_t nv = json_is_object(vocab) ? json_object_size(vocab) : json_is_array(vocab) ? json_array_size(vocab) : 0;
    json_t *added = json_object_get(root, "added_tokens");
    size_t na = json_is_array(added) ? json_array_size(added) : 0;
    printf("tokenizer      %s, vocab %zu + %zu added tokens (tokenizer.json)\n", type ? type : "unknown model",
           nv, na);
    json_decref(root);
}

/* Compares the checkpoint with the weights cfg implies. Returns the number
 * of problems (printed, the first few in full). */
static int check_weights(const frt_model_config *c, const frt_checkpoint *ck)
{
    frt_weight_spec *w;
    int n;
    if (frt_model_weight_specs(c, &w, &n) < 0) {
        printf("check          cannot list the expected weights: %s\n", frt_last_error());
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const frt_tensor *t = frt_checkpoint_find(ck, w[i].name);
        int ok = t && t->ndim == w[i].ndim && frt_dtype_is_float(t->dtype);
        for (int d = 0; ok && d < w[i].ndim; d++) ok = t->shape[d] == w[i].shape[d];
        if (ok) continue;
        if (++bad <= 8) {
            char want[64], got[64];
            int o = snprintf(want, sizeof want, "[");
            for (int d = 0; d < w[i].ndim; d++)
                o += snprintf(want + o, sizeof want - (size_t)o, "%s%lld", d ? ", " : "", (long long)w[i].shape[d]);
            snprintf(want + o, sizeof want - (size_t)o, "]");
            if (t) {
                o = snprintf(got, sizeof got, "%s [", frt_dtype_name(t->dtype));
                for (int d = 0; d < t->ndim && o < (int)sizeof got; d++)
                    o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
                if (o < (int)sizeof got) snprintf(got + o, sizeof got - (size_t)o, "]");
            }
            printf("check          %s: expected %s, %s%s\n", w[i].name, want, t ? "found " : "missing",
                   t ? got : "");
        }
    }
    if (bad > 8) printf("check          ... %d problems in all\n", bad);
    if (!bad) printf("check          all %d weights the config implies are present with the expected shapes\n", n);
    free(w);
    return bad;
}

/* 1 when DIR/NAME is a readable file. */
static int has_file(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* The checkpoint layout line: transformers' or openpi's (its variants,
 * precision, and the tensor that told Pi0 from Pi0.5). */
static void print_layout(const pi0_config *c)
{
    if (c->layout == PI0_LAYOUT_TRANSFORMERS) {
        printf("layout         transformers pi0 (config.json vlm_config / dit_config, "
               "PI0ForConditionalGeneration names)\n");
        return;
    }
    printf("layout         openpi PyTorch (convert_jax_model_to_pytorch.py): paligemma_variant %s, "
           "action_expert_variant %s, precision %s; %s by its tensor %s\n",
           c->t_variant, c->e_variant, c->precision, c->pi05 ? "Pi0.5" : "Pi0",
           c->pi05 ? "time_mlp_in.weight" : "state_proj.weight");
}

/* Prints DIR/REL/norm_stats.json when it is there. */
static void print_stats(const char *dir, const char *rel)
{
    char f[640];
    snprintf(f, sizeof f, "%s/norm_stats.json", rel);
    if (has_file(dir, f)) printf("assets         %s\n", f);
}

/* openpi's assets: DIR/assets/A/norm_stats.json and DIR/assets/A/B/
 * norm_stats.json (asset ids such as physical-intelligence/libero). */
static void print_assets(const char *dir)
{
    char path[4096], rel[300], rel2[600];
    snprintf(path, sizeof path, "%s/assets", dir);
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(rel, sizeof rel, "assets/%.255s", e->d_name);
        print_stats(dir, rel);
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        DIR *d2 = opendir(path);
        for (struct dirent *f; d2 && (f = readdir(d2));) {
            snprintf(rel2, sizeof rel2, "%s/%.255s", rel, f->d_name);
            if (f->d_name[0] != '.') print_stats(dir, rel2);
        }
        if (d2) closedir(d2);
    }
    if (d) closedir(d);
}

/* A Pi0 / Pi0.5 policy checkpoint (config.json model_type pi0 / pi05, or
 * openpi's layout): its shapes from the policy architecture's own config
 * parser, the weights' count and bytes, and the input-side files beside
 * it. 0 when the config is not a policy's (*handled 0), 1 on a failure,
 * else 0 with *handled 1. The weights are checked by name and shape when
 * the policy loads. */
static int inspect_policy(const char *dir, int *handled)
{
    char path[4096], mt[32] = "";
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = NULL;
    size_t len = 0;
    *handled = 0;
    if (frt_file_read_all(path, (size_t)1 << 24, &text, &len) < 0) return 0;
    pi0_config c;
    int rc = pi0_config_parse_json(text, len, path, 0, mt, sizeof mt, &c);
    free(text);
    if (strcmp(mt, "pi0") && strcmp(mt, "pi05") && c.layout != PI0_LAYOUT_OPENPI)
        return 0; /* not a policy: the token-model path says why */
    *handled = 1;
    if (rc < 0) return frt_cli_fail("inspect", rc);
    frt_checkpoint *ck;
    rc = frt_checkpoint_open(dir, &ck);
    if (rc == 0) rc = pi0_config_from_checkpoint(&c, ck, mt, sizeof mt, path);
    if (rc < 0) {
        if (ck) frt_checkpoint_close(ck);
        return frt_cli_fail("inspect", rc);
    }
    printf("model          %s\n", dir);
    printf("architecture   %s (model_type %s): robot policy, flow-matching vision-language-action model\n",
           c.pi05 ? "Pi0.5" : "Pi0", mt);
    printf("weights        %d tensors, %.3f GB, %llu parameters\n", frt_checkpoint_count(ck),
           (double)frt_checkpoint_bytes(ck) / 1e9, (unsigned long long)frt_checkpoint_numel(ck));
    printf("vision         SigLIP: %d layers, width %d, MLP %d, %d heads; %dx%d images, patch %d (%d tokens a "
           "camera), up to %d cameras\n",
           c.v_layers, c.v_width, c.v_inter, c.v_heads, c.image_size, c.image_size, c.patch, c.n_patch,
           c.max_cameras);
    printf("prefix         Gemma: %d layers, width %d, MLP %d, %d heads / %d KV heads x %d; vocab %d; prompt up to "
           "%d tokens\n",
           c.t.layers, c.t.width, c.t.inter, c.t.heads, c.t.kv_heads, c.t.head_dim, c.vocab, c.max_tokens);
    printf("action expert  %d layers, width %d, MLP %d%s\n", c.e.layers, c.e.width, c.e.inter,
           c.pi05 ? ", adaRMSNorm time conditioning" : ", the state token and the action-time MLP");
    printf("actions        chunk %d x %d, %d Euler steps; state up to %d values%s\n", c.chunk, c.action_dim,
           c.n_steps, c.state_dim, c.pi05 ? " (written into the prompt, discretised)" : "");
    printf("input files    tokenizer.model %s, norm_stats.json %s\n", has_file(dir, "tokenizer.model") ? "yes" : "no",
           has_file(dir, "norm_stats.json") ? "yes" : "no (the state and actions stay raw)");
    print_layout(&c);
    print_assets(dir);
    printf("runs on        architecture 'pi0', cpu backend (frt policy run; docs/policies.md)\n");
    frt_checkpoint_close(ck);
    return 0;
}

int frt_cmd_inspect(int argc, char **argv)
{
    char *pos[1];
    int n_pos = 0;
    frt_cmd_spec spec = {"inspect", "MODEL_DIR",
                         "Describes a Hugging Face checkpoint directory (config.json, *.safetensors [+ index],\n"
                         "generation_config.json, tokenizer.json) and checks its weights against the config.\n"
                         "Exits 1 when something fails to load or a weight is missing or mis-shaped.\n",
                         NULL, 0, 1, 1, NULL};
    int prc = frt_args_parse(&spec, argc, argv, pos, &n_pos);
    if (prc != FRT_ARGS_RUN) return prc == FRT_ARGS_EXIT ? 0 : 2;
    const char *dir = pos[0];
    int handled = 0, prc2 = inspect_policy(dir, &handled);
    if (handled) return prc2;
    frt_model_config c;
    int rc = frt_config_load(dir, &c);
    if (rc < 0) return frt_cli_fail("inspect", rc);
    frt_generation_config g;
    rc = frt_generation_config_load(dir, &c, &g);
    if (rc < 0) return frt_cli_fail("inspect", rc);
    frt_checkpoint *ck;
    rc = frt_checkpoint_open(dir, &ck);
    if (rc < 0) return frt_cli_fail("inspect", rc);

    printf("model          %s\n", dir);
    printf("architecture   %s (model_type %s): %s\n", c.architecture[0] ? c.architecture : "-", c.model_type,
           c.hybrid ? "hybrid Gated DeltaNet + gated full attention" : "dense full attention");

    /* Parameters and dtypes. */
    unsigned long long lm = 0;
    size_t plen = strlen(c.weight_prefix);
    unsigned long long per_dtype[FRT_DT_COUNT_] = {0};
    for (int i = 0; i < frt_checkpoint_count(ck); i++) {
        const frt_tensor *t = frt_checkpoint_at(ck, i);
        if (!strncmp(t->name, c.weight_prefix, plen) || !strcmp(t->name, "lm_head.weight"))
            lm += (unsigned long long)frt_tensor_numel(t);
        per_dtype[t->dtype]++;
    }
    int nf = frt_checkpoint_file_count(ck);
    printf("weights        %d tensor%s in %d file%s, %.3f GB; text weights under \"%s\"\n",
           frt_checkpoint_count(ck), frt_checkpoint_count(ck) == 1 ? "" : "s", nf, nf == 1 ? "" : "s",
           (double)frt_checkpoint_bytes(ck) / 1e9, c.weight_prefix);
    printf("dtypes        ");
    for (int d = 0; d < FRT_DT_COUNT_; d++)
        if (per_dtype[d]) printf(" %s x%llu", frt_dtype_name((frt_dtype)d), per_dtype[d]);
    if (c.dtype[0]) printf("  (config.json dtype %s)", c.dtype);
    printf("\n");
    printf("parameters     %llu (language model %llu)\n", (unsigned long long)frt_checkpoint_numel(ck), lm);

    char pat[2 * FRT_MAX_LAYERS + 1];
    frt_config_layer_pattern(&c, pat, sizeof pat);
    printf("layers         %d (%d linear, %d full): %s\n", c.n_layers, c.n_linear_layers, c.n_full_layers, pat);
    printf("sizes          hidden %d, intermediate %d, vocab %d\n", c.hidden_size, c.intermediate_size,
           c.vocab_size);
    printf("attention      %d query heads, %d KV heads, head_dim %d%s%s%s; RoPE on %d of %d dims, theta %g\n",
           c.n_heads, c.n_kv_heads, c.head_dim, c.attn_output_gate ? ", output gate" : "",
           c.qk_norm ? ", q/k RMSNorm" : "", c.attention_bias ? ", q/k/v bias" : "", c.rotary_dim, c.head_dim,
           (double)c.rope_theta);
    if (c.hybrid)
        printf("linear attn    %d key heads x %d, %d value heads x %d, conv kernel %d\n", c.lin_n_k_heads,
               c.lin_k_head_dim, c.lin_n_v_heads, c.lin_v_head_dim, c.lin_conv_kernel);
    printf("norms          RMSNorm eps %g, %s\n", (double)c.rms_norm_eps,
           c.norm_unit_offset ? "x * (1 + w) (zero-centred weights)" : "x * w");
    printf("lm head        %s\n", c.tie_word_embeddings ? "tied to the embedding" : "lm_head.weight");
    printf("max context    %d\n", c.max_position_embeddings);
    printf("eos ids       ");
    for (int i = 0; i < g.n_eos; i++) printf(" %d", g.eos_ids[i]);
    if (!g.n_eos) printf(" none");
    if (c.bos_token_id >= 0)
        printf("; bos %d\n", c.bos_token_id);
    else
        printf("; no bos\n");
    printf("sampling       do_sample %d, temperature %g, top_p %g, top_k %d\n", g.do_sample, (double)g.temperature,
           (double)g.top_p, g.top_k);
    const char *arch = frt_model_type_arch(c.model_type);
    if (arch)
        printf("runs on        architecture '%s' (docs/architectures.md)\n", arch);
    else
        printf("runs on        nothing yet: no architecture runs model_type '%s'; loading it is refused\n",
               c.model_type);
    print_tokenizer(dir);
    int bad = check_weights(&c, ck);
    frt_checkpoint_close(ck);
    return bad ? 1 : 0;
}
