#!/usr/bin/env bash
# serve_capsule_key.sh BUILD_DIR SOURCE_DIR - frt serve --capsule-key-file:
# a key file outside 16..1024 bytes or missing is refused with exit 2 and a
# message naming the flag; the fake engine (no capsule files) refuses a key
# with exit 1; the model engine loads with a key (--probe). The MAC itself
# (keyed files, refusals) is tested in test_capsule.
set -u
B="$1"
SRC="$2"
FRT="$B/frt"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_serve_key.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
expect() { # expect STATUS "MESSAGE" ARGS...
    local want_rc="$1" want="$2"; shift 2
    "$FRT" serve "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq "$want_rc" ] && grep -qF -- "$want" "$T/err" "$T/out"; then
        echo "ok   serve $* -> $rc: $want"
    else
        echo "FAIL serve $*: status $rc (want $want_rc), output: $(cat "$T/err" "$T/out") (want: $want)"
        fail=1
    fi
}
printf 'short\n' >"$T/short"
head -c 2000 /dev/zero | tr '\0' k >"$T/long"
printf '0123456789abcdef0123456789abcdef\n' >"$T/good"
expect 2 "--capsule-key-file: '$T/short' holds 5 bytes" --engine fake --capsule-key-file "$T/short" --probe
expect 2 "holds 1025 bytes" --engine fake --capsule-key-file "$T/long" --probe
expect 2 "--capsule-key-file: cannot open" --engine fake --capsule-key-file "$T/none" --probe
expect 1 "writes no capsule files to key" --engine fake --capsule-key-file "$T/good" --probe
expect 0 "engine ready (model)" -m "$SRC/models/frt-demo" --backend cpu --threads 1 --capsule-key-file "$T/good" --probe
exit $fail
