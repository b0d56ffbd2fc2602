#!/usr/bin/env bash
# frt bench --shape tiny --random-weights (the model benchmark, issue 9) on
# the cpu backend: exits 0, prints the table, and the JSON holds every
# figure with positive numbers (cold TTFT, capsule snapshot / restore /
# append / TTFT, host and disk tiers, decode, floors, memory, the chunk
# sweep); --dump-ids / --write-config / --no-run write their files; bad
# arguments exit 2 with a message. No timed assertions.
# Usage: bash bench_model.sh BUILD_DIR SOURCE_DIR
set -u
BUILD="$1"
SRC="$2"
FRT="$BUILD/frt"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_bench_model.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}
# jq-free JSON checks through python3 when present, else grep.
jcheck() { # jcheck DESCRIPTION FILE PYTHON-EXPRESSION-ON-j
    local d="$1" f="$2" e="$3"
    if command -v python3 >/dev/null; then
        check "$d" python3 -c "import json,sys; j=json.load(open('$f')); sys.exit(0 if ($e) else 1)"
    else
        echo "skip $d (no python3)"
    fi
}

out="$("$FRT" bench --shape tiny --random-weights --backend cpu --prefixes 256 --chunk 64 --repeats 2 \
    --decode-tokens 4 --threads 2 --tmpdir "$T" --json "$T/b.json" 2>"$T/err")"
rc=$?
check "bench tiny exits 0" test $rc -eq 0
[ $rc -eq 0 ] || cat "$T/err"
check "table printed" grep -q "cold p50" <<<"$out"
check "floors printed" grep -q "^floors: d2d" <<<"$out"
check "progress on stderr" grep -q "cold TTFT" "$T/err"
check "json written" test -s "$T/b.json"
J="$T/b.json"
jcheck "json: floors positive" "$J" "all(j['floors'][k] > 0 for k in ('d2d_copy_GBps_read_plus_write','h2d_pinned_GBps','d2h_pinned_GBps','gemm_TFLOPs'))"
jcheck "json: one prefix of 256" "$J" "len(j['prefixes']) == 1 and j['prefixes'][0]['prefix'] == 256 and j['prefixes'][0]['suffix'] == 64"
jcheck "json: cold TTFT p50 <= p90 <= p99, 2 samples" "$J" "(lambda c: 0 < c['p50'] <= c['p90'] <= c['p99'] and c['n'] == 2 and c['floor_ms'] > 0 and c['flops'] > 0)(j['prefixes'][0]['cold_ttft'])"
jcheck "json: capsule figures positive" "$J" "(lambda c: c['bytes'] > 0 and c['snapshot_device']['measured_ms'] > 0 and c['snapshot_device']['floor_ms'] > 0 and all(c[k]['p50'] > 0 and c[k]['floor_ms'] > 0 for k in ('restore_device','append','ttft')))(j['prefixes'][0]['capsule'])"
jcheck "json: host and disk tiers" "$J" "all(min(j['prefixes'][0]['capsule'][t]['snapshot_ms'] + j['prefixes'][0]['capsule'][t]['restore_ms']) > 0 for t in ('host','disk'))"
jcheck "json: decode" "$J" "(lambda d: d['n'] == 4 and d['p50'] > 0 and d['tokens_per_s'] > 0 and d['bytes_read_per_token'] > 0 and d['floor_ms'] > 0 and d['context'] == 320)(j['prefixes'][0]['decode'])"
jcheck "json: sampling costs (penalties, half mask once and per step) next to plain" "$J" "all(j['prefixes'][0][k]['n'] == 4 and j['prefixes'][0][k]['p50'] > 0 and j['prefixes'][0][k]['plain_ms_p50'] > 0 and 'overhead_fraction' in j['prefixes'][0][k] for k in ('decode_penalties', 'decode_mask', 'decode_mask_per_step'))"
check "sampling costs on stderr" grep -q "token mask allowing half the vocabulary, set once: .* ms/token, plain" "$T/err"
jcheck "json: model info and memory" "$J" "j['model_info']['weight_bytes'] > 0 and j['model_info']['state_bytes'] > 0 and j['model_info']['prefill_chunk'] == 64 and j['memory']['peak_used_bytes'] > 0"
jcheck "json: prefill group 1 on cpu (no groups there)" "$J" "j['model_info']['prefill_group'] == 1"
check "the prefill group in effect on stderr" grep -q "prefill groups of up to 1 pieces" "$T/err"
jcheck "json: nothing skipped, no error" "$J" "j['skipped'] == [] and 'error' not in j"
check "no capsule file left in tmpdir" bash -c "! ls '$T'/*.cap >/dev/null 2>&1"

