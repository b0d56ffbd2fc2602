#!/usr/bin/env bash
# gpu-bundle.sh BUILD_DIR OUT_DIR - a stripped, self-contained folder to run the
# tests and benchmarks of BUILD_DIR on the GPU machine (Ubuntu 24.04, CUDA 13,
# no package registry; see ../shared/H200.md). `make gpu-bundle` calls it.
#
# The bundle mirrors the build tree, so shell tests that take BUILD_DIR work:
#   frt, libfrt_internal.so   the command line and the library it and every
#                             test link (all symbols visible; the public
#                             libfrt.so / libfrt_serving.so are not shipped:
#                             nothing here links them, and the tests of the
#                             public libraries, sh_exports and sh_install,
#                             skip outside a build tree)
#   tests/test_*              every test program ctest knows about
#   tests/sh/*.sh, tests/data the shell tests and the test data
#   lib/                      shared libraries the GPU machine lacks (anything
#                             needed that is not on the PRESENT list below, e.g.
#                             libmicrohttpd, libutf8proc), found with readelf
#   tests.tsv                 the test table from `ctest --show-only=json-v1`
#   run-tests.sh              runs that table as ctest would (labels, skip code
#                             77, timeouts, arguments cpu / cuda), then prints a
#                             summary; see its header
#   frt.sh                    runs ./frt with the bundle's library path
# Binaries and libraries are stripped; the library path is set by run-tests.sh
# and frt.sh (LD_LIBRARY_PATH: lib/, the bundle, the CUDA library folders).
# Also writes OUT_DIR.tgz, the archive that travels (carry it, `tar xzf` it
# there); prints the sizes and fails when the archive is over 40 MiB (a device
# call carries at most 64 MiB with the tree).
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR OUT_DIR" >&2
    exit 2
fi
BUILD=$(cd "$1" && pwd)
OUT=$2
LIMIT=$((40 * 1024 * 1024))

for tool in jq readelf strip ctest; do
    command -v "$tool" >/dev/null || { echo "gpu-bundle: '$tool' is needed" >&2; exit 1; }
done
[ -x "$BUILD/frt" ] || { echo "gpu-bundle: $BUILD/frt not found (build first)" >&2; exit 1; }
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
[ -d "$SRC" ] || { echo "gpu-bundle: cannot find the source dir of $BUILD" >&2; exit 1; }
[ -f "$BUILD/libfrt_internal.so" ] || { echo "gpu-bundle: $BUILD/libfrt_internal.so not found (build first)" >&2; exit 1; }
if [ "$(readelf -W --dyn-syms "$BUILD/libfrt_internal.so" 2>/dev/null | grep -c frt_cuda_axpb)" = 0 ]; then
    echo "gpu-bundle: warning: $BUILD was configured without CUDA; the cuda tests will skip" >&2
fi

rm -rf "$OUT"
mkdir -p "$OUT/tests" "$OUT/lib"
OUT=$(cd "$OUT" && pwd)

# ---- binaries ---------------------------------------------------------------
cp "$BUILD/frt" "$OUT/"
cp "$BUILD/libfrt_internal.so" "$OUT/"

