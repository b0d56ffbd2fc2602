/*
 * kernels/cpu/rng.h - the sampler's random numbers: SplitMix64 (Steele,
 * Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014;
 * the reference constants of Vigna's splitmix64.c).
 *
 * The whole generator state is one uint64_t, kept in the model's boundary
 * record (and so in every capsule): a restored capsule replays the same
 * sampled continuation bit for bit. static inline, and __host__ __device__
 * under nvcc, so the CUDA sampler uses the very same math.
 */
#ifndef FRT_KERNELS_RNG_H
#define FRT_KERNELS_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define FRT_RNG_FN static inline __host__ __device__
#else
#define FRT_RNG_FN static inline
#endif

/* Advances *state by one step and returns the next 64 random bits.
 * Seed by storing any value in the state (0 is fine). */
FRT_RNG_FN uint64_t frt_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A float uniform in [0, 1): the top 24 bits of frt_rng_next times 2^-24,
 * exact (never 1.0). One step of the state per call. */
FRT_RNG_FN float frt_rng_uniform(uint64_t *state)
{
    return (float)(frt_rng_next(state) >> 40) * (1.0f / 16777216.0f);
}

#endif /* FRT_KERNELS_RNG_H */
