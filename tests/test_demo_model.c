/*
 * test_demo_model.c - the shipped demo model (models/frt-demo) end to end
 * against transformers: models/frt-demo/sanity.json was written by
 * scripts/ref/train_demo_model.py on the GPU machine (fp32 reload of the
 * bf16 checkpoint, greedy by full recompute). For each of its prompts:
 * frt's tokenizer gives the same prompt ids, the first logits' top-5 ids
 * and values agree, and the 40 greedy tokens are identical (the top-2 margin
 * of the first step is 1.6 logits, and the cpu backend's logits error
 * against transformers is ~1e-6 on the golden models).
 */
#include "frt_test.h"

#include "frt/model.h"

#include <jansson.h>

#define DEMO_DIR FRT_SOURCE_DIR "/models/frt-demo"

static void check_prompt(frt_model *m, json_t *p, int V)
{
    const char *text = json_string_value(json_object_get(p, "text"));
    json_t *want_prompt = json_object_get(p, "prompt_ids"), *want = json_object_get(p, "greedy_ids");
    json_t *top5 = json_object_get(p, "first_top5");
    CHECK(text && json_is_array(want_prompt) && json_is_array(want) && json_is_array(top5));
    if (!text || !want || !want_prompt || !top5) return;

    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(frt_model_tokenize(m, text, strlen(text), &ids, &n));
    CHECK_MSG(n == json_array_size(want_prompt), "prompt '%.20s...': %zu ids, transformers %zu", text, n,
              json_array_size(want_prompt));
    for (size_t i = 0; i < n && i < json_array_size(want_prompt); i++)
        CHECK(ids[i] == json_integer_value(json_array_get(want_prompt, i)));

    CHECK_OK(frt_model_reset(m));
    CHECK_OK(frt_model_prefill(m, ids, (int)n));
    float *logits = malloc((size_t)V * sizeof(float));
    CHECK_OK(frt_model_logits(m, logits));
    for (size_t k = 0; k < json_array_size(top5); k++) {
        json_t *e = json_array_get(top5, k);
        int id = (int)json_integer_value(json_array_get(e, 0));
        double v = json_number_value(json_array_get(e, 1));
        CHECK_MSG(id >= 0 && id < V && fabs(logits[id] - v) < 1e-3 * (fabs(v) + 1), "top-%zu id %d: %f vs %f", k,
                  id, id >= 0 && id < V ? logits[id] : 0.0f, v);
    }
    int G = (int)json_array_size(want), same = 0;
    int32_t t = -1;
    for (int i = 0; i < G; i++) {
        CHECK_OK(i == 0 ? frt_model_sample(m, NULL, &t) : frt_model_decode(m, NULL, &t));
        if (t != json_integer_value(json_array_get(want, i))) break;
        same++;
    }
    printf("prompt '%.24s...': %zu ids, greedy %d of %d tokens equal to transformers\n", text, n, same, G);
    CHECK_MSG(same == G, "greedy diverged from transformers at step %d", same);
    free(logits);
    free(ids);
}

int main(void)
{
    json_error_t err;
    json_t *s = json_load_file(DEMO_DIR "/sanity.json", 0, &err);
    CHECK_MSG(s != NULL, "%s/sanity.json: %s", DEMO_DIR, err.text);
    if (!s) return frt_test_report();
    frt_model_params p = frt_model_default_params();
    p.max_seq = 512;
    frt_model *m = NULL;
    CHECK_OK(frt_model_load(DEMO_DIR, &p, &m));
    if (m) {
        frt_model_info info;
        frt_model_info_get(m, &info);
        CHECK(info.has_tokenizer && info.n_eos == 2);
        CHECK(frt_model_tokenizer(m) != NULL); /* the server renders chat requests with it */
        json_t *prompts = json_object_get(s, "prompts");
        CHECK(json_array_size(prompts) >= 2);
        for (size_t i = 0; i < json_array_size(prompts); i++) check_prompt(m, json_array_get(prompts, i), info.vocab_size);
        /* the ChatML prompt of sanity.json, formatted by frt from its messages */
        frt_chat_turn turns[2] = {{"system", "You are a careful Python coding assistant."},
                                  {"user", "Write a function that returns the sum of the squares of a list of numbers."}};
        char *text = NULL;
        CHECK_OK(frt_model_chat_format(m, turns, 2, 1, &text));
        const char *want = json_string_value(json_object_get(json_array_get(prompts, 1), "text"));
        CHECK_MSG(text && want && !strcmp(text, want), "chat format: '%s' vs '%s'", text ? text : "", want ? want : "");
        free(text);
        /* the template is executed: a tool message renders as its ChatML template writes it
         * (as transformers does); a message without content is refused */
        frt_chat_turn tool = {"tool", "x"};
        CHECK_OK(frt_model_chat_format(m, &tool, 1, 1, &text));
        CHECK(text && !strcmp(text, "<|im_start|>tool\nx<|im_end|>\n<|im_start|>assistant\n"));
        free(text);
        frt_chat_turn bad = {"user", NULL};
        CHECK(frt_model_chat_format(m, &bad, 1, 1, &text) < 0);
    }
    frt_model_free(m);
    json_decref(s);
    return frt_test_report();
}
