# generate_lib.bash - what the frt generate shell tests share (sourced; needs
# $FRT, $T and a `fail` variable): check, refuse and json_ids.
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}
refuse() { # refuse "MESSAGE" ARGS...: frt generate ARGS exits 2 with MESSAGE on stderr
    local want="$1"; shift
    "$FRT" generate "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$want" "$T/err"; then
        echo "ok   generate $* -> 2: $want"
    else
        echo "FAIL generate $*: status $rc (want 2), stderr: $(cat "$T/err") (want: $want)"
        fail=1
    fi
}
# ids of a --json line's array: json_ids KEY < line -> "1 2 3"
json_ids() { python3 -c 'import json,sys; print(" ".join(str(i) for i in json.load(sys.stdin)[sys.argv[1]]))' "$1"; }
