/* tools/bench_model.h - frt bench -m DIR | --shape NAME --random-weights:
 * the model benchmark (TTFT cold and from a capsule, capsule tiers, decode,
 * the prefill-chunk sweep), each figure next to its floor. See
 * bench_model.c and docs/PERF.md. */
#ifndef FRT_TOOLS_BENCH_MODEL_H
#define FRT_TOOLS_BENCH_MODEL_H

/* argv[0] is "bench"; the options follow. Returns 0, 1 (failure, message
 * printed) or 2 (usage error). */
int frt_bench_model(int argc, char **argv);

/* frt bench cartridge (bench_cartridge.c): argv[0] is "cartridge". Same
 * return codes. */
int frt_bench_cartridge(int argc, char **argv);

#endif
