/*
 * test_kernel_embedding.c - frt_cpu_embedding (f32 table, exact copies) and
 * frt_cpu_embedding_bf16 (bf16 -> f32 is the 16 bits shifted up: exact):
 * first and last rows, repeated ids, known bf16 values.
 */
#include "frt_test.h"
#include "kernels/cpu/kernels_cpu.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_f32(void)
{
    enum { V = 50, D = 24, T = 7 };
    static float table[V * D], out[T * D];
    int32_t ids[T] = {0, 49, 7, 7, 13, 0, 48};
    frt_test_fill(table, V * D, -1, 1);
    frt_cpu_embedding(out, table, ids, T, D);
    int ok = 1;
    for (int t = 0; t < T; t++) ok &= memcmp(out + t * D, table + ids[t] * D, D * 4) == 0;
    CHECK(ok);
}

static void test_bf16(void)
{
    enum { V = 40, D = 10, T = 5 };
    static uint16_t table[V * D];
    static float out[T * D];
    int32_t ids[T] = {39, 0, 3, 3, 21};
    for (int i = 0; i < V * D; i++) table[i] = (uint16_t)(frt_test_u64() >> 48);
    /* known values in row 3 */
    table[3 * D + 0] = 0x3F80; /* 1.0 */
    table[3 * D + 1] = 0xC040; /* -3.0 */
    table[3 * D + 2] = 0x3EAA; /* 0.33203125 */
    table[3 * D + 3] = 0x0000;
    table[3 * D + 4] = 0x8000; /* -0.0 */
    frt_cpu_embedding_bf16(out, table, ids, T, D);
    int ok = 1;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++)
            ok &= bits_of(out[t * D + i]) == (uint32_t)table[ids[t] * D + i] << 16;
    CHECK(ok);
    CHECK(out[2 * D + 0] == 1.0f && out[2 * D + 1] == -3.0f && out[2 * D + 2] == 0.33203125f);
    CHECK(bits_of(out[2 * D + 3]) == 0 && bits_of(out[2 * D + 4]) == 0x80000000u);
}

int main(void)
{
    frt_test_seed(91);
    test_f32();
    test_bf16();
    frt_cpu_embedding(NULL, NULL, NULL, 0, 8);
    frt_cpu_embedding_bf16(NULL, NULL, NULL, 0, 8);
    CHECK(1);
    return frt_test_report();
}
