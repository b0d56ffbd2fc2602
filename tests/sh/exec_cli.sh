#!/usr/bin/env bash
# exec_cli.sh BUILD_DIR SOURCE_DIR - the command-line side of the execution
# contract: `frt selfcheck` passes, `frt bench exec --backend cpu --quick`
# prints its tables and writes its JSON, and bad arguments are usage errors (2).
set -euo pipefail
B=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$("$B/frt" selfcheck)
echo "$out"
grep -q '^selfcheck: ok$' <<<"$out"
grep -q 'cpu   capture / replay       ok' <<<"$out"

"$B/frt" bench exec --backend cpu --quick --json "$tmp/bench.json" | tee "$tmp/bench.txt"
grep -q 'one graph replay' "$tmp/bench.txt"
grep -q 'device -> host (pinned)' "$tmp/bench.txt"
grep -q '"graph_wall_us"' "$tmp/bench.json"
[ "$(grep -c '"gib_per_s"' "$tmp/bench.json")" -eq 4 ]

expect_rc() { # expect_rc CODE CMD...
    local want=$1 rc=0
    shift
    "$@" >/dev/null 2>&1 || rc=$?
    if [ "$rc" -ne "$want" ]; then
        echo "FAIL: '$*' exited $rc, expected $want" >&2
        exit 1
    fi
}
expect_rc 2 "$B/frt" bench
expect_rc 2 "$B/frt" bench nonsense
expect_rc 2 "$B/frt" bench exec --backend tpu
expect_rc 2 "$B/frt" bench exec --frobnicate
expect_rc 2 "$B/frt" selfcheck --frobnicate
expect_rc 0 "$B/frt" bench --help
echo "exec_cli: ok"
