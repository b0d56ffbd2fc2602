#!/usr/bin/env bash
# install.sh BUILD_DIR SOURCE_DIR - `cmake --install` into a temporary prefix,
# then build and run programs against the installed frt, as a user would:
#   1. the layout: bin/frt (`frt --version` runs with its private library
#      found through its RUNPATH), lib/libfrt.so
#      (+ SONAME link), libfrt.a, libfrt_serving.so/.a, include/frt/*.h,
#      lib/pkgconfig/frt.pc, lib/cmake/frt/frtConfig.cmake,
#      share/frt/models/frt-demo and share/frt/assets/demo;
#   2. hello.c built with `pkg-config --cflags --libs frt`
#      (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig) and run: it prints frt_version() and
#      frt_status_str(-1), round-trips bytes through a buffer of a CPU exec
#      context, and reads the default model params; it must not need
#      libmicrohttpd, SQLite or libfrt_serving;
#   3. the same file linked statically (libfrt.a + `pkg-config --static`);
#   4. a CMake project with find_package(frt 0.1 REQUIRED), -DCMAKE_BUILD_TYPE=Release,
#      building hello.c against frt::frt and serve.c against frt::frt_serving
#      (prints the server's default port), both run.
# The prefix is removed afterwards. Skipped (77) where BUILD_DIR is not a CMake
# build tree (the GPU bundle).
set -euo pipefail
B=$1 S=$2
if [ ! -f "$B/cmake_install.cmake" ]; then
    echo "SKIP $B is not a CMake build tree (no cmake_install.cmake)"
    exit 77
fi
for tool in cmake pkg-config cc; do
    command -v "$tool" >/dev/null || { echo "FAIL: '$tool' is needed"; exit 1; }
done
# A sanitized build (make asan) installs instrumented libraries: the programs
# built against them need the sanitizer runtime first.
san=""
if grep -q '^FRT_SANITIZE:BOOL=ON' "$B/CMakeCache.txt" 2>/dev/null; then
    san="-fsanitize=address,undefined"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
P=$tmp/prefix
fail=0
bad() { echo "FAIL: $*"; fail=1; }

cmake --install "$B" --prefix "$P" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; echo "FAIL: cmake --install"; exit 1; }
pc=$(find "$P" -name frt.pc -path '*/pkgconfig/*' | head -1)
[ -n "$pc" ] || { echo "FAIL: no frt.pc installed"; find "$P" -maxdepth 3; exit 1; }
libdir=$(dirname "$(dirname "$pc")")

# ---- 1. layout ---------------------------------------------------------------
for f in bin/frt include/frt/exec.h include/frt/status.h include/frt/model.h include/frt/capsule.h \
    include/frt/serving.h include/frt/export.h share/frt/models/frt-demo/config.json \
    share/frt/models/frt-demo/model.safetensors share/frt/models/frt-demo/tokenizer.json \
    share/frt/assets/demo/system.txt; do
    [ -e "$P/$f" ] || bad "$f not installed"
done
for f in libfrt.so libfrt.so.0 libfrt.a libfrt_serving.so libfrt_serving.so.0 libfrt_serving.a \
    pkgconfig/frt_serving.pc cmake/frt/frtConfig.cmake cmake/frt/frtConfigVersion.cmake \
    frt/libfrt_internal.so; do
    [ -e "$libdir/$f" ] || bad "${libdir#"$P"/}/$f not installed"
done
[ -x "$P/bin/frt" ] || bad "bin/frt is not executable"
# The installed command finds libfrt_internal.so through its RUNPATH, with no
# LD_LIBRARY_PATH and with the build tree out of the way.
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$B/CMakeCache.txt")
out=$(env -u LD_LIBRARY_PATH "$P/bin/frt" --version 2>&1) || true
[ "$out" = "frt $version" ] || bad "installed bin/frt --version printed '$out', not 'frt $version'"
if env -u LD_LIBRARY_PATH ldd "$P/bin/frt" | grep -q "not found"; then
    bad "bin/frt has unresolved libraries: $(env -u LD_LIBRARY_PATH ldd "$P/bin/frt" | grep 'not found' | tr '\n' ' ')"
fi
if env -u LD_LIBRARY_PATH ldd "$P/bin/frt" | grep -F "$B/" >/dev/null; then
    bad "bin/frt loads libraries from the build tree"
fi
[ $fail = 0 ] || exit 1