# ---- the test table ---------------------------------------------------------
# One line per test: name, labels (comma list), skip code, timeout, working
# directory, then the command words; @B@ is the bundle, @S@ the source tree.
json=$(cd "$BUILD" && ctest --show-only=json-v1)
missing=$(echo "$json" | jq -r '[.tests[] | select(.command == null) | .name] | join(" ")')
[ -z "$missing" ] || echo "gpu-bundle: warning: tests without a built program, left out: $missing" >&2
echo "$json" | jq -r --arg b "$BUILD" --arg s "$SRC" '
  def sub_paths: if startswith($b) then "@B@" + .[($b | length):]
                 elif startswith($s) then "@S@" + .[($s | length):]
                 elif test("(^|/)bash$") then "bash" else . end;
  .tests[] | select(.command != null) |
  ( [.properties[]? | {(.name): .value}] | add // {} ) as $p |
  [ .name,
    ((($p.LABELS // []) | join(",")) | if . == "" then "-" else . end),
    (($p.SKIP_RETURN_CODE // -1) | tostring),
    (($p.TIMEOUT // 1500) | tostring),
    (($p.WORKING_DIRECTORY // $b) | sub_paths)
  ] + ([.command[] | sub_paths]) | join("\t")' > "$OUT/tests.tsv"

# Copy what the commands name: programs under the build dir, scripts under the source dir.
cut -f6- "$OUT/tests.tsv" | tr '\t' '\n' | { grep -E '^@[BS]@/' || true; } | sort -u |
while read -r word; do
    case "$word" in
    @B@/*) rel=${word#@B@/}; from="$BUILD/$rel" ;;
    @S@/*) rel=${word#@S@/}; from="$SRC/$rel" ;;
    esac
    if [ -f "$from" ]; then
        mkdir -p "$OUT/$(dirname "$rel")"
        cp "$from" "$OUT/$rel"
    elif [ "$rel" != "" ] && [ ! -d "$from" ]; then
        echo "gpu-bundle: warning: $from (named by a test) does not exist" >&2
    fi
done
# Shell tests are run with the bundle as their build dir and the source tree
# around the bundle (or the bundle) as their source dir: rewrite @S@ paths of
# scripts to the bundle copy made above.
sed -i 's#\t@S@/tests/sh/#\t@B@/tests/sh/#g' "$OUT/tests.tsv"
# The shell tests source helper files beside them (serve_lib.bash, ...) and
# the node client test reads tests/node: copy those folders whole.
for d in tests/sh tests/node assets; do
    if [ -d "$SRC/$d" ]; then
        mkdir -p "$OUT/$d"
        cp -r "$SRC/$d/." "$OUT/$d/"
    fi
done
if [ -d "$SRC/tests/data" ]; then
    mkdir -p "$OUT/tests/data"
    cp -r "$SRC/tests/data/." "$OUT/tests/data/"
fi
printf '%s\n%s\n' "$SRC" "$BUILD" > "$OUT/origin.txt" # where the tests were built (data paths)

# ---- shared libraries the GPU machine lacks ----------------------------------
# PRESENT: libraries of Ubuntu 24.04 plus what H200.md lists on the GPU machine
# (jansson, pcre2, openblas, sqlite3, xxhash, zstd, lz4, curl, openssl, gomp,
# CUDA 13 with cuBLAS/cuBLASLt; gnutls and its dependencies come with apt/curl).
PRESENT='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libgomp|libatomic|libjansson|libpcre2-8|libopenblas|libblas|liblapack|libgfortran|libquadmath|libsqlite3|libxxhash|libzstd|liblz4|libz|libcurl|libssl|libcrypto|libgnutls|libnettle|libhogweed|libgmp|libp11-kit|libidn2|libunistring|libtasn1|libffi|libcuda|libcudart|libcublas|libcublasLt|libnvidia-[a-z-]+)\.so'
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
resolve() { # soname -> path on this machine (awk reads all of ldconfig's
    # output: exiting at the first match can kill ldconfig with SIGPIPE, which
    # pipefail and set -e turned into a silent exit 141 of this script)
    ldconfig -p | awk -v n="$1" '$1 == n && /x86-64/ && !found {print $NF; found = 1}'
}
queue=()
for f in "$OUT/frt" "$OUT/libfrt_internal.so" "$OUT"/tests/test_* "$OUT"/fuzz/replay_* ${FRT_BUNDLE_EXTRA_ELF:-}; do
    [ -f "$f" ] && ! [ -L "$f" ] && queue+=("$f")
done
declare -A seen=()
shipped=()
while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}
    queue=("${queue[@]:1}")
    for so in $(needed "$f"); do
        [ -n "${seen[$so]:-}" ] && continue
        seen[$so]=1
        [[ $so =~ $PRESENT ]] && continue
        [[ $so == libfrt*.so* ]] && continue
        path=$(resolve "$so")
        if [ -z "$path" ]; then
            echo "gpu-bundle: error: $so (needed by $(basename "$f")) not found on this machine" >&2
            exit 1
        fi
        cp -L "$path" "$OUT/lib/$so"
        shipped+=("$so")
        queue+=("$OUT/lib/$so")
    done
done

# ---- strip ------------------------------------------------------------------
for f in "$OUT/frt" "$OUT/libfrt_internal.so" "$OUT"/tests/test_* "$OUT"/fuzz/replay_* "$OUT"/lib/*; do
    if [ -f "$f" ] && ! [ -L "$f" ] && [ "$(head -c 4 "$f" | tail -c 3)" = ELF ]; then
        strip --strip-unneeded "$f"
    fi
done

# ---- the runners ------------------------------------------------------------
cat > "$OUT/frt.sh" <<'EOF'
#!/usr/bin/env bash
# frt.sh ARGS... - runs the bundled frt with the bundle's libraries.
B=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
exec "$B/frt" "$@"
EOF
cat > "$OUT/run-tests.sh" <<'EOF'
#!/usr/bin/env bash
# run-tests.sh [-L LABEL] [-R REGEX] [-E REGEX] [--logs DIR]
# Runs the bundled tests as ctest would: tests.tsv gives each test's command,
# labels, skip code (77: skipped), timeout and working directory. Prints one
# line per test (PASS / FAIL / SKIP with seconds), the output of failures, and
# a summary; exits 1 when a test failed, 0 otherwise. Full logs go to DIR
# (default: $OUT/test-logs when OUT is set, else ./test-logs in the bundle).
set -u
B=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
label="" include="" exclude="" logs=""
while [ $# -gt 0 ]; do
    case "$1" in
    -L) label=$2; shift 2 ;;
    -R) include=$2; shift 2 ;;
    -E) exclude=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    *) echo "usage: $0 [-L LABEL] [-R REGEX] [-E REGEX] [--logs DIR]" >&2; exit 2 ;;
    esac
done
[ -n "$logs" ] || logs=${OUT:+$OUT/test-logs}
[ -n "$logs" ] || logs=$B/test-logs
mkdir -p "$logs"
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
# The source tree for shell tests: the repository around the bundle if any.
S=$B
if [ -f "$B/../CMakeLists.txt" ] && [ -d "$B/../tests" ]; then S=$(cd "$B/.." && pwd); fi
# Test programs have the data path of the machine that built them compiled in
# (FRT_TEST_DATA = ORIGIN_SRC/tests/data): make it exist here if it does not.
ORIGIN_SRC=$(sed -n 1p "$B/origin.txt")
ORIGIN_BUILD=$(sed -n 2p "$B/origin.txt")
link_missing() { # link_missing PATH TARGET
    [ -e "$1" ] && return 0
    mkdir -p "$(dirname "$1")" 2>/dev/null && ln -s "$2" "$1" 2>/dev/null && return 0
    echo "run-tests: warning: $1 does not exist and cannot be created; tests reading it may fail" >&2
}
[ -d "$B/tests/data" ] && link_missing "$ORIGIN_SRC/tests/data" "$B/tests/data"
link_missing "$ORIGIN_BUILD" "$B"
export FRT_TEST_DATA_DIR=$B/tests/data FRT_BUNDLE_DIR=$B

pass=0 fail=0 skip=0 failed_names=()
while IFS=$'\t' read -r -a row; do
    name=${row[0]} labels=${row[1]} skipcode=${row[2]} tmo=${row[3]} wd=${row[4]}
    cmd=("${row[@]:5}")
    [ -n "$label" ] && [[ ",$labels," != *",$label,"* ]] && continue
    [ -n "$include" ] && ! [[ $name =~ $include ]] && continue
    [ -n "$exclude" ] && [[ $name =~ $exclude ]] && continue
    for i in "${!cmd[@]}"; do cmd[$i]=${cmd[$i]//@B@/$B}; cmd[$i]=${cmd[$i]//@S@/$S}; done
    wd=${wd//@B@/$B}; wd=${wd//@S@/$S}
    [ -d "$wd" ] || wd=$B
    log="$logs/$name.log"
    t0=$EPOCHREALTIME
    (cd "$wd" && timeout "$tmo" "${cmd[@]}") >"$log" 2>&1
    rc=$?
    dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
    if [ $rc -eq 0 ]; then
        printf 'PASS  %-40s %8s s\n' "$name" "$dt"
        pass=$((pass + 1))
    elif [ "$rc" = "$skipcode" ]; then
        printf 'SKIP  %-40s %s\n' "$name" "$(grep -m1 '^SKIP' "$log" || true)"
        skip=$((skip + 1))
    else
        printf 'FAIL  %-40s exit %d%s\n' "$name" "$rc" "$([ $rc -eq 124 ] && echo ' (timeout)')"
        tail -n 40 "$log" | sed 's/^/      | /'
        fail=$((fail + 1))
        failed_names+=("$name")
    fi
done <"$B/tests.tsv"
echo "----"
echo "tests: $pass passed, $fail failed, $skip skipped (logs: $logs)"
[ $fail -eq 0 ] || { echo "failed: ${failed_names[*]}"; exit 1; }
exit 0
EOF
chmod +x "$OUT/run-tests.sh" "$OUT/frt.sh"

# ---- size and the archive ---------------------------------------------------
# Every test program, the fuzz replays and frt link libfrt_internal.so, the
# one copy of the device code (before, the dual-backend tests linked it
# statically, ~14 MiB each, and the folder was ~67 MiB); what travels to the
# GPU machine is OUT_DIR.tgz: carry it and run `tar xzf` there.
size=$(du -sb "$OUT" | cut -f1)
n_tests=$(wc -l <"$OUT/tests.tsv")
tar cf - -C "$(dirname "$OUT")" "$(basename "$OUT")" | gzip -9 >"$OUT.tgz"
tsize=$(stat -c %s "$OUT.tgz")
printf 'gpu-bundle: %s: %s MiB (%s.tgz: %s MiB), %d tests, shipped libraries: %s\n' "$OUT" \
    "$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }')" "$OUT" \
    "$(awk -v s="$tsize" 'BEGIN { printf "%.1f", s / 1048576 }')" "$n_tests" "${shipped[*]:-none}"
if [ "$tsize" -gt "$LIMIT" ]; then
    echo "gpu-bundle: error: $OUT.tgz is over 40 MiB (a device call carries at most 64 MiB with the tree)" >&2
    du -ab "$OUT" | sort -n | tail -8 >&2
    exit 1
fi
