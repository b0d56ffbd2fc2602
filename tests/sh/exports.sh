#!/usr/bin/env bash
# exports.sh BUILD_DIR SOURCE_DIR - what the public libraries export.
#
# The declared API is read by the compiler, not by a regex: a C file that
# includes the public headers is compiled with gcc -aux-info, which writes one
# prototype per function declared, with its file and line. Then, with
# nm -D --defined-only:
#   libfrt.so          exports exactly the frt_* functions that
#                      include/frt/*.h (all but serving.h) declare
#                      (frt_error among them, public in status.h), all
#                      under version FRT_0; nothing else: no frt_cuda_*,
#                      frt_cpu_*, tok_*, C++ or CUDA runtime symbol;
#   libfrt_serving.so  exports exactly what include/frt/serving.h declares;
#   both have a SONAME; libfrt.so does not need libmicrohttpd or SQLite.
# Negative control: the same comparison run on libfrt_internal.so (every
# symbol visible) must find internal symbols, so an export leak is caught.
# A public header that uses FRT_API anywhere must use it on every function
# it declares (headers not yet annotated are listed, not failed: their
# functions are exported all the same, from the declarations).
# Skipped (77) in the GPU bundle, which ships libfrt_internal.so only.
set -euo pipefail
B=$1 S=$2
if [ ! -f "$B/CMakeCache.txt" ] && [ ! -e "$B/libfrt.so" ]; then
    echo "SKIP no libfrt.so here (a GPU bundle ships libfrt_internal.so only)"
    exit 77
