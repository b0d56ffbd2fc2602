/*
 * fuzz_prompt_set.c - libFuzzer target: frt compare's ids-file parser
 * (tools/prompt_set.c, frt_prompt_set_parse; compiled into the target with
 * tools/args.c, whose id-list parser it uses). A parse either fails with a
 * status and a line number inside the input, or yields prompts whose
 * invariants hold: at most FRT_PROMPT_SET_MAX, each at least one id, ids in
 * [0, INT32_MAX], offsets increasing; the input's prompts follow the one
 * added before it.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_prompt_set CORPUS;
 * CI replays fuzz/corpus/prompt_set/ through replay_prompt_set.
 */
#include "../tools/args.c"
#include "../tools/prompt_set.c"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frt_prompt_set s = {0};
    const int32_t first[1] = {7};
    if (frt_prompt_set_add(&s, first, 1)) abort();
    int line = -1, lines = 1;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
    int rc = frt_prompt_set_parse(&s, (const char *)data, size, &line);
    if (rc != 0 && rc != -1 && (line < 1 || line > lines)) abort();
    if (rc == 0 && line != 0) abort();
    if (s.n < 1 || s.n > FRT_PROMPT_SET_MAX || s.off[0] != 0 || s.off[1] != 1 || s.ids[0] != 7) abort();
    for (int p = 0; p < s.n; p++) {
        if (s.off[p + 1] <= s.off[p]) abort();
        for (size_t i = s.off[p]; i < s.off[p + 1]; i++)
            if (s.ids[i] < 0) abort();
    }
    frt_prompt_set_free(&s);
    if (s.n || s.ids || s.off) abort();
    return 0;
}
