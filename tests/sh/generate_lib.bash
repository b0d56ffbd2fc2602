# generate_lib.bash - what the frt generate shell tests share (sourced; needs
# $FRT, $T and a `fail` variable): check, refuse, refuse_cmd and json_ids.
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}
refuse() { # refuse "MESSAGE" ARGS...: frt generate ARGS exits 2 with MESSAGE on stderr
    refuse_cmd generate "$@"
}
refuse_cmd() { # refuse_cmd COMMAND "MESSAGE" ARGS...: frt COMMAND ARGS exits 2 with MESSAGE on stderr
    local cmd="$1" want="$2"; shift 2
    "$FRT" "$cmd" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$want" "$T/err"; then
        echo "ok   $cmd $* -> 2: $want"
    else
        echo "FAIL $cmd $*: status $rc (want 2), stderr: $(cat "$T/err") (want: $want)"
        fail=1
    fi
}
# ids of a --json line's array: json_ids KEY < line -> "1 2 3"
json_ids() { python3 -c 'import json,sys; print(" ".join(str(i) for i in json.load(sys.stdin)[sys.argv[1]]))' "$1"; }