# --no-sampling-costs: plain decode only
"$FRT" bench --shape tiny --random-weights --backend cpu --prefixes 128 --chunk 64 --repeats 1 --decode-tokens 2 \
    --no-tiers --no-sampling-costs --threads 2 --json "$T/n.json" >/dev/null 2>&1
check "--no-sampling-costs exits 0" test $? -eq 0
jcheck "json: --no-sampling-costs: decode, no sampling costs" "$T/n.json" "'decode' in j['prefixes'][0] and not any(k in j['prefixes'][0] for k in ('decode_penalties', 'decode_mask', 'decode_mask_per_step'))"

# the chunk sweep alone (no --prefixes: only the sweep runs)
out="$("$FRT" bench --shape tiny --random-weights --backend cpu --chunks 64,128 --sweep-prefixes 200 \
    --repeats 1 --threads 2 --json "$T/s.json" 2>/dev/null)"
check "sweep exits 0" test $? -eq 0
check "sweep table printed" grep -q "remainder" <<<"$out"
jcheck "json: sweep rows (prefix rounded down to C)" "$T/s.json" "[(e['C'], e['prefix'], e['unaligned_prefix'], e['aligned_len']) for e in j['chunk_sweep']] == [(64, 192, 224, 192), (128, 128, 192, 128)]"
jcheck "json: sweep figures positive" "$T/s.json" "all(e['cold_ttft_p50_ms'] > 0 and e['capsule_ttft_aligned']['p50'] > 0 and e['capsule_ttft_unaligned']['p50'] > 0 for e in j['chunk_sweep']) and 'prefixes' not in j"

# a prefix that does not fit the state fails, is recorded, and the run goes on
"$FRT" bench --shape tiny --random-weights --backend cpu --prefixes 128,512 --chunk 64 --max-seq 256 --repeats 1 \
    --decode-tokens 2 --no-tiers --threads 2 --json "$T/e.json" >/dev/null 2>"$T/e.err"
check "a failed prefix exits 1" test $? -eq 1
check "the failure is on stderr" grep -q "FAILED prefix" "$T/e.err"
jcheck "json: the prefix that fits has figures, the other its error" "$T/e.json" "j['prefixes'][0]['cold_ttft']['p50'] > 0 and 'error' not in j['prefixes'][0] and 'max_seq' in j['prefixes'][1]['error'] and 'error' in j"

# --dump-ids / --write-config / --no-run
"$FRT" bench --shape tiny --random-weights --prefixes 128 --chunk 64 --suffix 8 --decode-tokens 2 \
    --dump-ids "$T/ids.json" --write-config "$T/cfg" --no-run >/dev/null 2>&1
check "--no-run exits 0" test $? -eq 0
check "config.json written" test -s "$T/cfg/config.json"
jcheck "ids: 128 + 8 + 2 + 1 ids in the vocabulary, not all equal" "$T/ids.json" "j['n'] == len(j['ids']) == 139 and all(0 <= i < 2048 for i in j['ids']) and len(set(j['ids'])) > 50 and j['vocab_size'] == 2048"
"$FRT" bench --shape tiny --random-weights --prefixes 128 --chunk 64 --suffix 8 --decode-tokens 2 \
    --dump-ids "$T/ids2.json" --no-run >/dev/null 2>&1
