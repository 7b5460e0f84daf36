#!/usr/bin/env bash
# Leaks in podshaper-webhook under load, by valgrind's memcheck (docs/RELIABILITY.md):
# `serve` under valgrind, driven by podshaper-loadgen at a fixed rate with the realistic
# pod, plus denials, bad requests and health/metrics scrapes, then SIGTERM. Prints
# memcheck's leak summary; exits 1 when any block is definitely or indirectly lost, or
# memcheck reported any other error (invalid reads or writes, mismatched frees, ...).
# Not part of `make test` (valgrind runs the server 20-50 times slower); `make
# test-sanitize` runs LeakSanitizer on every test. Needs a webhook built without
# tcmalloc (it says how).
#
#   scripts/reliability/webhook-valgrind.sh [--seconds S] [--rate R]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=60 rate=20
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    *) echo "usage: $0 [--seconds S] [--rate R]" >&2; exit 2 ;;
  esac
done
bin=${PODSHAPER_BIN:-$root/build/bin}
command -v valgrind >/dev/null || { echo "webhook-valgrind: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
loadgen=$root/build/bin/podshaper-loadgen
[[ -x $loadgen ]] || bash "$root/scripts/bench-build.sh" >/dev/null
tmp=$(mktemp -d)
pid=""
cleanup() { [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/tls.key" -out "$tmp/tls.crt" 2>/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url=https://127.0.0.1:$port
# memcheck needs glibc's malloc: tcmalloc's own operator delete and its start-up
# registrations show up as mismatched frees and an 8-byte "leak" that are not ours.
if ldd "$bin/podshaper-webhook" | grep -q tcmalloc; then
  echo "webhook-valgrind: $bin/podshaper-webhook is linked with tcmalloc; build one without:" >&2
  echo "  cmake -S . -B build/valgrind -DPODSHAPER_TCMALLOC=OFF && cmake --build build/valgrind --target podshaper-webhook" >&2
  echo "  PODSHAPER_BIN=build/valgrind/bin $0" >&2
  exit 2
fi
valgrind --tool=memcheck --leak-check=full --show-leak-kinds=all --errors-for-leak-kinds=definite,indirect \
  --num-callers=30 --log-file="$tmp/memcheck.log" \
  "$bin/podshaper-webhook" serve --listen "127.0.0.1:$port" --tls-cert "$tmp/tls.crt" --tls-key "$tmp/tls.key" \
  2>"$tmp/webhook.log" &
pid=$!
for _ in $(seq 300); do curl -sf --cacert "$tmp/tls.crt" "$url/healthz" >/dev/null && break; sleep 0.2; done
curl -sf --cacert "$tmp/tls.crt" "$url/healthz" >/dev/null || { echo "webhook did not start under valgrind" >&2; cat "$tmp/webhook.log" >&2; exit 1; }
echo "webhook-valgrind: $rate req/s for ${seconds}s under memcheck" >&2
"$loadgen" --url "$url/mutate-v1-pod" --ca "$tmp/tls.crt" --json --body "$root/bench/inputs/realistic-pod.json" \
  --mode fixed --rate "$rate" --duration "$seconds" --warmup 2 >"$tmp/load.json" &
gen=$!
# The other paths, meanwhile: a denial (bad annotation), a body that is not JSON, an
# unknown path, the health and metrics endpoints.
deny=$(python3 - "$root/bench/inputs/realistic-pod.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["request"]["object"]["metadata"].setdefault("annotations", {})["podshaper.io/dataloader-workers"] = "-3"
print(json.dumps(r))
PY
)
extra=0
while kill -0 $gen 2>/dev/null; do
  curl -s --cacert "$tmp/tls.crt" -H 'Content-Type: application/json' -d "$deny" "$url/mutate-v1-pod" >/dev/null || true
  curl -s --cacert "$tmp/tls.crt" -H 'Content-Type: application/json' -d '{"not": "a review"' "$url/mutate-v1-pod" >/dev/null || true
  curl -s --cacert "$tmp/tls.crt" "$url/nope" "$url/metrics" "$url/readyz" >/dev/null || true
  extra=$((extra + 5))
  sleep 0.5
done
wait $gen || true
kill -TERM "$pid"
wait "$pid" || true
pid=""
python3 - "$tmp/load.json" "$extra" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"load: {r.get('requests')} reviews, {r.get('errors')} errors, p99 {r.get('latency_ms', {}).get('p99')} ms under memcheck; "
      f"{sys.argv[2]} other requests")
PY
grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|still reachable|Invalid (read|write)" "$tmp/memcheck.log" | sed 's/^==[0-9]*== //'
cp "$tmp/memcheck.log" "${MEMCHECK_LOG:-/dev/null}" 2>/dev/null || true
definite=$(grep -oP 'definitely lost: \K[0-9,]+' "$tmp/memcheck.log" | tr -d , || echo 0)
indirect=$(grep -oP 'indirectly lost: \K[0-9,]+' "$tmp/memcheck.log" | tr -d , || echo 0)
invalid=$(grep -oP 'ERROR SUMMARY: \K[0-9,]+' "$tmp/memcheck.log" | tr -d , || echo 0)
if [[ ${definite:-0} -ne 0 || ${indirect:-0} -ne 0 || ${invalid:-0} -ne 0 ]]; then
  echo "webhook-valgrind: FAIL (see the memcheck log: MEMCHECK_LOG=FILE keeps it)" >&2
  exit 1
fi
echo "webhook-valgrind: no leaks, no memory errors"