fi
for tool in nm readelf cc; do
    command -v "$tool" >/dev/null || { echo "FAIL: '$tool' is needed"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# ---- the declared API (gcc -aux-info) ----------------------------------------
inc=$S/include/frt
{
    for h in "$inc"/*.h; do echo "#include \"frt/$(basename "$h")\""; done
} >"$tmp/all.c"
cc -std=c11 -I"$S/include" -aux-info "$tmp/aux.txt" -fsyntax-only "$tmp/all.c" ||
    bad "the public headers do not compile together (a name declared twice?)"
# "FILE:LINE NAME" for every function declared in include/frt/.
sed -n 's#^/\* \([^:]*\):\([0-9]*\):[^*]*\*/ .*\<\(frt_[a-z0-9_]*\) (.*#\1:\2 \3#p' "$tmp/aux.txt" |
    grep "^$inc/" | sort -u >"$tmp/decl.txt" || true
grep -v "/serving\.h:" "$tmp/decl.txt" | awk '{print $2}' | sort -u >"$tmp/core.txt"
grep "/serving\.h:" "$tmp/decl.txt" | awk '{print $2}' | sort -u >"$tmp/serving.txt"
n_core=$(wc -l <"$tmp/core.txt")
n_serving=$(wc -l <"$tmp/serving.txt")
[ "$n_core" -ge 50 ] || bad "only $n_core functions found in the public headers (the -aux-info parse broke)"
[ "$n_serving" -ge 5 ] || bad "only $n_serving functions found in serving.h"

# ---- FRT_API on every declaration of an annotated header ----------------------
for h in "$inc"/*.h; do
    [ "$(basename "$h")" = export.h ] && continue
    if ! grep -q '\<FRT_API\>' "$h"; then
        echo "note: $(basename "$h") does not use FRT_API yet ($(grep -c "^$h:" "$tmp/decl.txt" || true) functions, exported from their declarations)"
        continue
    fi
    while read -r loc name; do
        line=${loc##*:}
        sed -n "${line}p" "$h" | grep -q '\<FRT_API\>' ||
            bad "$(basename "$h"):$line: $name is declared without FRT_API"
    done < <(grep "^$h:" "$tmp/decl.txt")
done

# ---- exported symbols ----------------------------------------------------------
# "NAME VERSION" per defined dynamic symbol (version node symbols, type A, left out).
exports() {
    nm -D --defined-only "$1" | awk '$2 != "A" {print $3}' |
        sed 's/@@*/ /' | awk '{print $1, ($2 == "" ? "-" : $2)}' | sort -u
}
# check LIB DECLARED_LIST ALLOWED_PRIVATE: prints the unexpected and the missing.
check() {
    local lib=$1 want=$2 priv=$3
    exports "$lib" >"$tmp/exp.txt"
    awk '{print $1}' "$tmp/exp.txt" | sort -u >"$tmp/names.txt"
    { cat "$want"; for p in $priv; do echo "$p"; done; } | sort -u >"$tmp/allowed.txt"
    comm -23 "$tmp/names.txt" "$tmp/allowed.txt" >"$tmp/extra.txt"
    comm -13 "$tmp/names.txt" "$want" >"$tmp/missing.txt"
}

lib=$B/libfrt.so
[ -e "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
# FRT_0_PRIVATE: internal entry points for frt's own libraries (CMakeLists.txt
# FRT_PRIVATE_EXPORTS), read from the generated version script.
private=$(awk '/^FRT_0_PRIVATE \{/ {p = 1; next} /^\}/ {p = 0} p && /;/ {gsub(/[ ;]/, ""); print}' "$B/libfrt.map")
check "$lib" "$tmp/core.txt" "$private"
if [ -s "$tmp/extra.txt" ]; then
    bad "libfrt.so exports $(wc -l <"$tmp/extra.txt") symbols no public header declares:"
    head -20 "$tmp/extra.txt" | sed 's/^/    /'
fi
if [ -s "$tmp/missing.txt" ]; then
    bad "libfrt.so does not export $(wc -l <"$tmp/missing.txt") declared functions:"
    head -20 "$tmp/missing.txt" | sed 's/^/    /'
fi
grep -qx "frt_error FRT_0" "$tmp/exp.txt" || bad "frt_error is not exported as frt_error@@FRT_0"
for p in $private; do
    grep -qx "$p FRT_0_PRIVATE" "$tmp/exp.txt" || bad "$p is not exported as $p@@FRT_0_PRIVATE"
done
if grep -v " FRT_0_PRIVATE$" "$tmp/exp.txt" | grep -qv " FRT_0$"; then
    bad "libfrt.so symbols outside version FRT_0: $(grep -v ' FRT_0$' "$tmp/exp.txt" | head -5 | tr '\n' ' ')"
fi
leaks=$(awk '{print $1}' "$tmp/exp.txt" | grep -cE '^(frt_cuda_|frt_cpu_|tok_|_Z|cuda|__cuda)' || true)
[ "$leaks" = 0 ] || bad "libfrt.so exports $leaks internal (frt_cuda_/frt_cpu_/tok_/C++/CUDA runtime) symbols"
n_exp=$(wc -l <"$tmp/exp.txt")

slib=$B/libfrt_serving.so
[ -e "$slib" ] || { echo "FAIL: $slib not built"; exit 1; }
check "$slib" "$tmp/serving.txt" ""
[ -s "$tmp/extra.txt" ] && bad "libfrt_serving.so exports symbols serving.h does not declare: $(head -10 "$tmp/extra.txt" | tr '\n' ' ')"
[ -s "$tmp/missing.txt" ] && bad "libfrt_serving.so does not export: $(tr '\n' ' ' <"$tmp/missing.txt")"

# ---- SONAME and dependencies ---------------------------------------------------
soname() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
[ "$(soname "$lib")" = libfrt.so.0 ] || bad "libfrt.so SONAME is '$(soname "$lib")', not libfrt.so.0"
[ "$(soname "$slib")" = libfrt_serving.so.0 ] || bad "libfrt_serving.so SONAME is '$(soname "$slib")'"
if needed "$lib" | grep -qE '^lib(microhttpd|sqlite3)\.'; then
    bad "libfrt.so needs the server's libraries: $(needed "$lib" | grep -E 'microhttpd|sqlite' | tr '\n' ' ')"
fi
needed "$slib" | grep -qx libfrt.so.0 || bad "libfrt_serving.so does not need libfrt.so.0"
needed "$slib" | grep -q '^libmicrohttpd\.' || bad "libfrt_serving.so does not need libmicrohttpd (the split is not where it should be)"

# ---- negative control: the internal library does export internals -----------
ilib=$B/libfrt_internal.so
if [ -e "$ilib" ]; then
    check "$ilib" "$tmp/core.txt" ""
    n_int=$(grep -cE '^(frt_cpu_|tok_)' "$tmp/extra.txt" || true)
    [ "$n_int" -gt 0 ] || bad "the check found no internal symbol in libfrt_internal.so either (it could not catch a leak)"
    echo "control: libfrt_internal.so exports $(wc -l <"$tmp/extra.txt") symbols outside the public API ($n_int frt_cpu_*/tok_*): the check sees them"
else
    bad "$ilib not built"
fi

[ $fail = 0 ] || exit 1
echo "ok: libfrt.so exports $n_exp symbols = $n_core declared in include/frt (serving.h aside); libfrt_serving.so exports the $n_serving of serving.h"