check "same seed: same ids" cmp -s "$T/ids.json" "$T/ids2.json"
"$FRT" bench --shape tiny --random-weights --prefixes 128 --chunk 64 --suffix 8 --decode-tokens 2 --seed 2 \
    --dump-ids "$T/ids3.json" --no-run >/dev/null 2>&1
check "other seed: other ids" bash -c "! cmp -s '$T/ids.json' '$T/ids3.json'"

# bad arguments: exit 2 with a message
bad() { # bad DESCRIPTION ARGS...
    local d="$1"; shift
    "$FRT" bench "$@" >/dev/null 2>"$T/bad.err"
    local r=$?
    check "$d exits 2" test $r -eq 2
    check "$d says why" grep -q "frt bench:" "$T/bad.err"
}
bad "no model" --prefixes 256
bad "both -m and --shape" -m /nonexistent --shape tiny --random-weights
bad "--shape without --random-weights" --shape tiny
bad "chunk not a multiple of 64" --shape tiny --random-weights --chunk 100
bad "bad chunk list" --shape tiny --random-weights --chunks 64,x
bad "bad prefixes" --shape tiny --random-weights --prefixes 0
bad "repeats 0" --shape tiny --random-weights --repeats 0
bad "unknown backend" --shape tiny --random-weights --backend tpu
bad "unknown option" --shape tiny --random-weights --frobnicate
bad "missing value" --shape tiny --random-weights --json
bad "max-seq 0" --shape tiny --random-weights --max-seq 0
bad "prefill-group not a power of two" --shape tiny --random-weights --prefill-group 3
bad "prefill-group above 64" --shape tiny --random-weights --prefill-group 128
bad "autotune above 64" --shape tiny --random-weights --autotune 65
bad "tune-file without autotune" --shape tiny --random-weights --tune-file "$T/tune.txt"
# options that would have no effect are refused
bad "-m with --random-weights" -m "$SRC/models/frt-demo" --random-weights
bad "--sweep-prefixes without --chunks" --shape tiny --random-weights --sweep-prefixes 256
bad "--sweep-repeats without --chunks" --shape tiny --random-weights --sweep-repeats 2
for o in "--chunk 64" "--max-seq 512" "--decode-tokens 4" --no-tiers --no-sampling-costs; do
    # shellcheck disable=SC2086
    bad "$o with --chunks alone (only the sweep runs)" --shape tiny --random-weights --chunks 64 $o
    check "$o with --chunks alone: named" grep -q -- "${o%% *} only sets the main run" "$T/bad.err"
done
"$FRT" bench --shape tiny --random-weights --backend cpu --autotune 4 --prefixes 128 --chunk 64 >/dev/null \
    2>"$T/bad.err"
check "autotune on cpu: the load refused, the run fails" test $? -eq 1
check "autotune on cpu: the reason" grep -q "gemm_autotune" "$T/bad.err"
"$FRT" bench --shape tiny --random-weights --backend cpu --prefill-group 2 --prefixes 128 --chunk 64 >/dev/null \
    2>"$T/bad.err"
check "prefill-group 2 on cpu: the load refused, the run fails" test $? -eq 1
check "prefill-group 2 on cpu: the reason" grep -q "runs every prefill piece on its own" "$T/bad.err"
"$FRT" bench --shape nosuch --random-weights --backend cpu >/dev/null 2>"$T/bad.err"
check "unknown shape exits 1" test $? -eq 1
check "unknown shape names the shapes" grep -q "qwen3.5-9b" "$T/bad.err"
"$FRT" bench -m "$T/nothing-here" --backend cpu >/dev/null 2>"$T/bad.err"
check "missing model dir exits 1" test $? -eq 1

# the Python helpers parse (no torch needed for --help of compare)
if command -v python3 >/dev/null; then
    check "bench/compare runs on the frt JSON alone" python3 "$SRC/bench/compare" "$J" --frt-only
    check "hf_baseline.py parses" python3 -c "import ast,sys; ast.parse(open(sys.argv[1]).read())" "$SRC/bench/hf_baseline.py"
fi
exit $fail
