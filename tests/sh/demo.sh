#!/usr/bin/env bash
# frt demo on the shipped demo model, cpu backend, one turn: every row of the
# table is token-exact (computed by running the cold and the capsule path),
# the JSON has the issue's keys, and bad arguments fail with a usage error.
# With FRT_DEMO_BACKEND=cuda (tests/sh/demo_gpu.sh) the same on the GPU.
# Usage: bash demo.sh BUILD_DIR SOURCE_DIR
set -u
BUILD="$1"
SRC="$2"
FRT="$BUILD/frt"
BACKEND="${FRT_DEMO_BACKEND:-cpu}"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
MODEL="$SRC/models/frt-demo"
[ -f "$MODEL/model.safetensors" ] || MODEL="$BUILD/../models/frt-demo"
[ -f "$MODEL/model.safetensors" ] || { echo "no demo model"; exit 1; }
T="$(mktemp -d /tmp/frt_demo.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}

"$FRT" demo --model "$MODEL" --assets "$SRC/assets/demo" --backend "$BACKEND" --turns 1 --json "$T/demo.json" \
    > "$T/out.txt" 2>&1
rc=$?
cat "$T/out.txt"
check "frt demo exits 0 (all rows token-exact)" test $rc -eq 0
check "table says all rows are token-exact" grep -q "token-exact: all" "$T/out.txt"
check "JSON: 6 rows (1 turn, 4 forks, 1 rollback)" test "$(jq '.rows | length' "$T/demo.json")" -eq 6
check "JSON: every row has the issue's keys" test "$(jq '[.rows[] | has("prefix_tokens", "remainder",
    "capsule_mb", "snapshot_ms", "restore_ms", "append_ms", "cold_ttft_ms", "capsule_ttft_ms", "speedup",
    "token_exact")] | all' "$T/demo.json")" = true
check "JSON: every row token_exact" test "$(jq '[.rows[].token_exact] | all' "$T/demo.json")" = true
check "JSON: prefix of several thousand tokens" test "$(jq '.rows[0].prefix_tokens' "$T/demo.json")" -gt 2000
check "JSON: positive times" test "$(jq '[.rows[] | .cold_ttft_ms > 0 and .capsule_ttft_ms > 0] | all' "$T/demo.json")" = true

"$FRT" demo --bogus >/dev/null 2>&1
check "unknown option exits 2" test $? -eq 2
"$FRT" demo --model "$T/nowhere" --assets "$SRC/assets/demo" >/dev/null 2>"$T/err"
check "missing model exits 1 with a message" bash -c "test -s '$T/err'"
exit $fail
