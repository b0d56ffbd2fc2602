#!/usr/bin/env bash
# reliability.sh [--minutes N] [--build DIR] [--out FILE] - a bounded load
# and fault run on loopback against `frt serve --engine fake` (issue 22),
# written as a markdown report (default: reliability-report.md).
#
# For N minutes (default 2) it sends a mix of valid completions and
# malformed requests (bad JSON, wrong types, unknown fields, bad ids in URLs,
# oversized bodies, wrong Content-Type) from 4 client loops, while holding
# slowloris connections (half a request, then nothing) and sampling the
# server's RSS from /proc every 5 s. Then it restarts the server over its
# capsule dir with tampered (one flipped byte) and truncated capsule files,
# and runs the kill -9 test (build/tests/test_reliab_kill9, FRT_RELIAB_KILLS
# rounds, default 100 here) when it is built.
# Counted: requests tried (valid / malformed), crashes (server exits), 5xx
# answers to bad input, RSS growth after warm-up, slowloris connections held,
# tampered / truncated capsules refused, kill -9 rounds survived.
# Needs curl, jq, python3. Everything listens on 127.0.0.1 only.
set -euo pipefail
MINUTES=2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build"
OUT="reliability-report.md"
while [ $# -gt 0 ]; do
    case $1 in
    --minutes) MINUTES=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h | --help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "reliability.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
FRT="$BUILD/frt"
[ -x "$FRT" ] || { echo "reliability.sh: $FRT is not built" >&2; exit 2; }
for t in curl jq python3; do command -v $t >/dev/null || { echo "reliability.sh: $t is missing" >&2; exit 2; }; done
WORK=$(mktemp -d /tmp/frt_reliab.XXXXXX)
SPID=""
cleanup() {
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true
    jobs -p | xargs -r kill 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
CAPS="$WORK/capsules"
CRASHES=0
# a long shared prefix: pinned capsules are cut at multiples of the prefill chunk
LONG=$(printf 'You are a careful assistant. %.0s' $(seq 20))

start() {
    rm -f "$WORK/port"
    "$FRT" serve --engine fake --host 127.0.0.1 --port 0 --port-file "$WORK/port" --capsule-dir "$CAPS" \
        --conn-timeout-s 5 --max-body-mb 1 --prefill-chunk 64 --quiet "$@" >>"$WORK/server.log" 2>&1 &
    SPID=$!
    for _ in $(seq 300); do [ -s "$WORK/port" ] && break; sleep 0.1; done
    [ -s "$WORK/port" ] || { echo "server did not start:"; tail "$WORK/server.log"; exit 1; }
    PORT=$(cat "$WORK/port")
}
stop() {
    kill -TERM "$SPID" 2>/dev/null || true
    local st=0
    wait "$SPID" || st=$?
    # 143 = the SIGTERM we sent; anything else is a crash
    [ "$st" = 0 ] || [ "$st" = 143 ] || CRASHES=$((CRASHES + 1))
    SPID=""
}
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$SPID/status" 2>/dev/null || echo 0; }

start
END=$(($(date +%s) + $(awk -v m="$MINUTES" "BEGIN {printf \"%d\", m * 60}")))

# ---- slowloris: 50 half-open connections from 127.0.0.2 (another client address:
# the server limits connections per address), re-opened as the server closes them
python3 - "$PORT" "$END" "$WORK/slow" <<'EOF' &
import socket, sys, time
port, end, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held, opened, most = [], 0, 0
while time.time() < end:
    while len(held) < 50:
        s = socket.socket(); s.settimeout(2); s.bind(("127.0.0.2", 0))
        try:
            s.connect(("127.0.0.1", port)); s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n")
            held.append(s); opened += 1
        except OSError:
            s.close(); break
    time.sleep(1)
    alive = []
    for s in held:
        s.setblocking(False)
        try:
            if s.recv(1) == b"": s.close(); continue
        except BlockingIOError: pass
        except OSError: s.close(); continue
        alive.append(s)
    held = alive
    most = max(most, len(held))
open(out, "w").write("%d %d\n" % (opened, most))
EOF
SLOWPID=$!

# ---- client loops: each line of $WORK/c$i.log is "kind status"
client() {
    local i=$1 k=0 big="$WORK/big.json"
    python3 -c 'import sys; sys.stdout.write("{\"prompt\":\"" + "a" * (2 << 20) + "\"}")' >"$big"
    while [ "$(date +%s)" -lt "$END" ]; do
        k=$((k + 1))
        local u="http://127.0.0.1:$PORT" j=(-H 'Content-Type: application/json') st kind
        case $((k % 12)) in
        0 | 1 | 2 | 3 | 4) kind=valid; st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "${j[@]}" \
            -d "{\"prompt\":\"client $i request $k\",\"max_tokens\":8}" "$u/v1/completions") ;;
        5) kind=valid; st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "${j[@]}" \
            -d "{\"messages\":[{\"role\":\"system\",\"content\":\"Persona $((k / 12 % 20)). $LONG\"},{\"role\":\"user\",\"content\":\"hi $k\"}],\"max_tokens\":4,\"frt_pin_prefix\":true}" "$u/v1/chat/completions") ;;
        6) kind=malformed; st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "${j[@]}" -d '{"prompt":' "$u/v1/completions") ;;
        7) kind=malformed; st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "${j[@]}" \
            -d '{"prompt":"x","max_tokens":"many","bogus":1}' "$u/v1/completions") ;;
        8) kind=malformed; st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X DELETE \
            "$u/v1/sessions/$(printf 'x%.0s' $(seq 80))") ;;
        9) kind=malformed; st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$u/v1/sessions/..%2f..%2fetc") ;;
        10) kind=malformed; st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "${j[@]}" --data-binary "@$big" "$u/v1/completions") ;;
        11) kind=malformed; st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -H 'Content-Type: text/plain' \
            -d '{"prompt":"x"}' "$u/v1/completions") ;;
        esac
        echo "$kind ${st:-000}" >>"$WORK/c$i.log"
    done
}
for i in 1 2 3 4; do client $i & done
CLIENTS=$(jobs -p | tail -4)