# ---- the programs ------------------------------------------------------------
mkdir -p "$tmp/proj"
cat >"$tmp/proj/hello.c" <<'EOF'
/* Links against an installed frt: status strings, a CPU context, a buffer. */
#include <frt/exec.h>
#include <frt/model.h>
#include <frt/status.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    printf("frt %s: %s\n", frt_version(), frt_status_str(-1));
    frt_context *ctx = NULL;
    frt_buffer *buf = NULL;
    int rc = frt_context_create(FRT_BACKEND_CPU, 0, &ctx);
    if (rc == 0) rc = frt_buffer_alloc(ctx, "hello", FRT_SPACE_HOST, 16, &buf);
    const char msg[16] = "frt installed";
    char back[16] = {0};
    frt_stream *st = ctx ? frt_context_stream(ctx) : NULL;
    if (rc == 0) rc = frt_buffer_write(buf, 0, msg, sizeof msg, st);
    if (rc == 0) rc = frt_buffer_read(buf, 0, back, sizeof back, st);
    if (rc == 0) rc = frt_stream_sync(st);
    if (rc != 0) {
        fprintf(stderr, "hello: %s: %s\n", frt_status_name(rc), frt_last_error());
        return 1;
    }
    frt_model_params mp = frt_model_default_params();
    (void)mp;
    printf("%s (%s buffer of %zu bytes)\n", back, frt_backend_name(frt_context_backend(ctx)),
           frt_buffer_size(buf));
    frt_buffer_free(buf);
    frt_context_destroy(ctx);
    /* A bad argument fails cleanly and says why. */
    if (frt_context_create(FRT_BACKEND_CPU, 0, NULL) >= 0) return 1;
    return strcmp(back, msg) != 0;
}
EOF
cat >"$tmp/proj/serve.c" <<'EOF'
/* Links against the installed serving library. */
#include <frt/serving.h>

#include <stdio.h>

int main(void)
{
    frt_server_params p = frt_server_default_params();
    printf("default port %d\n", p.port);
    return p.port > 0 ? 0 : 1;
}
EOF
want="frt $version: invalid argument
frt installed (cpu buffer of 16 bytes)"
check_run() { # check_run NAME PROGRAM EXPECTED
    local out
    if ! out=$("$2" 2>&1); then
        bad "$1: the program failed: $out"
    elif [ "$out" != "$3" ]; then
        bad "$1: printed '$out', not '$3'"
    else
        echo "ok: $1: $(echo "$out" | tr '\n' '|')"
    fi
}
needs() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '; }

# ---- 2. pkg-config, shared ---------------------------------------------------
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs frt) || { echo "FAIL: pkg-config --cflags --libs frt"; exit 1; }
cc -std=c11 -O2 -Wall -Werror $san "$tmp/proj/hello.c" -o "$tmp/hello_pc" $flags
[ "$(pkg-config --modversion frt)" = "$version" ] ||
    bad "pkg-config --modversion frt is $(pkg-config --modversion frt)"
[ -f "$(pkg-config --variable=datadir frt)/models/frt-demo/config.json" ] ||
    bad "pkg-config --variable=datadir frt ($(pkg-config --variable=datadir frt)) has no models/frt-demo"
LD_LIBRARY_PATH=$libdir check_run "pkg-config" "$tmp/hello_pc" "$want"
n=$(needs "$tmp/hello_pc")
case "$n" in
*microhttpd* | *sqlite* | *frt_serving* | *frt_internal*) bad "a model-only program needs: $n" ;;
esac
case "$n" in *libfrt.so.0*) ;; *) bad "hello (pkg-config) does not need libfrt.so.0: $n" ;; esac

# ---- 3. pkg-config --static, libfrt.a ----------------------------------------
sflags=$(pkg-config --static --cflags --libs frt | sed "s#-lfrt\\b#$libdir/libfrt.a#")
cc -std=c11 -O2 $san "$tmp/proj/hello.c" -o "$tmp/hello_static" $sflags
check_run "pkg-config --static (libfrt.a)" "$tmp/hello_static" "$want"
case "$(needs "$tmp/hello_static")" in *libfrt*) bad "the static program needs a libfrt .so" ;; esac

# ---- 4. CMake find_package ---------------------------------------------------
cat >"$tmp/proj/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(frt_install_check LANGUAGES C)
find_package(frt 0.1 REQUIRED)
add_executable(hello hello.c)
target_link_libraries(hello PRIVATE frt::frt)
add_executable(serve serve.c)
target_link_libraries(serve PRIVATE frt::frt_serving)
if(NOT EXISTS "${frt_DATA_DIR}/models/frt-demo/config.json")
  message(FATAL_ERROR "frt_DATA_DIR (${frt_DATA_DIR}) has no models/frt-demo")
endif()
EOF
if ! cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$P" \
    ${san:+"-DCMAKE_C_FLAGS=$san"} >"$tmp/cmake.log" 2>&1 ||
    ! cmake --build "$tmp/proj/build" >>"$tmp/cmake.log" 2>&1; then
    cat "$tmp/cmake.log"
    echo "FAIL: the find_package(frt) project does not build"
    exit 1
fi
check_run "find_package frt::frt" "$tmp/proj/build/hello" "$want"
check_run "find_package frt::frt_serving" "$tmp/proj/build/serve" "default port 8000"
case "$(needs "$tmp/proj/build/hello")" in *microhttpd* | *sqlite* | *frt_serving*)
    bad "hello (frt::frt) needs the server's libraries: $(needs "$tmp/proj/build/hello")" ;;
esac

[ $fail = 0 ] || exit 1
echo "ok: installed to a temporary prefix; built and ran against it with pkg-config (shared, static) and find_package"
