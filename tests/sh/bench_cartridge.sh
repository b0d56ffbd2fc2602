#!/usr/bin/env bash
# bench_cartridge.sh BUILD_DIR SOURCE_DIR - frt bench cartridge on the cpu
# with the tiny-dense shape (documents of 64 and 128 tokens, 2 samples), so
# the GPU benchmark (docs/PERF.md, "Cartridges") cannot rot: the JSON holds
# both documents with the cold, device-resident and host-resident TTFT, the
# injection and promotion next to their floors, the KV bytes of each
# (2 x 4 layers x P x 2 heads x 32 x f32), and the three paths agree on the
# first token; usage errors exit 2.
set -u
B="$1"
FRT="$B/frt"
T="$(mktemp -d /tmp/frt_bench_cart.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}
"$FRT" bench cartridge --shape tiny-dense --backend cpu --docs 64,128 --suffix 8 --repeats 2 --threads 1 \
    --json "$T/b.json" >"$T/out" 2>"$T/err" || { echo "FAIL frt bench cartridge: $(cat "$T/err")"; exit 1; }
q() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/b.json" "$1"; }
check "two documents" test "$(q 'len(d["documents"])')" = 2
check "kv bytes" test "$(q '" ".join(str(int(x["kv_bytes"])) for x in d["documents"])')" = "131072 262144"
check "every path timed" test "$(q 'all(x[k]["ttft_ms_p50"] > 0 for x in d["documents"] for k in ("cold", "device_resident", "host_resident"))')" = True
check "floors next to the injection and the promotion" test "$(q 'all(x["device_resident"]["inject"]["floor_ms"] > 0 and x["host_resident"]["promote"]["floor_ms"] > 0 for x in d["documents"])')" = True
check "the same first token on every path" test "$(q 'all(x["same_first_token"] for x in d["documents"])')" = True
check "the machine's copy rates" test "$(q 'd["floors"]["h2d_pinned_GBps"] > 0')" = True
check "a table on stdout" grep -q "pcie_floor" "$T/out"
"$FRT" bench cartridge --docs 64 >/dev/null 2>"$T/err"
check "no --shape: usage error" test $? -eq 2
"$FRT" bench cartridge --shape tiny-dense --docs 64,x >/dev/null 2>"$T/err"
check "a bad --docs: usage error" test $? -eq 2
exit $fail