# ---- RSS samples every 5 s
: >"$WORK/rss"
while [ "$(date +%s)" -lt "$END" ]; do
    kill -0 "$SPID" 2>/dev/null || { CRASHES=$((CRASHES + 1)); echo "server died during the soak" >&2; break; }
    echo "$(rss_kb)" >>"$WORK/rss"
    sleep 5
done
for p in $CLIENTS $SLOWPID; do wait "$p" 2>/dev/null || true; done
HEALTH=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$PORT/health" || echo 000)
stop

cat "$WORK"/c*.log >"$WORK/all.log"
VALID=$(grep -c '^valid' "$WORK/all.log" || true)
BAD=$(grep -c '^malformed' "$WORK/all.log" || true)
VALID_OK=$(grep -c '^valid 200' "$WORK/all.log" || true)
BAD_5XX=$(grep -c '^malformed 5' "$WORK/all.log" || true)
VALID_5XX=$(grep -c '^valid 5' "$WORK/all.log" || true)
NO_ANSWER=$(grep -c ' 000$' "$WORK/all.log" || true)
read -r SLOW SLOW_MOST < <(cat "$WORK/slow" 2>/dev/null || echo 0 0)
# RSS: growth from the sample after warm-up (the 2nd) to the last
read -r RSS_WARM RSS_LAST RSS_MAX < <(awk 'NR==2 {w=$1} {l=$1; if ($1>m) m=$1} END {print w+0, l+0, m+0}' "$WORK/rss")
RSS_GROWTH=$(awk -v w="$RSS_WARM" -v l="$RSS_LAST" 'BEGIN {printf "%.1f", w ? (l - w) * 100 / w : 0}')

# ---- tampered and truncated capsules: flip a byte in / cut each file, restart
FILES=$(ls "$CAPS"/cap-*.frtc 2>/dev/null | head -20 || true)
N_TAMPER=0
N_TRUNC=0
k=0
for f in $FILES; do
    k=$((k + 1))
    sz=$(stat -c %s "$f")
    if [ $((k % 2)) = 0 ]; then
        python3 - "$f" "$k" <<'EOF'
import sys
p, k = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read()); i = (k * 7919) % len(b); b[i] ^= 0x5A; open(p, "wb").write(bytes(b))
EOF
        N_TAMPER=$((N_TAMPER + 1))
    else
        truncate -s $((sz / 2)) "$f"
        N_TRUNC=$((N_TRUNC + 1))
    fi
done
start
# every capsule the index lists is offered; restoring each must fail cleanly (4xx/409 or a rebuild), never 5xx or a crash
IDS=$(curl -s "http://127.0.0.1:$PORT/v1/capsules" | jq -r '.data[].id')
RESTORE_5XX=0
for id in $IDS; do
    st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X POST "http://127.0.0.1:$PORT/v1/capsules/$id/pin" || echo 000)
    case $st in 5*) RESTORE_5XX=$((RESTORE_5XX + 1)) ;; esac
done
# drive restores: a completion with the same pinned chat prefix plans a restore from these capsules
AFTER_5XX=0
for i in $(seq 0 19); do
    st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -H 'Content-Type: application/json' \
        -d "{\"messages\":[{\"role\":\"system\",\"content\":\"Persona $i. $LONG\"},{\"role\":\"user\",\"content\":\"again $i\"}],\"max_tokens\":4}" \
        "http://127.0.0.1:$PORT/v1/chat/completions" || echo 000)
    case $st in 5* | 000) AFTER_5XX=$((AFTER_5XX + 1)) ;; esac
done
METRICS=$(curl -s "http://127.0.0.1:$PORT/metrics")
LOAD_FAIL=$(awk '/^frt_capsule_load_failures_total/ {print $2}' <<<"$METRICS")
RESTORE_FAIL=$(awk '/^frt_capsule_restore_failures_total/ {print $2}' <<<"$METRICS")
QUAR=$(ls "$CAPS" | grep -c quarantined || true)
HEALTH2=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$PORT/health" || echo 000)
stop

# ---- kill -9
KILL9="not run ($BUILD/tests/test_reliab_kill9 is not built)"
if [ -x "$BUILD/tests/test_reliab_kill9" ]; then
    KILL9=$(FRT_RELIAB_KILLS=${FRT_RELIAB_KILLS:-100} "$BUILD/tests/test_reliab_kill9" 2>&1 | grep 'runs survived' || echo "the kill -9 test failed")
fi

cat >"$OUT" <<EOF
# frt reliability run

- command: \`scripts/reliability.sh --minutes $MINUTES\` ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown))
- server: \`frt serve --engine fake --capsule-dir DIR --conn-timeout-s 5 --max-body-mb 1 --prefill-chunk 64\` on 127.0.0.1

| measure | value |
|---|---|
| requests tried: valid / malformed | $VALID / $BAD |
| valid answered 200 | $VALID_OK |
| valid answered 5xx | $VALID_5XX |
| 5xx from bad input | $BAD_5XX |
| requests with no HTTP answer (curl 000) | $NO_ANSWER |
| server crashes (exit other than by SIGTERM) | $CRASHES |
| /health after the soak, after the capsule restart | $HEALTH, $HEALTH2 |
| RSS after warm-up / at the end / max (kB) | $RSS_WARM / $RSS_LAST / $RSS_MAX |
| RSS growth after warm-up | $RSS_GROWTH % |
| slowloris connections opened / most the server kept open at once (50 tried; the per-address limit and --conn-timeout-s close the rest) | $SLOW / $SLOW_MOST |
| capsule files flipped / truncated before the restart | $N_TAMPER / $N_TRUNC |
| frt_capsule_load_failures_total / restore failures after the restart | ${LOAD_FAIL:-?} / ${RESTORE_FAIL:-?} |
| files quarantined | $QUAR |
| 5xx (or no answer) on pinning the damaged capsules / on the 20 completions whose prefixes they hold | $RESTORE_5XX / $AFTER_5XX |
| kill -9 (test_reliab_kill9) | $KILL9 |
EOF
cat "$OUT"
